"""The link authority's Prometheus metrics (docs/operations.md): what it journaled and dropped, each table's
liveness and anchors, its meters, its commits."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from controller.service.anchoring import AnchorMetrics
from controller.service.auth import AuthMetrics

_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Why a table's message was dropped: each reason's counter is there from the start, at 0.
DROPPED = ("unknown_table", "bad_schema", "wrong_table", "stale", "ahead", "queue_full", "bad_topic",
           "anchor_too_often", "old_version", "floor_too_often")


class AuthorityMetrics:
    """Every metric of the link authority, in one registry (its own unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.registry = r
        self.applied = Counter("progressive_link_operations_total", "Table operations journaled, by outcome",
                               ["table", "outcome"], registry=r)
        self.dropped = Counter("progressive_link_messages_dropped_total", "Messages dropped, by reason",
                               ["reason"], registry=r)
        self.meter_cents = Gauge("progressive_meter_amount_cents", "Amount of the linked meter, in cents",
                                 ["meter"], registry=r)
        self.commit_latency = Histogram("progressive_ledger_commit_seconds",
                                        "From submitting an operation to its durable receipt",
                                        buckets=_SECONDS, registry=r)
        self.active = Gauge("progressive_authority_active",
                            "1 while this authority holds the journal and applies the tables' operations; 0 while it "
                            "starts or waits as a standby for a journal another authority holds", registry=r)
        self.connected = Gauge("progressive_link_broker_connected", "1 while connected to the broker",
                               registry=r)
        self.hits = Counter("progressive_link_hits_total", "Percentage-of-meter awards locked, by table", ["table"],
                            registry=r)
        self.anomalies = Counter("progressive_link_anomalies_total",
                                 "What a table asked that an honest table does not: a payment without a verified "
                                 "approval, an award on a round it did not book, hits far beyond the odds",
                                 ["table", "anomaly"], registry=r)
        self.table_online = Gauge("progressive_link_table_online",
                                  "1 while the table is connected to the broker as the authority last heard (its hello "
                                  "or operations: 1; its goodbye or its MQTT will: 0; not heard since the start: 0)",
                                  ["table"], registry=r)
        self.table_heard = Gauge("progressive_link_table_last_heard_timestamp_seconds",
                                 "When the authority last heard a message of the table", ["table"], registry=r)
        self.table_ack = Gauge("progressive_link_table_last_ack_timestamp_seconds",
                               "When the authority last journaled and answered an operation of the table", ["table"],
                               registry=r)
        self.table_ack_seq = Gauge("progressive_link_table_last_ack_seq",
                                   "The number of the table's last operation the authority journaled and answered",
                                   ["table"], registry=r)
        self.anchors = AnchorMetrics(r)
        self.anchor_suspect = Gauge("progressive_link_table_anchor_suspect",
                                    "1 while an anchor of the table's journal further ahead than it could have grown "
                                    "is kept aside as planted, until a supervisor clears it", ["table"], registry=r)
        self.auth = AuthMetrics(r)  # the console's logins, checked as at a table
        ProcessCollector(registry=r)  # process_start_time_seconds: a restart shows as its change
        for reason in DROPPED:
            self.dropped.labels(reason)


__all__ = ["DROPPED", "AuthorityMetrics"]

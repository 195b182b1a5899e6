"""Prometheus metrics of one controller, in a registry of its own (tests make as many as they like).

Names follow Prometheus' conventions: a ``progressive_`` prefix, base units in the name, ``_total`` on
counters. Money is in cents: as integers below 2**53, cents are exact in a float64 sample, dollars with
two decimals are not. The journal, not these numbers, is the record; the metrics are for watching.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

from controller import __version__
from controller.odds import percent_of_meter_chance
from controller.paytables.model import Paytable
from controller.service.anchoring import AnchorMetrics
from controller.service.auth import AuthMetrics

log = structlog.get_logger("table")

# Latencies from a sub-millisecond COMMIT to a slow lock-out over a congested bus.
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
ROUND_PHASES = ("betting", "locking", "dealing", "void")


class Metrics:
    def __init__(self, table: str, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.registry = r
        self.table = table
        self.info = Gauge("progressive_controller_info", "The controller's table and software version",
                          ["table", "version"], registry=r)
        self.info.labels(table, __version__).set(1)  # the alerting rules take the table's id from it
        # process_start_time_seconds: a restart (systemd's watchdog, a storage stop, exit 70) shows as its change
        ProcessCollector(registry=r)
        self.meter_cents = Gauge("progressive_meter_amount_cents", "Amount shown on the meter, in cents",
                                 ["meter"], registry=r)
        self.wagers = Counter("progressive_wagers_accepted_total", "Progressive wagers acknowledged",
                              ["spot"], registry=r)
        self.wagers_cents = Counter("progressive_wagers_cents_total", "Cents wagered on acknowledged wagers",
                                    ["spot"], registry=r)
        self.not_recognized = Counter("progressive_wagers_not_recognized_total",
                                      "Wagers sensed but not recognized (after lock-out, blocked, bad amount)",
                                      ["reason"], registry=r)
        self.contributions = Counter("progressive_contributions_cents_total",
                                     "Cents contributed to the meter by locked rounds", ["meter"], registry=r)
        self.hits = Counter("progressive_hits_total", "Jackpot hits paid", ["meter", "award"], registry=r)
        self.payouts = Counter("progressive_payouts_cents_total", "Cents paid on hits",
                               ["meter", "award", "paid_by"], registry=r)
        self.rounds = Counter("progressive_rounds_total", "Rounds ended, by how they ended", ["outcome"],
                              registry=r)
        self.round_phase = Gauge("progressive_round_phase", "1 for the phase the current round is in",
                                 ["phase"], registry=r)
        self.link_rejected = Counter("progressive_link_messages_rejected_total",
                                     "Messages on the link this table did not act on, by why: not signed by the link "
                                     "authority, not the answer to what it sent, played back, a meter under its reset",
                                     ["reason"], registry=r)
        self.blocked = Gauge("progressive_wagering_blocked", "1 while progressive wagering is disabled, by cause",
                             ["block"], registry=r)
        self.seat_disabled = Gauge("progressive_seat_disabled",
                                   "1 while wagering at the seat is disabled: a wagering device of the seat does "
                                   "not answer", ["seat"], registry=r)
        self.lockout_latency = Histogram("progressive_lockout_latency_seconds",
                                         "From the lock-out press to the round's booking on disk",
                                         buckets=_SECONDS, registry=r)
        self.lockout_window = Histogram(
            "progressive_lockout_window_seconds",
            "From the lock-out read before the press to the wagers frozen: the longest a press waited to take effect",
            buckets=_SECONDS, registry=r)
        self.device_up = Gauge("progressive_device_up", "1 while the device answers", ["device", "kind"],
                               registry=r)
        # The wire each device is on and the device each seat is served by: the alert rules join on them, so that
        # one pulled cable is one alert (a bus down) and the devices and seats it takes with it are inhibited.
        self.device_bus = Gauge("progressive_device_bus_info", "1 for each device and the bus (wire) it is on",
                                ["device", "bus"], registry=r)
        self.device_info = Gauge("progressive_device_info", "1 for each device and its model", ["device", "model"],
                                 registry=r)
        # What a device with read_back = false shows cannot be proved (docs/configuration.md): 0 for it.
        self.device_read_back = Gauge("progressive_device_read_back",
                                      "1 while the device's outputs are read back and verified, 0 if never",
                                      ["device"], registry=r)
        self.device_writes = Gauge("progressive_device_writes_info", "1 for how the device's outputs are written: "
                                   "multiple, single, or single (detected)", ["device", "mode"], registry=r)
        self.seat_device = Gauge("progressive_seat_device_info", "1 for each seat and the wagering device serving it",
                                 ["seat", "device"], registry=r)
        self.bus_up = Gauge("progressive_bus_up", "1 while at least one device on the bus answers",
                            ["bus"], registry=r)
        self.device_errors = Counter("progressive_device_errors_total", "Device faults by kind",
                                     ["device", "error"], registry=r)
        self.device_poll = Histogram("progressive_device_poll_seconds", "Duration of one poll of a device",
                                     ["device"], buckets=_SECONDS, registry=r)
        self.commit_latency = Histogram("progressive_ledger_commit_seconds",
                                        "From submitting an operation to its durable receipt",
                                        buckets=_SECONDS, registry=r)
        self.wal_checkpoint = Histogram("progressive_ledger_wal_checkpoint_seconds",
                                        "Folding the journal's WAL into its file, after each round's booking",
                                        buckets=_SECONDS, registry=r)
        self.anchors = AnchorMetrics(r)
        self.claims = Counter("progressive_claims_total", "Jackpot claims decided, by how they ended",
                              ["outcome"], registry=r)
        self.claims_pending = Gauge("progressive_claims_pending", "Claims awaiting a supervisor's approval",
                                    registry=r)
        self.auth = AuthMetrics(r)  # the supervisor checks' (controller.service.auth)
        self.internal_errors = Counter("progressive_internal_errors_total",
                                       "Unexpected failures of the daemon's own tasks (each logged with its "
                                       "traceback)", ["task"], registry=r)
        self.chances: PercentAwardChances | None = None  # a card table's (percent_award_chances)

    def percent_award_chances(self, spots: Mapping[str, tuple[str, str, Paytable]]) -> None:
        """Export each spot's chance of a percentage-of-meter award (spot -> game, wager, paytable); once."""
        if self.chances is None:
            self.chances = PercentAwardChances(spots)
            self.registry.register(self.chances)

    def set_phase(self, phase: str) -> None:
        for p in ROUND_PHASES:
            self.round_phase.labels(p).set(1 if p == phase else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
        """Serve /metrics on host:port in a thread of its own; returns (server, thread)."""
        return start_http_server(port, addr=host, registry=self.registry)


class PercentAwardChances(Collector):
    """`progressive_percent_award_probability{spot}`: the chance that one wager on the spot wins an award that is a
    percentage of a meter, from its paytable's exact hand counts. The alerting rules compare a table's hits with the
    wagers times it (ProgressiveHitsBeyondOdds), so that a game whose percentage awards are frequent (Four Card
    Poker's four of a kind, 2.4 in 10,000) is held to its own odds. Counted at the first scrape, in the scrape's
    thread (about a second, never on the daemon's loop), then kept."""

    NAME = "progressive_percent_award_probability"
    HELP = "Chance that one wager on the spot wins a percentage-of-meter award (exact, from the paytable)"

    def __init__(self, spots: Mapping[str, tuple[str, str, Paytable]]) -> None:
        self._spots = dict(spots)
        self._lock = threading.Lock()  # two scrapes at once count once
        self._chances: dict[str, float] | None = None

    def describe(self) -> Iterator[Metric]:  # registered without counting anything
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=["spot"])

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._chances is None:
                try:
                    self._chances = {spot: float(percent_of_meter_chance(*of)) for spot, of in self._spots.items()}
                except Exception as e:  # a metric missing is not a daemon stopping: the alert cannot fire, said here
                    log.exception("percentage award chances not counted", error=f"{type(e).__name__}: {e}")
                    self._chances = {}
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["spot"])
        for spot, chance in sorted(self._chances.items()):
            family.add_metric([spot], chance)
        yield family


__all__ = ["ROUND_PHASES", "Metrics", "PercentAwardChances"]

"""The link authority's metrics (controller/authority/metrics.py): one registry of its own each, every reason of a
drop there from the start at 0 (an alert on its rate needs the series before the first drop)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controller.authority.metrics import DROPPED, AuthorityMetrics


def test_every_reason_of_a_drop_is_at_zero_from_the_start():
    metrics = AuthorityMetrics()
    for reason in DROPPED:
        assert metrics.registry.get_sample_value("progressive_link_messages_dropped_total", {"reason": reason}) == 0


def test_two_authorities_in_one_process_have_their_own_registries():
    one, two = AuthorityMetrics(), AuthorityMetrics(CollectorRegistry())
    one.dropped.labels("stale").inc()
    assert two.registry.get_sample_value("progressive_link_messages_dropped_total", {"reason": "stale"}) == 0
    assert two.registry.get_sample_value("process_start_time_seconds") is not None

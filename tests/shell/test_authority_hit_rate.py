"""Hits far beyond the odds (controller/authority/hit_rate.py): more than HIT_LIMIT percentage-of-meter locks of a
table within its last HIT_WINDOW wagers is an alert, per table; the locks of a table that wagers enough are not."""

from __future__ import annotations

from structlog.testing import capture_logs

from controller.authority.hit_rate import HIT_LIMIT, HIT_WINDOW, HitRate
from controller.authority.limited_log import log
from controller.linkproto import schema

from authority_journal import booking, lock, op, parts, sample
from linkrig import METER


def test_locks_beyond_the_odds_within_a_tables_window_are_an_alert_of_that_table():
    metrics, _ = parts()
    rate = HitRate()
    with capture_logs() as logged:
        rate.saw(op("cs-01", 1, booking("cs-01", 1)), metrics, log)
        for n in range(HIT_LIMIT):
            rate.saw(op("cs-01", 2 + n, lock("cs-01", 1)), metrics, log)
            rate.saw(op("fcp-02", 1 + n, lock("fcp-02", 1)), metrics, log)
        assert logged == []
        rate.saw(op("cs-01", 9, lock("cs-01", 1)), metrics, log)
    [alert] = logged
    assert (alert["event"], alert["table"], alert["locks"]) == ("hits far beyond the odds", "cs-01", HIT_LIMIT + 1)
    assert sample(metrics, "progressive_link_hits_total", table="cs-01") == HIT_LIMIT + 1
    assert sample(metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="hits beyond the odds") == 1
    assert sample(metrics, "progressive_link_anomalies_total", table="fcp-02", anomaly="hits beyond the odds") == 0


def test_locks_a_window_of_wagers_apart_are_no_alert():
    metrics, _ = parts()
    rate = HitRate()
    apart = HIT_WINDOW // HIT_LIMIT + 1  # wagers between two locks: HIT_LIMIT + 1 locks span more than the window
    for n in range(HIT_LIMIT + 3):
        rate.saw(schema.Op("cs-01", 2 * n + 1, "book-contributions", METER, {"wagers": [[1, 100]] * apart}), metrics,
                 log)
        rate.saw(op("cs-01", 2 * n + 2, lock("cs-01", n + 1)), metrics, log)
    assert sample(metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="hits beyond the odds") == 0
    assert sample(metrics, "progressive_link_hits_total", table="cs-01") == HIT_LIMIT + 3

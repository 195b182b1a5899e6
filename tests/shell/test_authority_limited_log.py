"""The authority's log of what tables do wrong (controller/authority/limited_log.py): each kind and table told at
most once per LOG_EVERY_S, with how many were not told since; a table's own text cut; every drop counted."""

from __future__ import annotations

from structlog.testing import capture_logs

from controller.authority.limited_log import LOG_EVERY_S, LOG_TEXT, LimitedLog
from controller.service.logs import LogBudget

from authority_journal import parts, sample


def limited(now: list[float]) -> tuple[LimitedLog, object]:
    metrics, _ = parts()
    return LimitedLog(metrics.dropped, budget=LogBudget(1, LOG_EVERY_S, clock=lambda: now[0])), metrics


def test_a_kind_of_drop_of_one_table_is_told_once_an_interval_and_every_one_counted():
    now = [0.0]
    notes, metrics = limited(now)
    with capture_logs() as logged:
        for _ in range(5):
            notes.drop("bad_schema", table="cs-01", error="x")
        notes.drop("bad_schema", table="fcp-02", error="y")  # another table: its own line
        now[0] = LOG_EVERY_S
        notes.drop("bad_schema", table="cs-01", error="z")
    assert sample(metrics, "progressive_link_messages_dropped_total", reason="bad_schema") == 7
    assert [(e["table"], e["error"], e.get("not_logged_before")) for e in logged] == \
        [("cs-01", "x", None), ("fcp-02", "y", None), ("cs-01", "z", 4)]
    assert {(e["event"], e["log_level"], e["reason"]) for e in logged} == \
        {("link message dropped", "warning", "bad_schema")}


def test_a_tables_own_text_is_cut_and_other_fields_kept():
    notes, _ = limited([0.0])
    with capture_logs() as logged:
        notes.say("refused:cs-01", "table operation refused", error="é" * (LOG_TEXT * 5), seq=10**6)
    [line] = logged
    assert line["error"] == "é" * LOG_TEXT + "..." and line["seq"] == 10**6 and line["log_level"] == "error"


def test_an_exception_is_told_with_its_traceback_once_an_interval():
    notes, _ = limited([0.0])
    with capture_logs() as logged:
        for _ in range(3):
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                notes.exception("not-applied:cs-01", "table message not applied", table="cs-01")
    [line] = logged
    assert line["log_level"] == "error" and line["exc_info"] is True and line["table"] == "cs-01"

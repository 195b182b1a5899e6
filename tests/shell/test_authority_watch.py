"""Each linked table as the authority last heard it (controller/authority/watch.py): online at its own messages,
OFFLINE at its goodbye or its will, its last operation answered, and at most one floor line a table per
FLOOR_MIN_S, on clocks the test moves."""

from __future__ import annotations

from controller.authority.watch import FLOOR_MIN_S, TableWatch
from controller.linkproto import schema
from controller.linkproto.liveness import NOT_HEARD

from authority_journal import TABLES, parts, sample


def watch(now: list[float]) -> tuple[TableWatch, object]:
    metrics, notes = parts()
    return TableWatch(TABLES, metrics, notes, clock=lambda: 1_000 + now[0], tick=lambda: now[0]), metrics


def floor_line(table: str, at: str = "") -> schema.FloorLine:
    return schema.FloorLine(table, at or "2026-11-30T01:02:03Z", f"{table}-r1", "betting")


def test_a_table_is_offline_until_heard_and_after_its_goodbye():
    now = [0.0]
    w, metrics = watch(now)
    assert not w.liveness.tables["cs-01"].online and w.liveness.tables["cs-01"].why == NOT_HEARD
    assert sample(metrics, "progressive_link_table_online", table="cs-01") == 0
    now[0] = 5
    w.heard("cs-01", schema.Hello("cs-01", 1, "00" * 16))
    state = w.liveness.tables["cs-01"]
    assert state.online and state.heard == "hello" and state.heard_at == 1_005
    assert sample(metrics, "progressive_link_table_online", table="cs-01") == 1
    assert sample(metrics, "progressive_link_table_last_heard_timestamp_seconds", table="cs-01") == 1_005
    w.heard("cs-01", schema.TableOffline("cs-01", "lost"))
    assert not w.liveness.tables["cs-01"].online
    assert sample(metrics, "progressive_link_table_online", table="cs-01") == 0
    assert not w.liveness.tables["fcp-02"].online  # one table says nothing of another


def test_the_last_answer_is_the_journals_at_start_then_each_one_given():
    now = [0.0]
    w, metrics = watch(now)
    w.resumed({"cs-01": 8, "gone-07": 3})  # a table no longer configured is not shown
    assert w.liveness.tables["cs-01"].ack_seq == 7 and w.liveness.tables["cs-01"].ack_at is None
    assert "gone-07" not in w.liveness.tables
    now[0] = 2
    w.answered("cs-01", 8, "refused")
    state = w.liveness.tables["cs-01"]
    assert (state.ack_seq, state.ack_outcome, state.ack_at) == (8, "refused", 1_002)
    assert sample(metrics, "progressive_link_table_last_ack_seq", table="cs-01") == 8


def test_one_floor_line_a_table_is_taken_per_interval_the_rest_dropped():
    now = [0.0]
    w, metrics = watch(now)
    w.floor_line(floor_line("cs-01", "first"))
    now[0] = FLOOR_MIN_S / 2
    w.floor_line(floor_line("cs-01", "too soon"))
    w.floor_line(floor_line("fcp-02", "its own"))  # each table its own interval
    assert w.floor["cs-01"] == (floor_line("cs-01", "first"), 1_000) and w.floor["fcp-02"][0].at == "its own"
    assert sample(metrics, "progressive_link_messages_dropped_total", reason="floor_too_often") == 1
    now[0] = FLOOR_MIN_S
    w.floor_line(floor_line("cs-01", "next"))
    assert w.floor["cs-01"] == (floor_line("cs-01", "next"), 1_000 + FLOOR_MIN_S)

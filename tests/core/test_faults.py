"""Device faults and wagering blocks in the journal (controller/round/faults.py): only transitions, a flapping device bounded
to one down and one up entry a hold, a clean stop and a restart ending what is open; the reducer refusing a
malformed entry; and the day's figures the report makes of them (counts, down time clipped to the day, a fault open at
the opening or the close, blocked time by cause and in all) in every form."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime, time, timedelta

import pytest

from controller.errors import InputError, InvariantViolation
from controller.report import day_report, gaming_day
from controller.report.render import render, to_json
from controller.round.faults import DEVICE_FAULT, FAULT_WATCH, WAGERING_BLOCK, FaultWatch
from controller.round.journal import JournalReducer

from reportday import Journal

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOLD = timedelta(seconds=60)
S = timedelta(seconds=1)


def at(entry) -> datetime:
    return datetime.fromisoformat(entry[1]["at"])


def test_a_flapping_device_makes_one_down_and_one_up_entry_a_hold():
    w = FaultWatch(HOLD)
    out = []
    t = T0
    for _ in range(500):  # down and back every second for 500 s: never back for a whole minute
        out += w.device("seat-3", False, t, kind="seat", seats=[3], reason="no reply")
        out += w.device("seat-3", True, t + S / 2, kind="seat", seats=[3])
        out += w.due(t + S / 2)
        t += S
    assert [(k, b["event"]) for k, b in out] == [(DEVICE_FAULT, "down")]
    assert w.next_due() == t - S / 2 + HOLD
    assert w.due(t - S / 2 + HOLD - timedelta(microseconds=1)) == []
    (up,) = w.due(t - S / 2 + HOLD)
    assert up[1] == {"event": "up", "device": "seat-3", "device_kind": "seat", "seats": [3], "reason": "no reply",
                     "flaps": 499, "at": (t - S / 2).isoformat(timespec="microseconds")}
    # a drop every 61 s: each is a fault of its own, journaled whole: two entries a hold at most
    entries = []
    for _ in range(10):
        t += HOLD + S
        entries += w.device("seat-3", False, t, kind="seat", seats=[3], reason="no reply")
        entries += w.device("seat-3", True, t + S / 2, kind="seat", seats=[3]) + w.due(t + S / 2 + HOLD)
    assert [b["event"] for _, b in entries] == ["down", "up"] * 10
    assert all(b["flaps"] == 0 for _, b in entries)


def test_only_transitions_a_first_contact_is_none_and_a_repeated_down_is_one():
    w = FaultWatch(HOLD)
    assert w.device("lockout", True, T0, kind="lockout") == []  # first contact: nothing was open
    assert len(w.device("lockout", False, T0, kind="lockout", reason="timeout")) == 1
    assert w.device("lockout", False, T0 + S, kind="lockout", reason="timeout") == []
    assert FaultWatch(timedelta(0)).device("x", True, T0, kind="seat") == []


def test_blocks_by_cause_sources_gathered_and_a_clean_stop():
    w = FaultWatch(HOLD)
    assert [(b["event"], b["block"], b["sources"]) for _, b in w.blocks({"device": {"shoe"}, "deck": set()}, T0)] == \
        [("blocked", "device", ["shoe"])]
    assert w.blocks({"device": {"shoe", "lockout"}}, T0 + S) == []  # one more source: the same block
    assert w.blocks({"device": set(), "closed": {"floor-1"}}, T0 + 2 * S) == [
        (WAGERING_BLOCK, {"event": "blocked", "block": "closed", "sources": ["floor-1"], "flaps": 0,
                          "at": (T0 + 2 * S).isoformat(timespec="microseconds")})]
    stop = w.stop(T0 + 10 * S)  # the held end with its own moment, then whatever is open ends at the stop
    assert [(k, b["event"], b.get("block"), b.get("sources"), at((k, b))) for k, b in stop] == [
        (WAGERING_BLOCK, "unblocked", "device", ["lockout", "shoe"], T0 + S * 2),
        (FAULT_WATCH, "stop", None, None, T0 + 10 * S)]


@pytest.mark.parametrize("kind, body, field", [
    (DEVICE_FAULT, {"event": "down", "device": "x", "device_kind": "seat", "seats": [1], "reason": "", "flaps": 0}, "body"),
    (DEVICE_FAULT, {"event": "gone", "device": "x", "device_kind": "seat", "seats": [1], "reason": "", "flaps": 0,
                    "at": T0.isoformat()}, "event"),
    (DEVICE_FAULT, {"event": "up", "device": "x", "device_kind": "seat", "seats": [1], "reason": "", "flaps": -1,
                    "at": T0.isoformat()}, "flaps"),
    (WAGERING_BLOCK, {"event": "blocked", "block": "deck", "sources": "shoe", "flaps": 0, "at": T0.isoformat()},
     "sources"),
    (FAULT_WATCH, {"event": "start", "at": "yesterday"}, "at"),
])
def test_the_reducer_refuses_a_malformed_entry(kind, body, field):
    r = JournalReducer()
    with pytest.raises(InputError) as e:
        r.apply(r.initial(), kind, body)
    assert e.value.field == field


DAY = gaming_day(date(2026, 11, 30), time(6, 0), UTC, "UTC")  # 06:00 to 06:00 UTC


def journal_of(watch_steps) -> Journal:
    """The entries a FaultWatch gives for `watch_steps` ((time, step or "restart")), journaled at their times."""
    j = Journal()
    w = FaultWatch(HOLD)
    for t, step in watch_steps:
        if step == "restart":  # a new process: nothing of the last one's watch, its start ends what is open
            w = FaultWatch(HOLD)
            step = FaultWatch.start
        for kind, body in step(w, t):
            assert j.add(kind, body, t), (kind, body)
    return j


def down(name, seats=(), reason="no reply"):
    return lambda w, t: w.device(name, False, t, kind="seat" if seats else "lockout", seats=seats, reason=reason)


def up(name):
    return lambda w, t: w.device(name, True, t, kind="?")


def due(w, t):
    return w.due(t)


def blocks(**b):
    return lambda w, t: w.blocks(b, t)


def a_day_of_faults() -> Journal:
    start, end, h = DAY.start, DAY.end, timedelta(hours=1)
    return journal_of([
        (start - 2 * h, FaultWatch.start),
        (start - h, down("seat-2", [2])),  # open across the day's start
        (start - h, down("lockout")),
        (start - h, blocks(device={"lockout"})),
        (start - h + S, up("seat-2")),  # back, then down again within the hold: one fault, one flap
        (start - h + 2 * S, down("seat-2", [2])),
        (start + h, up("seat-2")),
        (start + h + HOLD, due),  # seat-2's end: journaled a minute after it came back, with its own moment
        (start + 2 * h, up("lockout")),
        (start + 2 * h, blocks(device=set())),
        (start + 2 * h + HOLD, due),
        (start + 3 * h, blocks(closed={"floor-1"})),
        (start + 3 * h + 30 * S, down("seat-5", [5])),  # a crash: the restart ends what is open
        (start + 4 * h, "restart"),
        (start + 6 * h, down("seat-2", [2])),  # 18 h before the close and still down then
        (start + 6 * h, blocks(device={"shoe"}, closed={"floor-2"})),
        (end + h, up("seat-2")),  # the next day
    ])


def test_the_days_faults_and_blocked_time():
    j = a_day_of_faults()
    r = day_report(j.records, DAY)
    h = timedelta(hours=1)
    f = r.faults
    assert [d.device for d in f.devices] == ["lockout", "seat-2", "seat-5"]
    lockout, seat2, seat5 = f.devices
    assert (len(lockout.faults), lockout.down, lockout.first, lockout.last) == (1, 2 * h, DAY.start, DAY.start + 2 * h)
    assert (len(seat2.faults), seat2.flaps, seat2.seats, seat2.open_at_close) == (2, 1, (2,), True)
    assert seat2.down == h + 18 * h  # 1 h of the first (clipped at the opening), the second to the close
    assert (seat2.first, seat2.last) == (DAY.start, DAY.end)
    assert [o.ended_by for o in seat2.faults] == ["up", ""] and seat2.faults[0].end == DAY.start + h
    assert (seat5.down, seat5.faults[0].ended_by) == (h - 30 * S, "start")  # to the restart
    by = {b.block: b for b in f.blocks}
    assert (by["device"].time, len(by["device"].blocks)) == (2 * h + 18 * h, 2)
    assert (by["closed"].time, len(by["closed"].blocks)) == (h + 18 * h, 2)  # ended by the restart, raised again
    assert f.blocked == 2 * h + h + 18 * h  # device and closed at once counted once

    doc = to_json(r)
    assert doc["blocked"]["seconds"] == str(21 * 3600) + ".000000"
    (s2,) = [d for d in doc["device_faults"] if d["device"] == "seat-2"]
    assert (s2["count"], s2["down_seconds"], s2["open_at_close"], s2["faults"][1]["to"]) == (2, "68400.000000", True,
                                                                                            None)
    assert "note" not in json.dumps(doc) and "not in the journal" not in render(r, "text")
    rows = {(x[3], x[4]): x[5] for x in csv.reader(io.StringIO(render(r, "csv")))}  # day,source,source_id,meter,...
    assert rows["", "device seat-2: down seconds"] == "68400.000000" and rows["", "blocked closed: count"] == "2"
    assert rows["", "blocked seconds"] == "75600.000000"
    assert "seat-2" in render(r, "html") and "21:00:00 in all" in render(r, "html")  # to the second, for people
    assert "down at the close" in render(r, "text")


def test_an_end_with_nothing_open_is_refused():
    j = journal_of([(DAY.start + S, lambda w, t: [(DEVICE_FAULT, {
        "event": "up", "device": "x", "device_kind": "seat", "seats": [], "reason": "", "flaps": 0,
        "at": t.isoformat()})])])
    with pytest.raises(InvariantViolation, match="entry 1: device-fault x up, but no such fault is open"):
        day_report(j.records, DAY)

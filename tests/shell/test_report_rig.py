"""The gaming day's report of a day played on the rig: rounds with wagers on several seats, a hit claimed and
approved by a floorperson, a bonus the table pays, a void, the lock-out's device and a seat's gone silent and back
(the table blocked), the table closed; every figure of the report checked against sums made here straight from the journal's entries (not
through controller/report/). And the daemon writes the report when
the day ends, and at a start the report of the last ended day that it missed."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from pathlib import Path

from structlog.testing import capture_logs

from controller.app import fault_journal
from controller.app.table import TableDaemon
from controller.config.model import ReportConfig
from controller.ledger.chain import utc_now
from controller.ledger.reader import JournalReader
from controller.money import UNITS_PER_CENT, parse_cents, parse_units
from controller.report import GamingDay, day_report
from controller.service import reports
from drivers import events as ev

from rigtable import daemon_on_rig, drawing, lock_round, until, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
FLOOR = {"supervisor": "floor-1", "secret": "s3cret-floor"}
BONUS = "five-card-hand-bonus"
FOUR_ACES = ["AS", "AD", "AC", "AH", "2D"]  # Progressive Payout Wager: four of a kind
STRAIGHT_FLUSH = ["9D", "8D", "7D", "6D", "5D"]  # Five Card Hand Bonus: 10% of the meter
FLUSH = ["3H", "4H", "6H", "8H", "TH"]  # Five Card Hand Bonus: 50 for 1, paid by the table
UTC_MIDNIGHT = ReportConfig(time(0, 0), "UTC", None)


@contextlib.asynccontextmanager
async def table(tmp_path, clock=utc_now):
    daemon_class = functools.partial(TableDaemon, draw=drawing("2C", 7), clock=clock)

    def adjust(cfg):
        return replace(with_supervisor(cfg, FLOOR["supervisor"], FLOOR["secret"]), report=UTC_MIDNIGHT)

    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state", adjust) as (daemon, rig):
        yield daemon, rig


async def claimed(daemon, seat, cards, spot="progressive"):
    got = await daemon.call("claim", {"seat": seat, "spot": spot, "cards": cards})
    if got["status"] != "paid":
        await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})


def ended(db) -> int:
    """The ends of faults and blocks journaled so far."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM journal WHERE kind IN ('device-fault', 'wagering-block') AND "
                           "json_extract(body, '$.event') IN ('up', 'unblocked')").fetchone()[0]
    finally:
        con.close()


def signed(text: str) -> int:
    return -parse_units(text[1:], "x") if text.startswith("-") else parse_units(text, "x")


async def test_every_figure_of_a_day_on_the_rig_is_the_journals_own_sum(tmp_path, monkeypatch):
    monkeypatch.setattr(fault_journal, "HOLD", timedelta(seconds=0.3))  # an end journaled 0.3 s after the return
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(1, "progressive"), (3, "progressive")])  # before the day
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        start = utc_now()
        await lock_round(daemon, rig, [(4, "progressive"), (6, "progressive"), (2, "progressive")])
        await claimed(daemon, 4, FOUR_ACES)
        await daemon.call("settle", {"round_id": "CS-07-r2"})
        await lock_round(daemon, rig, [(5, BONUS), (2, BONUS), (7, "progressive")])
        await claimed(daemon, 5, STRAIGHT_FLUSH, BONUS)
        await claimed(daemon, 2, FLUSH, BONUS)
        await daemon.call("settle", {"round_id": "CS-07-r3"})
        await lock_round(daemon, rig, [(5, "progressive"), (3, BONUS)])  # a spot's chip stays: new spots
        await daemon.call("void", {"reason": "misdeal", **FLOOR})
        # the lock-out's device and seat 3's stop answering (as with their cables out: the rig's mute; pulling the
        # bus's cable takes 9 devices down and 10 s more) and come back; the table closed meanwhile
        rig.mute("lockout", True)
        rig.mute("seat-3", True)
        await until(lambda: daemon._info["lockout"].up is False and daemon._info["seat-3"].up is False, "both down")
        await daemon.call("close_table", FLOOR)
        rig.mute("lockout", False)
        rig.mute("seat-3", False)
        await until(lambda: daemon._info["lockout"].up and daemon._info["seat-3"].up, "both back")
        await daemon.call("open_table", FLOOR)
        db = daemon.ledger.db_path
        await until(lambda: ended(db) == 4, lambda: f"the ends journaled: {ended(db)} of 4")
        await daemon.call("close_table", FLOOR)  # and closed again at the daemon's stop: the stop ends it
    day = GamingDay(date.today(), start, start + timedelta(days=1), time(0, 0), "UTC")
    with JournalReader(db) as r:
        report = day_report(r.records(), day)

    # --- the independent sums: every entry as the journal holds it, read with sqlite3 ---
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = [json.loads(e) for (e,) in con.execute("SELECT entry FROM entries ORDER BY seq")]
    head_seq, head_hash = con.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    con.close()
    stamp = start.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    before = [e for e in rows if e[3] < stamp]
    during = [e for e in rows if e[3] >= stamp]
    payers, approvers, counted = set(), set(), 0
    assert sorted(report.meters) == ["bonus", "main"]
    for mid, m in report.meters.items():
        def mine(entries, mid=mid):
            return [e for e in entries if isinstance(e[5], dict) and e[5].get("meter") == mid
                    and isinstance(e[6], dict) and "meter_after" in e[6]]

        def total(entries, key):
            return sum(signed(e[6][key]) for e in entries)

        meter = mine(during)
        books = [e for e in meter if e[4] == "book-contributions"]
        voids = [e for e in meter if e[4] == "void-round"]
        awards = [e for e in meter if e[4] in ("pay-percent-award", "pay-fixed-award")]
        assert len(voids) == 1 and awards, (mid, [e[4] for e in meter])
        (defined,) = [e for e in before if e[4] == "define-meter" and e[5]["params"]["meter_id"] == mid]
        opening = mine(before)[-1][6]["meter_after"] if mine(before) else defined[5]["params"]["reset"]
        assert m.opening.current == parse_units(opening, "x")
        assert m.closing.current == parse_units(meter[-1][6]["meter_after"], "x")
        assert m.opening.reserve == total(mine(before), "reserved") - total(mine(before), "from_reserve")
        assert m.closing.reserve == total(mine(rows), "reserved") - total(mine(rows), "from_reserve")
        assert (m.rounds_booked, m.wagers_count) == (len(books), sum(len(e[5]["wagers"]) for e in books))
        counted += m.wagers_count
        assert m.wagers_cents == sum(parse_cents(w["amount"], "x") for e in books for w in e[5]["wagers"])
        voided = {e[5]["round_id"] for e in voids}
        assert (m.voided_count, m.voided_cents) == (
            sum(len(e[5]["wagers"]) for e in books if e[5]["round_id"] in voided),
            sum(parse_cents(w["amount"], "x") for e in books if e[5]["round_id"] in voided for w in e[5]["wagers"]))
        assert [(v.round_id, v.reason) for v in m.voids] == [("CS-07-r4", "misdeal (by floor-1)")]
        assert m.contributions == total(meter, "contributed") and m.reserved == total(meter, "reserved")
        assert m.seed == total(meter, "seeded") and m.adjustments == 0
        assert m.from_reserve == total(meter, "from_reserve") and m.from_overflow == total(meter, "from_overflow")
        assert m.payouts == sum(parse_cents(e[6]["taken"], "x") for e in awards) * UNITS_PER_CENT
        assert m.paid_cents == sum(parse_cents(e[6]["paid"], "x") for e in awards)
        by_hand, by_payer, by_approver = {}, {}, {}
        for e in awards:
            b, cents = e[5], parse_cents(e[6]["paid"], "x")
            for tally, k in ((by_hand, f"{b['hand']}: {b['award']}" if b["hand"] else b["award"]),
                             (by_payer, b.get("paid_by", "attendant")), (by_approver, b["approved_by"])):
                n, c = tally.get(k, (0, 0))
                tally[k] = (n + 1, c + cents)
        assert m.by_award() == by_hand and m.by_paid_by() == by_payer and m.by_approver() == by_approver
        payers |= set(by_payer)
        approvers |= set(by_approver)
        assert m.opening.current + m.contributions + m.from_reserve + m.from_overflow + m.seed - m.taken \
            == m.closing.current
    assert counted == 8 and payers == {"attendant", "table"} and "floor-1" in approvers
    assert (report.head.seq, report.head.hash) == (head_seq, head_hash)  # the close's checkpoint included
    assert report.first_seq == during[0][1] and report.entries == len(during)
    assert [e.detail.split()[0] for e in report.table_events if e.kind == "claim"] == \
        [e[5]["claim"]["id"] for e in during if e[4] == "claim"]

    # --- device faults and blocked time, from the same entries: each down or block paired with what ended it ---
    def at(e):
        return datetime.fromisoformat(e[5]["at"])

    opened, spans = {}, []  # (kind, name) -> its starting entry; (kind, name, start, end, flaps) ended
    for e in rows:
        if e[4] == "fault-watch":
            spans += [(k, n, at(s), at(e), 0) for (k, n), s in opened.items()]
            opened = {}
        elif e[4] in ("device-fault", "wagering-block"):
            name = e[5].get("device") or e[5]["block"]
            if e[5]["event"] in ("down", "blocked"):
                opened[e[4], name] = e
            else:
                spans.append((e[4], name, at(opened.pop((e[4], name))), at(e), e[5]["flaps"]))
    spans += [(k, n, at(s), day.end, 0) for (k, n), s in opened.items()]
    clip = [(k, n, max(a, day.start), min(b, day.end), f) for k, n, a, b, f in spans if b > day.start]

    def seconds(kind, name=None):
        return sum(((b - a) for k, n, a, b, _ in clip if k == kind and name in (None, n)), timedelta(0))

    devices = {d.device: d for d in report.faults.devices}
    assert sorted(devices) == ["lockout", "seat-3"]
    for name, d in devices.items():
        mine = [c for c in clip if c[:2] == ("device-fault", name)]
        assert (len(d.faults), d.down, d.flaps) == (len(mine), seconds("device-fault", name), sum(c[4] for c in mine))
        assert (d.first, d.last) == (mine[0][2], mine[-1][3])
    assert devices["seat-3"].seats == (3,) and devices["lockout"].seats == ()
    assert [len(d.faults) for d in devices.values()] == [1, 1] and devices["lockout"].down > timedelta(0)
    blocks = {b.block: b for b in report.faults.blocks}
    assert sorted(blocks) == ["closed", "device"] and [o.ended_by for o in blocks["closed"].blocks] == ["unblocked", "stop"]
    for name, b in blocks.items():
        assert (len(b.blocks), b.time) == (len([c for c in clip if c[:2] == ("wagering-block", name)]),
                                           seconds("wagering-block", name))
    # the union of the blocks: each second of the day counted once, whatever blocked it
    edges = sorted({t for k, _, a, b, _ in clip if k == "wagering-block" for t in (a, b)})
    assert report.faults.blocked == sum((hi - lo for lo, hi in pairwise(edges)
                                         if any(a <= lo and hi <= b for k, _, a, b, _ in clip
                                                if k == "wagering-block")), timedelta(0))
    assert report.faults.blocked < seconds("wagering-block")  # the two causes overlapped


async def test_the_daemon_writes_the_report_when_the_day_ends_and_a_missed_one_at_start(tmp_path, monkeypatch):
    monkeypatch.setattr(reports, "SETTLE_S", 0.2)
    monkeypatch.setattr(reports, "NAP_S", 0.1)  # the clock is read again this often: the test moves it
    midnight = datetime.combine(utc_now().date() + timedelta(days=1), time(0), UTC)
    shift = [timedelta(0)]
    out = tmp_path / "state" / "reports"
    with capture_logs() as logs:
        async with table(tmp_path, clock=lambda: utc_now() + shift[0]) as (daemon, rig):
            await lock_round(daemon, rig, [(1, "progressive"), (2, "progressive")])
            assert not out.exists()  # the journal began today: no day of it has ended
            shift[0] = midnight - timedelta(seconds=1) - utc_now()  # the day ends a second from now
            await until(lambda: [e for e in logs if e["event"] == "gaming day report written"], "the report",
                        timeout=15)
    (written,) = [e for e in logs if e["event"] == "gaming day report written"]
    today = (midnight - timedelta(days=1)).date().isoformat()
    assert written["path"] == str(out / f"report-{today}.json")
    assert sorted(p.name for p in out.iterdir()) == [f"report-{today}.{x}" for x in ("csv", "html", "json", "txt")]
    doc = json.loads((out / f"report-{today}.json").read_text())
    assert [(m["meter"], m["wagers"]["count"]) for m in doc["meters"]] == [("bonus", 0), ("main", 2)]
    assert doc["day"] == today
    assert not [e for e in logs if e["event"] in ("gaming day report not written", "task failed")]

    # stopped over the day's end, the report missing: written at the next start. Whoever can write the reports
    # directory planted links under the report's names and the temporary names an earlier writer used: they
    # neither stand for the report nor get written through.
    victim = tmp_path / "victim"
    victim.write_text("not a report", encoding="utf-8")
    for p in out.iterdir():
        p.unlink()
        p.symlink_to(victim)
        (out / f".{p.name}.tmp").symlink_to(victim)
    with capture_logs() as logs:
        shift[0] += timedelta(hours=1)
        async with table(tmp_path, clock=lambda: utc_now() + shift[0]):
            await until(lambda: [e for e in logs if e["event"] == "gaming day report written"], "the missed report")
    html = (out / f"report-{today}.html").read_text()
    assert html.count("<svg") == 2  # a plot a meter
    # the daemon's own report names its table and its meters as its configuration does
    assert "Table CS-07, Progressive Payout Wager (meter main)" in html
    assert victim.read_text(encoding="utf-8") == "not a report"
    assert all(not (out / f"report-{today}.{x}").is_symlink() for x in ("csv", "html", "json", "txt"))


async def test_a_flapping_device_is_one_fault_in_the_journal(tmp_path, monkeypatch):
    """The lock-out's device drops and comes back 50 times in a row (as a loose cable does): one fault and one block
    in the journal, down once and back once, the 49 returns in between folded in as flaps."""
    monkeypatch.setattr(fault_journal, "HOLD", timedelta(seconds=0.5))
    async with table(tmp_path) as (daemon, _rig):
        emit = daemon.emit_for("lockout")
        for _ in range(50):
            emit(ev.DeviceDown("lockout", "no reply"))
            emit(ev.DeviceUp("lockout"))
        db = daemon.ledger.db_path
        await until(lambda: ended(db) == 2, lambda: f"the ends journaled: {ended(db)} of 2")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = [(k, json.loads(b)) for k, b in con.execute(
            "SELECT kind, body FROM journal WHERE kind IN ('device-fault', 'wagering-block') ORDER BY seq")]
        con.close()
    assert [(k, b["event"], b["flaps"]) for k, b in rows] == [
        ("device-fault", "down", 0), ("wagering-block", "blocked", 0),
        ("device-fault", "up", 49), ("wagering-block", "unblocked", 49)]
    assert rows[0][1]["reason"] == "no reply" and rows[1][1]["sources"] == ["lockout"]

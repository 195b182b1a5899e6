"""The `meter_series` operation (docs/operations.md): a daemon on the rig answers each meter's amounts over the
gaming day and over 30 days from its journal, the growth of the rounds and the reset after a jackpot in them;
an answer is kept a minute (no second read of the journal); and over a long journal written by the ledger (30
days of rounds) the answer stays within 400 points a meter and keeps every day's reset."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import pytest

from controller.app.table import TableDaemon
from controller.config.model import ReportConfig
from controller.errors import InputError
from controller.ledger import Ledger
from controller.meter import BookContributions, CloseRound, PayPercentAward, params_from_dict
from controller.meter.journal import define_meter_body, op_body
from controller.money import parse_units
from controller.round.journal import JournalReducer
from controller.service.control import NotAvailable
from controller.service.report_files import read_series
from controller.service.reports import MAX_POINTS, MeterSeries

from rigtable import daemon_on_rig, drawing, lock_round, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
FLOOR = {"supervisor": "floor-1", "secret": "s3cret-floor"}
ROYAL = ["AS", "KS", "QS", "JS", "TS"]  # Progressive Payout Wager: 100% of the meter, which resets
RESET = "10000.00"


def amounts(answer: dict) -> list[int]:
    return [parse_units(a, "amount") for _, a in answer["points"]]


def _day_far_from_its_edges(cfg):
    """The gaming day starting 12 hours from now (UTC): a test run at the edge of the day's start (06:00 in New York,
    11:00 UTC) would otherwise see its rounds in yesterday's day and its question in today's."""
    now = datetime.now(UTC)
    return replace(cfg, report=ReportConfig(clock_time((now.hour + 12) % 24, 0), "UTC", None))


async def test_the_daemon_answers_the_growth_and_the_reset_and_reads_once_a_minute(tmp_path):
    daemon_class = functools.partial(TableDaemon, draw=drawing("2C", 7))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                             lambda cfg: _day_far_from_its_edges(
                                 with_supervisor(cfg, FLOOR["supervisor"], FLOOR["secret"]))) as (daemon, rig):
        await lock_round(daemon, rig, [(1, "progressive"), (3, "progressive")], cents=500)
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        await lock_round(daemon, rig, [(4, "progressive"), (6, "progressive")], cents=500)  # chips stay: new seats
        claim = await daemon.call("claim", {"seat": 4, "cards": ROYAL})
        await daemon.call("approve", {"claim_id": claim["claim_id"], **FLOOR})
        before = daemon.series.reads
        day = await daemon.call("meter_series", {"span": "day"})
        month = await daemon.call("meter_series", {"span": "30d", "meter": "main"})
        assert daemon.series.reads == before + 2
        assert [m["meter"] for m in day] == ["bonus", "main"] and [m["meter"] for m in month] == ["main"]
        main = next(m for m in day if m["meter"] == "main")
        line = amounts(main)
        top = line.index(max(line))
        assert line[0] == parse_units(RESET, "x") and max(line) > line[0]  # grown by the rounds' contributions
        assert line[top + 1] == parse_units(RESET, "x") and main["closing"] == RESET  # then the royal: the reset
        assert line[:top + 1] == sorted(line[:top + 1])
        assert (main["low"], main["opening"], main["high"]) == (RESET, RESET, max(p[1] for p in main["points"]))
        assert main["entries"] >= 4 and main["span"] == "day"
        times = [datetime.fromisoformat(t) for t, _ in main["points"]]
        assert times == sorted(times) and times[-1] == datetime.fromisoformat(main["end"])
        assert amounts(month[0]) == line and month[0]["span"] == "30d"  # one day of journal: the same line

        # kept a minute: asked again, the same answer and no read of the journal
        assert await daemon.call("meter_series", {"span": "day"}) == day
        assert daemon.series.reads == before + 2
        for args, field in (({"span": "week"}, "span"), ({}, "span"), ({"span": "day", "meter": "nope"}, "meter"),
                            ({"span": "day", "meter": 7}, "meter")):
            with pytest.raises(InputError) as e:
                await daemon.call("meter_series", args)
            assert e.value.field == field, e.value


# --- a long journal, written by the ledger with its clock set ---------------------------------------------

NOW = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)  # 15:00 in New York: gaming day 2026-11-30
DAYS, ROUNDS_A_DAY, JACKPOT_EVERY = 31, 150, 100


def long_journal(state_dir: Path) -> int:
    """DAYS gaming days of ROUNDS_A_DAY rounds each (from 07:00 New York time; the writer stamps a batch at once),
    a royal flush every JACKPOT_EVERY rounds; the entries written."""
    now = [NOW - timedelta(days=DAYS)]
    params = params_from_dict({"meter_id": "main", "reset": RESET, "rate": "0.15", "reserve_rate": "0.05",
                               "wager_sizes": ["1.00", "5.00"]}, "params")
    ledger = Ledger.open(state_dir, JournalReducer(), software_digest="sha256:test", clock=lambda: now[0])
    futures = [ledger.submit_future("define-meter", define_meter_body(params, "slot-tech 4411", now[0]), "define")]
    n = 0
    try:
        for d in range(DAYS):
            start = NOW - timedelta(days=DAYS - d, hours=8)  # 07:00 in New York
            for k in range(ROUNDS_A_DAY):
                n += 1
                t = now[0] = start + timedelta(minutes=k)
                rid = f"r{n}"
                ops = [BookContributions(rid, "CS-07", ((1, 500), (2, 100)), t)]
                if n % JACKPOT_EVERY == 0:
                    ops.append(PayPercentAward(rid, "CS-07", 1, "royal-flush", "100% of meter", Fraction(100), t,
                                               "floor 1207"))
                ops.append(CloseRound(rid, t))
                futures += [ledger.submit_future(op.kind, op_body("main", op), f"{rid}:{op.kind}") for op in ops]
            for f in futures:  # the writer stamps a batch when it writes it: each day's entries written that day
                f.result(30)
            futures = []
    finally:
        ledger.close()
    return 1 + n * 2 + n // JACKPOT_EVERY


async def test_a_long_journal_stays_within_the_bound_and_keeps_every_day_reset(tmp_path):
    written = long_journal(tmp_path / "state")
    series = MeterSeries(tmp_path / "state", ReportConfig(clock_time(6, 0), "America/New_York", None),
                         clock=lambda: NOW)
    began = time.monotonic()
    (month,) = await series.get("30d")
    took = time.monotonic() - began
    (day,) = await series.get("day", "main")
    assert series.reads == 2 and written > 9_000
    assert month["entries"] > 8_000 and len(month["points"]) <= 6 * 30 <= MAX_POINTS
    assert len(day["points"]) <= MAX_POINTS
    reset = parse_units(RESET, "x")
    line = amounts(month)
    falls = [datetime.fromisoformat(month["points"][i + 1][0]).date()
             for i, (a, b) in enumerate(pairwise(line)) if b == reset < a]
    jackpots = {(NOW - timedelta(days=DAYS - (n - 1) // ROUNDS_A_DAY)).date()
                for n in range(JACKPOT_EVERY, DAYS * ROUNDS_A_DAY + 1, JACKPOT_EVERY)}
    in_span = {d for d in jackpots if d >= datetime.fromisoformat(month["start"]).date()}
    assert set(falls) == in_span and len(in_span) >= 25  # every day's reset on the plot, none smoothed away
    assert took < 10, took

    # read again (the answer kept no longer): from the opening kept, only the span's entries, the same answer
    again = MeterSeries(tmp_path / "state", ReportConfig(clock_time(6, 0), "America/New_York", None),
                        clock=lambda: NOW, every=0)
    assert await again.get("30d") == [month] and again._openings["30d"] is not None
    opening = again._openings["30d"]
    assert await again.get("30d") == [month] and again.reads == 2 and again._openings["30d"] is opening
    # a wrong opening kept (another journal's) is not used: the entries after it do not follow it
    again._openings["30d"] = replace(opening, before_seq=opening.before_seq - 1)
    assert await again.get("30d") == [month] and again._openings["30d"] == opening


# --- one read a span at a time ------------------------------------------------------------------------------


async def test_requests_during_a_slow_read_share_it_and_one_that_times_out_leaves_it_to_fill_the_answer(tmp_path):
    """A client asking again and again while a read of the journal is slow (here held in its thread) makes no
    second read: each request waits for the one under way, is refused at its timeout, and the read, when it ends,
    fills the kept answer that the next request gets without reading."""
    state = tmp_path / "state"
    ledger = Ledger.open(state, JournalReducer(), software_digest="sha256:test", clock=lambda: NOW - timedelta(hours=1))
    params = params_from_dict({"meter_id": "main", "reset": RESET, "rate": "0.15", "wager_sizes": ["5.00"]}, "params")
    try:
        ledger.submit_future("define-meter", define_meter_body(params, "slot-tech 4411", NOW), "define").result(10)
    finally:
        ledger.close()
    release, reads = threading.Event(), []

    def held_reader(*args):
        reads.append(args[1])
        if not release.wait(30):
            raise TimeoutError("the test never released the read")
        return read_series(*args)

    series = MeterSeries(state, ReportConfig(clock_time(6, 0), "America/New_York", None), clock=lambda: NOW,
                         timeout=0.05, reader=held_reader)
    async def refused(request) -> None:
        with pytest.raises(NotAvailable, match="still being read"):
            await request

    await asyncio.gather(*(refused(series.get("day")) for _ in range(5)))  # at once
    for _ in range(3):  # one after another, each after the last one's refusal
        await refused(series.get("day", "main"))
    assert len(reads) == 1 and series.reads == 0
    await refused(series.get("30d"))  # another span: a read of its own
    assert len(reads) == 2

    release.set()
    for task in list(series._reading.values()):  # the reads under way end (no request waits for them now)
        await asyncio.wait_for(task, 10)
    assert series.reads == 2 and not series._reading
    (main,) = await series.get("day")
    assert main["meter"] == "main" and main["closing"] == RESET
    assert await series.get("30d", "main") and len(reads) == 2 and series.reads == 2  # from the kept answers

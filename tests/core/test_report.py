"""The gaming day's report as a pure function (controller/report/): every figure of a day built by hand, a journal
whose recorded result was changed, books that do not balance, the gaming day's bounds (daylight saving time
included), the series a plot reads, and the property: any sequence of meter operations reconciles, on any day."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from fractions import Fraction
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import InputError, InvariantViolation
from controller.meter import ops as meter_ops
from controller.meter import params_from_dict
from controller.meter.journal import DEFINE_METER, define_meter_body
from controller.money import UNITS_PER_CENT, format_units, format_units_human, parse_units
from controller.report import (
    day_of,
    day_report,
    downsample,
    gaming_day,
    last_ended,
    meter_series,
    parse_day,
    parse_day_starts,
    parse_span,
    span_edges,
    span_series,
)
from controller.report.build import AUTHORITY, POINTS_PER_INTERVAL, TABLE, Source, percent, reconcile
from controller.report.render import render, series_json, to_json

from reportday import Journal, rounds

Adjust, BookContributions, ChangeParams, CloseRound = (meter_ops.Adjust, meter_ops.BookContributions,
                                                       meter_ops.ChangeParams, meter_ops.CloseRound)
PayFixedAward, PayPercentAward, TopUp, VoidRound = (meter_ops.PayFixedAward, meter_ops.PayPercentAward,
                                                    meter_ops.TopUp, meter_ops.VoidRound)

NY = ZoneInfo("America/New_York")
DAY = gaming_day(date(2026, 11, 30), time(6, 0), NY, "America/New_York")  # 11:00 UTC to 11:00 UTC
BEFORE = DAY.start - timedelta(hours=2)
IN = DAY.start + timedelta(hours=1)
PARAMS = params_from_dict({"meter_id": "main", "reset": "10000.00", "rate": "0.15", "reserve_rate": "0.05",
                           "wager_sizes": ["1.00", "5.00"]}, "params")


def a_day() -> Journal:
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", BEFORE), BEFORE)
    j.op(BookContributions("r0", "CS-07", ((1, 100),), BEFORE), BEFORE)  # open across the day's start
    t = IN
    ops = [
        *rounds("CS-07", t),
        TopUp(5_000, t, "promotions 77", "holiday promotion"),
        Adjust(-250_000, "meter reading corrected", "floor 1207 / code 5512", t),
        ChangeParams(replace(PARAMS, rate=Fraction(20, 100)), "configuration table.toml", t),
        BookContributions("r3", "CS-07", ((5, 100),), t),
    ]
    for i, op in enumerate(ops):
        assert j.op(op, t + timedelta(minutes=i)), op
    j.op(CloseRound("r3", DAY.end + timedelta(minutes=1)), DAY.end + timedelta(minutes=1))  # the next day
    return j


def test_every_figure_of_a_day():
    j = a_day()
    r = day_report(j.records, DAY)
    (m,) = r.meters.values()
    assert (r.first_seq, r.entries, r.head.seq) == (3, 11, 13)  # the entry after the day's end is not in it
    assert m.opening.current == 1_000_000 * 10_000 + 15 * 10_000  # $10,000 + $1 x 0.15
    assert m.opening.reserve == 5 * 10_000
    # r1 $7 + r2 $10 (voided) + r3 $1 (at the new rate, 0.20)
    assert (m.rounds_booked, m.wagers_count, m.wagers_cents) == (3, 6, 1_800)
    assert (m.voided_count, m.voided_cents, [v.round_id for v in m.voids]) == (2, 1_000, ["r2"])
    assert m.contributions == (700 * 15 + 100 * 20) * 100  # units: cents x rate x 10,000
    assert m.reserved == 800 * 5 * 100
    assert [(c.kind, c.who) for c in m.changes] == [("top-up", "promotions 77"), ("adjust", "floor 1207 / code 5512"),
                                                    ("change-params", "configuration table.toml")]
    assert m.adjustments == -250_000 and m.changes[1].units == -250_000
    royal = [a for a in m.awards if a.hand == "royal-flush"][0]
    assert royal.cents == (m.opening.current + 700 * 15 * 100) // UNITS_PER_CENT  # 100% of the meter at its turn
    assert m.by_award() == {"four-of-a-kind: 300 for 1": (1, 30_000), "royal-flush: 100% of meter": (1, royal.cents)}
    assert m.by_paid_by() == {"attendant": (1, royal.cents), "table": (1, 30_000)}
    assert m.by_approver() == {"floor 1207": (2, 30_000 + royal.cents)}
    assert m.payouts == royal.cents * UNITS_PER_CENT and m.paid_cents == royal.cents + 30_000
    closing = j.state["main"]  # the whole journal's state: the next day's entry only closed a round
    assert (m.closing.current, m.closing.reserve, m.closing.overflow) == (closing.current, closing.reserve,
                                                                          closing.overflow)
    assert m.seed == 5_000 * UNITS_PER_CENT + (royal.meter_after - (royal.meter_before - royal.cents * UNITS_PER_CENT)
                                                - m.from_reserve - m.from_overflow)
    out = to_json(r)
    rec = out["meters"][0]["reconciliation"]
    assert rec["visible"]["balanced"] and rec["held"]["balanced"]
    assert out["head"] == {"seq": 13, "hash": f"{13:064x}", "time": j.records[12].time.isoformat()}
    for form in ("text", "json", "csv", "html"):
        assert "main" in render(r, form)


def test_a_changed_result_fails_loudly():
    j = a_day()
    k = next(i for i, x in enumerate(j.records) if x.kind == "book-contributions" and x.time >= DAY.start)
    changed = dict(j.records[k].result, contributed="1.00")
    j.records[k] = replace(j.records[k], result=changed)
    with pytest.raises(InvariantViolation, match=rf"entry {k + 1}: book-contributions on meter main"):
        day_report(j.records, DAY)


def test_books_that_do_not_balance_fail_loudly():
    (m,) = day_report(a_day().records, DAY).meters.values()
    reconcile(m)
    m.seed += 1  # one unit: 1/10,000 of a cent
    with pytest.raises(InvariantViolation, match="meter main: the day does not reconcile: visible: .* held: "):
        reconcile(m)


def test_a_meter_defined_during_the_day_opens_at_zero():
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", IN), IN)
    (m,) = day_report(j.records, DAY).meters.values()
    assert m.defined and m.opening.total == 0 and m.seed == m.closing.current == PARAMS.reset_units
    assert m.changes[0].who == "slot-tech 4411"


def test_a_day_without_entries_keeps_the_head_before_it():
    j = a_day()
    later = gaming_day(date(2026, 12, 5), time(6, 0), NY)
    r = day_report(j.records, later)
    assert r.entries == 0 and r.head.seq == 14 and r.first_seq is None  # the next day's close
    (m,) = r.meters.values()
    assert m.opening == m.closing


def test_the_gaming_day_and_daylight_saving_time():
    assert (DAY.start, DAY.end) == (datetime(2026, 11, 30, 11, tzinfo=UTC),
                                    datetime(2026, 12, 1, 11, tzinfo=UTC))
    assert gaming_day(date(2026, 3, 7), time(6), NY).hours == 23  # the clocks go forward on 8 March 2026
    assert gaming_day(date(2026, 10, 31), time(6), NY).hours == 25  # and back on 1 November
    skipped = gaming_day(date(2026, 3, 8), time(2, 30), NY)  # 02:30 does not exist on 8 March: taken as EST
    assert skipped.start == datetime(2026, 3, 8, 7, 30, tzinfo=UTC) and skipped.hours == 23
    assert day_of(DAY.start, time(6), NY).day == date(2026, 11, 30)
    assert day_of(DAY.start - timedelta(microseconds=1), time(6), NY).day == date(2026, 11, 29)
    assert last_ended(DAY.end, time(6), NY).day == date(2026, 11, 30)
    assert last_ended(DAY.end - timedelta(seconds=1), time(6), NY).day == date(2026, 11, 29)
    for bad in ("6:00", "24:00", "06:60", "0600", 6):
        with pytest.raises(InputError, match="day_starts"):
            parse_day_starts(bad, "day_starts")
    for bad in ("2026-13-01", "2026-02-30", "yesterday", "2026-1-1"):
        with pytest.raises(InputError, match="--day"):
            parse_day(bad, "--day")


def test_the_series_a_plot_reads():
    j = a_day()
    before = [x for x in j.records if x.time < DAY.start]
    during = [x for x in j.records if DAY.start <= x.time < DAY.end]
    from controller.report import replay

    series = meter_series(replay(before), during, DAY.start, DAY.end)["main"]
    assert series[0] == (DAY.start, 0, replay(before)["main"].current)
    assert series[-1] == (DAY.end, during[-1].seq, replay(before + during)["main"].current)
    moved = [x.seq for x in during if x.result.get("meter_before") != x.result.get("meter_after")]
    assert set(moved) <= {seq for _, seq, _ in series}
    (m,) = day_report(j.records, DAY).meters.values()
    assert m.series == series


def test_a_span_series_is_the_day_reports_series():
    j = a_day()
    assert span_series(j.records, DAY.start, DAY.end)["main"] == day_report(j.records, DAY).meters["main"].series


def month_of_play(days: int = 30, rounds_a_day: int = 150, jackpot_every: int = 70) -> Journal:
    """A long journal, built fast through the reducer: every gaming day `rounds_a_day` rounds of $5 and $1 a
    minute apart, and a royal flush (100% of the meter: it resets to $10,000) every `jackpot_every` rounds."""
    j = Journal()
    first = DAY.start - timedelta(days=days - 1)
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", first), first)
    n = 0
    for d in range(days):
        t0 = first + timedelta(days=d, hours=1)
        for k in range(rounds_a_day):
            n += 1
            t, rid = t0 + timedelta(minutes=k), f"r{n}"
            assert j.op(BookContributions(rid, "CS-07", ((1, 500), (2, 100)), t), t)
            if n % jackpot_every == 0:
                assert j.op(PayPercentAward(rid, "CS-07", 1, "royal-flush", "100% of meter", Fraction(100), t,
                                            "floor 1207"), t)
            assert j.op(CloseRound(rid, t), t)
    return j


def _falls_to(points, amount):
    """The times at which a line of (time, units) falls to `amount`."""
    return [t for (_, a), (t, b) in pairwise(points) if b == amount and a > amount]


def test_a_month_downsampled_keeps_every_reset_and_at_most_400_points():
    j = month_of_play()
    assert len(j.records) > 9_000
    now = DAY.start + timedelta(hours=5)  # the day's rounds: 1 to 3.5 hours after its start
    reset = PARAMS.reset_units
    for span, intervals, most in (("30d", 30, 6 * 30), ("day", 400 // POINTS_PER_INTERVAL, 400)):
        edges = span_edges(span, now, time(6, 0), NY, 400 // POINTS_PER_INTERVAL)
        assert len(edges) == intervals + 1 and edges[-1] == now
        full = span_series(j.records, edges[0], now)["main"]
        (answer,) = series_json({"main": full}, span, edges[0], now, edges)
        kept = [(datetime.fromisoformat(t), parse_units(a, "a")) for t, a in answer["points"]]
        assert len(full) > len(kept) and len(kept) <= most, (span, len(full), len(kept))
        assert kept[0] == (edges[0], full[0][2]) and kept[-1] == (now, full[-1][2])
        line = [(t, v) for t, _, v in full]
        resets = _falls_to(line, reset)
        shown = _falls_to(kept, reset)
        assert len(resets) == (64 if span == "30d" else 2) and set(shown) <= set(resets)

        def interval(t, edges=edges):
            return max(i for i, e in enumerate(edges[:-1]) if e <= t)

        assert {interval(t) for t in shown} == {interval(t) for t in resets}  # a reset in each interval that had one
        if span == "day":
            assert shown == resets  # intervals of 4.5 minutes here: every reset, at its own time
        assert (answer["high"], answer["low"]) == (format_units(max(v for _, v in line)), format_units(reset))
        assert max(v for _, v in kept) == max(v for _, v in line)
        for i in range(len(edges) - 1):  # and in each interval, the highest amount before its reset
            inside = [v for t, v in line if edges[i] <= t < edges[i + 1]]
            if inside:
                assert max(inside) in {v for t, v in kept if edges[i] <= t < edges[i + 1]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=300), st.integers(1, 12))
def test_downsampling_keeps_ends_extremes_and_each_largest_fall(values, intervals):
    t0 = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    points = [(t0 + timedelta(seconds=i), i + 1, v) for i, v in enumerate(values)]
    edges = [t0 + timedelta(seconds=len(values)) * i // intervals for i in range(intervals + 1)]
    kept = downsample(points, edges)
    assert kept == sorted(kept, key=lambda p: p[1]) and set(kept) <= set(points)
    for i in range(intervals):
        inside = [p for p in points if edges[i] <= p[0] < edges[i + 1] or (i == intervals - 1 and p[0] >= edges[-1])]
        mine = [p for p in kept if p in inside]
        assert len(mine) <= POINTS_PER_INTERVAL
        if not inside:
            continue
        assert inside[0] in mine and inside[-1] in mine
        assert max(p[2] for p in mine) == max(p[2] for p in inside)
        assert min(p[2] for p in mine) == min(p[2] for p in inside)
        drops = [a[2] - b[2] for a, b in pairwise(inside)]
        if drops and max(drops) > 0:
            assert any(a in mine and b in mine for a, b in pairwise(inside)
                       if a[2] - b[2] == max(drops))  # both ends of the largest fall: a reset to its full depth


def test_span_edges_a_day_so_far_and_thirty_gaming_days_over_a_clock_change():
    now = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)  # 10:00 in New York
    day = span_edges("day", now, time(6, 0), NY, 4)
    assert day == [datetime(2026, 11, 30, 11, 0, tzinfo=UTC) + timedelta(hours=1) * i for i in range(5)]
    month = span_edges("30d", now - timedelta(days=1), time(6, 0), NY, 4)
    assert len(month) == 31 and month[-1] == now - timedelta(days=1) and month[-2] == DAY.start - timedelta(days=1)
    assert month[0] == datetime(2026, 10, 31, 10, 0, tzinfo=UTC)  # 06:00 EDT; the clocks go back that night
    assert (month[1] - month[0], month[2] - month[1]) == (timedelta(hours=25), timedelta(hours=24))
    with pytest.raises(InputError, match="span: must be \"day\""):
        parse_span("week", "span")


def test_locked_awards_paid_and_released_over_the_ceiling():
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS_CEILING, "tech", BEFORE), BEFORE)
    t = IN
    for op in (BookContributions("r1", "T", ((1, 500), (2, 500), (3, 500)), t),  # $2.25: 50 cents to the ceiling
               meter_ops.LockPercentAward("r1", "T", 2, "royal-flush", "10% of meter", Fraction(10), t, "c2"),
               BookContributions("r2", "T", ((4, 500),), t),  # back to the ceiling, 25 cents over
               meter_ops.ReleaseLockedAward("c2", "floor 9", "not a royal flush", t),
               meter_ops.LockPercentAward("r1", "T", 1, "royal-flush", "50% of meter", Fraction(50), t, "c1"),
               meter_ops.PayLockedAward("c1", "floor 9", t)):
        assert j.op(op, t), op
    (m,) = day_report(j.records, DAY).meters.values()
    (c1,) = m.awards
    assert (c1.seat, c1.approved_by) == (1, "floor 9")
    assert m.payouts == c1.cents * UNITS_PER_CENT  # the paid lock left the meter; the released one came back
    assert m.taken == m.payouts  # taken twice, one given back
    # the release put $10,001.00 on a meter whose ceiling is $10,000.50: the excess went to the overflow
    assert m.released_to_overflow == 50 * UNITS_PER_CENT


PARAMS_CEILING = replace(PARAMS, ceiling_cents=1_000_050)  # 50 cents over the reset: overflow, and a release over it

# --- the property ----------------------------------------------------------------------------------


ops_st = st.lists(st.tuples(
    st.sampled_from(["book", "pay", "share", "fixed", "void", "close", "top-up", "adjust", "lock", "pay-lock",
                     "release", "params"]),
    st.integers(0, 1), st.lists(st.sampled_from([100, 500]), min_size=1, max_size=4), st.integers(1, 120)),
    max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops_st, st.integers(0, 40), st.booleans())
def test_any_sequence_of_meter_operations_reconciles(ops, cut, ceiling):
    j = Journal()
    t0 = DAY.start - timedelta(hours=1)
    j.add(DEFINE_METER, define_meter_body(PARAMS_CEILING if ceiling else PARAMS, "tech", t0), t0)
    claims = 0
    for what, n, wagers, minutes in ops:
        rid = f"r{n}"
        at = t0 + timedelta(minutes=minutes)
        seats = tuple((k + 1, c) for k, c in enumerate(wagers))
        op: Any
        if what == "book":
            op = BookContributions(rid, "T", seats, at)
        elif what == "pay":
            op = PayPercentAward(rid, "T", 1, "royal-flush", "10% of meter", Fraction(10), at, "floor")
        elif what == "share":
            op = PayPercentAward(rid, "T", 1 + n % 2, "royal-flush", "100% of meter", Fraction(100), at, "floor",
                                 shares=2)
        elif what == "fixed":
            op = PayFixedAward(rid, "T", 1, "flush", "50 for 1", 5_000, "table", at, "floor")
        elif what == "void":
            op = VoidRound(rid, at, "misdeal")
        elif what == "close":
            op = CloseRound(rid, at)
        elif what == "top-up":
            op = TopUp(sum(wagers), at, "promo", "promotion")
        elif what == "adjust":
            op = Adjust(sum(wagers) * (n - 1) * 333 or 1, "correction", "floor/1", at)
        elif what == "lock":
            claims += 1
            op = meter_ops.LockPercentAward(rid, "T", 1, "royal-flush", "50% of meter", Fraction(50), at,
                                            f"c{n}")
        elif what == "pay-lock":
            op = meter_ops.PayLockedAward(f"c{n}", "floor", at)
        elif what == "release":
            op = meter_ops.ReleaseLockedAward(f"c{n}", "floor", "not a royal", at)
        else:
            op = ChangeParams(replace(PARAMS, rate=Fraction(10 + n, 100)), "tech", at)
        j.op(op, at)
    recs = sorted(j.records, key=lambda x: x.seq)
    # the day starts after `cut` entries: every split of the journal into before and during reconciles
    cut = min(cut, len(recs))
    start = recs[cut].time if cut < len(recs) else recs[-1].time + timedelta(seconds=1)
    times = [x.time for x in recs]
    if times != sorted(times):  # entries stamped in journal order, as the writer does
        recs = [replace(x, time=t0 + timedelta(seconds=i)) for i, x in enumerate(recs)]
        start = recs[cut].time if cut < len(recs) else recs[-1].time + timedelta(seconds=1)
    day = replace(DAY, start=start, end=start + timedelta(days=1))
    r = day_report(recs, day)
    (m,) = r.meters.values()
    assert m.closing.current == j.state["main"].current
    assert m.visible_expected() == m.closing.current and m.held_expected() == m.closing.total
    assert m.paid_cents == sum(a.cents for a in m.awards)


def test_amounts_and_rates_for_people():
    assert format_units_human(10_017_850_000) == "$10,017.85" and format_units_human(0) == "$0.00"
    assert format_units_human(10_000_157_500) == "$10,000.1575"  # exact: a sub-cent remainder keeps its digits
    assert format_units_human(-250_000) == "-$0.25"
    assert (percent(Fraction(15, 100)), percent(Fraction(1, 8)), percent(Fraction(1, 3))) == ("15%", "12.5%",
                                                                                               "33.333333%")


def test_the_report_for_people_names_its_table_and_reads_as_words():
    """The accountant's findings: the table in the title; $ and thousands separators; the casino's local time to the
    second with its zone; human labels, no field names; payouts named by what they are; a block to sign; a print
    stylesheet; the plot's axes in local time and its figures those of the text."""
    r = day_report(a_day().records, DAY)
    text, page = render(r, "text"), html.unescape(render(r, "html"))
    for out in (text, page):
        assert "Progressive meter report: Table CS-07, gaming day Monday 30 November 2026" in out
        assert "2026-11-30 06:00:00 EST" in out and "2026-12-01 06:00:00 EST" in out
        assert "$10,001.20" in out and "Reconciliation: the meter's visible amount balances: " in out
        words = re.sub(r"<[^>]*>", " ", out.split("<style>")[0] + out.split("</style>")[-1])  # the page's text
        assert not re.search(r"\b[a-z]+_[a-z_]+\b|\b(True|False|None)\b|UTC|\+00:00|royal-flush|balanced|10001\.20",
                             words), words
    assert "Reconciliation: the meter's visible amount balances: yes" in text
    assert "Every round in the journal this day was at table CS-07." in text  # not "named by this day's entries"
    assert "seat 7: Jackpot on royal flush (100% of meter), $10,001.20" in text
    assert "seat 4: Fixed award on four of a kind (300 for 1), $300.00" in text
    assert "2026-11-30 07:03:00 EST" in text  # 12:03 UTC on the casino's clock
    assert "Parameters changed by configuration table.toml: $0.00 (reset amount $10,000.00, rate of progression 20%" \
        in text
    for words in ("Prepared by", "Reviewed by", "Signature", "Date", "Title and credential number"):
        assert words in text, words  # the text form is printed and signed too
    for words in ("Prepared by", "Reviewed by", "Signature", "Date", "Title and credential number", "@media print",
                  "@page", "break-before:page", "color-scheme:light", 'counter(page) " of " counter(pages)',
                  '@bottom-left{content:"Progressive meter report: Table CS-07, gaming day 2026-11-30"'):
        assert words in page, words
    ticks = [t for t in ("06:00", "09:00", "12:00", "15:00", "18:00", "21:00", "00:00", "03:00")
             if f'text-anchor="middle">{t}</text>' in page]
    assert len(ticks) == 8 and page.count('text-anchor="middle">06:00</text>') == 2  # the day's start and end
    assert "time on the casino's clock (EST)" in page
    assert "$10,000.15 at the opening, 2026-11-30 06:00:00 EST; $10,049.95 at the close" in page


def test_a_meter_defined_during_the_day_is_plotted_from_its_definition_not_from_an_opening():
    """The plot said "$10000.00 at the start" where the text said the opening was $0.00: one truth now."""
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", IN), IN)
    page = html.unescape(render(day_report(j.records, DAY), "html"))
    assert "defined at 2026-11-30 07:00:00 EST with $10,000.00 (the reset amount, put in by the operator; no opening)" \
        in page
    assert "not yet defined" in page and "at the start" not in page


def test_a_payout_the_table_paid_on_the_dealer_s_claim_names_no_supervisor():
    """A flush on the dealer's hand (50 for 1) the table pays needs no supervisor: the journal names the dealer, whom
    the report listed among the supervisors' approvals ("Approved by dealer")."""
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", IN), IN)
    j.op(meter_ops.BookContributions("r1", "CS-07", ((2, 100),), IN), IN)
    j.op(meter_ops.PayFixedAward("r1", "CS-07", 2, "flush", "50 for 1", 5_000, "table", IN, "dealer"), IN)
    r = day_report(j.records, DAY)
    text, page = render(r, "text"), html.unescape(render(r, "html"))
    assert "paid by the table (dealer), approved by no supervisor (the dealer's claim)" in text
    assert "Approved by no supervisor (the dealer's claim): 1 payout for $50.00" in text
    assert "by dealer" not in text and ">dealer<" not in page and "no supervisor (the dealer's claim)" in page


def test_whose_report_it_is():
    j = a_day()
    assert day_report(j.records, DAY).source == Source(TABLE, "CS-07")
    assert day_report(j.records, DAY, Source(TABLE, "CS-07")).source.title == "Table CS-07"
    with pytest.raises(InputError, match="the journal is of table CS-07, not CS-08"):
        day_report(j.records, DAY, Source(TABLE, "CS-08"))
    with pytest.raises(InputError, match="the journal is a table's"):
        day_report(j.records, DAY, Source(AUTHORITY, "link-1"))
    linked = [replace(x, key=f"link:CS-0{x.seq % 2 + 7}:{x.seq}") for x in j.records]  # keyed as an authority's
    assert day_report(linked, DAY).source == Source(AUTHORITY, "")
    r = day_report(linked, DAY, Source(AUTHORITY, "link-1"))
    assert render(r, "text").startswith("Progressive meter report: Link authority link-1, gaming day")
    doc = to_json(r)
    assert (doc["authority"], doc["table"]) == ("link-1", None)
    assert render(r, "csv").splitlines()[1].startswith("2026-11-30,link authority,link-1,main,")


def test_at_a_link_authority_each_payout_names_its_table():
    linked = [replace(x, key=f"link:CS-07:{x.seq}") for x in a_day().records]
    r = day_report(linked, DAY, Source(AUTHORITY, "link-1"))
    text, page = render(r, "text"), html.unescape(render(r, "html"))
    assert ", table CS-07, round r1, seat 7: Jackpot on royal flush (100% of meter), $10,001.20" in text
    assert "<th>Time</th><th>Table</th><th>Round</th>" in page and "<td>CS-07</td><td>r1</td>" in page
    assert "Link authority link-1, meter main" in page


def test_a_jackpot_that_leaves_the_meter_above_its_reset_amount_is_no_reset():
    j = Journal()
    j.add(DEFINE_METER, define_meter_body(PARAMS, "slot-tech 4411", BEFORE), BEFORE)
    j.op(TopUp(1_000_000, IN, "promotions 77", "a $20,000 meter"), IN)
    j.op(BookContributions("r1", "CS-07", ((3, 500), (2, 500), (1, 500)), IN), IN)
    for seat, hand, award, pct in ((3, "straight-flush", "10% of meter", 10), (2, "royal-flush", "100% of meter", 100),
                                       (1, "straight-flush", "10% of meter", 10)):
        assert j.op(PayPercentAward("r1", "CS-07", seat, hand, award, Fraction(pct), IN, "floor 1207"), IN)
    (m,) = day_report(j.records, DAY).meters.values()
    # $20,002.25 less 10% is above the reset amount: no reset; 100% is; 10% of $10,000.00 is restored: a reset
    assert [(a.hand, a.jackpot, a.reset) for a in m.awards] == [("straight-flush", True, False),
                                                                ("royal-flush", True, True),
                                                                ("straight-flush", True, True)]
    assert to_json(r := day_report(j.records, DAY))["meters"][0]["resets"] == {"count": 2, "to": ["10000.00"] * 2}
    assert "Resets: 2 (to $10,000.00, $10,000.00)" in render(r, "text")

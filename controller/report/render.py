"""The gaming day's report in its four forms: text for people, JSON exact (money as decimal strings of dollars, times
ISO-8601 UTC), CSV one row per meter and figure (each row naming the table or link authority and the meter), and one
self-contained HTML file (inline CSS, an inline SVG plot of each meter over the day, no JavaScript) to print on A4 or
Letter and sign. Text and HTML are for people: amounts as "$10,017.85", times on the casino's clock to the second
with the zone's abbreviation. Pure: each returns a string."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

from controller.money import (
    UNITS_PER_CENT,
    UNITS_PER_DOLLAR,
    format_cents,
    format_dollars_human,
    format_units,
    format_units_human,
)
from controller.report.build import (
    AUTHORITY,
    TABLE,
    Award,
    DayFaults,
    DayReport,
    Holdings,
    MeterDay,
    Readings,
    downsample,
)
from controller.report.day import GamingDay, local_time
from controller.round.faults import Outage
from controller.round.payout_kind import ENVY, TITLES


def _t(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def seconds(t: timedelta) -> str:
    """A duration as a decimal string of seconds, exact to the microsecond ("83.000250")."""
    us = t // timedelta(microseconds=1)
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _outage(o: Outage, start: datetime, end: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {"from_seq": o.start_seq, "to_seq": o.end_seq, "from": _t(o.start), "to": _t(o.end),
                           "ended_by": o.ended_by or None, "flaps": o.flaps, "seconds": seconds(o.within(start, end))}
    if "reason" in o.detail:
        out["reason"] = o.detail["reason"]
    if "sources" in o.detail:
        out["sources"] = list(o.detail["sources"])
    return out


def faults_json(f: DayFaults, start: datetime, end: datetime) -> dict[str, Any]:
    """The day's device faults (by device) and blocked time (by cause), from the journal."""
    return {
        "device_faults": [{"device": d.device, "kind": d.kind, "seats": list(d.seats), "count": len(d.faults),
                           "flaps": d.flaps, "first": _t(d.first), "last": _t(d.last), "down_seconds": seconds(d.down),
                           "open_at_close": d.open_at_close, "faults": [_outage(o, start, end) for o in d.faults]}
                          for d in f.devices],
        "blocked": {"seconds": seconds(f.blocked),
                    "by_reason": [{"block": b.block, "count": len(b.blocks), "seconds": seconds(b.time),
                                   "blocks": [_outage(o, start, end) for o in b.blocks]} for b in f.blocks]},
    }


def _holdings(h: Holdings) -> dict[str, str]:
    u = format_units
    return {"current": u(h.current), "reserve": u(h.reserve), "overflow": u(h.overflow), "locked": u(h.locked),
            "total": u(h.total)}


def _tally(t: dict[str, tuple[int, int]]) -> dict[str, dict[str, Any]]:
    return {k: {"count": n, "amount": format_cents(c)} for k, (n, c) in t.items()}


def _readings(r: Readings) -> dict[str, Any]:
    return {"hits": r.hits, "wagers_count": r.wagers_count, "wagers_amount": format_cents(r.wagers_cents),
            "paid_by_table": format_cents(r.paid_by_table_cents),
            "paid_by_attendant": format_cents(r.paid_by_attendant_cents),
            "cumulative_payouts": format_cents(r.cumulative_payouts_cents)}


def meter_json(d: MeterDay) -> dict[str, Any]:
    u = format_units
    jackpots, resets = d.jackpots, d.resets
    return {
        "meter": d.meter_id,
        "defined_this_day": d.defined,
        "reset_amount": u(d.reset_units),
        "rate": d.rate,
        "opening": _holdings(d.opening),
        "closing": _holdings(d.closing),
        "readings": {"opening": _readings(d.opening_readings), "closing": _readings(d.closing_readings)},
        "hits": len(d.awards),
        "jackpots": {"count": len(jackpots), "amount": format_cents(sum(a.cents for a in jackpots))},
        "resets": {"count": len(resets), "to": [u(a.meter_after) for a in resets]},
        "wagers": {"rounds": d.rounds_booked, "count": d.wagers_count, "amount": format_cents(d.wagers_cents),
                   "voided_count": d.voided_count, "voided_amount": format_cents(d.voided_cents),
                   "net_count": d.wagers_count - d.voided_count,
                   "net_amount": format_cents(d.wagers_cents - d.voided_cents)},
        "contributions": u(d.contributions),
        "reserved": u(d.reserved),
        "overflowed": u(d.overflowed),
        "from_reserve": u(d.from_reserve),
        "from_overflow": u(d.from_overflow),
        "released_to_overflow": u(d.released_to_overflow),
        "seed": u(d.seed),
        "adjustments": u(d.adjustments),
        "taken": u(d.taken),
        "payouts": u(d.payouts),
        "paid": format_cents(d.paid_cents),
        "awards_by_what": _tally(d.by_what()),
        "awards_by_hand": _tally(d.by_award()),
        "awards_by_paid_by": _tally(d.by_paid_by()),
        "awards_by_approver": _tally(d.by_approver()),
        "awards": [{"seq": a.seq, "time": _t(a.time), "round": a.round_id, "table": a.table, "seat": a.seat,
                    "what": a.what, "hand_of": a.hand_of or None,
                    "hand": a.hand, "award": a.award, "amount": format_cents(a.cents), "paid_by": a.paid_by,
                    "approved_by": a.approved_by, "shares": a.shares, "meter_before": u(a.meter_before),
                    "meter_after": u(a.meter_after)} for a in d.awards],
        "voids": [{"seq": v.seq, "time": _t(v.time), "round": v.round_id, "reason": v.reason, "wagers": v.wagers,
                   "amount": format_cents(v.cents)} for v in d.voids],
        "changes": [{"seq": c.seq, "time": _t(c.time), "kind": c.kind, "who": c.who, "amount": u(c.units),
                     "detail": c.detail} for c in d.changes],
        "reconciliation": {
            "visible": {"opening": u(d.opening.current), "contributions": u(d.contributions),
                        "from_reserve": u(d.from_reserve), "from_overflow": u(d.from_overflow), "seed": u(d.seed),
                        "adjustments": u(d.adjustments), "taken": u(d.taken),
                        "released_to_overflow": u(d.released_to_overflow), "closing": u(d.closing.current),
                        "balanced": d.visible_expected() == d.closing.current},
            "held": {"opening": u(d.opening.total), "contributions": u(d.wagers_in), "seed": u(d.seed),
                     "adjustments": u(d.adjustments), "payouts": u(d.payouts), "closing": u(d.closing.total),
                     "balanced": d.held_expected() == d.closing.total},
        },
        "series": [[_t(t), seq, u(v)] for t, seq, v in d.series],
    }


def to_json(r: DayReport) -> dict[str, Any]:
    g = r.day
    return {
        "report": "gaming day",
        "source": {"kind": r.source.kind, "id": r.source.id},
        "table": r.source.id if r.source.kind == TABLE else None,
        "authority": r.source.id if r.source.kind == AUTHORITY else None,
        "tables": list(r.tables),
        "day": g.day.isoformat(),
        "day_starts": g.starts_at.strftime("%H:%M"),
        "time_zone": g.zone,
        "start": _t(g.start),
        "end": _t(g.end),
        "start_local": local_time(g.start, g.tzinfo),
        "end_local": local_time(g.end, g.tzinfo),
        "head": {"seq": r.head.seq, "hash": r.head.hash, "time": _t(r.head.time)},
        "first_seq": r.first_seq,
        "entries": r.entries,
        "meters": [{"source_id": r.source.id, **meter_json(d)} for d in r.meters.values()],
        "table_events": [{"seq": e.seq, "time": _t(e.time), "kind": e.kind, "detail": e.detail}
                         for e in r.table_events],
        **faults_json(r.faults, g.start, g.end),
    }


# --- CSV: one row per meter and figure ---------------------------------------------------------


def _figures(d: MeterDay) -> list[tuple[str, str]]:
    j = meter_json(d)
    rows: list[tuple[str, str]] = [("reset amount", j["reset_amount"]), ("rate of progression", j["rate"])]
    for side in ("opening", "closing"):
        rows += [(f"{side} {k}", v) for k, v in j[side].items()]
        rows += [(f"{side} reading {k}".replace("_", " "), str(v)) for k, v in j["readings"][side].items()]
    rows += [("hits", str(j["hits"])), ("jackpots count", str(j["jackpots"]["count"])),
             ("jackpots amount", j["jackpots"]["amount"]), ("resets", str(j["resets"]["count"]))]
    rows += [(f"wagers {k}".replace("_", " "), str(v)) for k, v in j["wagers"].items()]
    for k in ("contributions", "reserved", "overflowed", "from_reserve", "from_overflow", "released_to_overflow",
              "seed", "adjustments", "taken", "payouts", "paid"):
        rows.append((k.replace("_", " "), j[k]))
    for group in ("awards_by_what", "awards_by_hand", "awards_by_paid_by", "awards_by_approver"):
        for label, t in j[group].items():
            name = group.replace("_", " ")
            rows += [(f"{name}: {label}: count", str(t["count"])), (f"{name}: {label}: amount", t["amount"])]
    rows.append(("voids", str(len(d.voids))))
    rows.append(("changes", str(len(d.changes))))
    for side in ("visible", "held"):
        rows.append((f"reconciliation {side} balanced", str(j["reconciliation"][side]["balanced"]).lower()))
    return rows


def _fault_figures(f: DayFaults) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for d in f.devices:
        rows += [(f"device {d.device}: faults", str(len(d.faults))), (f"device {d.device}: flaps", str(d.flaps)),
                 (f"device {d.device}: down seconds", seconds(d.down)),
                 (f"device {d.device}: open at close", str(d.open_at_close).lower())]
    rows.append(("blocked seconds", seconds(f.blocked)))
    for b in f.blocks:
        rows += [(f"blocked {b.block}: count", str(len(b.blocks))), (f"blocked {b.block}: seconds", seconds(b.time))]
    return rows


def _csv_field(v: object) -> str:
    s = str(v)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\r\n') else s


CSV_HEADER = "day,source,source_id,meter,figure,value"


def to_csv(r: DayReport) -> str:
    """`day,source,source_id,meter,figure,value`: every row says whose report it is (`source` "table" or "link
    authority", and its id) and which meter (empty: the table's or authority's own figures)."""
    lines = [CSV_HEADER]
    day, src, sid = r.day.day.isoformat(), r.source.kind, r.source.id

    def row(meter: str, k: str, v: object) -> str:
        return ",".join(_csv_field(x) for x in (day, src, sid, meter, k, v))

    for d in r.meters.values():
        lines += [row(d.meter_id, k, v) for k, v in _figures(d)]
    lines += [row("", k, v) for k, v in _fault_figures(r.faults)]
    lines += [row("", "tables", " ".join(r.tables)), row("", "head seq", r.head.seq), row("", "head hash", r.head.hash)]
    return "\r\n".join(lines) + "\r\n"


# --- for people: text and HTML share these words --------------------------------------------------------

PAID_BY = {"attendant": "an attendant", "table": "the table (dealer)"}
PAID_BY_SHORT = {"attendant": "attendant", "table": "table"}
# A payout the table pays on the dealer's claim without a supervisor (a fixed award below the threshold that asks for
# one) is journaled as approved by the one who claimed it: the dealer. Not a supervisor's name.
NO_SUPERVISOR = "no supervisor (the dealer's claim)"


def approver(who: str) -> str:
    """Who approved a payout, for people."""
    return {"": "no one", "dealer": NO_SUPERVISOR}.get(who, who)


def _usd(units: int) -> str:
    return format_units_human(units)


def _cents(cents: int) -> str:
    return format_dollars_human(cents)


def _when(g: GamingDay, t: datetime | None) -> str:
    return "" if t is None else local_time(t, g.tzinfo)


def duration(t: timedelta) -> str:
    """A duration for people, to the second: "0:01:23" (hours:minutes:seconds)."""
    s = t // timedelta(seconds=1)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _n(n: int, thing: str) -> str:
    return f"{n:,} {thing}" + ("" if n == 1 else "s")


def _hand(hand: str) -> str:
    """A hand's label for people: "royal-flush" -> "royal flush"."""
    return hand.replace("-", " ")


def what(a: Award) -> str:
    """What a payout is: "Jackpot", "Envy Bonus", "Fixed award", "Magic Card", "Lucky Bonus"."""
    return TITLES.get(a.what, a.what)


def on_hand(a: Award) -> str:
    """The hand a payout is on, for people: an Envy Bonus's is another player's ("seat 5's royal flush")."""
    hand = _hand(a.hand) or "no hand"
    if a.what == ENVY and a.hand_of.startswith("seat "):
        return f"{a.hand_of}'s {hand}"
    return hand


def title(r: DayReport) -> str:
    return f"Progressive meter report: {r.source.title}, gaming day {r.day.day.strftime('%A %-d %B %Y')}"


def _day_line(r: DayReport) -> str:
    g = r.day
    hours = (g.end - g.start) // timedelta(hours=1)
    return (f"From {_when(g, g.start)} to {_when(g, g.end)} ({hours} hours: the gaming day starts at "
            f"{g.starts_at.strftime('%H:%M')}, {g.zone.rsplit('/', 1)[-1].replace('_', ' ')} time)")


def _tables_line(r: DayReport) -> str:
    if not r.tables:
        return "No table played on the meters this day."
    if r.source.kind == AUTHORITY:
        return "Tables that played on the meters this day: " + ", ".join(r.tables) + "."
    # the journal's own rounds name their table: a cross-check of the title, in words
    return (f"Every round in the journal this day was at table {r.tables[0]}." if len(r.tables) == 1 else
            "Rounds in the journal this day were at tables " + ", ".join(r.tables) + ".")


def readings_rows(d: MeterDay) -> list[tuple[str, str, str]]:
    """(reading, at the opening, at the close): the meters of § 605a.7(a) and what the meter holds."""
    o, c, ro, rc = d.opening, d.closing, d.opening_readings, d.closing_readings
    opened = not d.defined
    rows = [("Visible meter (the jackpot amount shown)", _usd(o.current), _usd(c.current)),
            ("Reserve (hidden, funds the next reset)", _usd(o.reserve), _usd(c.reserve)),
            ("Overflow (above the ceiling)", _usd(o.overflow), _usd(c.overflow)),
            ("Jackpots locked, awaiting a supervisor", _usd(o.locked), _usd(c.locked)),
            ("Held in all", _usd(o.total), _usd(c.total)),
            ("Hits (payouts counted)", str(ro.hits), str(rc.hits)),
            ("Qualifying wagers (count)", f"{ro.wagers_count:,}", f"{rc.wagers_count:,}"),
            ("Qualifying wagers (amount)", _cents(ro.wagers_cents), _cents(rc.wagers_cents)),
            ("Paid by the table", _cents(ro.paid_by_table_cents), _cents(rc.paid_by_table_cents)),
            ("Paid by an attendant", _cents(ro.paid_by_attendant_cents), _cents(rc.paid_by_attendant_cents)),
            ("Cumulative payouts", _cents(ro.cumulative_payouts_cents), _cents(rc.cumulative_payouts_cents))]
    return rows if opened else [(k, "not yet defined", v) for k, _, v in rows]


def day_rows(d: MeterDay) -> list[tuple[str, str]]:
    """The day's movements of a meter, in words."""
    j = d.jackpots
    resets = d.resets
    net = d.wagers_count - d.voided_count
    rows = [("Qualifying wagers", f"{d.wagers_count:,} for {_cents(d.wagers_cents)} in {_n(d.rounds_booked, 'round')}"),
            ("Returned by voids", f"{d.voided_count:,} for {_cents(d.voided_cents)} in {_n(len(d.voids), 'round')}"),
            ("Qualifying wagers, net of voids", f"{net:,} for {_cents(d.wagers_cents - d.voided_cents)}"),
            (f"Contributions to the meter (rate of progression {d.rate or '?'})", _usd(d.contributions)),
            ("Contributions to the reserve", _usd(d.reserved)),
            ("Contributions to the overflow", _usd(d.overflowed)),
            ("Hits (every payout)", f"{len(d.awards):,} for {_cents(d.paid_cents)}"),
            ("Jackpots paid (percentage of the meter)", f"{len(j):,} for {_cents(sum(a.cents for a in j))}"),
            ("Taken from the meter by jackpots", _usd(d.taken)),
            ("Resets", f"{len(resets):,}" + (" (to " + ", ".join(_usd(a.meter_after) for a in resets) + ")"
                                              if resets else "") + f"; reset amount {_usd(d.reset_units)}"),
            ("Moved from the reserve to the meter", _usd(d.from_reserve)),
            ("Moved from the overflow to the meter", _usd(d.from_overflow)),
            ("Put in by the operator (seed: a new meter, top-ups, resets)", _usd(d.seed)),
            ("Authorized adjustments", _usd(d.adjustments)),
            ("Paid to players by the table", _cents(sum(a.cents for a in d.awards if a.paid_by == "table"))),
            ("Paid to players by an attendant", _cents(sum(a.cents for a in d.awards if a.paid_by != "table")))]
    return rows


def reconciliation(d: MeterDay) -> list[tuple[str, bool, list[tuple[str, str]]]]:
    """Each reconciliation: its title, whether it balances, and its terms ((sign and name, amount); the last is the
    closing amount the sum must equal)."""
    return [
        ("the meter's visible amount", d.visible_expected() == d.closing.current, [
            ("Opening", _usd(d.opening.current)), ("+ contributions", _usd(d.contributions)),
            ("+ from the reserve", _usd(d.from_reserve)), ("+ from the overflow", _usd(d.from_overflow)),
            ("+ put in by the operator", _usd(d.seed)), ("+ adjustments", _usd(d.adjustments)),
            ("− taken by jackpots", _usd(d.taken)), ("− released to the overflow", _usd(d.released_to_overflow)),
            ("= closing", _usd(d.closing.current))]),
        ("all the meter holds (visible, reserve, overflow, locked)", d.held_expected() == d.closing.total, [
            ("Opening", _usd(d.opening.total)), ("+ contributions (meter, reserve, overflow)", _usd(d.wagers_in)),
            ("+ put in by the operator", _usd(d.seed)), ("+ adjustments", _usd(d.adjustments)),
            ("− paid out of the meter", _usd(d.payouts)), ("= closing", _usd(d.closing.total))]),
    ]


def _event(kind: str, detail: str) -> str:
    if kind == "claim":
        cid, _, event = detail.partition(" ")
        return f"Claim {cid}: {event or 'recorded'}"
    return f"{kind[:1].upper()}{kind[1:]}: {detail}"


# --- text ------------------------------------------------------------------------------------------


def to_text(r: DayReport) -> str:
    g = r.day
    out = [title(r), _day_line(r), _tables_line(r),
           f"Journal: {r.entries:,} entries this day; at the close, entry {r.head.seq} with hash {r.head.hash}", ""]
    for d in r.meters.values():
        out.append(f"{_cap(r.source.meter_name(d.meter_id))} of {r.source.title}"
                   + (" (defined this day)" if d.defined else ""))
        out.append("  Meter readings (58 Pa. Code § 605a.7(a)): at the opening / at the close")
        out += [f"    {k}: {o} / {c}" for k, o, c in readings_rows(d)]
        out.append("  The day:")
        out += [f"    {k}: {v}" for k, v in day_rows(d)]
        out.append(f"  Payouts ({_n(len(d.awards), 'hit')}):" if d.awards else "  Payouts: none")
        for a in d.awards:
            at = f"table {a.table}, " if r.source.kind == AUTHORITY or len(r.tables) > 1 else ""
            out.append(f"    {_when(g, a.time)}, {at}round {a.round_id}, seat {a.seat}: {what(a)} on {on_hand(a)} "
                       f"({a.award}), {_cents(a.cents)}, paid by {PAID_BY.get(a.paid_by, a.paid_by)}, approved by "
                       f"{approver(a.approved_by)}"
                       + (f"; meter {_usd(a.meter_before)} before, {_usd(a.meter_after)} after" if a.jackpot else "")
                       + f" (entry {a.seq})")
        out += [f"  {w}: {n} for {_cents(c)}" for w, (n, c) in
                ((TITLES.get(k, k), t) for k, t in d.by_what().items())]
        out += [f"  Approved by {approver(who)}: {_n(n, 'payout')} for {_cents(c)}" for who, (n, c) in
                d.by_approver().items()]
        out.append(f"  Voids ({len(d.voids)}):" if d.voids else "  Voids: none")
        out += [f"    {_when(g, v.time)}, round {v.round_id}: {v.wagers} wagers, {_cents(v.cents)} returned "
                f"({v.reason}; entry {v.seq})" for v in d.voids]
        out.append("  Adjustments, top-ups and parameters:" if d.changes else "  Adjustments, top-ups and parameters: none")
        out += [f"    {_when(g, c.time)}: {_change(c.kind)} by {c.who or 'no one named'}: {_usd(c.units)} ({c.detail}; "
                f"entry {c.seq})" for c in d.changes]
        for name, ok, terms in reconciliation(d):
            out.append(f"  Reconciliation: {name} balances: {'yes' if ok else 'NO'}")
            out.append("    " + " ".join(f"{k.lower() if i else k} {v}" for i, (k, v) in enumerate(terms)))
        out.append("")
    out.append("Table events (journaled):" if r.table_events else "Table events (journaled): none")
    out += [f"  {_when(g, e.time)}: {_event(e.kind, e.detail)} (entry {e.seq})" for e in r.table_events]
    out += ["", *_faults_text(r), "", *_sign_text(r), ""]
    return "\n".join(out)


def _sign_text(r: DayReport) -> list[str]:
    """The block accounting signs, as the HTML's (a printed text report is signed too)."""
    line = "_" * 20
    out = ["Prepared and reviewed:"]
    for who in ("Prepared by", "Reviewed by"):
        out += ["", f"  {who + ':':<13} Name {line}  Title and credential number {line}",
                f"  {'':<13} Signature {line}  Date {'_' * 14}"]
    return [*out, "", f"This report is of the journal up to entry {r.head.seq} (its hash is at the top):",
            f"`progressivectl audit verify --expect-head {r.head.seq}:HASH` proves later that the journal still holds "
            "this day as printed."]


_CHANGES = {"top-up": "Top-up", "adjust": "Adjustment", "change-params": "Parameters changed",
            "define-meter": "Meter defined"}


def _change(kind: str) -> str:
    return _CHANGES.get(kind, kind)


# what ended a fault or a block, for people
_ENDED = {"up": "back", "unblocked": "lifted", "start": "ended by the controller's restart (when it ended, unseen)",
          "stop": "ended by the controller's stop"}


def _faults_text(r: DayReport) -> list[str]:
    f, g = r.faults, r.day
    out = ["Device faults (journaled):" if f.devices else "Device faults (journaled): none"]
    for d in f.devices:
        which = (("seat " if len(d.seats) == 1 else "seats ") + ", ".join(map(str, d.seats))) if d.seats \
            else "the whole table"
        out.append(f"  {d.device} ({d.kind}, disables {which}): {_n(len(d.faults), 'fault')}, {_n(d.flaps, 'flap')}, down "
                   f"{duration(d.down)} from {_when(g, d.first)} to {_when(g, d.last)}"
                   + (", down at the close" if d.open_at_close else ""))
        out += [f"    down {_when(g, o.start)} ({o.detail.get('reason') or 'no reason given'}; entry {o.start_seq}), "
                + (f"{_ENDED.get(o.ended_by, o.ended_by)} {_when(g, o.end)} (entry {o.end_seq})" if o.end
                   else "not back at the close")
                + f": {duration(o.within(g.start, g.end))} this day, {_n(o.flaps, 'flap')}" for o in d.faults]
    out.append(f"Progressive wagering blocked (journaled): {duration(f.blocked)} in all")
    for b in f.blocks:
        out.append(f"  {b.block}: {_n(len(b.blocks), 'time')}, {duration(b.time)}")
        out += [f"    from {_when(g, o.start)} (entry {o.start_seq}) "
                + (f"{_ENDED.get(o.ended_by, o.ended_by)} {_when(g, o.end)} (entry {o.end_seq})"
                   if o.end else "to the close (still blocked)")
                + f" by {', '.join(o.detail.get('sources', ())) or 'no device named'}: "
                f"{duration(o.within(g.start, g.end))}, {_n(o.flaps, 'flap')}" for o in b.blocks]
    return out


# --- HTML ------------------------------------------------------------------------------------------

# On screen and on paper: black on white whatever the viewer's theme; on paper each meter starts a page, no table
# row or signature line is cut across two, headings stay with what follows. No @page size: A4 and Letter both fit.
_CSS = """:root{color-scheme:light}
html,body{background:#fff;color:#111}
body{font:10.5pt/1.35 "DejaVu Sans",system-ui,sans-serif;margin:1.5em auto;max-width:190mm;padding:0 1em}
h1{font-size:15pt;margin:0 0 .3em}h2{font-size:12.5pt;margin:1.3em 0 .35em;border-bottom:1px solid #777}
h3{font-size:11pt;margin:1em 0 .3em}p{margin:.3em 0}
table{border-collapse:collapse;margin:.3em 0 .6em;width:100%}
td,th{border:1px solid #aaa;padding:.15em .45em;text-align:left;vertical-align:top}
thead th,tr.head th{background:#eee}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.t{white-space:nowrap}.anchor{font-family:"DejaVu Sans Mono",monospace;font-size:8.5pt;word-break:break-all}
table.recon td.n{width:11em}table.recon tr.total td,table.recon tr.total th{border-top:2px solid #111;font-weight:bold}
.ok{font-weight:bold}.bad{font-weight:bold;color:#a00}
figure{margin:.4em 0}figure svg{display:block;width:100%;height:auto}figcaption{font-size:9pt;color:#333}
.note{font-size:9pt;color:#333}
table.sign td{height:2.6em}table.sign th{width:8em}
table.readings td.n,table.readings th.n{width:27%;white-space:normal}table.payouts{font-size:9pt}
table.payouts td:first-child{min-width:6.5em}table.payouts td,table.payouts th{padding:.15em .3em}
table.glance{font-size:9pt}table.glance td.n{white-space:normal}
@page{margin:14mm}
@page{@bottom-right{content:"Page " counter(page) " of " counter(pages);font-size:8pt}}
@media print{body{margin:0;max-width:none;padding:0;font-size:9.5pt}
section.meter{break-before:page}h2,h3{break-after:avoid}tr,figure,.sign,table.recon{break-inside:avoid}
thead{display:table-header-group}a{color:inherit}}"""

# The report's plot: the meter over the gaming day, time on the casino's clock.
PW, PH = 720, 260
PL, PR, PT, PB = 92, 18, 14, 46  # margins: the amounts' labels on the left, the hours' below


def _amount_ticks(lo: int, hi: int) -> tuple[int, int, int]:
    """(bottom, top, step) of the amount axis in units: a step of 1, 2 or 5 times a power of ten (from a cent) that
    cuts [lo, hi] into at most 5, bottom and top on whole steps around it."""
    step = UNITS_PER_CENT
    while True:
        for m in (1, 2, 5):
            s = step * m
            bottom, top = lo // s * s, -(-hi // s) * s
            if top == bottom:  # a flat line: in the middle, a dollar either side
                return lo - UNITS_PER_DOLLAR, lo + UNITS_PER_DOLLAR, UNITS_PER_DOLLAR
            if (top - bottom) // s <= 5:
                return bottom, top, s
        step *= 10


def _hour_ticks(g: GamingDay, every: int = 3) -> list[datetime]:
    """The ticks of the time axis: every `every` hours from the first whole hour of the casino's clock at or after
    the day's start, and the day's end when it is a whole hour too (a start at 06:00: 06:00, 09:00, ..., 06:00)."""
    first = g.local(g.start).replace(minute=0, second=0, microsecond=0)
    if first < g.local(g.start):
        first += timedelta(hours=1)
    t = first.astimezone(g.start.tzinfo)
    ticks = []
    while t <= g.end:
        ticks.append(t)
        t += timedelta(hours=every)
    return ticks


def plot_caption(d: MeterDay, g: GamingDay, name: str = "") -> str:
    """What the plot shows, in the same figures as the report's text: the opening (or when the meter was defined and
    with what), the close, the high and the low, the jackpots. `name`: the meter as people know it (Source's)."""
    values = [v for _, _, v in d.series]
    if d.defined:
        t0, _, v0 = d.series[0]
        start = f"defined at {_when(g, t0)} with {_usd(v0)} (the reset amount, put in by the operator; no opening)"
    else:
        start = f"{_usd(d.opening.current)} at the opening, {_when(g, g.start)}"
    jackpots = d.jackpots
    falls = f"; {len(jackpots)} jackpot{'s' if len(jackpots) != 1 else ''} paid (each a fall, marked)" if jackpots \
        else "; no jackpot paid"
    return (f"{_cap(name or f'meter {d.meter_id}')}, visible amount over the gaming day: {start}; "
            f"{_usd(d.closing.current)} at the close, {_when(g, g.end)}; high {_usd(max(values))}, low {_usd(min(values))}{falls}.")


def day_plot_svg(d: MeterDay, g: GamingDay, name: str = "") -> str:
    """The visible meter over the day as an inline SVG step line with axes: amounts on whole steps, the day's hours
    on the casino's clock every 3 hours; each jackpot marked at its amount before the payout. Integer pixels computed
    from the exact amounts and times: no float near the money."""
    if not d.series:
        return ""
    pts = [(t, v) for t, _, v in d.series]
    values = [v for _, v in pts] + [a.meter_before for a in d.jackpots]
    bottom, top, step = _amount_ticks(min(values), max(values))
    span_us = max((g.end - g.start) // timedelta(microseconds=1), 1)
    w, h = PW - PL - PR, PH - PT - PB

    def x(t: datetime) -> int:
        us = min(max((t - g.start) // timedelta(microseconds=1), 0), span_us)
        return PL + w * us // span_us

    def y(v: int) -> int:
        return PT + h - h * (v - bottom) // (top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {PW} {PH}" width="{PW}" height="{PH}" role="img" '
           f'aria-label="{escape(plot_caption(d, g, name))}" font-family="DejaVu Sans, sans-serif" font-size="11">',
           f'<rect x="{PL}" y="{PT}" width="{w}" height="{h}" fill="#fff" stroke="#888"/>']
    for v in range(bottom, top + 1, step):
        out.append(f'<line x1="{PL - 4}" y1="{y(v)}" x2="{PL + w}" y2="{y(v)}" stroke="#ddd"/>'
                   f'<text x="{PL - 7}" y="{y(v) + 4}" text-anchor="end">{escape(_usd(v))}</text>')
    zones = []
    for t in _hour_ticks(g):
        lt = g.local(t)
        zones.append(lt.strftime("%Z"))
        out.append(f'<line x1="{x(t)}" y1="{PT}" x2="{x(t)}" y2="{PT + h + 4}" stroke="#ddd"/>'
                   f'<text x="{x(t)}" y="{PT + h + 17}" text-anchor="middle">{lt.strftime("%H:%M")}</text>')
    names = "/".join(dict.fromkeys(zones))
    out.append(f'<text x="{PL + w // 2}" y="{PH - 6}" text-anchor="middle">{escape(g.local(g.start).strftime("%a %-d %b"))}'
               f' {g.starts_at.strftime("%H:%M")} to {escape(g.local(g.end).strftime("%a %-d %b"))} '
               f'{g.starts_at.strftime("%H:%M")}, time on the casino\'s clock ({escape(names)})</text>')
    path: list[str] = []
    for t, v in pts:
        if path:
            path.append(f"{x(t)},{path[-1].split(',')[1]}")
        path.append(f"{x(t)},{y(v)}")
    out.append(f'<polyline fill="none" stroke="#1a5fb4" stroke-width="2" points="{" ".join(path)}"/>')
    for a in d.jackpots:
        out.append(f'<circle cx="{x(a.time)}" cy="{y(a.meter_before)}" r="4" fill="#c01c28"><title>'
                   f'{escape(f"{what(a)} {_cents(a.cents)} at {_when(g, a.time)}")}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def series_json(series: Mapping[str, Sequence[tuple[datetime, int, int]]], span: str, start: datetime,
                end: datetime, edges: Sequence[datetime]) -> list[dict[str, Any]]:
    """The control socket's `meter_series` answer (docs/operations.md): for each meter, in meter order, its
    amounts over [start, end] downsampled to at most POINTS_PER_INTERVAL a span's interval (`edges`), each point
    [time ISO-8601, amount a decimal string of dollars]; the amounts at the start and the end, the high and the low
    of every entry (not only of the points kept), and how many entries moved it."""
    u = format_units
    out = []
    for meter, points in sorted(series.items()):
        values = [v for _, _, v in points]
        out.append({"meter": meter, "span": span, "start": _t(start), "end": _t(end),
                    "opening": u(values[0]), "closing": u(values[-1]), "high": u(max(values)), "low": u(min(values)),
                    "entries": sum(1 for t, seq, _ in points if seq and t != end),
                    "points": [[_t(t), u(v)] for t, _, v in downsample(points, edges)]})
    return out


def _table(head: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[int] = (),
           cls: str = "") -> str:
    """A table with a heading row; columns `numeric` right-aligned; "None." when there is no row."""
    if not rows:
        return '<p class="none">Nothing this day.</p>'

    def cell(i: int, v: object, tag: str = "td") -> str:
        return f'<{tag} class="n">{escape(str(v))}</{tag}>' if i in numeric else f"<{tag}>{escape(str(v))}</{tag}>"

    h = "".join(cell(i, x, "th") for i, x in enumerate(head))
    b = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table{f" class={cls!r}" if cls else ""}><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'


def _summary_html(r: DayReport) -> str:
    rows = []
    for d in r.meters.values():
        j = d.jackpots
        rows.append([r.source.meter_name(d.meter_id), "not yet defined" if d.defined else _usd(d.opening.current),
                     _usd(d.contributions),
                     f"{len(j)} for {_cents(sum(a.cents for a in j))}", str(len(d.resets)), _usd(d.closing.current),
                     str(len(d.awards)), str(len(d.voids)),
                     ", ".join(approver(who) for who in d.by_approver() if who) or "none"])
    return "<h2>The day at a glance</h2>" + _table(
        ["Meter", "Opening", "Contributions", "Jackpots paid", "Resets", "Closing", "Hits", "Voids",
         "Payouts approved by"], rows, numeric=(1, 2, 4, 5, 6, 7), cls="glance")


def _meter_html(r: DayReport, d: MeterDay) -> str:
    g, name = r.day, r.source.meter_name(d.meter_id)
    parts = [f'<section class="meter" data-meter="{escape(d.meter_id)}">'
             f"<h2>{escape(r.source.title)}, {escape(name)}"
             + (" (defined this day)" if d.defined else "") + "</h2>",
             f"<p>Reset amount {escape(_usd(d.reset_units))}; rate of progression {escape(d.rate or '?')} "
             f"(at the close).</p>",
             f'<figure>{day_plot_svg(d, g, name)}<figcaption>{escape(plot_caption(d, g, name))}</figcaption></figure>',
             "<h3>Meter readings (58 Pa. Code § 605a.7(a))</h3>",
             _table(["Reading", f"At the opening, {_when(g, g.start)}", f"At the close, {_when(g, g.end)}"],
                    readings_rows(d), numeric=(1, 2), cls="readings"),
             "<h3>The day</h3>", _table(["The day's movements", "Amount"], day_rows(d), numeric=(1,)),
             f"<h3>Payouts ({_n(len(d.awards), 'hit')})</h3>",
             _payouts_html(r, d)]
    if d.awards:
        parts.append(_table(["Payouts by what they are", "Count", "Amount"],
                            [[TITLES.get(k, k), n, _cents(c)] for k, (n, c) in d.by_what().items()],
                            numeric=(1, 2)))
    parts += ["<h3>Supervisors' approvals</h3>",
              _table(["Supervisor", "Payouts approved", "Amount"],
                     [[approver(who), n, _cents(c)] for who, (n, c) in d.by_approver().items()], numeric=(1, 2)),
              f"<h3>Voids ({len(d.voids)})</h3>",
              _table(["Time", "Round", "Wagers returned", "Amount", "Reason (and who)", "Entry"],
                     [[_when(g, v.time), v.round_id, v.wagers, _cents(v.cents), v.reason, v.seq] for v in d.voids],
                     numeric=(2, 3, 5)),
              "<h3>Adjustments, top-ups and parameters</h3>",
              _table(["Time", "What", "By", "Amount", "Detail", "Entry"],
                     [[_when(g, c.time), _change(c.kind), c.who or "no one named", _usd(c.units), c.detail, c.seq]
                      for c in d.changes], numeric=(3, 5)),
              "<h3>Reconciliation</h3>"]
    for name, ok, terms in reconciliation(d):
        body = "".join(f'<tr{" class=total" if k.startswith("=") else ""}><th>{escape(k)}</th>'
                       f'<td class="n">{escape(v)}</td></tr>' for k, v in terms)
        parts.append(f"<p>Reconciliation: {escape(name)} balances: "
                     f'<span class="{"ok" if ok else "bad"}">{"yes" if ok else "NO"}</span></p>'
                     f'<table class="recon"><tbody>{body}</tbody></table>')
    parts.append("</section>")
    return "".join(parts)


def _payouts_html(r: DayReport, d: MeterDay) -> str:
    """Each payout of the meter; at a link authority (or a journal of several tables), which table it was at."""
    g = r.day
    tables = r.source.kind == AUTHORITY or len(r.tables) > 1
    rows = [[_when(g, a.time), *([a.table] if tables else []), a.round_id, a.seat, what(a),
             f"{on_hand(a)} ({a.award})", _cents(a.cents),
             f"{_usd(a.meter_before)} → {_usd(a.meter_after)}" if a.jackpot else "",
             PAID_BY_SHORT.get(a.paid_by, a.paid_by), approver(a.approved_by), a.seq] for a in d.awards]
    head = ["Time", *(["Table"] if tables else []), "Round", "Seat", "What", "On the hand (award)", "Amount",
            "Meter before → after", "Paid by", "Approved by", "Entry"]
    k = 1 if tables else 0
    return _table(head, rows, numeric=(2 + k, 5 + k, 9 + k), cls="payouts")


def _sign_html(r: DayReport) -> str:
    """The block accounting signs (as the table inventory slip is signed: § 465a.36(e)(5), credential number as
    § 465a.36(f)(3)(iv) asks of a floorperson)."""
    rows = "".join(f"<tr><th>{who}</th><td></td><td></td><td></td><td></td></tr>"
                   for who in ("Prepared by", "Reviewed by"))
    return ('<section class="sign"><h2>Prepared and reviewed</h2>'
            '<table class="sign"><thead><tr><th></th><th>Name</th><th>Title and credential number</th>'
            f"<th>Signature</th><th>Date</th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p class=\"note\">This report is of the journal up to entry {r.head.seq}; its hash "
            f'<span class="anchor">{escape(r.head.hash)}</span> proves later that the journal still holds this day '
            f"as printed (<code>progressivectl audit verify --expect-head {r.head.seq}:HASH</code>).</p></section>")


def to_html(r: DayReport) -> str:
    g = r.day
    head = title(r)
    parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(head)}</title>'
             f"<style>{_CSS}\n@page{{@bottom-left{{content:{_css_string(_running_head(r))};font-size:8pt}}}}</style>"
             "</head><body>",
             f"<header><h1>{escape(head)}</h1><p>{escape(_day_line(r))}.</p><p>{escape(_tables_line(r))} "
             f"{r.entries:,} journal entries this day.</p></header>",
             _summary_html(r)]
    parts += [_meter_html(r, d) for d in r.meters.values()]
    parts.append('<section class="events"><h2>Table events (journaled)</h2>' + _table(
        ["Time", "Event", "Entry"], [[_when(g, e.time), _event(e.kind, e.detail), e.seq] for e in r.table_events],
        numeric=(2,)) + _faults_html(r) + "</section>")
    parts.append(_sign_html(r))
    parts.append("</body></html>\n")
    return "".join(parts)


def _running_head(r: DayReport) -> str:
    """What each printed page says at its foot, so that a loose page still says whose and which day it is."""
    return f"Progressive meter report: {r.source.title}, gaming day {r.day.day.isoformat()}"


def _css_string(text: str) -> str:
    """`text` as a CSS string inside <style>: quotes and backslashes escaped, "<" too (no "</style>" in it)."""
    return '"' + "".join(f"\\{ord(c):x} " if c in '"\\<>' or ord(c) < 32 else c for c in text) + '"'


def _faults_html(r: DayReport) -> str:
    f, g = r.faults, r.day
    devices = _table(["Device", "Kind", "Disables", "Faults", "Flaps", "First", "Last", "Down", "Down at the close"],
                     [[d.device, d.kind, ", ".join(f"seat {s}" for s in d.seats) or "the table", len(d.faults),
                       d.flaps, _when(g, d.first), _when(g, d.last), duration(d.down),
                       "yes" if d.open_at_close else "no"] for d in f.devices], numeric=(3, 4, 7))
    each = _table(["Device", "Down", "Reason", "Back", "Flaps", "This day", "Entries"],
                  [[d.device, _when(g, o.start), o.detail.get("reason", ""),
                    _when(g, o.end) or "not back at the close", o.flaps, duration(o.within(g.start, g.end)),
                    f"{o.start_seq}–{o.end_seq}" if o.end_seq else str(o.start_seq)]
                   for d in f.devices for o in d.faults], numeric=(4, 5))
    blocks = _table(["Cause", "Times", "Time blocked"], [[b.block, len(b.blocks), duration(b.time)] for b in f.blocks],
                    numeric=(1, 2))
    return (f"<h2>Device faults</h2>{devices}{each if f.devices else ''}<h2>Progressive wagering blocked</h2>"
            f"<p>{escape(duration(f.blocked))} in all (causes at the same time counted once).</p>{blocks}")


def render(r: DayReport, form: str) -> str:
    """The report as `form`: "text", "json", "csv" or "html"."""
    import json

    if form == "json":
        return json.dumps(to_json(r), indent=2) + "\n"
    return {"text": to_text, "csv": to_csv, "html": to_html}[form](r)


FORMS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}  # form -> file suffix


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["CSV_HEADER", "FORMS", "NO_SUPERVISOR", "PAID_BY", "PAID_BY_SHORT", "PB", "PH", "PL", "PR", "PT", "PW",
           "approver", "day_plot_svg", "day_rows", "duration", "faults_json", "meter_json", "on_hand", "plot_caption",
           "readings_rows", "reconciliation", "render", "seconds", "series_json", "title", "to_csv", "to_html",
           "to_json", "to_text", "what"]

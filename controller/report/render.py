"""The gaming day's report in its four forms: text for people, JSON exact (money as decimal strings), CSV one row
per meter and figure, and one self-contained HTML file (inline CSS, an inline SVG plot of each meter over the day,
no JavaScript) that prints on A4 or Letter. Pure: each returns a string."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

from ..faults import Outage
from ..money import format_cents, format_units
from .build import DayFaults, DayReport, Holdings, MeterDay, downsample


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


def meter_json(d: MeterDay) -> dict[str, Any]:
    u = format_units
    return {
        "meter": d.meter_id,
        "defined_this_day": d.defined,
        "opening": _holdings(d.opening),
        "closing": _holdings(d.closing),
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
        "awards_by_hand": _tally(d.by_award()),
        "awards_by_paid_by": _tally(d.by_paid_by()),
        "awards_by_approver": _tally(d.by_approver()),
        "awards": [{"seq": a.seq, "time": _t(a.time), "round": a.round_id, "table": a.table, "seat": a.seat,
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
        "day": g.day.isoformat(),
        "day_starts": g.starts_at.strftime("%H:%M"),
        "time_zone": g.zone,
        "start": _t(g.start),
        "end": _t(g.end),
        "head": {"seq": r.head.seq, "hash": r.head.hash, "time": _t(r.head.time)},
        "first_seq": r.first_seq,
        "entries": r.entries,
        "meters": [meter_json(d) for d in r.meters.values()],
        "table_events": [{"seq": e.seq, "time": _t(e.time), "kind": e.kind, "detail": e.detail}
                         for e in r.table_events],
        **faults_json(r.faults, g.start, g.end),
    }


# --- CSV: one row per meter and figure ---------------------------------------------------------


def _figures(d: MeterDay) -> list[tuple[str, str]]:
    j = meter_json(d)
    rows: list[tuple[str, str]] = []
    for side in ("opening", "closing"):
        rows += [(f"{side} {k}", v) for k, v in j[side].items()]
    rows += [(f"wagers {k}".replace("_", " "), str(v)) for k, v in j["wagers"].items()]
    for k in ("contributions", "reserved", "overflowed", "from_reserve", "from_overflow", "released_to_overflow",
              "seed", "adjustments", "taken", "payouts", "paid"):
        rows.append((k.replace("_", " "), j[k]))
    for group in ("awards_by_hand", "awards_by_paid_by", "awards_by_approver"):
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


def to_csv(r: DayReport) -> str:
    lines = ["day,meter,figure,value"]
    day = r.day.day.isoformat()
    for d in r.meters.values():
        lines += [",".join(_csv_field(x) for x in (day, d.meter_id, k, v)) for k, v in _figures(d)]
    lines += [",".join(_csv_field(x) for x in (day, "", k, v)) for k, v in _fault_figures(r.faults)]
    lines.append(",".join(_csv_field(x) for x in (day, "", "head seq", r.head.seq)))
    lines.append(",".join(_csv_field(x) for x in (day, "", "head hash", r.head.hash)))
    return "\r\n".join(lines) + "\r\n"


# --- text ------------------------------------------------------------------------------------------


def _d(units: int) -> str:
    return "$" + format_units(units)


def to_text(r: DayReport) -> str:
    g = r.day
    out = [f"Gaming day {g.day.isoformat()}: {_t(g.start)} to {_t(g.end)} ({g.starts_at.strftime('%H:%M')} "
           f"{g.zone})",
           f"Journal at the day's close: entry {r.head.seq} {r.head.hash} ({r.entries} entries this day)", ""]
    for d in r.meters.values():
        j = meter_json(d)
        w = j["wagers"]
        out.append(f"Meter {d.meter_id}" + (" (defined this day)" if d.defined else ""))
        for side, h in (("opening", d.opening), ("closing", d.closing)):
            out.append(f"  {side}: meter {_d(h.current)}, reserve {_d(h.reserve)}, overflow {_d(h.overflow)}, "
                       f"locked {_d(h.locked)}; held {_d(h.total)}")
        out.append(f"  qualifying wagers: {w['count']} for ${w['amount']} in {w['rounds']} rounds; voided "
                   f"{w['voided_count']} for ${w['voided_amount']}; net {w['net_count']} for ${w['net_amount']}")
        out.append(f"  contributions {_d(d.contributions)} to the meter, {_d(d.reserved)} to reserve, "
                   f"{_d(d.overflowed)} to overflow; seed {_d(d.seed)}; adjustments {_d(d.adjustments)}")
        out.append(f"  payouts from the meter {_d(d.payouts)}; paid to players ${format_cents(d.paid_cents)}")
        for group, title in (("awards_by_hand", "by hand"), ("awards_by_paid_by", "paid by"),
                             ("awards_by_approver", "approved by")):
            for label, t in j[group].items():
                out.append(f"  awards {title} {label}: {t['count']} for ${t['amount']}")
        for a in d.awards:
            out.append(f"  award #{a.seq} {_t(a.time)} round {a.round_id} seat {a.seat} {a.label} "
                       f"${format_cents(a.cents)} paid by {a.paid_by}, approved by {a.approved_by}")
        for v in d.voids:
            out.append(f"  void #{v.seq} {_t(v.time)} round {v.round_id}: {v.wagers} wagers ${format_cents(v.cents)} "
                       f"returned ({v.reason})")
        for c in d.changes:
            out.append(f"  {c.kind} #{c.seq} {_t(c.time)} by {c.who}: {_d(c.units)} ({c.detail})")
        rv, rh = j["reconciliation"]["visible"], j["reconciliation"]["held"]
        out.append(f"  reconciliation, meter: {rv['opening']} + contributions {rv['contributions']} + from reserve "
                   f"{rv['from_reserve']} + from overflow {rv['from_overflow']} + seed {rv['seed']} + adjustments "
                   f"{rv['adjustments']} - taken {rv['taken']} - released to overflow {rv['released_to_overflow']} "
                   f"= {rv['closing']}: balanced")
        out.append(f"  reconciliation, held: {rh['opening']} + contributions {rh['contributions']} + seed "
                   f"{rh['seed']} + adjustments {rh['adjustments']} - payouts {rh['payouts']} = {rh['closing']}: "
                   "balanced")
        out.append("")
    out.append("Table events (journaled):" if r.table_events else "Table events (journaled): none")
    out += [f"  #{e.seq} {_t(e.time)} {e.kind}: {e.detail}" for e in r.table_events]
    out += ["", *_faults_text(r), ""]
    return "\n".join(out)


# what ended a fault or a block, for people
_ENDED = {"up": "back", "unblocked": "lifted", "start": "ended by the controller's restart (when it ended, unseen)",
          "stop": "ended by the controller's stop"}


def _faults_text(r: DayReport) -> list[str]:
    f, g = r.faults, r.day
    out = ["Device faults (journaled):" if f.devices else "Device faults (journaled): none"]
    for d in f.devices:
        what = f"seats {', '.join(map(str, d.seats))}" if d.seats else "the whole table"
        out.append(f"  {d.device} ({d.kind}, disables {what}): {len(d.faults)} faults, {d.flaps} flaps, down "
                   f"{seconds(d.down)} s from {_t(d.first)} to {_t(d.last)}" + (", down at the close" if d.open_at_close
                                                                                 else ""))
        out += [f"    down #{o.start_seq} {_t(o.start)} ({o.detail.get('reason') or 'no reason given'}), "
                + (f"{_ENDED.get(o.ended_by, o.ended_by)} #{o.end_seq} {_t(o.end)}" if o.end else "not back at the close")
                + f": {seconds(o.within(g.start, g.end))} s this day, {o.flaps} flaps" for o in d.faults]
    out.append(f"Progressive wagering blocked (journaled): {seconds(f.blocked)} s in all")
    for b in f.blocks:
        out.append(f"  {b.block}: {len(b.blocks)} times, {seconds(b.time)} s")
        out += [f"    from #{o.start_seq} {_t(o.start)} " + (f"{_ENDED.get(o.ended_by, o.ended_by)} #{o.end_seq} {_t(o.end)}"
                                                          if o.end else "to the close (still blocked)")
                + f" by {', '.join(o.detail.get('sources', ())) or '?'}: {seconds(o.within(g.start, g.end))} s, "
                f"{o.flaps} flaps" for o in b.blocks]
    return out


# --- HTML ------------------------------------------------------------------------------------------

_CSS = """body{font:11pt/1.35 system-ui,sans-serif;margin:1.5em;color:#111}
h1{font-size:16pt;margin:0 0 .2em}h2{font-size:13pt;margin:1.2em 0 .3em;border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #bbb;padding:.15em .5em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.anchor{font-family:monospace;word-break:break-all}
svg{border:1px solid #bbb;max-width:100%;height:auto}.note{font-size:9pt;color:#333}
@media print{body{margin:0}h2{break-after:avoid}section{break-inside:avoid}a{color:inherit}}"""

W, H, PAD = 720, 220, 40


def plot_svg(d: MeterDay, start: datetime, end: datetime) -> str:
    """The visible meter over the day as an inline SVG step line (integer pixels; amounts only in the labels)."""
    return series_svg(d.meter_id, [(t, v) for t, _, v in d.series], start, end)


def series_svg(meter_id: str, points: Sequence[tuple[datetime, int]], start: datetime, end: datetime, *,
               over: str = "the day", time_format: str = "%H:%M UTC") -> str:
    """A meter's amounts ((time, units), in order) over [start, end] as an inline SVG step line: integer pixels
    computed from the exact amounts, the amounts themselves only in the labels; its accessible label says the
    amount at the start and the end, the high and the low. "" without a point."""
    if not points:
        return ""
    values = [v for _, v in points]
    lo, hi = min(values), max(values)
    span_v = max(hi - lo, 1)
    span_us = max((end - start) // timedelta(microseconds=1), 1)

    def x(t: datetime) -> int:  # integer pixels: no float anywhere near the amounts
        us = min(max((t - start) // timedelta(microseconds=1), 0), span_us)
        return PAD + (W - 2 * PAD) * us // span_us

    def y(v: int) -> int:
        return H - PAD - (H - 2 * PAD) * (v - lo) // span_v if hi > lo else H // 2

    path: list[str] = []
    for t, v in points:
        if path:
            path.append(f"{x(t)},{path[-1].split(',')[1]}")
        path.append(f"{x(t)},{y(v)}")
    label = escape(f"meter {meter_id} over {over}: ${format_units(values[0])} at the start, "
                   f"${format_units(values[-1])} at the end, high ${format_units(hi)}, low ${format_units(lo)}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{label}"><title>{label}</title>'
            f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>'
            f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>'
            f'<polyline fill="none" stroke="#1a5fb4" stroke-width="2" points="{" ".join(path)}"/>'
            f'<text x="{PAD}" y="{PAD - 8}" font-size="11">${escape(format_units(hi))}</text>'
            f'<text x="{PAD}" y="{H - PAD + 16}" font-size="11">${escape(format_units(lo))}</text>'
            f'<text x="{W - PAD}" y="{H - PAD + 16}" font-size="11" text-anchor="end">'
            f'{escape(end.strftime(time_format))}</text>'
            f'<text x="{PAD}" y="{H - 6}" font-size="11">{escape(start.strftime(time_format))}</text></svg>')


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


def _rows(rows: list[tuple[str, str]]) -> str:
    return "".join(f'<tr><th>{escape(k)}</th><td class="n">{escape(v)}</td></tr>' for k, v in rows)


def _list(head: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p>None.</p>"
    h = "".join(f"<th>{escape(x)}</th>" for x in head)
    b = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{b}</table>"


def to_html(r: DayReport) -> str:
    g = r.day
    title = f"Gaming day {g.day.isoformat()}"
    parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
             f"<style>{_CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1><p>{escape(str(_t(g.start)))} to {escape(str(_t(g.end)))} "
             f"(day starts {g.starts_at.strftime('%H:%M')} {escape(g.zone)}); {r.entries} journal entries.</p>",
             f'<p>Journal at the day\'s close: entry {r.head.seq}, hash <span class="anchor">{escape(r.head.hash)}'
             "</span> (keep this anchor: <code>progressivectl audit verify --expect-head SEQ:HASH</code>).</p>"]
    for d in r.meters.values():
        j = meter_json(d)
        parts.append(f"<section><h2>Meter {escape(d.meter_id)}</h2>{plot_svg(d, g.start, g.end)}")
        parts.append(f"<table>{_rows(_figures(d))}</table>")
        parts.append("<h3>Awards</h3>" + _list(
            ["entry", "time", "round", "seat", "hand: award", "amount", "paid by", "approved by"],
            [[a.seq, _t(a.time), a.round_id, a.seat, a.label, format_cents(a.cents), a.paid_by, a.approved_by]
             for a in d.awards]))
        parts.append("<h3>Voids</h3>" + _list(["entry", "time", "round", "wagers", "amount", "reason"],
                                              [[v.seq, _t(v.time), v.round_id, v.wagers, format_cents(v.cents),
                                                v.reason] for v in d.voids]))
        parts.append("<h3>Adjustments, top-ups and parameters</h3>" + _list(
            ["entry", "time", "what", "by", "amount", "detail"],
            [[c.seq, _t(c.time), c.kind, c.who, format_units(c.units), c.detail] for c in d.changes]))
        rv, rh = j["reconciliation"]["visible"], j["reconciliation"]["held"]
        parts.append("<h3>Reconciliation</h3><p>Meter: " + escape(
            f"{rv['opening']} + {rv['contributions']} contributions + {rv['from_reserve']} from reserve + "
            f"{rv['from_overflow']} from overflow + {rv['seed']} seed + {rv['adjustments']} adjustments - "
            f"{rv['taken']} taken - {rv['released_to_overflow']} released to overflow = {rv['closing']}")
            + " (balanced)</p><p>Held (meter, reserve, overflow, locked): " + escape(
            f"{rh['opening']} + {rh['contributions']} contributions + {rh['seed']} seed + {rh['adjustments']} "
            f"adjustments - {rh['payouts']} payouts = {rh['closing']}") + " (balanced)</p></section>")
    parts.append("<h2>Table events</h2>" + _list(["entry", "time", "kind", "detail"],
                                                  [[e.seq, _t(e.time), e.kind, e.detail] for e in r.table_events]))
    parts.append(_faults_html(r))
    parts.append("</body></html>\n")
    return "".join(parts)


def _faults_html(r: DayReport) -> str:
    f, g = r.faults, r.day
    devices = _list(["device", "kind", "disables", "faults", "flaps", "first", "last", "down (s)", "down at the close"],
                    [[d.device, d.kind, ", ".join(map(str, d.seats)) or "the table", len(d.faults), d.flaps, _t(d.first),
                      _t(d.last), seconds(d.down), "yes" if d.open_at_close else "no"] for d in f.devices])
    each = _list(["device", "down (entry)", "at", "reason", "back (entry)", "at", "flaps", "this day (s)"],
                 [[d.device, o.start_seq, _t(o.start), o.detail.get("reason", ""), o.end_seq or "", _t(o.end) or "open",
                   o.flaps, seconds(o.within(g.start, g.end))] for d in f.devices for o in d.faults])
    blocks = _list(["cause", "times", "seconds"], [[b.block, len(b.blocks), seconds(b.time)] for b in f.blocks])
    return (f"<h2>Device faults</h2>{devices}{each if f.devices else ''}<h2>Progressive wagering blocked</h2>"
            f"<p>{escape(seconds(f.blocked))} s in all (causes at once counted once).</p>{blocks}")


def render(r: DayReport, form: str) -> str:
    """The report as `form`: "text", "json", "csv" or "html"."""
    import json

    if form == "json":
        return json.dumps(to_json(r), indent=2) + "\n"
    return {"text": to_text, "csv": to_csv, "html": to_html}[form](r)


FORMS = {"text": "txt", "json": "json", "csv": "csv", "html": "html"}  # form -> file suffix

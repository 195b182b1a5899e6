"""The floor view: a link authority's page on the console, every linked table at once, as pure functions of the
authority's `status` (and its linked meters' `meter_series`): no I/O here. Every text from the daemon is
HTML-escaped. Nothing on it acts: the authority's socket only reads.

Read at a glance from two metres: a claim awaiting approval anywhere on the floor comes first; then one card a
table with its link state, its linked meters, its round, what blocks it and its claims. Colour is never the only
signal: every state is a word too. Money is one format ($10,017.85), times are the casino's local time (the
authority's `[report] time_zone`) to the second.

What a table's card shows of its round, blocks and claims is what the table last said in its floor line (display
only: docs/security.md); the linked meters' amounts and the awards locked at the authority are the authority's
own journal's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

from controller.console.view.page import _clock, _e, _plots, local_time, logout_form, sections_html, shown, zone_of
from controller.errors import InputError
from controller.money import format_dollars_human, parse_cents
from controller.positions import DEALER_POSITION

SECTIONS = ("claims", "daemon", "tables", "meters", "plots")
TITLES = {"claims": "Claims awaiting approval", "daemon": "Link authority", "tables": "Linked tables",
          "meters": "Linked meters", "plots": "Linked meters over time"}

PHASES = {"betting": "betting open", "locking": "lock-out: booking the wagers",
          "dealing": "dealing (after lock-out)", "void": "voiding the round"}
BLOCKS = {"device": "device down", "link": "link to the authority down", "deck": "deck count failed",
          "stub": "stub count due", "closed": "table closed"}


def is_authority(status: object) -> bool:
    """Whether the daemon is a link authority: its `status` says its role (a table's says none)."""
    return isinstance(status, Mapping) and status.get("role") == "link-authority"


# --- formats ---------------------------------------------------------------------------------------------


def money(amount: object) -> str:
    """A decimal string of dollars from the authority ("10017.85") as $10,017.85; "—" when it is not one."""
    try:
        return format_dollars_human(parse_cents(amount, "amount"))
    except InputError:
        return "—"


def zone(name: object) -> tzinfo:
    """The casino's time zone by its IANA name; UTC when none or unknown."""
    return zone_of({"time_zone": name})


def local(when: object, tz: tzinfo, today: datetime | None = None) -> str:
    """An ISO time on the casino's clock (10:41:07 EST), with its date when it is not `today`'s."""
    return local_time(when, tz, today=today)


def _words(label: object) -> str:
    """A paytable's label for people: "royal-flush" -> "Royal flush"."""
    text = str(label or "").replace("-", " ").strip()
    return _e(text[:1].upper() + text[1:])


def _shares(lock: Mapping[str, Any]) -> str:
    shares = lock.get("shares") or 1
    return "" if shares == 1 else f" (one of {_e(shares)} shares)"


def _seat(seat: object) -> str:
    return "Dealer's hand" if seat == DEALER_POSITION else f"Seat {_e(seat)}"


# --- what the floor knows of each table ------------------------------------------------------------------


def _locks(status: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """table -> the awards locked at the authority for it (its journal's), each with its meter."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in status.get("meters") or []:
        for lk in m.get("locked") or []:
            out.setdefault(str(lk.get("table")), []).append({**lk, "meter": m.get("meter")})
    return out


def claims_of(table: Mapping[str, Any], locks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The table's claims awaiting approval: each its floor line names (with the award its authority locked for it),
    and each award locked at the authority its floor line does not name (a table OFFLINE, or of an older version)."""
    line = table.get("floor") or {}
    out: list[dict[str, Any]] = []
    named: set[str] = set()
    for c in line.get("claims") or []:
        cid = str(c.get("claim_id"))
        held = [lk for lk in locks if str(lk.get("claim")).split(":")[0] == cid]
        named.add(cid)
        out.append({**c, "locked": held, "at": min((str(lk.get("at")) for lk in held), default=None),
                    "reported": True})
    for lk in locks:
        cid = str(lk.get("claim")).split(":")[0]
        if cid in named:
            continue
        out.append({"claim_id": lk.get("claim"), "seat": lk.get("seat"), "hand": lk.get("hand"),
                    "award": lk.get("award"), "amount": lk.get("amount"), "locked": [lk], "at": lk.get("at"),
                    "reported": False})
    return out


def _pending(status: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    locks = _locks(status)
    return [(t, c) for t in status.get("tables") or [] for c in claims_of(t, locks.get(str(t.get("table")), []))]


# --- sections --------------------------------------------------------------------------------------------


def _claims(status: Mapping[str, Any], tz: tzinfo, today: datetime | None) -> str:
    pending = _pending(status)
    if not pending:
        return '<p class="none">✓ No claim awaits approval on the floor.</p>'
    cards = []
    for t, c in pending:
        locked = c.get("locked") or []
        held = "".join(f'<li>{money(lk.get("amount"))} of it locked on {_e(lk.get("meter"))}{_shares(lk)}</li>'
                       for lk in locked)
        since = (f'<p class="since">awaiting approval since {local(c.get("at"), tz, today)}</p>'
                 if c.get("at") else "")
        stale = "" if t.get("online") else '<p class="stale">⚠ table OFFLINE: as it last reported</p>'
        cards.append(
            f'<article class="pending" data-table="{_e(t.get("table"))}" data-claim="{_e(c.get("claim_id"))}">'
            f'<div class="who"><span class="table-id">{_e(t.get("table"))}</span>'
            f'<span class="seat">{_seat(c.get("seat"))}</span></div>'
            f'<div class="what"><span class="hand">{_words(c.get("hand"))}</span>'
            f'<span class="award">{_e(c.get("award"))}</span></div>'
            f'<div class="amount">{money(c.get("amount"))}</div>'
            f'<div class="detail">{since}{f"<ul>{held}</ul>" if held else ""}{stale}'
            f'<p class="where">approve at the table\'s console · {_e(c.get("claim_id"))}</p></div></article>')
    n = len(pending)
    return (f'<p class="count">⚑ {n} claim{"s" if n != 1 else ""} awaiting approval</p>'
            f'<div class="pending-list">{"".join(cards)}</div>')


def _authority(status: Mapping[str, Any] | None, down: str | None, tz: tzinfo) -> str:
    if status is None:
        return (f'<p class="alarm">✕ The link authority is not answering ({_e(down)}). This page shows what it knew '
                'last and reconnects by itself.</p>')
    tables = status.get("tables") or []
    offline = sum(1 for t in tables if not t.get("online"))
    blocked = sum(1 for t in tables if t.get("online") and _blocked(t.get("floor") or {}))
    broker = "" if status.get("broker_connected") else ('<p class="alarm">✕ Not connected to the broker: every linked '
                                                        'table shows OFFLINE.</p>')
    counts = [f'<span class="n">{len(tables)}</span> tables',
              f'<span class="n">{len(tables) - offline}</span> online',
              f'<span class="n{" bad" if offline else ""}">{offline}</span> OFFLINE',
              f'<span class="n{" bad" if blocked else ""}">{blocked}</span> blocked']
    zone_name = getattr(tz, "key", "UTC")
    return (f'<p class="counts">{" · ".join(counts)}</p>{broker}'
            f'<p class="about">Link authority <b>{_e(status.get("authority"))}</b> · controller '
            f'{_e(status.get("version"))} · journal entry {_e(status.get("ledger_head_seq"))} · times in '
            f'{_e(zone_name)}</p>')


def _meters(status: Mapping[str, Any]) -> str:
    rows = "".join(f'<div class="meter"><span class="name">{_e(m.get("meter"))}</span>'
                   f'<span class="amount" data-meter="{_e(m.get("meter"))}">{money(m.get("amount"))}</span></div>'
                   for m in status.get("meters") or [])
    return rows or "<p>No linked meter.</p>"


def _link(t: Mapping[str, Any], tz: tzinfo, today: datetime | None) -> str:
    since = local(t.get("since"), tz, today)
    if t.get("online"):
        return f'<p class="link up"><b>● online</b> since {since}</p>'
    return (f'<p class="link down"><b>✕ OFFLINE</b> since {since} <span class="why">({_e(t.get("why"))})</span>'
            '</p>')


def _round(t: Mapping[str, Any], line: Mapping[str, Any]) -> str:
    rnd = line.get("round") or {}
    open_rounds = [r.get("round_id") for r in t.get("open_rounds") or []]
    if rnd.get("id"):
        phase = PHASES.get(str(rnd.get("phase")), _e(rnd.get("phase")))
        last = "" if t.get("online") else ' <span class="stale">(as last reported)</span>'
        return f'<p class="round">Round <b>{_e(rnd.get("id"))}</b> · <span class="phase">{phase}</span>{last}</p>'
    if open_rounds:
        return f'<p class="round">Round <b>{_e(open_rounds[-1])}</b> · booked at the authority</p>'
    return '<p class="round">No round yet</p>'


def _blocks(t: Mapping[str, Any], line: Mapping[str, Any]) -> str:
    items = []
    if not t.get("online"):
        items.append("<li>✕ link offline: no progressive wager at this table</li>")
    for b in line.get("blocks") or []:
        name = str(b.get("block"))
        sources = ", ".join(str(s) for s in b.get("sources") or [])
        what = f"closed by {_e(sources)}" if name == "closed" else f"{BLOCKS.get(name, _e(name))}"
        items.append(f'<li>⚠ {what}{f": {_e(sources)}" if sources and name not in ("closed", "link") else ""}</li>')
    seats = line.get("seats_disabled") or []
    if seats:
        items.append(f'<li>⚠ seat{"s" if len(seats) != 1 else ""} {_e(", ".join(str(s) for s in seats))} '
                     'disabled (device down)</li>')
    if not items:
        return '<p class="clear">✓ progressive wagering on</p>'
    return f'<ul class="blocks">{"".join(items)}</ul>'


def _blocked(line: Mapping[str, Any]) -> bool:
    """Whether the table's floor line says something keeps a progressive wager off (a block, a disabled seat)."""
    return bool(line.get("blocks") or line.get("seats_disabled"))


def _table_meters(t: Mapping[str, Any], line: Mapping[str, Any], amounts: Mapping[str, str]) -> str:
    names = list(line.get("meters") or []) or sorted({r.get("meter") for r in t.get("open_rounds") or []
                                                      if r.get("meter")})
    if not names:
        return ""
    return "".join(f'<div class="meter"><span class="name">{_e(m)}</span>'
                   f'<span class="amount">{money(amounts.get(m))}</span></div>' for m in names)


def _table(t: Mapping[str, Any], claims: list[dict[str, Any]], amounts: Mapping[str, str], tz: tzinfo,
           today: datetime | None) -> str:
    line = t.get("floor") or {}
    online = bool(t.get("online"))
    state = "claim" if claims else ("down" if not online else ("blocked" if _blocked(line) else "ok"))
    listed = "".join(f'<li><b>{_seat(c.get("seat"))}</b> {_words(c.get("hand"))} '
                     f'<span class="amount">{money(c.get("amount"))}</span></li>' for c in claims)
    claims_html = (f'<div class="claims"><h4>⚑ awaiting approval</h4><ul>{listed}</ul></div>' if claims else "")
    heard = t.get("last_heard") or {}
    ack = t.get("last_ack") or {}
    foot = [f'last heard {local(heard.get("at"), tz, today)}' if heard else "not heard since the authority started"]
    if ack:
        foot.append(f'operation #{_e(ack.get("seq"))} {_e(ack.get("outcome"))}'
                    f'{" " + local(ack.get("at"), tz, today) if ack.get("at") else ""}')
    if line:
        foot.append(f'reported {local(line.get("received"), tz, today)}')
    elif online:
        foot.append("its round and blocks not reported yet")
    return (f'<article class="table" data-table="{_e(t.get("table"))}" data-state="{state}">'
            f'<header><h3>{_e(t.get("table"))}</h3>{_link(t, tz, today)}</header>'
            f'{_table_meters(t, line, amounts)}{_round(t, line)}{_blocks(t, line)}{claims_html}'
            f'<footer>{" · ".join(foot)}</footer></article>')


def _tables(status: Mapping[str, Any], tz: tzinfo, today: datetime | None) -> str:
    locks = _locks(status)
    amounts = {str(m.get("meter")): m.get("amount") for m in status.get("meters") or []}
    cards = [_table(t, claims_of(t, locks.get(str(t.get("table")), [])), amounts, tz, today)
             for t in status.get("tables") or []]
    return f'<div class="floor">{"".join(cards)}</div>' if cards else "<p>No linked table configured.</p>"


def authority_sections(status: Mapping[str, Any], down: str | None, series: Mapping[str, Any] | None = None,
                       today: datetime | None = None, errors: list[str] | None = None) -> dict[str, str]:
    """The sections of the floor view: the claims awaiting approval on the whole floor, the authority, one card a
    table, the linked meters, and their plots from the authority's journal (`series` as a table's). `today`: the
    moment the page is made (a time not of its day shows its date too)."""
    tz = zone(status.get("time_zone"))
    return {"claims": shown(lambda: _claims(status, tz, today), errors),
            "daemon": shown(lambda: _authority(status if down is None else None, down, tz), errors),
            "tables": shown(lambda: _tables(status, tz, today), errors),
            "meters": shown(lambda: _meters(status), errors), "plots": shown(lambda: _plots(series, status), errors)}


def sections(snapshot: Mapping[str, Any], down: str | None, today: datetime | None = None,
             errors: list[str] | None = None) -> dict[str, str]:
    """Each section's inner HTML from the authority's last snapshot ({"status", "series"})."""
    return authority_sections(snapshot["status"], down, snapshot.get("series"), today, errors)


def _head(title: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_e(title)}</title><link rel="stylesheet" href="/static/floor.css"><link rel="stylesheet" href="/static/plots.css">'

            '<script src="/static/console.js" defer></script></head>')


def identity(snapshot: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(the authority's id, its time zone) of its last snapshot, for the page's title and clock."""
    status = snapshot.get("status") if isinstance(snapshot, Mapping) else None
    if not isinstance(status, Mapping) or not is_authority(status):
        return None, None
    name, tz = status.get("authority"), status.get("time_zone")
    return (name if isinstance(name, str) else None), (tz if isinstance(tz, str) else None)


def page(parts: Mapping[str, str], *, csrf: str, flash: str | None = None, supervisor: str | None = None,
         logout: bool = False, authority: str | None = None, zone: str | None = None) -> str:
    """The floor view's whole page: the console's frame (header with the authority's id and the casino's clock,
    log out) around the floor's sections."""
    who = logout_form(supervisor, csrf) if logout else ""
    note = f'<p class="flash" id="flash" role="status">{_e(flash)}</p>' if flash else ""
    body = sections_html(parts, SECTIONS, TITLES)
    name = f"Floor view · link authority {authority}" if authority else "Floor view"
    return (_head(f"{name} · Pit console") + f'<body class="floor-view"><header><h1>{_e(name)}</h1>{_clock(zone)}'
            f'<span id="live">connecting…</span>{who}</header>{note}<main>{body}</main></body></html>')


__all__ = ["SECTIONS", "TITLES", "authority_sections", "claims_of",
           "identity", "is_authority", "local", "money", "page", "sections", "zone"]

"""The console's pages as pure functions of what the daemon answered (`status`, `round`, `history`, and
`meter_series` for the plots) and of the
session (its CSRF token, its supervisor): no I/O here. Every text from the daemon is HTML-escaped.

A page is a list of sections, each rendered on its own (`sections`), so that the server can push only the
sections that changed to an open page. A new section is one more entry of SECTIONS and one more function."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from html import escape
from typing import Any
from urllib.parse import urlsplit

from ..errors import InputError
from ..money import parse_units
from ..report.render import series_svg

SECTIONS = ("daemon", "meters", "claims", "round", "history", "devices", "plots")
HISTORY_SHOWN = 25  # the hit history's last entries on the page (the regulations ask for at least the last 25)
LOOPBACK_NAMES = frozenset({"localhost"})


# --- the listening address ---------------------------------------------------------------------------


def parse_listen(text: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT` (an IPv6 host in brackets); ValueError saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:8480)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{text!r}: the port {port_text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"{text!r}: the port must be 1..65535")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from the box itself (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


LOOPBACK = "loopback"


def client_address(remote: str | None) -> str:
    """The client a wrong secret is counted against: its address, with every loopback address one client
    (127.0.0.0/8, ::1 and ::ffff:127.x.y.z all come from the box itself: a local user could pick another per
    guess)."""
    if not remote:
        return "?"
    try:
        ip = ipaddress.ip_address(remote)
    except ValueError:
        return remote
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return LOOPBACK if ip.is_loopback else str(ip)


def host_allowed(host_header: str | None, port: int) -> bool:
    """On loopback without TLS, a request must name the box itself in its Host header: a web site that points its
    own name at 127.0.0.1 (DNS rebinding) cannot read the page from a browser on the box."""
    if not host_header:
        return False
    try:
        host, got = parse_listen(host_header)
    except ValueError:
        return False
    return got == port and is_loopback(host)


# --- requests ------------------------------------------------------------------------------------------


def secret_in_query(keys: Iterable[str]) -> bool:
    """Whether a query string carries a secret (which would then be in every log and history on its way)."""
    return any(k.lower() in ("secret", "password") for k in keys)


def same_origin(origin: str | None, referer: str | None, expected: str) -> bool:
    """A POST comes from the console's own page: its Origin (or, without one, its Referer's origin) is
    `expected` (scheme://host[:port]). Neither given: refused."""
    if origin and origin != "null":
        return origin == expected
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}" == expected
    return False


# --- money ---------------------------------------------------------------------------------------------


CENT = Decimal("0.01")


def dollars(amount: object) -> str:
    """A decimal string of dollars from the daemon ("10000.00") as the sign reads it: $10,000.00."""
    if not isinstance(amount, str):
        return "—"
    try:
        value = Decimal(amount)
    except InvalidOperation:
        return escape(amount)
    if not value.is_finite():
        return escape(amount)
    return f"${value.quantize(CENT, rounding=ROUND_FLOOR):,}"  # parts of a cent are not shown: the sign floors them


# --- sections ------------------------------------------------------------------------------------------


def _e(value: object) -> str:
    return escape("" if value is None else str(value))


def _daemon(status: Mapping[str, Any] | None, down: str | None) -> str:
    if status is None:
        return (f'<p class="alarm">The daemon is not answering ({_e(down)}). This page shows what it knew last '
                f'and reconnects by itself.</p>')
    return (f'<p>Table <b>{_e(status.get("table"))}</b> · {_e(status.get("game"))} · controller '
            f'{_e(status.get("version"))}</p>')


def _meters(status: Mapping[str, Any]) -> str:
    rows = []
    for m in status.get("meters") or []:
        linked = f' <small>linked: {_e(m.get("linked"))}</small>' if m.get("linked") else ""
        rows.append(f'<div class="meter"><span class="name">{_e(m.get("meter"))}{linked}</span>'
                    f'<span class="amount" data-meter="{_e(m.get("meter"))}">{dollars(m.get("amount"))}</span></div>')
    offline = ('<p class="alarm">Progressive wagering is disabled: the sign shows OFFLINE.</p>'
               if status.get("blocks") else "")
    return offline + ("".join(rows) or "<p>No meter.</p>")


def _round(status: Mapping[str, Any], rnd: Mapping[str, Any]) -> str:
    r = status.get("round") or {}
    out = [f'<p>Round <b>{_e(r.get("id"))}</b>: <b class="phase">{_e(r.get("phase"))}</b>, '
           f'{len(rnd.get("wagers") or [])} wagers accepted</p>']
    blocks = status.get("blocks") or []
    if blocks:
        out.append("<ul class=\"blocks\">" + "".join(
            f'<li>blocked: <b>{_e(b.get("block"))}</b> ({_e(", ".join(map(str, b.get("sources") or [])))})</li>'
            for b in blocks) + "</ul>")
    else:
        out.append("<p>No block: progressive wagering enabled.</p>")
    seats = status.get("seats_disabled")
    if seats:
        out.append(f"<p class=\"alarm\">Seats disabled: {_e(seats)}</p>")
    if rnd.get("void_requested"):
        out.append(f'<p class="alarm">A void is asked for: {_e(rnd.get("void_requested"))}</p>')
    return "".join(out)


def _devices(status: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr class="{"up" if d.get("up") else "down"}"><td>{_e(d.get("id"))}</td><td>{_e(d.get("kind"))}</td>'
        f'<td>{"up" if d.get("up") else "DOWN"}</td><td>{_e(d.get("errors"))}</td>'
        f'<td>{_e(d.get("last_error") or "")}</td></tr>'
        for d in status.get("devices") or [])
    return ("<table><thead><tr><th>Device</th><th>Kind</th><th>State</th><th>Errors</th><th>Last error</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")


def _hidden(csrf: str, claim_id: object) -> str:
    return (f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
            f'<input type="hidden" name="claim_id" value="{_e(claim_id)}">')


def _credential_fields(supervisor: str | None) -> str:
    return (f'<label>Supervisor <input name="supervisor" autocomplete="username" required '
            f'value="{_e(supervisor or "")}"></label>'
            '<label>Secret <input name="secret" type="password" autocomplete="current-password" required></label>')


def _claims(rnd: Mapping[str, Any], csrf: str, supervisor: str | None) -> str:
    claims = rnd.get("claims") or []
    pending = [c for c in claims if c.get("status") == "pending"]
    out = []
    for c in pending:
        cid = c.get("claim_id")
        out.append(
            f'<article class="claim" id="claim-{_e(cid)}" data-claim="{_e(cid)}">'
            f'<h3>Seat {_e(c.get("seat"))} · {_e(c.get("spot"))} · <span class="amount">{dollars(c.get("amount"))}'
            f'</span></h3><p class="hand">{_e(c.get("description"))}</p>'
            f'<form method="post" action="/approve" class="approve">{_hidden(csrf, cid)}'
            f'{_credential_fields(supervisor)}<button type="submit" class="approve">Approve</button></form>'
            f'<form method="post" action="/reject" class="reject">{_hidden(csrf, cid)}'
            f'{_credential_fields(supervisor)}<label>Reason <input name="reason" required></label>'
            f'<button type="submit" class="reject">Reject</button></form></article>')
    if not pending:
        out.append("<p>No claim awaits a supervisor.</p>")
    done = [c for c in claims if c.get("status") != "pending"]
    if done:
        out.append("<ul class=\"done\">" + "".join(
            f'<li>{_e(c.get("claim_id"))}: seat {_e(c.get("seat"))}, {_e(c.get("spot"))}, {dollars(c.get("amount"))}'
            f' — <b>{_e(c.get("status"))}</b>{" by " + _e(c.get("by")) if c.get("by") else ""}</li>'
            for c in done) + "</ul>")
    return "".join(out)


def _history(history: list[Mapping[str, Any]]) -> str:
    shown = sorted(history, key=lambda h: str(h.get("time") or ""), reverse=True)[:HISTORY_SHOWN]
    if not shown:
        return "<p>No hit yet.</p>"
    rows = "".join(
        f'<tr><td>{_e(h.get("time"))}</td><td>{_e(h.get("meter"))} #{_e(h.get("number"))}</td>'
        f'<td>{_e(h.get("round"))}</td><td>{_e(h.get("seat"))}</td><td>{_e(h.get("hand"))}</td>'
        f'<td>{_e(h.get("award"))}</td><td class="amount">{dollars(h.get("amount"))}</td>'
        f'<td>{_e(h.get("paid_by"))}</td><td>{_e(h.get("approved_by"))}</td></tr>' for h in shown)
    return ("<table><thead><tr><th>Time (UTC)</th><th>Meter</th><th>Round</th><th>Seat</th><th>Hand</th>"
            "<th>Award</th><th>Amount</th><th>Paid by</th><th>Approved by</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


# span -> (the plot's heading, what the plot is over, its time labels' format)
PLOTS = {"day": ("The gaming day so far", "the gaming day so far", "%H:%M UTC"),
         "30d": ("The last 30 gaming days", "the last 30 gaming days", "%Y-%m-%d UTC")}


def _plot(m: Mapping[str, Any], span: str) -> str:
    """One meter's plot over `span` from its `meter_series` answer; a line saying so when the answer is not one."""
    heading, over, time_format = PLOTS[span]
    try:
        points = [(datetime.fromisoformat(t), parse_units(a, "points")) for t, a in m["points"]]
        start, end = datetime.fromisoformat(m["start"]), datetime.fromisoformat(m["end"])
        svg = series_svg(str(m["meter"]), points, start, end, over=over, time_format=time_format)
    except (KeyError, TypeError, ValueError, InputError) as e:
        return f"<p>{_e(heading)}: not shown (the daemon's answer is not a series: {_e(e)}).</p>"
    return (f'<figure class="plot" data-meter="{_e(m["meter"])}" data-span="{_e(span)}">{svg}'
            f'<figcaption>{_e(heading)}: {dollars(m.get("opening"))} at the start, {dollars(m.get("closing"))} '
            f'now; high {dollars(m.get("high"))}, low {dollars(m.get("low"))}; {_e(m.get("entries"))} changes'
            f'</figcaption></figure>')


def _plots(series: Mapping[str, Any] | None) -> str:
    """Each meter's plots, over the gaming day so far and over the last 30 gaming days (`meter_series`)."""
    if series is None:
        return "<p>Waiting for the daemon's series (asked once a minute).</p>"
    if series.get("error"):
        return f'<p class="alarm">The plots are not available: {_e(series["error"])}</p>'
    by_meter: dict[str, dict[str, Mapping[str, Any]]] = {}
    for span in PLOTS:
        for m in series.get(span) or []:
            if isinstance(m, Mapping):
                by_meter.setdefault(str(m.get("meter")), {})[span] = m
    if not by_meter:
        return "<p>No meter in the journal.</p>"
    return "".join(f'<h3>{_e(meter)}</h3><div class="plots">'
                   + "".join(_plot(spans[span], span) for span in PLOTS if span in spans) + "</div>"
                   for meter, spans in sorted(by_meter.items()))


def sections(snapshot: Mapping[str, Any] | None, down: str | None, csrf: str,
             supervisor: str | None = None) -> dict[str, str]:
    """Each section's inner HTML: from the last `snapshot` ({"status", "round", "history"}, and "series": span ->
    the `meter_series` answer, or {"error": why}); `down` says why the daemon does not answer now (the last
    snapshot stays shown, marked by the daemon section). A link authority's page is floor.py's."""
    daemon = _daemon(snapshot["status"] if snapshot and down is None else None, down)
    if snapshot is None:
        waiting = "<p>Waiting for the daemon.</p>"
        return {"daemon": daemon, **{name: waiting for name in SECTIONS[1:]}}
    status, rnd = snapshot["status"], snapshot["round"]
    return {
        "daemon": daemon,
        "meters": _meters(status),
        "round": _round(status, rnd),
        "devices": _devices(status),
        "claims": _claims(rnd, csrf, supervisor),
        "history": _history(snapshot["history"]),
        "plots": _plots(snapshot.get("series")),
    }


TITLES = {"daemon": "Controller", "meters": "Meters", "round": "Round", "devices": "Devices",
          "claims": "Claims awaiting a supervisor", "history": "Hit history", "plots": "Meters over time"}


def _head(title: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_e(title)}</title><link rel="stylesheet" href="/static/console.css">'
            '<script src="/static/console.js" defer></script></head>')


def page(parts: Mapping[str, str], *, csrf: str, flash: str | None = None, supervisor: str | None = None,
         logout: bool = False) -> str:
    """The whole console page: every section, the message of the last action, a logout button when logged in."""
    who = ""
    if logout:
        who = (f'<form method="post" action="/logout" class="logout"><span>{_e(supervisor)}</span>'
               f'<input type="hidden" name="csrf" value="{_e(csrf)}"><button type="submit">Log out</button></form>')
    note = f'<p class="flash" id="flash" role="status">{_e(flash)}</p>' if flash else ""
    body = "".join(f'<section><h2>{TITLES[name]}</h2><div id="{name}">{parts[name]}</div></section>'
                   for name in SECTIONS)
    return (_head("Pit console") + f'<body><header><h1>Pit console</h1><span id="live">connecting…</span>{who}'
            f'</header>{note}<main>{body}</main></body></html>')


def login_page(*, csrf: str, message: str | None = None) -> str:
    note = f'<p class="flash" role="status">{_e(message)}</p>' if message else ""
    return (_head("Pit console: log in") + '<body><header><h1>Pit console</h1></header><main><section>'
            f'<h2>Log in as a supervisor</h2>{note}<form method="post" action="/login" class="login">'
            f'<input type="hidden" name="csrf" value="{_e(csrf)}">{_credential_fields(None)}'
            '<button type="submit">Log in</button></form></section></main></body></html>')


__all__ = ["SECTIONS", "dollars", "host_allowed", "is_loopback", "login_page", "page", "parse_listen", "same_origin",
           "secret_in_query", "sections"]

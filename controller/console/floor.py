"""The floor view: a link authority's page on the console, every linked table at once, as pure functions of the
authority's `status` (and its linked meters' `meter_series`): no I/O here. Every text from the daemon is
HTML-escaped. Nothing on it acts: the authority's socket only reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .page import _daemon, _e, _head, _meters, _plots, dollars

AUTHORITY_SECTIONS = ("daemon", "meters", "tables", "plots")
AUTHORITY_TITLES = {"daemon": "Link authority", "meters": "Linked meters", "tables": "Linked tables",
                    "plots": "Linked meters over time"}


def is_authority(status: object) -> bool:
    """Whether the daemon is a link authority: its `status` says its role (a table's says none)."""
    return isinstance(status, Mapping) and status.get("role") == "link-authority"


def _authority(status: Mapping[str, Any] | None, down: str | None) -> str:
    if status is None:
        return _daemon(None, down)
    broker = "" if status.get("broker_connected") else ('<p class="alarm">Not connected to the broker: every linked '
                                                        'table shows OFFLINE.</p>')
    return (f'<p>Link authority <b>{_e(status.get("authority"))}</b> · controller {_e(status.get("version"))} · '
            f'journal entry {_e(status.get("ledger_head_seq"))}</p>{broker}')


def _linked_meters(status: Mapping[str, Any]) -> str:
    locked = "".join(
        f'<li>{_e(lk.get("claim"))}: {dollars(lk.get("amount"))}, table {_e(lk.get("table"))} seat '
        f'{_e(lk.get("seat"))}, awaiting approval at its table</li>'
        for m in status.get("meters") or [] for lk in m.get("locked") or [])
    return _meters({"meters": status.get("meters")}) + (f'<ul class="locked">{locked}</ul>' if locked else "")


def _when(value: object) -> str:
    return _e(value) if value else "—"


def _tables(status: Mapping[str, Any]) -> str:
    rows = []
    for t in status.get("tables") or []:
        ack, heard = t.get("last_ack") or {}, t.get("last_heard") or {}
        acked = (f'#{_e(ack.get("seq"))} {_e(ack.get("outcome"))}, {_when(ack.get("at"))}' if ack
                 else "none yet")
        rows.append(
            f'<tr class="{"up" if t.get("online") else "down"}" data-table="{_e(t.get("table"))}">'
            f'<td>{_e(t.get("table"))}</td><td class="state">{"online" if t.get("online") else "OFFLINE"}</td>'
            f'<td>{_when(t.get("since"))} ({_e(t.get("why"))})</td><td>{acked}</td>'
            f'<td>{_e(heard.get("message")) + ", " + _when(heard.get("at")) if heard else "—"}</td></tr>')
    offline = sum(1 for t in status.get("tables") or [] if not t.get("online"))
    alarm = f'<p class="alarm">{offline} linked table(s) OFFLINE.</p>' if offline else ""
    return (alarm + "<table><thead><tr><th>Table</th><th>State</th><th>Since (UTC)</th>"
            "<th>Last operation answered (UTC)</th><th>Last heard (UTC)</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def authority_sections(status: Mapping[str, Any], down: str | None,
                       series: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The sections of a link authority's page: itself, its linked meters and every table it links (online or
    OFFLINE, since when, its last operation answered), and the linked meters' plots from its journal (`series` as
    a table's). Nothing on it acts: the authority's socket only reads."""
    return {"daemon": _authority(status if down is None else None, down), "meters": _linked_meters(status),
            "tables": _tables(status), "plots": _plots(series)}


def sections(snapshot: Mapping[str, Any], down: str | None) -> dict[str, str]:
    """Each section's inner HTML from the authority's last snapshot ({"status", "series"})."""
    return authority_sections(snapshot["status"], down, snapshot.get("series"))


def page(parts: Mapping[str, str], *, csrf: str, flash: str | None = None, supervisor: str | None = None,
         logout: bool = False) -> str:
    """The authority's whole page: the table page's frame (header, log out) around the floor's sections."""
    who = ""
    if logout:
        who = (f'<form method="post" action="/logout" class="logout"><span>{_e(supervisor)}</span>'
               f'<input type="hidden" name="csrf" value="{_e(csrf)}"><button type="submit">Log out</button></form>')
    note = f'<p class="flash" id="flash" role="status">{_e(flash)}</p>' if flash else ""
    body = "".join(f'<section><h2>{AUTHORITY_TITLES[name]}</h2><div id="{name}">{parts[name]}</div></section>'
                   for name in AUTHORITY_SECTIONS)
    return (_head("Pit console") + f'<body><header><h1>Pit console</h1><span id="live">connecting…</span>{who}'
            f'</header>{note}<main>{body}</main></body></html>')


__all__ = ["AUTHORITY_SECTIONS", "AUTHORITY_TITLES", "authority_sections", "is_authority", "page", "sections"]

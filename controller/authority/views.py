"""The authority's `status` (docs/operations.md), pure: its linked meters and their locks from its journal, and each
configured table as it knows it (liveness, anchors, open rounds, floor line)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.ledger.chain import format_time
from controller.linkproto import anchors, schema
from controller.linkproto.liveness import TableState, floor_json, table_json
from controller.meter.journal import Meters
from controller.money import format_cents

OPEN_ROUNDS_SHOWN = 16  # a table's open rounds in `status`: its latest (the floor view shows the last)


@dataclass(frozen=True)
class Seen:
    """What the authority holds of its tables, as `status` shows them."""

    liveness: Mapping[str, TableState]  # every configured table, in the configuration's order
    reference: Mapping[str, schema.JournalAnchor]  # table -> the reference anchor of its journal
    held: Mapping[str, anchors.TableAnchors]  # table -> its anchors, the one kept aside among them
    floor: Mapping[str, tuple[schema.FloorLine, float]]  # table -> its last floor line and when it came


def status_json(authority: str, version: str, broker_connected: bool, time_zone: str, meters: Meters, head_seq: int,
                seen: Seen, uptime_s: float) -> dict[str, Any]:
    """The authority, its meters and every configured table as it knows them."""
    opened = open_rounds(meters)
    return {
        "role": "link-authority",
        "authority": authority,
        "version": version,
        "broker_connected": broker_connected,
        "time_zone": time_zone,
        "meters": [meter_status(m, meters) for m in sorted(meters)],
        "tables": [{**table_json(t, st, (a.seq, a.at) if (a := seen.reference.get(t)) else None),
                    "anchor_suspect": suspect_json(seen.held.get(t)),
                    "open_rounds": opened.get(t, []),
                    "floor": floor_json(*seen.floor[t]) if t in seen.floor else None}
                   for t, st in seen.liveness.items()],
        "ledger_head_seq": head_seq,
        "uptime_seconds": round(uptime_s),
    }


def meter_status(m: str, meters: Meters) -> dict[str, Any]:
    """A linked meter: its amount, reset and every lock it holds."""
    s = meters[m]
    return {"meter": m, "amount": format_cents(s.current_cents), "reset": format_cents(s.params.reset_cents),
            "locked": [{"claim": c, "amount": format_cents(lk.amount_cents), "table": lk.table, "seat": lk.seat,
                        "round_id": lk.round_id, "hand": lk.hand, "award": lk.award, "shares": lk.shares,
                        "at": format_time(lk.at)}
                       for c, lk in sorted(s.locked.items())]}


def open_rounds(meters: Meters) -> dict[str, list[dict[str, Any]]]:
    """table -> its rounds booked on a linked meter and not closed, from the authority's journal: (meter, round), its
    latest OPEN_ROUNDS_SHOWN in the order of their numbers. One pass over the open rounds, whatever their number: a
    table's password can book rounds it never closes, and the console asks for the status twice a second."""
    found: dict[str, list[tuple[int, str, str]]] = {}
    for m, s in meters.items():
        for rid, booking in s.open_rounds.items():
            table = booking.table
            number = rid[len(table) + 2:]
            if rid.startswith(f"{table}-r") and number.isascii() and number.isdigit():
                found.setdefault(table, []).append((int(number), m, rid))
    return {t: [{"meter": m, "round_id": rid} for _n, m, rid in sorted(heapq.nlargest(OPEN_ROUNDS_SHOWN, rows))]
            for t, rows in found.items()}


def suspect_json(held: anchors.TableAnchors | None) -> dict[str, Any] | None:
    """The anchor kept aside as planted, and how many were judged so since the last clearing; None if none is."""
    if held is None or held.suspect is None:
        return None
    a = held.suspect.anchor
    return {"seq": a.seq, "hash": a.hash, "at": a.at, "reports": held.suspects}


__all__ = ["OPEN_ROUNDS_SHOWN", "Seen", "meter_status", "open_rounds", "status_json", "suspect_json"]

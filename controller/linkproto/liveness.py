"""Each linked table as the link authority knows it: online or OFFLINE and since when, the last message heard, the
last operation it answered and the table's last journal anchor (docs/link-protocol.md, "Liveness"). Pure: the
authority passes the time (seconds since the epoch) of each event in; nothing here reads a clock.

A table is online from any message of its own (its `hello` at each connection, an operation, an anchor) until its
`offline`: its goodbye at a clean stop, or its MQTT will, which the broker sends when the table's connection drops.
A table not heard since the authority started is OFFLINE, "not heard yet"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.linkproto.schema import FloorLine
from controller.money import format_cents

NOT_HEARD = "not heard yet"  # why a table is OFFLINE before the authority hears it at all
WHY = {"hello": "connected", "op": "sent an operation", "anchor": "sent an anchor", "floor": "sent its floor line",
       "stopped": "stopped cleanly",
       "lost": "connection lost (its will)"}


@dataclass
class TableState:
    online: bool
    since: float  # when it turned online or OFFLINE (or the authority started)
    why: str  # what turned it so: a message type, an `offline` reason, or NOT_HEARD
    heard: str | None = None  # the last message heard from it (its type)
    heard_at: float | None = None
    ack_seq: int | None = None  # the last operation the authority answered (journaled: applied or refused)
    ack_outcome: str | None = None  # "applied" or "refused"
    ack_at: float | None = None  # None: answered before the authority started (from its journal)


class Liveness:
    """Every configured table's state; the methods say whether the table turned online or OFFLINE."""

    def __init__(self, tables: tuple[str, ...] | list[str], now: float) -> None:
        self.tables: dict[str, TableState] = {t: TableState(False, now, NOT_HEARD) for t in tables}

    def heard(self, table: str, message: str, now: float) -> bool:
        """A message of the table's own (`hello`, `op`, `anchor`): it is online. True when it was not."""
        s = self.tables[table]
        s.heard, s.heard_at = message, now
        if s.online:
            return False
        s.online, s.since, s.why = True, now, message
        return True

    def offline(self, table: str, reason: str, now: float) -> bool:
        """The table's `offline` (`stopped` or `lost`): it is OFFLINE. True when it was online."""
        s = self.tables[table]
        s.heard, s.heard_at = "offline", now
        was = s.online
        if was or s.why == NOT_HEARD:
            s.online, s.since, s.why = False, now, reason
        return was

    def answered(self, table: str, seq: int, outcome: str, now: float | None) -> None:
        """Operation `seq` of the table journaled (`applied` or `refused`) and answered; a lower number (a
        repeat answered again) does not move it back."""
        s = self.tables[table]
        if s.ack_seq is None or seq > s.ack_seq:
            s.ack_seq, s.ack_outcome, s.ack_at = seq, outcome, now


def iso(t: float | None) -> str | None:
    """A time as the journal writes it, UTC to the second."""
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table_json(table: str, s: TableState, anchor: tuple[int, str] | None) -> dict[str, Any]:
    """A table's entry in the authority's `status` (docs/operations.md): `anchor` is (seq, at) of the last anchor
    of its journal the authority holds."""
    return {
        "table": table,
        "online": s.online,
        "since": iso(s.since),
        "why": WHY.get(s.why, s.why),
        "last_heard": None if s.heard is None else {"message": s.heard, "at": iso(s.heard_at)},
        "last_ack": None if s.ack_seq is None else {"seq": s.ack_seq, "outcome": s.ack_outcome, "at": iso(s.ack_at)},
        "anchor": None if anchor is None else {"seq": anchor[0], "at": anchor[1]},
    }


def floor_json(line: FloorLine, received: float) -> dict[str, Any]:
    """A table's last floor line in the authority's `status`: what the table says of its round, blocks and claims
    awaiting a supervisor (display only), and when it came."""
    return {
        "at": line.at,
        "received": iso(received),
        "round": {"id": line.round_id or None, "phase": line.phase},
        "blocks": [{"block": b, "sources": list(src)} for b, src in line.blocks],
        "seats_disabled": list(line.seats_disabled),
        "claims": [{"claim_id": c.claim, "seat": c.seat, "spot": c.spot, "hand": c.hand, "award": c.award,
                    "amount": format_cents(c.cents)} for c in line.claims],
        "meters": list(line.meters),
    }


__all__ = ["NOT_HEARD", "Liveness", "TableState", "floor_json", "iso", "table_json"]

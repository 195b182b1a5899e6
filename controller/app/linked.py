"""What the table daemon needs of its linked meters (controller.link): the link, receipts, resume views."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.config.model import LinkedMeter, TableConfig
from controller.link.client import TableLink
from controller.linkproto.schema import FLOOR_MAX_ITEMS, FLOOR_TEXT, FloorClaim, FloorLine, Win
from controller.round.claims import Claim

LINK_DIR = "link"  # the table's link journal, beside its own


def make_link(cfg: TableConfig, *, on_alive: Callable[[bool], None], on_meter: Callable[[str], None],
              on_win: Callable[[Win], None], **options: Any) -> TableLink | None:
    linked = {m.id: m.linked_id for m in cfg.meters.values() if isinstance(m, LinkedMeter)}
    if not linked:
        return None
    assert cfg.mqtt is not None  # the configuration refuses a linked meter without [mqtt]
    return TableLink(cfg.table, cfg.mqtt, linked, cfg.state_dir / LINK_DIR, on_alive=on_alive, on_meter=on_meter,
                     on_win=on_win, **options)


@dataclass(frozen=True)
class LinkReceipt:
    """A linked meter's operation is durable in the outbox; the authority's result comes later."""

    seq: int
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Booking:
    wagers: tuple[tuple[int, int], ...]
    on_dealer: tuple[int, ...] = ()
    round_meters: tuple[str, ...] = ()  # every meter the round books, when more than one (as a local Booking's)


@dataclass(frozen=True)
class LinkedMeterView:
    """The part of a meter's state that resuming a round reads (controller.app.setup.resume)."""

    open_rounds: Mapping[str, _Booking]
    recent_rounds: tuple[str, ...]


def resume_views(link: TableLink | None) -> dict[str, LinkedMeterView]:
    if link is None:
        return {}
    box = link.outbox
    return {m: LinkedMeterView({r: _Booking(*b) for r, b in box.open_rounds.get(m, {}).items()},
                               tuple(r for r in (box.last_round.get(m),) if r))
            for m in link.linked}


def _id(text: object) -> str:
    """A name as the floor line carries it (letters, digits, '-', '_', '.'): a device's or a supervisor's."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(text))[:64] or "unnamed"


def floor_line(table: str, status: Mapping[str, Any], claims: Iterable[Claim], linked: Iterable[str],
               at: str) -> FloorLine:
    """What the floor view at the link authority shows of this table, from its `status` view and its round's
    claims: the round and its phase, the blocks, the seats disabled, and each claim awaiting a supervisor (its
    hand, award and the total its approval pays). Display only; cut to what the authority takes."""
    rnd = status.get("round") or {}
    blocks = tuple((_id(b.get("block")), tuple(_id(x) for x in b.get("sources") or ())[:FLOOR_MAX_ITEMS])
                   for b in status.get("blocks") or ())[:FLOOR_MAX_ITEMS]
    seats = tuple(sorted({d["seat"] for d in status.get("seats_disabled") or () if isinstance(d.get("seat"), int)
                          and d["seat"] >= 1}))[:FLOOR_MAX_ITEMS]
    pending = []
    for c in claims:
        if c.status != "pending":
            continue
        hit = next((p for p in c.payouts if p.kind != "envy"), c.payouts[0] if c.payouts else None)
        hand = (hit.hand or hit.kind) if hit is not None else ""
        award = hit.award if hit is not None else ""
        pending.append(FloorClaim(_id(c.id), c.seat, _id(c.spot), _printable(hand), _printable(award),
                                  sum(p.amount for p in c.payouts)))
    return FloorLine(table, at, _id(rnd.get("id") or "") if rnd.get("id") else "", str(rnd.get("phase") or "betting"),
                     blocks, seats, tuple(pending[:FLOOR_MAX_ITEMS]), tuple(sorted(set(linked)))[:FLOOR_MAX_ITEMS])


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)[:FLOOR_TEXT]


__all__ = ["LINK_DIR", "LinkReceipt", "LinkedMeterView", "floor_line", "make_link", "resume_views"]

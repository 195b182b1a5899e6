"""What the table daemon needs of its linked meters (controller.link): the link, receipts, resume views."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config.model import LinkedMeter, TableConfig
from ..link.client import TableLink
from ..link.schema import Win

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

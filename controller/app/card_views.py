"""The card table's views on the control socket (`status`, `round`), built from what the daemon holds: pure, so
that what `progressivectl status` and the pit console show is read in one place (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller import __version__
from controller.config.model import TableConfig
from controller.ledger.ledger import Head
from controller.linkproto.schema import MeterValue
from controller.meter import MeterState
from controller.money import format_cents
from controller.round import model as rm
from controller.service.views import table_json


def meters_json(meters: Mapping[str, MeterState], linked: Mapping[str, str] | None,
                values: Mapping[str, MeterValue]) -> list[dict[str, Any]]:
    """The table's own meters, then its linked ones (`linked`: meter -> the authority's meter; `values`: the
    amounts the authority last sent, by its meter id; None where it sent none yet)."""
    return ([{"meter": m, "amount": format_cents(st.current_cents)} for m, st in sorted(meters.items())]
            + [{"meter": m, "linked": a, "amount": format_cents(values[a].cents) if a in values else None}
               for m, a in sorted((linked or {}).items())])


def blocks_json(s: rm.TableState) -> list[dict[str, Any]]:
    """What disables progressive wagering now, each block with its sources (the status's and the floor line's)."""
    return [{"block": b.value, "sources": sorted(src)} for b, src in sorted(s.blocks.items()) if src]


def card_status(cfg: TableConfig, s: rm.TableState, rid: str, meters: list[dict[str, Any]], head: Head, *,
                anchor: dict[str, Any] | None, link: dict[str, Any] | None, shell: Mapping[str, Any]) -> dict[str, Any]:
    """`status`: `shell` gives what every table daemon shows (seats_disabled, devices, uptime_seconds, lights)."""
    return {
        "table": cfg.table,
        "game": cfg.game.id,
        "version": __version__,
        "round": {"id": rid, "phase": s.phase.value},
        "blocks": blocks_json(s),
        "seats_disabled": shell["seats_disabled"],
        "devices": shell["devices"],
        "meters": meters,
        "ledger_head_seq": head.seq,
        "ledger_head_hash": head.hash,
        "anchor": anchor,
        "uptime_seconds": shell["uptime_seconds"],
        **({"link": link} if link is not None else {}),
        **table_json(cfg),
        "lights": shell["lights"],
    }


def round_json(s: rm.TableState, rid: str, not_recognized: int, claims: list[dict[str, Any]]) -> dict[str, Any]:
    """`round`: the round's wagers, its claims (those of this round) and a void asked for."""
    return {
        "id": rid,
        "phase": s.phase.value,
        "wagers": [{"seat": seat, "spot": spot, "amount": format_cents(c)}
                   for (seat, spot), c in sorted(s.accepted.items())],
        "not_recognized": not_recognized,
        "claims": claims,
        "void_requested": s.void_requested,
    }


__all__ = ["blocks_json", "card_status", "meters_json", "round_json"]

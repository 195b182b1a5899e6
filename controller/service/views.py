"""The JSON views of meters and hits that the daemon answers and the command line prints (docs/cli.md): one
form for both, so that `progressivectl meters` against a running daemon and against a state directory agree."""

from __future__ import annotations

from typing import Any

from controller.config.model import TableConfig
from controller.meter import Hit, MeterState, params_to_dict
from controller.meter.snapshot import hit_to_dict
from controller.money import format_cents, format_units
from controller.round.payout_kind import ENVY, JACKPOT, is_envy, payout_kind
from controller.round.settlement import Payout


def meter_json(s: MeterState) -> dict[str, Any]:
    p = params_to_dict(s.params)
    return {
        "meter": p["meter_id"],
        "current": format_units(s.current),
        "shown": format_cents(s.current_cents),
        "reset": p["reset"],
        "rate": p["rate"],
        "reserve_rate": p["reserve_rate"],
        "ceiling": p["ceiling"],
        "wager_sizes": p["wager_sizes"],
        "qualifying_wagers": {"count": s.wagers_count, "amount": format_cents(s.wagers_cents)},
        "contributions": format_units(s.contributions),
        "reserve": format_units(s.reserve),
        "overflow": format_units(s.overflow),
        "seed": format_units(s.seed),
        "adjustments": format_units(s.adjustments),
        "meter_awards": format_units(s.meter_awards),
        "hits": {label: {"count": n, "amount": format_cents(c)} for label, (n, c) in sorted(s.hits.items())},
        "paid_by_table": format_cents(s.paid_by_table_cents),
        "paid_by_attendant": format_cents(s.paid_by_attendant_cents),
        "cumulative_payouts": format_cents(s.cumulative_payouts_cents),
        "open_rounds": sorted(s.open_rounds),
        "voided_rounds": s.voided_rounds,
        # Awards taken from the meter and awaiting a supervisor's approval or rejection (linked meters).
        "locked": [
            {"claim": c, "amount": format_cents(a.amount_cents), "table": a.table, "seat": a.seat, "award": a.label}
            for c, a in sorted(s.locked.items())
        ],
    }


def hit_json(meter_id: str, h: Hit, kind: str | None = None) -> dict[str, Any]:
    d = hit_to_dict(h)
    out = {"meter": meter_id, "number": d.pop("number"), "time": d.pop("at"), "round": d.pop("round_id"), **d}
    if kind is not None:
        out["kind"] = kind
    return out


def hit_kind(cfg: TableConfig, meter_id: str, h: Hit) -> str:
    """What a hit of `meter_id` paid, for people: "jackpot" (a percentage of the meter), "envy" (an Envy Bonus: a
    fixed sum for another player's hand, paid by the table), or "award" (any other row of the paytable). The hit
    keeps the hand and the award as the paytable states them; an Envy Bonus is known by the paytables of the
    meter's wagers (controller.round.payout_kind)."""
    envy = h.paid_by == "table" and any(is_envy(w.paytable, h.hand, h.award)
                                        for w in cfg.wagers.values() if w.meter == meter_id)
    return _HIT_WORDS.get(payout_kind(h.award, "envy" if envy else None, h.hand), "award")


_HIT_WORDS = {JACKPOT: "jackpot", ENVY: "envy"}  # the history's `kind`: the Magic Card and Lucky Bonus are awards


def payout_json(p: Payout) -> dict[str, Any]:
    """One payout of a claim: who receives it, what it is (`kind`: "paytable", "envy", "magic-card",
    "lucky-bonus"), on which hand, the award as the paytable states it and the amount."""
    return {"seat": p.seat, "kind": p.kind, "hand_of": p.hand_of, "hand": p.hand, "award": p.award,
            "amount": format_cents(p.amount), "paid_by": p.paid_by, "shared_by": p.shared_by}


def table_json(cfg: TableConfig) -> dict[str, Any]:
    """What the pit console needs of the configuration to show the table: its seats, its wagers (the spots and
    their titles) and the casino's time zone (`[report] time_zone`, the zone of the gaming day)."""
    return {"seats": cfg.seats, "time_zone": cfg.report.time_zone,
            "wagers": [{"spot": w.id, "title": w.wager.title, "meter": w.meter} for w in cfg.wagers.values()]}


def meter_titles(cfg: TableConfig) -> tuple[tuple[str, str], ...]:
    """(meter id, the title of the wager it belongs to) for each progressive wager: the names people read."""
    return tuple(sorted((w.meter, w.wager.title) for w in cfg.wagers.values() if w.meter))


__all__ = ["hit_json", "hit_kind", "meter_json", "meter_titles", "payout_json", "table_json"]

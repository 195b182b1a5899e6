"""The JSON views of meters and hits that the daemon answers and the command line prints (docs/cli.md): one
form for both, so that `progressivectl meters` against a running daemon and against a state directory agree."""

from __future__ import annotations

from typing import Any

from ..meter import Hit, MeterState, params_to_dict
from ..meter.snapshot import hit_to_dict
from ..money import format_cents, format_units


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


def hit_json(meter_id: str, h: Hit) -> dict[str, Any]:
    d = hit_to_dict(h)
    return {"meter": meter_id, "number": d.pop("number"), "time": d.pop("at"), "round": d.pop("round_id"), **d}


__all__ = ["hit_json", "meter_json"]

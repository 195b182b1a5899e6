"""An odds report for programs (JSON-ready dict) and for people (a plain-text table).

Probabilities are exact fractions written "count/total" ("4/2598960": with the count and total
beside them nothing is lost by not reducing); money is decimal strings of dollars; decimals for
people are rounded exactly from Fractions, never through a binary float.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil
from typing import Any

from controller.cards import RANKS
from controller.games import GAMES
from controller.money import UNITS_PER_CENT, format_cents, format_dollars_human, format_units
from controller.odds.report import LOSING, Bonus, OddsReport, Outcome


def decimal(value: Fraction, places: int) -> str:
    """`value` rounded half up to `places` decimals, as a string (exact)."""
    scaled = value * 10**places
    sign = "-" if scaled < 0 else ""
    n = (abs(scaled.numerator) * 2 + scaled.denominator) // (2 * scaled.denominator)
    whole, frac = divmod(n, 10**places)
    return f"{sign}{whole:,}" + (f".{frac:0{places}d}" if places else "")


def _fraction(count: int | None, total: int | None, probability: Fraction) -> str:
    if count is not None and total:
        return f"{count}/{total}"
    return f"{probability.numerator}/{probability.denominator}"


def _outcome_json(o: Outcome, total: int | None) -> dict[str, Any]:
    return {
        "hand": o.hand,
        "min_rank": o.min_rank,
        "count": o.count,
        "probability": _fraction(o.count, total, o.probability),
        "award": o.award or None,
        "received": format_cents(o.received_cents),
    }


def _bonus_json(b: Bonus) -> dict[str, Any]:
    return {
        "kind": b.kind,
        "hand": b.hand,
        "count": b.count,
        "total": b.total,
        "probability": _fraction(b.count, b.total, b.probability),
        "occurrences": b.occurrences,
        "award": b.award,
        "received": format_cents(b.received_cents),
    }


def to_json(report: OddsReport) -> dict[str, Any]:
    """The report as plain JSON types: exact fractions as strings, money as decimal strings."""
    r = report
    return {
        "game": r.game_id,
        "wager": r.wager_id,
        "bet": r.bet,
        "paytable": r.paytable_id,
        "meter": format_units(r.meter_units),
        "amount": format_cents(r.wager_cents),
        "players": r.players,
        "lucky_positions": r.lucky_positions,
        "total": r.total,
        "method": r.method,
        "outcomes": [_outcome_json(o, r.total) for o in r.outcomes],
        "bonuses": [_bonus_json(b) for b in r.bonuses],
        "return": f"{r.return_.numerator}/{r.return_.denominator}",
        "return_percent": decimal(r.return_ * 100, 6).replace(",", ""),
        "break_even_meter": None if r.break_even_meter_units is None else format_units(r.break_even_meter_units),
        # The root of the return before flooring, up to the next meter unit (a millionth of a dollar).
        "break_even_linear": None if r.break_even_linear_units is None else format_units(ceil(r.break_even_linear_units)),
        "notes": list(r.notes),
    }


def _hand_text(o: Outcome) -> str:
    if o.hand == LOSING:
        return "all other (loses)"
    if o.min_rank is not None:
        return f"{o.hand} ({RANKS[o.min_rank - 2]} or better)"
    return o.hand


def _meter(units: int) -> str:
    """Meter units for people: whole cents as "$10,000.00", else every sub-cent digit."""
    if units % UNITS_PER_CENT == 0:
        return format_dollars_human(units // UNITS_PER_CENT)
    return "$" + format_units(units)


def _one_in(p: Fraction) -> str:
    return "-" if p == 0 else decimal(1 / p, 2)


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def render_text(report: OddsReport) -> str:
    """A plain-text table for people."""
    r = report
    g = GAMES[r.game_id]
    w = g.wagers[r.wager_id]
    lines = [
        f"{g.title}: {w.title}" + (f", {r.bet}" if r.bet else ""),
        f"Paytable {r.paytable_id}; meter {_meter(r.meter_units)}; wager {format_dollars_human(r.wager_cents)};"
        f" {r.players} player{'s' if r.players != 1 else ''}",
        f"Method: {r.method}" + (f" ({r.total:,} equally likely deals)" if r.total else ""),
        "",
    ]
    rows = [
        [
            _hand_text(o),
            "-" if o.count is None else f"{o.count:,}",
            decimal(o.probability, 10),
            _one_in(o.probability),
            o.award or "-",
            format_dollars_human(o.received_cents),
        ]
        for o in r.outcomes
    ]
    lines += _table(["Hand", "Count", "Probability", "1 in", "Award", "Received"], rows, {1, 2, 3, 5})
    if r.bonuses:
        lines.append("")
        brow = [
            [
                b.kind if b.kind == b.hand else f"{b.kind}: {b.hand}",
                f"{b.count:,}/{b.total:,}",
                decimal(b.probability, 10),
                str(b.occurrences),
                b.award,
                format_dollars_human(b.received_cents),
            ]
            for b in r.bonuses
        ]
        lines += _table(["Bonus", "Chance", "Probability", "Times", "Award", "Received"], brow, {1, 2, 3, 5})
    lines.append("")
    lines.append(f"Return: {decimal(r.return_ * 100, 4)}% of the amount wagered (exactly {r.return_.numerator}/{r.return_.denominator})")
    if r.break_even_meter_units is not None:
        lines.append(f"Break-even meter: {_meter(r.break_even_meter_units)}")
    lines += [f"Note: {n}" for n in r.notes]
    return "\n".join(lines) + "\n"


__all__ = ["decimal", "render_text", "to_json"]

"""Paytables for people (a text table) and for scripts (JSON), as `progressivectl paytables` prints them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.cards import RANKS
from controller.money import format_cents
from controller.paytables.model import Pay, Paytable


def _hand(p: Pay) -> str:
    if p.min_rank is None:
        return p.hand
    return f"{p.hand} ({RANKS[p.min_rank - 2]}s or better)"


def paytable_json(pt: Paytable) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": pt.id,
        "title": pt.title,
        "source": pt.source,
        "games": list(pt.games),
        "wager": pt.wager,
        "kind": pt.kind.value,
        "linked_allowed": pt.linked_allowed,
        "example": pt.example,
        "pays": [
            {"hand": p.hand, "award": p.award.describe()} | ({"min_rank": RANKS[p.min_rank - 2]} if p.min_rank else {})
            for p in pt.pays
        ],
    }
    if pt.envy is not None:
        out["envy"] = {
            "qualifying": pt.envy.qualifying,
            "source": pt.envy.source,
            "by_wager": {
                format_cents(w): {h: format_cents(f.cents) for h, f in row.items()}
                for w, row in sorted(pt.envy.by_wager.items())
            },
        }
    if pt.magic_card is not None:
        out["magic_card"] = pt.magic_card.describe()
    if pt.lucky_bonus is not None:
        out["lucky_bonus"] = pt.lucky_bonus.describe()
    if pt.notes:
        out["notes"] = pt.notes
    return out


def paytables_json(tables: Mapping[str, Paytable]) -> list[dict[str, Any]]:
    return [paytable_json(tables[k]) for k in sorted(tables)]


def paytables_text(tables: Mapping[str, Paytable]) -> str:
    lines: list[str] = []
    for key in sorted(tables):
        pt = tables[key]
        flags = []
        if pt.example:
            flags.append("EXAMPLE")
        if not pt.linked_allowed:
            flags.append("not for linked progressives")
        lines.append(f"{pt.id}  {pt.title}" + (f"  [{'; '.join(flags)}]" if flags else ""))
        lines.append(f"    {pt.source}; games: {', '.join(pt.games)}; wager: {pt.wager}")
        width = max((len(_hand(p)) for p in pt.pays), default=0)
        for p in pt.pays:
            lines.append(f"    {_hand(p):<{width}}  {p.award.describe()}")
        if pt.envy is not None:
            for w, row in sorted(pt.envy.by_wager.items()):
                pays = ", ".join(f"{h} {f.describe()}" for h, f in row.items())
                lines.append(f"    Envy Bonus, ${format_cents(w)} wager: {pays}")
        if pt.magic_card is not None:
            lines.append(f"    Magic Card  {pt.magic_card.describe()}")
        if pt.lucky_bonus is not None:
            lines.append(f"    Lucky Bonus  {pt.lucky_bonus.describe()}")
        lines.append("")
    return "\n".join(lines)


__all__ = ["paytable_json", "paytables_json", "paytables_text"]

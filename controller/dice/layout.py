"""The hop groups of a Props & Hops layout: which combinations each Hop wager wins on.

§ 668a.2(f)(2)-(5) say a Hop wager wins on "the combinations of dice in the top row / on the
left side / on the right side / in the center of the layout". Which combinations those are is
fixed by the layout the Bureau approves (§ 668a.1(b)) and is not printed in the regulations, so
an operator supplies its layout as data. The layout must depict every authorized wager
(§ 668a.1(b)(2)), hence all four hops.

EXAMPLE_LAYOUT is an example only, not any approved layout: the 21 combination boxes in three
rows of seven (EXAMPLE_GRID); the top row is the top hop; columns 1-2, 3-5 and 6-7 are the
left, center and right hops, so every combination is in exactly one side or the center and the
top row also belongs to a side or the center.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.dice.roll import COMBINATIONS, Combination, combination_str, parse_combination
from controller.errors import InputError

HOPS: tuple[str, ...] = ("hop-the-top", "hop-the-left", "hop-the-right", "hop-the-center")


@dataclass(frozen=True)
class HopLayout:
    name: str
    groups: tuple[tuple[str, frozenset[Combination]], ...]  # in HOPS order

    def combinations(self, hop: str) -> frozenset[Combination]:
        for name, combos in self.groups:
            if name == hop:
                return combos
        raise KeyError(hop)

    def as_dict(self) -> dict[str, list[str]]:
        """Plain data, in the form parse_layout reads."""
        return {name: [combination_str(c) for c in COMBINATIONS if c in combos] for name, combos in self.groups}


def parse_layout(data: object, field: str = "layout", name: str = "operator") -> HopLayout:
    """An operator's hop groups: ``{"hop-the-top": ["1-1", "1-2", ...], ...}``, all four hops."""
    if not isinstance(data, Mapping):
        raise InputError(field, f"a layout maps each hop to its combinations, e.g. {{\"hop-the-top\": [\"1-2\"]}}, not {data!r}")
    unknown = [k for k in data if k not in HOPS]
    if unknown:
        raise InputError(field, f"unknown hop {unknown[0]!r}; the hops are {', '.join(HOPS)}")
    missing = [h for h in HOPS if h not in data]
    if missing:
        raise InputError(field, f"no combinations for {', '.join(missing)}: the layout depicts every wager (§ 668a.1(b)(2))")
    groups = []
    for hop in HOPS:
        items = data[hop]
        where = f"{field}.{hop}"
        if isinstance(items, str) or not isinstance(items, (list, tuple)) or not items:
            raise InputError(where, f"must be a non-empty list of combinations such as [\"1-2\", \"3-3\"], not {items!r}")
        combos: set[Combination] = set()
        for i, item in enumerate(items):
            c = parse_combination(item, f"{where}[{i}]")
            if c in combos:
                raise InputError(f"{where}[{i}]", f"combination {combination_str(c)} is listed twice")
            combos.add(c)
        groups.append((hop, frozenset(combos)))
    return HopLayout(name, tuple(groups))


# Example only (see the module docstring): three rows of seven boxes, top row first.
EXAMPLE_GRID: tuple[tuple[str, ...], ...] = (
    ("1-1", "1-2", "1-6", "2-5", "3-4", "5-6", "6-6"),
    ("1-3", "1-4", "2-2", "2-4", "3-3", "4-5", "4-6"),
    ("1-5", "2-3", "4-4", "3-5", "5-5", "3-6", "2-6"),
)


def _from_grid(grid: tuple[tuple[str, ...], ...]) -> HopLayout:
    def cols(lo: int, hi: int) -> list[str]:
        return [row[c] for row in grid for c in range(lo, hi)]

    return parse_layout(
        {
            "hop-the-top": list(grid[0]),
            "hop-the-left": cols(0, 2),
            "hop-the-right": cols(5, 7),
            "hop-the-center": cols(2, 5),
        },
        "EXAMPLE_GRID",
        name="example",
    )


EXAMPLE_LAYOUT: HopLayout = _from_grid(EXAMPLE_GRID)


__all__ = ["EXAMPLE_GRID", "EXAMPLE_LAYOUT", "HOPS", "HopLayout", "parse_layout"]

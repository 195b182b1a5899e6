"""Two dice: a roll, the 21 combinations a layout depicts, and how they are written.

A roll is an ordered pair of die faces 1..6 (36 equally likely rolls). A combination is the
unordered pair the layouts depict (§ 623c.1(a)(2)(iii), § 668a.2(d)-(e)), kept as
``(low, high)`` and written ``"1-3"``; a non-double combination is thrown two ways in 36.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import InputError

FACES = range(1, 7)

Combination = tuple[int, int]  # (low, high), 1 <= low <= high <= 6

# The 21 combinations of two dice, in the order 1-1, 1-2, ..., 6-6.
COMBINATIONS: tuple[Combination, ...] = tuple((a, b) for a in FACES for b in FACES if a <= b)


@dataclass(frozen=True, slots=True)
class Roll:
    """The faces of the two dice, as the dealer announces them (§ 668a.3(h))."""

    first: int
    second: int

    def __post_init__(self) -> None:
        for name, face in (("first", self.first), ("second", self.second)):
            if isinstance(face, bool) or not isinstance(face, int) or face not in FACES:
                raise InputError(name, f"a die shows 1 to 6, not {face!r}")

    @property
    def total(self) -> int:
        return self.first + self.second

    @property
    def combination(self) -> Combination:
        return (self.first, self.second) if self.first <= self.second else (self.second, self.first)

    @property
    def is_double(self) -> bool:
        return self.first == self.second

    def __str__(self) -> str:
        return f"{self.first}-{self.second}"


# The 36 equally likely rolls, for exact counting.
ALL_ROLLS: tuple[Roll, ...] = tuple(Roll(a, b) for a in FACES for b in FACES)


def ways(combination: Combination) -> int:
    """How many of the 36 rolls show `combination`."""
    return 1 if combination[0] == combination[1] else 2


def combination_str(combination: Combination) -> str:
    return f"{combination[0]}-{combination[1]}"


def parse_roll(value: object, field: str = "roll") -> Roll:
    """A roll given as a pair of faces, ``[1, 3]`` (or a Roll)."""
    if isinstance(value, Roll):
        return value
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(field, f"a roll is a pair of die faces such as [1, 3], not {value!r}")
    for i, face in enumerate(value):
        if isinstance(face, bool) or not isinstance(face, int) or face not in FACES:
            raise InputError(f"{field}[{i}]", f"a die shows 1 to 6, not {face!r}")
    return Roll(value[0], value[1])


def parse_combination(value: object, field: str = "combination") -> Combination:
    """A combination written ``"1-3"`` (either order) or given as ``[1, 3]``."""
    if isinstance(value, str):
        parts = value.strip().split("-")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise InputError(field, f"a combination is written as two faces such as \"1-3\", not {value!r}")
        faces: object = [int(p) for p in parts]
    else:
        faces = value
    try:
        return parse_roll(faces, field).combination
    except InputError as e:
        raise InputError(field, f"{value!r} is not a combination of two dice (faces 1 to 6): {e.problem}") from None


__all__ = ["ALL_ROLLS", "COMBINATIONS", "FACES", "Combination", "Roll", "combination_str", "parse_combination",
           "parse_roll", "ways"]

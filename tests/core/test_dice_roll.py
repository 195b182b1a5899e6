"""Rolls and combinations of two dice: parsing, validation, counting."""

from __future__ import annotations

import pytest

from controller.dice.roll import (
    ALL_ROLLS,
    COMBINATIONS,
    Roll,
    combination_str,
    parse_combination,
    parse_roll,
    ways,
)
from controller.errors import InputError


def test_36_rolls_and_21_combinations() -> None:
    assert len(ALL_ROLLS) == 36 and len(set(ALL_ROLLS)) == 36
    assert len(COMBINATIONS) == 21
    # every combination is thrown as many ways as `ways` says, and the ways add up to 36
    for c in COMBINATIONS:
        assert sum(1 for r in ALL_ROLLS if r.combination == c) == ways(c)
    assert sum(ways(c) for c in COMBINATIONS) == 36


def test_roll_properties() -> None:
    r = Roll(4, 1)
    assert r.total == 5 and r.combination == (1, 4) and not r.is_double and str(r) == "4-1"
    assert Roll(3, 3).is_double and Roll(3, 3).combination == (3, 3)


@pytest.mark.parametrize("value", [[1, 3], (6, 6), [1, 1]])
def test_parse_roll_accepts_pairs(value: object) -> None:
    r = parse_roll(value, "rolls[0]")
    assert (r.first, r.second) == tuple(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([1, 7], "rolls[3][1]"),
        ([0, 2], "rolls[3][0]"),
        ([True, 2], "rolls[3][0]"),
        ([1.0, 2], "rolls[3][0]"),
        (["1", 2], "rolls[3][0]"),
        ([1, 2, 3], "rolls[3]"),
        ([1], "rolls[3]"),
        ("1-3", "rolls[3]"),
        (None, "rolls[3]"),
        (13, "rolls[3]"),
    ],
)
def test_parse_roll_names_the_field(value: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_roll(value, "rolls[3]")
    assert e.value.field == field


def test_roll_constructor_validates() -> None:
    with pytest.raises(InputError):
        Roll(0, 1)
    with pytest.raises(InputError):
        Roll(1, True)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "combo"), [("1-3", (1, 3)), ("3-1", (1, 3)), (" 6-6 ", (6, 6)), ([5, 2], (2, 5))])
def test_parse_combination(text: object, combo: tuple[int, int]) -> None:
    assert parse_combination(text, "x") == combo
    assert combination_str(combo) == f"{combo[0]}-{combo[1]}"


@pytest.mark.parametrize("text", ["7-1", "0-3", "1-", "a-b", "13", "1-2-3", [1, 9], 4])
def test_parse_combination_refuses(text: object) -> None:
    with pytest.raises(InputError) as e:
        parse_combination(text, "layout.hop-the-top[2]")
    assert e.value.field == "layout.hop-the-top[2]"

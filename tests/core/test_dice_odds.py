"""Exact odds of the dice wagers, each checked against an independent computation."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, permutations

import pytest

from controller.dice.hot_roller import MARKER_COMBINATIONS, NUMBERS
from controller.dice.layout import EXAMPLE_LAYOUT, parse_layout
from controller.dice.odds import (
    final_sets,
    hot_roller_outcomes,
    hot_roller_return,
    props_and_hops_outcomes,
    props_and_hops_return,
    six_eight_shake_win_probability,
)
from controller.dice.props_and_hops import BETS
from controller.dice.roll import ALL_ROLLS
from controller.errors import InputError
from controller.paytables import builtin_paytables

PT = builtin_paytables()


def ways(c: tuple[int, int]) -> int:
    return sum(1 for a in range(1, 7) for b in range(1, 7) if (min(a, b), max(a, b)) == c)


def all_before_seven(combos: list[tuple[int, int]]) -> Fraction:
    """P(every one of `combos` is thrown before a 7), by inclusion-exclusion.

    Thinking of each combination and the 7 as independent exponential clocks (rates = ways in 36),
    P = integral of 6 e^{-6t} prod(1 - e^{-w_c t}) dt = sum over subsets T of (-1)^|T| 6 / (6 + w(T)).
    """
    w = [ways(c) for c in combos]
    total = Fraction(0)
    for k in range(len(w) + 1):
        for t in combinations(w, k):
            total += (-1) ** k * Fraction(6, 6 + sum(t))
    return total


def test_hot_roller_matches_inclusion_exclusion_over_numbers() -> None:
    """P(exactly k numbers complete) from P(all numbers of A complete) by Moebius inversion."""
    numbers = list(NUMBERS)
    at_least = {a: all_before_seven([c for n in a for c in NUMBERS[n]])
                for r in range(7) for a in combinations(numbers, r)}
    exactly = {k: Fraction(0) for k in range(7)}
    for b in at_least:
        rest = [n for n in numbers if n not in b]
        exactly[len(b)] += sum(
            ((-1) ** r * at_least[tuple(sorted(b + extra))] for r in range(len(rest) + 1)
             for extra in combinations(rest, r)),
            Fraction(0),
        )
    assert hot_roller_outcomes() == exactly


def test_hot_roller_distribution() -> None:
    o = hot_roller_outcomes()
    assert sorted(o) == list(range(7)) and sum(o.values()) == 1
    assert all(p > 0 for p in o.values())
    assert o[6] == Fraction(444473, 1078282205)  # all six numbers: about 1 in 2,426
    # a 7 on the come-out roll alone loses 1/6 of the time
    assert o[0] > Fraction(1, 6)


def _by_paths(weights: list[int], stop: int) -> dict[int, Fraction]:
    """Brute force: every order in which new events can be thrown before the stop event."""
    out: dict[int, Fraction] = {}
    n = len(weights)
    for r in range(n + 1):
        for order in permutations(range(n), r):
            p, left = Fraction(1), sum(weights)
            for i in order:
                p *= Fraction(weights[i], stop + left)
                left -= weights[i]
            p *= Fraction(stop, stop + left)
            mask = sum(1 << i for i in order)
            out[mask] = out.get(mask, Fraction(0)) + p
    return out


@pytest.mark.parametrize(
    "weights",
    [[1], [2, 1], [2, 2, 1], [2, 1, 2, 1], [2, 2, 1, 2, 2]],  # e.g. the combinations of 4 and 10
)
def test_chain_matches_enumeration_of_orders(weights: list[int]) -> None:
    final, base = final_sets(weights, 6)
    got = {m: Fraction(v, base ** (m.bit_count() + 1)) for m, v in enumerate(final)}
    assert got == _by_paths(weights, 6)
    assert sum(got.values()) == 1


def test_chain_matches_truncated_roll_sequences() -> None:
    """Enumerate every sequence of up to 7 rolls (grouped: 1-3, 2-2, a 7, anything else): the
    probability of each set thrown, ended by a 7, is within the mass of the unfinished sequences."""
    weights, stop, other = [2, 1], 6, 36 - 9
    final, base = final_sets(weights, stop)
    exact = {m: Fraction(v, base ** (m.bit_count() + 1)) for m, v in enumerate(final)}
    partial = {m: Fraction(0) for m in range(4)}
    frontier = {0: Fraction(1)}
    depth = 7
    for _ in range(depth):
        nxt: dict[int, Fraction] = {}
        for mask, p in frontier.items():
            partial[mask] += p * Fraction(stop, 36)
            for i, w in enumerate(weights):
                nxt[mask | 1 << i] = nxt.get(mask | 1 << i, 0) + p * Fraction(w, 36)
            nxt[mask] = nxt.get(mask, 0) + p * Fraction(other, 36)
        frontier = nxt
    unfinished = sum(frontier.values())
    assert unfinished == Fraction(30, 36) ** depth
    for m in range(4):
        assert partial[m] <= exact[m] <= partial[m] + unfinished


def test_six_eight_shake_matches_inclusion_exclusion() -> None:
    p = six_eight_shake_win_probability()
    assert p == all_before_seven([(1, 5), (2, 4), (3, 3), (2, 6), (3, 5), (4, 4)])
    assert p == Fraction(89, 17160)
    o = props_and_hops_outcomes("six-eight-shake")
    assert o == {"six-eight-shake": p, "lose": 1 - p}


def _count(pred) -> Fraction:  # type: ignore[no-untyped-def]
    return Fraction(sum(1 for a in range(1, 7) for b in range(1, 7) if pred(a, b)), 36)


@pytest.mark.parametrize(
    ("bet", "want"),
    [
        ("two-the-hardway", {"double": _count(lambda a, b: a == b == 1)}),
        ("eight-the-hardway", {"double": _count(lambda a, b: a == b == 4)}),
        ("one-six", {"any-number": _count(lambda a, b: {a, b} == {1, 6})}),
        ("four-five", {"any-number": _count(lambda a, b: {a, b} == {4, 5})}),
        ("field", {"field-2-or-12": _count(lambda a, b: a + b in (2, 12)),
                   "field": _count(lambda a, b: a + b in (3, 4, 9, 10, 11))}),
        ("one-six-and-under", {"one-six-and-under": _count(lambda a, b: a + b < 7 or {a, b} == {1, 6})}),
        ("three-four-and-over", {"three-four-and-over": _count(lambda a, b: a + b > 7 or {a, b} == {3, 4})}),
        ("any-craps", {"any-craps": _count(lambda a, b: a + b in (2, 3, 12))}),
        ("any-seven", {"any-seven": _count(lambda a, b: a + b == 7)}),
        ("any-doubles", {"any-doubles": _count(lambda a, b: a == b)}),
        ("hop-the-top", {"hop-the-top": Fraction(12, 36)}),
        ("hop-the-left", {"hop-the-left": Fraction(11, 36)}),
        ("hop-the-right", {"hop-the-right": Fraction(11, 36)}),
        ("hop-the-center", {"hop-the-center": Fraction(14, 36)}),
    ],
)
def test_single_roll_odds_are_direct_counts(bet: str, want: dict[str, Fraction]) -> None:
    got = props_and_hops_outcomes(bet)
    assert got == {**want, "lose": 1 - sum(want.values())}


@pytest.mark.parametrize("bet", list(BETS))
def test_every_distribution_sums_to_one(bet: str) -> None:
    o = props_and_hops_outcomes(bet)
    assert sum(o.values()) == 1 and all(isinstance(p, Fraction) and p > 0 for p in o.values())
    if bet != "six-eight-shake":
        assert all((p * 36).denominator == 1 for p in o.values())


def test_operator_layout_changes_hop_odds() -> None:
    mine = parse_layout({"hop-the-top": ["6-6"], "hop-the-left": ["1-1", "1-2"], "hop-the-right": ["3-3"],
                         "hop-the-center": [f"{a}-{b}" for a in range(1, 7) for b in range(a, 7)]})
    assert props_and_hops_outcomes("hop-the-left", mine) == {"hop-the-left": Fraction(3, 36), "lose": Fraction(33, 36)}
    assert props_and_hops_outcomes("hop-the-center", mine) == {"hop-the-center": Fraction(1)}
    assert props_and_hops_outcomes("hop-the-top", EXAMPLE_LAYOUT) == props_and_hops_outcomes("hop-the-top")


def test_unknown_bet() -> None:
    with pytest.raises(InputError) as e:
        props_and_hops_outcomes("big-red")
    assert e.value.field == "bet"


@pytest.mark.parametrize(
    ("bet", "ret"),
    [
        ("field", Fraction(17, 18)),  # (2*3 + 14*2) / 36: house edge 5.56%
        ("two-the-hardway", Fraction(31, 36)),
        ("three-five", Fraction(32, 36)),
        ("one-six-and-under", Fraction(34, 36)),
        ("three-four-and-over", Fraction(34, 36)),
        ("hop-the-top", Fraction(12, 36) * Fraction(5, 2)),
        ("hop-the-left", Fraction(11, 36) * 3),
        ("hop-the-center", Fraction(14, 36) * Fraction(5, 2)),
        ("six-eight-shake", Fraction(89, 17160) * 151),
    ],
)
def test_return_per_unit_wagered(bet: str, ret: Fraction) -> None:
    assert props_and_hops_return(bet, PT["props-and-hops"]) == ret


def test_hot_roller_return() -> None:
    o = hot_roller_outcomes()
    for pid, six in (("hot-roller-a", 201), ("hot-roller-b", 301)):
        want = o[2] * 6 + o[3] * 11 + o[4] * 21 + o[5] * 51 + o[6] * six
        assert hot_roller_return(PT[pid]) == want
    assert hot_roller_return(PT["hot-roller-a"]) < hot_roller_return(PT["hot-roller-b"]) < 1


def test_the_36_rolls_are_the_sample_space() -> None:
    assert sorted((r.first, r.second) for r in ALL_ROLLS) == [(a, b) for a in range(1, 7) for b in range(1, 7)]
    assert len(MARKER_COMBINATIONS) == 14

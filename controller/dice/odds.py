"""Exact probabilities of the dice wagers, as fractions; no simulation.

Hot Roller and Six Eight Shake are Markov chains over the set of combinations thrown so far.
Rolls that change nothing (a combination already thrown, or one with no marker) are loops on
a state, so from state S the next roll that matters is the stop (a 7, 6 ways in 36) or a new
combination c, with probabilities 6 / d(S) and ways(c) / d(S), d(S) = 6 + the ways of the
combinations not yet thrown. Exact arithmetic in integers: every probability of a state with k
combinations thrown is a numerator over L**k, L the least common multiple of the possible d(S).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from math import lcm

from controller.dice.hot_roller import MARKER_COMBINATIONS, NUMBERS, OUTCOME_KEYS, HotRoller
from controller.dice.layout import EXAMPLE_LAYOUT, HopLayout
from controller.dice.pays import LOSE, PaytableLike
from controller.dice.props_and_hops import BETS, PropsAndHops
from controller.dice.roll import ALL_ROLLS, ways
from controller.dice.six_eight_shake import BET as SIX_EIGHT_SHAKE
from controller.dice.six_eight_shake import COMBINATIONS as SHAKE_COMBINATIONS
from controller.errors import InputError

SEVEN_WAYS = 6  # 1-6, 2-5, 3-4, each two ways in 36


def final_sets(weights: Sequence[int], stop: int) -> tuple[list[int], int]:
    """The chain's absorption law: for each set S of events (a bitmask over `weights`), the
    probability that exactly S has been thrown when the stop event comes, as numerators over
    ``base ** (popcount(S) + 1)``; returns (numerators, base). Weights are ways out of any total."""
    n = len(weights)
    total = sum(weights)
    base = lcm(*range(stop, stop + total + 1))
    unthrown = [total] * (1 << n)  # ways of the events not in the set
    for mask in range(1, 1 << n):
        low = (mask & -mask).bit_length() - 1
        unthrown[mask] = unthrown[mask & (mask - 1)] - weights[low]
    reach = [0] * (1 << n)
    reach[0] = 1
    final = [0] * (1 << n)
    for mask in range(1 << n):  # a set's predecessors are smaller numbers, so are done first
        r = reach[mask]
        if not r:
            continue
        step = r * (base // (stop + unthrown[mask]))
        final[mask] = step * stop
        for i in range(n):
            if not mask >> i & 1 and weights[i]:
                reach[mask | 1 << i] += step * weights[i]
    return final, base


@lru_cache(maxsize=1)
def _hot_roller() -> tuple[tuple[int, Fraction], ...]:
    weights = [ways(c) for c in MARKER_COMBINATIONS]
    final, base = final_sets(weights, SEVEN_WAYS)
    n = len(weights)
    number_masks = [sum(1 << MARKER_COMBINATIONS.index(c) for c in combos) for combos in NUMBERS.values()]
    sums = [0] * (len(NUMBERS) + 1)
    for mask, num in enumerate(final):
        if num:
            complete = sum(1 for m in number_masks if mask & m == m)
            sums[complete] += num * base ** (n - mask.bit_count())  # to the common denominator base**(n+1)
    return tuple((k, Fraction(s, base ** (n + 1))) for k, s in enumerate(sums))


def hot_roller_outcomes() -> dict[int, Fraction]:
    """Probability that a Hot Roller wager is settled with k numbers complete, k = 0..6 (§ 623c.1(g))."""
    return dict(_hot_roller())


@lru_cache(maxsize=1)
def six_eight_shake_win_probability() -> Fraction:
    """Probability that all six combinations of § 668a.2(f)(8) are thrown before a seven."""
    final, base = final_sets([ways(c) for c in SHAKE_COMBINATIONS], SEVEN_WAYS)
    full = (1 << len(SHAKE_COMBINATIONS)) - 1
    return Fraction(final[full], base ** (len(SHAKE_COMBINATIONS) + 1))


def props_and_hops_outcomes(bet: str, layout: HopLayout | None = None) -> dict[str, Fraction]:
    """Outcome key -> probability for one Props & Hops wager ("lose" included), by counting the 36 rolls."""
    if not isinstance(bet, str) or bet not in BETS:
        raise InputError("bet", f"unknown bet {bet!r}; the bets: {', '.join(BETS)}")
    if bet == SIX_EIGHT_SHAKE:
        p = six_eight_shake_win_probability()
        return {SIX_EIGHT_SHAKE: p, LOSE: 1 - p}
    counts: dict[str, int] = {}
    for r in ALL_ROLLS:
        key = BETS[bet].outcome(r, layout or EXAMPLE_LAYOUT)
        counts[key] = counts.get(key, 0) + 1
    return {k: Fraction(v, len(ALL_ROLLS)) for k, v in counts.items()}


def hot_roller_return(paytable: PaytableLike) -> Fraction:
    """Expected amount received per unit wagered (1 minus the house edge)."""
    awards = dict(HotRoller.new(paytable).awards)
    return sum(
        (p * awards[OUTCOME_KEYS[k]].multiple for k, p in hot_roller_outcomes().items() if k in OUTCOME_KEYS),
        Fraction(0),
    )


def props_and_hops_return(bet: str, paytable: PaytableLike, layout: HopLayout | None = None) -> Fraction:
    """Expected amount received per unit wagered on `bet` (1 minus the house edge)."""
    machine = PropsAndHops.new(paytable, layout)
    if bet not in machine.offered:
        raise InputError("bet", f"paytable {machine.paytable_id!r} does not offer {bet!r}")
    awards = dict(machine.awards)
    return sum(
        (p * awards[k].multiple for k, p in props_and_hops_outcomes(bet, machine.layout).items() if k != LOSE),
        Fraction(0),
    )


__all__ = ["SEVEN_WAYS", "final_sets", "hot_roller_outcomes", "hot_roller_return", "props_and_hops_outcomes",
           "props_and_hops_return", "six_eight_shake_win_probability"]

"""Hands up to a permutation of the suits: the symmetry that makes exact enumeration cheap.

All suits are equal in rank (§ 667a.6(a)), so two hands that differ only by renaming suits have
the same value. Counting one representative per pattern, weighted by how many real hands it
stands for, gives exact counts from far fewer evaluations.

`suit_patterns(n)` builds hands rank by rank, naming suits in order of first use: a suit not used
yet is always the lowest unused label, and its weight is the number of ways to choose the real
suits. Every real hand corresponds to exactly one (pattern, choice of suits), so the weights sum
to C(52, n). A pattern can still stand for the same hands as another (two suits first used by the
same rank); `suit_classes(n)` merges those into the true classes (1,755 for three cards).
"""

from __future__ import annotations

from functools import cache
from itertools import combinations, permutations
from math import comb

from controller.cards import DECK

Pattern = tuple[tuple[int, ...], int]  # (cards in ascending order, how many real hands)

_SUIT_PERMUTATIONS: tuple[tuple[int, int, int, int], ...] = tuple(permutations(range(4)))  # type: ignore[arg-type]


@cache
def suit_patterns(n: int) -> tuple[Pattern, ...]:
    """Representatives of all n-card hands with weights summing to C(52, n)."""
    if not 0 <= n <= 7:
        raise ValueError("suit patterns are built for hands of 0 to 7 cards")
    out: list[Pattern] = []

    def build(rank_index: int, left: int, used: int, cards: tuple[int, ...], weight: int) -> None:
        if left == 0:
            out.append((cards, weight))
            return
        if left > 4 * (13 - rank_index):
            return
        build(rank_index + 1, left, used, cards, weight)
        base = rank_index * 4
        for count in range(1, min(4, left) + 1):
            for old in range(max(0, count - (4 - used)), min(count, used) + 1):
                new = count - old
                ways = comb(4 - used, new)
                fresh = tuple(range(used, used + new))
                for olds in combinations(range(used), old):
                    suits = sorted(olds + fresh)
                    build(
                        rank_index + 1, left - count, used + new,
                        cards + tuple(base + s for s in suits), weight * ways,
                    )

    build(0, n, 0, (), 1)
    return tuple(out)


def canonical(cards: tuple[int, ...]) -> tuple[int, ...]:
    """The least sorted image of `cards` under all 24 renamings of the suits."""
    return min(tuple(sorted((c & ~3) | p[c & 3] for c in cards)) for p in _SUIT_PERMUTATIONS)


@cache
def suit_classes(n: int) -> tuple[Pattern, ...]:
    """One hand per class of hands equal up to suits, with the size of the class."""
    merged: dict[tuple[int, ...], int] = {}
    for cards, weight in suit_patterns(n):
        key = canonical(cards)
        merged[key] = merged.get(key, 0) + weight
    return tuple(sorted(merged.items()))


def remaining(cards: tuple[int, ...]) -> tuple[int, ...]:
    """The rest of the 52-card deck, ascending."""
    taken = set(cards)
    return tuple(c for c in DECK if c not in taken)


__all__ = ["Pattern", "canonical", "remaining", "suit_classes", "suit_patterns"]

"""Flop Poker: every deal of the player's three cards and the three-card flop, exactly.

§ 667a.11(d)(2): the hand is the player's three cards and two of the three community cards, the
best such five. That is C(52, 3) * C(49, 3) = 407,170,400 deals, too many to evaluate one by one
in Python; two observations make it a few seconds:

1. Suits are interchangeable (§ 667a.6(a)), so only one player hand per suit class is needed:
   1,755 classes, each weighted by the number of hands in it.
2. For fixed player cards, call the value of the player's cards plus community cards {a, b} the
   weight of the edge a-b of a complete graph on the other 49 cards. A flop {a, b, c} is a
   triangle and its hand is its heaviest edge. Adding the edges lightest first and counting, as
   each edge goes in, the triangles it closes (common neighbours, one AND and a bit count of two
   adjacency bitmasks) counts each flop exactly once, under the value of its heaviest edge.

So each class costs 1,176 five-card lookups and 1,176 bitmask steps instead of 18,424 flops.
"""

from __future__ import annotations

from controller.odds.codes import KEY, tables
from controller.odds.suits import remaining, suit_classes


def player_flop_codes(player: tuple[int, int, int]) -> dict[int, int]:
    """For fixed player cards: code -> number of the C(49, 3) flops giving that best hand."""
    t = tables()
    plain, flush = t.poker5_plain, t.poker5_flush
    others = remaining(player)
    p1, p2, p3 = player
    base = KEY[p1] + KEY[p2] + KEY[p3]
    # Only a suited player hand can make a flush: it needs both community cards in that suit.
    suited = p1 & 3 if p1 & 3 == p2 & 3 == p3 & 3 else -1
    keys = [KEY[c] for c in others]
    in_suit = [c & 3 == suited for c in others]

    buckets: dict[int, list[tuple[int, int]]] = {}
    n = len(others)
    for i in range(n):
        ki, si = base + keys[i], in_suit[i]
        for j in range(i + 1, n):
            value = flush[ki + keys[j]] if si and in_suit[j] else plain[ki + keys[j]]
            edges = buckets.get(value)
            if edges is None:
                buckets[value] = [(i, j)]
            else:
                edges.append((i, j))

    adjacent = [0] * n
    out: dict[int, int] = {}
    for value in sorted(buckets):
        closed = 0
        for i, j in buckets[value]:
            closed += (adjacent[i] & adjacent[j]).bit_count()
            adjacent[i] |= 1 << j
            adjacent[j] |= 1 << i
        if closed:
            out[value] = closed
    return out


def flop_codes() -> dict[int, int]:
    """Code -> number of all 407,170,400 deals of player cards and flop giving that best hand."""
    total: dict[int, int] = {}
    for player, weight in suit_classes(3):
        for value, count in player_flop_codes(player).items():  # type: ignore[arg-type]
            total[value] = total.get(value, 0) + count * weight
    return total


__all__ = ["flop_codes", "player_flop_codes"]

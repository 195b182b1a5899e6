"""Five-card Poker hands, § 667a.6(a)-(c); § 639a.6 ranks them the same way.

A hand's value is one int, higher is better and equal is a tie (§ 667a.6(c), last sentence):

    bits 20-23  the category, a Poker5 member (§ 667a.6(b), royal flush highest)
    bits 0-19   five ranks (2..14), four bits each, in order of significance

The ranks in order of significance are the cards grouped by how many share a rank, larger groups
first and higher ranks first within a size: K-K-K-4-4, Q-Q-7-7-3, 9-9-A-8-2. That is how
§ 667a.6(b) ranks hands of one category (four aces the highest four-of-a-kind, three aces and two
kings the highest full house, two aces and two kings the highest two pair) and, among hands the
same under (b), § 667a.6(c)'s "highest ranking card ... not contained in the other hand" decides:
for hands that agree on their groups it is the first kicker in which they differ.

A straight is ranked by its highest card. The ace is high, except that it completes A-2-3-4-5
(§ 667a.6(a)), which is the lowest straight and straight flush and is written 5-4-3-2-A; the ace
joins no other sequence, so Q-K-A-2-3 is not a straight.

`evaluate` is two table lookups: the product of one prime per rank identifies the ranks of a hand
whatever the order or suits, and a flush is looked up in its own table. The tables are built at
import from the rules above (7,462 distinct values; tens of milliseconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, combinations_with_replacement

from controller.errors import CardError
from controller.hands.categories import Poker5
from controller.hands.rankcode import CARD_PRIME, RANKS, hand_error, pack, prime_product, rank_groups

__all__ = ["best", "category", "evaluate", "first_rank", "hand_error", "ranks", "straight_top"]

HAND_SIZE = 5


def straight_top(ranks: Sequence[int]) -> int:
    """The highest card of a straight made of these five distinct ranks (5 for A-2-3-4-5), else 0."""
    ordered = sorted(ranks)
    if ordered == [2, 3, 4, 5, 14]:
        return 5  # § 667a.6(a): the ace completes 2-3-4-5 and no other sequence
    if ordered[-1] - ordered[0] == 4 and len(set(ordered)) == 5:
        return ordered[-1]
    return 0


def _value(ranks: Sequence[int], flush: bool) -> int:
    """The value of a hand with these ranks, from the definitions in § 667a.6(b)."""
    shape, grouped = rank_groups(ranks)
    top = straight_top(ranks) if len(shape) == 5 else 0
    if top:
        grouped = [top - i for i in range(4)] + [14 if top == 5 else top - 4]
    if top and flush:
        cat = Poker5.ROYAL_FLUSH if top == 14 else Poker5.STRAIGHT_FLUSH
    elif shape[0] == 4:
        cat = Poker5.FOUR_OF_A_KIND
    elif shape[:2] == [3, 2]:
        cat = Poker5.FULL_HOUSE
    elif flush:
        cat = Poker5.FLUSH
    elif top:
        cat = Poker5.STRAIGHT
    elif shape[0] == 3:
        cat = Poker5.THREE_OF_A_KIND
    elif shape[:2] == [2, 2]:
        cat = Poker5.TWO_PAIR
    elif shape[0] == 2:
        cat = Poker5.PAIR
    else:
        cat = Poker5.HIGH_CARD
    return pack(cat, grouped)


# Prime product of the ranks -> value. No rank appears five times in one deck.
_PLAIN: dict[int, int] = {
    prime_product(rs): _value(rs, flush=False)
    for rs in combinations_with_replacement(RANKS, HAND_SIZE)
    if len(set(rs)) > 1
}
_FLUSH: dict[int, int] = {prime_product(rs): _value(rs, flush=True) for rs in combinations(RANKS, HAND_SIZE)}


def evaluate(cards: Sequence[int]) -> int:
    """The value of exactly five cards: higher is better, equal is a tie (§ 667a.6(b)-(c)).

    The cards must be distinct ints 0..51 (`cards.parse_cards` and `select.form_hand` check that;
    this function does not, for speed). A wrong count or a non-card raises CardError.
    """
    try:
        a, b, c, d, e = cards
        key = CARD_PRIME[a] * CARD_PRIME[b] * CARD_PRIME[c] * CARD_PRIME[d] * CARD_PRIME[e]
        if a & 3 == b & 3 == c & 3 == d & 3 == e & 3:
            return _FLUSH[key]
        return _PLAIN[key]
    except (ValueError, TypeError, IndexError, KeyError):
        raise hand_error(cards, HAND_SIZE) from None


def category(value: int) -> Poker5:
    """The category of a hand value (§ 667a.6(b))."""
    return Poker5(value >> 20)


def ranks(value: int) -> tuple[int, ...]:
    """The five ranks of a hand value in order of significance, e.g. (13, 13, 13, 4, 4)."""
    return tuple((value >> shift) & 15 for shift in (16, 12, 8, 4, 0))


def first_rank(value: int) -> int:
    """The rank that defines the hand: the pair's rank for a pair (for "a pair of jacks or
    better", § 667a.12(b)), the high pair of two pair, the three of a full house, the highest
    card of a straight (5 for A-2-3-4-5), flush or high-card hand."""
    return (value >> 16) & 15


# Index tuples of every five of 5, 6 or 7 cards, in `itertools.combinations` order.
_FIVES = {n: tuple(combinations(range(n), HAND_SIZE)) for n in (5, 6, 7)}


def best(cards: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """The best five of 5 to 7 cards: (value, the five cards in the order given).

    Of several equally good choices the first in `itertools.combinations` order is returned.
    The cards must be distinct (not checked here, as in `evaluate`).
    """
    n = len(cards)
    if not HAND_SIZE <= n <= 7:
        raise CardError("cards", f"has {n} cards; the best five-card hand is chosen from 5 to 7")
    hand = tuple(cards)
    top, chosen = -1, _FIVES[n][0]
    try:
        # `evaluate` inlined: the primes and suits of the cards are looked up once, not per five
        p = [CARD_PRIME[c] for c in hand]
        s = [c & 3 for c in hand]
        for five in _FIVES[n]:
            a, b, c, d, e = five
            key = p[a] * p[b] * p[c] * p[d] * p[e]
            v = _FLUSH[key] if s[a] == s[b] == s[c] == s[d] == s[e] else _PLAIN[key]
            if v > top:
                top, chosen = v, five
    except (TypeError, IndexError, KeyError):
        raise hand_error(cards, n) from None
    return top, tuple(hand[i] for i in chosen)

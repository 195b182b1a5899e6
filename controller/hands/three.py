"""Three-card Poker hands, § 667a.6(d) (Flop Poker's Three Card Bonus) and § 643a.6(d) (Let It Ride).

From highest to lowest: mini-royal (A-K-Q of one suit; "a royal" in § 667a.6(d)(1)), straight
flush, three-of-a-kind, straight, flush, pair, high card. In three cards a straight outranks a
flush (§ 667a.6(d)(4)-(5)).

The ace: § 667a.6(a) ranks it highest and lets it be used low only "to complete a straight
flush or a straight formed with a 2, 3, 4 and 5 but [it] may not be combined with any other
sequence of cards". Read to the letter, A-2-3 is therefore not a straight in Flop Poker's three
cards: it is ace-high (or, suited, a flush). That is the default (`ace_low=False`). Games whose
rules do let A-2-3 be a straight (Three Card Poker's custom, and the well-known table of 22,100
three-card hands with 720 straights) evaluate with `ace_low=True`: A-2-3 is then the lowest
straight, written 3-2-A. Either way K-A-2 is not a straight and A-K-Q is the highest.

Decisions where § 667a.6(d) is silent:
- Hands of one category are ranked as five-card hands are (§ 667a.6(b)-(c)): a straight by its
  highest card, a pair by its rank then the kicker, three-of-a-kind by its rank, a flush and a
  high-card hand card by card from the highest.

A hand's value is one int, higher is better and equal is a tie: the category (a Three member) in
bits 12-15 and the three ranks in order of significance in bits 0-11, four bits each.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, combinations_with_replacement

from controller.hands.categories import Three
from controller.hands.rankcode import CARD_PRIME, RANKS, hand_error, pack, prime_product, rank_groups

HAND_SIZE = 3


def straight_top(ranks: Sequence[int], ace_low: bool = False) -> int:
    """The highest card of a straight made of these three ranks (3 for A-2-3 when `ace_low`), else 0."""
    ordered = sorted(ranks)
    if ordered == [2, 3, 14]:
        return 3 if ace_low else 0  # see the module docstring
    if ordered[2] - ordered[0] == 2 and len(set(ordered)) == 3:
        return ordered[2]
    return 0


def _value(ranks: Sequence[int], flush: bool, ace_low: bool) -> int:
    """The value of a hand with these ranks, from the definitions in § 667a.6(d)."""
    shape, grouped = rank_groups(ranks)
    top = straight_top(ranks, ace_low) if len(shape) == 3 else 0
    if top:
        grouped = [top, top - 1, 14 if top == 3 else top - 2]
    if top and flush:
        cat = Three.MINI_ROYAL if top == 14 else Three.STRAIGHT_FLUSH
    elif len(shape) == 1:
        cat = Three.THREE_OF_A_KIND
    elif top:
        cat = Three.STRAIGHT
    elif flush:
        cat = Three.FLUSH
    elif len(shape) == 2:
        cat = Three.PAIR
    else:
        cat = Three.HIGH_CARD
    return pack(cat, grouped)


def _tables(ace_low: bool) -> tuple[dict[int, int], dict[int, int]]:
    """Prime product of the ranks -> value, for unsuited and for suited cards."""
    plain = {prime_product(rs): _value(rs, False, ace_low) for rs in combinations_with_replacement(RANKS, HAND_SIZE)}
    flush = {prime_product(rs): _value(rs, True, ace_low) for rs in combinations(RANKS, HAND_SIZE)}
    return plain, flush


_TABLES = {False: _tables(False), True: _tables(True)}


def evaluate(cards: Sequence[int], ace_low: bool = False) -> int:
    """The value of exactly three cards: higher is better, equal is a tie.

    `ace_low`: whether A-2-3 is a straight (see the module docstring). The cards must be distinct
    ints 0..51 (not checked here, for speed); a wrong count or a non-card raises CardError.
    """
    try:
        a, b, c = cards
        key = CARD_PRIME[a] * CARD_PRIME[b] * CARD_PRIME[c]
        plain, flush = _TABLES[ace_low]
        if a & 3 == b & 3 == c & 3:
            return flush[key]
        return plain[key]
    except (ValueError, TypeError, IndexError, KeyError):
        raise hand_error(cards, HAND_SIZE) from None


def category(value: int) -> Three:
    """The category of a hand value (§ 667a.6(d), § 643a.6(d))."""
    return Three(value >> 12)


def ranks(value: int) -> tuple[int, ...]:
    """The three ranks of a hand value in order of significance, e.g. (9, 9, 14)."""
    return ((value >> 8) & 15, (value >> 4) & 15, value & 15)


def first_rank(value: int) -> int:
    """The rank that defines the hand: the pair's rank for a pair, the highest card otherwise
    (3 for A-2-3)."""
    return (value >> 8) & 15


__all__ = ["HAND_SIZE", "category", "evaluate", "first_rank", "ranks", "straight_top"]

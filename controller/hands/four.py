"""Four Card Poker hands, § 641a.6(b) (not reprinted in our copy of the rules).

From highest to lowest: four-of-a-kind, straight flush, three-of-a-kind, flush, straight, two
pair, pair, high card. Four cards of one suit in sequence are a straight flush, A-K-Q-J the
highest; there is no royal category.

The ace is high, except that it completes A-2-3-4, the lowest straight and straight flush
(written 4-3-2-A), as § 667a.6(a) lets it complete A-2-3-4-5 in five cards; the ace joins no
other sequence, so K-A-2-3 is not a straight. Hands of one category are ranked as five-card hands
are (§ 667a.6(b)-(c)): larger groups first, then higher ranks, then kickers from the highest.

A player's hand is the best four of the player's five cards (§ 641a.11(c)(2)); the dealer's is
the best four of the dealer's six (§ 641a.11(c)). Of five cards without four of one suit the best
four depends on the ranks alone, so `best` looks that up in a table built at import; otherwise it
tries every four.

A hand's value is one int, higher is better and equal is a tie: the category (a Four member) in
bits 16-19 and the four ranks in order of significance in bits 0-15, four bits each.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, combinations_with_replacement

from controller.errors import CardError
from controller.hands.categories import Four
from controller.hands.rankcode import CARD_PRIME, RANK_PRIME, RANKS, hand_error, pack, prime_product, rank_groups

HAND_SIZE = 4
MAX_CARDS = 7


def straight_top(ranks: Sequence[int]) -> int:
    """The highest card of a straight made of these four ranks (4 for A-2-3-4), else 0."""
    ordered = sorted(ranks)
    if ordered == [2, 3, 4, 14]:
        return 4  # A-2-3-4, the lowest straight (see the module docstring)
    if ordered[3] - ordered[0] == 3 and len(set(ordered)) == 4:
        return ordered[3]
    return 0


def value_of_ranks(ranks: Sequence[int], flush: bool) -> int:
    """The value of a hand with these four ranks (all of one suit if `flush`), in the order of § 641a.6(b); the
    Bad Beat count (controller/odds/badbeat.py) ranks by it too."""
    shape, grouped = rank_groups(ranks)
    top = straight_top(ranks) if len(shape) == 4 else 0
    if top:
        grouped = [top, top - 1, top - 2, 14 if top == 4 else top - 3]
    if shape[0] == 4:
        cat = Four.FOUR_OF_A_KIND
    elif top and flush:
        cat = Four.STRAIGHT_FLUSH
    elif shape[0] == 3:
        cat = Four.THREE_OF_A_KIND
    elif flush:
        cat = Four.FLUSH
    elif top:
        cat = Four.STRAIGHT
    elif shape == [2, 2]:
        cat = Four.TWO_PAIR
    elif shape[0] == 2:
        cat = Four.PAIR
    else:
        cat = Four.HIGH_CARD
    return pack(cat, grouped)


# Prime product of the ranks -> value.
_PLAIN: dict[int, int] = {
    prime_product(rs): value_of_ranks(rs, flush=False) for rs in combinations_with_replacement(RANKS, HAND_SIZE)
}
_FLUSH: dict[int, int] = {prime_product(rs): value_of_ranks(rs, flush=True) for rs in combinations(RANKS, HAND_SIZE)}


def evaluate(cards: Sequence[int]) -> int:
    """The value of exactly four cards: higher is better, equal is a tie.

    The cards must be distinct ints 0..51 (not checked here, for speed); a wrong count or a
    non-card raises CardError.
    """
    try:
        a, b, c, d = cards
        key = CARD_PRIME[a] * CARD_PRIME[b] * CARD_PRIME[c] * CARD_PRIME[d]
        if a & 3 == b & 3 == c & 3 == d & 3:
            return _FLUSH[key]
        return _PLAIN[key]
    except (ValueError, TypeError, IndexError, KeyError):
        raise hand_error(cards, HAND_SIZE) from None


def category(value: int) -> Four:
    """The category of a hand value (§ 641a.6(b))."""
    return Four(value >> 16)


def ranks(value: int) -> tuple[int, ...]:
    """The four ranks of a hand value in order of significance, e.g. (8, 8, 8, 13)."""
    return ((value >> 12) & 15, (value >> 8) & 15, (value >> 4) & 15, value & 15)


def first_rank(value: int) -> int:
    """The rank that defines the hand: the rank of the four, three or (high) pair, else the
    highest card (4 for A-2-3-4)."""
    return (value >> 12) & 15


def best(cards: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """The best four of 4 to 7 cards (§ 641a.11(c), (c)(2)): (value, the four cards in the order
    given). Where several choices are equally good, which one is returned is unspecified (but
    always the same for the same input)."""
    n = len(cards)
    if n == 5:
        return _best_of_five(cards)
    if not HAND_SIZE <= n <= MAX_CARDS:
        raise CardError("cards", f"has {n} cards; the best four-card hand is chosen from 4 to {MAX_CARDS}")
    return _best_of_any(cards)


def _best_of_any(cards: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    try:
        hands = iter(combinations(tuple(cards), HAND_SIZE))
        top_cards = next(hands)
        top = evaluate(top_cards)
        for hand in hands:
            v = evaluate(hand)
            if v > top:
                top, top_cards = v, hand
    except CardError:
        raise hand_error(cards, len(cards)) from None  # name the card by its place in `cards`
    return top, top_cards


def _best_plain(ranks: Sequence[int]) -> tuple[int, tuple[int, int]]:
    """Five cards of these ranks, no four of one suit: (rank product, (the best value of four of
    them, the rank index 0..12 of the card to leave out))."""
    p = prime_product(ranks)
    return p, max((_PLAIN[p // RANK_PRIME[r]], r - 2) for r in set(ranks))


# The best four of five cards depends on their ranks alone unless four share a suit.
_BEST_OF_FIVE: dict[int, tuple[int, int]] = dict(
    _best_plain(rs) for rs in combinations_with_replacement(RANKS, 5) if len(set(rs)) > 1
)
# A byte per suit: adding 0x7C to a count of 4 or 5 sets that byte's top bit.
_SUIT_BYTE: list[int] = [1 << 8 * (card & 3) for card in range(52)]


def _best_of_five(cards: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    try:
        a, b, c, d, e = cards
        if (_SUIT_BYTE[a] + _SUIT_BYTE[b] + _SUIT_BYTE[c] + _SUIT_BYTE[d] + _SUIT_BYTE[e] + 0x7C7C7C7C) & 0x80808080:
            return _best_of_any(cards)  # a four-card flush is possible: try every four
        value, left_out = _BEST_OF_FIVE[CARD_PRIME[a] * CARD_PRIME[b] * CARD_PRIME[c] * CARD_PRIME[d] * CARD_PRIME[e]]
        i = (a >> 2, b >> 2, c >> 2, d >> 2, e >> 2).index(left_out)
    except (ValueError, TypeError, IndexError, KeyError):
        raise hand_error(cards, 5) from None
    hand = (a, b, c, d, e)
    return value, hand[:i] + hand[i + 1 :]


__all__ = ["HAND_SIZE", "MAX_CARDS", "best", "category", "evaluate", "first_rank", "ranks", "straight_top",
           "value_of_ranks"]

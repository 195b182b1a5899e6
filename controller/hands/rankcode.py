"""What the five-, three- and four-card evaluators share: rank primes, value packing, groups.

A hand's ranks are identified, whatever their order and suits, by the product of one prime per
rank; a value packs the category above the ranks in order of significance, four bits each, so
that comparing two ints compares two hands.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller.cards import card_str
from controller.errors import CardError

RANKS = range(2, 15)
RANK_PRIME = dict(zip(RANKS, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41), strict=True))
# One prime per card, indexed by the card int (rank_index * 4 + suit).
CARD_PRIME: list[int] = [RANK_PRIME[r] for r in RANKS for _ in range(4)]


def pack(category: int, ranks: Iterable[int]) -> int:
    """The category in the high bits, then each rank in four bits, most significant first."""
    value = category
    for r in ranks:
        value = value << 4 | r
    return value


def prime_product(ranks: Iterable[int]) -> int:
    p = 1
    for r in ranks:
        p *= RANK_PRIME[r]
    return p


def rank_groups(ranks: Sequence[int]) -> tuple[list[int], list[int]]:
    """(group sizes, ranks in order of significance): larger groups first, higher ranks first
    within a size, as § 667a.6(b) ranks hands of one category: K-K-K-4-4, Q-Q-7-7-3, 9-9-A-8-2."""
    groups = sorted(((ranks.count(r), r) for r in set(ranks)), reverse=True)
    return [k for k, _ in groups], [r for k, r in groups for _ in range(k)]


def hand_error(cards: object, size: int) -> CardError:
    """Why `cards` is not `size` distinct cards (for evaluators whose lookup failed)."""
    try:
        items = list(cards)  # type: ignore[call-overload]
    except TypeError:
        return CardError("cards", f"must be a sequence of {size} cards, not {cards!r}")
    if len(items) != size:
        return CardError("cards", f"has {len(items)} cards; a hand here has exactly {size}")
    seen: dict[int, int] = {}
    for i, c in enumerate(items):
        if type(c) is not int or not 0 <= c < 52:
            return CardError(f"cards[{i}]", f"is not a card (an int 0..51): {c!r}")
        if c in seen:
            return CardError(f"cards[{i}]", f"duplicate card {card_str(c)} (already at cards[{seen[c]}])")
        seen[c] = i
    return CardError("cards", f"is not a hand of {size} cards: {items!r}")


__all__ = ["CARD_PRIME", "RANKS", "RANK_PRIME", "hand_error", "pack", "prime_product", "rank_groups"]

"""Playing cards: parse, print, validate.

A card is an int 0..51: ``rank_index * 4 + suit_index`` with rank_index 0..12 for 2..A and
suits in the order S, H, D, C. Plain ints keep hand evaluation and exact enumeration fast.

Notation (design conventions): rank then suit, ranks ``2-9 T J Q K A`` (``10`` accepted), suits
``S H D C``, case-insensitive: ``AS``, ``TD``, ``10h``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller.errors import CardError

RANKS = "23456789TJQKA"
SUITS = "SHDC"
DECK_SIZE = 52  # one deck (§ 667a.3(a), § 667a.5(b))
DECK: tuple[int, ...] = tuple(range(DECK_SIZE))

# Rank values as the regulations order them (667a.6(a), 639a.6): 2 lowest, ace highest.
TWO, THREE, FOUR, FIVE, SIX, SEVEN, EIGHT, NINE, TEN, JACK, QUEEN, KING, ACE = range(2, 15)


def rank(card: int) -> int:
    """Rank value 2..14 (ace high)."""
    return (card >> 2) + 2


def suit(card: int) -> int:
    """Suit index 0..3 (S, H, D, C)."""
    return card & 3


def make(rank_value: int, suit_index: int) -> int:
    return (rank_value - 2) * 4 + suit_index


def card_str(card: int) -> str:
    return RANKS[card >> 2] + SUITS[card & 3]


def cards_str(cards: Iterable[int]) -> str:
    return " ".join(card_str(c) for c in cards)


def parse_card(text: object, field: str = "card") -> int:
    """One card such as ``AS``, ``td`` or ``10h``; anything else is a CardError naming it."""
    if not isinstance(text, str):
        raise CardError(field, f"a card is written as a string such as \"AS\", not {text!r}")
    s = text.strip().upper()
    if len(s) == 3 and s.startswith("10"):
        s = "T" + s[2]
    if len(s) != 2:
        raise CardError(field, f"unknown card {text!r}: write rank then suit, e.g. \"AS\", \"TD\", \"10H\"")
    r, u = s[0], s[1]
    if r not in RANKS:
        raise CardError(field, f"unknown card {text!r}: rank {r!r} is not one of 2-9 T J Q K A (10 accepted)")
    if u not in SUITS:
        raise CardError(field, f"unknown card {text!r}: suit {u!r} is not one of S H D C")
    return RANKS.index(r) * 4 + SUITS.index(u)


def parse_cards(
    items: object,
    field: str = "cards",
    *,
    count: int | Sequence[int] | None = None,
    seen: dict[int, str] | None = None,
) -> tuple[int, ...]:
    """A list of cards (or one space/comma separated string).

    `count` is the number of cards required (or the allowed numbers). `seen` maps cards already
    used elsewhere in the same deal to the field that holds them, so a duplicate across hands is
    named with both places. It is updated in place.
    """
    if isinstance(items, str):
        parts: list[object] = [p for p in items.replace(",", " ").split() if p]
    elif isinstance(items, (list, tuple)):
        parts = list(items)
    else:
        raise CardError(field, f"must be a list of cards such as [\"AS\", \"KD\"], not {items!r}")
    if count is not None:
        allowed = (count,) if isinstance(count, int) else tuple(count)
        if len(parts) not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise CardError(field, f"has {len(parts)} cards; the rules require {want}")
    used = seen if seen is not None else {}
    out: list[int] = []
    for i, item in enumerate(parts):
        where = f"{field}[{i}]"
        card = parse_card(item, where)
        if card in used:
            raise CardError(where, f"duplicate card {card_str(card)} (already at {used[card]})")
        used[card] = where
        out.append(card)
    return tuple(out)


__all__ = ["ACE", "DECK", "DECK_SIZE", "EIGHT", "FIVE", "FOUR", "JACK", "KING", "NINE", "QUEEN", "RANKS", "SEVEN",
           "SIX", "SUITS", "TEN", "THREE", "TWO", "card_str", "cards_str", "make", "parse_card", "parse_cards", "rank",
           "suit"]

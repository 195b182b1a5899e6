"""Hand categories, lowest first, named as the regulations spell them (kebab-case labels).

The integer value of each member orders the categories within one kind of hand.
"""

from __future__ import annotations

from enum import IntEnum


class _Labelled(IntEnum):
    @property
    def label(self) -> str:
        """kebab-case name as the regulations spell it: ``royal-flush``, ``four-of-a-kind``."""
        return self.name.lower().replace("_", "-")

    @classmethod
    def from_label(cls, text: str) -> _Labelled:
        key = text.strip().lower().replace("_", "-")
        for member in cls:
            if member.label == key:
                return member
        raise KeyError(text)


HandCategory = _Labelled  # the type every hand category enum (Poker5, Three, Four) is


class Poker5(_Labelled):
    """Five-card Poker hands, 667a.6(b) and 639a.6(b) (ace low only in A-2-3-4-5)."""

    HIGH_CARD = 0
    PAIR = 1
    TWO_PAIR = 2  # 667a.6(b)(8) says "two pairs"; paytables say "two pair"
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8
    ROYAL_FLUSH = 9


class Three(_Labelled):
    """Three-card hands, 667a.6(d) (Flop Poker's Three Card Bonus) and 643a.6(d) (Let It Ride).

    In three cards a straight outranks a flush. 667a.6(d)(1) calls A-K-Q suited a "royal",
    643a.6(d) a "mini-royal"; the label is ``mini-royal`` and paytables may write either.
    """

    HIGH_CARD = 0
    PAIR = 1
    FLUSH = 2
    STRAIGHT = 3
    THREE_OF_A_KIND = 4
    STRAIGHT_FLUSH = 5
    MINI_ROYAL = 6


class Four(_Labelled):
    """Four Card Poker hands, 641a.6(b) (not reprinted in our copy; the order in use):
    four of a kind outranks a straight flush, three of a kind outranks a flush and a straight."""

    HIGH_CARD = 0
    PAIR = 1
    TWO_PAIR = 2
    STRAIGHT = 3
    FLUSH = 4
    THREE_OF_A_KIND = 5
    STRAIGHT_FLUSH = 6
    FOUR_OF_A_KIND = 7


# Other spellings found in the regulations and paytables.
ALIASES: dict[str, str] = {
    "two-pairs": "two-pair",
    "royal": "mini-royal",
    "three-card-royal": "mini-royal",
    "quads": "four-of-a-kind",
    "trips": "three-of-a-kind",
}


def category_from_label(kind: type[_Labelled], text: str) -> _Labelled:
    key = text.strip().lower().replace("_", "-").replace(" ", "-")
    key = ALIASES.get(key, key)
    return kind.from_label(key)


__all__ = ["ALIASES", "Four", "HandCategory", "Poker5", "Three", "category_from_label"]

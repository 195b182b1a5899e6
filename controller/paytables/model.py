"""Paytables as plain data: rows of (hand, award), an optional Envy Bonus table and bonus awards.

A paytable knows which hands it pays and what; it knows nothing of how a hand is formed or
settled. Rows are kept highest hand first, as the regulations print them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from types import MappingProxyType

from controller.awards import Award, Fixed, PercentOfMeter
from controller.games import HandKind
from controller.hands.categories import Four, HandCategory, Poker5, Three

# `wager = "*"`: every wager of the listed games whose hands are of the paytable's kind. Dice
# games state one payout schedule for all their wagers (§ 668a.4), whatever ids they get.
ANY_WAGER = "*"

# § 623c.1(h): "All six number combinations" ... "Any two number combinations".
HOT_ROLLER_KEYS: tuple[str, ...] = (
    "six-numbers",
    "five-numbers",
    "four-numbers",
    "three-numbers",
    "two-numbers",
)

# § 668a.4, in the order printed there.
PROPS_AND_HOPS_KEYS: tuple[str, ...] = (
    "double",  # Double Wager, § 668a.2(d)
    "any-number",  # Any Number Wager, § 668a.2(e)
    "field-2-or-12",  # Field Wager when 2 or 12 is rolled, § 668a.2(f)(1)
    "field",  # Field Wager when 3, 4, 9, 10 or 11 is rolled
    "hop-the-top",  # § 668a.2(f)(2)
    "hop-the-left",  # § 668a.2(f)(3)
    "hop-the-right",  # § 668a.2(f)(4)
    "hop-the-center",  # § 668a.2(f)(5)
    "one-six-and-under",  # 1-6 and Under, § 668a.2(f)(6)
    "three-four-and-over",  # 3-4 and Over, § 668a.2(f)(7)
    "six-eight-shake",  # § 668a.2(f)(8)
)

# § 585.2(f)(2)-(4) authorizes these too but prints no odds: an operator that offers them
# states its own in a paytable file.
PROPS_AND_HOPS_OPTIONAL_KEYS: tuple[str, ...] = ("any-craps", "any-seven", "any-doubles")

DICE_KEYS: Mapping[HandKind, tuple[str, ...]] = MappingProxyType(
    {
        HandKind.HOT_ROLLER: HOT_ROLLER_KEYS,
        HandKind.PROPS_AND_HOPS: PROPS_AND_HOPS_KEYS + PROPS_AND_HOPS_OPTIONAL_KEYS,
    }
)

_HAND_TYPES: Mapping[HandKind, type[HandCategory]] = MappingProxyType(
    {HandKind.POKER5: Poker5, HandKind.THREE: Three, HandKind.FOUR: Four}
)


def hand_type(kind: HandKind) -> type[HandCategory] | None:
    """The category enum of a card kind (Poker5, Three, Four); None for the dice kinds."""
    return _HAND_TYPES.get(kind)


def hand_keys(kind: HandKind) -> tuple[str, ...]:
    """Every hand label (highest first) or dice outcome key a paytable of `kind` may name."""
    enum = _HAND_TYPES.get(kind)
    if enum is None:
        return DICE_KEYS[kind]
    return tuple(c.label for c in sorted(enum, reverse=True))


@dataclass(frozen=True)
class Pay:
    """One row: a hand (category label or dice outcome key) and what it pays.

    `min_rank` (2..14) restricts the row to hands whose first rank is at least that, as the
    Flop Wager's "A pair of jacks, queens, kings or aces" (§ 667a.12(b)): hand "pair", min_rank 11.
    """

    hand: str
    award: Award
    min_rank: int | None = None


@dataclass(frozen=True)
class EnvyTable:
    """Envy Bonus amounts by the size of the receiver's progressive wager (§ 639a.12(d)(6)).

    `qualifying` is the lowest Envy Bonus Qualifying Hand; `by_wager` maps wager cents to the
    fixed sum (§ 639a.1 "Envy Bonus") for each qualifying hand.
    """

    qualifying: str
    by_wager: Mapping[int, Mapping[str, Fixed]]
    source: str

    def __post_init__(self) -> None:
        frozen = MappingProxyType({w: MappingProxyType(dict(row)) for w, row in self.by_wager.items()})
        object.__setattr__(self, "by_wager", frozen)

    def __hash__(self) -> int:
        return hash(
            (self.qualifying, self.source, tuple((w, tuple(r.items())) for w, r in self.by_wager.items()))
        )

    @property
    def wager_sizes(self) -> tuple[int, ...]:
        """The wager sizes (cents) that have a row, smallest first."""
        return tuple(sorted(self.by_wager))

    def award_for(self, wager_cents: int, hand: str) -> Fixed | None:
        """The Envy Bonus for a receiver who wagered `wager_cents` when another player holds `hand`."""
        row = self.by_wager.get(wager_cents)
        return None if row is None else row.get(hand)


@dataclass(frozen=True)
class Paytable:
    id: str
    title: str
    source: str  # the section of the regulations (or the Rules Submission) it comes from
    games: tuple[str, ...]
    wager: str  # a wager id in each of `games`, or ANY_WAGER
    kind: HandKind
    pays: tuple[Pay, ...]  # highest hand first for card kinds; as written for dice kinds
    linked_allowed: bool = True  # § 639a.12(d)(3)
    example: bool = False  # illustrative values, not from the regulations or a Rules Submission
    envy: EnvyTable | None = None
    magic_card: Award | None = None  # § 639a.12(e)(3)
    lucky_bonus: Award | None = None  # § 639a.12(e)(3)
    notes: str = ""
    _rows: Mapping[str, tuple[Pay, ...]] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        rows: dict[str, list[Pay]] = {}
        for p in self.pays:
            rows.setdefault(p.hand, []).append(p)
        # Rows of one hand split by min_rank are tried from the highest min_rank down.
        index = {h: tuple(sorted(ps, key=lambda p: -(p.min_rank or 0))) for h, ps in rows.items()}
        object.__setattr__(self, "_rows", MappingProxyType(index))

    @property
    def is_dice(self) -> bool:
        return self.kind in DICE_KEYS

    @property
    def hands(self) -> tuple[str, ...]:
        """The hand labels (or outcome keys) paid, in row order."""
        return tuple(p.hand for p in self.pays)

    @cached_property
    def pays_percent_of_meter(self) -> bool:
        """Whether any row is paid from the progressive meter."""
        return any(isinstance(p.award, PercentOfMeter) for p in self.pays)

    def pay_for(self, category: IntEnum, first_rank: int | None = None) -> Pay | None:
        """The row paid for a hand whose highest category is `category`, or None if not paid.

        Only the highest ranking hand formed is paid (§ 639a.12(d)(2), § 667a.12(d)(2)), so this
        looks up that category alone and never falls back to a lower row. `first_rank` is the rank
        that names the hand (the rank of a pair); it is needed when a row has a min_rank.
        """
        enum = _HAND_TYPES.get(self.kind)
        if enum is None or not isinstance(category, enum):
            raise TypeError(f"{self.id} pays {self.kind.value} hands, not {category!r}")
        for p in self._rows.get(category.label, ()):
            if p.min_rank is None:
                return p
            if first_rank is None:
                raise ValueError(f"{self.id}: a {p.hand} row has a minimum rank; pass first_rank")
            if first_rank >= p.min_rank:
                return p
        return None

    def pay_for_outcome(self, key: str) -> Pay | None:
        """The row of a dice paytable for an outcome key (HOT_ROLLER_KEYS, PROPS_AND_HOPS_KEYS)."""
        if not self.is_dice:
            raise TypeError(f"{self.id} pays {self.kind.value} hands, not dice outcomes")
        rows = self._rows.get(key, ())
        return rows[0] if rows else None

    def category(self, pay: Pay) -> IntEnum:
        """The hand category of a row of a card paytable."""
        enum = _HAND_TYPES.get(self.kind)
        if enum is None:
            raise TypeError(f"{self.id} pays dice outcomes, not hand categories")
        return enum.from_label(pay.hand)

    def lowest_paying(self) -> Pay:
        """The row of the lowest hand paid (a card paytable's last row once loaded)."""
        if self.is_dice:
            raise TypeError(f"{self.id} pays dice outcomes, which have no hand order")
        return min(self.pays, key=lambda p: (self.category(p), p.min_rank or 0))


__all__ = ["ANY_WAGER", "DICE_KEYS", "HOT_ROLLER_KEYS", "PROPS_AND_HOPS_KEYS", "PROPS_AND_HOPS_OPTIONAL_KEYS",
           "EnvyTable", "Pay", "Paytable", "hand_keys", "hand_type"]

"""Exact counts of hands by category and first rank, for each kind of hand and card rule.

Every count is out of all equally likely deals of the cards that form the hand: C(52, 5) =
2,598,960 five-card hands, C(52, 3) = 22,100 three-card hands, and for Flop Poker's
"player's three cards and two of the three community cards" (§ 667a.11(d)(2))
C(52, 3) * C(49, 3) = 407,170,400 deals. Results are cached for the life of the process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from itertools import combinations, combinations_with_replacement
from math import comb, prod
from types import MappingProxyType

from controller.errors import RulesError
from controller.games import CardRule, HandKind
from controller.hands.categories import Four, Poker5, Three
from controller.odds.codes import KEY, category_of, first_rank_of, suits_by_card, tables
from controller.odds.suits import suit_patterns

_ENUMS: Mapping[HandKind, type[IntEnum]] = MappingProxyType(
    {HandKind.POKER5: Poker5, HandKind.THREE: Three, HandKind.FOUR: Four}
)

# Rules under which a five-card Poker hand is five cards dealt from one deck, whoever holds them.
FIVE_RANDOM_CARDS = frozenset(
    {
        CardRule.PLAYER,
        CardRule.PLAYER_AND_COMMUNITY,
        CardRule.PLAYER_AND_FLOP,
        CardRule.DEALER_FIRST_FIVE,
        CardRule.DEALER_AND_FLOP,
        CardRule.DEALER_AND_COMMUNITY,
    }
)


@dataclass(frozen=True)
class HandCounts:
    """How many of `total` equally likely deals give each (category, first rank)."""

    kind: HandKind
    rule: CardRule
    total: int
    by_hand: Mapping[tuple[IntEnum, int], int]  # (category, first rank) -> count, highest first
    method: str

    def count(self, category: IntEnum, min_rank: int | None = None) -> int:
        """Deals whose best hand is `category` (with a first rank of at least `min_rank`)."""
        return sum(n for (c, r), n in self.by_hand.items() if c == category and (min_rank is None or r >= min_rank))

    @property
    def by_category(self) -> dict[IntEnum, int]:
        """Counts per category, highest category first (every category, zero included)."""
        out: dict[IntEnum, int] = {c: 0 for c in sorted(_ENUMS[self.kind], reverse=True)}
        for (c, _), n in self.by_hand.items():
            out[c] += n
        return out


def _freeze(kind: HandKind, rule: CardRule, codes: Mapping[int, int], total: int, method: str) -> HandCounts:
    enum = _ENUMS[kind]
    if sum(codes.values()) != total:  # every deal counted once: a broken enumeration must not pass silently
        raise AssertionError(f"{kind.value}/{rule.value}: counted {sum(codes.values())} of {total} deals")
    items = sorted(((enum(category_of(k)), first_rank_of(k)), n) for k, n in codes.items() if n)
    return HandCounts(kind, rule, total, MappingProxyType(dict(reversed(items))), method)


def _count_patterns(size: int, evaluate: Callable[[tuple[int, ...]], int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for cards, weight in suit_patterns(size):
        k = evaluate(cards)
        out[k] = out.get(k, 0) + weight
    return out


def _poker5(cards: tuple[int, ...]) -> int:
    t = tables()
    a, b, c, d, e = cards
    key = KEY[a] + KEY[b] + KEY[c] + KEY[d] + KEY[e]
    if a & 3 == b & 3 == c & 3 == d & 3 == e & 3:
        return t.poker5_flush[key]
    return t.poker5_plain[key]


def _three(cards: tuple[int, ...], ace_low: bool = False) -> int:
    t = tables()
    a, b, c = cards
    key = KEY[a] + KEY[b] + KEY[c]
    if a & 3 == b & 3 == c & 3:
        return t.three_flush[ace_low][key]
    return t.three_plain[ace_low][key]


def _best_four(cards: tuple[int, ...], plain: Mapping[int, int]) -> int:
    """Best four of the cards (§ 641a.11(c)(2)): the best rank-only four, or four of one suit."""
    best = plain[sum(KEY[c] for c in cards)]
    flush = tables().four_flush
    for ranks in suits_by_card(cards).values():
        if len(ranks) >= 4:
            best = max(best, flush[sum(1 << (3 * (r - 2)) for r in ranks)])
    return best


@cache
def _five_card_codes() -> dict[int, int]:
    return _count_patterns(5, _poker5)


def _six_card_best_four() -> dict[int, int]:
    """Best four of six cards (the Four Card Poker dealer, § 641a.11(c)) by rank multiset: a
    multiset r has prod C(4, r_i) suit choices; of those, the ones with four or more cards of one
    suit s (at most one suit, in six cards) are counted by the set F of ranks held in s: 4 choices
    of s, then C(3, r_i - 1) for the other cards of a rank in F and C(3, r_i) for the others."""
    t = tables()
    out: dict[int, int] = {}
    for ranks, key in _multisets_with_keys(6):
        count = Counter(ranks)
        plain = t.four_of_six_plain[key]
        total = prod(comb(4, n) for n in count.values())
        distinct = sorted(count)
        for size in range(4, len(distinct) + 1):
            for suited in combinations(distinct, size):
                ways = 4 * prod(comb(3, n - 1) if r in suited else comb(3, n) for r, n in count.items())
                if ways:
                    best = max(plain, t.four_flush[sum(KEY[(r - 2) * 4] for r in suited)])
                    out[best] = out.get(best, 0) + ways
                    total -= ways
        out[plain] = out.get(plain, 0) + total
    return out


def _multisets_with_keys(size: int) -> list[tuple[tuple[int, ...], int]]:
    return [
        (rs, sum(KEY[(r - 2) * 4] for r in rs))
        for rs in combinations_with_replacement(range(2, 15), size)
        if max(Counter(rs).values()) <= 4
    ]


def hand_counts(kind: HandKind, rule: CardRule, *, three_card_ace_low: bool = False) -> HandCounts:
    """Exact counts for the hand a wager of this kind and card rule is paid on.

    `three_card_ace_low` (the wager's rule, Wager.three_card_ace_low): whether A-2-3 is a
    straight in three cards; it matters to three-card hands only."""
    return _hand_counts(kind, rule, kind is HandKind.THREE and three_card_ace_low)


@cache
def _hand_counts(kind: HandKind, rule: CardRule, three_card_ace_low: bool) -> HandCounts:
    if kind is HandKind.POKER5 and rule in FIVE_RANDOM_CARDS:
        return _freeze(kind, rule, _five_card_codes(), comb(52, 5), "every five-card hand, by suit pattern")
    if kind is HandKind.POKER5 and rule is CardRule.PLAYER_AND_TWO_OF_COMMUNITY:
        from controller.odds.flop import flop_codes

        return _freeze(kind, rule, flop_codes(), comb(52, 3) * comb(49, 3), "every deal of the player's three cards and the flop, by suit class and triangle counting")
    if kind is HandKind.THREE and rule is CardRule.PLAYER_FIRST_THREE:
        codes = _count_patterns(3, lambda cards: _three(cards, three_card_ace_low))
        straights = "A-2-3 a straight" if three_card_ace_low else "A-2-3 not a straight"
        return _freeze(kind, rule, codes, comb(52, 3), f"every three-card hand, by suit pattern ({straights})")
    if kind is HandKind.FOUR and rule is CardRule.PLAYER_BEST_FOUR:
        plain5 = tables().four_of_five_plain
        codes = _count_patterns(5, lambda cards: _best_four(cards, plain5))
        return _freeze(kind, rule, codes, comb(52, 5), "best four of every five-card hand, by suit pattern")
    if kind is HandKind.FOUR and rule is CardRule.DEALER_BEST_FOUR:
        return _freeze(kind, rule, _six_card_best_four(), comb(52, 6), "best four of every six-card hand, by rank multiset and suited ranks")
    raise RulesError("rule", f"no exact count for {kind.value} hands formed by the {rule.value!r} rule")


def clear_caches() -> None:
    """Forget every cached count and table (for benchmarks that time a cold start)."""
    from controller.odds import badbeat, codes, suits

    badbeat.bad_beat_counts.cache_clear()
    badbeat._tables.cache_clear()
    badbeat._four_value.cache_clear()
    _hand_counts.cache_clear()
    _five_card_codes.cache_clear()
    suits.suit_patterns.cache_clear()
    suits.suit_classes.cache_clear()
    codes._four_code.cache_clear()
    codes._TABLES = None


__all__ = ["FIVE_RANDOM_CARDS", "HandCounts", "clear_caches", "hand_counts"]

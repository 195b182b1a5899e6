"""Dense lookup tables of hand codes for counting: category and first rank, nothing more.

Odds need only what a paytable can tell apart: the category and the rank that names the hand
(the rank of a pair, for "a pair of jacks or better", § 667a.12(b)). A code packs them as
``category << 4 | first_rank``; a larger code is a better hand, because within one category the
first rank is what is compared first (§ 667a.6(b)-(c)), so the best of several hands has the
largest code.

These tables are built here from the definitions of the regulations, independently of
controller.hands (the evaluators used in play), so each can check the other.

A rank key is the sum of 8**rank_index over the cards: three bits of count per rank, the same
for any order or suits. Flushes, which need suits, are looked up in their own tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from itertools import combinations, combinations_with_replacement

from controller.hands.categories import Four, Poker5, Three
from controller.hands.rankcode import RANKS

ACE = 14

# Rank key of each card (card int 0..51).
KEY: tuple[int, ...] = tuple(1 << (3 * (c >> 2)) for c in range(52))


def rank_key(ranks: Sequence[int]) -> int:
    return sum(1 << (3 * (r - 2)) for r in ranks)


def code(category: int, first_rank: int) -> int:
    return category << 4 | first_rank


def category_of(code_: int) -> int:
    return code_ >> 4


def first_rank_of(code_: int) -> int:
    return code_ & 15


def _straight_top(ranks: Sequence[int], size: int, ace_low: bool = True) -> int:
    """The top card of a straight of `size` distinct ranks, else 0. The ace is low only in
    A-2-3-4-5 (§ 667a.6(a)) and, as controller.hands has it, in A-2-3-4; in A-2-3 only where the
    game's rule says so (`ace_low`, Wager.three_card_ace_low). It joins no other sequence (so
    K-A-2 is no straight)."""
    s = sorted(set(ranks))
    if len(s) != size or len(ranks) != size:
        return 0
    if s[-1] - s[0] == size - 1:
        return s[-1]
    if ace_low and s[-1] == ACE and s[:-1] == list(range(2, size + 1)):
        return size  # A-2-3-4-5 is a five-high straight
    return 0


def _groups(ranks: Sequence[int]) -> list[tuple[int, int]]:
    """(count, rank) groups, largest group first, higher rank first within a size."""
    return sorted(((n, r) for r, n in Counter(ranks).items()), reverse=True)


def poker5_code(ranks: Sequence[int], flush: bool) -> int:
    """Five-card Poker hands, § 667a.6(b) (§ 639a.6(b) ranks them the same way)."""
    groups = _groups(ranks)
    top = _straight_top(ranks, 5)
    (n1, r1), n2 = groups[0], (groups[1][0] if len(groups) > 1 else 0)
    if top and flush:
        return code(Poker5.ROYAL_FLUSH if top == ACE else Poker5.STRAIGHT_FLUSH, top)
    if n1 == 4:
        return code(Poker5.FOUR_OF_A_KIND, r1)
    if n1 == 3 and n2 == 2:
        return code(Poker5.FULL_HOUSE, r1)
    if flush:
        return code(Poker5.FLUSH, max(ranks))
    if top:
        return code(Poker5.STRAIGHT, top)
    if n1 == 3:
        return code(Poker5.THREE_OF_A_KIND, r1)
    if n1 == 2 and n2 == 2:
        return code(Poker5.TWO_PAIR, r1)
    if n1 == 2:
        return code(Poker5.PAIR, r1)
    return code(Poker5.HIGH_CARD, max(ranks))


def three_code(ranks: Sequence[int], flush: bool, ace_low: bool = False) -> int:
    """Three-card hands, § 667a.6(d) and § 643a.6(d): a straight outranks a flush. A-2-3 is a
    straight only with `ace_low` (§ 667a.6(a) lets the ace be low in 2-3-4-5 alone)."""
    groups = _groups(ranks)
    top = _straight_top(ranks, 3, ace_low)
    n1, r1 = groups[0]
    if top and flush:
        return code(Three.MINI_ROYAL if top == ACE else Three.STRAIGHT_FLUSH, top)
    if n1 == 3:
        return code(Three.THREE_OF_A_KIND, r1)
    if top:
        return code(Three.STRAIGHT, top)
    if flush:
        return code(Three.FLUSH, max(ranks))
    if n1 == 2:
        return code(Three.PAIR, r1)
    return code(Three.HIGH_CARD, max(ranks))


def four_code(ranks: Sequence[int], flush: bool) -> int:
    """Four Card Poker hands of exactly four cards (§ 641a.6(b), in the order in use: four of a
    kind over straight flush, three of a kind over flush over straight)."""
    groups = _groups(ranks)
    top = _straight_top(ranks, 4)
    (n1, r1), n2 = groups[0], (groups[1][0] if len(groups) > 1 else 0)
    if n1 == 4:
        return code(Four.FOUR_OF_A_KIND, r1)
    if top and flush:
        return code(Four.STRAIGHT_FLUSH, top)
    if n1 == 3:
        return code(Four.THREE_OF_A_KIND, r1)
    if flush:
        return code(Four.FLUSH, max(ranks))
    if top:
        return code(Four.STRAIGHT, top)
    if n1 == 2 and n2 == 2:
        return code(Four.TWO_PAIR, r1)
    if n1 == 2:
        return code(Four.PAIR, r1)
    return code(Four.HIGH_CARD, max(ranks))


def _multisets(size: int) -> list[tuple[int, ...]]:
    """Rank multisets of `size` cards from one deck (no rank more than four times)."""
    return [rs for rs in combinations_with_replacement(RANKS, size) if max(Counter(rs).values()) <= 4]


@cache
def _four_code(ranks: tuple[int, ...], flush: bool) -> int:
    return four_code(ranks, flush)


def _best_four(ranks: Sequence[int]) -> int:
    """Best rank-only Four Card Poker code of any four of these ranks (no flush)."""
    return max(_four_code(sub, False) for sub in combinations(sorted(ranks), 4))


def _best_four_flush(ranks: Sequence[int]) -> int:
    """Best Four Card Poker code of four of these distinct ranks all of one suit."""
    return max(_four_code(sub, True) for sub in combinations(sorted(ranks), 4))


class Tables:
    """Rank key -> code, built once per process (a few tens of thousands of entries)."""

    def __init__(self) -> None:
        five = _multisets(5)
        self.poker5_plain: dict[int, int] = {rank_key(rs): poker5_code(rs, False) for rs in five}
        self.poker5_flush: dict[int, int] = {
            rank_key(rs): poker5_code(rs, True) for rs in combinations(RANKS, 5)
        }
        three = _multisets(3)
        # Indexed by ace_low (False, True): whether A-2-3 is a straight.
        self.three_plain: tuple[dict[int, int], ...] = tuple(
            {rank_key(rs): three_code(rs, False, low) for rs in three} for low in (False, True)
        )
        self.three_flush: tuple[dict[int, int], ...] = tuple(
            {rank_key(rs): three_code(rs, True, low) for rs in combinations(RANKS, 3)} for low in (False, True)
        )
        # Best four of five (§ 641a.11(c)(2)) without flushes, and the best four suited ranks.
        self.four_of_five_plain: dict[int, int] = {rank_key(rs): _best_four(rs) for rs in five}
        self.four_flush: dict[int, int] = {
            rank_key(rs): _best_four_flush(rs) for n in (4, 5, 6) for rs in combinations(RANKS, n)
        }
        self._four_of_six: dict[int, int] | None = None

    @property
    def four_of_six_plain(self) -> dict[int, int]:
        """Best four of six without flushes (the Four Card Poker dealer's hand, § 641a.11(c))."""
        if self._four_of_six is None:
            self._four_of_six = {rank_key(rs): _best_four(rs) for rs in _multisets(6)}
        return self._four_of_six


_TABLES: Tables | None = None


def tables() -> Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = Tables()
    return _TABLES


def suits_by_card(cards: Sequence[int]) -> dict[int, list[int]]:
    """Ranks held in each suit."""
    out: dict[int, list[int]] = {}
    for c in cards:
        out.setdefault(c & 3, []).append((c >> 2) + 2)
    return out


__all__ = ["ACE", "KEY", "Tables", "category_of", "code", "first_rank_of", "four_code", "poker5_code", "rank_key",
           "suits_by_card", "tables", "three_code"]

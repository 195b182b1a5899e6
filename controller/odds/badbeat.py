"""Four Card Poker's Bad Beat Bonus Wager, counted exactly over every deal.

§ 641a.11(c)(6): the wager wins when the player's hand is two pair or better and the dealer's hand
outranks it, or the dealer's hand is two pair or better and the player's hand outranks it; it is
paid on the rank of the losing hand (§ 641a.7(d)(6)). The player's hand is the best four of five
cards (§ 641a.11(c)(2)), the dealer's the best four of six (§ 641a.11(c)); equal hands outrank
neither, so a tie does not win.

A deal is the player's five cards and the dealer's six from the other 47: C(52, 5) * C(47, 6), about
2.8e13 deals. The count uses three ideas.

1. Inclusion-exclusion over shared cards. For hands S (player) and h (dealer) drawn independently,
   sum over T ⊆ S ∩ h of (-1)^|T| is 1 when they are disjoint and 0 otherwise. So the dealer's
   hands that avoid S, by value, are the sum over T ⊆ S of (-1)^|T| G(T), where G(T) counts the
   six-card hands that contain T, by value. Only 32 sets T per player hand.
2. Ranks and flushes apart. A dealer hand's value is its best four by ranks alone, unless four of
   its cards share a suit and that four-card flush (or straight flush) is better. So G(T) is a
   rank-only count, which depends only on the ranks of T and is counted by rank multisets with
   binomial weights, plus a flush correction over the hands with four or more cards of one suit,
   which depends on T up to renaming suits and is counted by choosing the suited ranks and the
   ranks of the other cards (suits of the others never matter: six cards hold at most one suit
   four times).
3. Symmetry and pruning. Player hands are taken one per suit pattern (with weights), and only
   those of two pair or better can be part of a winning deal: the losing hand is two pair or
   better, and the winner outranks it. Only dealer values of two pair or better are kept.

Results are exact integers. `bad_beat_counts()` takes some seconds and is cached.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations, combinations_with_replacement
from math import comb
from types import MappingProxyType

from controller.hands.categories import Four
from controller.hands.four import value_of_ranks as four_value
from controller.odds.suits import suit_patterns

ALL_RANKS = tuple(range(2, 15))
TWO_PAIR = Four.TWO_PAIR
LOW = 0  # every value below two pair: never the losing hand of a winning Bad Beat
_SHIFT = 16  # value = category << 16 | four ranks, four bits each
_CATEGORIES = tuple(c for c in Four if c >= TWO_PAIR)
_TOP = int(max(Four))


def _bit(rank: int) -> int:
    return 1 << (3 * (rank - 2))


_four_value = cache(four_value)  # at most 1,820 rank multisets of four, twice


def best_value(ranks: Sequence[int], flush: bool) -> int:
    """Best four of the ranks (all of one suit if `flush`)."""
    return max(_four_value(sub, flush) for sub in combinations(sorted(ranks), 4))


def category(value: int) -> Four:
    return Four(value >> _SHIFT)


class _Tables:
    """Best-four values by rank key (only two pair or better kept; LOW otherwise)."""

    def __init__(self) -> None:
        def keep(v: int) -> int:
            return v if v >> _SHIFT >= TWO_PAIR else LOW

        def multisets(n: int) -> Iterable[tuple[int, ...]]:
            return (rs for rs in combinations_with_replacement(ALL_RANKS, n) if max(Counter(rs).values()) <= 4)

        self.five: dict[int, int] = {sum(map(_bit, rs)): keep(best_value(rs, False)) for rs in multisets(5)}
        self.six: dict[int, int] = {sum(map(_bit, rs)): keep(best_value(rs, False)) for rs in multisets(6)}
        self.suited: dict[int, int] = {
            sum(map(_bit, rs)): best_value(rs, True) for n in (4, 5, 6) for rs in combinations(ALL_RANKS, n)
        }


@cache
def _tables() -> _Tables:
    return _Tables()


def player_value(cards: Sequence[int]) -> int:
    """Best four of the player's five cards; LOW below two pair."""
    t = _tables()
    value = t.five[sum(_bit((c >> 2) + 2) for c in cards)]
    by_suit: dict[int, list[int]] = defaultdict(list)
    for c in cards:
        by_suit[c & 3].append((c >> 2) + 2)
    for ranks in by_suit.values():
        if len(ranks) >= 4:
            value = max(value, t.suited[sum(map(_bit, ranks))])
    return value


class _Dist:
    """Counts by value (two pair or better), ready for "how many above v" and "how many below v
    in each category" in two bisections."""

    __slots__ = ("cum", "mass", "starts", "total", "values")

    def __init__(self, counts: dict[int, int]) -> None:
        items = sorted((v, n) for v, n in counts.items() if n and v != LOW)
        self.values = [v for v, _ in items]
        self.cum = [0]
        for _, n in items:
            self.cum.append(self.cum[-1] + n)
        self.total = self.cum[-1]
        # Indexed by category (ints; two pair and up are filled in).
        bounds = [bisect_left(self.values, c << _SHIFT) for c in range(_TOP + 2)]
        self.starts = [self.cum[b] for b in bounds]
        self.mass = [self.cum[bounds[c + 1]] - self.cum[bounds[c]] for c in range(_TOP + 1)]

    def add_to(self, totals: list[int], value: int, weight: int) -> None:
        """Deals with this dealer distribution against a player hand of `value`, times `weight`,
        into `totals` by category: the player's losing hands under its own category, the
        dealer's under theirs (a tie wins nothing)."""
        values, cum = self.values, self.cum
        if not values:  # (a flush correction can total zero and still move hands between values)
            return
        mine = value >> _SHIFT
        totals[mine] += weight * (self.total - cum[bisect_right(values, value)] + cum[bisect_left(values, value)] - self.starts[mine])
        mass = self.mass
        for c in range(TWO_PAIR, mine):
            totals[c] += weight * mass[c]


class BadBeat:
    """The counting machinery for a deck of the given ranks (all 13; tests use smaller decks)."""

    def __init__(self, ranks: Sequence[int] = ALL_RANKS) -> None:
        self.ranks = tuple(sorted(ranks))
        self.t = _tables()
        self._rank_parts: dict[int, _Dist] = {}
        self._flush_parts: dict[tuple[tuple[int, ...], ...], _Dist] = {}
        self._rank_sums: dict[tuple[int, int], list[int]] = {}
        self._by_cards: dict[tuple[int, ...], _Dist | None] = {}
        self._fills: dict[tuple[int, ...], dict[int, list[tuple[int, int]]]] = {}
        self._build_rank_parts()

    # -- G(T) by ranks alone: depends only on the ranks of T ----------------------------------

    def _build_rank_parts(self) -> None:
        """For every rank multiset τ of up to five cards: the six-card hands containing a given
        set of cards with those ranks, by rank-only value. A hand of rank multiset r contains
        such a set in prod C(4 - τ_i, r_i - τ_i) ways."""
        parts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for rs in combinations_with_replacement(self.ranks, 6):
            count = Counter(rs)
            if max(count.values()) > 4:
                continue
            value = self.t.six[sum(map(_bit, rs))]
            if value == LOW:
                continue
            subs = [(0, 1)]  # (rank key of τ, ways) over the ranks seen so far
            for r, n in count.items():
                subs = [(k + t * _bit(r), w * comb(4 - t, n - t)) for k, w in subs for t in range(n + 1)]
            whole = sum(map(_bit, rs))
            for key, ways in subs:
                if key != whole:  # τ has at most five cards
                    parts[key][value] += ways
        self._rank_parts = {k: _Dist(v) for k, v in parts.items()}
        self._empty = _Dist({})

    # -- G(T)'s flush correction: depends on T up to renaming suits ------------------------------

    def _flush_part(self, key: tuple[tuple[int, ...], ...]) -> _Dist:
        """Six-card hands that contain T (given as its ranks in each suit) and hold four or more
        cards of one suit: each adds one at its true value and takes one from its rank-only
        value where the flush is the better hand."""
        found = self._flush_parts.get(key)
        if found is not None:
            return found
        out: dict[int, int] = defaultdict(int)
        six, suited = self.t.six, self.t.suited
        for flush_ranks, times in Counter(key).items():
            f = key.index(flush_ranks)  # suits with the same ranks of T give the same count
            others = tuple(sorted(r for slot, rs in enumerate(key) if slot != f for r in rs))
            if len(others) > 2:
                continue
            free = [_bit(r) for r in self.ranks if r not in flush_ranks]
            fill = self._fill(others)
            flush_base = sum(map(_bit, flush_ranks))
            base_others = sum(map(_bit, others))
            for size in range(max(4, len(flush_ranks)), 7 - len(others)):
                rest = fill[6 - size - len(others)]
                for extra in combinations(free, size - len(flush_ranks)):
                    suited_key = flush_base + sum(extra)
                    flush_value = suited[suited_key]
                    base = suited_key + base_others
                    for add, ways in rest:
                        plain = six[base + add]
                        if flush_value > plain:
                            out[flush_value] += ways * times
                            if plain != LOW:
                                out[plain] -= ways * times
        dist = _Dist(out)
        self._flush_parts[key] = dist
        return dist

    def _fill(self, others: tuple[int, ...]) -> dict[int, list[tuple[int, int]]]:
        """Ways to add k = 0, 1, 2 cards outside the flush suit, by their rank key, when T already
        holds `others` there (each rank has three cards outside the flush suit)."""
        found = self._fills.get(others)
        if found is None:
            avail = {r: 3 - others.count(r) for r in self.ranks}
            two = ((_bit(a) + _bit(b), avail[a] * avail[b] if a != b else comb(avail[a], 2))
                   for a, b in combinations_with_replacement(self.ranks, 2))
            found = {
                0: [(0, 1)],
                1: [(_bit(r), avail[r]) for r in self.ranks if avail[r]],
                2: [(k, n) for k, n in two if n],
            }
            self._fills[others] = found
        return found

    # -- the dealer's hands that avoid a player hand ---------------------------------------------

    def _rank_sum(self, rank_key: int, cards: Sequence[int], value: int) -> list[int]:
        """The rank-only part over all T ⊆ S, which depends only on the ranks of S and its value."""
        memo = self._rank_sums.get((rank_key, value))
        if memo is not None:
            return memo
        totals = [0] * (_TOP + 1)
        for size in range(6):
            for sub in combinations(cards, size):
                dist = self._rank_parts.get(sum(_bit((c >> 2) + 2) for c in sub), self._empty)
                dist.add_to(totals, value, -1 if size & 1 else 1)
        self._rank_sums[(rank_key, value)] = totals
        return totals

    @staticmethod
    def suit_key(cards: Iterable[int]) -> tuple[tuple[int, ...], ...]:
        """T up to renaming suits: its ranks in each suit, the four suits sorted."""
        by_suit: tuple[list[int], ...] = ([], [], [], [])
        for c in cards:
            by_suit[c & 3].append((c >> 2) + 2)
        return tuple(sorted(tuple(sorted(rs)) for rs in by_suit))

    def _flush_part_of(self, sub: tuple[int, ...]) -> _Dist | None:
        """The flush correction of a set of cards, or None when no six-card hand with four cards
        of one suit contains them. Cached by the cards themselves: the same small sets recur in
        many player hands."""
        try:
            return self._by_cards[sub]
        except KeyError:
            pass
        key = self.suit_key(sub)
        dist = None if len(sub) - max(len(rs) for rs in key) > 2 else self._flush_part(key)
        if dist is not None and not dist.values:
            dist = None
        self._by_cards[sub] = dist
        return dist

    def add_player(self, totals: list[int], cards: Sequence[int], value: int, weight: int) -> None:
        """Add every deal of this player hand (value two pair or better) to `totals` by the
        category of the losing hand."""
        rank_key = sum(_bit((c >> 2) + 2) for c in cards)
        for c, n in enumerate(self._rank_sum(rank_key, cards, value)):
            totals[c] += weight * n
        flush_part = self._flush_part_of
        for size in range(6):
            sign = -weight if size & 1 else weight
            for sub in combinations(cards, size):
                dist = flush_part(sub)
                if dist is not None:
                    dist.add_to(totals, value, sign)

    def dealer_counts(self, player: Sequence[int]) -> dict[int, int]:
        """The dealer's six-card hands from the 47 (or fewer) other cards, by value (two pair or
        better), for one player hand: the sum over T ⊆ S of (-1)^|T| G(T)."""
        out: dict[int, int] = defaultdict(int)
        for size in range(6):
            sign = -1 if size & 1 else 1
            for sub in combinations(player, size):
                for dist in (
                    self._rank_parts.get(sum(_bit((c >> 2) + 2) for c in sub), self._empty),
                    self._flush_part_of(sub) or self._empty,
                ):
                    previous = 0
                    for v, c in zip(dist.values, dist.cum[1:], strict=True):
                        out[v] += sign * (c - previous)
                        previous = c
        return {v: n for v, n in out.items() if n}

    def losing_hand_counts(self) -> dict[Four, int]:
        """Winning Bad Beat deals by the category of the losing hand."""
        totals = [0] * (_TOP + 1)
        allowed = set(self.ranks)
        for cards, weight in suit_patterns(5):
            if any((c >> 2) + 2 not in allowed for c in cards):
                continue
            value = player_value(cards)
            if value != LOW:
                self.add_player(totals, cards, value, weight)
        return {c: totals[c] for c in _CATEGORIES}

    def deals(self) -> int:
        n = 4 * len(self.ranks)
        return comb(n, 5) * comb(n - 5, 6)


@dataclass(frozen=True)
class BadBeatCounts:
    """Winning deals by the category of the losing hand, out of `total` (§ 641a.11(c)(6))."""

    total: int
    by_losing_hand: Mapping[Four, int]  # highest category first
    method: str


@cache
def bad_beat_counts() -> BadBeatCounts:
    """The Bad Beat Bonus counts for the whole deck (some seconds; cached for the process)."""
    machine = BadBeat()
    counts = machine.losing_hand_counts()
    return BadBeatCounts(
        total=machine.deals(),
        by_losing_hand=MappingProxyType(dict(sorted(counts.items(), reverse=True))),
        method="every deal of the player's five and the dealer's six cards, by inclusion-exclusion over shared cards",
    )


__all__ = ["ALL_RANKS", "LOW", "TWO_PAIR", "BadBeat", "BadBeatCounts", "bad_beat_counts", "best_value", "category",
           "player_value"]

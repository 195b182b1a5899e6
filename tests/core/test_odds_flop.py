"""Flop Poker (§ 667a.11(d)(2)): the triangle counting against brute force on fixed player hands,
and the full enumeration of 407,170,400 deals (once per test run)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import parse_cards
from controller.games import CardRule, HandKind
from controller.hands import poker5
from controller.hands.categories import Poker5
from controller.hands.select import form_hand
from controller.odds import hand_counts
from controller.odds.codes import category_of, code, first_rank_of
from controller.odds.flop import player_flop_codes
from controller.odds.suits import canonical, remaining, suit_classes


def reference_code(five: tuple[int, ...]) -> int:
    """A deliberately plain evaluator, straight from § 667a.6(a)-(b): category and first rank."""
    ranks = sorted(((c >> 2) + 2 for c in five), reverse=True)
    flush = len({c & 3 for c in five}) == 1
    counts = Counter(ranks)
    shape = sorted(counts.values(), reverse=True)
    by_count = sorted(counts, key=lambda r: (counts[r], r), reverse=True)
    straight = 0
    if len(counts) == 5:
        if ranks[0] - ranks[4] == 4:
            straight = ranks[0]
        elif ranks == [14, 5, 4, 3, 2]:
            straight = 5
    if straight and flush:
        return code(Poker5.ROYAL_FLUSH if straight == 14 else Poker5.STRAIGHT_FLUSH, straight)
    if shape == [4, 1]:
        return code(Poker5.FOUR_OF_A_KIND, by_count[0])
    if shape == [3, 2]:
        return code(Poker5.FULL_HOUSE, by_count[0])
    if flush:
        return code(Poker5.FLUSH, ranks[0])
    if straight:
        return code(Poker5.STRAIGHT, straight)
    if shape == [3, 1, 1]:
        return code(Poker5.THREE_OF_A_KIND, by_count[0])
    if shape == [2, 2, 1]:
        return code(Poker5.TWO_PAIR, by_count[0])
    if shape == [2, 1, 1, 1]:
        return code(Poker5.PAIR, by_count[0])
    return code(Poker5.HIGH_CARD, ranks[0])


def brute_force(player: tuple[int, ...]) -> Counter[int]:
    """Every one of the 18,424 flops: the best of the three ways to use two of them."""
    out: Counter[int] = Counter()
    for flop in combinations(remaining(player), 3):
        out[max(reference_code(player + two) for two in combinations(flop, 2))] += 1
    return out


# Player hands of different suit structure: suited royal cards, trips, suited connectors
# (straight-flush draws both ways), a wheel draw, a pair, rainbow.
@pytest.mark.parametrize("text", ["AS KS QS", "2H 2D 2C", "7S 8S 9S", "AH 3H 4D", "JS JH 4D", "KC 9D 2S"])
def test_triangle_counting_matches_brute_force(text: str) -> None:
    player = tuple(sorted(parse_cards(text)))
    fast = player_flop_codes(player)  # type: ignore[arg-type]
    assert fast == dict(brute_force(player))
    assert sum(fast.values()) == comb(49, 3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 51), min_size=6, max_size=6, unique=True))
def test_a_random_deal_is_counted_under_the_hand_select_forms(deal: list[int]) -> None:
    """The plain evaluator agrees with the hand settlement forms, and the counts for these
    player cards include that hand."""
    player, flop = tuple(sorted(deal[:3])), deal[3:]
    hand = form_hand(CardRule.PLAYER_AND_TWO_OF_COMMUNITY, HandKind.POKER5, player, flop)
    expected = code(hand.category, poker5.first_rank(hand.value))
    assert max(reference_code(player + two) for two in combinations(flop, 2)) == expected
    assert player_flop_codes(player).get(expected, 0) >= 1  # type: ignore[arg-type]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 51), min_size=3, max_size=3, unique=True), st.permutations(range(4)))
def test_counts_do_not_depend_on_suit_names(player: list[int], perm: list[int]) -> None:
    hand = tuple(sorted(player))
    renamed = tuple(sorted((c & ~3) | perm[c & 3] for c in hand))
    assert player_flop_codes(hand) == player_flop_codes(renamed)  # type: ignore[arg-type]
    assert canonical(hand) == canonical(renamed)


def test_class_weights_cover_every_player_hand() -> None:
    assert sum(w for _, w in suit_classes(3)) == comb(52, 3)


@pytest.mark.slow
def test_full_flop_poker_enumeration() -> None:
    counts = hand_counts(HandKind.POKER5, CardRule.PLAYER_AND_TWO_OF_COMMUNITY)
    assert counts.total == comb(52, 3) * comb(49, 3) == 407_170_400
    assert sum(counts.by_hand.values()) == counts.total
    by_category = counts.by_category
    # Closed form: three suited cards of a royal flush (4 suits * C(5, 3)) and a flop holding the
    # other two, with any third card (47).
    assert by_category[Poker5.ROYAL_FLUSH] == 4 * comb(5, 3) * 47 == 1_880
    # Closed form: four of a kind uses all three player cards and two flop cards, so the player
    # holds a pair of the rank (and a card of another rank, 48 ways) and the flop the other two
    # (and any of the 47 cards left), or the player holds three of the rank and the flop the
    # fourth (and any two of the 48 others).
    pair_pair = 13 * comb(4, 2) * 48 * 47
    trips_one = 13 * 4 * comb(48, 2)
    assert by_category[Poker5.FOUR_OF_A_KIND] == pair_pair + trips_one
    # Pinned from this enumeration (the triangle method is checked against brute force above).
    assert by_category == {
        Poker5.ROYAL_FLUSH: 1_880,
        Poker5.STRAIGHT_FLUSH: 16_776,
        Poker5.FOUR_OF_A_KIND: 234_624,
        Poker5.FULL_HOUSE: 1_676_064,
        Poker5.FLUSH: 2_126_344,
        Poker5.STRAIGHT: 4_321_584,
        Poker5.THREE_OF_A_KIND: 15_448_576,
        Poker5.TWO_PAIR: 40_936_896,
        Poker5.PAIR: 206_304_520,
        Poker5.HIGH_CARD: 136_103_136,
    }
    # The Flop Wager pays "a pair of jacks, queens, kings or aces" (§ 667a.12(b)).
    jacks_or_better = counts.count(Poker5.PAIR, min_rank=11)
    assert 0 < jacks_or_better < by_category[Poker5.PAIR]
    assert all(category_of(code(c, r)) == c and first_rank_of(code(c, r)) == r for (c, r) in counts.by_hand)

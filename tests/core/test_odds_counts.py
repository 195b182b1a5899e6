"""Exact hand counts: the known category counts, and every hand up to suits cross-checked
against the evaluators used in play (controller.hands)."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import RulesError
from controller.games import CardRule, HandKind
from controller.hands import four, poker5, three
from controller.hands.categories import Four, Poker5, Three
from controller.odds import hand_counts
from controller.odds.codes import KEY, code, tables
from controller.odds.counts import FIVE_RANDOM_CARDS, _best_four, _poker5, _three
from controller.odds.suits import canonical, suit_classes, suit_patterns

FIVE_CARD = {
    Poker5.ROYAL_FLUSH: 4,
    Poker5.STRAIGHT_FLUSH: 36,
    Poker5.FOUR_OF_A_KIND: 624,
    Poker5.FULL_HOUSE: 3_744,
    Poker5.FLUSH: 5_108,
    Poker5.STRAIGHT: 10_200,
    Poker5.THREE_OF_A_KIND: 54_912,
    Poker5.TWO_PAIR: 123_552,
    Poker5.PAIR: 1_098_240,
    Poker5.HIGH_CARD: 1_302_540,
}

# Where A-2-3 is a straight (Wager.three_card_ace_low): the well-known table, 12 sequences.
THREE_CARD_ACE_LOW = {
    Three.MINI_ROYAL: 4,
    Three.STRAIGHT_FLUSH: 44,
    Three.THREE_OF_A_KIND: 52,
    Three.STRAIGHT: 720,
    Three.FLUSH: 1_096,
    Three.PAIR: 3_744,
    Three.HIGH_CARD: 16_440,
}
# § 667a.6(a) read to the letter: the ace is low only in 2-3-4-5, so A-2-3 is ace high (suited, a
# flush): 11 sequences, 4 * 11 - 4 straight flushes, 60 * 11 straights.
THREE_CARD = {
    Three.MINI_ROYAL: 4,
    Three.STRAIGHT_FLUSH: 40,
    Three.THREE_OF_A_KIND: 52,
    Three.STRAIGHT: 660,
    Three.FLUSH: 1_100,
    Three.PAIR: 3_744,
    Three.HIGH_CARD: 16_500,
}

# Best four of five (§ 641a.11(c)(2)). Closed forms: 13 * 48 four of a kind; straight flush:
# 11 four-card sequences * 4 suits * 48 fifth cards, less the 40 five-card straight flushes
# counted twice (they hold two four-card ones).
FOUR_OF_FIVE = {
    Four.FOUR_OF_A_KIND: 13 * 48,
    Four.STRAIGHT_FLUSH: 11 * 4 * 48 - 40,
    Four.THREE_OF_A_KIND: 58_656,
    Four.FLUSH: 114_616,
    Four.STRAIGHT: 101_808,
    Four.TWO_PAIR: 123_552,
    Four.PAIR: 1_047_552,
    Four.HIGH_CARD: 1_150_080,
}

cards = st.integers(0, 51)


def hands(n: int) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(cards, min_size=n, max_size=n, unique=True).map(tuple)


@pytest.mark.parametrize("n", range(0, 6))
def test_suit_pattern_weights_sum_to_every_hand(n: int) -> None:
    assert sum(w for _, w in suit_patterns(n)) == comb(52, n)


def test_three_card_suit_classes_are_the_1755_classes() -> None:
    classes = suit_classes(3)
    assert len(classes) == 1_755
    assert sum(w for _, w in classes) == 22_100
    assert all(canonical(c) == c for c, _ in classes)


@given(hands(4), st.permutations(range(4)))
def test_canonical_form_ignores_suit_names(hand: tuple[int, ...], perm: list[int]) -> None:
    renamed = tuple((c & ~3) | perm[c & 3] for c in hand)
    assert canonical(hand) == canonical(renamed)


def test_five_card_category_counts() -> None:
    counts = hand_counts(HandKind.POKER5, CardRule.PLAYER)
    assert counts.by_category == FIVE_CARD
    assert counts.total == sum(FIVE_CARD.values()) == 2_598_960


def test_every_five_random_card_rule_has_the_same_counts() -> None:
    first = hand_counts(HandKind.POKER5, CardRule.PLAYER)
    for rule in FIVE_RANDOM_CARDS:
        assert hand_counts(HandKind.POKER5, rule).by_hand == first.by_hand


def test_first_rank_splits_pairs_evenly() -> None:
    counts = hand_counts(HandKind.POKER5, CardRule.PLAYER)
    per_rank = 1_098_240 // 13
    assert [counts.by_hand[(Poker5.PAIR, r)] for r in range(2, 15)] == [per_rank] * 13
    assert counts.count(Poker5.PAIR, min_rank=11) == 4 * per_rank  # jacks, queens, kings, aces
    # A straight is named by its top card: 5 (A-2-3-4-5) to ace, 10 * 4**5 - 40 hands each.
    assert [r for (c, r) in counts.by_hand if c == Poker5.STRAIGHT] == list(range(14, 4, -1))
    assert {n for (c, _), n in counts.by_hand.items() if c == Poker5.STRAIGHT} == {1_020}


@pytest.mark.parametrize(("ace_low", "expected"), [(True, THREE_CARD_ACE_LOW), (False, THREE_CARD)])
def test_three_card_category_counts(ace_low: bool, expected: dict[Three, int]) -> None:
    counts = hand_counts(HandKind.THREE, CardRule.PLAYER_FIRST_THREE, three_card_ace_low=ace_low)
    assert counts.by_category == expected
    assert counts.total == sum(expected.values()) == 22_100


def test_ace_low_matters_to_three_card_hands_only() -> None:
    for low in (False, True):
        assert hand_counts(HandKind.POKER5, CardRule.PLAYER, three_card_ace_low=low).by_category == FIVE_CARD
    assert hand_counts(HandKind.THREE, CardRule.PLAYER_FIRST_THREE).by_category == THREE_CARD


def test_four_card_best_of_five_counts() -> None:
    counts = hand_counts(HandKind.FOUR, CardRule.PLAYER_BEST_FOUR)
    assert counts.by_category == FOUR_OF_FIVE
    assert counts.total == sum(FOUR_OF_FIVE.values()) == 2_598_960


def test_unknown_rule_is_a_rules_error() -> None:
    with pytest.raises(RulesError) as e:
        hand_counts(HandKind.THREE, CardRule.PLAYER)
    assert e.value.field == "rule"


# Every pattern the counts add up, evaluated again by controller.hands. Since the patterns' weights
# are exact (tested above), agreement on every pattern is agreement on every one of the C(52, n)
# hands.


def _poker5_code(hand: tuple[int, ...]) -> int:
    v = poker5.evaluate(hand)
    return code(poker5.category(v), poker5.first_rank(v))


def test_five_card_codes_agree_with_the_play_evaluator_on_every_pattern() -> None:
    bad = [c for c, _ in suit_patterns(5) if _poker5(c) != _poker5_code(c)]
    assert bad == []


@pytest.mark.parametrize("ace_low", [False, True])
def test_three_card_codes_agree_with_the_play_evaluator_on_every_hand(ace_low: bool) -> None:
    def play(hand: tuple[int, ...]) -> int:
        v = three.evaluate(hand, ace_low)
        return code(three.category(v), three.first_rank(v))

    bad = [h for h in combinations(range(52), 3) if _three(h, ace_low) != play(h)]
    assert bad == []


def test_best_four_codes_agree_with_the_play_evaluator_on_every_pattern() -> None:
    plain = tables().four_of_five_plain

    def play(hand: tuple[int, ...]) -> int:
        v, _ = four.best(hand)
        return code(four.category(v), four.first_rank(v))

    bad = [c for c, _ in suit_patterns(5) if _best_four(c, plain) != play(c)]
    assert bad == []


@settings(deadline=None)  # the first example builds the lookup tables
@given(hands(5))
def test_best_four_of_a_random_hand_agrees_with_the_play_evaluator(hand: tuple[int, ...]) -> None:
    v, chosen = four.best(hand)
    assert _best_four(hand, tables().four_of_five_plain) == code(four.category(v), four.first_rank(v))
    assert set(chosen) <= set(hand)


@settings(deadline=None)  # the first example builds the lookup tables
@given(hands(6))
def test_best_four_of_six_agrees_with_the_play_evaluator(hand: tuple[int, ...]) -> None:
    v, _ = four.best(hand)
    assert _best_four(hand, tables().four_of_six_plain) == code(four.category(v), four.first_rank(v))


def test_rank_keys_are_per_rank_counts() -> None:
    # Three bits per rank: four cards of one rank never carry into the next.
    assert KEY[0] + KEY[1] + KEY[2] + KEY[3] == 4
    assert KEY[51] == 1 << 36

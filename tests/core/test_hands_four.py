"""Four Card Poker hands, § 641a.6(b) (not reprinted in our copy; the order in use), and the
best four of a player's five (§ 641a.11(c)(2)) or the dealer's six (§ 641a.11(c)).

The reference reads the rules apart from the module under test: categories by explicit
predicates and a list of the legal sequences (A-2-3-4 lowest, A-K-Q-J highest), then the ranks
that define a category, then § 667a.6(c) literally; the best four by trying every four.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from itertools import combinations, combinations_with_replacement
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import DECK, make, parse_cards, rank, suit
from controller.errors import CardError
from controller.hands import four
from controller.hands.categories import Four

# § 641a.6(b), highest first.
ORDER = [
    "four-of-a-kind", "straight-flush", "three-of-a-kind", "flush",
    "straight", "two-pair", "pair", "high-card",
]
SEQUENCES = [frozenset({14, 2, 3, 4})] + [frozenset(range(low, low + 4)) for low in range(2, 12)]


def ref_classify(cards) -> tuple[str, list[int]]:
    rs = [rank(c) for c in cards]
    suited = len({suit(c) for c in cards}) == 1
    seq = SEQUENCES.index(frozenset(rs)) if frozenset(rs) in SEQUENCES else None
    counts = Counter(rs)
    pairs = sorted((r for r, k in counts.items() if k == 2), reverse=True)
    if len(counts) == 1:
        return "four-of-a-kind", rs[:1]
    if suited and seq is not None:
        return "straight-flush", [seq]
    if 3 in counts.values():
        return "three-of-a-kind", [r for r, k in counts.items() if k == 3]
    if suited:
        return "flush", []
    if seq is not None:
        return "straight", [seq]
    if len(pairs) == 2:
        return "two-pair", pairs
    if pairs:
        return "pair", pairs
    return "high-card", []


def ref_compare(h1, h2) -> int:
    c1, d1 = ref_classify(h1)
    c2, d2 = ref_classify(h2)
    if c1 != c2:
        return 1 if ORDER.index(c1) < ORDER.index(c2) else -1
    if d1 != d2:
        return 1 if d1 > d2 else -1
    r1, r2 = Counter(map(rank, h1)), Counter(map(rank, h2))
    m1, m2 = max(r1 - r2, default=0), max(r2 - r1, default=0)
    return (m1 > m2) - (m1 < m2)


def ref_best(cards):
    return max(combinations(cards, 4), key=functools.cmp_to_key(ref_compare))


def sign(n: int) -> int:
    return (n > 0) - (n < 0)


def ev(text: str) -> int:
    return four.evaluate(parse_cards(text))


@st.composite
def dense_hands(draw, n: int = 4):
    low = draw(st.integers(1, 11))
    ranks = {14 if r == 1 else r for r in range(low, min(low + draw(st.integers(2, 6)), 15))}
    suits = draw(st.sets(st.integers(0, 3), min_size=1, max_size=4))
    pool = sorted(make(r, s) for r in ranks for s in suits)
    if len(pool) < n:
        pool = list(DECK)
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True))


def hands(n: int = 4):
    return st.lists(st.sampled_from(DECK), min_size=n, max_size=n, unique=True)


any_hand = st.one_of(hands(), dense_hands())


@pytest.mark.parametrize(
    "text, expected",
    [
        ("AS AH AD AC", Four.FOUR_OF_A_KIND),
        ("2S 2H 2D 2C", Four.FOUR_OF_A_KIND),
        ("AS KS QS JS", Four.STRAIGHT_FLUSH),  # the highest; no royal category
        ("AH 2H 3H 4H", Four.STRAIGHT_FLUSH),  # the lowest
        ("AS AH AD KC", Four.THREE_OF_A_KIND),
        ("AS KS QS 9S", Four.FLUSH),
        ("KD AD 2D 3D", Four.FLUSH),  # K-A-2-3 suited is a flush only
        ("AS KH QD JC", Four.STRAIGHT),
        ("AS 2H 3D 4C", Four.STRAIGHT),
        ("AS AH KD KC", Four.TWO_PAIR),
        ("AS AH KD QC", Four.PAIR),
        ("AS KH QD TC", Four.HIGH_CARD),
        ("KS AH 2D 3C", Four.HIGH_CARD),  # K-A-2-3 is not a straight
        ("QS KH AD 2C", Four.HIGH_CARD),
    ],
)
def test_641a_6_b_every_category(text, expected):
    assert four.category(ev(text)) is expected
    assert ref_classify(parse_cards(text))[0] == expected.label


def test_641a_6_b_categories_rank_in_order():
    """Four of a kind outranks a straight flush; three of a kind a flush; a flush a straight."""
    lower_higher = [
        ("AS KH QD TC", "2S 2H 3D 4C"),  # best high card < worst pair
        ("AS AH KD QC", "3S 3H 2D 2C"),  # best pair < worst two pair
        ("AS AH KD KC", "AS 2H 3D 4C"),  # best two pair < worst straight
        ("AS KH QD JC", "2S 3S 4S 6S"),  # best straight < worst flush
        ("AS KS QS TS", "2S 2H 2D 3C"),  # best flush < worst three-of-a-kind
        ("AS AH AD KC", "AH 2H 3H 4H"),  # best three-of-a-kind < worst straight flush
        ("AS KS QS JS", "2S 2H 2D 2C"),  # best straight flush < worst four-of-a-kind
    ]
    for lower, higher in lower_higher:
        assert ev(lower) < ev(higher), (lower, higher)


def test_a_2_3_4_lowest_and_a_k_q_j_highest_straight():
    straights = [four.evaluate([make(r, i) for i, r in enumerate(range(low, low + 4))]) for low in range(2, 12)]
    wheel = ev("AS 2H 3D 4C")
    assert sorted(straights) == straights and len(set(straights)) == 10
    assert wheel < straights[0] and straights[-1] == ev("AS KH QD JC")
    assert four.first_rank(wheel) == 4 and four.ranks(wheel) == (4, 3, 2, 14)
    assert ev("AD 2D 3D 4D") < ev("2C 3C 4C 5C") < ev("AS KS QS JS")


@pytest.mark.parametrize(
    "higher, lower",
    [
        ("3S 3H 3D 3C", "2S 2H 2D 2C"),
        ("3S 4S 5S 6S", "AH 2H 3H 4H"),
        ("8S 8H 8D 2C", "7S 7H 7D AC"),  # three of a kind: the three first
        ("8S 8H 8D 3C", "8S 8H 8D 2C"),  # then the kicker
        ("AS 5S 4S 2S", "KH QH JH 9H"),  # flush: card by card
        ("AS KS 4S 3S", "AH KH 4H 2H"),
        ("AS AH 2D 2C", "KS KH QD QC"),  # two pair: the high pair
        ("AS AH 3D 3C", "AS AH 2D 2C"),  # then the low pair
        ("9S 9H 5D 4C", "9D 9C 5S 3H"),  # pair, then kickers
        ("AS 6H 4D 2C", "KS QH JD 9C"),  # high card
    ],
)
def test_tie_breaks(higher, lower):
    assert ev(higher) > ev(lower)
    assert ref_compare(parse_cards(higher), parse_cards(lower)) == 1


@given(any_hand, any_hand)
def test_order_is_the_order_of_641a_6_b(h1, h2):
    assert sign(four.evaluate(h1) - four.evaluate(h2)) == ref_compare(h1, h2)


@given(any_hand, st.permutations(range(4)), st.permutations(range(4)))
def test_evaluate_ignores_card_order_and_suit_names(hand, order, perm):
    moved = [hand[i] for i in order]
    renamed = [make(rank(c), perm[suit(c)]) for c in hand]
    assert four.evaluate(moved) == four.evaluate(renamed) == four.evaluate(hand)


@given(st.one_of(hands(4), hands(5), hands(6), hands(7), dense_hands(5), dense_hands(6), dense_hands(7)))
def test_best_is_at_least_every_four_641a_11_c(cards):
    value, chosen = four.best(cards)
    assert value == max(four.evaluate(h) for h in combinations(cards, 4))
    assert len(chosen) == 4 and set(chosen) <= set(cards) and four.evaluate(chosen) == value
    assert [c for c in cards if c in chosen] == list(chosen)  # in the order given


@given(st.one_of(hands(5), dense_hands(5), dense_hands(6)))
def test_best_matches_the_reference(cards):
    assert ref_compare(four.best(cards)[1], ref_best(cards)) == 0


def test_best_examples_641a_11_c():
    value, chosen = four.best(parse_cards("2S 9H 9D 9C 9S"))
    assert four.category(value) is Four.FOUR_OF_A_KIND and chosen == parse_cards("9H 9D 9C 9S")
    value, chosen = four.best(parse_cards("5H KH 4H 3H 2S"))  # the flush beats the 2-3-4-5 straight
    assert four.category(value) is Four.FLUSH and chosen == parse_cards("5H KH 4H 3H")
    value, chosen = four.best(parse_cards("5H 4H 3H 2S 2H"))  # a straight flush from five suited cards too
    assert four.category(value) is Four.STRAIGHT_FLUSH and four.first_rank(value) == 5
    value, _ = four.best(parse_cards("AS AH AD KS KH QC"))  # the dealer's six
    assert four.ranks(value) == (14, 14, 14, 13)


@pytest.mark.parametrize("n", [3, 8])
def test_best_needs_four_to_seven_cards(n):
    with pytest.raises(CardError, match=f"has {n} cards"):
        four.best(tuple(range(n)))


@pytest.mark.parametrize(
    "cards, field", [((1, 2, 3), "cards"), ((1, 2, 3, 99), "cards[3]"), ((0, 4, 8, 0), "cards[3]")]
)
def test_evaluate_rejects_what_is_not_four_cards(cards, field):
    with pytest.raises(CardError) as err:
        four.evaluate(cards)
    assert err.value.field == field


@pytest.mark.parametrize(
    "cards, field",
    [((0, 1, 2, 3, "AS"), "cards[4]"), ((0, 1, 2, 3, 4, 99), "cards[5]"), ((0, 4, 8, 12, 0), "cards[4]"),
     ((0, 4, 8, 12, -100), "cards[4]")],
)
def test_best_names_a_bad_card_by_its_place(cards, field):
    with pytest.raises(CardError) as err:
        four.best(cards)
    assert err.value.field == field


def test_every_kind_of_hand_is_ordered_as_641a_6_b():
    reps = []
    for ranks in combinations_with_replacement(range(2, 15), 4):
        reps.append(tuple(make(r, i) for i, r in enumerate(ranks)))
        if len(set(ranks)) == 4:
            reps.append(tuple(make(r, 0) for r in ranks))
    reps.sort(key=functools.cmp_to_key(ref_compare))
    values = [four.evaluate(h) for h in reps]
    for i in range(len(reps) - 1):
        assert sign(values[i + 1] - values[i]) == ref_compare(reps[i + 1], reps[i]), reps[i : i + 2]
    assert len(set(values)) == len(reps) == 1_820 + 715


# Best four of five over all 2,598,960 five-card hands.
BEST_OF_FIVE_COUNTS = {
    Four.FOUR_OF_A_KIND: 624,
    Four.STRAIGHT_FLUSH: 2_072,
    Four.THREE_OF_A_KIND: 58_656,
    Four.FLUSH: 114_616,
    Four.STRAIGHT: 101_808,
    Four.TWO_PAIR: 123_552,
    Four.PAIR: 1_047_552,
    Four.HIGH_CARD: 1_150_080,
}


def test_best_of_five_counts_that_follow_from_five_card_counts():
    """Five of the eight counts by counting, not by evaluating."""
    assert sum(BEST_OF_FIVE_COUNTS.values()) == comb(52, 5)
    # every five cards holding four of a kind
    assert BEST_OF_FIVE_COUNTS[Four.FOUR_OF_A_KIND] == 13 * 48
    # 11 sequences x 4 suits, each with any of 48 other cards; the 40 five-card straight flushes
    # hold two of them
    assert BEST_OF_FIVE_COUNTS[Four.STRAIGHT_FLUSH] == 11 * 4 * 48 - 40
    # five-card three-of-a-kind and full house (three cards of a rank have three suits, so no
    # four of them share a suit with the three)
    assert BEST_OF_FIVE_COUNTS[Four.THREE_OF_A_KIND] == 54_912 + 3_744
    # four or five of one suit, less the straight flushes
    assert BEST_OF_FIVE_COUNTS[Four.FLUSH] == 4 * comb(13, 4) * 39 + 4 * comb(13, 5) - 2_072
    # five-card two pair: no four of a suit, no three of a rank
    assert BEST_OF_FIVE_COUNTS[Four.TWO_PAIR] == 123_552


def test_best_of_five_by_brute_force_on_a_sample():
    """On 4,000 random hands the best four found by trying every four with the reference
    evaluator is the category `best` finds, hand by hand."""
    rnd = random.Random(641)
    for _ in range(4_000):
        cards = rnd.sample(DECK, 5)
        assert four.category(four.best(cards)[0]).label == ref_classify(ref_best(cards))[0], cards


@pytest.mark.slow
def test_best_of_five_counts_over_all_2598960_hands():
    """Regression: the counts by category, each hand through `best` (as § 641a.11(c)(2))."""
    values = Counter(four.best(h)[0] for h in combinations(DECK, 5))
    by_category = Counter()
    for value, n in values.items():
        by_category[four.category(value)] += n
    assert by_category == BEST_OF_FIVE_COUNTS

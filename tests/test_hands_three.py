"""Three-card hands, § 667a.6(d) (Flop Poker's Three Card Bonus) and § 643a.6(d) (Let It Ride).

The reference reads the rules apart from the module under test: categories by explicit
predicates and a list of the legal sequences (A-2-3 the lowest; see the module's docstring), then
the ranks that define a category, then § 667a.6(c) literally.
"""

from __future__ import annotations

import functools
from collections import Counter
from itertools import combinations, combinations_with_replacement

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import DECK, make, parse_cards, rank, suit
from controller.errors import CardError
from controller.hands import three
from controller.hands.categories import Three

# § 667a.6(d)(1)-(6) and high card, highest first.
ORDER = ["mini-royal", "straight-flush", "three-of-a-kind", "straight", "flush", "pair", "high-card"]
# Lowest first: A-2-3, 2-3-4, ..., Q-K-A. The ace joins 2-3 and no other sequence (K-A-2 is none).
SEQUENCES = [frozenset({14, 2, 3})] + [frozenset(range(low, low + 3)) for low in range(2, 13)]


def ref_classify(cards) -> tuple[str, list[int]]:
    rs = [rank(c) for c in cards]
    suited = len({suit(c) for c in cards}) == 1
    seq = SEQUENCES.index(frozenset(rs)) if frozenset(rs) in SEQUENCES else None
    counts = Counter(rs)
    if suited and set(rs) == {14, 13, 12}:
        return "mini-royal", []
    if suited and seq is not None:
        return "straight-flush", [seq]
    if len(counts) == 1:
        return "three-of-a-kind", rs[:1]
    if seq is not None:
        return "straight", [seq]
    if suited:
        return "flush", []
    if len(counts) == 2:
        return "pair", [r for r, k in counts.items() if k == 2]
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


def sign(n: int) -> int:
    return (n > 0) - (n < 0)


def ev(text: str) -> int:
    return three.evaluate(parse_cards(text))


@st.composite
def dense_hands(draw):
    low = draw(st.integers(1, 12))
    ranks = {14 if r == 1 else r for r in range(low, min(low + draw(st.integers(2, 5)), 15))}
    suits = draw(st.sets(st.integers(0, 3), min_size=1, max_size=4))
    pool = sorted(make(r, s) for r in ranks for s in suits)
    if len(pool) < 3:
        pool = list(DECK)
    return draw(st.lists(st.sampled_from(pool), min_size=3, max_size=3, unique=True))


any_hand = st.one_of(st.lists(st.sampled_from(DECK), min_size=3, max_size=3, unique=True), dense_hands())


@pytest.mark.parametrize(
    "text, expected",
    [
        ("AS KS QS", Three.MINI_ROYAL),  # (d)(1) "a royal"; 643a.6(d) "mini-royal"
        ("QH AH KH", Three.MINI_ROYAL),
        ("KD QD JD", Three.STRAIGHT_FLUSH),  # (d)(2)
        ("AC 2C 3C", Three.STRAIGHT_FLUSH),  # the ace low: the lowest straight flush
        ("2S 2H 2D", Three.THREE_OF_A_KIND),  # (d)(3)
        ("AS AH AD", Three.THREE_OF_A_KIND),
        ("AS KH QD", Three.STRAIGHT),  # (d)(4)
        ("AS 2H 3D", Three.STRAIGHT),
        ("4S 5H 6D", Three.STRAIGHT),
        ("AS KS JS", Three.FLUSH),  # (d)(5)
        ("2H 3H 5H", Three.FLUSH),
        ("KH AH 2H", Three.FLUSH),  # K-A-2 suited is a flush only
        ("AS AH KD", Three.PAIR),  # (d)(6)
        ("2S 2H 3D", Three.PAIR),
        ("AS KH JD", Three.HIGH_CARD),
        ("KS AH 2D", Three.HIGH_CARD),  # K-A-2 is not a straight
        ("QS KH 2D", Three.HIGH_CARD),
    ],
)
def test_667a_6_d_every_category(text, expected):
    assert three.category(ev(text)) is expected
    assert ref_classify(parse_cards(text))[0] == expected.label


def test_667a_6_d_straight_outranks_flush_and_categories_in_order():
    lower_higher = [
        ("AS KH JD", "2S 2H 3D"),  # best high card < worst pair
        ("AS AH KD", "2H 3H 5H"),  # best pair < worst flush
        ("AS KS JS", "AS 2H 3D"),  # best flush < worst straight
        ("AS KH QD", "2S 2H 2D"),  # best straight < worst three-of-a-kind
        ("AS AH AD", "AC 2C 3C"),  # best three-of-a-kind < worst straight flush
        ("KD QD JD", "AS KS QS"),  # best straight flush < mini-royal
    ]
    for lower, higher in lower_higher:
        assert ev(lower) < ev(higher), (lower, higher)


def test_a_2_3_is_the_lowest_straight_and_k_a_2_is_none():
    assert ev("AS 2H 3D") < ev("2S 3H 4D") < ev("QS KH AD")
    assert three.first_rank(ev("3S 2H AD")) == 3 and three.ranks(ev("3S 2H AD")) == (3, 2, 14)
    assert ev("AC 2C 3C") < ev("2D 3D 4D")
    assert three.category(ev("KS AH 2D")) is Three.HIGH_CARD


@pytest.mark.parametrize(
    "higher, lower",
    [
        ("KD QD JD", "QH JH TH"),  # straight flush: the highest card
        ("3S 3H 3D", "2S 2H 2D"),  # three-of-a-kind: the rank
        ("3S 4H 5D", "AS 2H 3D"),  # straight: the highest card
        ("AS KS 2S", "AH QH JH"),  # flush: card by card
        ("AS KS 3S", "AH KH 2H"),
        ("3S 3H 2D", "2S 2H AD"),  # pair: the pair first
        ("9S 9H 5D", "9D 9C 4S"),  # then the kicker
        ("AS 4H 2D", "KS QH TD"),  # high card
        ("AS KH 4D", "AS KH 3D"),
    ],
)
def test_tie_breaks_667a_6_c(higher, lower):
    assert ev(higher) > ev(lower)
    assert ref_compare(parse_cards(higher), parse_cards(lower)) == 1


def test_same_ranks_tie_667a_6_c():
    assert ev("AS KS QS") == ev("AD KD QD")
    assert ev("AS 2H 3D") == ev("AH 2D 3S")
    assert ev("9S 9H 5D") == ev("9D 9C 5S")


@given(any_hand, any_hand)
def test_order_is_the_regulations_order(h1, h2):
    assert sign(three.evaluate(h1) - three.evaluate(h2)) == ref_compare(h1, h2)


@given(any_hand, st.permutations(range(3)), st.permutations(range(4)))
def test_evaluate_ignores_card_order_and_suit_names(hand, order, perm):
    moved = [hand[i] for i in order]
    renamed = [make(rank(c), perm[suit(c)]) for c in hand]
    assert three.evaluate(moved) == three.evaluate(renamed) == three.evaluate(hand)


@pytest.mark.parametrize("cards, field", [((1, 2), "cards"), ((1, 2, 3, 4), "cards"), ((1, 2, -0.5), "cards[2]"),
                                          ((0, 4, 0), "cards")])
def test_evaluate_rejects_what_is_not_three_cards(cards, field):
    with pytest.raises(CardError) as err:
        three.evaluate(cards)
    assert err.value.field == field


def test_counts_over_all_22100_hands():
    values = [three.evaluate(h) for h in combinations(DECK, 3)]
    assert Counter(map(three.category, values)) == {
        Three.MINI_ROYAL: 4,
        Three.STRAIGHT_FLUSH: 44,
        Three.THREE_OF_A_KIND: 52,
        Three.STRAIGHT: 720,
        Three.FLUSH: 1_096,
        Three.PAIR: 3_744,
        Three.HIGH_CARD: 16_440,
    }


def test_every_hand_has_the_reference_category():
    for h in combinations(DECK, 3):
        assert three.category(three.evaluate(h)).label == ref_classify(h)[0], h


def test_every_kind_of_hand_is_ordered_as_the_regulations_say():
    reps = []
    for ranks in combinations_with_replacement(range(2, 15), 3):
        reps.append(tuple(make(r, i) for i, r in enumerate(ranks)))
        if len(set(ranks)) == 3:
            reps.append(tuple(make(r, 0) for r in ranks))
    reps.sort(key=functools.cmp_to_key(ref_compare))
    values = [three.evaluate(h) for h in reps]
    for i in range(len(reps) - 1):
        assert sign(values[i + 1] - values[i]) == ref_compare(reps[i + 1], reps[i]), reps[i : i + 2]
    # 455 sets of ranks unsuited and 286 suited: no two of them tie
    assert len(set(values)) == len(reps) == 741

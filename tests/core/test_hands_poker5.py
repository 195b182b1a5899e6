"""Five-card Poker hands, § 667a.6(a)-(c) (and § 639a.6, which ranks them the same way).

The reference below reads the rules a different way from the module under test: categories by
explicit predicates and a list of the legal sequences, hands of one category first by the ranks
that § 667a.6(b) orders them by, then by § 667a.6(c) literally (the highest ranking card that
is not contained in the other hand).
"""

from __future__ import annotations

import functools
from collections import Counter
from itertools import combinations, combinations_with_replacement, pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import DECK, make, parse_cards, rank, suit
from controller.errors import CardError
from controller.hands import poker5
from controller.hands.categories import Poker5

# § 667a.6(b), highest first.
ORDER = [
    "royal-flush", "straight-flush", "four-of-a-kind", "full-house", "flush",
    "straight", "three-of-a-kind", "two-pair", "pair", "high-card",
]
# § 667a.6(a): the ace completes 2-3-4-5 and no other sequence. Lowest first.
SEQUENCES = [frozenset({14, 2, 3, 4, 5})] + [frozenset(range(lo, lo + 5)) for lo in range(2, 11)]


def ref_classify(cards) -> tuple[str, list[int]]:
    """(category, the ranks § 667a.6(b) ranks hands of that category by)."""
    rs = [rank(c) for c in cards]
    flush = len({suit(c) for c in cards}) == 1
    seq = SEQUENCES.index(frozenset(rs)) if frozenset(rs) in SEQUENCES else None
    counts = Counter(rs)

    def ranks_seen(n: int) -> list[int]:
        return sorted((r for r, k in counts.items() if k == n), reverse=True)

    if flush and seq == len(SEQUENCES) - 1:
        return "royal-flush", []
    if flush and seq is not None:
        return "straight-flush", [seq]
    if ranks_seen(4):
        return "four-of-a-kind", ranks_seen(4)
    if ranks_seen(3) and ranks_seen(2):
        return "full-house", ranks_seen(3) + ranks_seen(2)
    if flush:
        return "flush", []
    if seq is not None:
        return "straight", [seq]
    if ranks_seen(3):
        return "three-of-a-kind", ranks_seen(3)
    if len(ranks_seen(2)) == 2:
        return "two-pair", ranks_seen(2)
    if ranks_seen(2):
        return "pair", ranks_seen(2)
    return "high-card", []


def ref_compare(h1, h2) -> int:
    c1, d1 = ref_classify(h1)
    c2, d2 = ref_classify(h2)
    if c1 != c2:
        return 1 if ORDER.index(c1) < ORDER.index(c2) else -1
    if d1 != d2:
        return 1 if d1 > d2 else -1
    # § 667a.6(c): the highest ranking card not contained in the other hand.
    r1, r2 = Counter(map(rank, h1)), Counter(map(rank, h2))
    m1, m2 = max(r1 - r2, default=0), max(r2 - r1, default=0)
    return (m1 > m2) - (m1 < m2)


def sign(n: int) -> int:
    return (n > 0) - (n < 0)


def ev(text: str) -> int:
    return poker5.evaluate(parse_cards(text))


def hands(n: int = 5):
    return st.lists(st.sampled_from(DECK), min_size=n, max_size=n, unique=True)


@st.composite
def dense_hands(draw, n: int = 5):
    """Hands from a few neighbouring ranks and few suits: straights, flushes, full houses and
    straight flushes are common here, rare in a random deal."""
    low = draw(st.integers(1, 10))  # 1: the window starts with the ace as low card
    width = draw(st.integers(4, 7))
    ranks = {14 if r == 1 else r for r in range(low, min(low + width, 15))}
    suits = draw(st.sets(st.integers(0, 3), min_size=1, max_size=4))
    pool = sorted(make(r, s) for r in ranks for s in suits)
    if len(pool) < n:
        pool = sorted(set(pool) | set(draw(st.lists(st.sampled_from(DECK), min_size=n, max_size=n, unique=True))))
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True))


any_hand = st.one_of(hands(), dense_hands())


# -- every category, § 667a.6(b)(1)-(9) ------------------------------------------------------------

@pytest.mark.parametrize(
    "text, expected",
    [
        ("AS KS QS JS TS", Poker5.ROYAL_FLUSH),  # (b)(1)
        ("TD JD QD KD AD", Poker5.ROYAL_FLUSH),
        ("KH QH JH TH 9H", Poker5.STRAIGHT_FLUSH),  # (b)(2) highest
        ("AC 2C 3C 4C 5C", Poker5.STRAIGHT_FLUSH),  # (b)(2) lowest, the ace low
        ("6S 7S 8S 9S TS", Poker5.STRAIGHT_FLUSH),
        ("AS AH AD AC KS", Poker5.FOUR_OF_A_KIND),  # (b)(3)
        ("2S 2H 2D 2C 3S", Poker5.FOUR_OF_A_KIND),
        ("AS AH AD KS KH", Poker5.FULL_HOUSE),  # (b)(4)
        ("2S 2H 2D 3S 3H", Poker5.FULL_HOUSE),
        ("AS KS QS JS 9S", Poker5.FLUSH),  # (b)(5) highest
        ("2D 3D 4D 5D 7D", Poker5.FLUSH),  # (b)(5) lowest
        ("AS KH QD JC TS", Poker5.STRAIGHT),  # (b)(6) highest
        ("AS 2H 3D 4C 5S", Poker5.STRAIGHT),  # (b)(6) lowest
        ("9S TH JD QC KS", Poker5.STRAIGHT),
        ("AS AH AD KC QS", Poker5.THREE_OF_A_KIND),  # (b)(7)
        ("2S 2H 2D 3C 4S", Poker5.THREE_OF_A_KIND),
        ("AS AH KD KC QS", Poker5.TWO_PAIR),  # (b)(8)
        ("3S 3H 2D 2C 4S", Poker5.TWO_PAIR),
        ("AS AH KD QC JS", Poker5.PAIR),  # (b)(9)
        ("2S 2H 3D 4C 5S", Poker5.PAIR),
        ("AS KH QD JC 9S", Poker5.HIGH_CARD),  # neither hand of (b): (c)
        ("2S 3H 4D 5C 7S", Poker5.HIGH_CARD),
    ],
)
def test_667a_6_b_every_category(text, expected):
    value = ev(text)
    assert poker5.category(value) is expected
    assert ref_classify(parse_cards(text))[0] == expected.label


def test_667a_6_b_categories_rank_in_the_order_listed():
    """The highest hand of each category loses to the lowest hand of the category above it."""
    lowest_to_highest = [
        ("AS KH QD JC 9S", "2S 2H 3D 4C 5S"),  # best high card < worst pair
        ("AS AH KD QC JS", "3S 3H 2D 2C 4S"),  # best pair < worst two pair
        ("AS AH KD KC QS", "2S 2H 2D 3C 4S"),  # best two pair < worst three-of-a-kind
        ("AS AH AD KC QS", "AS 2H 3D 4C 5S"),  # best three-of-a-kind < worst straight
        ("AS KH QD JC TS", "2D 3D 4D 5D 7D"),  # best straight < worst flush
        ("AS KS QS JS 9S", "2S 2H 2D 3S 3H"),  # best flush < worst full house
        ("AS AH AD KS KH", "2S 2H 2D 2C 3S"),  # best full house < worst four-of-a-kind
        ("AS AH AD AC KS", "AC 2C 3C 4C 5C"),  # best four-of-a-kind < worst straight flush
        ("KH QH JH TH 9H", "AS KS QS JS TS"),  # best straight flush < royal flush
    ]
    for lower, higher in lowest_to_highest:
        assert ev(lower) < ev(higher), (lower, higher)


# -- the ace, § 667a.6(a) ------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, expected",
    [
        ("QS KH AD 2C 3S", Poker5.HIGH_CARD),  # the example of § 667a.6(a)
        ("JS QH KD AC 2S", Poker5.HIGH_CARD),
        ("KS AH 2D 3C 4S", Poker5.HIGH_CARD),
        ("QH KH AH 2H 3H", Poker5.FLUSH),  # suited: a flush, not a straight flush
        ("KD AD 2D 3D 4D", Poker5.FLUSH),
    ],
)
def test_667a_6_a_ace_does_not_wrap_around(text, expected):
    assert poker5.category(ev(text)) is expected


def test_667a_6_a_wheel_is_the_lowest_straight_and_straight_flush():
    wheel, six_high = ev("5S 4H 3D 2C AS"), ev("6S 5H 4D 3C 2S")
    assert poker5.category(wheel) is Poker5.STRAIGHT and wheel < six_high
    assert poker5.first_rank(wheel) == 5 and poker5.ranks(wheel) == (5, 4, 3, 2, 14)
    steel, six_high_sf = ev("5H 4H 3H 2H AH"), ev("6D 5D 4D 3D 2D")
    assert poker5.category(steel) is Poker5.STRAIGHT_FLUSH and steel < six_high_sf
    assert steel > ev("AS AH AD AC KS")
    assert wheel > ev("AS AH AD KC QS")
    # Below every other straight, and those rise with their highest card.
    others = [poker5.evaluate([make(r, i % 4) for i, r in enumerate(range(low, low + 5))]) for low in range(2, 11)]
    assert [poker5.category(v) for v in others] == [Poker5.STRAIGHT] * 9
    assert wheel < min(others) and sorted(others) == others and len(set(others)) == 9


def test_667a_6_a_ace_is_high_elsewhere():
    assert ev("AS KH QD JC TS") > ev("KS QH JD TC 9S")
    assert ev("AS 7H 5D 4C 2S") > ev("KS QH JD TC 8S")
    assert poker5.first_rank(ev("AS KH QD JC TS")) == 14


# -- tie-breaks, § 667a.6(c) ----------------------------------------------------------------------

@pytest.mark.parametrize(
    "higher, lower",
    [
        ("9S 9H 9D 9C AS", "9S 9H 9D 9C KS"),  # four-of-a-kind: the kicker
        ("TS TH TD TC 2S", "9S 9H 9D 9C AS"),  # four-of-a-kind: the four first
        ("KS KH KD 2C 2S", "QS QH QD AC AS"),  # full house: the three first
        ("KS KH KD 3C 3S", "KS KH KD 2C 2S"),  # then the pair
        ("AS KS QS JS 9S", "AH KH QH JH 8H"),  # flush: card by card
        ("AS KS 7S 5S 3S", "AH KH 7H 5H 2H"),
        ("AS 6S 5S 4S 3S", "KH QH JH TH 8H"),
        ("7S 8H 9D TC JS", "6S 7H 8D 9C TS"),  # straight: the highest card
        ("7S 7H 7D AS 2C", "7S 7H 7D KS QC"),  # three-of-a-kind: kickers
        ("8S 8H 8D 2S 3C", "7S 7H 7D AS KC"),
        ("AS AH 2D 2C 3S", "KS KH QD QC JS"),  # two pair: the high pair
        ("KS KH QD QC 2S", "KS KH JD JC AS"),  # then the low pair
        ("KS KH QD QC 3S", "KS KH QD QC 2S"),  # then the kicker
        ("3S 3H 4D 5C 6S", "2S 2H AD KC QS"),  # pair: the pair
        ("JS JH AD 5C 4S", "JS JH KD QC TS"),  # then the kickers, highest first
        ("JS JH AD 5C 4S", "JS JH AD 5C 3S"),
        ("AS 7H 5D 4C 2S", "KS QH JD TC 8S"),  # high card
        ("AS KH 5D 4C 3S", "AS KH 5D 4C 2S"),
    ],
)
def test_667a_6_c_tie_breaks(higher, lower):
    assert ev(higher) > ev(lower)
    assert ref_compare(parse_cards(higher), parse_cards(lower)) == 1


@pytest.mark.parametrize(
    "one, other",
    [
        ("AS KS QS JS TS", "AH KH QH JH TH"),
        ("5S 4S 3S 2S AS", "5D 4D 3D 2D AD"),
        ("AS KH QD JC TS", "AH KD QC JS TH"),
        ("KS KH QD QC 2S", "KD KC QS QH 2H"),
        ("AS 7H 5D 4C 2S", "AD 7C 5H 4S 2D"),
    ],
)
def test_667a_6_c_identical_ranks_tie(one, other):
    """All suits are equal in rank (§ 667a.6(a)): the same ranks tie (§ 667a.6(c))."""
    assert ev(one) == ev(other)


def test_first_rank_for_jacks_or_better_667a_12_b():
    assert poker5.first_rank(ev("JS JH 2D 3C 4S")) == 11
    assert poker5.first_rank(ev("TS TH AD KC QS")) == 10
    assert poker5.first_rank(ev("KS KH 3D 3C 2S")) == 13  # two pair: the high pair
    assert poker5.first_rank(ev("3S 3H 3D KC KS")) == 3  # full house: the three
    assert poker5.first_rank(ev("AS 9H 7D 4C 2S")) == 14


# -- properties --------------------------------------------------------------------------------------

@given(any_hand, any_hand)
def test_order_is_the_regulations_order(h1, h2):
    """Comparing values is § 667a.6(b)-(c): category first, then the tie-break."""
    assert sign(poker5.evaluate(h1) - poker5.evaluate(h2)) == ref_compare(h1, h2)
    assert poker5.category(poker5.evaluate(h1)).label == ref_classify(h1)[0]


@given(any_hand, st.randoms(use_true_random=False))
def test_evaluate_ignores_card_order(hand, rnd):
    shuffled = list(hand)
    rnd.shuffle(shuffled)
    assert poker5.evaluate(shuffled) == poker5.evaluate(hand) == poker5.evaluate(tuple(hand))


@given(any_hand, st.permutations(range(4)))
def test_evaluate_ignores_which_suit(hand, perm):
    """All suits are equal in rank, § 667a.6(a)."""
    renamed = [make(rank(c), perm[suit(c)]) for c in hand]
    assert poker5.evaluate(renamed) == poker5.evaluate(hand)


@given(st.one_of(hands(5), hands(6), hands(7), dense_hands(6), dense_hands(7)))
def test_best_is_at_least_every_five(cards):
    value, five = poker5.best(cards)
    every = [poker5.evaluate(h) for h in combinations(cards, 5)]
    assert value == max(every)
    assert len(five) == 5 and set(five) <= set(cards) and poker5.evaluate(five) == value
    # the first of equal choices, in the order given
    assert five == next(h for h in combinations(cards, 5) if poker5.evaluate(h) == value)


def test_best_of_seven_example():
    value, five = poker5.best(parse_cards("2D AS KS 3C QS JS TS"))
    assert poker5.category(value) is Poker5.ROYAL_FLUSH
    assert five == parse_cards("AS KS QS JS TS")
    value, five = poker5.best(parse_cards("AS 2D 3C 4H 9S 5S KD"))
    assert poker5.category(value) is Poker5.STRAIGHT and poker5.first_rank(value) == 5


@pytest.mark.parametrize("n", [0, 4, 8])
def test_best_needs_five_to_seven_cards(n):
    with pytest.raises(CardError, match=f"has {n} cards"):
        poker5.best(tuple(range(n)))


@pytest.mark.parametrize("cards, field", [((0, 1, 2, 3, 4, 99), "cards[5]"), ((8, 12, 16, 20, 24, 28, 8), "cards[6]")])
def test_best_names_a_bad_card_by_its_place(cards, field):
    with pytest.raises(CardError) as err:
        poker5.best(cards)
    assert err.value.field == field


@pytest.mark.parametrize(
    "cards, field, words",
    [
        ((1, 2, 3, 4), "cards", "has 4 cards"),
        ((1, 2, 3, 4, 5, 6), "cards", "has 6 cards"),
        ((1, 2, 3, 4, 52), "cards[4]", "not a card"),
        ((1, 2, "AS", 4, 5), "cards[2]", "not a card"),
        ((1, 2, 3.0, 4, 5), "cards[2]", "not a card"),
        ((0, 1, 2, 3, 0), "cards[4]", "duplicate card 2S"),  # five 2s
        ((0, 4, 8, 12, 0), "cards[4]", "duplicate card 2S"),  # a flush with a pair
        (None, "cards", "sequence of 5"),
    ],
)
def test_evaluate_rejects_what_is_not_five_cards(cards, field, words):
    with pytest.raises(CardError, match=words) as err:
        poker5.evaluate(cards)
    assert err.value.field == field


# -- exhaustive ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_counts_over_all_2598960_hands():
    counts = Counter(map(poker5.evaluate, combinations(DECK, 5)))
    by_category = Counter()
    for value, n in counts.items():
        by_category[poker5.category(value)] += n
    assert by_category == {
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
    assert sum(counts.values()) == 2_598_960
    assert len(counts) == 7_462  # the distinct five-card Poker hands


def class_representatives():
    """One hand of each set of ranks, unsuited (suits 0,1,2,3,0) and, with five ranks, suited."""
    for ranks in combinations_with_replacement(range(2, 15), 5):
        if len(set(ranks)) == 1:
            continue
        yield tuple(make(r, i % 4) for i, r in enumerate(ranks))
        if len(set(ranks)) == 5:
            yield tuple(make(r, 0) for r in ranks)


@pytest.mark.slow
def test_every_kind_of_hand_is_ordered_as_the_regulations_say():
    """Sort one hand of every rank pattern (7,462 of them) by the reference reading of
    § 667a.6(b)-(c); the values must rise with it and tie exactly where it ties."""
    reps = sorted(class_representatives(), key=functools.cmp_to_key(ref_compare))
    values = [poker5.evaluate(h) for h in reps]
    for (h1, v1), (h2, v2) in pairwise(zip(reps, values, strict=True)):
        assert sign(v2 - v1) == ref_compare(h2, h1), (h1, h2)
    assert len(set(values)) == 7_462

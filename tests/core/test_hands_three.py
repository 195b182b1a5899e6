"""Three-card hands, § 667a.6(d) (Flop Poker's Three Card Bonus) and § 643a.6(d) (Let It Ride).

The reference reads the rules apart from the module under test: categories by explicit
predicates and a list of the legal sequences, then the ranks that define a category, then
§ 667a.6(c) literally.

Two modes (see the module's docstring). By default the letter of § 667a.6(a): the ace is low
only with 2, 3, 4 and 5 and "may not be combined with any other sequence", so A-2-3 is no
straight (ace-high, or suited a flush). With `ace_low=True` (Three Card Poker's custom) A-2-3 is
the lowest straight. K-A-2 is never a straight.
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

MODES = pytest.mark.parametrize("ace_low", [False, True], ids=["letter", "ace-low"])

# § 667a.6(d)(1)-(6) and high card, highest first.
ORDER = ["mini-royal", "straight-flush", "three-of-a-kind", "straight", "flush", "pair", "high-card"]
# Lowest first: 2-3-4, ..., Q-K-A; with the ace low, A-2-3 below them all. K-A-2 is never one.
RUNS = [frozenset(range(low, low + 3)) for low in range(2, 13)]
SEQUENCES = {False: RUNS, True: [frozenset({14, 2, 3})] + RUNS}


def ref_classify(cards, ace_low: bool = False) -> tuple[str, list[int]]:
    rs = [rank(c) for c in cards]
    suited = len({suit(c) for c in cards}) == 1
    sequences = SEQUENCES[ace_low]
    seq = sequences.index(frozenset(rs)) if frozenset(rs) in sequences else None
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


def ref_compare(h1, h2, ace_low: bool = False) -> int:
    c1, d1 = ref_classify(h1, ace_low)
    c2, d2 = ref_classify(h2, ace_low)
    if c1 != c2:
        return 1 if ORDER.index(c1) < ORDER.index(c2) else -1
    if d1 != d2:
        return 1 if d1 > d2 else -1
    r1, r2 = Counter(map(rank, h1)), Counter(map(rank, h2))
    m1, m2 = max(r1 - r2, default=0), max(r2 - r1, default=0)
    return (m1 > m2) - (m1 < m2)


def sign(n: int) -> int:
    return (n > 0) - (n < 0)


def evaluate(cards, ace_low: bool = False) -> int:
    """The default mode is called without the argument, so that the default itself is tested."""
    return three.evaluate(cards, ace_low=True) if ace_low else three.evaluate(cards)


def ev(text: str, ace_low: bool = False) -> int:
    return evaluate(parse_cards(text), ace_low)


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

M, SF, TK, S, F, P, H = (
    Three.MINI_ROYAL, Three.STRAIGHT_FLUSH, Three.THREE_OF_A_KIND, Three.STRAIGHT, Three.FLUSH, Three.PAIR,
    Three.HIGH_CARD,
)


@pytest.mark.parametrize(
    "text, letter, ace_low",
    [
        ("AS KS QS", M, M),  # (d)(1) "a royal"; 643a.6(d) "mini-royal"
        ("QH AH KH", M, M),
        ("KD QD JD", SF, SF),  # (d)(2)
        ("2C 3C 4C", SF, SF),
        ("AC 2C 3C", F, SF),  # A-2-3 suited: a flush to the letter, the lowest straight flush ace-low
        ("3H AH 2H", F, SF),
        ("2S 2H 2D", TK, TK),  # (d)(3)
        ("AS AH AD", TK, TK),
        ("AS KH QD", S, S),  # (d)(4)
        ("2S 3H 4D", S, S),
        ("4S 5H 6D", S, S),
        ("AS 2H 3D", H, S),  # A-2-3 unsuited: ace-high to the letter, the lowest straight ace-low
        ("3C 2S AD", H, S),
        ("AS KS JS", F, F),  # (d)(5)
        ("2H 3H 5H", F, F),
        ("KH AH 2H", F, F),  # K-A-2 suited is a flush only
        ("AS AH KD", P, P),  # (d)(6)
        ("2S 2H 3D", P, P),
        ("AS AH 2D", P, P),
        ("AS KH JD", H, H),
        ("KS AH 2D", H, H),  # K-A-2 is not a straight
        ("QS KH 2D", H, H),
    ],
)
def test_667a_6_d_every_category_in_both_modes(text, letter, ace_low):
    assert three.category(ev(text)) is letter
    assert three.category(three.evaluate(parse_cards(text), ace_low=False)) is letter
    assert three.category(ev(text, ace_low=True)) is ace_low
    assert ref_classify(parse_cards(text), False)[0] == letter.label
    assert ref_classify(parse_cards(text), True)[0] == ace_low.label


# (worst straight, worst straight flush) in each mode
WORST = {False: ("2S 3H 4D", "2C 3C 4C"), True: ("AS 2H 3D", "AC 2C 3C")}


@MODES
def test_667a_6_d_straight_outranks_flush_and_categories_in_order(ace_low):
    worst_straight, worst_straight_flush = WORST[ace_low]
    lower_higher = [
        ("AS KH JD", "2S 2H 3D"),  # best high card < worst pair
        ("AS AH KD", "2H 3H 5H"),  # best pair < worst flush
        ("AS KS JS", worst_straight),  # best flush < worst straight
        ("AS KH QD", "2S 2H 2D"),  # best straight < worst three-of-a-kind
        ("AS AH AD", worst_straight_flush),  # best three-of-a-kind < worst straight flush
        ("KD QD JD", "AS KS QS"),  # best straight flush < mini-royal
    ]
    for lower, higher in lower_higher:
        assert ev(lower, ace_low) < ev(higher, ace_low), (lower, higher)
    # the worst of each category is the worst: nothing of the category is below it
    assert three.category(ev(worst_straight, ace_low)) is S
    assert three.category(ev(worst_straight_flush, ace_low)) is SF
    for h in combinations(DECK, 3):
        v = evaluate(h, ace_low)
        if three.category(v) is S:
            assert v >= ev(worst_straight, ace_low), h
        elif three.category(v) is SF:
            assert v >= ev(worst_straight_flush, ace_low), h


def test_to_the_letter_a_2_3_is_ace_high_or_a_flush():
    a23 = ev("AS 2H 3D")
    assert three.ranks(a23) == (14, 3, 2) and three.first_rank(a23) == 14
    assert ev("KS JH 9D") < ev("KS QH TD") < a23 < ev("AS 4H 2D") < ev("AS KH JD")  # the lowest ace-high
    assert ev("AS AH KD") < ev("KC QC TC") < ev("AC 2C 3C") < ev("AC 4C 2C") < ev("2S 3H 4D")  # a flush
    assert three.ranks(ev("AC 2C 3C")) == (14, 3, 2)
    assert three.category(ev("2S 3H 4D")) is S and three.first_rank(ev("2S 3H 4D")) == 4  # the lowest straight


def test_ace_low_a_2_3_is_the_lowest_straight():
    def v(text):
        return ev(text, ace_low=True)

    assert v("AS KH QD") > v("2S 3H 4D") > v("AS 2H 3D") > v("AS KS JS")  # above every flush
    assert three.first_rank(v("3S 2H AD")) == 3 and three.ranks(v("3S 2H AD")) == (3, 2, 14)
    assert v("2D 3D 4D") > v("AC 2C 3C") > v("AS AH AD")
    assert three.ranks(v("AC 2C 3C")) == (3, 2, 14)


@MODES
def test_k_a_2_is_never_a_straight_and_a_k_q_is_the_highest(ace_low):
    assert three.category(ev("KS AH 2D", ace_low)) is H
    assert three.category(ev("KS AS 2S", ace_low)) is F
    assert three.ranks(ev("KS AH 2D", ace_low)) == (14, 13, 2)
    top = ev("AS KH QD", ace_low)
    assert three.category(top) is S and three.first_rank(top) == 14
    assert all(ev(f"{lo}S {mid}H {hi}D", ace_low) < top for lo, mid, hi in ["QKJ", "JQT", "234"])


def test_the_modes_differ_in_the_64_a_2_3_hands_only():
    differ = [h for h in combinations(DECK, 3) if three.evaluate(h) != three.evaluate(h, ace_low=True)]
    assert len(differ) == 64
    assert all(sorted(map(rank, h)) == [2, 3, 14] for h in differ)
    assert three.evaluate(parse_cards("AS 2H 3D"), ace_low=False) == three.evaluate(parse_cards("AS 2H 3D"))


# (higher, lower, modes in which the order holds)
TIE_BREAKS = [
    ("KD QD JD", "QH JH TH", (False, True)),  # straight flush: the highest card
    ("2D 3D 4D", "AC 2C 3C", (False, True)),  # (to the letter A-2-3 suited is a flush)
    ("3S 3H 3D", "2S 2H 2D", (False, True)),  # three-of-a-kind: the rank
    ("3S 4H 5D", "2S 3H 4D", (False, True)),  # straight: the highest card
    ("3S 4H 5D", "AS 2H 3D", (False, True)),
    ("2S 3H 4D", "AS 2H 3D", (False, True)),  # 4-high beats 3-high, and beats ace-high
    ("AS KS 2S", "AH QH JH", (False, True)),  # flush: card by card
    ("AS KS 3S", "AH KH 2H", (False, True)),
    ("AS 4S 2S", "AH 3H 2H", (False,)),  # to the letter A-3-2 suited is the lowest ace-high flush
    ("AH 3H 2H", "KS QS TS", (False, True)),  # ace-high flush or, ace-low, a straight flush
    ("AH 3H 2H", "AS KS JS", (True,)),  # ace-low it is a straight flush, above every flush
    ("3S 3H 2D", "2S 2H AD", (False, True)),  # pair: the pair first
    ("9S 9H 5D", "9D 9C 4S", (False, True)),  # then the kicker
    ("AS 4H 2D", "KS QH TD", (False, True)),  # high card
    ("AS KH 4D", "AS KH 3D", (False, True)),
    ("AS 4H 2D", "AS 3H 2D", (False,)),  # to the letter A-3-2 is the lowest ace-high
    ("AS 3H 2D", "KS QH TD", (False, True)),  # ace-high or, ace-low, a straight
    ("AS 3H 2D", "AS 4H 2D", (True,)),  # ace-low it is a straight
    ("AS 3H 2D", "2S 2H 3D", (True,)),  # to the letter below any pair, ace-low above them all
]


@MODES
@pytest.mark.parametrize("higher, lower, modes", TIE_BREAKS)
def test_tie_breaks_667a_6_c(higher, lower, modes, ace_low):
    expected = 1 if ace_low in modes else -1
    assert sign(ev(higher, ace_low) - ev(lower, ace_low)) == expected
    assert ref_compare(parse_cards(higher), parse_cards(lower), ace_low) == expected


@MODES
def test_same_ranks_tie_667a_6_c(ace_low):
    assert ev("AS KS QS", ace_low) == ev("AD KD QD", ace_low)
    assert ev("AS 2H 3D", ace_low) == ev("AH 2D 3S", ace_low)
    assert ev("AS 2S 3S", ace_low) == ev("AH 2H 3H", ace_low) != ev("AH 2H 3D", ace_low)
    assert ev("9S 9H 5D", ace_low) == ev("9D 9C 5S", ace_low)


@MODES
@given(h1=any_hand, h2=any_hand)
def test_order_is_the_regulations_order(h1, h2, ace_low):
    assert sign(evaluate(h1, ace_low) - evaluate(h2, ace_low)) == ref_compare(h1, h2, ace_low)


@MODES
@given(hand=any_hand, order=st.permutations(range(3)), perm=st.permutations(range(4)))
def test_evaluate_ignores_card_order_and_suit_names(hand, order, perm, ace_low):
    moved = [hand[i] for i in order]
    renamed = [make(rank(c), perm[suit(c)]) for c in hand]
    assert evaluate(moved, ace_low) == evaluate(renamed, ace_low) == evaluate(hand, ace_low)


@MODES
@pytest.mark.parametrize(
    "cards, field", [((1, 2), "cards"), ((1, 2, 3, 4), "cards"), ((1, 2, -0.5), "cards[2]"), ((0, 4, 0), "cards[2]")]
)
def test_evaluate_rejects_what_is_not_three_cards(cards, field, ace_low):
    with pytest.raises(CardError) as err:
        evaluate(cards, ace_low)
    assert err.value.field == field


COUNTS = {
    False: {  # to the letter: 11 sequences, A-2-3 ace-high or a flush
        Three.MINI_ROYAL: 4,
        Three.STRAIGHT_FLUSH: 40,
        Three.THREE_OF_A_KIND: 52,
        Three.STRAIGHT: 660,
        Three.FLUSH: 1_100,
        Three.PAIR: 3_744,
        Three.HIGH_CARD: 16_500,
    },
    True: {  # ace-low: the well-known table, 12 sequences
        Three.MINI_ROYAL: 4,
        Three.STRAIGHT_FLUSH: 44,
        Three.THREE_OF_A_KIND: 52,
        Three.STRAIGHT: 720,
        Three.FLUSH: 1_096,
        Three.PAIR: 3_744,
        Three.HIGH_CARD: 16_440,
    },
}


@MODES
def test_counts_over_all_22100_hands(ace_low):
    values = [evaluate(h, ace_low) for h in combinations(DECK, 3)]
    assert len(values) == 22_100 == sum(COUNTS[ace_low].values())
    assert Counter(map(three.category, values)) == COUNTS[ace_low]


@MODES
def test_every_hand_has_the_reference_category(ace_low):
    for h in combinations(DECK, 3):
        assert three.category(evaluate(h, ace_low)).label == ref_classify(h, ace_low)[0], h


@MODES
def test_every_kind_of_hand_is_ordered_as_the_regulations_say(ace_low):
    compare = functools.partial(ref_compare, ace_low=ace_low)
    reps = []
    for ranks in combinations_with_replacement(range(2, 15), 3):
        reps.append(tuple(make(r, i) for i, r in enumerate(ranks)))
        if len(set(ranks)) == 3:
            reps.append(tuple(make(r, 0) for r in ranks))
    reps.sort(key=functools.cmp_to_key(compare))
    values = [evaluate(h, ace_low) for h in reps]
    for i in range(len(reps) - 1):
        assert sign(values[i + 1] - values[i]) == compare(reps[i + 1], reps[i]), reps[i : i + 2]
    # 455 sets of ranks unsuited and 286 suited: no two of them tie
    assert len(set(values)) == len(reps) == 741

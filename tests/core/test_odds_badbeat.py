"""Bad Beat Bonus (§ 641a.7(d)(6), § 641a.11(c)(6)): the inclusion-exclusion count against brute
force on decks small enough to deal every pair of hands, and its pieces against the evaluators
used in play. (The whole-deck count takes some 20 seconds; bench/bench_odds.py runs it.)"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import combinations
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import parse_cards
from controller.errors import RulesError
from controller.games import CardRule, HandKind
from controller.hands import four
from controller.hands.categories import Four
from controller.odds import badbeat, hand_counts, odds_report
from controller.odds.badbeat import LOW, BadBeat, BadBeatCounts, four_value, player_value
from controller.odds.suits import suit_patterns
from controller.paytables import Pay, find_paytable

# Best four of six over all C(52, 6) hands (the Four Card Poker dealer's hand, § 641a.11(c)).
DEALER_SIX = {
    Four.FOUR_OF_A_KIND: 14_664,
    Four.STRAIGHT_FLUSH: 47_752,
    Four.THREE_OF_A_KIND: 897_616,
    Four.FLUSH: 2_245_352,
    Four.STRAIGHT: 1_744_080,
    Four.TWO_PAIR: 2_342_736,
    Four.PAIR: 8_194_320,
    Four.HIGH_CARD: 4_872_000,
}


def test_four_value_is_the_play_evaluators_value_on_every_pattern() -> None:
    for cards, _ in suit_patterns(4):
        ranks = [(c >> 2) + 2 for c in cards]
        assert four_value(ranks, len({c & 3 for c in cards}) == 1) == four.evaluate(cards)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 51), min_size=5, max_size=5, unique=True))
def test_player_value_is_the_best_four(cards: list[int]) -> None:
    value, _ = four.best(cards)
    expected = value if four.category(value) >= Four.TWO_PAIR else LOW
    assert player_value(cards) == expected


def test_dealer_six_card_counts() -> None:
    counts = hand_counts(HandKind.FOUR, CardRule.DEALER_BEST_FOUR)
    assert counts.by_category == DEALER_SIX
    assert counts.total == sum(DEALER_SIX.values()) == comb(52, 6)


def test_dealer_hands_containing_nothing_are_all_dealer_hands() -> None:
    """G(∅), the rank-only part plus the flush correction, is the whole dealer distribution: a
    count made in another way than hand_counts' (by rank multisets and suited rank sets)."""
    machine = BadBeat()
    by_category: Counter[Four] = Counter()
    for dist in (machine._rank_parts[0], machine._flush_part(((), (), (), ()))):
        previous = 0
        for v, c in zip(dist.values, dist.cum[1:], strict=True):
            by_category[badbeat.category(v)] += c - previous
            previous = c
    assert dict(by_category) == {c: n for c, n in DEALER_SIX.items() if c >= Four.TWO_PAIR}


def _brute_dealer(deck: list[int], player: tuple[int, ...]) -> dict[int, int]:
    rest = [c for c in deck if c not in player]
    out: Counter[int] = Counter()
    for hand in combinations(rest, 6):
        value, _ = four.best(hand)
        if four.category(value) >= Four.TWO_PAIR:
            out[value] += 1
    return dict(out)


NINE_TO_ACE = tuple(range(9, 15))  # 24 cards: every category, flushes and straight flushes


@pytest.mark.parametrize("text", ["AS KS QS JS 9H", "9S 9H TD TC AS", "QH QD QC 9H TH", "AS AH AD AC KS"])
def test_dealer_hands_avoiding_a_player_hand_match_brute_force(text: str) -> None:
    machine = BadBeat(NINE_TO_ACE)
    deck = [c for c in range(52) if (c >> 2) + 2 in NINE_TO_ACE]
    player = tuple(sorted(parse_cards(text)))
    assert machine.dealer_counts(player) == _brute_dealer(deck, player)


def _brute_bad_beat(ranks: tuple[int, ...]) -> Counter[Four]:
    """Every pair of a player's five and a dealer's six from the small deck."""
    deck = [c for c in range(52) if (c >> 2) + 2 in ranks]
    bits = {c: 1 << i for i, c in enumerate(deck)}
    dealer = {sum(bits[c] for c in h): four.best(h)[0] for h in combinations(deck, 6)}
    won: Counter[int] = Counter()
    for hand in combinations(deck, 5):
        mine = four.best(hand)[0]
        rest = [bits[c] for c in deck if c not in hand]
        for h in combinations(rest, 6):
            theirs = dealer[sum(h)]
            if theirs != mine and min(mine, theirs) >> 16 >= Four.TWO_PAIR:
                won[min(mine, theirs) >> 16] += 1
    return Counter({Four(c): n for c, n in won.items()})


def test_whole_count_matches_brute_force_on_a_small_deck() -> None:
    ranks = (14, 2, 3, 4)  # 16 cards; A-2-3-4 is a straight (and suited, a straight flush)
    machine = BadBeat(ranks)
    counts = machine.losing_hand_counts()
    assert {c: n for c, n in counts.items() if n} == dict(_brute_bad_beat(ranks))
    assert machine.deals() == comb(16, 5) * comb(11, 6)


def test_each_player_hand_adds_its_deals_by_the_losing_hand() -> None:
    """add_player (which sums per category in two bisections) agrees with tallying the dealer's
    distribution hand by hand, for every player hand of a 20-card deck."""
    ranks = tuple(range(10, 15))
    machine = BadBeat(ranks)
    for cards, _ in suit_patterns(5):
        if any((c >> 2) + 2 not in ranks for c in cards):
            continue
        value = player_value(cards)
        if value == LOW:
            continue
        totals = [0] * (max(Four) + 1)
        machine.add_player(totals, cards, value, 1)
        expected = [0] * (max(Four) + 1)
        for v, n in machine.dealer_counts(cards).items():
            if v != value:
                expected[min(v, value) >> 16] += n
        assert totals == expected, cards


SMALL = BadBeatCounts(
    total=1_000,
    by_losing_hand={Four.FOUR_OF_A_KIND: 1, Four.STRAIGHT_FLUSH: 2, Four.THREE_OF_A_KIND: 3,
                    Four.FLUSH: 4, Four.STRAIGHT: 5, Four.TWO_PAIR: 6},
    method="test",
)


def test_report_pays_the_losing_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(badbeat, "bad_beat_counts", lambda: SMALL)
    r = odds_report("four-card-poker", "bad-beat", find_paytable("four-card-poker-bad-beat-a"), meter_units=0)
    assert [(o.hand, o.count) for o in r.outcomes] == [
        ("four-of-a-kind", 1), ("straight-flush", 2), ("three-of-a-kind", 3), ("flush", 4), ("straight", 5),
        ("two-pair", 6), ("other", 979),
    ]
    # Paytable A, § 641a.12(f): 25,000, 10,000, 100, 25, 15 and 4 to 1, the wager returned.
    assert r.return_ == Fraction(25_001 + 2 * 10_001 + 3 * 101 + 4 * 26 + 5 * 16 + 6 * 5, 1_000)
    assert r.break_even_meter_units is None


def test_a_bad_beat_row_with_a_minimum_rank_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(badbeat, "bad_beat_counts", lambda: SMALL)
    pt = find_paytable("four-card-poker-bad-beat-a")
    row = pt.pays[-1]
    odd = type(pt)(**{**{f: getattr(pt, f) for f in ("id", "title", "source", "games", "wager", "kind")},
                      "pays": (*pt.pays[:-1], Pay(row.hand, row.award, min_rank=10))})
    with pytest.raises(RulesError) as e:
        odds_report("four-card-poker", "bad-beat", odd, meter_units=0)
    assert e.value.field == "paytable"

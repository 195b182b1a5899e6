"""Odds reports: return at a meter against hand computations, break-even meters, Envy Bonus,
Magic Card and Lucky Bonus contributions, dice games, errors, JSON and text output."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.dice import odds as dice_odds
from controller.errors import InputError, RulesError
from controller.games import GAMES, CardRule, HandKind
from controller.hands.categories import Four, Poker5, Three
from controller.money import UNITS_PER_CENT, UNITS_PER_DOLLAR
from controller.odds import LOSING, hand_counts, odds_report, render_text, to_json
from controller.paytables import find_paytable

CONFIG = Path(__file__).resolve().parents[2] / "config" / "paytables"
N5 = comb(52, 5)
TEN_THOUSAND = 10_000 * UNITS_PER_DOLLAR


def caribbean_d() -> object:
    return find_paytable("caribbean-stud-progressive-d")


# Caribbean Stud Paytable D (§ 639a.12(d)(1)) by hand, in cents on a $1 wager at a $10,000 meter:
# royal flush 100% of the meter, straight flush 10%, then 300, 50, 40, 30 and 9 for 1.
FIXED_D = 624 * 30_000 + 3_744 * 5_000 + 5_108 * 4_000 + 10_200 * 3_000 + 54_912 * 900


def test_caribbean_stud_paytable_d_return_by_hand() -> None:
    r = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=TEN_THOUSAND)
    by_hand = Fraction(4 * 1_000_000 + 36 * 100_000 + FIXED_D, N5) / 100
    assert r.return_ == by_hand == Fraction(1783, 3185)
    assert r.total == N5
    assert [o.hand for o in r.outcomes] == [
        "royal-flush", "straight-flush", "four-of-a-kind", "full-house", "flush", "straight",
        "three-of-a-kind", LOSING,
    ]
    assert [o.count for o in r.outcomes] == [4, 36, 624, 3_744, 5_108, 10_200, 54_912, N5 - 74_628]
    assert [o.received_cents for o in r.outcomes] == [1_000_000, 100_000, 30_000, 5_000, 4_000, 3_000, 900, 0]
    assert sum(o.probability for o in r.outcomes) == 1


def test_caribbean_stud_paytable_d_break_even_by_hand() -> None:
    r = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=TEN_THOUSAND)
    # Unfloored: FIXED_D + M$ * (4 * 100 + 36 * 10) cents = 100 * N5, M$ = 160,530.526...
    assert r.break_even_linear_units == Fraction(100 * N5 - FIXED_D, 760) * UNITS_PER_DOLLAR
    # Floored as paid, $160,530.53 and .54 give a straight flush of $16,053.05 and fall short;
    # at $160,530.55 the royal's extra cent makes the return exactly 1.
    assert r.break_even_meter_units == 16_053_055 * UNITS_PER_CENT
    at = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=r.break_even_meter_units)
    assert at.return_ == 1
    below = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=r.break_even_meter_units - UNITS_PER_CENT)
    assert below.return_ < 1


BREAK_EVEN_CASES = [
    ("caribbean-stud", "progressive", "caribbean-stud-progressive-a"),
    ("caribbean-stud", "progressive", "caribbean-stud-progressive-b"),
    ("caribbean-stud", "progressive", "caribbean-stud-progressive-e"),
    ("caribbean-stud", "five-card-hand-bonus", "five-card-hand-bonus"),
    ("let-it-ride", "five-card-hand-bonus", "five-card-hand-bonus"),
    ("flop-poker", "progressive-flop", "flop-poker-progressive-a"),
    ("flop-poker", "progressive-flop", "flop-poker-progressive-b"),
]


@pytest.mark.parametrize(("game", "wager", "paytable"), BREAK_EVEN_CASES)
def test_break_even_is_the_first_cent_that_returns_the_wager(game: str, wager: str, paytable: str) -> None:
    pt = replace(find_paytable(paytable), magic_card=None, lucky_bonus=None)
    r = odds_report(game, wager, pt, meter_units=TEN_THOUSAND)
    be = r.break_even_meter_units
    assert be is not None and be % UNITS_PER_CENT == 0
    assert r.break_even_linear_units is not None and be >= r.break_even_linear_units
    assert odds_report(game, wager, pt, meter_units=be).return_ >= 1
    assert odds_report(game, wager, pt, meter_units=be - UNITS_PER_CENT).return_ < 1


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 100_000), st.integers(1, 7))
def test_break_even_for_any_wager_and_table(wager_cents: int, players: int) -> None:
    pt = caribbean_d()
    r = odds_report("caribbean-stud", "progressive", pt, meter_units=0, wager_cents=wager_cents, players=players)
    be = r.break_even_meter_units
    assert be is not None
    at = odds_report("caribbean-stud", "progressive", pt, meter_units=be, wager_cents=wager_cents, players=players)
    assert at.return_ >= 1
    if be > 0:
        less = odds_report("caribbean-stud", "progressive", pt, meter_units=be - UNITS_PER_CENT,
                           wager_cents=wager_cents, players=players)
        assert less.return_ < 1


def test_no_percentage_award_no_break_even() -> None:
    r = odds_report("flop-poker", "flop", find_paytable("flop-poker-flop-wager"), meter_units=TEN_THOUSAND)
    assert r.break_even_meter_units is None and r.break_even_linear_units is None


def test_percentage_awards_are_floored_to_the_cent() -> None:
    meter = 1_234_567_891  # $1,234.567891
    r = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=meter)
    royal, straight_flush = r.outcomes[0], r.outcomes[1]
    assert royal.received_cents == 123_456  # $1,234.56
    assert straight_flush.received_cents == 12_345  # 10% = $123.4567891 -> $123.45


def test_envy_bonus_is_linear_in_the_other_players() -> None:
    pt = caribbean_d()
    alone = odds_report("caribbean-stud", "progressive", pt, meter_units=TEN_THOUSAND)
    full = odds_report("caribbean-stud", "progressive", pt, meter_units=TEN_THOUSAND, players=7)
    # § 639a.12(d)(6), $1 wager: $1,000 per other royal flush, $300 per other straight flush.
    envy_cents = 6 * Fraction(4 * 100_000 + 36 * 30_000, N5)
    assert full.return_ - alone.return_ == envy_cents / 100
    assert [(b.kind, b.hand, b.count, b.occurrences, b.received_cents) for b in full.bonuses] == [
        ("envy", "royal-flush", 4, 6, 100_000),
        ("envy", "straight-flush", 36, 6, 30_000),
    ]
    # Envy lowers the break-even meter: it is paid whatever the meter.
    assert full.break_even_meter_units < alone.break_even_meter_units  # type: ignore[operator]


def test_envy_bonus_by_wager_size() -> None:
    pt = caribbean_d()
    five = odds_report("caribbean-stud", "progressive", pt, meter_units=TEN_THOUSAND, wager_cents=500, players=2)
    assert [b.received_cents for b in five.bonuses] == [500_000, 150_000]
    two = odds_report("caribbean-stud", "progressive", pt, meter_units=TEN_THOUSAND, wager_cents=200, players=2)
    assert two.bonuses == ()
    assert any("$2.00" in n for n in two.notes)


def test_four_card_envy_counts_other_players_best_four() -> None:
    pt = find_paytable(CONFIG / "four-card-poker-four-card-progressive-example.toml")
    r = odds_report("four-card-poker", "four-card-progressive", pt, meter_units=TEN_THOUSAND, players=3)
    counts = hand_counts(HandKind.FOUR, CardRule.PLAYER_BEST_FOUR)
    (envy,) = r.bonuses
    assert (envy.hand, envy.count, envy.total, envy.occurrences) == ("four-of-a-kind", 624, N5, 2)
    assert counts.count(Four.FOUR_OF_A_KIND) == 624
    # Four aces (min_rank A) are 48 hands of the 624 quads; the other quads are the second row.
    assert [o.count for o in r.outcomes[:4]] == [48, 576, 2_072, 58_656]


def test_three_card_envy_is_a_mini_royal_of_three_cards() -> None:
    pt = find_paytable(CONFIG / "let-it-ride-three-card-progressive-example.toml")
    r = odds_report("let-it-ride", "three-card-progressive", pt, meter_units=TEN_THOUSAND, players=7)
    assert r.total == 22_100
    (envy,) = r.bonuses
    assert (envy.hand, envy.count, envy.total, envy.occurrences, envy.received_cents) == ("mini-royal", 4, 22_100, 6, 10_000)
    straight = next(o for o in r.outcomes if o.hand == "straight")
    ace_low = GAMES["let-it-ride"].wagers["three-card-progressive"].three_card_ace_low
    counts = hand_counts(HandKind.THREE, CardRule.PLAYER_FIRST_THREE, three_card_ace_low=ace_low)
    assert straight.count == counts.count(Three.STRAIGHT) == (720 if ace_low else 660)  # A-2-3 or not


WINNING_FIVE_CARD_HANDS = 4 + 36 + 624 + 3_744 + 5_108  # flush or better, § 639a.12(e)(1)


@pytest.mark.parametrize(("game", "positions"), [("caribbean-stud", 8), ("four-card-poker", 8), ("let-it-ride", 7)])
def test_magic_card_and_lucky_bonus(game: str, positions: int) -> None:
    pt = find_paytable("five-card-hand-bonus")
    bare = replace(pt, magic_card=None, lucky_bonus=None)
    with_bonus = odds_report(game, "five-card-hand-bonus", pt, meter_units=TEN_THOUSAND)
    without = odds_report(game, "five-card-hand-bonus", bare, meter_units=TEN_THOUSAND)
    # "Additional" payouts to a winning hand: Magic Card 20 for 1 when one of 52 cards matches one
    # of the hand's five; Lucky Bonus 5 for 1 on one of the positions (the seats, and the
    # dealer's where a wager may be on the dealer's hand).
    win = Fraction(WINNING_FIVE_CARD_HANDS, 2_598_960)
    assert with_bonus.return_ - without.return_ == win * (20 * Fraction(5, 52) + 5 * Fraction(1, positions))
    assert [(b.kind, b.count, b.total) for b in with_bonus.bonuses] == [
        ("magic-card", WINNING_FIVE_CARD_HANDS * 5, 2_598_960 * 52),
        ("lucky-bonus", WINNING_FIVE_CARD_HANDS, 2_598_960 * positions),
    ]
    assert with_bonus.lucky_positions == positions
    other = odds_report(game, "five-card-hand-bonus", pt, meter_units=TEN_THOUSAND, lucky_positions=3)
    assert other.return_ - without.return_ == win * (20 * Fraction(5, 52) + 5 * Fraction(1, 3))


def test_five_card_hand_bonus_with_its_bonuses_returns_less_than_the_wager_at_the_floor() -> None:
    r = odds_report("caribbean-stud", "five-card-hand-bonus", find_paytable("five-card-hand-bonus"),
                    meter_units=TEN_THOUSAND)
    assert r.return_ < 1
    assert r.break_even_meter_units is not None and r.break_even_meter_units > TEN_THOUSAND


def test_lucky_positions_without_a_lucky_bonus_is_an_error() -> None:
    with pytest.raises(InputError) as e:
        odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=TEN_THOUSAND, lucky_positions=8)
    assert e.value.field == "lucky_positions"


def test_five_card_hand_bonus_by_hand() -> None:
    pt = find_paytable("five-card-hand-bonus")
    bare = replace(pt, magic_card=None, lucky_bonus=None)
    r = odds_report("crazy-4-poker", "five-card-hand-bonus", bare, meter_units=TEN_THOUSAND, wager_cents=500)
    # 100% and 10% of $10,000, then 500, 100 and 50 for 1 on $5.
    cents = 4 * 1_000_000 + 36 * 100_000 + 624 * 250_000 + 3_744 * 50_000 + 5_108 * 25_000
    assert r.return_ == Fraction(cents, N5) / 500


@pytest.mark.slow
def test_flop_wager_pays_jacks_or_better() -> None:
    pt = find_paytable("flop-poker-flop-wager")
    r = odds_report("flop-poker", "flop", pt, meter_units=TEN_THOUSAND)
    counts = hand_counts(HandKind.POKER5, CardRule.PLAYER_AND_TWO_OF_COMMUNITY)
    assert r.total == 407_170_400
    pair = next(o for o in r.outcomes if o.hand == "pair")
    assert pair.min_rank == 11 and pair.count == counts.count(Poker5.PAIR, min_rank=11)
    assert pair.received_cents == 200  # 1 to 1: the win and the wager back
    lose = r.outcomes[-1]
    assert lose.count == counts.count(Poker5.HIGH_CARD) + counts.count(Poker5.PAIR) - pair.count
    # "N to 1" returns the wager too (design conventions).
    odds = {"royal-flush": 1000, "straight-flush": 500, "four-of-a-kind": 100, "full-house": 30, "flush": 20,
            "straight": 10, "three-of-a-kind": 4, "two-pair": 2}
    by_hand = sum(counts.count(Poker5.from_label(h)) * (n + 1) for h, n in odds.items()) + pair.count * 2  # type: ignore[operator]
    assert r.return_ == Fraction(by_hand, r.total)
    progressive = odds_report("flop-poker", "progressive-flop", find_paytable("flop-poker-progressive-a"), meter_units=TEN_THOUSAND)
    assert [o.count for o in progressive.outcomes[:2]] == [1_880, 16_776]


def test_three_card_bonus() -> None:
    r = odds_report("flop-poker", "three-card-bonus", find_paytable("flop-poker-three-card-bonus"), meter_units=0)
    assert r.total == 22_100
    assert {o.hand: o.count for o in r.outcomes}["pair"] == 3_744


def test_hot_roller_matches_the_dice_module() -> None:
    for pid in ("hot-roller-a", "hot-roller-b"):
        pt = find_paytable(pid)
        r = odds_report("hot-roller-craps", "hot-roller", pt, meter_units=0)
        assert r.return_ == dice_odds.hot_roller_return(pt)
        assert r.total is None and all(o.count is None for o in r.outcomes)
        assert sum(o.probability for o in r.outcomes) == 1
        assert r.break_even_meter_units is None


@pytest.mark.parametrize("bet", ["field", "six-eight-shake", "two-the-hardway", "hop-the-top"])
def test_props_and_hops_matches_the_dice_module(bet: str) -> None:
    pt = find_paytable("props-and-hops")
    r = odds_report("props-and-hops", "props-and-hops", pt, meter_units=0, bet=bet)
    assert r.return_ == dice_odds.props_and_hops_return(bet, pt)
    assert sum(o.probability for o in r.outcomes) == 1


def test_props_and_hops_needs_a_bet() -> None:
    with pytest.raises(InputError) as e:
        odds_report("props-and-hops", "props-and-hops", find_paytable("props-and-hops"), meter_units=0)
    assert e.value.field == "bet"
    with pytest.raises(RulesError) as e2:
        odds_report("props-and-hops", "props-and-hops", find_paytable("props-and-hops"), meter_units=0, bet="any-seven")
    assert e2.value.field == "bet"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"players": 0}, "players"),
        ({"players": 8}, "players"),
        ({"wager_cents": 0}, "wager_cents"),
        ({"meter_units": -1}, "meter_units"),
        ({"meter_units": 1.5}, "meter_units"),
        ({"bet": "field"}, "bet"),
    ],
)
def test_bad_arguments_name_their_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"meter_units": TEN_THOUSAND, **kwargs}
    with pytest.raises(InputError) as e:
        odds_report("caribbean-stud", "progressive", caribbean_d(), **args)  # type: ignore[arg-type]
    assert e.value.field == field


def test_a_paytable_for_another_kind_or_wager_is_refused() -> None:
    with pytest.raises(RulesError) as e:
        odds_report("caribbean-stud", "progressive", find_paytable("flop-poker-three-card-bonus"), meter_units=0)
    assert e.value.field == "paytable"
    with pytest.raises(RulesError):
        odds_report("caribbean-stud", "caribbean-stud-bonus", caribbean_d(), meter_units=0)
    with pytest.raises(InputError) as e2:
        odds_report("no-such-game", "progressive", caribbean_d(), meter_units=0)
    assert e2.value.field == "game"


def test_json_is_exact_and_plain() -> None:
    r = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=TEN_THOUSAND, players=7)
    doc = json.loads(json.dumps(to_json(r)))
    assert doc["outcomes"][0] == {
        "hand": "royal-flush", "min_rank": None, "count": 4, "probability": "4/2598960",
        "award": "100% of meter", "received": "10000.00",
    }
    assert doc["outcomes"][-1]["hand"] == LOSING and doc["outcomes"][-1]["award"] is None
    assert Fraction(doc["return"]) == r.return_
    assert doc["meter"] == "10000.00" and doc["amount"] == "1.00"
    assert sum(Fraction(o["probability"]) for o in doc["outcomes"]) == 1
    assert doc["bonuses"][0]["probability"] == "4/2598960" and doc["bonuses"][0]["occurrences"] == 6
    # With six others' Envy Bonus (6 * (4 * $1,000 + 36 * $300) per N5) the unfloored root is
    # (100 * N5 - FIXED_D - 8,880,000) / 760 = $148,846.315...; floored awards need two cents more.
    assert r.break_even_linear_units == Fraction(100 * N5 - FIXED_D - 8_880_000, 760) * UNITS_PER_DOLLAR
    assert doc["break_even_meter"] == "148846.33"
    assert doc["break_even_linear"] == "148846.31579"  # 113,123,200 / 760 = 148,846.3157894..., up to the unit
    assert abs(Fraction(doc["return_percent"]) - r.return_ * 100) <= Fraction(1, 2 * 10**6)


def test_text_report_for_people() -> None:
    r = odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=TEN_THOUSAND)
    text = render_text(r)
    assert "royal-flush" in text and "649,740.00" in text  # one in 2,598,960 / 4
    assert "Return: 55.9812%" in text  # 1783/3185
    assert "Break-even meter: $160,530.55" in text
    assert "meter $10,000.00;" in text
    odd = render_text(odds_report("caribbean-stud", "progressive", caribbean_d(), meter_units=1_234_567_891))
    assert "meter $1234.567891;" in odd

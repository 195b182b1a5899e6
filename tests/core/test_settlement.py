"""Settlement of card-game wagers, test by test from the regulations' text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import parse_cards
from controller.errors import CardError, InputError, RulesError
from controller.hands import poker5
from controller.hands.categories import Poker5
from controller.money import UNITS_PER_CENT
from controller.paytables import find_paytable
from controller.round.form import settle_json

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "paytables"


def settle(doc: dict) -> dict:
    return settle_json(doc, lambda ref: find_paytable(ref, [EXAMPLES]))


def cs_round(seats, meter="20000.00", reset="10000.00", paytable="caribbean-stud-progressive-d", **extra):
    doc = {
        "game": "caribbean-stud",
        "wager": "progressive",
        "paytable": paytable,
        "meter": {"amount": meter, "reset": reset},
        "seats": seats,
        "dealer": {"cards": ["2C", "3C", "4D", "9H", "QC"]},
    }
    doc.update(extra)
    return doc


ROYAL_S = ["AS", "KS", "QS", "JS", "TS"]
ROYAL_H = ["AH", "KH", "QH", "JH", "TH"]
SF_D = ["9D", "8D", "7D", "6D", "5D"]
SF_C = ["9C", "8C", "7C", "6C", "5C"]
QUADS = ["7S", "7H", "7D", "7C", "2S"]
FULL = ["KH", "KD", "KC", "3S", "3H"]
FLUSH_H = ["2H", "5H", "8H", "JH", "QH"]
NOTHING = ["2D", "4S", "6H", "9S", "JC"]


def seat(n, cards, wager="1.00", folded=False):
    return {"seat": n, "wager": wager, "folded": folded, "cards": cards}


def by_seat(out, kind="paytable"):
    return [(a["seat"], a["hand"], a["amount"]) for a in out["awards"] if a["kind"] == kind]


# --- order and the meter at each player's turn --------------------------------------------------


def test_settlement_order_is_counterclockwise_from_dealers_right_639a_11_c():
    """§ 639a.11(c): from the player farthest to the dealer's right, counterclockwise: seats N..1."""
    out = settle(cs_round([seat(1, FULL), seat(5, QUADS), seat(3, FLUSH_H)]))
    assert [a["seat"] for a in out["awards"]] == [5, 3, 1]
    assert by_seat(out) == [(5, "four-of-a-kind", "300.00"), (3, "flush", "40.00"), (1, "full-house", "50.00")]
    assert all(a["paid_by"] == "table" for a in out["awards"])


def test_two_royal_flushes_in_one_round_639a_12_d_5():
    """§ 639a.12(d)(5): each is paid from the meter as it stands at that player's turn."""
    out = settle(cs_round([seat(2, ROYAL_H), seat(6, ROYAL_S)], meter="50000.00"))
    assert by_seat(out) == [(6, "royal-flush", "50000.00"), (2, "royal-flush", "10000.00")]
    first, second = [a for a in out["awards"] if a["kind"] == "paytable"]
    assert (first["meter_before"], first["meter_after"]) == ("50000.00", "10000.00")
    assert (second["meter_before"], second["meter_after"]) == ("10000.00", "10000.00")
    assert out["meter"] == {"before": "50000.00", "after": "10000.00", "seeded": "20000.00"}
    assert first["paid_by"] == second["paid_by"] == "attendant"
    assert first["requires_validation"] and second["requires_validation"]
    # Each also receives an Envy Bonus for the other's royal flush (Paytable D).
    assert by_seat(out, "envy") == [(6, "royal-flush", "1000.00"), (2, "royal-flush", "1000.00")]


def test_percentage_award_taken_at_the_players_turn_667a_12_d_4():
    """A straight flush (10%) settled first reduces what a later royal flush receives."""
    out = settle(cs_round([seat(3, ROYAL_S), seat(5, SF_D)], meter="20000.00"))
    assert by_seat(out) == [(5, "straight-flush", "2000.00"), (3, "royal-flush", "18000.00")]
    assert out["meter"]["after"] == "10000.00"


def test_percentage_award_floored_to_the_cent_remainder_stays():
    """Design conventions: floored to the cent; the sub-cent remainder stays on the meter."""
    out = settle(cs_round([seat(1, SF_D)], meter="12345.678901"))
    assert by_seat(out) == [(1, "straight-flush", "1234.56")]
    assert out["meter"]["after"] == "11111.118901"
    assert out["meter"]["seeded"] == "0.00"


def test_only_the_highest_hand_is_paid_639a_12_d_2():
    out = settle(cs_round([seat(1, ROYAL_S)], paytable="caribbean-stud-progressive-a"))
    assert len(out["awards"]) == 1 and out["awards"][0]["hand"] == "royal-flush"


def test_na_row_pays_nothing_paytable_e_has_no_straight():
    """§ 639a.12(d)(1) Paytable E: straight and three-of-a-kind are N/A."""
    out = settle(cs_round([seat(1, ["5S", "6H", "7D", "8C", "9S"])], paytable="caribbean-stud-progressive-e"))
    assert out["awards"] == []


# --- folds ------------------------------------------------------------------------------------


def test_caribbean_fold_forfeits_progressive_but_keeps_envy_639a_11_b():
    out = settle(cs_round([seat(4, ROYAL_S, folded=True), seat(2, SF_D)]))
    assert out["forfeited"] == [4]
    assert by_seat(out) == [(2, "straight-flush", "2000.00")]
    # The folded player still receives an Envy Bonus for seat 2's straight flush.
    assert by_seat(out, "envy") == [(4, "straight-flush", "300.00")]


def test_caribbean_folded_hand_holds_no_hand_for_envy_639a_11_c():
    """A folded hand is collected before the dealer's cards are revealed (§ 639a.11(c))."""
    out = settle(cs_round([seat(4, ROYAL_S, folded=True), seat(2, NOTHING)]))
    assert by_seat(out, "envy") == []


def test_caribbean_fold_keeps_five_card_hand_bonus_639a_11_b():
    doc = cs_round([seat(3, FLUSH_H, wager="5.00", folded=True)], paytable="five-card-hand-bonus")
    doc["wager"] = "five-card-hand-bonus"
    out = settle(doc)
    assert out["forfeited"] == []
    assert by_seat(out) == [(3, "flush", "250.00")]  # 50 for 1


def test_four_card_poker_fold_forfeits_progressive_keeps_envy_641a_11_b_2():
    doc = {
        "game": "four-card-poker",
        "wager": "five-card-progressive",
        "paytable": "four-card-poker-five-card-progressive-example",
        "meter": {"amount": "15000.00", "reset": "10000.00"},
        "seats": [seat(1, ROYAL_S, folded=True), seat(2, SF_D)],
    }
    out = settle(doc)
    assert out["forfeited"] == [1]
    envy = by_seat(out, "envy")
    assert [(s, h) for s, h, _ in envy] == [(1, "straight-flush")]


def test_flop_poker_fold_keeps_progressive_flop_and_three_card_bonus_667a_11_b():
    base = {
        "game": "flop-poker",
        "meter": {"amount": "10000.00", "reset": "10000.00"},
        "community": ["AD", "KD", "2C"],
        "seats": [seat(1, ["QD", "JD", "TD"], folded=True)],
    }
    prog = settle(dict(base, wager="progressive-flop", paytable="flop-poker-progressive-a"))
    assert by_seat(prog) == [(1, "royal-flush", "10000.00")]
    tcb = settle(dict(base, wager="three-card-bonus", paytable="flop-poker-three-card-bonus"))
    assert by_seat(tcb) == [(1, "straight-flush", "51.00")]  # 50 to 1, wager returned
    with pytest.raises(RulesError) as e:  # § 667a.1 "Fold": not making a Flop Wager
        settle(dict(base, wager="flop", paytable="flop-poker-flop-wager"))
    assert e.value.field == "seats[0].folded"


def test_three_card_bonus_ace_two_three_is_not_a_straight_667a_6_a():
    """§ 667a.6(a): the ace is low only in a straight with 2, 3, 4 and 5, with no other sequence."""
    base = {"game": "flop-poker", "wager": "three-card-bonus", "paytable": "flop-poker-three-card-bonus",
            "community": ["9D", "KD", "7C"]}
    assert settle(dict(base, seats=[seat(1, ["AS", "2D", "3H"], wager="5.00")]))["awards"] == []
    suited = settle(dict(base, seats=[seat(1, ["AC", "2C", "3C"], wager="5.00")]))
    assert by_seat(suited) == [(1, "flush", "20.00")]  # a flush at 3 to 1, not a straight flush
    high = settle(dict(base, seats=[seat(1, ["AC", "KS", "QH"], wager="5.00")]))
    assert by_seat(high) == [(1, "straight", "35.00")]  # A-K-Q is the highest straight, 6 to 1


def test_flop_poker_uses_exactly_two_community_cards_667a_11_d_2():
    """Four hearts among the player's three and a flush needing all three community cards: no flush."""
    doc = {
        "game": "flop-poker",
        "wager": "progressive-flop",
        "paytable": "flop-poker-progressive-a",
        "meter": {"amount": "10000.00", "reset": "10000.00"},
        "community": ["4H", "6H", "8S"],
        "seats": [seat(1, ["2H", "9H", "KC"])],
    }
    assert settle(doc)["awards"] == []
    doc["seats"] = [seat(1, ["2H", "9H", "KH"])]
    assert by_seat(settle(doc)) == [(1, "flush", "20.00")]  # Paytable A: 20 for 1


def test_flop_wager_pays_pair_of_jacks_or_better_667a_12_b():
    doc = {
        "game": "flop-poker",
        "wager": "flop",
        "paytable": "flop-poker-flop-wager",
        "community": ["JD", "5C", "8S"],
        "seats": [seat(2, ["JS", "2H", "3C"], wager="10.00"), seat(1, ["TS", "TH", "3D"], wager="10.00")],
    }
    out = settle(doc)
    assert by_seat(out) == [(2, "pair", "20.00")]  # 1 to 1, wager returned; a pair of tens loses


def test_let_it_ride_has_no_fold_for_side_wagers_643a_7_j():
    doc = {
        "game": "let-it-ride",
        "wager": "five-card-hand-bonus",
        "paytable": "five-card-hand-bonus",
        "meter": {"amount": "10000.00", "reset": "10000.00"},
        "community": ["2C", "3C"],
        "seats": [seat(1, ["4C", "5C", "6C"], folded=True)],
    }
    with pytest.raises(RulesError) as e:
        settle(doc)
    assert e.value.field == "seats[0].folded"


# --- Envy Bonus -------------------------------------------------------------------------------


def test_envy_several_qualifying_hands_never_own_or_dealer_639a_11_c_5_v():
    doc = cs_round(
        [seat(1, NOTHING), seat(2, SF_D), seat(4, ROYAL_S), seat(5, FULL, wager="5.00")],
        meter="20000.00",
    )
    doc["dealer"] = {"cards": SF_C}  # the dealer's straight flush earns no Envy Bonus
    out = settle(doc)
    envy = by_seat(out, "envy")
    assert envy == [
        (5, "royal-flush", "5000.00"),
        (5, "straight-flush", "1500.00"),
        (4, "straight-flush", "300.00"),
        (2, "royal-flush", "1000.00"),
        (1, "royal-flush", "1000.00"),
        (1, "straight-flush", "300.00"),
    ]
    # Seat by seat from the dealer's right; within a seat the paytable award, then its Envy Bonuses.
    assert [(a["seat"], a["kind"]) for a in out["awards"]] == [
        (5, "paytable"), (5, "envy"), (5, "envy"),
        (4, "paytable"), (4, "envy"),
        (2, "paytable"), (2, "envy"),
        (1, "envy"), (1, "envy"),
    ]


def test_envy_holder_need_not_have_wagered():
    out = settle(cs_round([seat(1, NOTHING), {"seat": 3, "cards": SF_D}]))
    assert by_seat(out, "envy") == [(1, "straight-flush", "300.00")]
    assert by_seat(out) == []


def test_envy_table_lacking_the_wager_size_is_an_error_639a_12_d_6():
    with pytest.raises(RulesError) as e:
        settle(cs_round([seat(1, NOTHING, wager="2.00"), seat(2, SF_D)]))
    assert e.value.field == "seats[0].wager"
    assert "$2.00" in str(e.value) and "$1.00" in str(e.value) and "$5.00" in str(e.value)


# --- Five Card Hand Bonus --------------------------------------------------------------------


def fchb(seats, dealer_cards, dealer_wagers=(), meter="20000.00", game="caribbean-stud", **extra):
    doc = {
        "game": game,
        "wager": "five-card-hand-bonus",
        "paytable": "five-card-hand-bonus",
        "meter": {"amount": meter, "reset": "10000.00"},
        "seats": seats,
        "dealer": {"cards": dealer_cards, "wagers": [{"seat": s, "wager": w} for s, w in dealer_wagers]},
    }
    doc.update(extra)
    return doc


def test_dealer_hand_royal_shared_by_three_players_639a_12_e_2():
    doc = fchb(
        [seat(1, NOTHING, wager="0"), seat(3, FLUSH_H, wager="0"), seat(6, FULL, wager="0"), seat(7, QUADS, wager="0")],
        ROYAL_S,
        dealer_wagers=[(1, "1.00"), (6, "1.00"), (7, "5.00")],
    )
    out = settle(doc)
    shares = [(a["seat"], a["hand_of"], a["amount"], a.get("shared_by")) for a in out["awards"]]
    # $20,000.00 / 3 = $6,666.66 each; the indivisible 2 cents stay on the meter.
    assert shares == [(7, "dealer", "6666.66", 3), (6, "dealer", "6666.66", 3), (1, "dealer", "6666.66", 3)]
    assert out["meter"] == {"before": "20000.00", "after": "10000.00", "seeded": "9999.98"}


def test_player_and_dealer_hand_both_paid_639a_12_e_2():
    out = settle(fchb([seat(2, QUADS, wager="1.00")], FLUSH_H, dealer_wagers=[(2, "1.00")]))
    assert [(a["hand_of"], a["hand"], a["amount"]) for a in out["awards"]] == [
        ("player", "four-of-a-kind", "500.00"),
        ("dealer", "flush", "50.00"),
    ]
    assert out["awards"][0]["requires_validation"]  # 500 for 1, § 639a.11(c)(6)(ii)
    assert not out["awards"][1]["requires_validation"]


def test_dealer_first_five_cards_four_card_poker_641a_11_c_7():
    dealer = ["2H", "5H", "8H", "JH", "KH", "AH"]  # the sixth card is not part of the bonus hand
    out = settle(fchb([seat(1, NOTHING, wager="0")], dealer, dealer_wagers=[(1, "1.00")], game="four-card-poker"))
    assert [(a["hand"], sorted(a["cards"])) for a in out["awards"]] == [("flush", sorted(dealer[:5]))]


def test_magic_card_and_lucky_bonus_are_additional_to_a_winning_hand_639a_12_e_3():
    out = settle(fchb([seat(4, FULL, wager="5.00")], NOTHING, magic_card="KH", lucky_seat=4))
    assert [(a["kind"], a["amount"]) for a in out["awards"]] == [
        ("paytable", "500.00"), ("magic-card", "100.00"), ("lucky-bonus", "25.00"),
    ]


def test_magic_card_and_lucky_bonus_pay_nothing_without_a_winning_hand():
    """An "additional payout" (§ 639a.1) adds to a win; alone it would return 192% of every wager."""
    out = settle(fchb([seat(4, NOTHING, wager="5.00")], FLUSH_H, magic_card="6H", lucky_seat=4))
    assert out["awards"] == []


def test_lucky_bonus_on_dealer_position_pays_dealer_wagers():
    out = settle(fchb([seat(4, NOTHING, wager="5.00")], ["3C", "5C", "7C", "TC", "KC"],
                      dealer_wagers=[(4, "2.00")], lucky_seat="dealer"))
    assert [(a["kind"], a["hand_of"], a["amount"]) for a in out["awards"]] == [
        ("paytable", "dealer", "100.00"), ("lucky-bonus", "dealer", "10.00"),
    ]


def test_let_it_ride_magic_card_matches_a_community_card_643a_1():
    doc = {
        "game": "let-it-ride",
        "wager": "five-card-hand-bonus",
        "paytable": "five-card-hand-bonus",
        "meter": {"amount": "10000.00", "reset": "10000.00"},
        "community": ["9C", "KC"],
        "seats": [seat(1, ["2C", "4C", "6C"])],
        "magic_card": "KC",
    }
    assert [(a["kind"], a["amount"]) for a in settle(doc)["awards"]] == [("paytable", "50.00"), ("magic-card", "20.00")]


# --- Bad Beat ---------------------------------------------------------------------------------


def bad_beat(player, dealer, paytable="four-card-poker-bad-beat-a", folded=False):
    return settle({
        "game": "four-card-poker",
        "wager": "bad-beat",
        "paytable": paytable,
        "seats": [seat(1, player, wager="1.00", folded=folded)],
        "dealer": {"cards": dealer},
    })


def test_bad_beat_player_two_pair_loses_641a_11_c_6_i():
    out = bad_beat(["KS", "KH", "QS", "QH", "2C"], ["9S", "9H", "9D", "3C", "4C", "5S"])
    assert [(a["hand_of"], a["hand"], a["amount"]) for a in out["awards"]] == [("player", "two-pair", "5.00")]


def test_bad_beat_dealer_two_pair_loses_641a_11_c_6_ii():
    out = bad_beat(["9S", "9H", "9D", "3C", "4C"], ["KS", "KH", "QS", "QH", "2C", "7D"])
    assert [(a["hand_of"], a["hand"], a["amount"]) for a in out["awards"]] == [("dealer", "two-pair", "5.00")]


def test_bad_beat_needs_two_pair_in_the_losing_hand():
    assert bad_beat(["KS", "KH", "3D", "4S", "7C"], ["9S", "9H", "9D", "3C", "4C", "5S"])["awards"] == []


def test_bad_beat_cannot_be_placed_on_the_dealers_hand_641a_7_d_6():
    doc = {
        "game": "four-card-poker", "wager": "bad-beat", "paytable": "four-card-poker-bad-beat-a",
        "seats": [seat(1, ["2S", "3D", "5H", "8C", "JD"], wager="0")],
        "dealer": {"cards": ["AS", "AH", "AD", "AC", "KD", "2D"], "wagers": [{"seat": 1, "wager": "5.00"}]},
    }
    with pytest.raises(RulesError) as e:
        settle(doc)
    assert e.value.field == "dealer.wagers"


def test_bad_beat_four_of_a_kind_outranks_straight_flush_641a_6_b():
    out = bad_beat(["9S", "TS", "JS", "QS", "2C"], ["7S", "7H", "7D", "7C", "3C", "5D"], paytable="four-card-poker-bad-beat-b")
    assert [(a["hand_of"], a["hand"], a["amount"]) for a in out["awards"]] == [("player", "straight-flush", "5001.00")]


# --- bad input --------------------------------------------------------------------------------


def test_duplicate_card_across_hands_names_both_places():
    with pytest.raises(CardError) as e:
        settle(cs_round([seat(1, ROYAL_S), seat(2, ["AS", "2H", "3H", "4H", "6D"])]))
    assert e.value.field == "seats[1].cards[0]" and "seats[0].cards[0]" in str(e.value)


def test_wrong_card_count_is_named():
    with pytest.raises(InputError) as e:
        settle(cs_round([seat(1, ROYAL_S[:4])]))
    assert e.value.field == "seats[0].cards"


def test_unknown_card_is_named():
    with pytest.raises(CardError) as e:
        settle(cs_round([seat(1, ["AS", "KS", "QS", "JS", "1S"])]))
    assert e.value.field == "seats[0].cards[4]"


def test_seat_beyond_the_game_is_refused_667a_2_a():
    doc = {"game": "flop-poker", "wager": "flop", "paytable": "flop-poker-flop-wager",
           "community": ["2C", "3C", "4C"], "seats": [seat(7, ["AS", "KS", "QS"])]}
    with pytest.raises(RulesError) as e:
        settle(doc)
    assert e.value.field == "seats[0].seat" and "1..6" in str(e.value)


def test_reset_below_ten_thousand_is_refused_639a_12_d_4():
    with pytest.raises(RulesError) as e:
        settle(cs_round([seat(1, NOTHING)], meter="12000.00", reset="9999.99"))
    assert e.value.field == "meter.reset"


def test_meter_below_reset_is_refused():
    with pytest.raises(RulesError) as e:
        settle(cs_round([seat(1, NOTHING)], meter="9000.00"))
    assert e.value.field == "meter.amount"


def test_paytable_for_another_wager_is_refused():
    with pytest.raises(RulesError) as e:
        settle(cs_round([seat(1, NOTHING)], paytable="flop-poker-progressive-a"))
    assert e.value.field == "paytable"


def test_unknown_key_is_named():
    with pytest.raises(InputError) as e:
        settle(cs_round([dict(seat(1, NOTHING), colour="red")]))
    assert e.value.field == "seats[0].colour"


# --- property: money is conserved -------------------------------------------------------------

DECK = [r + s for r in "23456789TJQKA" for s in "SHDC"]


@st.composite
def caribbean_rounds(draw):
    n = draw(st.integers(1, 7))
    seats_no = draw(st.lists(st.integers(1, 7), min_size=n, max_size=n, unique=True))
    # Bias towards big hands so that meter awards happen often.
    deck = draw(st.permutations(DECK))
    hands = []
    pos = 0
    for _ in seats_no:
        if draw(st.booleans()) and draw(st.booleans()):
            suit = draw(st.sampled_from("SHDC"))
            top = draw(st.integers(5, 14))
            ranks = "23456789TJQKA"
            wanted = [ranks[(top - 2 - k) % 13] + suit for k in range(5)] if top > 5 else [
                "A" + suit, "2" + suit, "3" + suit, "4" + suit, "5" + suit]
            if all(c in deck[pos:] for c in wanted):
                rest = [c for c in deck[pos:] if c not in wanted]
                deck = deck[:pos] + wanted + rest
        hands.append(deck[pos:pos + 5])
        pos += 5
    dealer = deck[pos:pos + 5]
    wagers = [draw(st.sampled_from(["0", "1.00", "5.00"])) for _ in seats_no]
    folded = [draw(st.booleans()) for _ in seats_no]
    meter_cents = draw(st.integers(10_000_00, 500_000_00))
    sub = draw(st.integers(0, UNITS_PER_CENT - 1))
    return cs_round(
        [seat(s, h, wager=w, folded=f) for s, h, w, f in zip(seats_no, hands, wagers, folded, strict=True)],
        meter=f"{meter_cents // 100}.{meter_cents % 100:02d}{sub:04d}",
    ) | {"dealer": {"cards": dealer}}


def _units(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000 + int(frac.ljust(6, "0"))


# An independent reference for Caribbean Stud, written straight from the printed tables
# (§ 639a.12(d)(1) Paytable D, § 639a.12(d)(6), § 639a.12(e)(1)-(2)) and the design conventions,
# sharing nothing with the settlement code but the hand evaluator.
PAYTABLE_D = {
    Poker5.ROYAL_FLUSH: ("%", 100), Poker5.STRAIGHT_FLUSH: ("%", 10), Poker5.FOUR_OF_A_KIND: ("x", 300),
    Poker5.FULL_HOUSE: ("x", 50), Poker5.FLUSH: ("x", 40), Poker5.STRAIGHT: ("x", 30),
    Poker5.THREE_OF_A_KIND: ("x", 9),
}
ENVY_D = {100: {Poker5.ROYAL_FLUSH: 100_000, Poker5.STRAIGHT_FLUSH: 30_000},
          500: {Poker5.ROYAL_FLUSH: 500_000, Poker5.STRAIGHT_FLUSH: 150_000}}
FIVE_CARD_HAND_BONUS = {
    Poker5.ROYAL_FLUSH: ("%", 100), Poker5.STRAIGHT_FLUSH: ("%", 10), Poker5.FOUR_OF_A_KIND: ("x", 500),
    Poker5.FULL_HOUSE: ("x", 100), Poker5.FLUSH: ("x", 50),
}
RESET = 10_000_000_000  # $10,000 in meter units


def _cat(cards):
    return poker5.category(poker5.evaluate(parse_cards(cards)))


def _cents(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int(frac.ljust(2, "0")[:2])


def reference_progressive(doc):
    meter = _units(doc["meter"]["amount"])
    paid = []
    seats = sorted(doc["seats"], key=lambda s: -s["seat"])
    for s in seats:
        wager = _cents(s.get("wager", "0"))
        if not wager:
            continue
        if not s["folded"]:
            row = PAYTABLE_D.get(_cat(s["cards"]))
            if row and row[0] == "%":
                cents = meter * row[1] // 100 // 10_000
                meter = max(meter - cents * 10_000, RESET)
                paid.append((s["seat"], "paytable", cents))
            elif row:
                paid.append((s["seat"], "paytable", wager * row[1]))
        for other in seats:
            if other is not s and not other["folded"] and _cat(other["cards"]) in ENVY_D[wager]:
                paid.append((s["seat"], "envy", ENVY_D[wager][_cat(other["cards"])]))
    return paid, meter


def reference_five_card_hand_bonus(doc):
    meter = _units(doc["meter"]["amount"])
    on_dealer = {d["seat"]: _cents(d["wager"]) for d in doc["dealer"]["wagers"]}
    dealer_row = FIVE_CARD_HAND_BONUS.get(_cat(doc["dealer"]["cards"]))
    share = None
    paid = []
    for s in sorted(doc["seats"], key=lambda s: -s["seat"]):
        wager = _cents(s.get("wager", "0"))
        row = FIVE_CARD_HAND_BONUS.get(_cat(s["cards"])) if wager else None
        if row and row[0] == "%":
            cents = meter * row[1] // 100 // 10_000
            meter = max(meter - cents * 10_000, RESET)
            paid.append((s["seat"], "player", cents))
        elif row:
            paid.append((s["seat"], "player", wager * row[1]))
        if s["seat"] in on_dealer and dealer_row:
            if dealer_row[0] == "%":
                if share is None:  # locked at the first sharer's turn, split equally to the cent
                    total = meter * dealer_row[1] // 100 // 10_000
                    share = total // len(on_dealer)
                    meter = max(meter - share * len(on_dealer) * 10_000, RESET)
                paid.append((s["seat"], "dealer", share))
            else:
                paid.append((s["seat"], "dealer", on_dealer[s["seat"]] * dealer_row[1]))
    return paid, meter


def _check_conservation(out):
    before, after, seeded = (_units(out["meter"][k]) for k in ("before", "after", "seeded"))
    paid = sum(_units(a["amount"]) for a in out["awards"] if a["paid_by"] == "attendant")
    assert before + seeded - paid == after
    assert after >= RESET


@settings(max_examples=200, deadline=None)
@given(caribbean_rounds())
def test_progressive_settlement_matches_the_reference(doc):
    out = settle(doc)
    expected, meter_after = reference_progressive(doc)
    assert [(a["seat"], a["kind"], _cents(a["amount"])) for a in out["awards"]] == expected
    assert _units(out["meter"]["after"]) == meter_after
    _check_conservation(out)


@st.composite
def five_card_hand_bonus_rounds(draw):
    doc = draw(caribbean_rounds())
    doc["wager"], doc["paytable"] = "five-card-hand-bonus", "five-card-hand-bonus"
    for s in doc["seats"]:
        s["folded"] = draw(st.booleans())  # § 639a.11(b): the fold keeps this wager
    dealer_wagers = [
        {"seat": s["seat"], "wager": draw(st.sampled_from(["1.00", "5.00"]))}
        for s in doc["seats"] if draw(st.booleans())
    ]
    dealer = doc["dealer"]["cards"]
    if draw(st.integers(0, 3)) == 0:  # often a royal or straight flush for the dealer, to split
        used = {c for s in doc["seats"] for c in s["cards"]}
        for suit in "SHDC":
            for top in (14, 13):
                ranks = "23456789TJQKA"
                want = [ranks[top - 2 - k] + suit for k in range(5)]
                if not used & set(want):
                    dealer = want
    doc["dealer"] = {"cards": dealer, "wagers": dealer_wagers}
    return doc


@settings(max_examples=200, deadline=None)
@given(five_card_hand_bonus_rounds())
def test_five_card_hand_bonus_settlement_matches_the_reference(doc):
    out = settle(doc)
    expected, meter_after = reference_five_card_hand_bonus(doc)
    got = [(a["seat"], a["hand_of"], _cents(a["amount"])) for a in out["awards"] if a["kind"] == "paytable"]
    assert got == expected
    assert _units(out["meter"]["after"]) == meter_after
    _check_conservation(out)


def test_envy_only_seats_receive_envy_for_the_settled_hand():
    """A claim settles one hand: the other progressive wagerers receive their Envy Bonuses for it
    (§ 639a.11(c)(5)(v)) without their own hands being known."""
    from controller.cards import parse_cards
    from controller.games import GAMES
    from controller.paytables import find_paytable
    from controller.round.settlement import Round, Seat, settle

    g = GAMES["caribbean-stud"]
    rnd = Round(game=g, wager=g.wagers["progressive"], paytable=find_paytable("caribbean-stud-progressive-d"),
                meter=10_000 * 100 * 10_000, reset=10_000 * 100 * 10_000,
                seats=(Seat(6, 100, False, tuple(parse_cards("AS KS QS JS TS"))), Seat(2, 100, envy_only=True),
                       Seat(4, 500, envy_only=True)))
    pays = settle(rnd).payouts
    assert [(p.seat, p.kind, p.amount) for p in pays] == [
        (6, "paytable", 1_000_000), (4, "envy", 500_000), (2, "envy", 100_000)]

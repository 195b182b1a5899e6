"""Jackpot claims as pure verification (controller/round/claims.py): the Magic Card and the Lucky Bonus come with
the hand they are paid on, the dealer's hand is one claim that pays every seat that wagered on it, and claims
follow the settlement order of the rules. The daemon on the rig is tested in tests/shell/test_table_daemon.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller.app.setup import table_rules
from controller.cards import parse_card
from controller.config import load_config
from controller.errors import CardError, InputError, RulesError
from controller.money import UNITS_PER_CENT
from controller.positions import DEALER
from controller.round.claims import Claim, Draws, RoundClaims, claim_spot, hit_hand, verify, verify_dealer

ROOT = Path(__file__).resolve().parents[2]
CARIBBEAN = load_config(ROOT / "config" / "tables" / "caribbean-stud.toml")
RULES = table_rules(CARIBBEAN)
BONUS, ON_DEALER = "five-card-hand-bonus", "five-card-hand-bonus-dealer"
RESET = 1_000_000  # cents: $10,000
METER = 1_000_060  # $10,000.60
NO_DRAWS = Draws()  # nothing drawn at the lock-out


def card(text: str) -> int:
    return parse_card(text)


def _kw(wager_id: str = BONUS, meter_cents: int = METER, cfg=CARIBBEAN) -> dict:
    w = cfg.wagers[wager_id]
    return dict(game=cfg.game, wager=w.wager, paytable=w.paytable, meter_units=meter_cents * UNITS_PER_CENT,
                reset_units=RESET * UNITS_PER_CENT, meter=w.meter)


def seat_claim(rc: RoundClaims, seat: int, cards: str, *, spot: str = BONUS, wager: int | None = 100,
               draws: Draws = NO_DRAWS, others: dict[int, int] | None = None) -> Claim:
    wager_id = RULES.spots[spot].wager
    return verify(rc, seat=seat, spot=spot, wager_cents=wager, cards=cards, draws=draws, others=others,
                  **_kw(wager_id))


def dealer_claim(rc: RoundClaims, cards: object, wagers: dict[int, int], *, draws: Draws = NO_DRAWS,
                 meter_cents: int = METER) -> Claim:
    return verify_dealer(rc, spot=ON_DEALER, wagers=wagers, cards=cards, draws=draws, **_kw(BONUS, meter_cents))


def paid(rc: RoundClaims, claim: Claim) -> RoundClaims:
    return rc.with_claim(replace(claim, status="paid"))


R1 = RoundClaims("CS-07-r1")


# --- the draws, as the booking recorded them ---------------------------------------------------------


def test_draws_from_the_booking():
    d = Draws.from_booking({"meter": "bonus", "magic_card": "7H", "lucky_seat": 0})
    assert d == Draws(card("7H"), 0) and d.to_json() == {"magic_card": "7H", "lucky_seat": "dealer"}
    assert Draws.from_booking({"meter": "main"}) == Draws()
    assert Draws(None, 3).to_json() == {"magic_card": None, "lucky_seat": 3}
    with pytest.raises(InputError, match=r"^r1:book:bonus\.lucky_seat: must be a position number"):
        Draws.from_booking({"lucky_seat": -1}, "r1:book:bonus")
    with pytest.raises(CardError, match=r"^booking\.magic_card"):
        Draws.from_booking({"magic_card": "1X"})


# --- which spot a claim is for -------------------------------------------------------------------------


def test_claim_spot():
    both = {(4, "progressive"): 100, (4, BONUS): 100, (3, BONUS): 100, (5, ON_DEALER): 100}
    assert claim_spot(RULES, both, DEALER, None) == ON_DEALER
    assert claim_spot(RULES, both, DEALER, ON_DEALER) == ON_DEALER
    assert claim_spot(RULES, both, 4, None) == "progressive"  # the table's first wager, as before
    assert claim_spot(RULES, both, 3, None) == BONUS  # the seat's only wager on its own hand
    assert claim_spot(RULES, both, 6, None) == "progressive"  # no wager: the claim says so (verify)
    assert claim_spot(RULES, both, 4, BONUS) == BONUS
    with pytest.raises(InputError, match=r"^spot: .* is the wager on the dealer's hand: claim it with seat \"dealer\""):
        claim_spot(RULES, both, 5, ON_DEALER)
    with pytest.raises(InputError, match=r"^spot: 'progressive' is not a spot of a wager on the dealer's hand"):
        claim_spot(RULES, both, DEALER, "progressive")
    with pytest.raises(InputError, match=r"^spot: 'ante' is not a progressive wager spot"):
        claim_spot(RULES, both, 4, "ante")
    with pytest.raises(InputError, match=r"^seat: write \"dealer\" for the dealer's hand"):
        claim_spot(RULES, both, 0, None)
    with pytest.raises(InputError, match=r"^seat: must be a seat number or \"dealer\""):
        claim_spot(RULES, both, "Dealer", None)
    let_it_ride = table_rules(load_config(ROOT / "config" / "tables" / "let-it-ride.toml"))
    with pytest.raises(RulesError, match=r"^seat: no wager at table .* can be placed on the dealer's hand"):
        claim_spot(let_it_ride, {}, DEALER, None)


# --- Magic Card and Lucky Bonus on a seat's own hand ---------------------------------------------------------


def test_magic_card_is_paid_with_the_winning_hand_that_holds_it():
    c = seat_claim(R1, 4, "2H 5H 9H JH KH", draws=Draws(card("9H"), 1))
    assert [(p.kind, p.award, p.amount) for p in c.payouts] == [("paytable", "50 for 1", 5_000),
                                                               ("magic-card", "20 for 1", 2_000)]
    assert [hit_hand(p) for p in c.payouts] == ["flush", "magic card 9H"]
    assert c.amount_cents == 7_000 and not c.needs_approval and c.winners == (4,)
    assert c.describe() == ("claim CS-07-r1-c1: seat 4 2H 5H 9H JH KH: flush 50 for 1 = $50.00, "
                            "Magic Card 9H 20 for 1 = $20.00")
    # not in the hand: nothing more; in a losing hand: nothing at all (an additional payout, docs/rules.md)
    assert [p.kind for p in seat_claim(R1, 4, "2H 5H 9H JH KH", draws=Draws(card("9D"), 1)).payouts] == ["paytable"]
    with pytest.raises(RulesError, match=r"^cards: 9H 9S 2D 5C KH is not a winning hand"):
        seat_claim(R1, 4, "9H 9S 2D 5C KH", draws=Draws(card("9H"), 4))


def test_lucky_bonus_is_paid_to_the_drawn_seat_with_its_winning_hand():
    c = seat_claim(R1, 3, "QH QD QC 7C 7D", draws=Draws(card("AS"), 3))
    assert [(p.kind, hit_hand(p), p.award, p.amount) for p in c.payouts] == [
        ("paytable", "full-house", "100 for 1", 10_000), ("lucky-bonus", "lucky bonus", "5 for 1", 500)]
    assert "Lucky Bonus 5 for 1 = $5.00" in c.describe()
    for other in (5, 0):  # another seat, or the dealer's position: no Lucky Bonus on this hand
        assert [p.kind for p in seat_claim(R1, 3, "QH QD QC 7C 7D", draws=Draws(None, other)).payouts] == ["paytable"]
    with pytest.raises(RulesError, match="not a winning hand"):
        seat_claim(R1, 3, "2S 7H 9D JC QS", draws=Draws(None, 3))


def test_the_progressive_wager_pays_no_magic_card():
    c = seat_claim(R1, 4, "2H 5H 9H JH KH", spot="progressive", draws=Draws(card("9H"), 4))
    assert [(p.kind, p.award) for p in c.payouts] == [("paytable", "40 for 1")] and c.needs_approval


def test_magic_card_on_top_of_a_percentage_award_and_the_envy_bonuses():
    c = seat_claim(R1, 6, "AS KS QS JS TS", spot="progressive", others={2: 100, 6: 100, 7: 500},
                   draws=Draws(card("AS"), 6))
    assert [(p.seat, p.kind) for p in c.payouts] == [(6, "paytable"), (7, "envy"), (2, "envy")]  # settlement order
    c = seat_claim(R1, 6, "AS KS QS JS TS", draws=Draws(card("AS"), 6))
    assert [(p.kind, p.amount, p.requires_validation) for p in c.payouts] == [
        ("paytable", 1_000_060, True), ("magic-card", 2_000, False), ("lucky-bonus", 500, False)]
    assert c.needs_approval and c.amount_cents == 1_002_560


# --- the dealer's hand ----------------------------------------------------------------------------------------


def test_dealer_hand_pays_every_seat_that_wagered_on_it_in_settlement_order():
    c = dealer_claim(R1, "9D 8D 7D 6D 5D", {2: 100, 5: 100}, draws=Draws(card("8D"), 0))
    assert c.on_dealer and c.seat == 0 and c.turn == 5 and c.winners == (5, 2) and c.needs_approval
    assert [(p.seat, p.kind, p.amount, p.shared_by) for p in c.payouts] == [
        (5, "paytable", 50_003, 2), (5, "magic-card", 2_000, 1), (5, "lucky-bonus", 500, 1),
        (2, "paytable", 50_003, 2), (2, "magic-card", 2_000, 1), (2, "lucky-bonus", 500, 1)]
    assert [hit_hand(p) for p in c.payouts[:3]] == [
        "straight-flush (dealer's hand)", "magic card 8D (dealer's hand)", "lucky bonus (dealer's position)"]
    assert c.amount_cents == 105_006  # what every player who wagered on it receives
    assert c.describe().startswith("claim CS-07-r1-c1: the dealer's hand 9D 8D 7D 6D 5D: seat 5 straight-flush "
                                   "10% of meter (1 of 2 shares) = $500.03, seat 5 Magic Card 8D 20 for 1 = $20.00")


def test_dealer_hand_at_fixed_odds_is_paid_by_the_table():
    c = dealer_claim(R1, ["3H", "4H", "6H", "8H", "TH"], {6: 100, 1: 100}, draws=Draws(card("2C"), 4))
    assert [(p.seat, p.kind, p.award, p.amount, p.paid_by) for p in c.payouts] == [
        (6, "paytable", "50 for 1", 5_000, "table"), (1, "paytable", "50 for 1", 5_000, "table")]
    assert not c.needs_approval
    one = dealer_claim(R1, "AH KH QH JH TH", {3: 100})  # one player: the whole 100%
    assert [(p.amount, p.shared_by) for p in one.payouts] == [(1_000_060, 1)]


def test_dealer_hand_refusals_name_the_field():
    with pytest.raises(RulesError, match=r"^seat: no seat has an accepted Five Card Hand Bonus Wager on the dealer's"):
        dealer_claim(R1, "9D 8D 7D 6D 5D", {})
    with pytest.raises(RulesError, match=r"^cards: 2S 7H 9D JC QS is not a winning hand .* on the dealer's hand"):
        dealer_claim(R1, "2S 7H 9D JC QS", {2: 100})
    with pytest.raises(CardError, match=r"^cards: has 4 cards; the rules require 5"):
        dealer_claim(R1, "9D 8D 7D 6D", {2: 100})
    with pytest.raises(CardError, match=r"^cards\[4\]: duplicate card 9D \(already at cards\[0\]\)"):
        dealer_claim(R1, "9D 8D 7D 6D 9D", {2: 100})
    with pytest.raises(CardError, match=r"^cards\[2\]: "):
        dealer_claim(R1, ["9D", "8D", "1Z", "6D", "5D"], {2: 100})
    with pytest.raises(CardError, match=r"^cards: must be a list of cards"):
        dealer_claim(R1, 5, {2: 100})
    rc = paid(R1, seat_claim(R1, 6, "2S 2H 2D 9C KS", spot="progressive"))
    with pytest.raises(CardError, match=r"^cards\[0\]: duplicate card KS \(already at seat 6, claim CS-07-r1-c1\)"):
        dealer_claim(rc, "KS QS JS TS 9S", {6: 100, 1: 100})
    let_it_ride = load_config(ROOT / "config" / "tables" / "let-it-ride.toml")
    w = let_it_ride.wagers[BONUS]
    with pytest.raises(RulesError, match=r"^seat: the Five Card Hand Bonus Wager of Let It Ride Poker cannot be"):
        verify_dealer(R1, game=let_it_ride.game, wager=w.wager, paytable=w.paytable, meter_units=METER * UNITS_PER_CENT,
                      reset_units=RESET * UNITS_PER_CENT, spot=ON_DEALER, meter="bonus", wagers={1: 100},
                      cards="9D 8D 7D 6D 5D")


# --- the order of the claims of a round ------------------------------------------------------------------------


def test_dealer_hand_is_settled_at_the_turn_of_the_first_seat_that_wagered_on_it():
    # after seat 3's own hand, the dealer's hand (wagered on by seats 5 and 2: settled at seat 5's turn) is late
    rc = paid(R1, seat_claim(R1, 3, "2H 5H 9H JH KH"))
    with pytest.raises(RulesError, match=r"^seat: the dealer's hand is settled at seat 5's turn .* before seat 3"):
        dealer_claim(rc, "9D 8D 7D 6D 5D", {2: 100, 5: 100})
    # after seat 5's own hand it comes in time
    rc = paid(R1, seat_claim(R1, 5, "2H 5H 9H JH KH"))
    c = dealer_claim(rc, "9D 8D 7D 6D 5D", {2: 100, 5: 100})
    rc = paid(rc, c)
    # then seat 5's own wager is late (its own hand comes first in its turn); seat 3 is not; the dealer's hand is done
    with pytest.raises(RulesError, match=r"^seat: seat 5 is settled before the dealer's hand \(settled at seat 5's"):
        seat_claim(rc, 5, "2H 5H 9H JH KH", spot="progressive")
    assert seat_claim(rc, 3, "2C 5C TC JC KC").seat == 3
    with pytest.raises(RulesError, match=r"^seat: the dealer's hand was settled in round CS-07-r1 already \(CS-07"):
        dealer_claim(rc, "9D 8D 7D 6D 5D", {2: 100, 5: 100})


def test_a_rejected_dealer_hand_claim_settles_nothing():
    c = dealer_claim(R1, "9D 8D 7D 6D 5D", {6: 100, 1: 100})
    rc = R1.with_claim(c)
    with pytest.raises(RulesError, match=r"^claim: CS-07-r1-c1 awaits a supervisor's approval"):
        seat_claim(rc, 1, "2H 5H 9H JH KH")
    rc = rc.with_claim(replace(c, status="rejected", by="floor-1", reason="exposed"))
    assert rc.lit == frozenset() and rc.pending is None
    again = dealer_claim(rc, "3H 4H 6H 8H TH", {6: 100, 1: 100})  # other cards: the rejected ones are no hand
    assert again.id == "CS-07-r1-c2" and rc.with_claim(again).lit == {6, 1}
    assert seat_claim(rc, 6, "AS KS QS JS TS", spot="progressive").seat == 6  # its own hand is not late


def test_a_seat_claims_each_of_its_wagers_once_with_its_one_hand():
    rc = paid(R1, seat_claim(R1, 4, "2H 5H 9H JH KH", draws=Draws(card("9H"), 2)))
    with pytest.raises(InputError, match=r"^cards: seat 4 holds 2H 5H 9H JH KH \(claim CS-07-r1-c1\)"):
        seat_claim(rc, 4, "2H 5H 9H JH QH", spot="progressive")
    c = seat_claim(rc, 4, "KH JH 9H 5H 2H", spot="progressive")  # the same hand, in any order
    rc = paid(rc, c)
    assert rc.lit == {4}
    with pytest.raises(RulesError, match=r"^seat: seat 4 was settled in round CS-07-r1 already \(CS-07-r1-c1\)"):
        seat_claim(rc, 4, "2H 5H 9H JH KH")
    with pytest.raises(RulesError, match=r"^seat: seat 5 is settled before seat 4"):
        seat_claim(rc, 5, "2C 5C TC JC KC")
    with pytest.raises(CardError, match=r"^cards\[1\]: duplicate card 5H \(already at seat 4, claim CS-07-r1-c1\)"):
        seat_claim(rc, 3, "2C 5H TC JC KC")
    with pytest.raises(RulesError, match=r"^seat: seat 2 has no accepted Five Card Hand Bonus Wager"):
        seat_claim(rc, 2, "2C 5C TC JC KC", wager=None)

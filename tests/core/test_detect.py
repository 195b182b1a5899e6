"""Hits detected from a card-reading shoe, as a pure function (controller/round/detect.py): the cards go to the hands
in the order of the game's dealing procedure, nothing is detected before the deal is complete, a deal the shoe
got wrong is refused naming the card, and the hits come in settlement order as the claims the dealer would make.
The daemon on the rig is tested in tests/shell/test_table_daemon.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller.app.setup import table_rules
from controller.cards import parse_card, parse_cards
from controller.config import load_config
from controller.errors import CardError, InputError, RulesError
from controller.games import GAMES
from controller.money import UNITS_PER_CENT
from controller.positions import DEALER, DEALER_POSITION
from controller.round.claims import RoundClaims, verify, verify_dealer
from controller.round.detect import BURN, COMMUNITY, SpotWager, assign, detect, procedure

ROOT = Path(__file__).resolve().parents[2]
BONUS, ON_DEALER = "five-card-hand-bonus", "five-card-hand-bonus-dealer"


def _table(name: str):
    cfg = load_config(ROOT / "config" / "tables" / f"{name}.toml")
    spots = [SpotWager(s, cfg.wagers[r.wager].wager, cfg.wagers[r.wager].paytable, r.on_dealer)
             for s, r in table_rules(cfg).spots.items()]
    return cfg, spots


CARIBBEAN, CS_SPOTS = _table("caribbean-stud")
FLOP, FLOP_SPOTS = _table("flop-poker")
CS = CARIBBEAN.game


def rotation(*hands: str) -> list[str]:
    """The cards of `hands` (each five cards, as "AS KS QS JS TS", in seat order, the dealer's last) in the order
    the shoe reads them at Caribbean Stud: one card at a time to each seat, seat 1 first, the dealer last."""
    split = [h.split() for h in hands]
    return [h[i] for i in range(5) for h in split]


def cards(text: str) -> tuple[int, ...]:
    return parse_cards(text)


# --- the deal order ------------------------------------------------------------------------------------------


def test_caribbean_stud_deals_one_card_at_a_time_seat_1_first_and_the_dealer_last():
    deal = assign(CS, [5, 2], list(range(15)))  # seat 2 sits before seat 5 (seat 1 is at the dealer's far left)
    assert deal.seats == (2, 5) and deal.complete and deal.length == 15
    assert deal.hands == {2: (0, 3, 6, 9, 12), 5: (1, 4, 7, 10, 13)}
    assert deal.dealer == (2, 5, 8, 11, 14) and deal.community == () and deal.burned == ()
    assert deal.places[:3] == (2, 5, DEALER)
    assert "§ 639a.8" in procedure(CS).source


def test_let_it_ride_deals_the_community_cards_between_the_rounds_to_the_players():
    # § 643a.8(d): a card to each player, one to the community area, a second to each, a second to the area,
    # a third to each player
    deal = assign(GAMES["let-it-ride"], [1, 4], list(range(8)))
    assert deal.hands == {1: (0, 3, 6), 4: (1, 4, 7)} and deal.community == (2, 5) and deal.dealer == ()
    assert deal.places == (1, 4, COMMUNITY, 1, 4, COMMUNITY, 1, 4)


def test_flop_poker_deals_three_to_each_player_then_burns_a_card_and_deals_the_flop():
    # § 667a.8(d), § 667a.11(c)
    deal = assign(FLOP.game, [3, 6], list(range(10)))
    assert deal.hands == {3: (0, 2, 4), 6: (1, 3, 5)} and deal.burned == (6,) and deal.community == (7, 8, 9)
    assert deal.places[6:] == (BURN, COMMUNITY, COMMUNITY, COMMUNITY)


def test_a_game_whose_dealing_procedure_we_do_not_hold_is_refused_naming_the_game():
    with pytest.raises(RulesError, match=r"^game: the dealing procedure of Four Card Poker \(§ 641a.8\) is not in"):
        assign(GAMES["four-card-poker"], [1], [0])


def test_cards_are_read_as_the_shoe_reports_them_or_written():
    assert assign(CS, [1], ["AS", "10h", 0]).cards == (parse_card("AS"), parse_card("TH"), 0)


# --- nothing before the deal is complete -------------------------------------------------------------------------


def test_an_incomplete_deal_detects_nothing():
    shoe = rotation("AS KS QS JS TS", "2D 3C 5H 8S 9D")  # seat 3 holds a royal flush when the deal is complete
    accepted = {(3, "progressive"): 100}
    for n in range(len(shoe)):
        got = detect(CS, CS_SPOTS, accepted, shoe[:n])
        assert got.hits == () and not got.deal.complete
    done = detect(CS, CS_SPOTS, accepted, shoe)
    assert done.deal.complete and [h.claim() for h in done.hits] == [
        {"seat": 3, "spot": "progressive", "cards": ["AS", "KS", "QS", "JS", "TS"]}]
    assert done.hits[0].hand == "royal-flush" and done.hits[0].award == "100% of meter"


def test_a_complete_deal_without_a_winning_hand_detects_nothing():
    shoe = rotation("2S 7H 9D JC KS", "AH AD 4C 6S 8H", "3H 4H 6H 9H TD")
    got = detect(CS, CS_SPOTS, {(2, "progressive"): 100, (6, BONUS): 100}, shoe)
    assert got.deal.complete and got.hits == ()  # a pair of aces pays no Progressive Payout Wager


def test_a_winning_hand_of_a_seat_without_that_wager_is_no_hit():
    shoe = rotation("AS KS QS JS TS", "2D 3C 5H 8S 9D", "4C 6C 7D 9H JH")
    got = detect(CS, CS_SPOTS, {(1, BONUS): 100, (4, "progressive"): 100}, shoe)
    assert [(h.seat, h.spot) for h in got.hits] == [(1, BONUS)]  # the royal flush; seat 1 wagered on the bonus only


# --- a deal the shoe got wrong: refused, naming the card ------------------------------------------------------


def test_a_card_more_than_the_deal_uses_is_refused():
    shoe = rotation("AS KS QS JS TS", "2D 3C 5H 8S 9D")
    with pytest.raises(InputError, match=r"^cards\[10\]: 4C is one card more than the deal uses \(10 cards: 5 to "
                                         r"seat 3; 5 to the dealer"):
        detect(CS, CS_SPOTS, {(3, "progressive"): 100}, [*shoe, "4C"])


def test_a_seat_dealt_that_the_controller_does_not_see_makes_the_deal_too_long():
    # seats 2 and 3 play, but only seat 3 made a wager the system senses: the cards of seat 2 shift the deal
    shoe = rotation("4D 5D 6D 7D 8D", "AS KS QS JS TS", "2C 3C 5H 8S 9C")
    with pytest.raises(InputError, match=r"^cards\[10\]: .*a seat the controller does not see was dealt"):
        detect(CS, CS_SPOTS, {(3, "progressive"): 100}, shoe)
    # told the seats dealt, the same cards are the hands they are
    got = detect(CS, CS_SPOTS, {(3, "progressive"): 100}, shoe, seats=[2, 3])
    assert [(h.seat, h.hand) for h in got.hits] == [(3, "royal-flush")]


def test_a_duplicate_card_is_refused_naming_both_places():
    shoe = rotation("AS KS QS JS TS", "2D 3C 5H 8S 9D")
    shoe[7] = "KS"  # read again where the dealer's fourth card should be
    with pytest.raises(CardError, match=r"^cards\[7\]: duplicate card KS \(already at cards\[2\], dealt to seat 3\)"):
        detect(CS, CS_SPOTS, {(3, "progressive"): 100}, shoe)


@pytest.mark.parametrize("bad, match", [
    (52, r"^cards\[1\]: 52 is not a card of the round's deck"),
    (-1, r"^cards\[1\]: -1 is not a card of the round's deck"),
    (True, r"^cards\[1\]: True is not a card of the round's deck"),
    ("ZZ", r"^cards\[1\]: unknown card 'ZZ'"),
])
def test_a_card_that_is_not_one_of_the_decks_52_is_refused(bad, match):
    with pytest.raises(CardError, match=match):
        assign(CS, [1], ["AS", bad])


def test_the_seats_dealt_are_checked():
    with pytest.raises(InputError, match=r"^seats\[1\]: 8 is not a seat of Caribbean Stud Poker \(1..7\)"):
        assign(CS, [1, 8], [])
    with pytest.raises(InputError, match=r"^seats\[1\]: seat 1 appears twice"):
        assign(CS, [1, 1], [])
    with pytest.raises(InputError, match=r"^seats: no seat was dealt"):
        assign(CS, [], [])
    with pytest.raises(InputError, match=r"^seats: seat 4 has an accepted wager on progressive but is not among"):
        detect(CS, CS_SPOTS, {(4, "progressive"): 100}, [], seats=[3])
    with pytest.raises(InputError, match=r"^accepted: 'ante' is not a wager spot"):
        detect(CS, CS_SPOTS, {(4, "ante"): 100}, [])


# --- several hits: settlement order, the claims the dealer would make -----------------------------------------


def test_several_hits_come_in_settlement_order():
    hands = {1: "2S 7C 9D JC KS", 2: "9S 9H 9C 4D 5C", 4: "AC AD 3S 3C 3D", 6: "4S 5S 6S 7S 8S"}
    dealer = "2H 5H 7H JH KH"  # a flush: 50 for 1 to each seat that wagered on the dealer's hand
    shoe = rotation(*(hands[s] for s in sorted(hands)), dealer)
    accepted = {(6, "progressive"): 100, (6, BONUS): 100, (4, BONUS): 100, (4, ON_DEALER): 100,
                (2, "progressive"): 100, (1, ON_DEALER): 100}
    got = detect(CS, CS_SPOTS, accepted, shoe)
    # seat 6 (its own hand: both wagers, in the table's order), seat 4's own hand, then the dealer's hand at
    # seat 4's turn (the first seat that wagered on it), then seat 2 (§ 639a.11(c), § 639a.12(e)(2))
    assert [(h.seat, h.spot, h.hand, h.award) for h in got.hits] == [
        (6, "progressive", "straight-flush", "10% of meter"),
        (6, BONUS, "straight-flush", "10% of meter"),
        (4, BONUS, "full-house", "100 for 1"),
        (DEALER_POSITION, ON_DEALER, "flush", "50 for 1"),
        (2, "progressive", "three-of-a-kind", "9 for 1"),
    ]
    assert got.hits[3].turn == 4 and got.hits[3].cards == cards(dealer)
    assert got.hits[0].cards == cards(hands[6])


def test_the_detected_hits_are_claims_the_claims_module_accepts_in_that_order():
    """Each hit, claimed in order as the daemon claims it, passes the dealer's claim verification."""
    hands = {3: "AS KS QS JS TS", 5: "2D 2H 2C 9S 9D"}
    shoe = rotation(hands[3], hands[5], "4C 6C 7D 9H JH")
    accepted = {(3, "progressive"): 100, (5, "progressive"): 100, (5, BONUS): 100, (3, ON_DEALER): 100}
    hits = detect(CS, CS_SPOTS, accepted, shoe).hits
    assert [(h.seat, h.spot) for h in hits] == [(5, "progressive"), (5, BONUS), (3, "progressive")]
    rc = RoundClaims("CS-07-r1")
    rules = table_rules(CARIBBEAN)
    for hit in hits:
        args = hit.claim()
        w = CARIBBEAN.wagers[rules.spots[args["spot"]].wager]
        on_spot = {s: c for (s, sp), c in accepted.items() if sp == args["spot"]}
        common = dict(game=CS, wager=w.wager, paytable=w.paytable, meter_units=1_000_000 * UNITS_PER_CENT,
                      reset_units=1_000_000 * UNITS_PER_CENT, spot=args["spot"], meter=w.meter, cards=args["cards"])
        if args["seat"] == DEALER:
            claim = verify_dealer(rc, wagers=on_spot, **common)
        else:
            claim = verify(rc, seat=args["seat"], wager_cents=accepted[(args["seat"], args["spot"])],
                           others=on_spot, **common)
        rc = rc.with_claim(replace(claim, status="paid"))
    assert [(c.seat, c.spot) for c in rc.claims] == [(5, "progressive"), (5, BONUS), (3, "progressive")]


def test_flop_poker_hits_are_formed_with_the_community_cards():
    # a Progressive Flop hand is the player's three cards and exactly two community cards (§ 667a.11(d)(2)):
    # seat 2's 6H 7H 8H with 9H TH is a straight flush; seat 5's three aces pay nothing below a flush
    players = {2: "6H 7H 8H", 5: "AS AD AC"}
    shoe = [players[s].split()[i] for i in range(3) for s in (2, 5)] + ["2D", "9H", "TH", "KD"]
    got = detect(FLOP.game, FLOP_SPOTS, {(2, "progressive-flop"): 100, (5, "progressive-flop"): 100}, shoe)
    assert got.deal.burned == (parse_card("2D"),) and got.deal.community == cards("9H TH KD")
    assert [(h.seat, h.hand, h.award) for h in got.hits] == [(2, "straight-flush", "5% of meter")]
    assert got.hits[0].cards == cards("6H 7H 8H") and got.hits[0].community == cards("9H TH KD")

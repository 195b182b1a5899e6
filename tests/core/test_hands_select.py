"""Forming the hand a wager is settled on: every card rule of controller.games, the Hand value."""

from __future__ import annotations

import random
import re
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import DECK, parse_cards
from controller.errors import CardError, RulesError
from controller.games import GAMES, CardRule, HandKind
from controller.hands import four, poker5, three
from controller.hands.categories import Four, Poker5, Three
from controller.hands.select import FORMS, Hand, form_hand

R, K = CardRule, HandKind


def cards(text: str) -> tuple[int, ...]:
    return parse_cards(text)


# -- every rule ----------------------------------------------------------------------------------

def test_player_all_five_cards_639a_11():
    h = form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS"))
    assert (h.kind, h.category, h.label) == (K.POKER5, Poker5.ROYAL_FLUSH, "royal-flush")
    assert h.cards == cards("AS KS QS JS TS") and h.value == poker5.evaluate(h.cards)


def test_player_first_three_643a_7_g_and_667a_11_d_1():
    h = form_hand(R.PLAYER_FIRST_THREE, K.THREE, cards("QS KS AS"), cards("2D 3C"))
    assert h.category is Three.MINI_ROYAL and h.label == "mini-royal" and h.cards == cards("QS KS AS")
    assert h.kind is K.THREE and h.value == three.evaluate(h.cards)
    # only the first three dealt count, whatever follows
    h = form_hand(R.PLAYER_FIRST_THREE, K.THREE, cards("2S 7H 9D 9C 9S"))
    assert h.category is Three.HIGH_CARD and h.cards == cards("2S 7H 9D")


@pytest.mark.parametrize(
    "player, letter, ace_low",
    [
        ("AS 2H 3D", Three.HIGH_CARD, Three.STRAIGHT),
        ("3C AC 2C 9D 9S", Three.FLUSH, Three.STRAIGHT_FLUSH),
        ("KS AH 2D", Three.HIGH_CARD, Three.HIGH_CARD),  # K-A-2 is never a straight
        ("2S 3H 4D", Three.STRAIGHT, Three.STRAIGHT),
    ],
)
def test_player_first_three_a_2_3_is_a_straight_only_when_the_game_says_so(player, letter, ace_low):
    """§ 667a.6(a) to the letter by default; `three_card_ace_low` (the wager's rule) makes A-2-3 the
    lowest straight (controller/hands/three.py)."""
    h = form_hand(R.PLAYER_FIRST_THREE, K.THREE, cards(player))
    assert h.category is letter and h.value == three.evaluate(h.cards, ace_low=False)
    assert form_hand(R.PLAYER_FIRST_THREE, K.THREE, cards(player), three_card_ace_low=False) == h
    low = form_hand(R.PLAYER_FIRST_THREE, K.THREE, cards(player), three_card_ace_low=True)
    assert low.category is ace_low and low.value == three.evaluate(low.cards, ace_low=True)
    assert low.cards == h.cards == cards(player)[:3]


def test_player_and_community_five_in_all_643a_7_h():
    h = form_hand(R.PLAYER_AND_COMMUNITY, K.POKER5, cards("AS KS QS"), cards("JS TS"))  # Let It Ride
    assert h.category is Poker5.ROYAL_FLUSH and h.cards == cards("AS KS QS JS TS")
    h = form_hand(R.PLAYER_AND_COMMUNITY, K.POKER5, cards("9H 9D"), cards("9C 2S 2H"))  # Mississippi Stud
    assert h.category is Poker5.FULL_HOUSE


def test_player_and_flop_ignores_turn_and_river_647a_11_653a_11():
    """The 2014 amendments: the player's two cards and the first three community cards only."""
    h = form_hand(R.PLAYER_AND_FLOP, K.POKER5, cards("AS KS"), cards("QS JS 2D TS 3C"))
    assert h.category is Poker5.HIGH_CARD and h.cards == cards("AS KS QS JS 2D")
    h = form_hand(R.PLAYER_AND_FLOP, K.POKER5, cards("AS KS"), cards("QS JS TS"))
    assert h.category is Poker5.ROYAL_FLUSH


def test_player_and_two_of_community_667a_11_d_2():
    """All three of the player's cards and exactly two of the three community cards."""
    h = form_hand(R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, cards("AS KS 2D"), cards("QS JS TS"))
    assert h.category is Poker5.HIGH_CARD  # three suited community cards cannot make a royal
    assert h.cards[:3] == cards("AS KS 2D") and h.cards[3:] == cards("QS JS")
    h = form_hand(R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, cards("7H 7D 2C"), cards("7S 4D 2S"))
    assert h.category is Poker5.FULL_HOUSE and h.cards == cards("7H 7D 2C 7S 2S")  # the 1st and 3rd
    h = form_hand(R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, cards("9S TS JS"), cards("4D QS KS"))
    assert h.category is Poker5.STRAIGHT_FLUSH and h.cards[3:] == cards("QS KS")  # the 2nd and 3rd


@given(st.lists(st.sampled_from(DECK), min_size=6, max_size=6, unique=True))
def test_player_and_two_of_community_is_the_best_of_the_three_choices(six):
    player, community = six[:3], six[3:]
    h = form_hand(R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, player, community)
    assert h.value == max(poker5.evaluate(player + list(two)) for two in combinations(community, 2))
    assert h.value == poker5.evaluate(h.cards) and h.cards[:3] == tuple(player)


def test_player_best_four_641a_11_c_2():
    h = form_hand(R.PLAYER_BEST_FOUR, K.FOUR, cards("AS 2D AH 7C AD"))
    assert h.category is Four.THREE_OF_A_KIND and h.cards == cards("AS AH 7C AD")
    assert h.label == "three-of-a-kind"


@given(st.lists(st.sampled_from(DECK), min_size=5, max_size=5, unique=True))
def test_player_best_four_is_the_best_four(five):
    h = form_hand(R.PLAYER_BEST_FOUR, K.FOUR, five)
    assert h.value == max(four.evaluate(c) for c in combinations(five, 4)) == four.evaluate(h.cards)


def test_dealer_first_five_641a_11_c_7():
    """Of the Four Card Poker dealer's six cards, the first five form the five-card hand."""
    dealer = cards("2C 3C 4C 5C 9H 6C")  # the sixth would make a straight flush
    h = form_hand(R.DEALER_FIRST_FIVE, K.POKER5, (), (), dealer)
    assert h.category is Poker5.HIGH_CARD and h.cards == dealer[:5]
    assert form_hand(R.DEALER_FIRST_FIVE, K.POKER5, (), (), dealer[:5]).value == h.value


def test_dealer_and_flop_and_dealer_and_community():
    h = form_hand(R.DEALER_AND_FLOP, K.POKER5, cards("2S 3S"), cards("AH AD 2C KS KH"), cards("AS KD"))
    assert h.category is Poker5.THREE_OF_A_KIND and h.cards == cards("AS KD AH AD 2C")  # not the turn, river
    h = form_hand(R.DEALER_AND_COMMUNITY, K.POKER5, cards("2S 3S 4S"), cards("QH QD"), cards("QC QS 7D"))
    assert h.category is Poker5.FOUR_OF_A_KIND and h.cards == cards("QC QS 7D QH QD")


def test_dealer_best_four_641a_11_c():
    h = form_hand(R.DEALER_BEST_FOUR, K.FOUR, cards("2S 3S 4S 5S 6S"), (), cards("9H 8H 7H 6H 2D 2C"))
    assert h.category is Four.STRAIGHT_FLUSH and h.cards == cards("9H 8H 7H 6H")


def test_every_card_rule_forms_a_hand():
    assert set(FORMS) == set(CardRule)
    assert {FORMS[r] for r in CardRule} == {K.POKER5, K.THREE, K.FOUR}


def _deal(game, rnd):
    deck = list(DECK)
    rnd.shuffle(deck)
    player = deck[: game.player_cards]
    community = deck[10 : 10 + max(game.community_cards)]
    dealer = deck[20 : 20 + max(game.dealer_cards)]
    return player, community, dealer


@pytest.mark.parametrize("game_id", [g.id for g in GAMES.values() if not g.dice])
def test_every_wager_of_every_card_game_forms_its_hand(game_id):
    """With the cards the game deals, every wager's rule (and dealer and envy rules) forms a
    hand of the wager's kind."""
    game = GAMES[game_id]
    rnd = random.Random(game_id)
    for _ in range(20):
        player, community, dealer = _deal(game, rnd)
        for w in game.wagers.values():
            for rule in {w.rule, w.dealer_rule, w.envy_rule} - {None}:
                h = form_hand(rule, w.hand, player, community, dealer, three_card_ace_low=w.three_card_ace_low)
                assert h.kind is w.hand and len(h.cards) == {K.POKER5: 5, K.THREE: 3, K.FOUR: 4}[w.hand]
                assert set(h.cards) <= set(player) | set(community) | set(dealer)


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "rule, kind, player, community, dealer, field",
    [
        (R.PLAYER, K.POKER5, "AS KS QS JS", "", "", "player"),
        (R.PLAYER, K.POKER5, "AS KS QS JS TS 9S", "", "", "player"),
        (R.PLAYER_FIRST_THREE, K.THREE, "AS KS", "", "", "player"),
        (R.PLAYER_AND_COMMUNITY, K.POKER5, "AS KS QS", "JS", "", "community"),
        (R.PLAYER_AND_COMMUNITY, K.POKER5, "AS KS QS", "JS TS 9S", "", "community"),
        (R.PLAYER_AND_FLOP, K.POKER5, "AS KS QS", "JS TS 9S", "", "player"),
        (R.PLAYER_AND_FLOP, K.POKER5, "AS KS", "JS TS", "", "community"),
        (R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, "AS KS", "JS TS 9S", "", "player"),
        (R.PLAYER_AND_TWO_OF_COMMUNITY, K.POKER5, "AS KS QS", "JS TS 9S 8S", "", "community"),
        (R.PLAYER_BEST_FOUR, K.FOUR, "AS KS QS JS", "", "", "player"),
        (R.DEALER_FIRST_FIVE, K.POKER5, "", "", "AS KS QS JS", "dealer"),
        (R.DEALER_FIRST_FIVE, K.POKER5, "", "", "AS KS QS JS TS 9S 8S", "dealer"),
        (R.DEALER_AND_FLOP, K.POKER5, "", "JS TS 9S", "AS", "dealer"),
        (R.DEALER_AND_FLOP, K.POKER5, "", "JS", "AS KS", "community"),
        (R.DEALER_AND_COMMUNITY, K.POKER5, "", "JS", "AS KS QS", "community"),
        (R.DEALER_BEST_FOUR, K.FOUR, "", "", "AS KS QS", "dealer"),
        (R.DEALER_BEST_FOUR, K.FOUR, "", "", "AS KS QS JS TS 9S 8S 7S", "dealer"),
    ],
)
def test_wrong_card_counts_name_the_cards(rule, kind, player, community, dealer, field):
    with pytest.raises(CardError, match=re.escape(rule.value)) as err:
        form_hand(rule, kind, cards(player), cards(community), cards(dealer))
    assert err.value.field == field


def test_a_card_twice_on_the_table_names_both_places():
    with pytest.raises(CardError, match=r"duplicate card AS \(already at player\[0\]\)") as err:
        form_hand(R.PLAYER_AND_COMMUNITY, K.POKER5, cards("AS KS QS"), cards("JS AS"))
    assert err.value.field == "community[1]"
    with pytest.raises(CardError) as err:  # even among cards the rule does not use
        form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS"), (), cards("2D 3D 4D 5D") + cards("2D"))
    assert err.value.field == "dealer[4]"


@pytest.mark.parametrize("bad", [52, -1, True, 3.0, "AS", None])
def test_what_is_not_a_card_is_named(bad):
    with pytest.raises(CardError, match="not a card") as err:
        form_hand(R.PLAYER, K.POKER5, [0, 1, bad, 3, 4])
    assert err.value.field == "player[2]"


def test_the_rule_must_form_the_kind_asked_for():
    with pytest.raises(RulesError, match="forms a four hand, not a poker5 hand") as err:
        form_hand(R.PLAYER_BEST_FOUR, K.POKER5, cards("AS KS QS JS TS"))
    assert err.value.field == "kind"
    with pytest.raises(RulesError) as err:
        form_hand(R.PLAYER, K.HOT_ROLLER, cards("AS KS QS JS TS"))
    assert err.value.field == "kind"
    with pytest.raises(RulesError) as err:
        form_hand("best-two", K.POKER5, cards("AS KS QS JS TS"))
    assert err.value.field == "rule"


def test_rule_and_kind_may_be_given_by_name():
    h = form_hand("player-best-four", "four", cards("AS KS QS JS TS"))
    assert h.kind is K.FOUR and h.category is Four.STRAIGHT_FLUSH


junk = st.one_of(
    st.lists(st.one_of(st.integers(-3, 60), st.sampled_from(DECK)), max_size=8),
    st.lists(st.sampled_from(DECK), max_size=8, unique=True),
    st.none(), st.text(max_size=5), st.integers(), st.lists(st.text(max_size=2), max_size=5),
)


@given(st.sampled_from(list(CardRule)), st.sampled_from(list(HandKind)), junk, junk, junk)
def test_form_hand_raises_only_input_errors(rule, kind, player, community, dealer):
    try:
        h = form_hand(rule, kind, player, community, dealer)
    except (CardError, RulesError):
        return
    assert isinstance(h, Hand) and h.kind is FORMS[rule] is kind
    assert set(h.cards) <= set(player) | set(community or ()) | set(dealer or ())


# -- Hand --------------------------------------------------------------------------------------------

def test_hands_of_one_kind_order_by_value_and_equal_values_tie():
    royal = form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS"))
    other_royal = form_hand(R.PLAYER, K.POKER5, cards("AH KH QH JH TH"))
    pair = form_hand(R.PLAYER, K.POKER5, cards("2S 2H 5D 7C 9S"))
    assert pair < royal and royal > pair and pair <= royal and royal >= pair
    assert royal <= other_royal and royal >= other_royal
    assert not royal < other_royal and not royal > other_royal and royal != other_royal
    assert sorted([royal, pair]) == [pair, royal] and max(pair, royal) is royal
    assert str(royal) == "royal-flush (AS KS QS JS TS)"


def test_hands_of_different_kinds_do_not_compare():
    five = form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS"))
    four_card = form_hand(R.PLAYER_BEST_FOUR, K.FOUR, cards("AS KS QS JS TS"))
    with pytest.raises(TypeError):
        _ = five < four_card
    with pytest.raises(TypeError):
        _ = five >= 3


def test_hand_is_frozen():
    h = form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS"))
    with pytest.raises(AttributeError):
        h.value = 0  # type: ignore[misc]
    assert hash(h) == hash(form_hand(R.PLAYER, K.POKER5, cards("AS KS QS JS TS")))

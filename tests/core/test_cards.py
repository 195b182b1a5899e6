"""Cards: the int encoding, the notation of the design conventions, and errors that name the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import (
    ACE,
    DECK,
    TWO,
    card_str,
    cards_str,
    make,
    parse_card,
    parse_cards,
    rank,
    suit,
)
from controller.errors import CardError, InputError


def test_deck_is_52_distinct_cards_of_13_ranks_and_4_suits():
    assert len(DECK) == 52 == len({(rank(c), suit(c)) for c in DECK})
    assert {rank(c) for c in DECK} == set(range(TWO, ACE + 1))
    assert {suit(c) for c in DECK} == {0, 1, 2, 3}
    assert all(make(rank(c), suit(c)) == c for c in DECK)


def test_every_card_prints_and_parses_back():
    for c in DECK:
        assert parse_card(card_str(c)) == c
        assert parse_card(card_str(c).lower()) == c
    assert parse_cards(cards_str(DECK)) == DECK


@pytest.mark.parametrize(
    "text, expected",
    [("AS", (14, 0)), ("as", (14, 0)), ("Td", (10, 2)), ("10H", (10, 1)), ("10c", (10, 3)),
     (" 2C ", (2, 3)), ("kH", (13, 1)), ("9s", (9, 0))],
)
def test_notation_rank_then_suit_case_insensitive_10_accepted(text, expected):
    c = parse_card(text)
    assert (rank(c), suit(c)) == expected


@pytest.mark.parametrize("text", ["", "A", "SA", "1S", "11S", "AX", "ZZ", "10", "A S", "ASS", "0S", "🂡"])
def test_unknown_cards_are_errors_naming_the_field(text):
    with pytest.raises(CardError) as err:
        parse_card(text, "seats[2].cards[1]")
    assert err.value.field == "seats[2].cards[1]"
    assert str(err.value).startswith("seats[2].cards[1]: ")


@pytest.mark.parametrize("thing", [None, 14, 1.5, b"AS", ["AS"], {"AS": 1}])
def test_a_card_must_be_a_string(thing):
    with pytest.raises(CardError, match="string"):
        parse_card(thing)


def test_parse_cards_from_a_string_or_a_list():
    assert parse_cards("AS, KD  10h") == parse_cards(["AS", "KD", "TH"]) == parse_cards(("as", "kd", "th"))
    assert parse_cards("") == ()


def test_parse_cards_counts():
    assert len(parse_cards("AS KS QS", count=3)) == 3
    assert len(parse_cards("AS KS QS", count=(3, 5))) == 3
    with pytest.raises(CardError, match="has 2 cards; the rules require 3 or 5") as err:
        parse_cards("AS KS", "dealer", count=(3, 5))
    assert err.value.field == "dealer"


def test_parse_cards_names_the_bad_card_and_both_places_of_a_duplicate():
    with pytest.raises(CardError) as err:
        parse_cards(["AS", "KX"], "player")
    assert err.value.field == "player[1]"
    seen: dict[int, str] = {}
    parse_cards("AS KS", "seats[1].cards", seen=seen)
    with pytest.raises(CardError, match=r"duplicate card KS \(already at seats\[1\]\.cards\[1\]\)") as err:
        parse_cards("2D KS", "community", seen=seen)
    assert err.value.field == "community[1]"


def test_parse_cards_wants_a_list():
    with pytest.raises(CardError, match="list of cards"):
        parse_cards(42, "cards")
    with pytest.raises(CardError):
        parse_cards({"AS", "KD"})


def test_error_prefix():
    err = CardError("cards[1]", "unknown card").at("seats[3]")
    assert isinstance(err, InputError) and err.field == "seats[3].cards[1]"


card_like = st.text(alphabet="0123456789TJQKAtjqkaSHDCshdcX \t,\n", max_size=14)
anything = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.binary(max_size=6),
        st.text(max_size=6), card_like, st.sampled_from(["AS", "10h", "td", " kc "]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.frozensets(st.text(max_size=3)),
    ),
    max_leaves=12,
)


@given(anything)
def test_parse_card_never_crashes(thing):
    """Any object is a card or a CardError; nothing else escapes."""
    try:
        c = parse_card(thing, "x")
    except CardError as e:
        assert e.field == "x"
    else:
        assert c in DECK and parse_card(card_str(c)) == c


@given(anything)
def test_parse_cards_never_crashes(thing):
    try:
        cards = parse_cards(thing, "x", count=(0, 1, 2, 3, 5))
    except CardError as e:
        assert e.field == "x" or e.field.startswith("x[")
    else:
        assert len(set(cards)) == len(cards) and all(c in DECK for c in cards)


@given(st.lists(st.sampled_from(DECK), unique=True, max_size=10), st.randoms(use_true_random=False))
def test_any_spelling_of_a_card_list_parses(cards, rnd):
    def spell(c: int) -> str:
        text = card_str(c)
        if text[0] == "T" and rnd.random() < 0.5:
            text = "10" + text[1]
        return "".join(ch.lower() if rnd.random() < 0.5 else ch for ch in text)

    seps = [" ", ",", ", ", "  \t"]
    joined = "".join(spell(c) + rnd.choice(seps) for c in cards)
    assert parse_cards(joined) == tuple(cards)

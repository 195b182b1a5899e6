"""Paytables: the tables printed in 58 Pa. Code, the TOML loader and its errors, and the rules of
selecting a paytable for a wager."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.awards import Fixed, ForOne, PercentOfMeter, ToOne
from controller.errors import InputError, RulesError
from controller.games import GAMES, CardRule, FoldEffect, Game, HandKind, Wager
from controller.hands.categories import Four, Poker5, Three
from controller.paytables import (
    ANY_WAGER,
    DICE_KEYS,
    ENVY_QUALIFYING,
    HOT_ROLLER_KEYS,
    MINIMUM_PAYING,
    PROPS_AND_HOPS_KEYS,
    PROPS_AND_HOPS_OPTIONAL_KEYS,
    EnvyTable,
    Pay,
    Paytable,
    all_paytables,
    builtin_paytables,
    check_paytable_for,
    covers,
    find_paytable,
    hand_keys,
    load_paytable,
    load_paytable_text,
)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "config" / "paytables"


def pct(n: int) -> PercentOfMeter:
    return PercentOfMeter(Fraction(n))


def for1(n: int) -> ForOne:
    return ForOne(Fraction(n))


def to1(n: int, d: int = 1) -> ToOne:
    return ToOne(Fraction(n, d))


def rows(table: Paytable) -> list[tuple[str, object, int | None]]:
    return [(p.hand, p.award, p.min_rank) for p in table.pays]


BUILTIN = builtin_paytables()

# ---------------------------------------------------------------------------------------------
# The printed tables, copied by hand from the regulation text (quoted above each one).
# ---------------------------------------------------------------------------------------------

# § 639a.12(d)(1): "Hand Paytable A Paytable B Paytable C Royal flush 100% of meter 100% of meter
# 100% of meter Straight flush 5,000 for 1 10% of meter 10% of meter Four-of-a-kind 500 for 1 500
# for 1 200 for 1 Full house 100 for 1 100 for 1 50 for 1 Flush 50 for 1 50 for 1 40 for 1
# Straight 10 for 1 10 for 1 30 for 1 Three-of-a-kind 3 for 1 3 for 1 9 for 1 Two pair 2 for 1
# 2 for 1 N/A" and "Hand Paytable D Paytable E Royal flush 100% of meter 100% of meter Straight
# flush 10% of meter 10% of meter Four-of-a-kind 300 for 1 500 for 1 Full house 50 for 1 100 for
# 1 Flush 40 for 1 50 for 1 Straight 30 for 1 N/A Three-of-a-kind 9 for 1 N/A"
CARIBBEAN = {
    "a": [pct(100), for1(5000), for1(500), for1(100), for1(50), for1(10), for1(3), for1(2)],
    "b": [pct(100), pct(10), for1(500), for1(100), for1(50), for1(10), for1(3), for1(2)],
    "c": [pct(100), pct(10), for1(200), for1(50), for1(40), for1(30), for1(9), None],
    "d": [pct(100), pct(10), for1(300), for1(50), for1(40), for1(30), for1(9), None],
    "e": [pct(100), pct(10), for1(500), for1(100), for1(50), None, None, None],
}
POKER_HIGH_TO_TWO_PAIR = [
    "royal-flush", "straight-flush", "four-of-a-kind", "full-house", "flush", "straight",
    "three-of-a-kind", "two-pair",
]


@pytest.mark.parametrize("letter", sorted(CARIBBEAN))
def test_caribbean_stud_paytables_as_printed(letter: str) -> None:
    """§ 639a.12(d)(1): each column, N/A rows left out; § 639a.12(d)(3): only D may be linked."""
    t = BUILTIN[f"caribbean-stud-progressive-{letter}"]
    want = [(h, a, None) for h, a in zip(POKER_HIGH_TO_TWO_PAIR, CARIBBEAN[letter], strict=True) if a is not None]
    assert rows(t) == want
    assert (t.games, t.wager, t.kind) == (("caribbean-stud",), "progressive", HandKind.POKER5)
    assert t.linked_allowed is (letter == "d")
    assert "639a.12(d)(1)" in t.source
    assert not t.example
    assert (t.envy is not None) is (letter == "d")
    assert t.magic_card is None and t.lucky_bonus is None


def test_caribbean_stud_d_envy_bonus_as_printed() -> None:
    """§ 639a.12(d)(6): "$1 Progressive Payout Wager ... Royal flush $1,000 Straight flush $300
    $5 Progressive Payout Wager ... Royal flush $5,000 Straight flush $1,500"; § 639a.1: qualifying
    hand a straight flush or better."""
    envy = BUILTIN["caribbean-stud-progressive-d"].envy
    assert envy is not None
    assert envy.qualifying == "straight-flush"
    assert "639a.12(d)(6)" in envy.source
    assert {w: dict(r) for w, r in envy.by_wager.items()} == {
        100: {"royal-flush": Fixed(100_000), "straight-flush": Fixed(30_000)},
        500: {"royal-flush": Fixed(500_000), "straight-flush": Fixed(150_000)},
    }
    assert envy.wager_sizes == (100, 500)
    assert envy.award_for(500, "straight-flush") == Fixed(150_000)
    assert envy.award_for(500, "four-of-a-kind") is None
    assert envy.award_for(200, "royal-flush") is None


def test_five_card_hand_bonus_as_printed() -> None:
    """§ 639a.12(e)(1) = § 641a.12(g)(1): "Royal flush 100% of meter Straight flush 10% of meter
    Four-of-a-kind 500 for 1 Full house 100 for 1 Flush 50 for 1"; (e)(3)/(g)(3): "Magic Card 20
    for 1 Lucky Bonus 5 for 1"."""
    t = BUILTIN["five-card-hand-bonus"]
    assert rows(t) == [
        ("royal-flush", pct(100), None),
        ("straight-flush", pct(10), None),
        ("four-of-a-kind", for1(500), None),
        ("full-house", for1(100), None),
        ("flush", for1(50), None),
    ]
    assert t.magic_card == for1(20)
    assert t.lucky_bonus == for1(5)
    assert "639a.12(e)" in t.source and "641a.12(g)" in t.source
    assert t.wager == "five-card-hand-bonus" and t.envy is None


def test_five_card_hand_bonus_covers_every_game_that_offers_it() -> None:
    offering = {g.id for g in GAMES.values() if "five-card-hand-bonus" in g.wagers}
    assert len(offering) >= 2
    assert set(BUILTIN["five-card-hand-bonus"].games) == offering


@pytest.mark.parametrize(("letter", "quads", "straight_flush"), [("a", 25_000, 10_000), ("b", 10_000, 5_000)])
def test_bad_beat_paytables_as_printed(letter: str, quads: int, straight_flush: int) -> None:
    """§ 641a.12(f): "Four-of-a-kind 25,000 to 1 10,000 to 1 Straight flush 10,000 to 1 5,000 to 1
    Three-of-a-kind 100 to 1 100 to 1 Flush 25 to 1 25 to 1 Straight 15 to 1 15 to 1 Two pair 4 to
    1 4 to 1", Four Card Poker hands by the rank of the losing hand (§ 641a.7(d)(6))."""
    t = BUILTIN[f"four-card-poker-bad-beat-{letter}"]
    assert rows(t) == [
        ("four-of-a-kind", to1(quads), None),
        ("straight-flush", to1(straight_flush), None),
        ("three-of-a-kind", to1(100), None),
        ("flush", to1(25), None),
        ("straight", to1(15), None),
        ("two-pair", to1(4), None),
    ]
    assert (t.kind, t.games, t.wager) == (HandKind.FOUR, ("four-card-poker",), "bad-beat")
    assert t.pay_for(Four.FOUR_OF_A_KIND).award == to1(quads)  # type: ignore[union-attr]
    assert t.pay_for(Four.PAIR) is None


def test_flop_wager_as_printed() -> None:
    """§ 667a.12(b): "Royal flush 1,000 to 1 Straight flush 500 to 1 Four-of-a-kind 100 to 1 Full
    house 30 to 1 Flush 20 to 1 Straight 10 to 1 Three-of-a-kind 4 to 1 Two pair 2 to 1 A pair of
    jacks, queens, kings or aces 1 to 1"."""
    t = BUILTIN["flop-poker-flop-wager"]
    assert rows(t) == [
        ("royal-flush", to1(1000), None),
        ("straight-flush", to1(500), None),
        ("four-of-a-kind", to1(100), None),
        ("full-house", to1(30), None),
        ("flush", to1(20), None),
        ("straight", to1(10), None),
        ("three-of-a-kind", to1(4), None),
        ("two-pair", to1(2), None),
        ("pair", to1(1), 11),
    ]
    assert (t.games, t.wager, t.kind) == (("flop-poker",), "flop", HandKind.POKER5)
    assert not t.pays_percent_of_meter


def test_three_card_bonus_as_printed() -> None:
    """§ 667a.12(c): "Royal 100 to 1 Straight flush 50 to 1 Three-of-a-kind 25 to 1 Straight 6 to 1
    Flush 3 to 1 A pair 1 to 1"."""
    t = BUILTIN["flop-poker-three-card-bonus"]
    assert rows(t) == [
        ("mini-royal", to1(100), None),
        ("straight-flush", to1(50), None),
        ("three-of-a-kind", to1(25), None),
        ("straight", to1(6), None),
        ("flush", to1(3), None),
        ("pair", to1(1), None),
    ]
    assert (t.kind, t.wager) == (HandKind.THREE, "three-card-bonus")


@pytest.mark.parametrize(("letter", "full_house", "flush"), [("a", 30, 20), ("b", 50, 25)])
def test_progressive_flop_as_printed(letter: str, full_house: int, flush: int) -> None:
    """§ 667a.12(d)(1): "Royal flush 100% of meter 100% of meter Straight flush 5% of meter 5% of
    meter Four-of-a-kind 250 for 1 250 for 1 Full house 30 for 1 50 for 1 Flush 20 for 1 25 for 1"."""
    t = BUILTIN[f"flop-poker-progressive-{letter}"]
    assert rows(t) == [
        ("royal-flush", pct(100), None),
        ("straight-flush", pct(5), None),
        ("four-of-a-kind", for1(250), None),
        ("full-house", for1(full_house), None),
        ("flush", for1(flush), None),
    ]
    assert (t.wager, t.linked_allowed) == ("progressive-flop", True)
    assert t.pays_percent_of_meter


@pytest.mark.parametrize(("letter", "six"), [("a", 200), ("b", 300)])
def test_hot_roller_as_printed(letter: str, six: int) -> None:
    """§ 623c.1(h): "All six number combinations 200 to 1 300 to 1 Any five number combinations 50
    to 1 50 to 1 Any four ... 20 to 1 20 to 1 Any three ... 10 to 1 10 to 1 Any two ... 5 to 1 5 to 1"."""
    t = BUILTIN[f"hot-roller-{letter}"]
    assert rows(t) == [
        ("six-numbers", to1(six), None),
        ("five-numbers", to1(50), None),
        ("four-numbers", to1(20), None),
        ("three-numbers", to1(10), None),
        ("two-numbers", to1(5), None),
    ]
    assert (t.kind, t.games, t.wager) == (HandKind.HOT_ROLLER, ("hot-roller-craps",), "hot-roller")
    assert t.pay_for_outcome("four-numbers") == Pay("four-numbers", to1(20))
    assert t.pay_for_outcome("one-number") is None


def test_props_and_hops_as_printed() -> None:
    """§ 668a.4: "Double Wager 30 to 1 Any Number Wager 15 to 1 Field Wager: 2 or 12 is rolled 2 to
    1 3, 4, 9, 10 or 11 is rolled 1 to 1 Hop the Top 3 to 2 Hop the Left 2 to 1 Hop the Right 2 to 1
    Hop the Center 3 to 2 1-6 and Under 1 to 1 3-4 and Over 1 to 1 Six-Eight Shake 150 to 1"."""
    t = BUILTIN["props-and-hops"]
    assert rows(t) == [
        ("double", to1(30), None),
        ("any-number", to1(15), None),
        ("field-2-or-12", to1(2), None),
        ("field", to1(1), None),
        ("hop-the-top", to1(3, 2), None),
        ("hop-the-left", to1(2), None),
        ("hop-the-right", to1(2), None),
        ("hop-the-center", to1(3, 2), None),
        ("one-six-and-under", to1(1), None),
        ("three-four-and-over", to1(1), None),
        ("six-eight-shake", to1(150), None),
    ]
    assert (t.kind, t.wager) == (HandKind.PROPS_AND_HOPS, ANY_WAGER)
    assert t.hands == PROPS_AND_HOPS_KEYS
    # 3 to 2 on $5 pays $7.50 and returns the $5.
    assert t.pay_for_outcome("hop-the-top").award.received_cents(500) == 1250  # type: ignore[union-attr]


def test_every_builtin_is_checked_above_and_cites_its_section() -> None:
    assert sorted(BUILTIN) == sorted(
        [f"caribbean-stud-progressive-{x}" for x in "abcde"]
        + ["five-card-hand-bonus", "four-card-poker-bad-beat-a", "four-card-poker-bad-beat-b"]
        + ["flop-poker-flop-wager", "flop-poker-three-card-bonus", "flop-poker-progressive-a"]
        + ["flop-poker-progressive-b", "hot-roller-a", "hot-roller-b", "props-and-hops"]
    )
    for t in BUILTIN.values():
        assert t.source.startswith("58 Pa. Code §"), t.id
        assert not t.example


def test_every_builtin_passes_its_own_selection_rules() -> None:
    checked = 0
    for t in BUILTIN.values():
        for g in t.games:
            for w_id, w in GAMES[g].wagers.items():
                if covers(t, g, w_id):
                    check_paytable_for(
                        t, g, w_id, linked=t.linked_allowed and w.progressive, wager_sizes=[100, 500]
                    )
                    checked += 1
    assert checked >= len(BUILTIN) + 7  # the Five Card Hand Bonus table is checked once per game


def _changed(award):  # type: ignore[no-untyped-def]
    """Another award: one more of the same form, so no printed table of the wager pays it."""
    if isinstance(award, PercentOfMeter):
        return PercentOfMeter(award.percent + 1)
    if isinstance(award, ForOne):
        return ForOne(award.n + 1)
    if isinstance(award, ToOne):
        return ToOne(award.n + 1)
    assert isinstance(award, Fixed)
    return Fixed(award.cents + 100)


def _other_form(award):  # type: ignore[no-untyped-def]
    """The same number, the other way of paying it (5 for 1 against 5 to 1), or None."""
    if isinstance(award, ForOne):
        return ToOne(award.n)
    if isinstance(award, ToOne):
        return ForOne(award.n)
    return None


def _one_award_changed(t: Paytable) -> list[tuple[str, Paytable]]:
    """Copies of `t` under another id, each with one award changed: every row, every Envy Bonus
    amount, the Magic Card and Lucky Bonus awards."""
    out = []
    for i, p in enumerate(t.pays):
        for new in (_changed(p.award), _other_form(p.award)):
            if new is not None:
                pays = (*t.pays[:i], replace(p, award=new), *t.pays[i + 1 :])
                out.append((f"{p.hand} {new.describe()}", replace(t, id=f"{t.id}-changed", pays=pays)))
    if t.envy is not None:
        for size, row in t.envy.by_wager.items():
            for hand, fixed in row.items():
                by_wager = {**t.envy.by_wager, size: {**row, hand: _changed(fixed)}}
                envy = replace(t.envy, by_wager=by_wager)
                out.append((f"envy {size} {hand}", replace(t, id=f"{t.id}-changed", envy=envy)))
    for name in ("magic_card", "lucky_bonus"):
        if getattr(t, name) is not None:
            out.append((name, replace(t, id=f"{t.id}-changed", **{name: _changed(getattr(t, name))})))
    return out


PRINTED_FOR = [(t.id, g, w) for t in BUILTIN.values() for g in t.games for w in GAMES[g].wagers if covers(t, g, w)]


def test_every_builtin_is_a_printed_table_of_some_wager() -> None:
    assert {pid for pid, _, _ in PRINTED_FOR} == set(BUILTIN)


@pytest.mark.parametrize(("pid", "game_id", "wager_id"), PRINTED_FOR)
def test_a_printed_table_with_one_award_changed_is_refused(pid: str, game_id: str, wager_id: str) -> None:
    """The printed-table rule: a copy under another id is selectable only as printed."""
    t = BUILTIN[pid]
    w = GAMES[game_id].wagers[wager_id]
    linked = t.linked_allowed and w.progressive
    same = replace(t, id=f"{pid}-copy")
    assert same != t
    check_paytable_for(same, game_id, wager_id, linked=linked, wager_sizes=[100, 500])
    variants = _one_award_changed(t)
    assert len(variants) >= len(t.pays)
    for what, changed in variants:
        # the premise: no printed table of this wager has these awards
        assert all(changed.pays != p.pays or changed.envy != p.envy or changed.magic_card != p.magic_card
                   or changed.lucky_bonus != p.lucky_bonus for p in BUILTIN.values() if covers(p, game_id, wager_id))
        with pytest.raises(RulesError) as e:
            check_paytable_for(changed, game_id, wager_id, linked=False, wager_sizes=[100, 500])
        assert e.value.field == "paytable", what
        assert f"{pid}-changed differs from the paytables the regulations print" in str(e.value), what
        assert pid in str(e.value), what  # names the printed tables to use


def test_props_and_hops_covers_every_wager_of_its_game() -> None:
    """Whatever the ids of the game's wagers, § 668a.4 is their one payout schedule."""
    t = BUILTIN["props-and-hops"]
    ids = [w for w, x in GAMES["props-and-hops"].wagers.items() if x.hand is HandKind.PROPS_AND_HOPS]
    assert ids
    assert all(covers(t, "props-and-hops", w) for w in ids)
    assert not covers(t, "hot-roller-craps", "hot-roller")


def test_props_and_hops_paytable_survives_one_wager_per_bet(monkeypatch: pytest.MonkeyPatch) -> None:
    split = Game(
        id="props-and-hops", title="Props & Hops", chapter="668a", max_seats=6, player_cards=0, dice=True,
        wagers={
            w: Wager(w, w, "§ 668a.2", HandKind.PROPS_AND_HOPS, CardRule.PLAYER, FoldEffect.NO_FOLD)
            for w in ("double", "field", "six-eight-shake")
        },
    )
    monkeypatch.setitem(GAMES, "props-and-hops", split)
    text = (Path(__file__).resolve().parents[2] / "controller" / "paytables" / "builtin" / "props-and-hops.toml")
    t = load_paytable_text(text.read_text(encoding="utf-8"), "props-and-hops.toml")
    for w in ("double", "field", "six-eight-shake"):
        assert covers(t, "props-and-hops", w)
        check_paytable_for(t, "props-and-hops", w, linked=False, wager_sizes=[500])


def test_dice_key_lists() -> None:
    assert HOT_ROLLER_KEYS == ("six-numbers", "five-numbers", "four-numbers", "three-numbers", "two-numbers")
    assert len(PROPS_AND_HOPS_KEYS) == 11 and "six-eight-shake" in PROPS_AND_HOPS_KEYS
    assert PROPS_AND_HOPS_OPTIONAL_KEYS == ("any-craps", "any-seven", "any-doubles")
    assert DICE_KEYS[HandKind.PROPS_AND_HOPS] == PROPS_AND_HOPS_KEYS + PROPS_AND_HOPS_OPTIONAL_KEYS
    assert hand_keys(HandKind.HOT_ROLLER) == HOT_ROLLER_KEYS
    assert hand_keys(HandKind.THREE)[0] == "mini-royal" and hand_keys(HandKind.THREE)[-1] == "high-card"


# ---------------------------------------------------------------------------------------------
# The model: pay_for honours "only the highest hand" and min_rank.
# ---------------------------------------------------------------------------------------------


def test_pay_for_pays_only_the_category_of_the_highest_hand() -> None:
    """§ 639a.12(d)(2): a full house is paid as a full house, never as the three-of-a-kind in it;
    an N/A hand is not paid even though a lower row exists."""
    c, e = BUILTIN["caribbean-stud-progressive-c"], BUILTIN["caribbean-stud-progressive-e"]
    assert c.pay_for(Poker5.FULL_HOUSE) == Pay("full-house", for1(50))
    assert c.pay_for(Poker5.TWO_PAIR) is None
    assert e.pay_for(Poker5.STRAIGHT) is None
    assert e.pay_for(Poker5.THREE_OF_A_KIND) is None
    assert e.pay_for(Poker5.FLUSH) == Pay("flush", for1(50))
    assert e.pay_for(Poker5.HIGH_CARD) is None


@pytest.mark.parametrize(("rank", "paid"), [(2, False), (10, False), (11, True), (12, True), (14, True)])
def test_pay_for_honours_min_rank(rank: int, paid: bool) -> None:
    """§ 667a.12(b): a pair pays only when it is jacks, queens, kings or aces."""
    t = BUILTIN["flop-poker-flop-wager"]
    got = t.pay_for(Poker5.PAIR, rank)
    assert (got is not None) is paid
    if paid:
        assert got == Pay("pair", to1(1), 11)


def test_pay_for_rows_of_one_hand_split_by_rank() -> None:
    text = _doc(
        pays=[
            {"hand": "pair", "min_rank": "J", "award": "2 for 1"},
            {"hand": "pair", "min_rank": 6, "award": "1 for 1"},
        ],
        wager="caribbean-stud-bonus",
    )
    t = load_paytable_text(text, "split.toml")
    assert t.pay_for(Poker5.PAIR, 14) == Pay("pair", for1(2), 11)
    assert t.pay_for(Poker5.PAIR, 11) == Pay("pair", for1(2), 11)
    assert t.pay_for(Poker5.PAIR, 10) == Pay("pair", for1(1), 6)
    assert t.pay_for(Poker5.PAIR, 5) is None
    assert t.lowest_paying() == Pay("pair", for1(1), 6)


def test_pay_for_needs_the_rank_where_a_row_has_a_minimum() -> None:
    with pytest.raises(ValueError, match="first_rank"):
        BUILTIN["flop-poker-flop-wager"].pay_for(Poker5.PAIR)


def test_pay_for_refuses_a_category_of_another_kind() -> None:
    with pytest.raises(TypeError):
        BUILTIN["caribbean-stud-progressive-a"].pay_for(Four.FOUR_OF_A_KIND)
    with pytest.raises(TypeError):
        BUILTIN["hot-roller-a"].pay_for(Poker5.FLUSH)
    with pytest.raises(TypeError):
        BUILTIN["caribbean-stud-progressive-a"].pay_for_outcome("double")
    with pytest.raises(TypeError):
        BUILTIN["props-and-hops"].lowest_paying()


@given(st.sampled_from(sorted(BUILTIN)), st.data())
def test_pay_for_returns_the_row_of_that_category_or_nothing(pid: str, data: st.DataObject) -> None:
    t = BUILTIN[pid]
    enum = {HandKind.POKER5: Poker5, HandKind.THREE: Three, HandKind.FOUR: Four}.get(t.kind)
    if enum is None:
        key = data.draw(st.sampled_from(DICE_KEYS[t.kind]))
        got = t.pay_for_outcome(key)
        assert (got is not None) is (key in t.hands)
        return
    cat = data.draw(st.sampled_from(list(enum)))
    rank = data.draw(st.integers(2, 14))
    got = t.pay_for(cat, rank)
    if got is None:
        assert all(p.hand != cat.label or (p.min_rank or 0) > rank for p in t.pays)
    else:
        assert got.hand == cat.label and (got.min_rank or 0) <= rank and got in t.pays


def test_lowest_paying_and_percent_of_meter() -> None:
    assert BUILTIN["caribbean-stud-progressive-a"].lowest_paying().hand == "two-pair"
    assert BUILTIN["caribbean-stud-progressive-c"].lowest_paying().hand == "three-of-a-kind"
    assert BUILTIN["caribbean-stud-progressive-e"].lowest_paying().hand == "flush"
    assert BUILTIN["flop-poker-three-card-bonus"].lowest_paying() == Pay("pair", to1(1))
    assert BUILTIN["four-card-poker-bad-beat-a"].lowest_paying().hand == "two-pair"
    percent = {pid for pid, t in BUILTIN.items() if t.pays_percent_of_meter}
    assert percent == {f"caribbean-stud-progressive-{x}" for x in "abcde"} | {
        "five-card-hand-bonus", "flop-poker-progressive-a", "flop-poker-progressive-b"
    }


def test_paytables_are_frozen_and_hashable() -> None:
    d = BUILTIN["caribbean-stud-progressive-d"]
    assert hash(d) == hash(load_paytable_text(_builtin_text("caribbean-stud-progressive-d"), "x"))
    with pytest.raises(AttributeError):
        d.id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        d.envy.by_wager[100]["royal-flush"] = Fixed(1)  # type: ignore[index, union-attr]
    env = EnvyTable("straight-flush", {100: {"straight-flush": Fixed(1)}}, "s")
    assert env == EnvyTable("straight-flush", {100: {"straight-flush": Fixed(1)}}, "s")


def test_builtin_paytables_are_loaded_once() -> None:
    a, b = builtin_paytables(), builtin_paytables()
    assert a["hot-roller-a"] is b["hot-roller-a"]
    a.pop("hot-roller-a")
    assert "hot-roller-a" in builtin_paytables()


# ---------------------------------------------------------------------------------------------
# The loader: each kind of bad file, with the field path in the message.
# ---------------------------------------------------------------------------------------------


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, Decimal)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _doc(**over: object) -> str:
    """A valid Four-Card Progressive paytable as TOML text, with keys replaced or removed (None)."""
    base: dict[str, object] = {
        "id": "fourcard",
        "title": "Four-Card Progressive",
        "source": "Rules Submission",
        "games": ["four-card-poker"],
        "wager": "four-card-progressive",
        "kind": "four",
        "pays": [
            {"hand": "four-of-a-kind", "award": "100% of meter"},
            {"hand": "straight-flush", "award": "10% of meter"},
            {"hand": "three-of-a-kind", "award": "10 for 1"},
        ],
        "envy": {
            "qualifying": "four-of-a-kind",
            "by_wager": [{"wager": "1.00", "four-of-a-kind": "$250"}],
        },
    }
    if over.get("wager") == "caribbean-stud-bonus":
        base.update(games=["caribbean-stud"], kind="poker5", envy=None)
    base.update(over)
    return "\n".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in base.items() if v is not None) + "\n"


def _error(text: str, name: str = "fourcard.toml") -> InputError:
    with pytest.raises(InputError) as e:
        load_paytable_text(text, name)
    return e.value


def _builtin_text(pid: str) -> str:
    path = Path(__file__).resolve().parents[2] / "controller" / "paytables" / "builtin" / f"{pid}.toml"
    return path.read_text(encoding="utf-8")


def test_the_base_document_loads() -> None:
    t = load_paytable_text(_doc(), "fourcard.toml")
    assert t.id == "fourcard" and t.kind is HandKind.FOUR and t.envy is not None
    assert t.linked_allowed and not t.example and t.notes == ""


def test_error_unknown_top_level_key() -> None:
    e = _error(_doc(colour="red"))
    assert e.field == "fourcard.toml: colour"
    assert "unknown key" in str(e) and "pays" in str(e)


def test_error_unknown_key_in_a_row() -> None:
    pays = [{"hand": "four-of-a-kind", "award": "100% of meter"}, {"hand": "straight-flush", "odds": "1"}]
    e = _error(_doc(pays=pays))
    assert str(e).startswith("fourcard.toml: pays[1].odds: unknown key")


def test_error_unknown_key_in_envy_and_bonus() -> None:
    e = _error(_doc(envy={"qualifying": "four-of-a-kind", "by_wager": [], "amount": "$1"}))
    assert e.field == "fourcard.toml: envy.amount"
    e = _error(
        _doc(games=["caribbean-stud"], kind="poker5", wager="five-card-hand-bonus", envy=None,
             pays=[{"hand": "flush", "award": "50 for 1"}], bonus={"mystery-card": "2 for 1"})
    )
    assert e.field == "fourcard.toml: bonus.mystery-card"


def test_error_unknown_hand_label_for_the_kind() -> None:
    # A royal flush is a five-card hand; Four Card Poker ranks four-card hands (§ 641a.6(b)).
    e = _error(_doc(pays=[{"hand": "royal-flush", "award": "100% of meter"}]))
    assert e.field == "fourcard.toml: pays[0].hand"
    assert "unknown hand 'royal-flush' for kind four" in str(e) and "four-of-a-kind" in str(e)
    e = _error(_doc(pays=[{"hand": 7, "award": "1 for 1"}]))
    assert e.field == "fourcard.toml: pays[0].hand"


def test_hand_aliases_are_accepted_and_stored_canonically() -> None:
    t = load_paytable_text(
        _doc(pays=[{"hand": "Quads", "award": "100% of meter"}, {"hand": "trips", "award": "1 for 1"}]), "x"
    )
    assert t.hands == ("four-of-a-kind", "three-of-a-kind")


def test_error_duplicate_hand() -> None:
    pays = [
        {"hand": "four-of-a-kind", "award": "100% of meter"},
        {"hand": "three-of-a-kind", "award": "10 for 1"},
        {"hand": "trips", "award": "5 for 1"},
    ]
    e = _error(_doc(pays=pays))
    assert e.field == "fourcard.toml: pays[2].hand"
    assert "duplicate hand 'three-of-a-kind' (already at pays[1])" in str(e)


def test_error_rows_not_highest_first() -> None:
    # Four Card Poker: three-of-a-kind ranks above a flush (§ 641a.6(b)).
    pays = [
        {"hand": "four-of-a-kind", "award": "100% of meter"},
        {"hand": "flush", "award": "5 for 1"},
        {"hand": "three-of-a-kind", "award": "10 for 1"},
    ]
    e = _error(_doc(pays=pays))
    assert e.field == "fourcard.toml: pays[2].hand"
    assert "ranks above 'flush' in pays[1]" in str(e)


def test_dice_rows_keep_their_written_order() -> None:
    text = _builtin_text("hot-roller-a").replace('"six-numbers"', '"tmp"')
    text = text.replace('"two-numbers"', '"six-numbers"').replace('"tmp"', '"two-numbers"')
    t = load_paytable_text(text, "hot-roller-a.toml")
    assert t.hands[0] == "two-numbers" and t.hands[-1] == "six-numbers"


def test_error_unknown_dice_key() -> None:
    text = _builtin_text("props-and-hops").replace('"hop-the-top"', '"hop-the-moon"')
    e = _error(text, "props-and-hops.toml")
    assert e.field == "props-and-hops.toml: pays[4].hand"
    assert "hop-the-moon" in str(e)


def test_optional_props_and_hops_wagers() -> None:
    """§ 585.2(f)(2)-(4): Any Craps, Any Seven, Any Doubles, with the operator's own odds."""
    text = _builtin_text("props-and-hops") + '\n[[pays]]\nhand = "any-craps"\naward = "7 to 1"\n'
    t = load_paytable_text(text, "props-and-hops-plus.toml")
    assert t.pay_for_outcome("any-craps") == Pay("any-craps", to1(7))
    check_paytable_for(t, "props-and-hops", next(iter(GAMES["props-and-hops"].wagers)), linked=False, wager_sizes=[100])


@pytest.mark.parametrize(
    ("award", "problem"),
    [("x", "unknown award 'x'"), ("0 for 1", "odds must be positive"), ("-5 for 1", "unknown award"),
     ("$0", "more than $0"), ("150% of meter", "at most 100"), (5, "an award is a string")],
)
def test_error_bad_award(award: object, problem: str) -> None:
    pays = [{"hand": "four-of-a-kind", "award": "100% of meter"}, {"hand": "straight-flush", "award": "1 for 1"},
            {"hand": "flush", "award": "1 for 1"}, {"hand": "straight", "award": award}]
    e = _error(_doc(pays=pays))
    assert e.field == "fourcard.toml: pays[3].award"
    assert problem in str(e)


def test_error_missing_required_keys() -> None:
    assert _error(_doc(id=None)).field == "fourcard.toml: id"
    assert _error(_doc(pays=None)).field == "fourcard.toml: pays"
    assert _error(_doc(pays=[])).field == "fourcard.toml: pays"
    e = _error(_doc(pays=[{"hand": "flush"}]))
    assert e.field == "fourcard.toml: pays[0].award" and "required" in str(e)


def test_error_wrong_types() -> None:
    assert _error(_doc(title=5)).field == "fourcard.toml: title"
    assert _error(_doc(games="four-card-poker")).field == "fourcard.toml: games"
    assert _error(_doc(example="yes")).field == "fourcard.toml: example"
    assert _error(_doc(pays=["flush"])).field == "fourcard.toml: pays[0]"
    assert _error(_doc(id="Four Card")).field == "fourcard.toml: id"
    e = _error(_doc(linked_allowed=Decimal("1.5")))
    assert e.field == "fourcard.toml: linked_allowed" and "decimal" in str(e)


def test_error_unknown_game() -> None:
    e = _error(_doc(games=["four-card-poker", "five-card-stud"]))
    assert e.field == "fourcard.toml: games[1]" and "unknown game 'five-card-stud'" in str(e)


def test_error_duplicate_game() -> None:
    e = _error(_doc(games=["four-card-poker", "four-card-poker"]))
    assert e.field == "fourcard.toml: games[1]" and "duplicate" in str(e)


def test_error_unknown_wager() -> None:
    e = _error(_doc(wager="jackpot"))
    assert e.field == "fourcard.toml: wager"
    assert "Four Card Poker has no wager 'jackpot'" in str(e)


def test_error_unknown_kind() -> None:
    e = _error(_doc(kind="six"))
    assert e.field == "fourcard.toml: kind" and "poker5" in str(e)


def test_error_wager_ranks_another_kind_of_hand() -> None:
    # The Five-Card Progressive Payout Wager ranks five-card Poker hands (§ 641a.11(c)(5)).
    e = _error(_doc(wager="five-card-progressive"))
    assert e.field == "fourcard.toml: kind"
    assert "ranks poker5 hands" in str(e)


def test_error_any_wager_is_for_dice_only() -> None:
    e = _error(_doc(wager="*"))
    assert e.field == "fourcard.toml: wager" and "dice" in str(e)


def test_error_percent_of_meter_on_a_wager_without_a_meter() -> None:
    text = _builtin_text("four-card-poker-bad-beat-a").replace('"25,000 to 1"', '"100% of meter"')
    e = _error(text, "bad-beat.toml")
    assert e.field == "bad-beat.toml: pays[0].award" and "not a progressive wager" in str(e)


def test_error_envy_hand_below_qualifying() -> None:
    envy = {"qualifying": "four-of-a-kind",
            "by_wager": [{"wager": "1.00", "four-of-a-kind": "$250", "three-of-a-kind": "$5"}]}
    e = _error(_doc(envy=envy))
    assert e.field == "fourcard.toml: envy.by_wager[0].three-of-a-kind"
    assert "below the qualifying hand 'four-of-a-kind'" in str(e)


def test_error_envy_row_without_a_qualifying_hand() -> None:
    envy = {"qualifying": "straight-flush", "by_wager": [{"wager": "1.00", "four-of-a-kind": "$250"}]}
    e = _error(_doc(envy=envy))
    assert e.field == "fourcard.toml: envy.by_wager[0]" and "straight-flush" in str(e)


def test_error_envy_on_a_wager_that_is_not_progressive() -> None:
    text = _builtin_text("four-card-poker-bad-beat-a") + (
        '\n[envy]\nqualifying = "four-of-a-kind"\n[[envy.by_wager]]\nwager = "1.00"\nfour-of-a-kind = "$100"\n'
    )
    e = _error(text, "bad-beat.toml")
    assert e.field == "bad-beat.toml: envy" and "progressive" in str(e)


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ({"wager": "0.00", "four-of-a-kind": "$250"}, "envy.by_wager[0].wager", "more than $0"),
        ({"wager": "1.005", "four-of-a-kind": "$250"}, "envy.by_wager[0].wager", "decimal places"),
        ({"wager": 1, "four-of-a-kind": "$250"}, "envy.by_wager[0].wager", "string of dollars"),
        ({"four-of-a-kind": "$250"}, "envy.by_wager[0].wager", "required"),
        ({"wager": "1.00", "four-of-a-kind": "$0"}, "envy.by_wager[0].four-of-a-kind", "more than $0"),
        ({"wager": "1.00", "four-of-a-kind": "50 for 1"}, "envy.by_wager[0].four-of-a-kind", "fixed sum"),
    ],
)
def test_error_bad_envy_amounts(row: dict[str, object], field: str, problem: str) -> None:
    e = _error(_doc(envy={"qualifying": "four-of-a-kind", "by_wager": [row]}))
    assert e.field == f"fourcard.toml: {field}"
    assert problem in str(e)


def test_error_duplicate_envy_wager_size() -> None:
    rows_ = [{"wager": "1.00", "four-of-a-kind": "$250"}, {"wager": "$1", "four-of-a-kind": "$300"}]
    e = _error(_doc(envy={"qualifying": "four-of-a-kind", "by_wager": rows_}))
    assert e.field == "fourcard.toml: envy.by_wager[1].wager" and "duplicate wager size $1.00" in str(e)


def test_error_bonus_on_a_wager_without_magic_card_or_lucky_bonus() -> None:
    e = _error(_doc(bonus={"magic-card": "20 for 1"}))
    assert e.field == "fourcard.toml: bonus" and "639a.12(e)(3)" in str(e)


def test_error_min_rank() -> None:
    pays = [{"hand": "pair", "min_rank": 15, "award": "1 for 1"}]
    e = _error(_doc(pays=pays, wager="caribbean-stud-bonus"))
    assert e.field == "fourcard.toml: pays[0].min_rank"
    text = _builtin_text("hot-roller-a").replace('award = "5 to 1"', 'award = "5 to 1"\nmin_rank = 3')
    assert _error(text, "h.toml").field == "h.toml: pays[4].min_rank"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('id = "x"\ntitle = "t"\npays = [\n  { hand = "flush" award = "1 for 1" },\n]\n', 4),
        ('id = "x"\nid = "y"\n', 2),
        ('id = "x"\ntitle = ', 2),
    ],
)
def test_error_malformed_toml_names_the_line(text: str, line: int) -> None:
    e = _error(text)
    assert e.field == f"fourcard.toml: line {line}"
    assert "malformed TOML" in str(e)


def test_load_paytable_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "fourcard.toml"
    path.write_text(_doc(), encoding="utf-8")
    assert load_paytable(path).id == "fourcard"
    assert find_paytable(str(path)).id == "fourcard"


def test_error_id_differs_from_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "other.toml"
    path.write_text(_doc(), encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_paytable(path)
    assert e.value.field == f"{path}: id" and "fourcard.toml" in str(e.value)


def test_error_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_paytable(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('title = "caf\u00e9"'.encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        load_paytable(bad)


def test_find_and_all_paytables_with_extra_dirs(tmp_path: Path) -> None:
    (tmp_path / "fourcard.toml").write_text(_doc(), encoding="utf-8")
    assert find_paytable("fourcard", [tmp_path]).id == "fourcard"
    assert find_paytable("hot-roller-b", [tmp_path]) is BUILTIN["hot-roller-b"]
    every = all_paytables([tmp_path])
    assert set(every) == set(BUILTIN) | {"fourcard"}
    with pytest.raises(InputError, match="unknown paytable 'nothing'"):
        find_paytable("nothing", [tmp_path])
    with pytest.raises(InputError, match="not a directory"):
        all_paytables([tmp_path / "nowhere"])


def test_a_file_may_not_redefine_a_printed_paytable(tmp_path: Path) -> None:
    (tmp_path / "hot-roller-a.toml").write_text(
        _builtin_text("hot-roller-a").replace('"200 to 1"', '"250 to 1"'), encoding="utf-8"
    )
    with pytest.raises(InputError, match="already defined by builtin/hot-roller-a.toml"):
        all_paytables([tmp_path])
    with pytest.raises(InputError, match="defined twice"):
        find_paytable("hot-roller-a", [tmp_path])


# ---------------------------------------------------------------------------------------------
# The example files.
# ---------------------------------------------------------------------------------------------

EXAMPLES = {
    "four-card-poker-four-card-progressive-example": ("four-card-poker", "four-card-progressive", HandKind.FOUR,
                                                     "four-of-a-kind"),
    "four-card-poker-five-card-progressive-example": ("four-card-poker", "five-card-progressive", HandKind.POKER5,
                                                     "straight-flush"),
    "let-it-ride-three-card-progressive-example": ("let-it-ride", "three-card-progressive", HandKind.THREE,
                                                  "mini-royal"),
    "let-it-ride-five-card-progressive-example": ("let-it-ride", "five-card-progressive", HandKind.POKER5,
                                                 "straight-flush"),
}


@pytest.mark.parametrize("pid", sorted(EXAMPLES))
def test_example_files_are_labelled_and_valid(pid: str) -> None:
    game_id, wager_id, kind, qualifying = EXAMPLES[pid]
    t = load_paytable(EXAMPLES_DIR / f"{pid}.toml")
    assert t.example and "example" in t.notes.lower() and "601a.2" in t.notes
    assert "EXAMPLE" in t.title
    assert (t.games, t.wager, t.kind) == ((game_id,), wager_id, kind)
    assert t.envy is not None and t.envy.qualifying == qualifying
    check_paytable_for(t, game_id, wager_id, linked=True, wager_sizes=[100, 500])
    with pytest.raises(RulesError, match="is an example"):
        check_paytable_for(t, game_id, wager_id, linked=True, wager_sizes=[100], allow_examples=False)


def test_the_examples_directory_holds_just_the_examples() -> None:
    every = all_paytables([EXAMPLES_DIR])
    assert set(every) - set(BUILTIN) == set(EXAMPLES)


# ---------------------------------------------------------------------------------------------
# Selection rules.
# ---------------------------------------------------------------------------------------------


def _rules_error(t: Paytable, game_id: str, wager_id: str, *, linked: bool = False,
                 sizes: tuple[int, ...] = (100,)) -> str:
    with pytest.raises(RulesError) as e:
        check_paytable_for(t, game_id, wager_id, linked=linked, wager_sizes=sizes)
    assert e.value.field == "paytable"
    return e.value.problem


def test_paytable_for_another_game_or_wager() -> None:
    a = BUILTIN["caribbean-stud-progressive-a"]
    assert "not for the Progressive Flop Wager of Flop Poker" in _rules_error(a, "flop-poker", "progressive-flop")
    assert "not for the Caribbean Stud Bonus Wager" in _rules_error(a, "caribbean-stud", "caribbean-stud-bonus")
    with pytest.raises(InputError, match="unknown game"):
        check_paytable_for(a, "blackjack", "progressive", linked=False, wager_sizes=[])


@pytest.mark.parametrize("letter", ["a", "b", "c", "e"])
def test_caribbean_stud_a_b_c_e_may_not_be_linked(letter: str) -> None:
    """§ 639a.12(d)(3)."""
    t = BUILTIN[f"caribbean-stud-progressive-{letter}"]
    check_paytable_for(t, "caribbean-stud", "progressive", linked=False, wager_sizes=[100, 500])
    assert "639a.12(d)(3)" in _rules_error(t, "caribbean-stud", "progressive", linked=True)


def test_caribbean_stud_d_may_be_linked() -> None:
    d = BUILTIN["caribbean-stud-progressive-d"]
    check_paytable_for(d, "caribbean-stud", "progressive", linked=True, wager_sizes=[100, 500])


def test_a_copy_of_paytable_a_is_still_paytable_a_when_linked() -> None:
    copy = replace(BUILTIN["caribbean-stud-progressive-a"], id="house-a", linked_allowed=True)
    check_paytable_for(copy, "caribbean-stud", "progressive", linked=False, wager_sizes=[100])
    problem = _rules_error(copy, "caribbean-stud", "progressive", linked=True)
    assert "rows are those of caribbean-stud-progressive-a" in problem and "639a.12(d)(3)" in problem


def test_only_a_progressive_wager_can_be_linked() -> None:
    t = BUILTIN["four-card-poker-bad-beat-a"]
    assert "605a.8" in _rules_error(t, "four-card-poker", "bad-beat", linked=True)


def test_envy_table_must_cover_every_wager_size() -> None:
    """§ 639a.12(d)(6) prints Envy Bonus amounts for $1 and $5 wagers only."""
    d = BUILTIN["caribbean-stud-progressive-d"]
    problem = _rules_error(d, "caribbean-stud", "progressive", sizes=(100, 200, 500))
    assert problem == "envy table of caribbean-stud-progressive-d has no row for a $2.00 wager; it has $1.00, $5.00"


def test_bad_wager_sizes() -> None:
    with pytest.raises(InputError) as e:
        check_paytable_for(BUILTIN["hot-roller-a"], "hot-roller-craps", "hot-roller", linked=False,
                           wager_sizes=[100, 0])
    assert e.value.field == "wager_sizes[1]"


def test_a_paytable_the_regulations_do_not_print_is_refused_where_they_do() -> None:
    """§ 639a.12(d)(1): "one of the following payout tables"."""
    c = BUILTIN["caribbean-stud-progressive-c"]
    richer = replace(c, id="house-c", pays=(Pay("royal-flush", pct(100)),) + c.pays[1:5]
                     + (Pay("straight", for1(31)),) + c.pays[6:])
    problem = _rules_error(richer, "caribbean-stud", "progressive")
    assert "differs from the paytables the regulations print" in problem
    assert "caribbean-stud-progressive-a" in problem and "639a.12(d)(1)" in problem


def test_paytable_d_without_its_envy_bonus_is_refused() -> None:
    """§ 639a.12(d)(6): with Paytable D, Envy Bonus payouts "shall be made"."""
    bare = replace(BUILTIN["caribbean-stud-progressive-d"], id="house-d", envy=None)
    assert "differs" in _rules_error(bare, "caribbean-stud", "progressive")


def test_magic_card_and_lucky_bonus_are_optional_but_paid_as_printed() -> None:
    """§ 639a.12(e)(3): the certificate holder "may pay" 20 for 1 and 5 for 1."""
    fchb = BUILTIN["five-card-hand-bonus"]
    check_paytable_for(replace(fchb, magic_card=None, lucky_bonus=None), "let-it-ride", "five-card-hand-bonus",
                       linked=False, wager_sizes=[100])
    assert "differs" in _rules_error(replace(fchb, magic_card=for1(25)), "let-it-ride", "five-card-hand-bonus")


def test_props_and_hops_may_leave_out_a_wager_but_not_change_its_odds() -> None:
    """§ 668a.4: every row is a wager of its own; Six Eight Shake is offered at will (§ 668a.1(b)(5))."""
    ph = BUILTIN["props-and-hops"]
    wager_id = next(iter(GAMES["props-and-hops"].wagers))
    check_paytable_for(replace(ph, id="house", pays=ph.pays[:-1]), "props-and-hops", wager_id, linked=False,
                       wager_sizes=[100])
    cheap = replace(ph, id="house", pays=(Pay("double", to1(29)),) + ph.pays[1:])
    assert "668a.4" in _rules_error(cheap, "props-and-hops", wager_id)


def test_hot_roller_paytable_must_be_whole() -> None:
    short = replace(BUILTIN["hot-roller-a"], id="house", pays=BUILTIN["hot-roller-a"].pays[:-1])
    assert "623c.1(h)" in _rules_error(short, "hot-roller-craps", "hot-roller")


def _example(pid: str) -> Paytable:
    return load_paytable(EXAMPLES_DIR / f"{pid}.toml")


@pytest.mark.parametrize(
    ("pid", "game_id", "wager_id", "low", "section"),
    [
        # § 641a.1: Four-Card Progressive Payout Hand: three-of-a-kind or better.
        ("four-card-poker-four-card-progressive-example", "four-card-poker", "four-card-progressive",
         "two-pair", "641a.1"),
        # § 641a.1: Five-Card Progressive Payout Hand: three-of-a-kind or better.
        ("four-card-poker-five-card-progressive-example", "four-card-poker", "five-card-progressive",
         "two-pair", "641a.1"),
        # § 643a.1: Five-Card Progressive Payout Hand: three-of-a-kind or better.
        ("let-it-ride-five-card-progressive-example", "let-it-ride", "five-card-progressive", "two-pair", "643a.1"),
        # § 643a.1: Three-Card Progressive Payout Hand: a straight or better at the least.
        ("let-it-ride-three-card-progressive-example", "let-it-ride", "three-card-progressive", "flush", "643a.1"),
    ],
)
def test_lowest_paying_hand_below_the_definition(pid: str, game_id: str, wager_id: str, low: str,
                                                 section: str) -> None:
    t = _example(pid)
    lower = replace(t, pays=t.pays + (Pay(low, for1(1)),))
    problem = _rules_error(lower, game_id, wager_id)
    assert f"pays {low}, below" in problem and section in problem


def test_two_pair_is_allowed_for_caribbean_stud_only_and_a_pair_never() -> None:
    """§ 639a.1 Progressive Payout Hand: two pair "if included in the paytable selected"."""
    a = BUILTIN["caribbean-stud-progressive-a"]
    assert a.lowest_paying().hand == "two-pair"
    with_pair = replace(a, id="house", pays=a.pays + (Pay("pair", for1(1)),))
    assert "639a.1" in _rules_error(with_pair, "caribbean-stud", "progressive")


def test_five_card_hand_bonus_and_progressive_flop_pay_a_flush_or_better() -> None:
    """§ 639a.7(d)(4) and § 667a.7(d)(4): "a flush or better"."""
    fchb = BUILTIN["five-card-hand-bonus"]
    low = replace(fchb, pays=fchb.pays + (Pay("straight", for1(10)),))
    assert "639a.7(d)(4)" in _rules_error(low, "caribbean-stud", "five-card-hand-bonus")
    assert "643a.7(i)" in _rules_error(low, "let-it-ride", "five-card-hand-bonus")
    flop = BUILTIN["flop-poker-progressive-a"]
    low = replace(flop, pays=flop.pays + (Pay("straight", for1(10)),))
    assert "667a.7(d)(4)" in _rules_error(low, "flop-poker", "progressive-flop")


def test_the_minimums_and_envy_rules_name_real_wagers() -> None:
    for game_id, wager_id in list(MINIMUM_PAYING) + list(ENVY_QUALIFYING):
        assert wager_id in GAMES[game_id].wagers, (game_id, wager_id)
    for rule in list(MINIMUM_PAYING.values()) + list(ENVY_QUALIFYING.values()):
        assert "§" in rule.source


def _with_envy(t: Paytable, qualifying: str, hands: list[str]) -> Paytable:
    return replace(t, envy=EnvyTable(qualifying, {100: {h: Fixed(10_000) for h in hands}}, "test"))


def test_envy_qualifying_hand_must_match_the_definition() -> None:
    d = BUILTIN["caribbean-stud-progressive-d"]
    wide = _with_envy(d, "four-of-a-kind", ["royal-flush", "straight-flush", "four-of-a-kind"])
    problem = _rules_error(wide, "caribbean-stud", "progressive")  # § 639a.1
    assert "639a.1" in problem and "straight-flush or better" in problem

    three = _example("let-it-ride-three-card-progressive-example")  # § 643a.1: a mini-royal
    assert "643a.1" in _rules_error(_with_envy(three, "straight-flush", ["mini-royal", "straight-flush"]),
                                    "let-it-ride", "three-card-progressive")

    four = _example("four-card-poker-four-card-progressive-example")  # § 641a.1: either, by paytable
    check_paytable_for(_with_envy(four, "straight-flush", ["four-of-a-kind", "straight-flush"]),
                       "four-card-poker", "four-card-progressive", linked=False, wager_sizes=[100])
    low = _with_envy(four, "three-of-a-kind", ["four-of-a-kind", "straight-flush", "three-of-a-kind"])
    assert "641a.1" in _rules_error(low, "four-card-poker", "four-card-progressive")

    five = _example("four-card-poker-five-card-progressive-example")
    assert "641a.1" in _rules_error(_with_envy(five, "four-of-a-kind", ["royal-flush", "straight-flush",
                                                                          "four-of-a-kind"]),
                                    "four-card-poker", "five-card-progressive")


def test_no_envy_bonus_where_the_regulations_define_none() -> None:
    flop = BUILTIN["flop-poker-progressive-b"]
    envied = _with_envy(flop, "straight-flush", ["royal-flush", "straight-flush"])
    assert "define no Envy Bonus" in _rules_error(envied, "flop-poker", "progressive-flop")


# ---------------------------------------------------------------------------------------------
# Property tests.
# ---------------------------------------------------------------------------------------------

_KEYS = ["id", "title", "source", "games", "wager", "kind", "linked_allowed", "example", "notes", "pays",
         "envy", "bonus", "hand", "award", "min_rank", "qualifying", "by_wager", "magic-card", "lucky-bonus",
         "royal-flush", "flush", "four-of-a-kind", "mini-royal", "double", "six-numbers", "x"]
_WORDS = ["caribbean-stud", "four-card-poker", "let-it-ride", "flop-poker", "props-and-hops", "hot-roller-craps",
          "progressive", "four-card-progressive", "five-card-hand-bonus", "bad-beat", "flop", "*", "hot-roller",
          "poker5", "three", "four", "props-and-hops", "royal-flush", "two-pair", "pair", "mini-royal",
          "six-numbers", "double", "100% of meter", "500 for 1", "3 to 2", "$1,000", "1.00", "J", "10", "",
          "0 for 1", "$0", "9" * 30]
_scalars = st.one_of(
    st.sampled_from(_WORDS), st.text(max_size=12), st.integers(-(10**20), 10**20), st.booleans(),
    st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-1000, max_value=1000),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def _toml_docs(draw: st.DrawFn) -> str:
    """Mostly-plausible paytable documents: a valid one with keys dropped, replaced or added."""
    base = {
        "id": "x", "title": "t", "source": "s", "games": ["four-card-poker"], "wager": "four-card-progressive",
        "kind": "four",
        "pays": [{"hand": "four-of-a-kind", "award": "100% of meter"}, {"hand": "three-of-a-kind", "award": "5 for 1"}],
        "envy": {"qualifying": "four-of-a-kind", "by_wager": [{"wager": "1.00", "four-of-a-kind": "$100"}]},
    }
    doc: dict[str, object] = dict(base)
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=4)):
        if draw(st.booleans()):
            doc.pop(key, None)
        else:
            doc[key] = draw(_values)
    text = "\n".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in doc.items()) + "\n"
    if draw(st.booleans()):  # damage the text itself
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 8)))
        text = text[:i] + draw(st.text(alphabet="[]{}=\"',.\n#$%- abc19", max_size=6)) + text[j:]
    return text


@settings(max_examples=400, deadline=None)
@given(st.one_of(_toml_docs(), st.text(max_size=200)))
def test_loader_raises_only_input_error(text: str) -> None:
    try:
        t = load_paytable_text(text, "fuzz.toml")
    except InputError as e:
        assert str(e).startswith("fuzz.toml")
    else:
        assert isinstance(t, Paytable) and t.pays


_POKER_HIGH_FIRST = sorted(Poker5, reverse=True)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(_POKER_HIGH_FIRST), min_size=1, unique=True).map(lambda c: sorted(c, reverse=True)),
    st.data(),
)
def test_written_rows_load_back_and_are_paid(cats: list[Poker5], data: st.DataObject) -> None:
    odds = [data.draw(st.integers(1, 10_000)) for _ in cats]
    pays = [{"hand": c.label.replace("-", " ").title(), "award": f"{n:,} for 1"} for c, n in zip(cats, odds, strict=True)]
    text = _doc(games=["caribbean-stud"], wager="caribbean-stud-bonus", kind="poker5", envy=None, pays=pays)
    t = load_paytable_text(text, "gen.toml")
    assert rows(t) == [(c.label, for1(n), None) for c, n in zip(cats, odds, strict=True)]
    for c in Poker5:
        got = t.pay_for(c, 14)
        assert (got.award if got else None) == (for1(odds[cats.index(c)]) if c in cats else None)
    assert t.lowest_paying().hand == cats[-1].label

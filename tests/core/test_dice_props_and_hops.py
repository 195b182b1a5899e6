"""Props & Hops, § 668a.2-668a.4 (and § 585.2): single-roll wagers against all 36 rolls, the hop
layout, Six Eight Shake, settlement order."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.awards import ToOne
from controller.dice.layout import EXAMPLE_GRID, EXAMPLE_LAYOUT, HOPS, parse_layout
from controller.dice.props_and_hops import BETS, PropsAndHops
from controller.dice.roll import ALL_ROLLS, COMBINATIONS, ways
from controller.dice.six_eight_shake import COMBINATIONS as SHAKE
from controller.errors import InputError, RulesError
from controller.paytables import Pay, builtin_paytables

PH = builtin_paytables()["props-and-hops"]
# An operator's paytable that also offers the § 585.2 wagers (odds chosen for the test).
PH_585 = replace(
    PH,
    id="props-and-hops-585",
    pays=(*PH.pays, Pay("any-craps", ToOne(Fraction(7))), Pay("any-seven", ToOne(Fraction(4))),
          Pay("any-doubles", ToOne(Fraction(4)))),
)
NO_SHAKE = replace(PH, id="no-shake", pays=tuple(p for p in PH.pays if p.hand != "six-eight-shake"))

WORD = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
HARD = {"two": 1, "four": 2, "six": 3, "eight": 4, "ten": 5, "twelve": 6}


def _combos(text: str) -> frozenset[tuple[int, int]]:
    return frozenset((int(c[0]), int(c[2])) for c in text.split())


# The example layout's hops, written out by hand from the layout module's docstring and its grid
# (three rows of seven boxes; the top row; columns 1-2 left, 3-5 center, 6-7 right):
#     1-1 1-2 | 1-6 2-5 3-4 | 5-6 6-6
#     1-3 1-4 | 2-2 2-4 3-3 | 4-5 4-6
#     1-5 2-3 | 4-4 3-5 5-5 | 3-6 2-6
EXAMPLE_HOPS = {
    "hop-the-top": _combos("1-1 1-2 1-6 2-5 3-4 5-6 6-6"),  # 12 ways of 36
    "hop-the-left": _combos("1-1 1-2 1-3 1-4 1-5 2-3"),  # 11 ways
    "hop-the-right": _combos("5-6 6-6 4-5 4-6 3-6 2-6"),  # 11 ways
    "hop-the-center": _combos("1-6 2-5 3-4 2-2 2-4 3-3 4-4 3-5 5-5"),  # 14 ways
}


def expected(bet: str, a: int, b: int, hops=EXAMPLE_HOPS) -> str:  # type: ignore[no-untyped-def]
    """The outcome as the regulations word it, written independently of the code under test."""
    total = a + b
    if bet.endswith("-the-hardway"):  # § 668a.2(d): the double shown in the box
        f = HARD[bet.split("-")[0]]
        return "double" if a == b == f else "lose"
    parts = bet.split("-")
    if len(parts) == 2 and all(p in WORD for p in parts):  # § 668a.2(e): one die each face
        return "any-number" if {a, b} == {WORD[parts[0]], WORD[parts[1]]} and a != b else "lose"
    if bet == "field":  # § 668a.2(f)(1), § 668a.4
        return "field-2-or-12" if total in (2, 12) else "field" if total in (3, 4, 9, 10, 11) else "lose"
    if bet in hops:  # § 668a.2(f)(2)-(5): the combinations of that part of the layout
        return bet if (min(a, b), max(a, b)) in hops[bet] else "lose"
    if bet == "one-six-and-under":  # § 668a.2(f)(6)
        return bet if {a, b} == {1, 6} or total < 7 else "lose"
    if bet == "three-four-and-over":  # § 668a.2(f)(7)
        return bet if {a, b} == {3, 4} or total > 7 else "lose"
    if bet == "any-craps":  # § 585.2(f)(2)
        return bet if total in (2, 3, 12) else "lose"
    if bet == "any-seven":  # § 585.2(f)(3)
        return bet if total == 7 else "lose"
    if bet == "any-doubles":  # § 585.2(f)(4)
        return bet if a == b else "lose"
    raise AssertionError(bet)


SINGLE = [b for b in BETS if b != "six-eight-shake"]


def test_bet_names() -> None:
    assert SINGLE[:6] == [f"{w}-the-hardway" for w in ("two", "four", "six", "eight", "ten", "twelve")]
    assert SINGLE[6:21] == [
        "one-two", "one-three", "one-four", "one-five", "one-six", "two-three", "two-four", "two-five",
        "two-six", "three-four", "three-five", "three-six", "four-five", "four-six", "five-six",
    ]  # § 668a.2(e)(1)-(15) in order
    assert SINGLE[21:] == ["field", *HOPS, "one-six-and-under", "three-four-and-over",
                           "any-craps", "any-seven", "any-doubles"]
    assert BETS["three-six"].section == "§ 668a.2(e)(12)" and BETS["hop-the-center"].section == "§ 668a.2(f)(5)"


@pytest.mark.parametrize("bet", SINGLE)
def test_every_single_roll_bet_against_all_36_rolls(bet: str) -> None:
    """Each wager placed at seat 1 for $1.01 (an odd amount), rolled with each of the 36 rolls."""
    pays = {p.hand: p.award for p in PH_585.pays}
    wins = 0
    for r in ALL_ROLLS:
        m = PropsAndHops.new(PH_585).place(1, bet, 101)
        m, (res,) = m.roll((r.first, r.second))
        want = expected(bet, r.first, r.second)
        assert res.outcome == want, (bet, r)
        assert res.amount_cents == (pays[want].received_cents(101) if want != "lose" else 0)  # type: ignore[union-attr]
        assert res.roll == 0 and res.seat == 1 and res.bet == bet
        wins += want != "lose"
    # direct counts out of 36
    counts = {"double": 1, "any-number": 2, "field": 16, "one-six-and-under": 17, "three-four-and-over": 17,
              "any-craps": 4, "any-seven": 6, "any-doubles": 6, "hop-the-top": 12, "hop-the-left": 11,
              "hop-the-right": 11, "hop-the-center": 14}
    kind = "double" if bet.endswith("hardway") else "any-number" if BETS[bet].pay_keys == ("any-number",) else bet
    assert wins == counts[kind]


@pytest.mark.parametrize(
    ("bet", "roll", "cents"),
    [
        ("two-the-hardway", (1, 1), 500 * 31),  # § 668a.4 Double Wager 30 to 1
        ("one-two", (2, 1), 500 * 16),  # Any Number Wager 15 to 1
        ("field", (6, 6), 500 * 3),  # 2 or 12: 2 to 1
        ("field", (5, 6), 500 * 2),  # 3, 4, 9, 10, 11: 1 to 1
        ("hop-the-top", (3, 4), 500 + 750),  # 3 to 2
        ("hop-the-top", (1, 1), 101 + 151),  # 3 to 2 on $1.01: 1.515 floored to the cent
        ("hop-the-left", (1, 3), 500 * 3),  # 2 to 1
        ("hop-the-right", (6, 2), 500 * 3),
        ("hop-the-center", (2, 2), 500 + 750),
        ("one-six-and-under", (6, 1), 500 * 2),
        ("three-four-and-over", (4, 3), 500 * 2),
    ],
)
def test_payout_odds_668a_4(bet: str, roll: tuple[int, int], cents: int) -> None:
    wager = 101 if cents == 101 + 151 else 500
    _, (res,) = PropsAndHops.new(PH).place(3, bet, wager).roll(roll)
    assert res.amount_cents == cents and res.award is not None


def test_one_six_and_under_and_three_four_and_over_lose_other_sevens() -> None:
    # 1-6 and Under wins on the 1-6 but not on 2-5 or 3-4; 3-4 and Over likewise (§ 668a.2(f)(6)-(7))
    m = PropsAndHops.new(PH).place(1, "one-six-and-under", 100).place(1, "three-four-and-over", 100)
    _, res = m.roll((2, 5))
    assert {r.outcome for r in res} == {"lose"}


@pytest.mark.parametrize("bet", ["any-craps", "any-seven", "any-doubles"])
def test_585_2_wagers_refused_without_odds(bet: str) -> None:
    with pytest.raises(RulesError, match=r"§ 585\.2") as e:
        PropsAndHops.new(PH).place(2, bet, 500)
    assert e.value.field == "bet"
    assert bet not in PropsAndHops.new(PH).offered and bet in PropsAndHops.new(PH_585).offered


def test_unknown_bet_seat_and_wager() -> None:
    m = PropsAndHops.new(PH)
    with pytest.raises(InputError) as e:
        m.place(1, "hop-the-bottom", 500)
    assert e.value.field == "bet" and "hop-the-top" in str(e.value)
    for seat in (0, 7, True, "1"):
        with pytest.raises(InputError) as e:
            m.place(seat, "field", 500)
        assert e.value.field == "seat"
    with pytest.raises(InputError) as e:
        m.place(1, "field", 0)
    assert e.value.field == "wager"
    with pytest.raises(RulesError, match="already has a field"):
        m.place(1, "field", 500).place(1, "field", 500)


def test_paytable_checks() -> None:
    with pytest.raises(InputError, match="field-2-or-12"):
        PropsAndHops.new(replace(PH, pays=tuple(p for p in PH.pays if p.hand != "field-2-or-12")))
    with pytest.raises(InputError, match="does not know"):
        PropsAndHops.new(replace(PH, pays=(*PH.pays, Pay("any-eleven", ToOne(Fraction(15))))))
    with pytest.raises(InputError, match="not 'props-and-hops'"):
        PropsAndHops.new(builtin_paytables()["hot-roller-a"])


def test_losers_collected_before_winners_paid_highest_seat_first_668a_3() -> None:
    m = PropsAndHops.new(PH)
    for seat, bet in [(1, "field"), (6, "one-three"), (4, "field"), (2, "one-three"), (4, "three-four-and-over"),
                      (6, "field")]:
        m = m.place(seat, bet, 100)
    _, res = m.roll((3, 1))  # a 4: field and one-three win; three-four-and-over loses
    assert [(r.seat, r.bet, r.outcome) for r in res] == [
        (4, "three-four-and-over", "lose"),
        (6, "one-three", "any-number"), (6, "field", "field"),
        (4, "field", "field"),
        (2, "one-three", "any-number"),
        (1, "field", "field"),
    ]


def test_single_roll_wagers_last_one_roll_and_roll_index() -> None:
    m = PropsAndHops.new(PH).place(5, "field", 100)
    m, res = m.roll((3, 4))
    assert m.wagers == () and m.rolls == 1 and res[0].roll == 0
    m, res = m.place(5, "field", 100).roll((1, 1))
    assert res[0].roll == 1 and res[0].placed_before_roll == 1


# --- the hop layout (§ 668a.1(b), § 668a.2(f)(2)-(5)) ---


def test_example_layout_is_the_documented_grid() -> None:
    cells = [c for row in EXAMPLE_GRID for c in row]
    assert sorted(cells) == sorted(f"{a}-{b}" for a, b in COMBINATIONS)  # each of the 21 boxes once
    d = EXAMPLE_LAYOUT.as_dict()
    assert d["hop-the-top"] == sorted(EXAMPLE_GRID[0])
    sides = [set(d[h]) for h in ("hop-the-left", "hop-the-center", "hop-the-right")]
    assert set().union(*sides) == set(cells) and sum(len(s) for s in sides) == 21  # a partition
    assert [sum(ways(c) for c in EXAMPLE_LAYOUT.combinations(h)) for h in HOPS] == [12, 11, 11, 14]
    assert {h: EXAMPLE_LAYOUT.combinations(h) for h in HOPS} == EXAMPLE_HOPS  # the grid read by hand


@pytest.mark.parametrize("hop", HOPS)
def test_each_hop_wins_on_exactly_its_combinations_of_the_example_layout(hop: str) -> None:
    """Both orders of the dice; every other roll loses (§ 668a.2(f)(2)-(5))."""
    for a in range(1, 7):
        for b in range(1, 7):
            _, (x,) = PropsAndHops.new(PH).place(1, hop, 100).roll((a, b))
            assert (x.outcome == hop) == ((min(a, b), max(a, b)) in EXAMPLE_HOPS[hop]), (hop, a, b)
            assert x.outcome in (hop, "lose")


def test_parse_layout_round_trip_and_operator_layout() -> None:
    assert parse_layout(EXAMPLE_LAYOUT.as_dict(), name="example") == EXAMPLE_LAYOUT
    mine = parse_layout({"hop-the-top": ["6-6"], "hop-the-left": ["1-1"], "hop-the-right": ["2-1", "3-3"],
                         "hop-the-center": ["4-3"]})
    mine_hops = {"hop-the-top": {(6, 6)}, "hop-the-left": {(1, 1)}, "hop-the-right": {(1, 2), (3, 3)},
                 "hop-the-center": {(3, 4)}}
    assert mine.combinations("hop-the-right") == {(1, 2), (3, 3)}
    m = PropsAndHops.new(PH, mine).place(1, "hop-the-right", 200).place(2, "hop-the-top", 200)
    _, res = m.roll((2, 1))
    assert {(r.bet, r.outcome) for r in res} == {("hop-the-right", "hop-the-right"), ("hop-the-top", "lose")}
    for r in ALL_ROLLS:
        for hop in HOPS:
            _, (x,) = PropsAndHops.new(PH, mine).place(1, hop, 100).roll(r)
            assert x.outcome == expected(hop, r.first, r.second, mine_hops)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([], "layout", "maps each hop"),
        ({h: ["1-1"] for h in HOPS[:3]}, "layout", "hop-the-center"),
        ({**{h: ["1-1"] for h in HOPS}, "hop-the-bottom": ["1-2"]}, "layout", "unknown hop"),
        ({**{h: ["1-1"] for h in HOPS}, "hop-the-left": []}, "layout.hop-the-left", "non-empty"),
        ({**{h: ["1-1"] for h in HOPS}, "hop-the-left": "1-1"}, "layout.hop-the-left", "non-empty"),
        ({**{h: ["1-1"] for h in HOPS}, "hop-the-top": ["1-2", "7-1"]}, "layout.hop-the-top[1]", "7-1"),
        ({**{h: ["1-1"] for h in HOPS}, "hop-the-top": ["1-2", "2-1"]}, "layout.hop-the-top[1]", "twice"),
    ],
)
def test_parse_layout_refuses(data: object, field: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_layout(data)
    assert e.value.field == field and message in str(e.value)


# --- Six Eight Shake (§ 668a.2(f)(8), § 668a.3(e), (i)) ---


def test_six_eight_shake_wins_when_all_six_thrown_before_a_seven() -> None:
    m = PropsAndHops.new(PH).place(2, "six-eight-shake", 500)
    for r in [(5, 1), (4, 2), (1, 1), (2, 4), (3, 3), (6, 2)]:  # repeats and other rolls change nothing more
        m, res = m.roll(r)
        assert res == ()
    assert m.shakes[0].lammers == ((3, 5), (4, 4))
    m, res = m.roll((5, 3))
    assert res == ()
    m, (win,) = m.roll((4, 4))  # the last lammer: paid at once, 150 to 1 (§ 668a.4)
    assert (win.outcome, win.amount_cents, win.roll, win.placed_before_roll) == ("six-eight-shake", 500 * 151, 7, 0)
    assert m.shakes == ()


@pytest.mark.parametrize("thrown", [0, 3, 5])
def test_six_eight_shake_loses_on_a_seven(thrown: int) -> None:
    m = PropsAndHops.new(PH).place(6, "six-eight-shake", 500)
    for c in SHAKE[:thrown]:
        m, _ = m.roll(c)
    m, (lost,) = m.roll((1, 6))
    assert (lost.outcome, lost.amount_cents, lost.award) == ("lose", 0, None) and m.shakes == ()


def test_six_eight_shake_removed_before_a_seven_and_refused_after() -> None:
    m = PropsAndHops.new(PH).place(3, "six-eight-shake", 500)
    m, _ = m.roll((1, 5))
    m2, out = m.remove_six_eight_shake(3)  # any time prior to a seven (§ 668a.2(f)(8))
    assert (out.outcome, out.amount_cents, out.roll) == ("removed", 500, 1) and m2.shakes == ()
    m3, _ = m.roll((4, 3))
    with pytest.raises(RulesError, match=r"before a seven .*§ 668a\.2\(f\)\(8\)") as e:
        m3.remove_six_eight_shake(3)
    assert e.value.field == "seat"


def test_each_six_eight_shake_wager_keeps_its_own_lammers() -> None:
    m = PropsAndHops.new(PH).place(1, "six-eight-shake", 100)
    for c in SHAKE[:5]:
        m, _ = m.roll(c)
    m = m.place(2, "six-eight-shake", 100)  # made later: the earlier throws do not count for it
    m, (res,) = m.roll(SHAKE[5])
    assert (res.seat, res.outcome) == (1, "six-eight-shake")
    assert [(s.seat, len(s.lammers)) for s in m.shakes] == [(2, 5)]


def test_one_open_six_eight_shake_per_seat_and_offered_only_with_odds() -> None:
    m = PropsAndHops.new(PH).place(1, "six-eight-shake", 100)
    with pytest.raises(RulesError, match="already has a Six Eight Shake"):
        m.place(1, "six-eight-shake", 100)
    with pytest.raises(RulesError, match="no odds for six-eight-shake"):
        PropsAndHops.new(NO_SHAKE).place(1, "six-eight-shake", 100)


def _reference_shake(rolls: list[tuple[int, int]]) -> tuple[int, str] | None:
    seen: set[tuple[int, int]] = set()
    for i, (a, b) in enumerate(rolls):
        if a + b == 7:
            return i, "lose"
        if (min(a, b), max(a, b)) in {(1, 5), (2, 4), (3, 3), (2, 6), (3, 5), (4, 4)}:
            seen.add((min(a, b), max(a, b)))
        if len(seen) == 6:
            return i, "six-eight-shake"
    return None


# Rolls biased toward sixes and eights so that wins happen too.
die_pairs = st.one_of(st.sampled_from(SHAKE), st.tuples(st.integers(1, 6), st.integers(1, 6)))


@settings(max_examples=400, deadline=None)
@given(rolls=st.lists(die_pairs, max_size=60), bets=st.lists(st.tuples(st.integers(1, 6), st.sampled_from(SINGLE)),
                                                             max_size=12))
def test_random_rolls_never_crash_and_follow_the_rules(
    rolls: list[tuple[int, int]], bets: list[tuple[int, str]]
) -> None:
    m = PropsAndHops.new(PH_585).place(4, "six-eight-shake", 1000)
    want = _reference_shake(rolls)
    for i, r in enumerate(rolls):
        placed = set()
        for seat, bet in bets:
            if (seat, bet) not in placed:
                m = m.place(seat, bet, 250)
                placed.add((seat, bet))
        m, res = m.roll(r)
        singles = [x for x in res if x.bet != "six-eight-shake"]
        assert len(singles) == len(placed)
        assert all(x.outcome == expected(x.bet, *r) for x in singles)
        shake = [x for x in res if x.bet == "six-eight-shake"]
        if want is not None and want[0] == i:
            assert [(x.outcome, x.amount_cents) for x in shake] == [(want[1], 151000 if want[1] != "lose" else 0)]
        else:
            assert shake == []
        losing = [x.award is None for x in res]
        assert losing == sorted(losing, reverse=True)  # all losers before all winners
    assert bool(m.shakes) == (want is None)

"""settle_dice / to_json: the command line's dice settlement, its errors and money conservation."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.awards import ToOne
from controller.dice import EXAMPLE_LAYOUT, parse_layout, settle_dice, to_json
from controller.dice.props_and_hops import BETS
from controller.dice.six_eight_shake import COMBINATIONS as SHAKE
from controller.errors import InputError, RulesError
from controller.paytables import Pay, builtin_paytables

PT = builtin_paytables()
A, B, PH = PT["hot-roller-a"], PT["hot-roller-b"], PT["props-and-hops"]
PH_585 = replace(PH, id="props-and-hops-585", pays=(*PH.pays, Pay("any-craps", ToOne(Fraction(7))),
                                                    Pay("any-seven", ToOne(Fraction(4))),
                                                    Pay("any-doubles", ToOne(Fraction(4)))))
EXAMPLE_ROLLS = [[1, 3], [2, 2], [2, 3], [4, 1], [3, 6], [4, 5], [3, 4]]  # § 623c.1(g)


def test_hot_roller_worked_example_623c_1_g_as_json() -> None:
    s = settle_dice("hot-roller-craps", A, [{"position": 9, "wager": "5.00"}, {"position": 2, "wager": "1.00"}],
                    EXAMPLE_ROLLS + [[1, 3]])
    out = to_json(s)
    assert out["awards"] == [
        {"position": 2, "wager": "1.00", "bet": "hot-roller", "roll": 6, "outcome": "three-numbers",
         "award": "10 to 1", "amount": "11.00", "paid_by": "table"},
        {"position": 9, "wager": "5.00", "bet": "hot-roller", "roll": 6, "outcome": "three-numbers",
         "award": "10 to 1", "amount": "55.00", "paid_by": "table"},
    ]
    assert out["open"] == {"series_rolls": 1, "markers": ["1-3"], "numbers_complete": [], "wagers": []}
    assert out["game"] == "hot-roller-craps" and out["paytable"] == "hot-roller-a"
    assert json.loads(json.dumps(out)) == out  # plain JSON data


def test_hot_roller_open_state_and_later_series() -> None:
    # the same position again once the 7 of roll 0 has settled the first wager: a new series
    s = settle_dice("hot-roller-craps", B, [{"position": 1, "wager": "2.50"}, {"position": 1, "wager": "3.00", "roll": 1}],
                    [[6, 1], [1, 1], [2, 2]])
    out = to_json(s)
    assert [(a["position"], a["roll"], a["outcome"], a["amount"]) for a in out["awards"]] == [(1, 0, "lose", "0.00")]
    assert out["open"] == {"series_rolls": 2, "markers": ["2-2"], "numbers_complete": [],
                           "wagers": [{"position": 1, "bet": "hot-roller", "wager": "3.00"}]}


def test_hot_roller_wager_after_the_come_out_is_refused_623c_1_b() -> None:
    with pytest.raises(RulesError) as e:
        settle_dice("hot-roller-craps", A, [{"position": 1, "wager": "3.00", "roll": 2}], [[6, 1], [1, 1], [2, 2]])
    assert e.value.field == "positions[0].roll" and "§ 623c.1(b)" in str(e.value)
    s = settle_dice("hot-roller-craps", A, [{"position": 1, "wager": "3.00", "roll": 1}], [[6, 1], [1, 3], [2, 2]])
    out = to_json(s)
    assert out["awards"] == []
    assert out["open"] == {"series_rolls": 2, "markers": ["1-3", "2-2"], "numbers_complete": [4],
                           "wagers": [{"position": 1, "bet": "hot-roller", "wager": "3.00"}]}


def test_props_and_hops_round_as_json() -> None:
    positions = [
        {"seat": 1, "bet": "field", "wager": "5.00"},
        {"seat": 6, "bet": "hop-the-top", "wager": "1.01"},
        {"seat": 3, "bet": "six-eight-shake", "wager": "2.00"},
        {"seat": 2, "bet": "six-eight-shake", "wager": "1.00", "removed_before_roll": 1},
        {"seat": 4, "bet": "two-the-hardway", "wager": "1.00", "roll": 1},
        {"seat": 5, "bet": "one-six-and-under", "wager": "1.00", "roll": 2},
    ]
    out = to_json(settle_dice("props-and-hops", PH, positions, [[1, 1], [2, 4]]))
    assert out["awards"] == [
        {"seat": 6, "wager": "1.01", "bet": "hop-the-top", "roll": 0, "outcome": "hop-the-top", "award": "3 to 2",
         "amount": "2.52", "paid_by": "table"},
        {"seat": 1, "wager": "5.00", "bet": "field", "roll": 0, "outcome": "field-2-or-12", "award": "2 to 1",
         "amount": "15.00", "paid_by": "table"},
        {"seat": 2, "wager": "1.00", "bet": "six-eight-shake", "roll": 1, "outcome": "removed", "award": None,
         "amount": "1.00", "paid_by": "table"},
        {"seat": 4, "wager": "1.00", "bet": "two-the-hardway", "roll": 1, "outcome": "lose", "award": None,
         "amount": "0.00", "paid_by": "table"},
    ]
    assert out["open"] == {
        "wagers": [{"seat": 5, "bet": "one-six-and-under", "wager": "1.00", "roll": 2}],
        "six_eight_shake": [{"seat": 3, "wager": "2.00", "roll": 0, "thrown": ["2-4"],
                             "lammers": ["1-5", "3-3", "2-6", "3-5", "4-4"]}],
    }


def test_six_eight_shake_removal_after_the_seven_is_refused() -> None:
    positions = [{"seat": 2, "bet": "six-eight-shake", "wager": "1.00", "removed_before_roll": 2}]
    with pytest.raises(RulesError) as e:
        settle_dice("props-and-hops", PH, positions, [[1, 5], [3, 4], [2, 2]])
    assert e.value.field == "positions[0].removed_before_roll"
    assert "roll 1 (lose)" in str(e.value) and "§ 668a.2(f)(8)" in str(e.value)
    # taken down and made again by the same seat before the same roll
    positions = [{"seat": 2, "bet": "six-eight-shake", "wager": "1.00", "removed_before_roll": 1},
                 {"seat": 2, "bet": "six-eight-shake", "wager": "2.00", "roll": 1}]
    out = to_json(settle_dice("props-and-hops", PH, positions, [[1, 5], [3, 3]]))
    assert [(a["outcome"], a["amount"]) for a in out["awards"]] == [("removed", "1.00")]
    assert out["open"]["six_eight_shake"][0]["thrown"] == ["3-3"]


def test_six_eight_shake_paid_as_soon_as_all_six_are_thrown() -> None:
    positions = [{"seat": 1, "bet": "six-eight-shake", "wager": "1.00"}]
    rolls = [list(c) for c in SHAKE] + [[3, 4]]
    out = to_json(settle_dice("props-and-hops", PH, positions, rolls))
    assert [(a["roll"], a["outcome"], a["award"], a["amount"]) for a in out["awards"]] == [
        (5, "six-eight-shake", "150 to 1", "151.00")
    ]


def test_layout_is_used() -> None:
    mine = parse_layout({"hop-the-top": ["6-6"], "hop-the-left": ["1-1"], "hop-the-right": ["1-2"],
                         "hop-the-center": ["3-4"]})
    positions = [{"seat": 1, "bet": "hop-the-top", "wager": "2.00"}]
    assert settle_dice("props-and-hops", PH, positions, [[6, 6]], layout=mine).awards[0].amount_cents == 500
    assert settle_dice("props-and-hops", PH, positions, [[1, 2]], layout=mine).awards[0].outcome == "lose"
    assert settle_dice("props-and-hops", PH, positions, [[1, 2]]).awards[0].outcome == "hop-the-top"
    assert settle_dice("props-and-hops", PH, positions, [[1, 2]], layout=EXAMPLE_LAYOUT).open.layout == EXAMPLE_LAYOUT


@pytest.mark.parametrize(
    ("game", "paytable", "positions", "rolls", "field"),
    [
        ("hot-roller-craps", A, [{"position": 1, "wager": "5.00"}] * 3 + [{"position": 2, "wager": "5.001"}], [],
         "positions[3].wager"),
        ("hot-roller-craps", A, [{"position": 1, "wager": "0.00"}], [], "positions[0].wager"),
        ("hot-roller-craps", A, [{"position": 17, "wager": "5.00"}], [], "positions[0].position"),
        ("hot-roller-craps", A, [{"position": 3, "wager": "5.00"}, {"position": 3, "wager": "1.00"}], [],
         "positions[1].position"),
        ("hot-roller-craps", A, [{"position": 1, "wager": "5.00", "roll": 3}], [[1, 1]], "positions[0].roll"),
        ("hot-roller-craps", A, [{"position": 1, "wager": "5.00", "seat": 1}], [], "positions[0]"),
        ("hot-roller-craps", A, [{"wager": "5.00"}], [], "positions[0]"),
        ("hot-roller-craps", A, [{"position": 1, "wager": "5.00", "bet": "field"}], [], "positions[0].bet"),
        ("hot-roller-craps", A, [], [[1, 1]] * 5 + [[1, 7]], "rolls[5][1]"),
        ("hot-roller-craps", A, [], [[1, 1], "3-4"], "rolls[1]"),
        ("hot-roller-craps", A, {}, [], "positions"),
        ("hot-roller-craps", A, [], None, "rolls"),
        ("hot-roller-craps", A, ["x"], [], "positions[0]"),
        ("hot-roller-craps", PH, [], [], "paytable"),
        ("props-and-hops", A, [], [], "paytable"),
        ("caribbean-stud", A, [], [], "game"),
        ("craps", A, [], [], "game"),
        ("props-and-hops", PH, [{"seat": 7, "bet": "field", "wager": "5.00"}], [], "positions[0].seat"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "fields", "wager": "5.00"}], [], "positions[0].bet"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "any-seven", "wager": "5.00"}], [], "positions[0].bet"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "field", "wager": 5}], [], "positions[0].wager"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "field", "wager": "5.00", "roll": -1}], [], "positions[0].roll"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "field", "wager": "5.00", "removed_before_roll": 0}], [],
         "positions[0].removed_before_roll"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "six-eight-shake", "wager": "5.00", "roll": 1,
                                 "removed_before_roll": 0}], [[1, 1]], "positions[0].removed_before_roll"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "field", "wager": "5.00"},
                                {"seat": 1, "bet": "field", "wager": "5.00"}], [[1, 1]], "positions[1].bet"),
        ("props-and-hops", PH, [{"seat": 1, "bet": "six-eight-shake", "wager": "5.00"},
                                {"seat": 1, "bet": "six-eight-shake", "wager": "5.00", "roll": 1}], [[1, 1]],
         "positions[1].seat"),
        ("props-and-hops", PH, [{"seat": 1, "wager": "5.00"}], [], "positions[0]"),
    ],
)
def test_every_error_names_its_field(game: str, paytable: object, positions: object, rolls: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        settle_dice(game, paytable, positions, rolls)  # type: ignore[arg-type]
    assert e.value.field == field, str(e.value)


# --- money is conserved ---

rolls_st = st.lists(st.one_of(st.sampled_from([list(c) for c in SHAKE]),
                              st.lists(st.integers(1, 6), min_size=2, max_size=2)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(rolls=rolls_st, data=st.data())
def test_props_and_hops_money_is_conserved(rolls: list[list[int]], data: st.DataObject) -> None:
    n = len(rolls)
    entries = data.draw(st.lists(st.tuples(st.integers(1, 6), st.sampled_from(list(BETS)), st.integers(1, 100_000),
                                           st.integers(0, n), st.integers(0, n), st.booleans()), max_size=25))
    positions, seen, shake_seats = [], set(), set()
    for seat, bet, cents, k, removed, remove in entries:
        if bet == "six-eight-shake":
            if seat in shake_seats:
                continue
            shake_seats.add(seat)  # one Six Eight Shake wager per seat in this test, so no clash
        elif (seat, bet, k) in seen:
            continue
        seen.add((seat, bet, k))
        p = {"seat": seat, "bet": bet, "wager": f"{cents // 100}.{cents % 100:02d}", "roll": k}
        if bet == "six-eight-shake" and remove and removed >= k:
            p["removed_before_roll"] = removed
        positions.append(p)
    pays = {p.hand: p.award for p in PH_585.pays}
    while True:
        try:
            s = settle_dice("props-and-hops", PH_585, positions, rolls)
            break
        except RulesError as e:  # only a removal after the wager was settled may be refused: drop it
            assert e.field.endswith(".removed_before_roll"), str(e)
            del positions[int(e.field.split("[")[1].split("]")[0])]["removed_before_roll"]
    seen_entries = [a.entry for a in s.awards]
    assert len(seen_entries) == len(set(seen_entries))  # each wager settled at most once
    open_tags = {w.tag for w in s.open.wagers} | {w.tag for w in s.open.shakes}  # type: ignore[union-attr]
    assert set(seen_entries) | open_tags == set(range(len(positions)))  # ... and every wager is accounted for
    assert not set(seen_entries) & open_tags
    for a in s.awards:
        if a.outcome == "lose":
            assert a.amount_cents == 0
        elif a.outcome == "removed":
            assert a.amount_cents == a.wager_cents
        else:
            m = pays[a.outcome].multiple  # type: ignore[union-attr]
            assert a.amount_cents == (m * a.wager_cents).__floor__()
    assert sum(a.amount_cents for a in s.awards) == sum(
        (pays[a.outcome].multiple * a.wager_cents).__floor__() for a in s.awards  # type: ignore[union-attr]
        if a.outcome not in ("lose", "removed")
    ) + sum(a.wager_cents for a in s.awards if a.outcome == "removed")


@settings(max_examples=300, deadline=None)
@given(rolls=st.lists(st.lists(st.integers(1, 6), min_size=2, max_size=2), max_size=80),
       wagers=st.dictionaries(st.integers(1, 16), st.integers(1, 10**6), max_size=16))
def test_hot_roller_money_is_conserved(rolls: list[list[int]], wagers: dict[int, int]) -> None:
    positions = [{"position": p, "wager": f"{c // 100}.{c % 100:02d}"} for p, c in wagers.items()]
    s = settle_dice("hot-roller-craps", B, positions, rolls)
    pays = {p.hand: p.award for p in B.pays}
    assert [a.position for a in s.awards] == sorted(a.position for a in s.awards)
    assert {a.position for a in s.awards} | {w.position for w in s.open.wagers} == set(wagers)  # type: ignore[union-attr]
    for a in s.awards:
        assert a.wager_cents == wagers[a.position]  # type: ignore[index]
        want = 0 if a.outcome == "lose" else (pays[a.outcome].multiple * a.wager_cents).__floor__()  # type: ignore[union-attr]
        assert a.amount_cents == want
    if any(r[0] + r[1] == 7 for r in rolls):
        assert len(s.awards) == len(wagers) and s.open.wagers == ()  # type: ignore[union-attr]
    else:
        assert s.awards == ()

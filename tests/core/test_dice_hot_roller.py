"""Hot Roller Craps, § 623c.1: markers, completed numbers, wager timing, settlement on a 7."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.awards import ForOne, ToOne
from controller.dice.hot_roller import (
    MARKER_COMBINATIONS,
    NUMBERS,
    OUTCOME_KEYS,
    HotRoller,
    complete_numbers,
)
from controller.errors import InputError, RulesError
from controller.paytables import Pay, builtin_paytables

PAYTABLES = builtin_paytables()
A = PAYTABLES["hot-roller-a"]
B = PAYTABLES["hot-roller-b"]


def play(machine: HotRoller, *rolls: tuple[int, int]):  # type: ignore[no-untyped-def]
    out = []
    for r in rolls:
        machine, settled = machine.roll(r)
        out.append(settled)
    return machine, out


def test_layout_combinations_623c_1_a_2_iii() -> None:
    # § 623c.1(a)(2)(iii)(A)-(F), written as the rule does
    assert NUMBERS == {
        4: ((1, 3), (2, 2)),
        5: ((1, 4), (2, 3)),
        6: ((1, 5), (2, 4), (3, 3)),
        8: ((2, 6), (3, 5), (4, 4)),
        9: ((3, 6), (4, 5)),
        10: ((4, 6), (5, 5)),
    }
    assert len(MARKER_COMBINATIONS) == 14 == len(set(MARKER_COMBINATIONS))
    assert all(a + b not in (2, 3, 7, 11, 12) for a, b in MARKER_COMBINATIONS)


def test_worked_example_623c_1_g() -> None:
    """4 by 1-3 and 2-2, 5 by 2-3 and 4-1, 9 by 3-6 and 4-5, then a 7: paid for three numbers."""
    m = HotRoller.new(A).place(1, 500).place(16, 2500)
    m, settled = play(m, (1, 3), (2, 2), (2, 3), (4, 1), (3, 6), (4, 5))
    assert all(s == () for s in settled)
    assert m.numbers_complete == (4, 5, 9)
    assert m.board()[4] == {"1-3": True, "2-2": True}
    assert m.board()[6] == {"1-5": False, "2-4": False, "3-3": False}
    m, (res,) = play(m, (3, 4))
    assert [r.position for r in res] == [1, 16]
    assert {r.outcome for r in res} == {"three-numbers"}
    assert res[0].award == ToOne(Fraction(10))  # § 623c.1(h): any three number combinations, 10 to 1
    assert [r.amount_cents for r in res] == [500 * 11, 2500 * 11]  # won 10 to 1, wager returned
    assert m.markers == frozenset() and m.wagers == () and m.series_rolls == 0


def test_marker_per_combination_623c_1_d_and_order_does_not_matter() -> None:
    m = HotRoller.new(A)
    m, _ = play(m, (3, 1))  # "1 and 3" whichever die shows which
    assert m.markers == {(1, 3)} and m.numbers_complete == ()
    m, _ = play(m, (2, 2))
    assert m.numbers_complete == (4,)  # § 623c.1(f): both ways to make a 4


@pytest.mark.parametrize("roll", [(1, 1), (1, 2), (5, 6), (6, 6)])
def test_craps_and_eleven_place_no_marker(roll: tuple[int, int]) -> None:
    m, _ = play(HotRoller.new(A), roll)
    assert m.markers == frozenset() and m.series_rolls == 1


def test_a_repeated_combination_is_one_marker() -> None:
    m, _ = play(HotRoller.new(A), (1, 3), (3, 1), (1, 3))
    assert m.markers == {(1, 3)}


def _complete(*numbers: int) -> list[tuple[int, int]]:
    return [c for n in numbers for c in NUMBERS[n]]


@pytest.mark.parametrize(
    ("numbers", "key", "a_cents", "b_cents"),
    [
        ((4, 10), "two-numbers", 1000 * 6, 1000 * 6),
        ((4, 5, 6), "three-numbers", 1000 * 11, 1000 * 11),
        ((4, 5, 6, 8), "four-numbers", 1000 * 21, 1000 * 21),
        ((4, 5, 6, 8, 9), "five-numbers", 1000 * 51, 1000 * 51),
        ((4, 5, 6, 8, 9, 10), "six-numbers", 1000 * 201, 1000 * 301),  # 200 to 1 (A), 300 to 1 (B)
    ],
)
def test_paid_by_count_of_completed_numbers_623c_1_h(
    numbers: tuple[int, ...], key: str, a_cents: int, b_cents: int
) -> None:
    for paytable, cents in ((A, a_cents), (B, b_cents)):
        m = HotRoller.new(paytable).place(7, 1000)
        m, _ = play(m, *_complete(*numbers))
        m, (res,) = play(m, (6, 1))
        assert [(r.outcome, r.amount_cents, r.numbers_complete) for r in res] == [(key, cents, len(numbers))]


@pytest.mark.parametrize("rolls", [[], [(1, 3), (2, 2)], [(1, 3), (2, 2), (1, 4), (4, 4), (5, 5)]])
def test_fewer_than_two_numbers_loses_623c_1_g(rolls: list[tuple[int, int]]) -> None:
    m = HotRoller.new(A).place(3, 500).place(2, 100)
    m, _ = play(m, *rolls)
    m, (res,) = play(m, (2, 5))
    assert [(r.position, r.outcome, r.award, r.amount_cents) for r in res] == [
        (2, "lose", None, 0), (3, "lose", None, 0),
    ]


def test_seven_on_the_come_out_loses() -> None:
    m, (res,) = play(HotRoller.new(A).place(1, 500), (1, 6))
    assert [(r.outcome, r.amount_cents, r.numbers_complete) for r in res] == [("lose", 0, 0)]


def test_wager_only_before_the_come_out_roll_623c_1_b() -> None:
    m, _ = play(HotRoller.new(A).place(1, 500), (2, 2))
    with pytest.raises(RulesError) as e:
        m.place(2, 500)
    assert e.value.field == "roll" and "§ 623c.1(b)" in str(e.value) and "come-out" in str(e.value)
    # after the 7 a new series starts and wagers are taken again
    m, _ = play(m, (3, 4))
    assert m.place(2, 500).wagers[0].position == 2


def test_wager_may_not_be_increased_or_removed_623c_1_b() -> None:
    m = HotRoller.new(A).place(4, 500)
    with pytest.raises(RulesError, match=r"may not be increased") as e:
        m.place(4, 500)
    assert e.value.field == "position"
    with pytest.raises(RulesError, match=r"§ 623c.1\(b\)"):
        m.remove(4)
    with pytest.raises(RulesError, match="no Hot Roller wager"):
        m.remove(5)


@pytest.mark.parametrize(("position", "field"), [(0, "position"), (17, "position"), (True, "position"), ("1", "position")])
def test_positions_1_to_16_623c_1_a_2_i(position: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        HotRoller.new(A).place(position, 500)
    assert e.value.field == field
    assert [w.position for w in HotRoller.new(A).place(16, 1).place(1, 1).wagers] == [1, 16]


@pytest.mark.parametrize("cents", [0, -5, True, "5.00", 1.5])
def test_wager_amount_validated(cents: object) -> None:
    with pytest.raises(InputError) as e:
        HotRoller.new(A).place(1, cents)
    assert e.value.field == "wager"


def test_bad_roll_is_refused_and_state_unchanged() -> None:
    m = HotRoller.new(A).place(1, 500)
    with pytest.raises(InputError) as e:
        m.roll((0, 3))
    assert e.value.field == "roll[0]"
    assert m.series_rolls == 0


def test_paytable_must_be_complete_and_of_the_right_kind() -> None:
    with pytest.raises(InputError, match="two-numbers"):
        HotRoller.new(replace(A, pays=A.pays[:-1]))
    with pytest.raises(InputError, match="not 'hot-roller'"):
        HotRoller.new(PAYTABLES["props-and-hops"])
    with pytest.raises(InputError, match="unknown-key|does not know"):
        HotRoller.new(replace(A, pays=(*A.pays, Pay("seven-numbers", ToOne(Fraction(1))))))


def test_for_one_awards_are_paid_without_returning_the_wager() -> None:
    pays = tuple(Pay(p.hand, ForOne(p.award.n)) for p in A.pays)  # type: ignore[attr-defined]
    m = HotRoller.new(replace(A, id="for-one", pays=pays)).place(1, 333)
    m, _ = play(m, *_complete(4, 10))
    _, (res,) = play(m, (3, 4))
    assert res[0].amount_cents == 333 * 5


rolls_st = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), max_size=120)


@settings(max_examples=300, deadline=None)
# At most 15 of the 16 positions, so that one is always free for the late wager below.
@given(rolls=rolls_st, wager=st.integers(1, 10**7), positions=st.sets(st.integers(1, 16), min_size=1, max_size=15))
def test_random_rolls_follow_a_reference_model(rolls: list[tuple[int, int]], wager: int, positions: set[int]) -> None:
    """Against a direct reading of § 623c.1(d)-(g): markers since the last 7, settle on the 7."""
    m = HotRoller.new(B)
    for p in positions:
        m = m.place(p, wager)
    thrown: set[tuple[int, int]] = set()
    pays = {p.hand: p.award for p in B.pays}
    for a, b in rolls:
        m, res = m.roll((a, b))
        if a + b == 7:
            if positions:
                done = sum(1 for combos in NUMBERS.values() if set(combos) <= thrown)
                key = OUTCOME_KEYS.get(done, "lose")
                want = pays[key].received_cents(wager) if key != "lose" else 0  # type: ignore[union-attr]
                assert [(r.position, r.outcome, r.amount_cents) for r in res] == [
                    (p, key, want) for p in sorted(positions)
                ]
            else:
                assert res == ()
            thrown, positions = set(), set()
            assert m.wagers == () and m.markers == frozenset()
            assert m.place(16, wager).wager_at(16) is not None  # a new series: before its come-out again
        else:
            assert res == ()
            if (min(a, b), max(a, b)) in MARKER_COMBINATIONS:
                thrown.add((min(a, b), max(a, b)))
            assert m.markers == thrown
            assert m.numbers_complete == complete_numbers(frozenset(thrown))
            # no wager after the come-out roll (§ 623c.1(b)), even at a position that is free
            free = min(set(range(1, 17)) - positions)
            assert m.wager_at(free) is None
            with pytest.raises(RulesError) as e:
                m.place(free, 100)
            assert e.value.field == "roll" and "come-out" in str(e.value) and "§ 623c.1(b)" in str(e.value)

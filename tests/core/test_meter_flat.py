"""The meter's cost per operation does not grow with its open rounds: the open rounds are a persistent mapping
(controller.meter.pmap) carrying the running totals the invariant checks, and `apply` checks what an operation
touched with them. The totals always equal their sum recomputed, the order and the snapshot are a dict's, and the
full check still runs (tests, a snapshot restored, the ledger's reducer every so many operations)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from math import isqrt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_meter import draw_op, st_params

from controller.errors import InputError, InvariantViolation
from controller.meter import (
    BookContributions,
    CloseRound,
    MeterParams,
    PayFixedAward,
    PayLockedAward,
    PayPercentAward,
    VoidRound,
    apply,
    check_invariant,
    initial_state,
    invariant_failures,
    state_from_dict,
    state_to_dict,
)
from controller.meter import engine as meter_engine
from controller.meter.journal import FULL_CHECK_EVERY, MetersReducer, define_meter_body, op_body
from controller.meter.pmap import MIN_OVERLAY, PersistentMap
from controller.meter.state import OpenRounds, step_failures, sum_totals, with_maps

import soak

AT = datetime(2026, 1, 1, tzinfo=UTC)
PARAMS = MeterParams("m", 1_000_000, Fraction("0.15"), (100, 500), Fraction("0.05"))


def _book(i: int, wagers: tuple[tuple[int, int], ...] = ((1, 500), (3, 100))) -> BookContributions:
    return BookContributions(f"t1-r{i}", "t1", wagers, AT)


def _with_open(n: int):
    s = initial_state(PARAMS)
    for i in range(n):
        s, _ = apply(s, _book(i))
    return s


# --- the persistent mapping ------------------------------------------------------------------------------------

# a soak (PROGRESSIVE_SOAK=1) draws many more operation sequences than the default run
TOTALS_EXAMPLES = soak.cycles("METER_FLAT_EXAMPLES", default=60, soak=2000)

KEYS = st.sampled_from([f"k{i}" for i in range(12)])
CHANGES = st.lists(st.tuples(st.sampled_from(("set", "delete", "back")), KEYS, st.integers(0, 99)), max_size=120)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), CHANGES)
def test_the_persistent_map_is_a_dict_that_never_changes(start, changes):
    """Against a dict: the items in the same order after every change, and every earlier map as it was (a change
    is made on the latest map or on an earlier one)."""
    first = {f"s{i}": i for i in range(start)}
    versions = [(PersistentMap(first), dict(first))]
    for what, key, value in changes:
        m, d = versions[-1]
        if what == "back":  # go on from an earlier map: it must not have changed since
            m, d = versions[value % len(versions)]
            m, d = m.set(key, value), {**d, key: value}
        elif what == "set":
            m, d = m.set(key, value), {**d, key: value}
        elif key in d:
            m, d = m.delete(key), {k: v for k, v in d.items() if k != key}
        else:
            with pytest.raises(KeyError):
                m.delete(key)
            continue
        versions.append((m, d))
        assert len(m._over) <= max(MIN_OVERLAY, isqrt(len(m._base)))
    for m, d in versions:
        assert list(m.items()) == list(d.items()) and list(m) == list(d) and list(m.values()) == list(d.values())
        assert len(m) == len(d) and m == d and dict(m) == d
        for k in [f"k{i}" for i in range(12)]:
            assert (k in m) == (k in d) and m.get(k, "none") == d.get(k, "none")
            if k not in d:
                with pytest.raises(KeyError):
                    m[k]


def test_a_change_shares_the_base_and_copies_a_small_overlay():
    m = PersistentMap({f"k{i}": i for i in range(10_000)})
    changed = m.set("k5", -5).delete("k7").set("new", 1)
    assert changed._base is m._base and len(changed._over) == 3
    assert m["k5"] == 5 and "k7" in m and "new" not in m and len(m) == 10_000 and len(changed) == 10_000
    for i in range(200):  # past the square root of the base, the overlay is merged into a new one
        changed = changed.set(f"more{i}", i)
    assert changed._base is not m._base and len(changed._over) <= isqrt(len(changed._base))
    assert list(changed)[:6] == ["k0", "k1", "k2", "k3", "k4", "k5"] and changed["k5"] == -5 and "k7" not in changed


# --- the running totals ------------------------------------------------------------------------------------------


def _touched(state, op) -> str:
    if isinstance(op, PayLockedAward) or type(op).__name__ == "ReleaseLockedAward":
        a = state.locked.get(op.claim)
        return a.round_id if a is not None else ""
    return getattr(op, "round_id", "")


@settings(max_examples=TOTALS_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_params(), st.data())
def test_the_running_totals_are_always_the_sum_recomputed(p, data):
    """Over random operations (refused ones among them): the running totals equal the sum over the open rounds
    taken afresh, the check `apply` makes agrees with the full check, the open rounds are in the order a dict kept
    them, and the snapshot is the one a state holding a dict gives."""
    state = initial_state(p)
    model: dict = {}  # the open rounds as the dict that held them before
    for step in range(data.draw(st.integers(1, 60))):
        op = draw_op(data, state, f"r{step}")
        if isinstance(op, InputError):
            continue
        rid = _touched(state, op)
        before_items = list(state.open_rounds.items())
        try:
            new, _ = apply(state, op)
        except InputError:
            assert list(state.open_rounds.items()) == before_items  # a refusal leaves the rounds as they were
            continue
        if rid in new.open_rounds:
            model[rid] = new.open_rounds[rid]
        else:
            model.pop(rid, None)
        state = new
        rounds = state.open_rounds
        assert isinstance(rounds, OpenRounds)
        assert rounds.totals == sum_totals(model.values())
        assert rounds.totals[0] == state.owed_cents
        assert step_failures(state, rid) == [] == invariant_failures(state)
        assert list(rounds.items()) == list(model.items())
    as_dict = with_maps(state, open_rounds=dict(model))
    assert json.dumps(state_to_dict(state)) == json.dumps(state_to_dict(as_dict))
    again = state_from_dict(json.loads(json.dumps(state_to_dict(state))))
    assert again == state and again.open_rounds.totals == state.open_rounds.totals


def test_running_totals_that_are_not_the_sum_are_caught():
    s, _ = apply(_with_open(3), PayPercentAward("t1-r1", "t1", 1, "dealer", "10% of meter", Fraction(10), AT, "sup",
                                                2))
    assert s.owed_cents > 0 and step_failures(s) == [] == invariant_failures(s)
    rounds = s.open_rounds.set("t1-r0", s.open_rounds["t1-r0"])
    rounds.totals = (rounds.totals[0] + 1, *rounds.totals[1:])  # one cent owed that no round owes
    bad = with_maps(s, open_rounds=rounds)
    assert any("owed_cents" in f for f in step_failures(bad))
    # the full check sums the rounds afresh: owed_cents is their sum; the running totals are not
    assert invariant_failures(bad) == [f"the running totals of the open rounds {list(rounds.totals)} are not their "
                                       f"sum {list(s.open_rounds.totals)}"]
    rounds = s.open_rounds.set("t1-r0", s.open_rounds["t1-r0"])
    rounds.totals = (*rounds.totals[:3], rounds.totals[3] - 1, *rounds.totals[4:])  # within every bound
    bad = with_maps(s, open_rounds=rounds)
    assert step_failures(bad) == []  # the totals are trusted by the step ...
    assert invariant_failures(bad) == [f"the running totals of the open rounds {list(rounds.totals)} are not their "
                                       f"sum {list(s.open_rounds.totals)}"]  # ... and checked by the full check


def test_the_step_check_finds_the_round_it_touched_among_the_recent_ones():
    s, _ = apply(_with_open(2), CloseRound("t1-r0", AT))
    bad = with_maps(s, recent_rounds=(*s.recent_rounds, "t1-r1"))
    assert step_failures(bad, "t1-r1") and invariant_failures(bad)
    assert step_failures(bad, "t1-r0") == []  # what was not touched is left to the full check


def test_apply_visits_no_open_round_but_the_one_it_moves(monkeypatch):
    """Book, pay, void and close on a meter with 3,000 open rounds read and write only their round: any walk over
    the open rounds (a copy, a sum, a search) fails here."""
    s = _with_open(3_000)

    def walked(self):
        raise AssertionError("an operation walked over every open round")

    monkeypatch.setattr(PersistentMap, "_items", walked)
    monkeypatch.setattr(PersistentMap, "__iter__", walked)
    for op in (_book(3_000), PayFixedAward("t1-r5", "t1", 1, "flush", "$5", 500, "table", AT, "sup"),
               VoidRound("t1-r6", AT, "misdeal"), CloseRound("t1-r5", AT), CloseRound("t1-r3000", AT)):
        s, _ = apply(s, op)
    assert len(s.open_rounds) == 2_998 and "t1-r6" not in s.open_rounds


def test_a_state_built_with_a_plain_mapping_is_still_checked_and_moved():
    s = _with_open(2)
    plain = replace(s, open_rounds=dict(s.open_rounds))  # dataclasses.replace keeps what it is given
    assert invariant_failures(plain) == [] and step_failures(plain) == []
    new, _ = apply(plain, CloseRound("t1-r0", AT))
    assert isinstance(new.open_rounds, OpenRounds) and list(new.open_rounds) == ["t1-r1"]
    check_invariant(new)


# --- the full check at the ledger ----------------------------------------------------------------------------------


def test_the_ledgers_reducer_runs_the_full_check_every_so_many_operations(monkeypatch):
    """A state that the step check passes but the full check does not (running totals off, within every bound):
    the reducer's check finds it within FULL_CHECK_EVERY + (open rounds) operations, and at once on a state it did
    not make."""
    r = MetersReducer()
    meters, _ = r.apply(r.initial(), "define-meter", define_meter_body(PARAMS, "tech", AT))
    for i in range(10):
        meters, _ = r.apply(meters, "book-contributions", op_body("m", _book(i)))
        r.check(meters)
    book = meter_engine._HANDLERS[BookContributions]

    def drifting(s, op):
        new, effect = book(s, op)
        rounds = new.open_rounds.set(op.round_id, new.open_rounds[op.round_id])
        rounds.totals = (*rounds.totals[:3], rounds.totals[3] - 1, *rounds.totals[4:])
        return with_maps(new, open_rounds=rounds), effect

    monkeypatch.setitem(meter_engine._HANDLERS, BookContributions, drifting)
    meters, _ = r.apply(meters, "book-contributions", op_body("m", _book(10)))
    fresh = MetersReducer()
    with pytest.raises(InvariantViolation, match="running totals"):
        fresh.check(meters)  # a state this reducer did not make: checked whole
    caught = None
    for i in range(11, 11 + FULL_CHECK_EVERY + 20):
        try:
            r.check(meters)
        except InvariantViolation:
            caught = i
            break
        meters, _ = r.apply(meters, "book-contributions", op_body("m", _book(i)))
    assert caught is not None and caught > 11  # not at once: the step check passed it; within the bound

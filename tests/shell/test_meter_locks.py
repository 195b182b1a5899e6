"""Locked awards on a linked meter (58 Pa. Code 605a.8): lock at the hit, pay on approval or release on rejection."""

from __future__ import annotations

import json
from datetime import timedelta
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_meter import AT, TIMES, D, U, book, draw_op, params, pct, refused, run, st_params

from controller.cli.common import show_meters
from controller.errors import InputError, RulesError
from controller.meter import (
    RECENT_CLAIMS,
    Adjust,
    BookContributions,
    ChangeParams,
    CloseRound,
    InvariantViolation,
    LockPercentAward,
    PayLockedAward,
    PayPercentAward,
    ReleaseLockedAward,
    TopUp,
    VoidRound,
    apply,
    check_invariant,
    initial_state,
    invariant_holds,
    op_from_dict,
    state_from_dict,
    state_to_dict,
)
from controller.meter.journal import define_meter_body, op_body
from controller.meter.parse import format_fraction
from controller.meter.state import with_maps
from controller.round.journal import JournalReducer
from controller.service.views import meter_json

LATER = AT + timedelta(minutes=3)


def lock(rid="r1", seat=3, percent=100, claim="c1", shares=1, hand="royal-flush", table="t1", at=AT, nonce=""):
    return LockPercentAward(
        rid, table, seat, hand, f"{format_fraction(Fraction(percent))}% of meter", Fraction(percent), at, claim, shares,
        nonce,
    )


def pay(claim="c1", at=AT):
    return PayLockedAward(claim, "sup-17", at)


def release(claim="c1", at=AT):
    return ReleaseLockedAward(claim, "sup-17", "the hand was misread", at)


def plain(s) -> dict:
    """The state as JSON, without the claim ids remembered after a lock is settled and the count of locks taken
    (they legitimately record it)."""
    d = state_to_dict(s)
    d.pop("settled_claims", None)
    d.pop("locks_taken", None)
    return d


def rich():
    """docs/meters.md, "A worked example": $10,100.00 at the ceiling, $6.50 reserve, $25.00 overflow."""
    p = params(rate=Fraction("0.20"), reserve_rate=Fraction("0.05"), ceiling_cents=1_010_000,
               wager_sizes=(500, 2500, 10_000))
    return run(initial_state(p), TopUp(9_900, AT, "floor manager", "promotion"),
               book("r1", ((5, 10_000), (3, 2500), (1, 500))))[0]


# --- the lock ------------------------------------------------------------------------------------


def test_lock_moves_the_meter_as_the_payout_would_and_holds_the_amount():
    s = rich()
    paid, pe = apply(s, pct("r1", 5))
    locked, le = apply(s, lock("r1", 5))
    for k in ("current", "seed", "reserve", "reserve_to_meter", "overflow", "overflow_to_meter"):
        assert getattr(locked, k) == getattr(paid, k), k
    assert locked.current == 10_000 * D and locked.reserve == 0 and locked.overflow == 0
    a = locked.locked["c1"]
    assert (a.amount_cents, a.meter_before, a.meter_after) == (1_010_000, 10_100 * D, 10_000 * D)
    assert (a.from_reserve, a.from_overflow, a.seeded) == (pe.from_reserve, pe.from_overflow, pe.seeded)
    assert a.from_reserve > 0 and a.from_overflow > 0 and a.seeded > 0
    # Not paid yet: no hit, no payout, no meter award; the booking is not marked paid.
    assert locked.history == () and locked.hit_count == 0 and locked.cumulative_payouts_cents == 0
    assert locked.meter_awards == 0 and locked.paid_by_attendant_cents == 0
    assert not locked.open_rounds["r1"].paid
    d = le.to_dict()
    assert d["kind"] == "lock-percent-award" and d["claim"] == "c1" and d["amount"] == "10100.00"
    assert d["meter_before"] == "10100.00" and d["meter_after"] == "10000.00"
    assert d["paid"] == "0.00" and d["taken"] == "10100.00" and d["reset"] is True and "hit_number" not in d
    assert d["seeded"] == pe.to_dict()["seeded"]


def test_partial_lock_is_floored_to_the_cent_and_the_remainder_stays():
    s = run(initial_state(params()), book("r1", ((3, 2500),)), Adjust(1_000 * D, "migration", "b 9", AT))[0]
    s2, e = apply(s, lock("r1", 3, percent=1))
    # 1% of $11,003.75 = $110.0375 -> $110.03; the meter stays above its reset amount, the $0.0075 with it.
    assert e.amount_cents == e.taken_cents == 110_03 and not e.reset
    assert s2.current == s.current - 110_03 * U == 10_893_72 * U
    s = run(initial_state(params()), book("r1", ((3, 2500),)))[0]  # $10,003.75, $1.25 reserve
    s2, e = apply(s, lock("r1", 3, percent=50))
    # 50% = $5,001.875 -> $5,001.87; $5,001.88 is left; the reset takes the reserve, then seed.
    assert e.amount_cents == 5_001_87 and e.reset and e.from_reserve == 125 * U
    assert e.seeded == 10_000 * D - 5_001_88 * U - 125 * U and s2.current == 10_000 * D


def test_lock_needs_the_round_open_at_that_table_and_a_wagering_seat():
    s = run(initial_state(params()), book("r1"), book("r2", table="t2"), CloseRound("r2", AT))[0]
    refused(s, lock("r2", claim="c1", table="t2"), "round_id")  # closed: as PayPercentAward
    refused(s, lock("nope"), "round_id")
    refused(s, lock("r1", table="t2"), "table")
    refused(s, lock("r1", seat=4), "seat")
    refused(s, lock("r1", shares=2), "shares")  # one seat wagered


def test_a_claim_id_is_used_once_per_meter():
    s = run(initial_state(params()), book("r1", ((3, 500), (4, 500))), lock("r1", 3, 10, "c1"))[0]
    assert "already locked" in refused(s, lock("r1", 4, 10, "c1"), "claim")
    s = run(s, pay("c1"))[0]
    assert "paid or released" in refused(s, lock("r1", 4, 10, "c1"), "claim")
    s = run(s, lock("r1", 4, 10, "c2"), release("c2"))[0]
    assert "paid or released" in refused(s, lock("r1", 4, 10, "c2"), "claim")
    assert s.settled_claims == ("c1", "c2")


def test_settled_claims_are_remembered_up_to_a_bound():
    s = run(initial_state(params()), book("r1", ((3, 500),)))[0]
    for i in range(RECENT_CLAIMS + 2):
        s = run(s, lock("r1", 3, Fraction(1, 100), f"c{i}"), release(f"c{i}"))[0]
    assert len(s.settled_claims) == RECENT_CLAIMS and s.settled_claims[0] == "c2"
    s = run(s, lock("r1", 3, Fraction(1, 100), "c0"))[0]  # beyond the window: the ledger's idempotency key


def test_every_lock_has_a_number_its_meter_never_gives_again():
    """A lock's number (and the authority's nonce) names it for the approval of its payment
    (controller.linkproto.approval): the same claim id locked again once the meter has forgotten it gets a new number, so
    an approval of the first cannot pay the second. A lock journaled before numbers (no nonce) replays as it was:
    number 0, and a result without them."""
    def nonce(i: int) -> str:
        return f"{i:032x}"

    s = run(initial_state(params()), book("r1", ((3, 500),)))[0]
    s, effect = apply(s, lock("r1", 3, Fraction(1, 100), "c0", nonce=nonce(0)))
    assert s.locked["c0"].number == effect.lock == 1 == s.locks_taken and s.locked["c0"].nonce == nonce(0)
    assert effect.to_dict()["lock"] == 1 and effect.to_dict()["nonce"] == nonce(0)
    s = run(s, release("c0"))[0]
    for i in range(1, RECENT_CLAIMS + 1):
        s = run(s, lock("r1", 3, Fraction(1, 100), f"c{i}", nonce=nonce(i)), release(f"c{i}"))[0]
    assert "c0" not in s.settled_claims
    s, effect = apply(s, lock("r1", 3, Fraction(1, 100), "c0", nonce=nonce(99999)))  # the claim id, forgotten
    assert s.locked["c0"].number == effect.lock == RECENT_CLAIMS + 2 == s.locks_taken
    assert state_from_dict(json.loads(json.dumps(state_to_dict(s)))) == s
    assert not invariant_holds(with_maps(s, locks_taken=1))  # a lock numbered beyond the count: not this meter's
    assert "lock" not in apply(s, pay("c0"))[1].to_dict()  # only a lock's answer carries it
    old, effect = apply(run(initial_state(params()), book("r1", ((3, 500),)))[0], lock("r1", 3, 10, "c1"))
    assert old.locked["c1"].number == 0 and old.locks_taken == 0 and "lock" not in effect.to_dict()
    assert "locks_taken" not in state_to_dict(old) and "number" not in state_to_dict(old)["locked"]["c1"]


def test_two_locks_in_one_round_take_in_turn():
    s = run(initial_state(params()), book("r1", ((3, 500), (4, 2500))))[0]
    before = s.current
    s, e1 = apply(s, lock("r1", 3, 10, "c1"))
    s, e2 = apply(s, lock("r1", 4, 10, "c2"))
    assert e2.meter_before == e1.meter_after  # the second is taken from what the meter holds then
    s2 = run(s, release("c1"), release("c2"))[0]
    assert s2.current == before and s2.locked == {}
    s3 = run(s, pay("c2"), pay("c1"))[0]
    assert [h.seat for h in s3.history] == [4, 3]  # hits are numbered in the order they are paid


# --- pay ------------------------------------------------------------------------------------------


def test_pay_locked_is_the_payout_the_percent_award_would_have_made():
    s = rich()
    direct, de = apply(s, pct("r1", 5))
    locked, _ = apply(s, lock("r1", 5))
    paid, pe = apply(locked, pay("c1"))
    assert plain(paid) == plain(direct)
    assert paid.history == direct.history and paid.history[0].approved_by == "sup-17"
    assert (paid.history[0].meter_before, paid.history[0].meter_after) == (10_100 * D, 10_000 * D)
    assert paid.locked == {} and paid.settled_claims == ("c1",)
    d = pe.to_dict()
    assert d["kind"] == "pay-locked-award" and d["claim"] == "c1" and d["amount"] == d["paid"] == "10100.00"
    assert d["meter_before"] == d["meter_after"] == "10000.00" and d["taken"] == "0.00"
    assert d["hit_number"] == 1 and de.to_dict()["hit_number"] == 1


def test_pay_locked_records_the_meter_as_it_was_at_the_lock():
    s = run(initial_state(params()), book("r1", ((3, 500),)), lock("r1"), book("r2", ((1, 2500),), table="t2"))[0]
    s, e = apply(s, pay("c1", LATER))
    h = s.history[-1]
    assert h.meter_before == 10_000 * D + 75 * U and h.meter_after == 10_000 * D and h.at == LATER
    assert e.meter_before == e.meter_after == s.current == 10_000 * D + 375 * U


def test_pay_or_release_of_an_unknown_or_settled_claim_is_refused():
    s = run(initial_state(params()), book("r1"))[0]
    assert "never locked" in refused(s, pay("c9"), "claim")
    assert "never locked" in refused(s, release("c9"), "claim")
    s = run(s, lock("r1"), pay("c1"))[0]
    assert "paid or released" in refused(s, pay("c1"), "claim")
    assert "paid or released" in refused(s, release("c1"), "claim")


# --- release -------------------------------------------------------------------------------------


def test_release_puts_everything_back_as_if_never_locked():
    s = rich()
    back, e = run(s, lock("r1", 5), release("c1"))
    assert plain(back) == plain(s)
    assert back.settled_claims == ("c1",) and back.history == ()
    d = e[1].to_dict()
    assert d["kind"] == "release-locked-award" and d["claim"] == "c1" and d["amount"] == "10100.00"
    assert d["meter_before"] == "10000.00" and d["meter_after"] == "10100.00" and d["taken"] == "-10100.00"
    assert d["seeded"] == "-" + e[0].to_dict()["seeded"]
    assert d["from_reserve"] == "-" + e[0].to_dict()["from_reserve"]
    assert d["from_overflow"] == "-" + e[0].to_dict()["from_overflow"]
    # And the round can be voided again (nothing was paid in it).
    run(back, VoidRound("r1", AT, "misdeal"))


def test_release_keeps_the_contributions_booked_since_the_lock():
    s = run(initial_state(params()), book("r1", ((3, 2500),)))[0]
    before = s.current
    s = run(s, lock("r1", 3, 50), book("r2", ((1, 500), (2, 100)), table="t2"), release("c1"))[0]
    assert s.current == before + 90 * U and s.reserve == 155 * U  # $6.00 x 0.15; $31.00 x 0.05


def test_release_above_the_ceiling_sends_the_excess_to_the_overflow():
    s = run(initial_state(params(ceiling_cents=1_000_500)), book("r1", ((3, 2500),)))[0]  # $3.75 of $5 room
    s = run(s, book("r2", ((1, 2500),), table="t2"))[0]  # the meter reaches its ceiling ($10,005); $2.50 overflows
    assert s.current == 10_005 * D and s.overflow == 250 * U
    s = run(s, lock("r1", 3, Fraction(1, 100)))[0]  # $1.00: 0.01% of $10,005, floored
    s = run(s, book("r3", ((1, 2500),), table="t2"))[0]  # back at the ceiling: $3.75 - $1.00 more overflows
    overflow = s.overflow
    s, e = apply(s, release("c1"))
    assert s.current == 10_005 * D and e.overflowed == 100 * U and s.overflow == overflow + 100 * U
    assert s.released_to_overflow == 100 * U
    check_invariant(s)
    d = json.loads(json.dumps(state_to_dict(s)))
    assert d["released_to_overflow"] == "1.00" and state_from_dict(d) == s


def test_release_after_another_award_restores_the_floor_with_seed():
    # A partial lock whose reset carries the overflow onto the meter; a 100% award then resets it: giving the
    # carried overflow back would take the meter below its reset amount, so the operator restores it (seed).
    p = params(rate=Fraction("0.5"), reserve_rate=Fraction(0), ceiling_cents=1_000_300, wager_sizes=(100_000,))
    s = run(initial_state(p), book("r1", ((3, 100_000), (4, 100_000))), Adjust(-3 * D, "correction", "b 9", AT))[0]
    assert (s.current, s.overflow) == (10_000 * D, 997 * D)
    s, e = apply(s, lock("r1", 3, 1))  # $100.00; $100.00 of overflow resets, $3.00 more carries to the ceiling
    assert (e.from_overflow, e.seeded, s.current) == (103 * D, 0, 10_003 * D)
    s = run(s, pct("r1", 4))[0]  # the rest of the overflow and seed reset the meter
    assert (s.current, s.overflow) == (10_000 * D, 0)
    seed = s.seed
    s, e = apply(s, release("c1"))
    assert (s.current, s.overflow, e.seeded, s.seed) == (10_000 * D, 103 * D, 3 * D, seed + 3 * D)
    check_invariant(s)


def test_release_after_a_void_does_not_put_back_reserve_the_void_took_back():
    s = run(initial_state(params()), book("r0", ((1, 100),), table="t0"), book("r1", ((3, 500),)))[0]
    s = run(s, lock("r1", 3))[0]  # the reset takes r0's and r1's reserve
    s = run(s, VoidRound("r0", AT, "misdeal"))[0]  # r0's reserve is taken back from the meter
    s, e = apply(s, release("c1"))
    check_invariant(s)
    assert s.reserve == s.reserve_in == 25 * U and s.reserve_to_meter == 0  # r1's $5 x 0.05
    assert e.from_reserve == -25 * U


# --- what a pending lock blocks ------------------------------------------------------------------


def test_void_close_and_change_params_are_refused_while_a_lock_is_pending():
    s = run(initial_state(params()), book("r1"), book("r2", ((1, 100),), table="t2"), lock("r1"))[0]
    assert "pay or release" in refused(s, VoidRound("r1", AT, "misdeal"), "round_id")
    assert "pay or release" in refused(s, CloseRound("r1", AT), "round_id")
    assert "pay or release" in refused(s, ChangeParams(params(rate=Fraction("0.2")), "ops", AT), "params")
    s = run(s, VoidRound("r2", AT, "misdeal"))[0]  # another table's round is not held up
    paid = run(s, pay("c1"))[0]
    refused(paid, VoidRound("r1", AT, "misdeal"), "round_id")  # an award was paid in it
    run(paid, CloseRound("r1", AT))
    released = run(s, release("c1"))[0]
    run(released, CloseRound("r1", AT))
    run(released, VoidRound("r1", AT, "misdeal"))


# --- shared dealer-hand awards -------------------------------------------------------------------


def test_shared_award_locked_then_paid_is_the_shared_payout():
    s = run(initial_state(params()), book("r1", ((2, 500), (4, 500), (6, 500))))[0]
    direct = run(s, pct("r1", 2, shares=3, hand="dealer-royal"))[0]
    locked, e = apply(s, lock("r1", 2, shares=3, hand="dealer-royal"))
    assert e.amount_cents * 3 == e.taken_cents
    # The other sharers wait for the first: taking the award again would take it twice.
    assert "pay or release" in refused(locked, pct("r1", 4, shares=3, hand="dealer-royal"), "shares")
    assert "pay or release" in refused(locked, lock("r1", 4, shares=3, hand="dealer-royal", claim="c2"), "shares")
    paid = run(locked, pay("c1"))[0]
    assert plain(paid) == plain(direct) and paid.owed_cents == 2 * e.amount_cents
    refused(paid, CloseRound("r1", AT), "round_id")  # two shares still owed
    refused(paid, lock("r1", 4, shares=3, hand="dealer-royal", claim="c2"), "shares")  # already taken
    done = run(paid, pct("r1", 4, shares=3, hand="dealer-royal"), pct("r1", 6, shares=3, hand="dealer-royal"),
               CloseRound("r1", AT))[0]
    assert done.owed_cents == 0 and done.hit_count == 3
    # Released, the next sharer's award is taken afresh.
    back = run(locked, release("c1"))[0]
    assert plain(back) == plain(s)
    run(back, pct("r1", 4, shares=3, hand="dealer-royal"))


# --- the operations as values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: lock(claim=""), "claim"),
        (lambda: lock(claim="c 1"), "claim"),
        (lambda: lock(percent=0), "percent"),
        (lambda: lock(seat=0), "seat"),
        (lambda: lock(shares=0), "shares"),
        (lambda: lock(rid=""), "round_id"),
        (lambda: LockPercentAward("r1", "t1", 3, "royal-flush", "10% of meter", Fraction(100), AT, "c1"), "award"),
        (lambda: LockPercentAward("r1", "t1", 3, "royal-flush", "100% of meter", 100.0, AT, "c1"), "percent"),
        (lambda: PayLockedAward("c1", "", AT), "approved_by"),
        (lambda: PayLockedAward("", "s", AT), "claim"),
        (lambda: PayLockedAward("c1", "s", AT.replace(tzinfo=None)), "at"),
        (lambda: ReleaseLockedAward("c1", "", "why", AT), "rejected_by"),
        (lambda: ReleaseLockedAward("c1", "s", " ", AT), "reason"),
        (lambda: ReleaseLockedAward("c1", "s", "why", "2025-01-31"), "at"),
    ],
)
def test_lock_operations_refused_at_construction_naming_the_field(make, field):
    with pytest.raises(InputError) as info:
        make()
    assert info.value.field == field, info.value


@pytest.mark.parametrize(
    "d, field",
    [
        ({"kind": "lock-percent-award", "round_id": "r1", "table": "t1", "seat": 3, "hand": "royal-flush",
          "award": "100% of meter", "percent": "100", "at": "2025-01-31T21:05:00Z"}, "op.claim"),
        ({"kind": "lock-percent-award", "round_id": "r1", "table": "t1", "seat": 3, "hand": "royal-flush",
          "award": "100% of meter", "percent": "100", "at": "2025-01-31T21:05:00Z", "claim": "c1",
          "approved_by": "s"}, "op.approved_by"),
        ({"kind": "pay-locked-award", "claim": "c1", "approved_by": "s", "at": "2025-01-31T21:05:00"}, "op.at"),
        ({"kind": "pay-locked-award", "claim": "c1", "approved_by": "s", "at": "2025-01-31T21:05:00Z",
          "paid_by": "table"}, "op.paid_by"),
        ({"kind": "release-locked-award", "claim": "c1", "rejected_by": "s", "at": "2025-01-31T21:05:00Z"},
         "op.reason"),
        ({"kind": "release-locked-award", "claim": 7, "rejected_by": "s", "reason": "r",
          "at": "2025-01-31T21:05:00Z"}, "op.claim"),
    ],
)
def test_lock_operations_from_dict_refused_naming_the_key(d, field):
    with pytest.raises(InputError) as info:
        op_from_dict(d, "op")
    assert info.value.field == field, info.value


@pytest.mark.parametrize("op", [lock(shares=2, percent=Fraction("12.5")), pay(), release()])
def test_lock_operations_round_trip_through_json(op):
    d = json.loads(json.dumps(op.to_dict()))
    assert op_from_dict(d) == op and type(op).from_dict(d) == op and op_from_dict(d).to_dict() == d


def test_lock_operation_keys():
    assert list(lock().to_dict()) == [
        "kind", "round_id", "table", "seat", "hand", "award", "percent", "at", "claim", "shares"]
    assert list(pay().to_dict()) == ["kind", "claim", "approved_by", "at"]
    assert list(release().to_dict()) == ["kind", "claim", "rejected_by", "reason", "at"]


# --- snapshots, the invariant, the journal, the audit ----------------------------------------------


def test_snapshot_with_locks_round_trips_and_one_without_the_new_keys_still_loads():
    s = run(rich(), lock("r1", 5, 10, "c1"), lock("r1", 3, 10, "c2"), release("c2"))[0]
    d = json.loads(json.dumps(state_to_dict(s)))
    assert set(d["locked"]) == {"c1"} and d["settled_claims"] == ["c2"]
    assert state_from_dict(d) == s
    bad = json.loads(json.dumps(d))
    bad["locked"]["c1"]["amount"] = "1.00"
    with pytest.raises(InputError, match="does not balance"):
        state_from_dict(bad, "snapshot")
    bad = json.loads(json.dumps(d))
    bad["locked"]["c1"]["extra"] = 1
    with pytest.raises(InputError) as info:
        state_from_dict(bad, "snapshot")
    assert info.value.field == "snapshot.locked.c1.extra"
    # A state that never locked writes none of the new keys: checkpoints of older journals keep their digest.
    old = state_to_dict(rich())
    assert not {"locked", "settled_claims", "released_to_overflow", "locks_taken"} & set(old)
    assert state_from_dict(old) == rich()


def test_the_invariant_counts_locked_awards():
    s = run(rich(), lock("r1", 5))[0]
    check_invariant(s)
    from dataclasses import replace

    from controller.meter.state import with_maps

    a = s.locked["c1"]
    for broken in (
        with_maps(s, locked={}),  # the locked amount vanished
        with_maps(s, locked={"c1": replace(a, amount_cents=a.amount_cents + 1)}),
        with_maps(s, locked={"c1": replace(a, round_id="r9")}),
        with_maps(s, settled_claims=("c1",)),
    ):
        assert not invariant_holds(broken)
    with pytest.raises(InvariantViolation, match="locked"):
        check_invariant(with_maps(s, locked={}))


def test_meters_reducer_journals_locks_and_leaves_other_results_as_they_were():
    r = JournalReducer()
    p = params()
    st_ = r.apply(r.initial(), "define-meter", define_meter_body(p, "installer", AT))[0]
    results = []
    for op in (book("r1", ((3, 500), (4, 500))), pct("r1", 4, 10), lock("r1", 3, 100, "c1"), pay("c1")):
        st_, res = r.apply(st_, op.kind, json.loads(json.dumps(op_body(p.meter_id, op))))
        results.append(res)
        r.check(st_)
    assert "claim" not in results[0] and "locked" not in results[1]  # the results of the others are unchanged
    assert results[2]["claim"] == "c1" and results[3]["hit_number"] == 2
    again = r.restore(json.loads(json.dumps(r.snapshot(st_))))
    assert state_to_dict(again[p.meter_id]) == state_to_dict(st_[p.meter_id])


def test_audit_shows_locked_awards(capsys):
    s = run(rich(), lock("r1", 5, 100, "CS-07-r1-c1"))[0]
    j = meter_json(s)
    assert j["locked"] == [
        {"claim": "CS-07-r1-c1", "amount": "10100.00", "table": "t1", "seat": 5, "award": "royal-flush: 100% of meter"}
    ]
    assert meter_json(rich())["locked"] == []
    show_meters([j])
    assert "locked CS-07-r1-c1: $10100.00 table t1 seat 5" in capsys.readouterr().out


# --- properties ------------------------------------------------------------------------------------


def _random_state(p, data, steps):
    """A meter after random operations (valid and invalid mixed), with a round open at table t1."""
    s = initial_state(p)
    for step in range(steps):
        op = draw_op(data, s, f"r{step}")
        if isinstance(op, InputError):
            continue
        try:
            s = apply(s, op)[0]
        except InputError:
            continue
    wagers = tuple((seat, data.draw(st.sampled_from(s.params.wager_sizes))) for seat in (1, 2, 3))
    return apply(s, BookContributions("rx", "t1", wagers, AT))[0]


def _award(data):
    percent = data.draw(st.sampled_from((Fraction(100), Fraction(50), Fraction(10), Fraction(1, 10), Fraction("12.5"))))
    return percent, data.draw(st.sampled_from((1, 1, 2, 3))), data.draw(st.sampled_from((1, 2, 3)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_params(), st.data())
def test_lock_then_release_is_never_locked_and_lock_then_pay_is_the_payout(p, data):
    s = _random_state(p, data, data.draw(st.integers(0, 25)))
    percent, shares, seat = _award(data)
    award = f"{format_fraction(percent)}% of meter"
    at = data.draw(TIMES)
    paid_at = data.draw(TIMES)
    lk = LockPercentAward("rx", "t1", seat, "royal-flush", award, percent, at, "claim-x", shares)
    direct = PayPercentAward("rx", "t1", seat, "royal-flush", award, percent, paid_at, "sup-17", shares)
    try:
        direct_state, direct_effect = apply(s, direct)
    except RulesError as e:  # a shared award already taken in this round: the lock is refused alike
        assert e.field == "shares"
        with pytest.raises(RulesError):
            apply(s, lk)
        return
    locked, le = apply(s, lk)
    assert invariant_holds(locked)
    assert (le.meter_before, le.meter_after, le.taken_cents, le.amount_cents) == (
        direct_effect.meter_before, direct_effect.meter_after, direct_effect.taken_cents, direct_effect.paid_cents)
    released = apply(locked, ReleaseLockedAward("claim-x", "sup-17", "rejected", paid_at))[0]
    assert plain(released) == plain(s)
    paid, pe = apply(locked, PayLockedAward("claim-x", "sup-17", paid_at))
    assert plain(paid) == plain(direct_state)
    assert pe.paid_cents == direct_effect.paid_cents and pe.hit == direct_effect.hit
    for state in (released, paid):
        assert state_from_dict(json.loads(json.dumps(state_to_dict(state)))) == state


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_params(), st.data())
def test_release_after_other_tables_played_keeps_their_contributions(p, data):
    s = _random_state(p, data, data.draw(st.integers(0, 10)))
    percent, _, seat = _award(data)
    lk = LockPercentAward("rx", "t1", seat, "royal-flush", f"{format_fraction(percent)}% of meter", percent, AT, "c")
    locked, le = apply(s, lk)
    never = s
    for i in range(data.draw(st.integers(0, 5))):
        op = BookContributions(f"o{i}", "t2", tuple((seat_, data.draw(st.sampled_from(s.params.wager_sizes)))
                                                     for seat_ in range(1, data.draw(st.integers(1, 4)))), AT)
        locked = apply(locked, op)[0]
        never = apply(never, op)[0]
        assert invariant_holds(locked)
    back = apply(locked, ReleaseLockedAward("c", "sup-17", "rejected", AT))[0]
    assert back.reserve == never.reserve and back.seed == never.seed
    assert back.current + back.overflow == never.current + never.overflow
    if le.meter_after <= le.meter_before:  # no overflow carried onto the meter by the lock's reset
        assert back.current == never.current and back.overflow == never.overflow


def test_one_percentage_award_a_round_seat_and_hand_whatever_the_claim_id():
    """A hand paid, or locked and not released, is not taken again under another claim id (a second claim of the
    hand, or a lock someone sent in the table's name); a released one may be locked again; another seat's or hand's
    is its own."""
    s = run(initial_state(params()), book(wagers=((3, 500), (4, 500))))[0]
    locked = apply(s, lock(claim="c1"))[0]
    assert "is locked under claim c1" in refused(locked, lock(claim="c2"), "hand")
    assert "is locked under claim c1" in refused(locked, pct(), "hand")
    paid = apply(locked, pay("c1"))[0]
    assert "was paid in round r1" in refused(paid, lock(claim="c2"), "hand")
    assert "was paid in round r1" in refused(paid, pct(), "hand")
    apply(paid, lock(claim="c3", seat=4))  # another seat
    apply(paid, lock(claim="c3", hand="straight-flush", percent=10))  # another hand of the seat
    back = apply(locked, release("c1"))[0]
    apply(back, lock(claim="c2"))  # released: nothing was paid
    direct = apply(s, pct())[0]
    assert "was paid in round r1" in refused(direct, lock(claim="c2"), "hand")
    assert state_from_dict(json.loads(json.dumps(state_to_dict(paid)))) == paid  # `awarded` in the snapshot
    assert "awarded" not in json.dumps(state_to_dict(s))  # only when there is one: older snapshots as they were


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_params(), st.data())
def test_random_locks_payments_and_releases_pay_each_hand_at_most_once(p, data):
    """Any sequence of locks (under fresh or reused claim ids, for any seat and hand), payments, releases and
    direct percentage payments: at most one percentage award is paid per round, seat and hand, and the invariant
    holds after each step."""
    s = _random_state(p, data, data.draw(st.integers(0, 5)))
    hands = ("royal-flush", "straight-flush")
    for step in range(data.draw(st.integers(1, 25))):
        what = data.draw(st.sampled_from(("lock", "lock", "pay", "release", "direct")))
        claim = f"c{data.draw(st.integers(1, 4))}"
        seat, hand = data.draw(st.sampled_from((1, 2, 3))), data.draw(st.sampled_from(hands))
        percent = 100 if hand == "royal-flush" else 10
        match what:
            case "lock":
                op = lock("rx", seat, percent, claim, hand=hand, at=AT + timedelta(seconds=step))
            case "pay":
                op = pay(claim)
            case "release":
                op = release(claim)
            case _:
                op = PayPercentAward("rx", "t1", seat, hand, f"{percent}% of meter", Fraction(percent), AT, "sup-17")
        try:
            s = apply(s, op)[0]
        except RulesError:
            continue
        assert invariant_holds(s)
        paid = [(h.seat, h.hand) for h in s.history if h.round_id == "rx" and h.award.endswith("% of meter")]
        assert len(paid) == len(set(paid)), paid
        held = [(a.seat, a.hand) for a in s.locked.values() if a.round_id == "rx"]
        assert len(held) == len(set(held)) and not set(held) & set(paid), (held, paid)


def test_an_award_shared_on_the_dealers_hand_is_taken_once_whatever_its_shares():
    """Paid as shared by two, the dealer's hand's award is not locked or paid again in the round as shared by three,
    or unshared; while it is locked, neither is taken."""
    s = run(initial_state(params()), book(wagers=((2, 500), (4, 500), (6, 500))))[0]
    dealer = "dealer-royal"
    locked = apply(s, lock(seat=2, shares=2, hand=dealer))[0]
    assert "is locked under claim c1" in refused(locked, lock(seat=4, shares=3, hand=dealer, claim="c2"), "hand")
    assert "is locked under claim c1" in refused(locked, pct(seat=6, hand=dealer), "hand")
    paid = apply(locked, pay("c1"))[0]
    for again in (lock(seat=4, shares=3, hand=dealer, claim="c2"), lock(seat=6, hand=dealer, claim="c3"),
                  pct(seat=6, hand=dealer), pct(seat=4, shares=3, hand=dealer)):
        assert "as a shared award" in refused(paid, again, "hand")
    apply(paid, pct(seat=4, shares=2, hand=dealer))  # the other share of the same award: paid, not taken

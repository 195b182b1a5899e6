"""`apply(state, op) -> (new_state, Effect)`: the one pure function that moves the meter.

Refusals raise RulesError (well formed but not allowed now) or InputError naming the field at fault;
the state passed in is never changed (it is immutable). Every new state is checked against the
invariant before it is returned: what the operation touched, with the running totals of the open
rounds (controller.meter.state.step_failures), at a cost that does not grow with the open rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from controller.errors import InputError, RulesError
from controller.meter.award import take_percent
from controller.meter.ops import (
    Adjust,
    BookContributions,
    ChangeParams,
    CloseRound,
    LockPercentAward,
    Op,
    PayFixedAward,
    PayLockedAward,
    PayPercentAward,
    ReleaseLockedAward,
    TopUp,
    VoidRound,
)
from controller.meter.state import (
    RECENT_CLAIMS,
    RECENT_ROUNDS,
    Booking,
    Hit,
    LockedAward,
    MeterState,
    OpenRounds,
    SharedAward,
    check_step,
    hit_label,
    open_rounds_of,
    with_maps,
)
from controller.money import UNITS_PER_CENT, format_cents, format_dollars_human, format_units


@dataclass(frozen=True)
class Effect:
    """What an operation did. Units are meter units; signed deltas are negative when money was taken back."""

    kind: str
    meter_before: int
    meter_after: int
    round_id: str = ""
    contributed: int = 0  # units added to the visible meter by wagers (negative: reversed by a void)
    reserved: int = 0  # units added to the reserve (negative: reversed)
    overflowed: int = 0  # units added to the overflow (negative: reversed)
    paid_cents: int = 0  # paid to the payee of this operation
    taken_cents: int = 0  # taken from the meter by this operation (every share of a shared award)
    reset: bool = False  # the award took the meter below its reset amount; it was restored
    from_reserve: int = 0  # units moved from the reserve to the visible meter
    from_overflow: int = 0  # units moved from the overflow to the visible meter
    seeded: int = 0  # units of operator money put on the meter (seed)
    adjusted: int = 0  # units of an authorized adjustment
    hit: Hit | None = None
    claim: str = ""  # a locked award's claim id (lock, pay-locked, release)
    amount_cents: int = 0  # that claim's amount for its seat: locked, paid or released
    lock: int = 0  # a lock's number (LockedAward.number), in the answer to the lock
    nonce: str = ""  # and its nonce

    def to_dict(self) -> dict[str, Any]:
        u = format_units
        d: dict[str, Any] = {
            "kind": self.kind,
            "meter_before": u(self.meter_before),
            "meter_after": u(self.meter_after),
            "round_id": self.round_id,
            "contributed": u(self.contributed),
            "reserved": u(self.reserved),
            "overflowed": u(self.overflowed),
            "paid": format_cents(self.paid_cents),
            "taken": format_cents(self.taken_cents),
            "reset": self.reset,
            "from_reserve": u(self.from_reserve),
            "from_overflow": u(self.from_overflow),
            "seeded": u(self.seeded),
            "adjusted": u(self.adjusted),
        }
        if self.hit is not None:
            d["hit_number"] = self.hit.number
        if self.claim:  # only the lock operations: the results of the others stay as journaled
            d["claim"] = self.claim
            d["amount"] = format_cents(self.amount_cents)
        if self.lock:  # only a numbered lock's: the results of the locks journaled before stay as they were
            d["lock"] = self.lock
            d["nonce"] = self.nonce
        return d


def apply(state: MeterState, op: Op) -> tuple[MeterState, Effect]:
    """The state after `op` and what it did; raises RulesError/InputError, changing nothing, if not allowed."""
    handler = _HANDLERS.get(type(op))
    if handler is None:
        raise InputError("kind", f"not a meter operation: {type(op).__name__}")
    new, effect = handler(state, op)
    # The state before held the invariant (every state does: `apply` made it, or a snapshot restored was checked
    # whole): only what the operation touched is checked again, with the running totals.
    check_step(new, getattr(op, "round_id", ""))
    return new, effect


# --- contributions -----------------------------------------------------------------------------


def _book(s: MeterState, op: BookContributions) -> tuple[MeterState, Effect]:
    p = s.params
    if op.round_id in s.open_rounds:
        raise RulesError("round_id", f"round {op.round_id} is already booked")
    if op.round_id in s.recent_set:
        raise RulesError("round_id", f"round {op.round_id} was booked before and is closed or voided")
    for i, (seat, cents) in enumerate(op.wagers):
        if cents not in p.wager_sizes:
            accepted = ", ".join(format_dollars_human(c) for c in p.wager_sizes)
            raise RulesError(
                f"wagers[{i}].cents",
                f"seat {seat}: {format_dollars_human(cents)} is not an accepted wager on meter {p.meter_id} "
                f"(accepted: {accepted})",
            )
    cents = sum(c for _, c in op.wagers)
    contribution = cents * p.rate_units
    reserved = cents * p.reserve_units
    to_meter = contribution
    ceiling = p.ceiling_units
    if ceiling is not None:
        to_meter = min(contribution, max(0, ceiling - s.current))
    overflowed = contribution - to_meter
    booking = Booking(
        table=op.table, wagers=op.wagers, contributed=to_meter, reserved=reserved, overflowed=overflowed,
        booked_at=op.at, on_dealer=op.on_dealer, round_meters=op.round_meters,
    )
    new = with_maps(
        s,
        current=s.current + to_meter,
        contributions=s.contributions + to_meter,
        reserve=s.reserve + reserved,
        reserve_in=s.reserve_in + reserved,
        overflow=s.overflow + overflowed,
        overflow_in=s.overflow_in + overflowed,
        wagers_count=s.wagers_count + len(op.wagers),
        wagers_cents=s.wagers_cents + cents,
        open_rounds=_rounds(s).set(op.round_id, booking),
    )
    return new, Effect(
        op.kind, s.current, new.current, op.round_id, contributed=to_meter, reserved=reserved, overflowed=overflowed
    )


def _void(s: MeterState, op: VoidRound) -> tuple[MeterState, Effect]:
    b = _open(s, op.round_id)
    _no_lock_in(s, op.round_id)
    if b.paid:
        raise RulesError(
            "round_id", f"an award has been paid in round {op.round_id}: it can no longer be voided"
        )
    # What this round put in reserve or overflow may since have funded a reset (another table's round on a
    # linked meter): that part is taken back from the visible meter, where it went.
    reserve_back = min(b.reserved, s.reserve)
    overflow_back = min(b.overflowed, s.overflow)
    reserve_moved = b.reserved - reserve_back
    overflow_moved = b.overflowed - overflow_back
    current = s.current - b.contributed - reserve_moved - overflow_moved
    seeded = max(0, s.params.reset_units - current)
    new = with_maps(
        s,
        current=current + seeded,
        seed=s.seed + seeded,
        contributions=s.contributions - b.contributed,
        reserve=s.reserve - reserve_back,
        reserve_in=s.reserve_in - b.reserved,
        reserve_to_meter=s.reserve_to_meter - reserve_moved,
        overflow=s.overflow - overflow_back,
        overflow_in=s.overflow_in - b.overflowed,
        overflow_to_meter=s.overflow_to_meter - overflow_moved,
        wagers_count=s.wagers_count - len(b.wagers),
        wagers_cents=s.wagers_cents - b.wager_cents,
        voided_rounds=s.voided_rounds + 1,
        voided_wagers_cents=s.voided_wagers_cents + b.wager_cents,
        open_rounds=_rounds(s).delete(op.round_id),
        recent_rounds=_remember(s, op.round_id),
    )
    return new, Effect(
        op.kind, s.current, new.current, op.round_id, contributed=-b.contributed, reserved=-b.reserved,
        overflowed=-b.overflowed, from_reserve=-reserve_moved, from_overflow=-overflow_moved, seeded=seeded,
    )


def _close(s: MeterState, op: CloseRound) -> tuple[MeterState, Effect]:
    b = _open(s, op.round_id)
    _no_lock_in(s, op.round_id)
    for sh in b.shared:
        if sh.owed_cents:
            raise RulesError(
                "round_id",
                f"round {op.round_id}: {sh.shares - len(sh.paid_seats)} of {sh.shares} players sharing "
                f"{hit_label(sh.hand, sh.award)} are still to be paid {format_dollars_human(sh.per_share_cents)} each",
            )
    new = with_maps(s, open_rounds=_rounds(s).delete(op.round_id), recent_rounds=_remember(s, op.round_id))
    return new, Effect(op.kind, s.current, s.current, op.round_id)


# --- awards --------------------------------------------------------------------------------------


def _pay_percent(s: MeterState, op: PayPercentAward) -> tuple[MeterState, Effect]:
    b = _payable(s, op.round_id, op.table, op.seat)
    if op.shares > 1:
        for i, sh in enumerate(b.shared):
            if (sh.hand, sh.award, sh.percent, sh.shares) != (op.hand, op.award, op.percent, op.shares):
                continue
            if op.seat in sh.paid_seats:
                raise RulesError("seat", f"seat {op.seat} has been paid its share of {hit_label(op.hand, op.award)}")
            if len(sh.paid_seats) >= sh.shares:
                raise RulesError("shares", f"all {sh.shares} shares of {hit_label(op.hand, op.award)} have been paid")
            # A later sharer: the share was locked at the first sharer's turn; the meter is not touched.
            paid = replace(sh, paid_seats=(*sh.paid_seats, op.seat))
            shared = b.shared[:i] + (paid,) + b.shared[i + 1 :]
            booking = replace(b, shared=shared)
            hit, tallies = _record(
                s, op.round_id, op.table, op.seat, op.hand, op.award, sh.per_share_cents, "attendant", op.shares,
                sh.meter_before, sh.meter_after, op.at, op.approved_by,
            )
            new = with_maps(
                s,
                owed_cents=s.owed_cents - sh.per_share_cents,
                meter_paid_cents=s.meter_paid_cents + sh.per_share_cents,
                open_rounds=_rounds(s).set(op.round_id, booking),
                **tallies,
            )
            return new, Effect(op.kind, s.current, s.current, op.round_id, paid_cents=sh.per_share_cents, hit=hit)

    _not_awarded_before(s, b, op)
    t = _take(s, b, op)
    shared = b.shared
    if op.shares > 1:
        shared = (
            *shared,
            SharedAward(op.hand, op.award, op.percent, op.shares, t.per_share, s.current, t.after, (op.seat,)),
        )
    booking = replace(b, paid=True, shared=shared, awarded=_awarded(b, op))
    hit, tallies = _record(
        s, op.round_id, op.table, op.seat, op.hand, op.award, t.per_share, "attendant", op.shares, s.current,
        t.after, op.at, op.approved_by,
    )
    new = with_maps(
        _taken(s, t),
        meter_awards=s.meter_awards + t.taken_cents * UNITS_PER_CENT,
        meter_paid_cents=s.meter_paid_cents + t.per_share,
        owed_cents=s.owed_cents + t.taken_cents - t.per_share,
        open_rounds=_rounds(s).set(op.round_id, booking),
        **tallies,
    )
    return new, Effect(
        op.kind, s.current, t.after, op.round_id, paid_cents=t.per_share, taken_cents=t.taken_cents, reset=t.reset,
        from_reserve=t.from_reserve, from_overflow=t.from_overflow, seeded=t.seeded, hit=hit,
    )


@dataclass(frozen=True)
class _Take:
    """A percentage award taken from the meter and the reset it needed (before anything is paid)."""

    per_share: int  # cents
    taken_cents: int  # every share
    after: int  # units on the meter afterwards
    reset: bool
    from_reserve: int
    from_overflow: int
    seeded: int


def _take(s: MeterState, b: Booking, op: PayPercentAward | LockPercentAward) -> _Take:
    """The first (or only) take of a percentage award, paid at once or locked: the same arithmetic for both."""
    p = s.params
    if op.shares > len(b.seats):
        raise RulesError(
            "shares",
            f"{op.shares} players cannot share an award: only {len(b.seats)} seat{'s' if len(b.seats) != 1 else ''} "
            f"wagered in round {op.round_id}",
        )
    if op.shares > 1:
        for claim, a in sorted(s.locked.items()):
            if a.round_id == op.round_id and (a.hand, a.award, a.percent, a.shares) == (
                op.hand, op.award, op.percent, op.shares
            ):
                # Taking it again would take the shared award twice.
                raise RulesError(
                    "shares", f"{hit_label(op.hand, op.award)} shared by {op.shares} is locked under claim {claim}: "
                    "pay or release it first",
                )
    # Floored to the cent, then split equally to the cent; what is left stays (meter_award.take_percent).
    per_share, take = take_percent(s.current, p.reset_units, op.percent, op.shares)
    left = s.current - take.paid_cents * UNITS_PER_CENT
    need = max(0, p.reset_units - left)
    reset = need > 0
    # The reset is funded from the reserve, then the overflow, then the operator (seed) for the rest.
    from_reserve = min(s.reserve, need)
    from_overflow = min(s.overflow, need - from_reserve)
    seeded = need - from_reserve - from_overflow
    after = left + need
    if reset and s.overflow > from_overflow:
        # The rest of the overflow carries into the next reset, up to the ceiling.
        room = s.overflow - from_overflow if p.ceiling_units is None else max(0, p.ceiling_units - after)
        carried = min(s.overflow - from_overflow, room)
        from_overflow += carried
        after += carried
    return _Take(per_share, take.paid_cents, after, reset, from_reserve, from_overflow, seeded)


def _taken(s: MeterState, t: _Take) -> MeterState:
    """`s` with the meter moved by the take: the award off, the reset funded."""
    return replace(
        s,
        current=t.after,
        seed=s.seed + t.seeded,
        reserve=s.reserve - t.from_reserve,
        reserve_to_meter=s.reserve_to_meter + t.from_reserve,
        overflow=s.overflow - t.from_overflow,
        overflow_to_meter=s.overflow_to_meter + t.from_overflow,
    )


# --- locked awards (linked meters, 58 Pa. Code 605a.8) -----------------------------------------------


def _lock_percent(s: MeterState, op: LockPercentAward) -> tuple[MeterState, Effect]:
    if op.claim in s.locked:
        raise RulesError("claim", f"claim {op.claim} is already locked on meter {s.params.meter_id}")
    if op.claim in s.settled_claims:
        raise RulesError("claim", f"claim {op.claim} was paid or released on meter {s.params.meter_id}")
    b = _payable(s, op.round_id, op.table, op.seat)
    if op.shares > 1:
        for sh in b.shared:
            if (sh.hand, sh.award, sh.percent, sh.shares) == (op.hand, op.award, op.percent, op.shares):
                # A later sharer's share left the meter at the first sharer's turn: nothing is left to lock.
                raise RulesError(
                    "shares",
                    f"{hit_label(op.hand, op.award)} shared by {op.shares} was taken from the meter in round "
                    f"{op.round_id}: pay the other shares with PayPercentAward",
                )
    _not_awarded_before(s, b, op)
    t = _take(s, b, op)
    locked = LockedAward(
        op.round_id, op.table, op.seat, op.hand, op.award, op.percent, op.shares, t.per_share, s.current, t.after,
        t.from_reserve, t.from_overflow, t.seeded, op.at,
        # numbered when the authority gave it a nonce; a lock journaled before numbers replays as it was
        s.locks_taken + 1 if op.nonce else 0, op.nonce, op.cards,
    )
    new = with_maps(_taken(s, t), locked={**s.locked, op.claim: locked},
                    locks_taken=locked.number or s.locks_taken)
    return new, Effect(
        op.kind, s.current, t.after, op.round_id, taken_cents=t.taken_cents, reset=t.reset,
        from_reserve=t.from_reserve, from_overflow=t.from_overflow, seeded=t.seeded, claim=op.claim,
        amount_cents=t.per_share, lock=locked.number, nonce=locked.nonce,
    )


def _pay_locked(s: MeterState, op: PayLockedAward) -> tuple[MeterState, Effect]:
    a = _locked(s, op.claim)
    b = _payable(s, a.round_id, a.table, a.seat)
    shared = b.shared
    if a.shares > 1:
        shared = (
            *shared,
            SharedAward(a.hand, a.award, a.percent, a.shares, a.amount_cents, a.meter_before, a.meter_after,
                        (a.seat,)),
        )
    hit, tallies = _record(
        s, a.round_id, a.table, a.seat, a.hand, a.award, a.amount_cents, "attendant", a.shares, a.meter_before,
        a.meter_after, op.at, op.approved_by,
    )
    new = with_maps(
        s,
        meter_awards=s.meter_awards + a.taken_units,
        meter_paid_cents=s.meter_paid_cents + a.amount_cents,
        owed_cents=s.owed_cents + a.taken_cents - a.amount_cents,
        open_rounds=_rounds(s).set(a.round_id, replace(b, paid=True, shared=shared, awarded=_awarded(b, a))),
        locked=_without(s, op.claim),
        settled_claims=_settle(s, op.claim),
        **tallies,
    )
    return new, Effect(
        op.kind, s.current, s.current, a.round_id, paid_cents=a.amount_cents, hit=hit, claim=op.claim,
        amount_cents=a.amount_cents,
    )


def _release_locked(s: MeterState, op: ReleaseLockedAward) -> tuple[MeterState, Effect]:
    a = _locked(s, op.claim)
    p = s.params
    # Exactly the lock's transfers, but never more than the totals hold: a void since may already have taken
    # back from the meter reserve or overflow that the lock's reset used.
    reserve_back = min(a.from_reserve, s.reserve_to_meter)
    overflow_back = min(a.from_overflow, s.overflow_to_meter)
    current = s.current + a.taken_units - reserve_back - overflow_back - a.seeded
    # Another award or a void since the lock can leave less on the meter: the operator restores the floor (as a
    # void does); contributions since can push it past the ceiling: the excess goes to the overflow (as theirs).
    floor_seed = max(0, p.reset_units - current)
    current += floor_seed
    excess = 0 if p.ceiling_units is None else max(0, current - p.ceiling_units)
    current -= excess
    new = with_maps(
        s,
        current=current,
        seed=s.seed - a.seeded + floor_seed,
        reserve=s.reserve + reserve_back,
        reserve_to_meter=s.reserve_to_meter - reserve_back,
        overflow=s.overflow + overflow_back + excess,
        overflow_to_meter=s.overflow_to_meter - overflow_back,
        released_to_overflow=s.released_to_overflow + excess,
        locked=_without(s, op.claim),
        settled_claims=_settle(s, op.claim),
    )
    return new, Effect(
        op.kind, s.current, current, a.round_id, overflowed=excess, taken_cents=-a.taken_cents,
        from_reserve=-reserve_back, from_overflow=-overflow_back, seeded=floor_seed - a.seeded, claim=op.claim,
        amount_cents=a.amount_cents,
    )


def _pay_fixed(s: MeterState, op: PayFixedAward) -> tuple[MeterState, Effect]:
    b = _payable(s, op.round_id, op.table, op.seat)
    hit, tallies = _record(
        s, op.round_id, op.table, op.seat, op.hand, op.award, op.cents, op.paid_by, 1, s.current, s.current, op.at,
        op.approved_by,
    )
    new = with_maps(s, open_rounds=_rounds(s).set(op.round_id, replace(b, paid=True)), **tallies)
    return new, Effect(op.kind, s.current, s.current, op.round_id, paid_cents=op.cents, hit=hit)


def _record(
    s: MeterState, round_id: str, table: str, seat: int, hand: str, award: str, cents: int, paid_by: str,
    shares: int, before: int, after: int, at: Any, approved_by: str,
) -> tuple[Hit, dict[str, Any]]:
    """The history entry of a payout and the tallies it changes (hits by award, paid by, cumulative)."""
    hit = Hit(s.hit_count + 1, table, round_id, seat, hand, award, cents, paid_by, shares, before, after, at, approved_by)
    count, amount = s.hits.get(hit.label, (0, 0))
    tallies: dict[str, Any] = {
        "hits": {**s.hits, hit.label: (count + 1, amount + cents)},
        "hit_count": hit.number,
        "cumulative_payouts_cents": s.cumulative_payouts_cents + cents,
        "history": (*s.history, hit)[-s.params.history_size :],
    }
    if paid_by == "table":
        tallies["paid_by_table_cents"] = s.paid_by_table_cents + cents
    else:
        tallies["paid_by_attendant_cents"] = s.paid_by_attendant_cents + cents
    return hit, tallies


# --- operator ------------------------------------------------------------------------------------


def _top_up(s: MeterState, op: TopUp) -> tuple[MeterState, Effect]:
    units = op.cents * UNITS_PER_CENT
    _below_ceiling(s, s.current + units, "cents")
    new = replace(s, current=s.current + units, seed=s.seed + units)
    return new, Effect(op.kind, s.current, new.current, seeded=units)


def _adjust(s: MeterState, op: Adjust) -> tuple[MeterState, Effect]:
    after = s.current + op.units
    if after < 0 or after < s.params.reset_units:
        raise RulesError(
            "units",
            f"{format_units(op.units)} would take the meter to {format_units(after)}, below its reset amount "
            f"{format_units(s.params.reset_units)}",
        )
    _below_ceiling(s, after, "units")
    new = replace(s, current=after, adjustments=s.adjustments + op.units)
    return new, Effect(op.kind, s.current, after, adjusted=op.units)


def _change_params(s: MeterState, op: ChangeParams) -> tuple[MeterState, Effect]:
    new_p = op.params
    if s.locked:
        claims = ", ".join(sorted(s.locked))
        raise RulesError("params", f"cannot change while an award is locked (claims: {claims}): pay or release it first")
    if s.open_rounds:
        rounds = ", ".join(sorted(s.open_rounds))
        raise RulesError(
            "params",
            f"cannot change while a round is in play (open: {rounds}); N.J.A.C. 13:69E-1.39A, 9 NYCRR 5320.8",
        )
    if new_p.meter_id != s.params.meter_id:
        raise RulesError("params.meter_id", f"is {s.params.meter_id!r}: a meter keeps its id")
    if new_p.ceiling_units is not None and s.current > new_p.ceiling_units:
        raise RulesError(
            "params.ceiling_cents",
            f"{format_cents(new_p.ceiling_cents or 0)} is below what the meter shows ({format_units(s.current)}); "
            "the meter is never lowered",
        )
    # A reset amount above what the meter shows is reached with operator money (seed).
    seeded = max(0, new_p.reset_units - s.current)
    new = replace(
        s,
        params=new_p,
        current=s.current + seeded,
        seed=s.seed + seeded,
        history=s.history[-new_p.history_size :],
        params_set_by=op.who,
        params_set_at=op.at,
    )
    return new, Effect(op.kind, s.current, new.current, seeded=seeded)


# --- helpers -------------------------------------------------------------------------------------


def _rounds(s: MeterState) -> OpenRounds:
    return open_rounds_of(s.open_rounds)  # a state made with dataclasses.replace may hold a plain mapping


def _open(s: MeterState, round_id: str) -> Booking:
    b = s.open_rounds.get(round_id)
    if b is None:
        why = "it is closed or voided" if round_id in s.recent_rounds else "it was never booked"
        raise RulesError("round_id", f"round {round_id} is not open on meter {s.params.meter_id}: {why}")
    return b


def _not_awarded_before(s: MeterState, b: Booking, op: PayPercentAward | LockPercentAward) -> None:
    """One percentage award per round, seat and hand (an award shared on the dealer's hand: per round and hand),
    whatever the claim id and number of shares it comes under: a hand paid, or locked and not released, is not
    taken from the meter again (a second claim of the same hand, or a lock someone else sent in the table's name).
    Checked after the shared award's own checks, which name the shares (a later share is paid, not taken)."""
    label = hit_label(op.hand, op.award)
    if any((sh.hand, sh.award) == (op.hand, op.award) for sh in b.shared):  # shared: one award of the hand
        raise RulesError("hand", f"{label} was taken from the meter in round {op.round_id} as a shared award: an "
                                 "award is paid once")
    if (op.seat, op.hand, op.award) in b.awarded:
        raise RulesError("hand", f"{label} of seat {op.seat} was paid in round {op.round_id}: an award is paid once")
    for claim, a in s.locked.items():
        if a.shares > 1 and (a.percent, a.shares) == (op.percent, op.shares):
            continue  # the same shared award locked: `_take` refuses it, naming the shares
        if a.round_id == op.round_id and (a.hand, a.award) == (op.hand, op.award) and (
                a.seat == op.seat or a.shares > 1 or op.shares > 1):
            raise RulesError("hand", f"{label} of seat {a.seat} in round {op.round_id} is locked under claim "
                                     f"{claim}: it is paid or released before it is locked again")


def _awarded(b: Booking, a: PayPercentAward | LockedAward) -> tuple[tuple[int, str, str], ...]:
    return b.awarded if a.shares > 1 else (*b.awarded, (a.seat, a.hand, a.award))


def _payable(s: MeterState, round_id: str, table: str, seat: int) -> Booking:
    b = _open(s, round_id)
    if table != b.table:
        raise RulesError("table", f"round {round_id} was booked by table {b.table}, not {table}")
    if seat not in b.seats:
        raise RulesError("seat", f"seat {seat} made no progressive wager in round {round_id}")
    return b


def _locked(s: MeterState, claim: str) -> LockedAward:
    a = s.locked.get(claim)
    if a is None:
        why = "it was paid or released" if claim in s.settled_claims else "it was never locked"
        raise RulesError("claim", f"claim {claim} is not locked on meter {s.params.meter_id}: {why}")
    return a


def _no_lock_in(s: MeterState, round_id: str) -> None:
    claims = sorted(c for c, a in s.locked.items() if a.round_id == round_id)
    if claims:
        raise RulesError(
            "round_id", f"round {round_id}: claim {', '.join(claims)} is locked awaiting a decision: pay or release it first"
        )


def _without(s: MeterState, claim: str) -> dict[str, LockedAward]:
    return {c: a for c, a in s.locked.items() if c != claim}


def _settle(s: MeterState, claim: str) -> tuple[str, ...]:
    return (*s.settled_claims, claim)[-RECENT_CLAIMS:]


def _below_ceiling(s: MeterState, after: int, field: str) -> None:
    ceiling = s.params.ceiling_units
    if ceiling is not None and after > ceiling:
        raise RulesError(
            field, f"would take the meter to {format_units(after)}, above its ceiling {format_units(ceiling)}"
        )


def _remember(s: MeterState, round_id: str) -> tuple[str, ...]:
    return (*s.recent_rounds, round_id)[-RECENT_ROUNDS:]


_HANDLERS: dict[type, Any] = {
    BookContributions: _book,
    VoidRound: _void,
    PayPercentAward: _pay_percent,
    PayFixedAward: _pay_fixed,
    TopUp: _top_up,
    Adjust: _adjust,
    ChangeParams: _change_params,
    CloseRound: _close,
    LockPercentAward: _lock_percent,
    PayLockedAward: _pay_locked,
    ReleaseLockedAward: _release_locked,
}


__all__ = ["Effect", "apply"]

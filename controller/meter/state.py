"""The state of a progressive meter: every meter the rules require, the open rounds and the hit history.

Meters (58 Pa. Code 605a.7(a); N.J.A.C. 13:69E-1.39A; 9 NYCRR 5320.8): the visible meter (``current``),
contributions, reserve (hidden), overflow (above the ceiling), seed (operator money), adjustments,
meter awards, qualifying wagers, hits and amounts by award, amounts paid by the table and by the
attendant, cumulative payouts, and a history of at least the last 25 hits.

All amounts on the meter are integer meter units (1/10,000 cent, controller.money.UNITS_PER_CENT);
amounts paid are integer cents. The state is immutable: `controller.meter.apply` returns a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from fractions import Fraction
from functools import cached_property
from types import MappingProxyType
from typing import Any, cast

from controller.errors import InvariantViolation
from controller.meter.params import MeterParams
from controller.meter.pmap import PersistentMap
from controller.money import UNITS_PER_CENT, format_units

RECENT_ROUNDS = 1000  # closed or voided round ids remembered to refuse a second booking
RECENT_CLAIMS = 1000  # paid or released claim ids remembered to refuse a second lock under the same id


def _frozen(d: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class SharedAward:
    """A percentage award on the dealer's hand shared equally by `shares` players (§ 639a.12(e)(2)).

    The whole award is taken from the meter at the turn of the first sharer and locked; the others are
    paid the same share without touching the meter again. Until all are paid, the unpaid shares are owed.
    """

    hand: str
    award: str
    percent: Fraction
    shares: int
    per_share_cents: int
    meter_before: int
    meter_after: int
    paid_seats: tuple[int, ...]

    @property
    def owed_cents(self) -> int:
        return (self.shares - len(self.paid_seats)) * self.per_share_cents


@dataclass(frozen=True)
class Booking:
    """What a locked round put on the meter: exactly what `VoidRound` takes back."""

    table: str
    wagers: tuple[tuple[int, int], ...]  # (seat, cents)
    contributed: int  # units credited to the visible meter
    reserved: int  # units put in reserve
    overflowed: int  # units diverted by the ceiling
    booked_at: datetime
    paid: bool = False  # an award was paid in this round: it can no longer be voided
    shared: tuple[SharedAward, ...] = ()
    on_dealer: tuple[int, ...] = ()  # positions in `wagers` of the wagers on the dealer's hand
    round_meters: tuple[str, ...] = ()  # every meter the round books, when more than one
    # (seat, hand, award) of each percentage award paid whole in the round: the meter pays one hand's award once,
    # whatever the claim id it comes under (shared awards are in `shared`)
    awarded: tuple[tuple[int, str, str], ...] = ()

    # Computed once per booking (it is frozen): the invariant sums them over every open round after each
    # operation. cached_property writes the instance's __dict__, which a frozen dataclass allows.
    @cached_property
    def wager_cents(self) -> int:
        return sum(c for _, c in self.wagers)

    @cached_property
    def seats(self) -> frozenset[int]:
        return frozenset(s for s, _ in self.wagers)

    @cached_property
    def totals(self) -> tuple[int, int, int, int, int, int]:
        """(owed cents, wagers, wager cents, contributed, reserved, overflowed): what the invariant sums."""
        return (self.owed_cents if self.shared else 0, len(self.wagers), self.wager_cents, self.contributed,
                self.reserved, self.overflowed)

    @property
    def owed_cents(self) -> int:
        return sum(s.owed_cents for s in self.shared)


Totals = tuple[int, int, int, int, int, int]  # as Booking.totals
NO_TOTALS: Totals = (0, 0, 0, 0, 0, 0)


def sum_totals(bookings: Iterable[Booking]) -> Totals:
    """Booking.totals summed over `bookings`, from each of them."""
    sums = [b.totals for b in bookings]
    return cast("Totals", tuple(map(sum, zip(*sums, strict=True)))) if sums else NO_TOTALS


class OpenRounds(PersistentMap[str, Booking]):
    """The open rounds of a meter, round id -> Booking: an immutable mapping whose `set` and `delete` share the
    rounds left as they were (controller.meter.pmap), with `totals`, the sums the invariant checks (Booking.totals
    summed over the rounds), kept as rounds are set and deleted: an operation checks them without visiting every
    open round."""

    __slots__ = ("totals",)

    totals: Totals

    def __init__(self, items: Mapping[str, Booking] | Iterable[tuple[str, Booking]] = ()) -> None:
        super().__init__(items)
        self.totals = sum_totals(self._base.values())

    def set(self, key: str, value: Booking) -> OpenRounds:
        old = self.get(key)
        t = self.totals if old is None else _less(self.totals, old.totals)
        new = cast("OpenRounds", super().set(key, value))
        new.totals = cast("Totals", tuple(a + b for a, b in zip(t, value.totals, strict=True)))
        return new

    def delete(self, key: str) -> OpenRounds:
        old = self[key]
        new = cast("OpenRounds", super().delete(key))
        new.totals = _less(self.totals, old.totals)
        return new


def _less(t: Totals, u: Totals) -> Totals:
    return cast("Totals", tuple(a - b for a, b in zip(t, u, strict=True)))


def open_rounds_of(rounds: Mapping[str, Booking]) -> OpenRounds:
    return rounds if isinstance(rounds, OpenRounds) else OpenRounds(rounds)


@dataclass(frozen=True)
class Hit:
    """One payout in the hit history (N.J.A.C. 13:69E-1.39A: at least the last 25)."""

    number: int  # 1, 2, ... in the order the meter paid them (the order of near-simultaneous wins)
    table: str
    round_id: str
    seat: int
    hand: str
    award: str
    amount_cents: int
    paid_by: str  # "attendant" or "table"
    shares: int  # 1, or the number of players sharing a dealer-hand award
    meter_before: int  # units
    meter_after: int  # units
    at: datetime
    approved_by: str

    @property
    def label(self) -> str:
        return hit_label(self.hand, self.award)


@dataclass(frozen=True)
class LockedAward:
    """A percentage award taken from a linked meter at the hit and held until a supervisor pays or releases it
    (58 Pa. Code 605a.8): the award as a payout would have been, and every transfer the take made, so a
    release can reverse them exactly."""

    round_id: str
    table: str
    seat: int
    hand: str
    award: str
    percent: Fraction
    shares: int
    amount_cents: int  # what this seat is paid when the claim is approved (one share)
    meter_before: int  # units, at the lock
    meter_after: int  # units, at the lock
    from_reserve: int  # units the reset took from the reserve
    from_overflow: int  # units the reset (and the carry) took from the overflow
    seeded: int  # units of operator money the reset put on the meter
    at: datetime
    # The lock's number on its meter, 1, 2, ... never given twice (MeterState.locks_taken): a supervisor's approval
    # of the payment names it (controller.linkproto.approval), so it pays this lock and no later one under the same
    # claim id. 0: a lock journaled before locks were numbered.
    number: int = 0
    nonce: str = ""  # the link authority's random value for this lock (LockPercentAward.nonce); "" before
    cards: str = ""  # the hand's cards (LockPercentAward.cards); "" before

    @property
    def taken_cents(self) -> int:
        """Every share: what left the meter."""
        return self.amount_cents * self.shares

    @property
    def taken_units(self) -> int:
        return self.taken_cents * UNITS_PER_CENT

    @property
    def label(self) -> str:
        return hit_label(self.hand, self.award)


def hit_label(hand: str, award: str) -> str:
    """The key of the hits-by-award meter: the hand paid on and the award as the paytable states it."""
    return f"{hand}: {award}" if hand else award


@dataclass(frozen=True)
class MeterState:
    params: MeterParams
    current: int  # units on the visible meter
    seed: int  # units put in by the operator (the first reset amount, restorations, top-ups)
    contributions: int = 0  # units of wagers credited to the visible meter (net of voided rounds)
    reserve: int = 0  # units held hidden to fund the next reset
    reserve_in: int = 0  # units ever put in reserve (net of voided rounds)
    reserve_to_meter: int = 0  # units moved from reserve to the visible meter
    overflow: int = 0  # units held above the ceiling
    overflow_in: int = 0  # units ever diverted by the ceiling (net of voided rounds)
    overflow_to_meter: int = 0  # units moved from overflow to the visible meter
    adjustments: int = 0  # units of authorized adjustments, signed
    meter_awards: int = 0  # units taken from the meter by percentage awards
    meter_paid_cents: int = 0  # cents of percentage awards paid to players
    owed_cents: int = 0  # cents taken from the meter for shared awards and not yet paid to a sharer
    wagers_count: int = 0  # qualifying wagers (net of voided rounds)
    wagers_cents: int = 0
    voided_rounds: int = 0
    voided_wagers_cents: int = 0
    hits: Mapping[str, tuple[int, int]] = field(default_factory=_frozen)  # label -> (count, cents)
    hit_count: int = 0
    paid_by_table_cents: int = 0  # 605a.7(a)
    paid_by_attendant_cents: int = 0  # 605a.7(a)
    cumulative_payouts_cents: int = 0  # 605a.7(a)
    history: tuple[Hit, ...] = ()  # the last params.history_size hits, oldest first
    open_rounds: OpenRounds = field(default_factory=OpenRounds)
    recent_rounds: tuple[str, ...] = ()  # the last RECENT_ROUNDS closed or voided round ids
    params_set_by: str = ""
    params_set_at: datetime | None = None
    locked: Mapping[str, LockedAward] = field(default_factory=_frozen)  # claim id -> award awaiting a decision
    settled_claims: tuple[str, ...] = ()  # the last RECENT_CLAIMS paid or released claim ids
    released_to_overflow: int = 0  # units of released locks the ceiling sent to the overflow
    locks_taken: int = 0  # locks ever taken on this meter: the number of the last (LockedAward.number)

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    @cached_property
    def recent_set(self) -> frozenset[str]:
        """`recent_rounds` as a set, for membership; carried to the next state while they do not change
        (see with_maps): a close builds it once, the bookings after it reuse it."""
        return frozenset(self.recent_rounds)

    @property
    def current_cents(self) -> int:
        """What the sign shows: the meter floored to the cent (the remainder stays on the meter)."""
        return self.current // UNITS_PER_CENT

    def hits_for(self, hand: str, award: str) -> tuple[int, int]:
        return self.hits.get(hit_label(hand, award), (0, 0))


def initial_state(params: MeterParams, set_by: str = "", at: datetime | None = None) -> MeterState:
    """A new meter showing its reset amount, which the operator puts in (booked as seed)."""
    if not isinstance(params, MeterParams):
        raise TypeError("params must be MeterParams")
    return MeterState(
        params=params, current=params.reset_units, seed=params.reset_units, params_set_by=set_by, params_set_at=at
    )


def with_maps(state: MeterState, **changes: Any) -> MeterState:
    """`replace` that freezes mapping fields it is given (open rounds: an OpenRounds, kept as it is given).

    Every meter operation makes its new state here, so this is `dataclasses.replace` done directly: the
    fields copied and the changes set, without calling __init__ field by field (MeterState has no
    __post_init__: its __init__ only stores the fields). Cached values go with the copy unless the field
    they derive from changes."""
    for key in changes:
        if key not in _STATE_FIELDS:
            raise TypeError(f"MeterState has no field {key!r}")
    for key in ("hits", "locked"):
        if key in changes:
            changes[key] = _frozen(changes[key])
    if "open_rounds" in changes:
        changes["open_rounds"] = open_rounds_of(changes["open_rounds"])
    new = object.__new__(MeterState)
    d = new.__dict__
    d.update(state.__dict__)
    d.update(changes)
    if "recent_rounds" in changes:
        d.pop("recent_set", None)
    return new


_STATE_FIELDS = frozenset(f.name for f in fields(MeterState))
assert not hasattr(MeterState, "__post_init__"), "with_maps() does not run __init__"


# --- the invariant ------------------------------------------------------------------------------


def invariant_failures(s: MeterState) -> list[str]:
    """Every way in which `s` breaks the meter's invariant, with the numbers (empty: it holds).

    The full check, independent of the running totals: every sum over the open rounds is taken again from the rounds
    themselves, and the running totals are checked against them. Its cost grows with the open rounds: the tests,
    a snapshot restored and the ledger's reducer (every so many operations: controller.meter.journal) run it;
    `apply` checks each new state with `step_failures`."""
    rounds = s.open_rounds
    summed = sum_totals(rounds.values())
    bad = _failures(s, summed, not s.recent_set.isdisjoint(rounds))
    if isinstance(rounds, OpenRounds) and rounds.totals != summed:
        bad.append(f"the running totals of the open rounds {list(rounds.totals)} are not their sum {list(summed)}")
    return bad


def step_failures(s: MeterState, round_id: str = "") -> list[str]:
    """`invariant_failures` for the state an operation left, when the state before it held the invariant and the
    operation touched no open round but `round_id`: the sums over the open rounds are the running totals, and only
    that round is looked for among the recent ones. Its cost does not grow with the open rounds."""
    rounds = s.open_rounds
    return _failures(s, open_rounds_of(rounds).totals, round_id in rounds and round_id in s.recent_set)


def _failures(s: MeterState, open_totals: Totals, open_and_recent: bool) -> list[str]:  # noqa: C901 - the invariant's clauses, a flat list of checks
    u = format_units
    bad: list[str] = []
    p = s.params
    locked = sum(a.taken_units for a in s.locked.values())
    visible = (
        s.seed + s.contributions + s.reserve_to_meter + s.overflow_to_meter - s.meter_awards - locked + s.adjustments
        - s.released_to_overflow
    )
    if s.current != visible:
        bad.append(
            f"current {u(s.current)} != seed {u(s.seed)} + contributions {u(s.contributions)} + reserve_to_meter "
            f"{u(s.reserve_to_meter)} + overflow_to_meter {u(s.overflow_to_meter)} - meter_awards "
            f"{u(s.meter_awards)} - locked {u(locked)} + adjustments {u(s.adjustments)} - released_to_overflow "
            f"{u(s.released_to_overflow)} = {u(visible)}"
        )
    if s.reserve != s.reserve_in - s.reserve_to_meter:
        bad.append(f"reserve {u(s.reserve)} != reserve_in {u(s.reserve_in)} - reserve_to_meter {u(s.reserve_to_meter)}")
    if s.overflow != s.overflow_in + s.released_to_overflow - s.overflow_to_meter:
        bad.append(
            f"overflow {u(s.overflow)} != overflow_in {u(s.overflow_in)} + released_to_overflow "
            f"{u(s.released_to_overflow)} - overflow_to_meter {u(s.overflow_to_meter)}"
        )
    if s.current < p.reset_units:
        bad.append(f"current {u(s.current)} is below the reset amount {u(p.reset_units)}")
    if p.ceiling_units is not None and s.current > p.ceiling_units:
        bad.append(f"current {u(s.current)} is above the ceiling {u(p.ceiling_units)}")
    for name in (
        "seed", "contributions", "reserve", "reserve_in", "reserve_to_meter", "overflow", "overflow_in",
        "overflow_to_meter", "meter_awards", "meter_paid_cents", "owed_cents", "wagers_count", "wagers_cents",
        "voided_rounds", "voided_wagers_cents", "hit_count", "paid_by_table_cents", "paid_by_attendant_cents",
        "released_to_overflow", "locks_taken",
    ):
        if getattr(s, name) < 0:
            bad.append(f"{name} is negative: {getattr(s, name)}")
    if s.meter_awards != (s.meter_paid_cents + s.owed_cents) * UNITS_PER_CENT:
        bad.append(
            f"meter_awards {u(s.meter_awards)} != (meter_paid_cents {s.meter_paid_cents} + owed_cents "
            f"{s.owed_cents}) cents"
        )
    owed, open_count, open_cents, open_contributed, open_reserved, open_overflowed = open_totals
    if s.owed_cents != owed:
        bad.append(f"owed_cents {s.owed_cents} != {owed} owed in the open rounds")
    if s.meter_paid_cents > s.paid_by_attendant_cents:
        bad.append(f"meter_paid_cents {s.meter_paid_cents} > paid_by_attendant_cents {s.paid_by_attendant_cents}")
    if s.cumulative_payouts_cents != s.paid_by_table_cents + s.paid_by_attendant_cents:
        bad.append(
            f"cumulative_payouts_cents {s.cumulative_payouts_cents} != table {s.paid_by_table_cents} + attendant "
            f"{s.paid_by_attendant_cents}"
        )
    count = sum(c for c, _ in s.hits.values())
    amount = sum(a for _, a in s.hits.values())
    if count != s.hit_count or amount != s.cumulative_payouts_cents:
        bad.append(
            f"hits by award total {count} hits and {amount} cents; hit_count {s.hit_count}, cumulative "
            f"{s.cumulative_payouts_cents} cents"
        )
    if len(s.history) > p.history_size or len(s.history) > s.hit_count:
        bad.append(f"history holds {len(s.history)} hits; at most {min(p.history_size, s.hit_count)}")
    if [h.number for h in s.history] != list(range(s.hit_count - len(s.history) + 1, s.hit_count + 1)):
        bad.append(f"history is not the last {len(s.history)} of {s.hit_count} hits in order")
    if open_count > s.wagers_count or open_cents > s.wagers_cents:
        bad.append(f"open rounds hold {open_count} wagers of {open_cents} cents; the meters {s.wagers_count}, {s.wagers_cents}")
    in_open = [open_contributed, open_reserved, open_overflowed]
    if in_open[0] > s.contributions or in_open[1] > s.reserve_in or in_open[2] > s.overflow_in:
        bad.append(f"open rounds booked {in_open} units; more than contributions, reserve_in, overflow_in")
    if len(s.recent_rounds) > RECENT_ROUNDS or open_and_recent:
        bad.append("recent_rounds is too long or holds an open round")
    for claim, a in sorted(s.locked.items()):
        b = s.open_rounds.get(a.round_id)
        # Close and void are refused while a lock is pending: its round is open and the seat wagered there.
        if b is None or b.table != a.table or a.seat not in b.seats:
            bad.append(f"locked claim {claim}: round {a.round_id} at table {a.table} seat {a.seat} is not open")
        if min(a.amount_cents, a.from_reserve, a.from_overflow, a.seeded) < 0:
            bad.append(f"locked claim {claim}: a negative amount")
        if a.number > s.locks_taken or (a.number == 0) != (a.nonce == ""):
            bad.append(f"locked claim {claim}: number {a.number}, but {s.locks_taken} locks were taken")
    if len(s.settled_claims) > RECENT_CLAIMS or (s.locked and not s.locked.keys().isdisjoint(s.settled_claims)):
        bad.append("settled_claims is too long or holds a pending claim")
    return bad


def invariant_holds(state: MeterState) -> bool:
    return not invariant_failures(state)


def check_invariant(state: MeterState) -> None:
    """Raise InvariantViolation, with the numbers, if the books of `state` do not balance (the full check)."""
    _raise(state, invariant_failures(state))


def check_step(state: MeterState, round_id: str = "") -> None:
    """`check_invariant` after one operation that touched at most the open round `round_id` (step_failures)."""
    _raise(state, step_failures(state, round_id))


def _raise(state: MeterState, bad: list[str]) -> None:
    if bad:
        raise InvariantViolation(f"meter {state.params.meter_id}: " + "; ".join(bad))


__all__ = ["NO_TOTALS", "RECENT_CLAIMS", "RECENT_ROUNDS", "Booking", "Hit", "LockedAward", "MeterState", "OpenRounds",
           "SharedAward", "Totals", "check_invariant", "check_step", "hit_label", "initial_state", "invariant_failures",
           "invariant_holds", "open_rounds_of", "step_failures", "sum_totals", "with_maps"]

"""The gaming day's report of a journal of meters, as a pure function of the meters at the day's opening and the
journal's entries of the day (docs/meters.md, "The gaming day's report").

Every figure is summed from the results the journal recorded (each operation's effect), after replaying the entry
through the meter and checking that the replay gives the very result journaled; the closing meters are the
replayed state. The reconciliation must then balance to the meter unit (1/10,000 cent), for the visible meter and
for everything the meter holds (visible + reserve + overflow + locked awards):

    opening + contributions + seed + adjustments - payouts = closing

or `build_report` raises InvariantViolation naming the meter and the figures.

The day's device faults and blocked time are the outages the journal's fault entries make (controller/round/faults.py),
those open at the opening included, clipped to the day.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Protocol

from controller.errors import InputError, InvariantViolation
from controller.linkproto.schema import LINK_KEY_PREFIX
from controller.meter import MeterState, apply, initial_state, params_from_dict
from controller.meter import ops as meter_ops
from controller.meter.journal import DEFINE_METER, Meters, op_from_body
from controller.meter.parse import parse_moment
from controller.money import UNITS_PER_CENT, format_dollars_human, format_units, parse_units
from controller.report.day import GamingDay
from controller.round.claims import claim_from_json, hit_hand
from controller.round.faults import DEVICE_FAULT, WAGERING_BLOCK, FaultBook, FaultRecord, Outage, covered
from controller.round.faults import KINDS as FAULT_KINDS
from controller.round.journal import CLAIM, TABLE_STATE
from controller.round.payout_kind import JACKPOT, payout_kind

METER_KINDS = frozenset(meter_ops.OPS)


class JournalRecord(FaultRecord, Protocol):
    """One journal entry as the report reads it (controller.ledger.reader.Record is one)."""

    @property
    def time(self) -> datetime: ...
    @property
    def key(self) -> str: ...
    @property
    def result(self) -> Any: ...
    @property
    def hash(self) -> str: ...


@dataclass(frozen=True)
class Holdings:
    """What a meter holds, in units: the visible meter, the reserve, the overflow, the awards locked (taken
    from the meter, awaiting a supervisor)."""

    current: int = 0
    reserve: int = 0
    overflow: int = 0
    locked: int = 0

    @property
    def total(self) -> int:
        return self.current + self.reserve + self.overflow + self.locked

    @classmethod
    def of(cls, s: MeterState | None) -> Holdings:
        if s is None:
            return cls()
        return cls(s.current, s.reserve, s.overflow, sum(a.taken_units for a in s.locked.values()))


@dataclass(frozen=True)
class Readings:
    """The meters of § 605a.7(a) besides the visible amount, as they read at a moment: the hits (each payout
    counted), the qualifying wagers, the amounts paid by the table and by an attendant, the cumulative payouts."""

    hits: int = 0
    wagers_count: int = 0
    wagers_cents: int = 0
    paid_by_table_cents: int = 0
    paid_by_attendant_cents: int = 0
    cumulative_payouts_cents: int = 0

    @classmethod
    def of(cls, s: MeterState | None) -> Readings:
        if s is None:
            return cls()
        return cls(s.hit_count, s.wagers_count, s.wagers_cents, s.paid_by_table_cents, s.paid_by_attendant_cents,
                   s.cumulative_payouts_cents)


@dataclass(frozen=True)
class Source:
    """Whose journal the report is of: a table ("table", its id) or a link authority ("link authority", its id);
    an id "" when neither the caller nor the journal names it."""

    kind: str
    id: str
    # (meter id, the wager's title) where the configuration gives them: people read "Progressive Payout Wager"
    titles: tuple[tuple[str, str], ...] = ()

    @property
    def title(self) -> str:
        what = "Table" if self.kind == TABLE else "Link authority"
        return f"{what} {self.id}" if self.id else f"{what} (id not given)"

    def meter_name(self, meter_id: str) -> str:
        """A meter as people know it: its wager's title with its id ("Progressive Payout Wager (meter main)")."""
        title = dict(self.titles).get(meter_id)
        return f"{title} (meter {meter_id})" if title else f"meter {meter_id}"


TABLE, AUTHORITY = "table", "link authority"

@dataclass(frozen=True)
class Award:
    """A payout of the day (a hit), as the meter recorded it."""

    seq: int
    time: datetime
    round_id: str
    table: str
    seat: int
    hand: str
    award: str
    label: str  # hand and award: the hits-by-award meter's key
    cents: int
    paid_by: str  # "attendant" or "table"
    approved_by: str
    shares: int
    meter_before: int
    meter_after: int
    what: str = JACKPOT  # one of controller.round.payout_kind.KINDS
    hand_of: str = ""  # whose hand it pays on: "player", "dealer", "seat N" (an Envy Bonus's holder); "" unknown
    reset: bool = False  # the meter was reset after it: restored to its reset amount (by reserve, overflow or seed)

    @property
    def jackpot(self) -> bool:
        return self.what == JACKPOT


@dataclass(frozen=True)
class Void:
    seq: int
    time: datetime
    round_id: str
    reason: str
    wagers: int
    cents: int


@dataclass(frozen=True)
class Change:
    """A top-up, an adjustment or a change of parameters (a meter defined, too): who made it, and what."""

    seq: int
    time: datetime
    kind: str
    who: str  # the top-up's `who`, the adjustment's credential, the parameters' `set_by`
    units: int  # the amount put on the meter (top-up, adjustment, seed a reset amount needed)
    detail: str  # the reason, or the parameters as set


@dataclass
class MeterDay:
    """One meter's figures for the day. Units are meter units; `_cents` are cents; counts are counts."""

    meter_id: str
    opening: Holdings
    closing: Holdings = field(default_factory=Holdings)
    opening_readings: Readings = field(default_factory=Readings)
    closing_readings: Readings = field(default_factory=Readings)
    reset_units: int = 0  # the reset amount in effect at the close
    rate: str = ""  # the rate of progression in effect at the close, a percentage ("15%")
    defined: bool = False  # defined during the day (its opening is zero)
    rounds_booked: int = 0
    wagers_count: int = 0  # qualifying wagers booked
    wagers_cents: int = 0
    voided_count: int = 0  # wagers returned by voids
    voided_cents: int = 0
    contributions: int = 0  # to the visible meter, net of voids
    reserved: int = 0  # to the reserve, net of voids
    overflowed: int = 0  # diverted by the ceiling, net of voids
    from_reserve: int = 0  # reserve moved to the visible meter (resets)
    from_overflow: int = 0
    released_to_overflow: int = 0  # a released lock's excess over the ceiling
    seed: int = 0  # operator money: a new meter's reset amount, top-ups, resets and voids the floor needed
    adjustments: int = 0
    taken: int = 0  # taken off the visible meter by percentage awards (locks included, releases back)
    payouts: int = 0  # left the meter's holdings: percentage awards paid, locked awards paid
    paid_cents: int = 0  # paid to players (every award, the table's too)
    awards: list[Award] = field(default_factory=list)
    voids: list[Void] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    series: list[tuple[datetime, int, int]] = field(default_factory=list)  # (time, seq, units after)

    @property
    def wagers_in(self) -> int:
        """Units of the day's wagers, net of voids, wherever they went (meter, reserve, overflow)."""
        return self.contributions + self.reserved + self.overflowed

    def visible_expected(self) -> int:
        return (self.opening.current + self.contributions + self.from_reserve + self.from_overflow + self.seed
                + self.adjustments - self.taken - self.released_to_overflow)

    def held_expected(self) -> int:
        return self.opening.total + self.wagers_in + self.seed + self.adjustments - self.payouts

    def by_award(self) -> dict[str, tuple[int, int]]:
        return _tally(self.awards, lambda a: a.label)

    def by_paid_by(self) -> dict[str, tuple[int, int]]:
        return _tally(self.awards, lambda a: a.paid_by)

    def by_approver(self) -> dict[str, tuple[int, int]]:
        return _tally(self.awards, lambda a: a.approved_by)

    def by_what(self) -> dict[str, tuple[int, int]]:
        """Payouts by what they are: jackpots, fixed awards, Envy Bonuses, Magic Card, Lucky Bonus."""
        return _tally(self.awards, lambda a: a.what)

    @property
    def jackpots(self) -> list[Award]:
        return [a for a in self.awards if a.jackpot]

    @property
    def resets(self) -> list[Award]:
        return [a for a in self.awards if a.reset]


@dataclass(frozen=True)
class TableEvent:
    """What the journal holds of the table beside its meters: a claim's step, a block only a supervisor lifts."""

    seq: int
    time: datetime
    kind: str
    detail: str


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str
    time: datetime | None


@dataclass(frozen=True)
class DeviceFaults:
    """One device's faults of the day (those open at its opening or close too), and how long it was down within the
    day: each fault from its drop to its return (a fault open at the close, to the close), clipped to the day."""

    device: str
    kind: str
    seats: tuple[int, ...]  # whose wagering it disables (none: the whole table)
    faults: tuple[Outage, ...]
    down: timedelta
    first: datetime  # the first fault's start, or the day's start if it was open then
    last: datetime  # the last fault's end, or the day's end if it is open then

    @property
    def flaps(self) -> int:
        return sum(o.flaps for o in self.faults)

    @property
    def open_at_close(self) -> bool:
        return self.faults[-1].end is None


@dataclass(frozen=True)
class BlockTime:
    """Progressive wagering disabled for one cause during the day: each time, and how long within the day."""

    block: str
    blocks: tuple[Outage, ...]
    time: timedelta


@dataclass(frozen=True)
class DayFaults:
    devices: tuple[DeviceFaults, ...] = ()
    blocks: tuple[BlockTime, ...] = ()
    blocked: timedelta = timedelta(0)  # disabled for any cause (causes at once counted once)


@dataclass(frozen=True)
class DayReport:
    day: GamingDay
    meters: Mapping[str, MeterDay]
    head: Head  # the journal's last entry before the day ended: the anchor a printed report keeps
    first_seq: int | None  # the day's first entry (None: none)
    entries: int  # the day's entries
    table_events: tuple[TableEvent, ...]
    faults: DayFaults = DayFaults()
    source: Source = Source(TABLE, "")
    tables: tuple[str, ...] = ()  # the tables the day's entries name (one at a table; those of the link)


def day_faults(book: FaultBook, day: GamingDay) -> DayFaults:
    """The day's device faults and blocked time from the outages `book` rebuilt from the journal up to the close."""
    found = book.outages(day.start, day.end)
    devices = []
    for name in sorted({o.name for o in found if o.kind == DEVICE_FAULT}):
        mine = tuple(o for o in found if o.kind == DEVICE_FAULT and o.name == name)
        d = mine[-1].detail
        devices.append(DeviceFaults(name, str(d.get("device_kind", "")), tuple(d.get("seats", ())), mine,
                                    covered(mine, day.start, day.end), max(mine[0].start, day.start),
                                    min(mine[-1].end or day.end, day.end)))
    blocks = [o for o in found if o.kind == WAGERING_BLOCK]
    times = tuple(BlockTime(b, mine, covered(mine, day.start, day.end))
                  for b in sorted({o.name for o in blocks}) for mine in [tuple(o for o in blocks if o.name == b)])
    return DayFaults(tuple(devices), times, covered(blocks, day.start, day.end))


def replay(records: Iterable[JournalRecord], state: Meters | None = None) -> Meters:
    """The meters after `records` (in journal order) from `state` (none: an empty journal). Entries that move no
    meter are passed over."""
    meters = dict(state or {})
    for r in records:
        _, meters = _step(meters, r)
    return MappingProxyType(meters)


def build_report(day: GamingDay, opening: Meters, records: Iterable[JournalRecord],
                 before: Head = Head(0, "", None), faults: FaultBook | None = None,
                 source: Source = Source(TABLE, "")) -> DayReport:
    """The report of `day` from the meters at its opening and the journal's entries of the day, in order.
    `before`: the last entry before the day (the head, when the day has no entry); `faults`: the device faults and
    blocks open at the day's opening (as `split_at` left them; none: an empty journal before the day). Raises InvariantViolation
    when a journaled result is not what replaying its entry gives, or a meter's reconciliation does not balance."""
    meters: dict[str, MeterState] = dict(opening)
    days = {m: _new_day(m, s, day) for m, s in sorted(opening.items())}
    head, first, count = before, None, 0
    events: list[TableEvent] = []
    book = faults if faults is not None else FaultBook()
    payouts: dict[tuple[str, int, str, str], tuple[str, str]] = {}  # what the day's claims say each payout is
    tables: set[str] = set()
    for r in records:
        first = r.seq if first is None else first
        head, count = Head(r.seq, r.hash, r.time), count + 1
        if isinstance(t := r.body.get("table"), str) and t:
            tables.add(t)
        if r.kind in FAULT_KINDS:
            book.feed(r)
            continue
        if r.kind == CLAIM:
            c = r.body.get("claim", {})
            event, by = r.body.get("event", ""), c.get("by") if isinstance(c, dict) else None
            who = f" by {by}" if by and event in ("approved", "rejected") else ""  # the supervisor, by name
            if event == "rejected" and isinstance(c, dict) and c.get("reason"):
                who += f" ({c['reason']})"
            events.append(TableEvent(r.seq, r.time, "claim", f"{c.get('id', '')} {event}{who}"))
            payouts.update(_claim_payouts(c))
            continue
        if r.kind == TABLE_STATE:
            events.append(TableEvent(r.seq, r.time, "table state", _table_state(r.body)))
            continue
        prev = meters
        moved, meters = _step(meters, r)
        if moved is None:
            continue
        if moved not in days:
            days[moved] = _new_day(moved, None, day)
            days[moved].defined = True
        _account(days[moved], prev.get(moved), meters[moved], r, payouts)
    for m, d in days.items():
        s = meters.get(m)
        d.closing, d.closing_readings = Holdings.of(s), Readings.of(s)
        if s is not None:
            d.reset_units, d.rate = s.params.reset_units, percent(s.params.rate)
        d.series.append((day.end, head.seq, d.closing.current))
        reconcile(d)
    return DayReport(day, MappingProxyType(dict(sorted(days.items()))), head, first, count, tuple(events),
                     day_faults(book, day), source, tuple(sorted(tables)))


def _claim_payouts(c: object) -> dict[tuple[str, int, str, str], tuple[str, str]]:
    """(round, seat, hand, award) as the meter records a payout of claim `c` (its journaled JSON) -> what the payout
    is and whose hand it pays on. A claim the journal holds in a form this reader does not know adds nothing: its
    payouts are then named by their meter operation."""
    try:
        claim = claim_from_json(c)
    except (InputError, TypeError, ValueError, KeyError):
        return {}
    return {(claim.round_id, p.seat, hit_hand(p), p.award): (payout_kind(p.award, p.kind), p.hand_of)
            for p in claim.payouts}


def reconcile(d: MeterDay) -> None:
    """Raise InvariantViolation unless `d` balances exactly: the visible meter, and everything the meter holds."""
    u = format_units
    bad = []
    if d.visible_expected() != d.closing.current:
        bad.append(f"visible: opening {u(d.opening.current)} + contributions {u(d.contributions)} + from reserve "
                   f"{u(d.from_reserve)} + from overflow {u(d.from_overflow)} + seed {u(d.seed)} + adjustments "
                   f"{u(d.adjustments)} - taken {u(d.taken)} - released to overflow {u(d.released_to_overflow)} = "
                   f"{u(d.visible_expected())}, closing {u(d.closing.current)}")
    if d.held_expected() != d.closing.total:
        bad.append(f"held: opening {u(d.opening.total)} + contributions {u(d.wagers_in)} + seed {u(d.seed)} + "
                   f"adjustments {u(d.adjustments)} - payouts {u(d.payouts)} = {u(d.held_expected())}, closing "
                   f"{u(d.closing.total)}")
    if bad:
        raise InvariantViolation(f"meter {d.meter_id}: the day does not reconcile: " + "; ".join(bad))


def meter_series(opening: Meters, records: Iterable[JournalRecord], start: datetime | None = None,
                 end: datetime | None = None) -> dict[str, list[tuple[datetime, int, int]]]:
    """Each meter's visible amount over time, for a plot: meter id -> [(time, seq, units after), ...].

    `opening` is the meters before the first of `records` (the journal's entries in order, over a day, 30 days or
    any span); each entry that moves a meter adds a point with the amount after it (units: 1,000,000 a dollar;
    `seq` 0 for the opening point). With `start`, every meter open then gets a first point at `start` with its
    opening amount; with `end`, a last point at `end` with its closing amount, so that each line spans the plot.
    Raises InvariantViolation as `build_report` does when an entry's journaled result is not its replay."""
    meters: dict[str, MeterState] = dict(opening)
    out: dict[str, list[tuple[datetime, int, int]]] = {}
    if start is not None:
        out = {m: [(start, 0, s.current)] for m, s in sorted(opening.items())}
    last = 0
    for r in records:
        last = r.seq
        moved, meters = _step(meters, r)
        if moved is not None:
            out.setdefault(moved, []).append((r.time, r.seq, meters[moved].current))
    if end is not None:
        for m, points in out.items():
            points.append((end, last, meters[m].current))
    return out


# --- the replay ----------------------------------------------------------------------------------


def _step(meters: dict[str, MeterState], r: JournalRecord) -> tuple[str | None, dict[str, MeterState]]:
    """The meter `r` moved (None: it moves none) and the meters after it, the replay checked against the journal."""
    if r.kind == DEFINE_METER:
        params = params_from_dict(r.body.get("params"), "params")
        at = parse_moment(r.body.get("at"), "at")
        new = initial_state(params, str(r.body.get("set_by", "")), at)
        return params.meter_id, {**meters, params.meter_id: new}
    if r.kind not in METER_KINDS:
        return None, meters
    meter_id = r.body.get("meter")
    if not isinstance(meter_id, str) or meter_id not in meters:
        raise InvariantViolation(f"entry {r.seq}: {r.kind} on meter {meter_id!r}, which the journal never defined")
    new, effect = apply(meters[meter_id], op_from_body(r.kind, r.body))
    replayed = {"meter": meter_id, **effect.to_dict()}
    if replayed != r.result:
        raise InvariantViolation(f"entry {r.seq}: {r.kind} on meter {meter_id}: the journal recorded {r.result!r}, "
                                 f"the replay gives {replayed!r}")
    return meter_id, {**meters, meter_id: new}


def _new_day(meter_id: str, s: MeterState | None, day: GamingDay) -> MeterDay:
    d = MeterDay(meter_id, Holdings.of(s), opening_readings=Readings.of(s))
    if s is not None:
        d.series.append((day.start, 0, s.current))
    return d


def _account(d: MeterDay, before: MeterState | None, after: MeterState, r: JournalRecord,
             payouts: Mapping[tuple[str, int, str, str], tuple[str, str]]) -> None:
    """Add entry `r` (which took the meter from `before` to `after`) to the day's figures of its meter."""
    d.series.append((r.time, r.seq, after.current))
    if before is None:  # defined: its reset amount is the operator's
        d.seed += after.seed
        d.changes.append(Change(r.seq, r.time, DEFINE_METER, str(r.body.get("set_by", "")), after.seed,
                                _params_text(after)))
        return
    res = r.result
    signed = _signed_units
    contributed, reserved, overflowed = (signed(res[k]) for k in ("contributed", "reserved", "overflowed"))
    taken = signed(res["taken"])
    d.from_reserve += signed(res["from_reserve"])
    d.from_overflow += signed(res["from_overflow"])
    d.seed += signed(res["seeded"])
    d.adjustments += signed(res["adjusted"])
    op = op_from_body(r.kind, r.body)
    if isinstance(op, meter_ops.ReleaseLockedAward):
        d.released_to_overflow += overflowed  # the ceiling sent the released excess to the overflow
    else:
        d.contributions += contributed
        d.reserved += reserved
        d.overflowed += overflowed
    if isinstance(op, (meter_ops.PayPercentAward, meter_ops.LockPercentAward, meter_ops.ReleaseLockedAward)):
        d.taken += taken
    if isinstance(op, meter_ops.PayPercentAward):
        d.payouts += taken
    elif isinstance(op, meter_ops.PayLockedAward):
        d.payouts += before.locked[op.claim].taken_units
    if isinstance(op, meter_ops.BookContributions):
        d.rounds_booked += 1
        d.wagers_count += len(op.wagers)
        d.wagers_cents += sum(c for _, c in op.wagers)
    elif isinstance(op, meter_ops.VoidRound):
        b = before.open_rounds[op.round_id]
        d.voided_count += len(b.wagers)
        d.voided_cents += b.wager_cents
        d.voids.append(Void(r.seq, r.time, op.round_id, op.reason, len(b.wagers), b.wager_cents))
    elif isinstance(op, meter_ops.TopUp):
        d.changes.append(Change(r.seq, r.time, op.kind, op.who, op.cents * UNITS_PER_CENT, op.reason))
    elif isinstance(op, meter_ops.Adjust):
        d.changes.append(Change(r.seq, r.time, op.kind, op.credential, op.units, op.reason))
    elif isinstance(op, meter_ops.ChangeParams):
        d.changes.append(Change(r.seq, r.time, op.kind, op.who, signed(res["seeded"]), _params_text(after)))
    if after.hit_count > before.hit_count:
        h = after.history[-1] if after.history else None
        if h is None:
            raise InvariantViolation(f"entry {r.seq}: a hit on meter {d.meter_id} with no history kept")
        d.paid_cents += h.amount_cents
        # a payout no claim of the day names: what it is by its award and the hand the meter recorded
        what, hand_of = payouts.get((h.round_id, h.seat, h.hand, h.award), (payout_kind(h.award, hand=h.hand), ""))
        reset = any(signed(res[k]) > 0 for k in ("from_reserve", "from_overflow", "seeded"))
        d.awards.append(Award(r.seq, r.time, h.round_id, h.table, h.seat, h.hand, h.award, h.label, h.amount_cents,
                              h.paid_by, h.approved_by, h.shares, h.meter_before, h.meter_after, what, hand_of,
                              reset))


def _signed_units(text: object) -> int:
    """A journaled amount of dollars, signed, as units ("-0.35" -> -350000)."""
    s = str(text)
    neg = s.startswith("-")
    value = parse_units(s[1:] if neg else s, "result")
    return -value if neg else value


def _params_text(s: MeterState) -> str:
    """The meter's parameters in words (the report prints them as they are)."""
    p = s.params
    wagers = [format_dollars_human(c) for c in p.wager_sizes]
    return (f"reset amount {format_dollars_human(p.reset_cents)}, rate of progression {percent(p.rate)}, reserve rate "
            f"{percent(p.reserve_rate)}, "
            + (f"ceiling {format_dollars_human(p.ceiling_cents)}" if p.ceiling_cents is not None else "no ceiling")
            + ", wagers of " + (", ".join(wagers[:-1]) + " or " + wagers[-1] if len(wagers) > 1 else "".join(wagers)
                                or "any size")
            + f", a history of the last {p.history_size} hits")


def percent(rate: Fraction) -> str:
    """A rate as a percentage, exact: Fraction(3, 20) -> "15%", Fraction(1, 8) -> "12.5%"."""
    value = rate * 100
    whole, rest = divmod(value.numerator, value.denominator)
    if not rest:
        return f"{whole}%"
    digits = ""
    for _ in range(6):  # a configured rate has at most four decimal places: two here
        rest *= 10
        d, rest = divmod(rest, value.denominator)
        digits += str(d)
        if not rest:
            break
    return f"{whole}.{digits}%"


def _table_state(body: Mapping[str, Any]) -> str:
    deck = body.get("deck") or []
    asked = body.get("void_requested")
    parts = [f"deck blocked by {', '.join(deck)}" if deck else "deck not blocked"]
    if asked:
        parts.append(f"void of {asked.get('round_id')} asked: {asked.get('reason')}")
    return "; ".join(parts)


def _tally(awards: Iterable[Award], key: Any) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for a in awards:
        k = key(a)
        n, c = out.get(k, (0, 0))
        out[k] = (n + 1, c + a.cents)
    return dict(sorted(out.items()))


def split_at(records: Iterable[JournalRecord], start: datetime,
             faults: FaultBook | None = None) -> tuple[Meters, Head, Iterator[JournalRecord]]:
    """`records` (the journal's entries in order, from its first) cut at the first entry stamped at or after
    `start`: the meters those before it leave, the last entry before it, and the entries from it on (an iterator
    over the rest of `records`). A clock stepped back after `start` keeps its entries after the cut. With `faults`,
    the device faults and blocks of the entries before the cut are fed to it: what is open at the cut stays."""
    it = iter(records)
    meters: dict[str, MeterState] = {}
    before = Head(0, "", None)
    for r in it:
        if r.time >= start:
            break
        if faults is not None and r.kind in FAULT_KINDS:
            faults.feed(r)
        _, meters = _step(meters, r)
        before = Head(r.seq, r.hash, r.time)
    else:
        r = None
    if faults is not None:
        faults.forget_ended()
    return MappingProxyType(meters), before, iter(()) if r is None else _chain(r, it)


def _until(records: Iterator[JournalRecord], end: datetime) -> Iterator[JournalRecord]:
    """The entries up to the first one stamped at or after `end`."""
    for r in records:
        if r.time >= end:
            return
        yield r


def day_report(records: Iterable[JournalRecord], day: GamingDay, source: Source | None = None) -> DayReport:
    """The report of `day` from the journal's entries in order, from its first: those before the first entry
    stamped at or after the day's start make the opening meters; the day's entries follow it up to the first one
    stamped at or after the day's end (a clock stepped back inside a day keeps its entries in the day).

    `source`: whose journal it is; None: told from the entries up to the close (a link authority's journal keys
    the tables' operations "link:TABLE:N"; a table's names its own table in every round), its id "" when that does
    not say (an authority's id is not in its journal: give it). InputError when `source` is not whose the entries
    say it is (another table's, a table's for an authority's)."""
    faults = FaultBook()
    seen = _Seen()
    opening, before, rest = split_at(seen.watch(records), day.start, faults)
    report = build_report(day, opening, _until(rest, day.end), before, faults)
    if source is not None and source.kind == TABLE and seen.tables and source.id not in seen.tables:
        raise InputError("table", f"the journal is of table {', '.join(sorted(seen.tables))}, not {source.id}")
    if source is not None and (source.kind == AUTHORITY) != seen.link and (seen.link or seen.tables):
        raise InputError("table" if seen.link else "authority",
                         "the journal is a link authority's" if seen.link else "the journal is a table's")
    return replace(report, source=source if source is not None else seen.source())


class _Seen:
    """Who a journal is of, from its entries as they are read."""

    def __init__(self) -> None:
        self.tables: set[str] = set()
        self.link = False

    def watch(self, records: Iterable[JournalRecord]) -> Iterator[JournalRecord]:
        for r in records:
            self.link = self.link or r.key.startswith(LINK_KEY_PREFIX)
            if isinstance(t := r.body.get("table"), str) and t:
                self.tables.add(t)
            yield r

    def source(self) -> Source:
        if self.link:
            return Source(AUTHORITY, "")
        return Source(TABLE, next(iter(self.tables)) if len(self.tables) == 1 else "")


def span_series(records: Iterable[JournalRecord], start: datetime,
                end: datetime) -> dict[str, list[tuple[datetime, int, int]]]:
    """`meter_series` over [start, end) from the journal's entries in order, from its first (those before `start`
    make the opening meters, as for `day_report`): each meter's line spans the plot from `start` to `end`."""
    opening, _, rest = split_at(records, start)
    return meter_series(opening, _until(rest, end), start, end)


# A span's interval keeps at most this many points: its first, last, highest and lowest, and both ends of its
# largest fall (a reset after a jackpot: shown to its full depth even when a lower amount came earlier).
POINTS_PER_INTERVAL = 6


def downsample(points: Sequence[tuple[datetime, int, int]],
               edges: Sequence[datetime]) -> list[tuple[datetime, int, int]]:
    """At most POINTS_PER_INTERVAL of `points` ((time, seq, units), in journal order) for each interval between
    consecutive `edges` (rising; a point before the first edge counts in the first interval, one at or after the
    last in the last): the interval's first and last points, its highest and lowest, and the two points either
    side of its largest fall, kept in their order. A fall between two intervals is kept by their last and first."""
    if len(edges) < 2:
        raise ValueError("downsample needs at least two edges (one interval)")
    last = len(edges) - 2
    groups: dict[int, list[tuple[datetime, int, int]]] = {}
    for p in points:
        groups.setdefault(min(max(bisect_right(edges, p[0]) - 1, 0), last), []).append(p)
    out: list[tuple[datetime, int, int]] = []
    for i in sorted(groups):
        g = groups[i]
        keep = {0, len(g) - 1, max(range(len(g)), key=lambda k: g[k][2]), min(range(len(g)), key=lambda k: g[k][2])}
        fall = max(range(1, len(g)), key=lambda k: g[k - 1][2] - g[k][2], default=None)
        if fall is not None and g[fall - 1][2] > g[fall][2]:
            keep |= {fall - 1, fall}
        out += [g[k] for k in sorted(keep)]
    return out


def _chain(first: JournalRecord, rest: Iterator[JournalRecord]) -> Iterator[JournalRecord]:
    yield first
    yield from rest


__all__ = ["AUTHORITY", "METER_KINDS", "POINTS_PER_INTERVAL", "TABLE", "Award", "BlockTime", "Change", "DayFaults",
           "DayReport", "DeviceFaults", "Head", "Holdings", "JournalRecord", "MeterDay", "Readings", "Source",
           "TableEvent", "Void", "build_report", "day_faults", "day_report", "downsample", "meter_series", "percent",
           "reconcile", "replay", "span_series", "split_at"]

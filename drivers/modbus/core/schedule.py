"""Which read goes next on a bus: pure, given the reads waiting for the line, the round's phase and the clock.

One scheduler per bus (drivers/modbus/scheduler.py) asks `choose` each time the line is free. Writes (the
accepted and win lights, the lock-out lamp, the sign) are not chosen here: they take the line before any
waiting read (bus.BusLock), between two reads. Reads go in this order:

1. While betting, the lock-out button after at most `lockout_every - 1` other reads: the dealer's "no more
   bets" is seen within `lockout_every` reads (reads, not transactions: writes and a turn's second request
   come between), whatever the number of seats, so a chip placed after
   the press has little time to be taken for a wager (after lock-out nothing is recognized: § 639a.8(b),
   § 641a.8(b), § 667a.8(b)).
2. Otherwise the read most overdue. Each read is due `interval` after the previous one: its device's own
   interval (0.05 s by default: as often as the bus allows) for the lock-out and the seats while betting;
   `health_interval` for reads no phase needs fast: the seats and the lock-out while the cards are dealt,
   when no wager can be recognized anyway, read only to see the device is alive and to keep its state.
   The sign keeps its own interval (it reads back what it shows).
3. A device that is down is read (probed) no sooner than its backoff allows (`not_before`).

On a bus with a `max_rate` (a Modbus TCP gateway: transactions a second), no read goes before the transactions
since the last one was given the line (its own, retries, the writes between) have had their share of time at
that rate (`free_at`): the reads are spread, and the lock-out still comes first when its turn is due, so it is
read every `lockout_every / max_rate` seconds while betting and the seats share the rest. Writes are not
paced (a sign update is up to 11 requests at once): the time they owe is paid by the other reads, while the
lock-out goes ahead of it once `lockout_every / max_rate` seconds have passed since its last read and the reads
alone have had their time (`reads_free_at`), so its cadence holds through a burst of writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    SEAT = "seat"
    LOCKOUT = "lockout"
    SIGN = "sign"


class Phase(StrEnum):
    """What the bus's reads are for now. BETTING by default: a table whose phase nobody told is read fast."""

    BETTING = "betting"  # wagers are recognized: seats fast, the lock-out between them
    DEALING = "dealing"  # wagers frozen (locking, dealing, a void on its way): seats and lock-out for health


@dataclass(frozen=True)
class Policy:
    lockout_every: int = 2  # while betting, the lock-out read at least every this many reads
    health_interval: float = 2.0  # seconds between reads that no phase needs fast
    max_rate: float | None = None  # transactions a second at most (a TCP bus); None: as fast as the line goes

    def __post_init__(self) -> None:
        if self.max_rate is not None and not 0 < self.max_rate <= 10_000:
            raise ValueError("max_rate must be more than 0 and at most 10000 transactions a second")
        if not 2 <= self.lockout_every <= 100:  # 1 would read the lock-out and nothing else
            raise ValueError("lockout_every must be 2..100 reads")
        if not 0.0 < self.health_interval <= 60.0:
            raise ValueError("health_interval must be more than 0 and at most 60 seconds")


@dataclass(frozen=True)
class Read:
    """A device waiting to be read."""

    device: str
    role: Role
    interval: float  # the device's own shortest interval between reads (seconds)
    last: float | None = None  # when it was last read (the clock's seconds); None: never
    not_before: float = 0.0  # a device that is down: not probed before its backoff ends


@dataclass(frozen=True)
class State:
    since_lockout: int = 0  # reads since the lock-out was last read
    phase: Phase = Phase.BETTING
    free_at: float = 0.0  # the rate cap: no read before this (the clock's seconds)
    reads_free_at: float = 0.0  # the same counting reads only: a due lock-out may go then (ahead of writes' time)


@dataclass(frozen=True)
class Ledger:
    """The rate cap's account when a read was last given the line: from `at`, every transaction of the bus
    (its count then: `transactions`) takes 1 / max_rate; from `reads_at`, every read transaction (`reads`)."""

    at: float
    transactions: int
    reads_at: float
    reads: int


@dataclass(frozen=True)
class Choice:
    """`device` to read now; or none now, and `wait` seconds until one is due (None: nobody is waiting)."""

    device: str | None
    wait: float | None = None


def interval(policy: Policy, read: Read, phase: Phase) -> float:
    """Seconds from one read of `read`'s device to its next, in `phase`."""
    if read.role is Role.SIGN or phase is Phase.BETTING:
        return read.interval
    return max(read.interval, policy.health_interval)


def due_at(policy: Policy, read: Read, phase: Phase) -> float:
    if read.last is None:
        return read.not_before
    return max(read.last + interval(policy, read, phase), read.not_before)


def choose(policy: Policy, state: State, reads: Sequence[Read], now: float) -> Choice:
    """The next read, of those waiting. Of several equally due, the first in `reads` (the scheduler keeps them
    in the order they asked: each device in turn)."""
    if not reads:
        return Choice(None)
    lockout = None
    if state.phase is Phase.BETTING:
        lockout = next((r for r in reads if r.role is Role.LOCKOUT and r.not_before <= now), None)
    cadence = None if lockout is None else lockout_due(policy, state, lockout)
    if lockout is not None and cadence is not None and cadence <= now + 1e-9:  # sums of slots: rounding
        return Choice(lockout.device)
    if now < state.free_at:
        return Choice(None, min(state.free_at, cadence if cadence is not None else state.free_at) - now)
    if lockout is not None and state.since_lockout >= policy.lockout_every - 1:
        return Choice(lockout.device)
    best = min(reads, key=lambda r: due_at(policy, r, state.phase))
    when = due_at(policy, best, state.phase)
    if when <= now:
        return Choice(best.device)
    return Choice(None, min(when, cadence if cadence is not None else when) - now)


def lockout_due(policy: Policy, state: State, lockout: Read) -> float | None:
    """Under a rate cap, while betting: when the lock-out goes ahead of the others and of the writes' time,
    `lockout_every` slots of the cap after its last read (once the reads alone have had their time)."""
    if policy.max_rate is None:
        return None
    # never later than any other read may go: the reads' account restarts from now after an idle spell where the
    # whole account keeps its slot, so either may be the earlier
    free = min(state.reads_free_at, state.free_at)
    if lockout.last is None:
        return free
    return max(free, lockout.last + policy.lockout_every / policy.max_rate)


def after(state: State, role: Role) -> State:
    """The state once a read of `role` was given the line."""
    return State(0 if role is Role.LOCKOUT else state.since_lockout + 1, state.phase, state.free_at,
                 state.reads_free_at)


def owed(policy: Policy, ledger: Ledger | None, transactions: int, reads: int) -> tuple[float, float]:
    """(`free_at`, `reads_free_at`) given the bus's counts of transactions and of read transactions now."""
    if ledger is None:
        return 0.0, 0.0
    return (free_at(policy, ledger.at, transactions - ledger.transactions),
            free_at(policy, ledger.reads_at, reads - ledger.reads))


def granted(policy: Policy, state: State, now: float, transactions: int, reads: int) -> Ledger:
    """The ledger once a read is given the line at `now`. Counted from the slot the cap gave, not from a timer's
    late wake-up (the loop's timers wake on whole milliseconds: ~10% of a slot at 100 a second); from now after
    an idle spell, so no burst follows. A lock-out gone ahead of the writes' time leaves that time owed."""
    rate = policy.max_rate

    def base(slot: float) -> float:
        return slot if rate is not None and 0 <= now - slot < 1 / rate else now

    at = state.free_at if now < state.free_at else base(state.free_at)
    return Ledger(at, transactions, base(state.reads_free_at), reads)


def free_at(policy: Policy, granted_at: float | None, transactions: int) -> float:
    """When the next read may go under the rate cap: `transactions` (at least the read's own) since a read was
    last given the line at `granted_at`, each taking 1 / max_rate seconds."""
    if policy.max_rate is None or granted_at is None:
        return 0.0
    return granted_at + max(1, transactions) / policy.max_rate


__all__ = ["Choice", "Ledger", "Phase", "Policy", "Read", "Role", "State", "after", "choose", "due_at", "free_at",
           "granted", "interval", "lockout_due", "owed"]

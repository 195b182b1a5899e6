"""The bus's schedule (drivers/modbus/core/schedule.py, pure) and its scheduler (drivers/modbus/scheduler.py): the
lock-out read between the others while betting, seats slow while dealing, nobody starved, down devices probed
only after their backoff; and the scheduler hands the line to one read at a time, in that order."""

from __future__ import annotations

import asyncio
import collections
import itertools
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from drivers.modbus.core.schedule import Phase, Policy, Read, Role, State, after, choose, free_at, granted, owed
from drivers.modbus.scheduler import BusScheduler


def seats(n: int, interval: float = 0.05) -> list[Read]:
    return [Read(f"seat-{i}", Role.SEAT, interval) for i in range(1, n + 1)]


LOCKOUT = Read("lockout", Role.LOCKOUT, 0.05)
SIGN = Read("sign", Role.SIGN, 1.0)


def simulate(policy: Policy, reads: list[Read], phase: Phase, txn_s: list[float], *, down: dict[str, float] | None = None,
             seconds: float = 30.0) -> list[tuple[float, str]]:
    """Every device asks again as soon as its read is done; each read takes the next of `txn_s` seconds. The
    reads given the line, with their times."""
    state, now, last, out, i = State(phase=phase), 0.0, {}, [], 0
    down = down or {}
    while now < seconds:
        if out:  # the rate cap, if any: one transaction a read here
            due = free_at(policy, out[-1][0], 1)  # no writes: the reads' time is all the time
            state = State(state.since_lockout, state.phase, due, due)
        waiting = [Read(r.device, r.role, r.interval, last.get(r.device), down.get(r.device, 0.0)) for r in reads]
        c = choose(policy, state, waiting, now)
        if c.device is None:
            assert c.wait is not None and c.wait > 0
            now += c.wait
            continue
        r = next(r for r in waiting if r.device == c.device)
        assert r.not_before <= now, "a device down is probed before its backoff ends"
        out.append((now, c.device))
        last[c.device] = now
        state = after(state, r.role)
        now += txn_s[i % len(txn_s)]
        i += 1
    return out


txns = st.lists(st.floats(0.004, 0.05), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 16), every=st.integers(2, 6), txn_s=txns)
def test_while_betting_the_lock_out_is_read_between_the_others_and_no_seat_waits_long(n, every, txn_s):
    policy = Policy(lockout_every=every)
    out = simulate(policy, [*seats(n), LOCKOUT, SIGN], Phase.BETTING, txn_s, seconds=5.0)
    names = [d for _, d in out]
    gaps = [len(list(g)) for k, g in itertools.groupby(names, key=lambda d: d == "lockout") if not k]
    assert max(gaps, default=0) <= every - 1
    # every seat is read within one round of all the others (and their lock-out reads) of its last read
    per_round = (n + 1) * every + 1
    for seat in (f"seat-{i}" for i in range(1, n + 1)):
        idx = [i for i, d in enumerate(names) if d == seat]
        assert idx and idx[0] <= per_round and all(b - a <= per_round for a, b in itertools.pairwise(idx)), seat


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 16), txn_s=txns, health=st.floats(0.2, 5.0))
def test_while_dealing_seats_and_lock_out_are_read_for_health_only(n, txn_s, health):
    policy = Policy(health_interval=health)
    out = simulate(policy, [*seats(n), LOCKOUT, SIGN], Phase.DEALING, txn_s, seconds=20.0)
    times = collections.defaultdict(list)
    for t, d in out:
        times[d].append(t)
    for d, ts in times.items():
        least = SIGN.interval if d == "sign" else health
        assert all(b - a >= least - 1e-9 for a, b in itertools.pairwise(ts)), d
        assert all(b - a <= least + 0.06 * (n + 2) for a, b in itertools.pairwise(ts)), d  # and no later than due, a round
    assert set(times) == {*(f"seat-{i}" for i in range(1, n + 1)), "lockout", "sign"}


def test_a_device_down_is_probed_only_after_its_backoff_and_the_others_go_on():
    out = simulate(Policy(), [*seats(7), LOCKOUT, SIGN], Phase.BETTING, [0.02], down={"seat-3": 2.0}, seconds=3.0)
    seat3 = [t for t, d in out if d == "seat-3"]
    assert seat3 and seat3[0] >= 2.0
    assert sum(1 for t, d in out if d == "seat-4" and t < 2.0) > 5  # the other seats were read all along


def test_the_lock_out_is_not_forced_while_it_is_down():
    out = simulate(Policy(), [*seats(2), LOCKOUT], Phase.BETTING, [0.02], down={"lockout": 1.0}, seconds=1.5)
    assert all(t >= 1.0 for t, d in out if d == "lockout") and any(d == "lockout" for _, d in out)


def test_nothing_due_says_how_long_to_wait_and_nobody_waiting_says_nothing():
    c = choose(Policy(health_interval=1.0), State(phase=Phase.DEALING), [Read("seat-1", Role.SEAT, 0.05, last=10.0)],
               10.25)
    assert c.device is None and c.wait == pytest.approx(0.75)
    assert choose(Policy(), State(), [], 0.0).wait is None


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 16), every=st.integers(2, 6), rate=st.floats(20.0, 400.0), txn_s=txns)
def test_a_rate_cap_spreads_the_reads_and_keeps_the_lock_out_first(n, every, rate, txn_s):
    policy = Policy(lockout_every=every, max_rate=rate)
    out = simulate(policy, [*seats(n, interval=0.0), LOCKOUT, SIGN], Phase.BETTING, txn_s, seconds=3.0)
    times = [t for t, _ in out]
    assert all(b - a >= 1 / rate - 1e-9 for a, b in itertools.pairwise(times))  # never faster than the cap
    assert len(out) <= 3.0 * rate + 1
    names = [d for _, d in out]
    gaps = [len(list(g)) for k, g in itertools.groupby(names, key=lambda d: d == "lockout") if not k]
    assert max(gaps, default=0) <= every - 1


def simulate_writes(policy: Policy, reads: list[Read], txn_s: list[float], bursts: dict[int, int],
                    seconds: float) -> tuple[list[tuple[float, str]], int]:
    """As `simulate`, betting, with the rate cap's ledger as the scheduler keeps it, and after the i-th read
    `bursts[i]` writes at once (a sign update: up to 11 requests). The reads given the line, and the writes."""
    state, now, last, out, i = State(), 0.0, {}, [], 0
    ledger, total, done_reads, writes = None, 0, 0, 0
    while now < seconds:
        due, reads_due = owed(policy, ledger, total, done_reads)
        state = State(state.since_lockout, state.phase, due, reads_due)
        waiting = [Read(r.device, r.role, r.interval, last.get(r.device)) for r in reads]
        c = choose(policy, state, waiting, now)
        if c.device is None:
            assert c.wait is not None and c.wait > 0
            now += c.wait
            continue
        r = next(r for r in waiting if r.device == c.device)
        assert r.role is Role.LOCKOUT or now >= due - 1e-9, "a read other than the lock-out before the writes' time"
        out.append((now, c.device))
        last[c.device] = now
        ledger = granted(policy, state, now, total, done_reads)
        total, done_reads = total + 1, done_reads + 1
        state = after(state, r.role)
        now += txn_s[i % len(txn_s)]
        total += bursts.get(i, 0)
        writes += bursts.get(i, 0)
        i += 1
    return out, writes


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 16), every=st.integers(2, 6), rate=st.floats(20.0, 400.0), txn_s=txns,
       bursts=st.dictionaries(st.integers(0, 200), st.integers(1, 11), max_size=20))
# found once in a full run: after an idle spell the reads' account restarted from now while the whole account kept
# its slot, and the lock-out waited behind the sign's long read (85.9 ms against 85.2 allowed)
@example(n=1, every=3, rate=65.0, txn_s=[0.0390625, 0.0078125], bursts={0: 1})
def test_a_burst_of_writes_does_not_hold_up_the_lock_out(n, every, rate, txn_s, bursts):
    policy = Policy(lockout_every=every, max_rate=rate)
    out, writes = simulate_writes(policy, [*seats(n, interval=0.0), LOCKOUT, SIGN], txn_s, bursts, seconds=2.0)
    lockouts = [t for t, d in out if d == "lockout"]
    # its cadence: `lockout_every` slots of the cap, writes or not, late at most by a read that began just before
    # (its transaction or its slot, whichever is longer); without going ahead: up to 11 writes' time more
    late = max(1 / rate, max(txn_s))
    assert all(b - a <= every / rate + late + 1e-9 for a, b in itertools.pairwise(lockouts))
    # the writes' time is still paid, by the other reads
    others = sum(1 for _, d in out if d != "lockout")
    assert others + writes <= 2.0 * rate + 11 + 1


def test_the_rate_cap_counts_every_transaction_since_the_last_read():
    policy = Policy(max_rate=100.0)
    assert free_at(policy, 10.0, 0) == free_at(policy, 10.0, 1) == pytest.approx(10.01)
    assert free_at(policy, 10.0, 3) == pytest.approx(10.03)  # a read, its retry and a write between
    assert free_at(Policy(), 10.0, 3) == 0.0 and free_at(policy, None, 3) == 0.0
    c = choose(policy, State(free_at=10.03, reads_free_at=10.03), [LOCKOUT], 10.0)
    assert c.device is None and c.wait == pytest.approx(0.03)
    # two of those three were writes: the lock-out, due by its cadence, goes ahead of their time; a seat waits
    lockout = replace(LOCKOUT, last=9.98)
    state = State(free_at=10.03, reads_free_at=9.99)
    assert choose(policy, state, [seats(1)[0], lockout], 9.995).wait == pytest.approx(0.005)
    assert choose(policy, state, [seats(1)[0], lockout], 10.0).device == "lockout"
    assert choose(policy, state, [seats(1)[0]], 10.0).wait == pytest.approx(0.03)
    assert choose(policy, replace(state, phase=Phase.DEALING), [lockout], 10.0).device is None
    assert choose(policy, state, [replace(lockout, last=9.99)], 10.0).wait == pytest.approx(0.01)  # cadence: 20 ms


@pytest.mark.parametrize("bad", [dict(lockout_every=1), dict(health_interval=0.0), dict(health_interval=61.0),
                                 dict(max_rate=0.0), dict(max_rate=10_001.0)])
def test_a_policy_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        Policy(**bad)


# --- the scheduler: one read at a time --------------------------------------------------------------------


async def test_the_scheduler_gives_the_line_to_one_read_at_a_time_lock_out_between_the_others():
    sched = BusScheduler(Policy(lockout_every=2))
    order: list[str] = []
    active = 0

    async def device(read: Read, times: int) -> None:
        nonlocal active
        for _ in range(times):
            async with sched.turn(read):
                active += 1
                assert active == 1
                order.append(read.device)
                await asyncio.sleep(0)
                active -= 1

    async with asyncio.TaskGroup() as tg:
        for r in (*seats(3, interval=0.0), Read("lockout", Role.LOCKOUT, 0.0)):
            tg.create_task(device(r, 6 if r.role is Role.LOCKOUT else 3))
    # the lock-out after every other read while the seats last
    first_seats = [i for i, d in enumerate(order) if d != "lockout"][:6]
    assert all(order[i + 1] == "lockout" for i in first_seats[:5]), order
    assert sched.reads == {"seat": 9, "lockout": 6}


async def test_a_cancelled_waiter_leaves_the_line_to_the_others():
    sched = BusScheduler(Policy())
    hold = asyncio.Event()

    async def holder() -> None:
        async with sched.turn(Read("seat-1", Role.SEAT, 0.0)):
            await hold.wait()

    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(holder())
        await asyncio.sleep(0)
        waiter = tg.create_task(_turn(sched, "seat-2"))
        other = tg.create_task(_turn(sched, "seat-3"))
        await asyncio.sleep(0)
        waiter.cancel()
        hold.set()
    assert first.done() and waiter.cancelled() and other.result() == "seat-3"


async def _turn(sched: BusScheduler, name: str) -> str:
    async with sched.turn(Read(name, Role.SEAT, 0.0)):
        return name


async def test_a_phase_change_takes_effect_at_once():
    t = [0.0]
    sched = BusScheduler(Policy(health_interval=10.0), clock=lambda: t[0])
    sched.set_phase(Phase.DEALING)
    await _turn(sched, "seat-1")  # never read: due at once
    t[0] = 0.1
    late = asyncio.create_task(_turn(sched, "seat-1"))  # read 0.1 s ago: due in 9.9 s while dealing
    await asyncio.sleep(0.01)
    assert not late.done()
    sched.set_phase(Phase.BETTING)  # betting: due (its own interval, 0.0)
    assert await asyncio.wait_for(late, 1.0) == "seat-1"

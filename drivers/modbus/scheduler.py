"""One scheduler per bus: the line goes to one read at a time, the one drivers/modbus/core/schedule.py chooses.

    async with bus.scheduler.turn(Read("seat-3", Role.SEAT, interval=0.05)):
        await device.poll_once()

A device's `run` asks for its turn, polls, and asks again; the scheduler hands the turn to the read `choose`
picks whenever the line is free of reads, and wakes itself when the next read falls due (or, on a bus with a
rate cap, when the transactions since the last read have had their time). Writes do not ask:
they wait for the bus lock only and go before any read (bus.BusLock), between two reads.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable

from drivers.modbus.core.schedule import Ledger, Phase, Policy, Read, Role, State, after, choose, granted, owed


class BusScheduler:
    def __init__(self, policy: Policy | None = None, *, clock: Callable[[], float] = time.monotonic,
                 transactions: Callable[[], int] = lambda: 0, writes: Callable[[], int] = lambda: 0) -> None:
        self.policy = policy or Policy()
        self._clock = clock
        self._transactions = transactions  # the bus's count, for the rate cap (Policy.max_rate)
        self._writes = writes  # of which writes (not paced: a due lock-out goes ahead of their time)
        self._ledger: Ledger | None = None  # the rate cap's account when a read was last given the line
        self._state = State()
        self._waiting: dict[str, tuple[Read, asyncio.Future[None]]] = {}  # in the order they asked
        self._last: dict[str, float] = {}
        self._busy = False
        self._timer: asyncio.TimerHandle | None = None
        self.reads: collections.Counter[str] = collections.Counter()  # reads given the line, by role

    @property
    def phase(self) -> Phase:
        return self._state.phase

    def set_phase(self, phase: Phase) -> None:
        if phase is not self._state.phase:
            self._state = dataclasses.replace(self._state, phase=phase)
            self._next()

    @contextlib.asynccontextmanager
    async def turn(self, read: Read) -> AsyncIterator[None]:
        """Wait until `read` is the one to go, hold the turn for the block's read, then pass it on."""
        if read.device in self._waiting:
            raise RuntimeError(f"{read.device} already waits for its turn")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[read.device] = (read, fut)
        self._next()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # given the turn just as it was cancelled: pass it on
                self._release()
            elif self._waiting.get(read.device, (None, None))[1] is fut:
                del self._waiting[read.device]
                self._next()
            raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        self._busy = False
        self._next()

    def _next(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for device in [d for d, (_, f) in self._waiting.items() if f.done()]:
            del self._waiting[device]  # its task was cancelled and has not yet run to say so
        if self._busy or not self._waiting:
            return
        now = self._clock()
        if self.policy.max_rate is not None:
            total = self._transactions()
            due, reads_due = owed(self.policy, self._ledger, total, total - self._writes())
            self._state = dataclasses.replace(self._state, free_at=due, reads_free_at=reads_due)
        reads = [dataclasses.replace(r, last=self._last.get(r.device)) for r, _ in self._waiting.values()]
        choice = choose(self.policy, self._state, reads, now)
        if choice.device is None:
            if choice.wait is not None:
                self._timer = asyncio.get_running_loop().call_later(choice.wait, self._next)
            return
        read, fut = self._waiting.pop(choice.device)
        self._busy = True
        total = self._transactions()
        self._ledger = granted(self.policy, self._state, now, total, total - self._writes())
        self._last[read.device] = now
        self._state = after(self._state, read.role)
        self.reads[read.role.value] += 1
        fut.set_result(None)


__all__ = ["BusScheduler", "Phase", "Policy", "Read", "Role"]

"""The bus lock: one transaction at a time; outputs (writes) go before the polls (reads) waiting for the line."""

from __future__ import annotations

import asyncio

from drivers.modbus.bus import BusLock


async def test_writes_go_before_waiting_reads_and_reads_keep_their_order():
    lock, order = BusLock(), []
    first_in = asyncio.Event()
    go = asyncio.Event()

    async def user(name: str, urgent: bool, hold_until: asyncio.Event | None = None):
        async with lock.hold(urgent):
            order.append(name)
            if hold_until is not None:
                first_in.set()
                await hold_until.wait()

    holder = asyncio.create_task(user("poll-1", False, go))
    await first_in.wait()
    waiting = [asyncio.create_task(user(n, u)) for n, u in
               (("poll-2", False), ("poll-3", False), ("sign", True), ("lamp", True))]
    await queued(lock, 4)
    assert lock.locked
    go.set()
    await asyncio.gather(holder, *waiting)
    assert order == ["poll-1", "sign", "lamp", "poll-2", "poll-3"]
    assert not lock.locked


async def test_a_cancelled_waiter_does_not_keep_the_line():
    lock = BusLock()
    go = asyncio.Event()
    entered = asyncio.Event()

    async def hold():
        async with lock.hold(False):
            entered.set()
            await go.wait()

    holder = asyncio.create_task(hold())
    await entered.wait()
    waiter = asyncio.create_task(hold())
    other = asyncio.create_task(hold())
    await queued(lock, 2)
    waiter.cancel()
    go.set()
    await holder
    await other
    assert waiter.cancelled()
    assert not lock.locked


async def test_cancelled_just_as_handed_the_line_passes_it_on():
    lock, after = BusLock(), []

    async def hold(name: str):
        async with lock.hold(False):
            after.append(name)

    held = lock.hold(False)
    await held.__aenter__()
    b, c = asyncio.create_task(hold("b")), asyncio.create_task(hold("c"))
    await queued(lock, 2)
    await held.__aexit__(None, None, None)  # hands the line to b's future ...
    b.cancel()                              # ... and b is cancelled before it runs
    await c
    assert after == ["c"] and b.cancelled() and not lock.locked


async def queued(lock: BusLock, n: int) -> None:
    async with asyncio.timeout(5):
        while lock.waiting < n:
            await asyncio.sleep(0)

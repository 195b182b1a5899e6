"""A seat device that stops answering disables its seat only (docs/rounds.md, "A device down"), so it must never
take the other devices of its bus down with it: each transaction has its own timeout, and a neighbour's poll
gets its own answer. Driven poll by poll over a serial line and over Modbus TCP: no waits but the polls'."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from test_modbus_sim import LOCKOUT, SEAT3, run_async, serial_rig, tcp_rig


@contextlib.asynccontextmanager
async def seat_and_lockout(transport: str):
    """A seat device and the lock-out on one bus (serial or TCP), each polled once and answering."""
    async with (serial_rig if transport == "rtu" else tcp_rig)(SEAT3, LOCKOUT) as rig:
        seat, lock = rig.device("seat-3"), rig.device("lockout")
        assert await lock.poll_once() and await seat.poll_once()
        yield rig, seat, lock


@pytest.mark.parametrize("transport", ["rtu", "tcp"])
@run_async
async def test_a_silent_unit_never_takes_a_seldom_polled_neighbour_down(transport):
    async with seat_and_lockout(transport) as (rig, seat, lock):
        rig.sims["seat-3"].mute(True)
        for _ in range(rig.bus.settings.reconnect_after):  # nothing else on the bus between the silent seat's polls
            assert not await seat.poll_once()
        assert seat.health.up is False
        answered = await lock.poll_once()
        assert answered and lock.health.up and "down" not in lock.health.errors, dict(lock.health.errors)
        assert await seat.poll_once() is False and await lock.poll_once()


@pytest.mark.parametrize("transport", ["rtu", "tcp"])
@run_async
async def test_a_line_where_every_unit_is_silent_is_still_reopened(transport):
    async with seat_and_lockout(transport) as (rig, seat, lock):
        for name in ("seat-3", "lockout"):
            rig.sims[name].mute(True)
        connects = rig.bus.connects
        for _ in range(rig.bus.settings.reconnect_after):  # both units among the failures: the line's fault
            assert not await seat.poll_once()
            assert not await lock.poll_once()
        assert not rig.bus.connected or rig.bus.connects > connects  # closed to be opened again after the backoff
        for name in ("seat-3", "lockout"):
            rig.sims[name].mute(False)
        while not await lock.poll_once():  # the backoff ends: opened again, answered
            pass
        assert rig.bus.connects > connects


@run_async
async def test_a_stop_swallowed_inside_a_poll_still_ends_the_device():
    """pymodbus waits with asyncio.wait_for, which on Python 3.11 drops a cancellation that meets a reply in the
    same pass of the loop: a daemon told to stop then waited for ever on its device task. The device's loop
    honours a cancellation that a poll swallowed."""
    async with serial_rig(LOCKOUT) as rig:
        lock = rig.device("lockout")
        polled = asyncio.Event()

        async def swallowing_poll() -> bool:  # as wait_for does when the reply and the cancellation meet
            polled.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(30)
            return True

        lock.poll_once = swallowing_poll
        task = asyncio.create_task(lock.run(lambda event: None))
        await asyncio.wait_for(polled.wait(), 5)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)  # not wait_for: it would wait for the cancellation too
        if not done:  # the loop went on polling: end it otherwise, then fail

            async def broken_poll() -> bool:
                raise RuntimeError("stopped by the test")

            lock.poll_once = broken_poll
            task.cancel()
            await asyncio.wait({task}, timeout=35)
            pytest.fail("the device went on polling after it was told to stop")
        assert task.cancelled()

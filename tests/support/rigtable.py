"""Helpers for tests that run a daemon on the rig: wait for the simulated hardware, start and stop a daemon
pointed at a running rig, read its lights and sign."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.config import load_config
from controller.config.devices import build_drivers
from hil.attach import attach
from hil.rig import Rig

from tableproc import RIG_HEALTH_INTERVAL

DEADLINE = 15.0


async def until(predicate, what, timeout: float = DEADLINE):
    """Wait for a condition of the simulated hardware (which raises no events of its own) or the daemon, with
    a deadline. `what` says what was awaited (a callable: evaluated at the deadline, to show the state then)."""
    try:
        async with asyncio.timeout(timeout):
            while not (value := predicate()):
                await asyncio.sleep(0.01)
            return value
    except TimeoutError:
        raise AssertionError(what() if callable(what) else what) from None


@contextlib.asynccontextmanager
async def daemon_on_rig(daemon_class: type, table: Path, rig_file: Path, state_dir: Path,
                        adjust: Callable[[Any], Any] = lambda cfg: cfg):
    """A daemon of `daemon_class` for the table configuration `table`, on the rig `rig_file`, every device
    up; stopped (and checked to stop) on exit."""
    cfg = adjust(load_config(table))
    async with Rig.from_file(rig_file) as rig:
        cfg = replace(attach(cfg, rig.connections()), state_dir=state_dir)
        cfg = replace(cfg, buses={n: replace(b, settings=b.settings.model_copy(
            update={"health_interval": RIG_HEALTH_INTERVAL})) for n, b in cfg.buses.items()})
        buses, devices = build_drivers(cfg)
        daemon = daemon_class(cfg, devices, buses=buses)
        task = asyncio.create_task(daemon.run())
        try:
            async with asyncio.timeout(DEADLINE):
                await daemon.ready.wait()
            await until(lambda: all(i.up for i in daemon._info.values()), "every device up")
            yield daemon, rig
        finally:
            await stop(task)


async def stop(task: asyncio.Task) -> None:
    """Cancel the daemon; if it does not stop, say which of its tasks hang (and where)."""
    task.cancel()
    try:
        async with asyncio.timeout(20):
            try:
                await task
            except asyncio.CancelledError:
                # the daemon's own end, unless this task is cancelled too (the 20 s here, the test's deadline):
                # swallowing that one would return with the daemon still running, and hang the test
                if (me := asyncio.current_task()) is not None and me.cancelling():
                    raise
    except TimeoutError:
        out = io.StringIO()
        for t in asyncio.all_tasks():
            if t is not asyncio.current_task():
                t.print_stack(file=out)
        raise AssertionError("the daemon did not stop when cancelled:\n" + out.getvalue()) from None


def lit(rig, seat: int) -> list[str]:
    """The spots whose accepted light is on at `seat`."""
    return rig.lights()["seats"].get(seat, {}).get("accepted", [])


def win(rig, seat: int) -> bool:
    return rig.lights()["seats"].get(seat, {}).get("win", False)


def message(rig) -> str | None:
    return (rig.sign().get("message") or {}).get("message")


def with_supervisor(cfg, name: str, secret: str):
    """`cfg` with one supervisor, `name`, whose credential is `secret` (PBKDF2 at its smallest accepted work)."""
    from controller.config.credentials import MIN_PBKDF2_ITERATIONS, PBKDF2, hash_credential, parse_credential
    from controller.config.model import Supervisor

    credential = hash_credential(secret, PBKDF2, iterations=MIN_PBKDF2_ITERATIONS)
    return replace(cfg, supervisors=(Supervisor(name, parse_credential(credential)),))


def drawing(magic: str, lucky: int | str):
    """A draw that gives the Magic Card `magic` (one of 52) and the Lucky Bonus position `lucky` (a seat, or
    "dealer": position 0) in place of the CSPRNG, so that a test knows what lock-out recorded."""
    from controller.cards import parse_card

    card, position = parse_card(magic), 0 if lucky == "dealer" else lucky
    return lambda n: card if n == 52 else position


async def lock_round(daemon, rig, chips, cents: int = 100) -> None:
    """Chips of `cents` on (seat, spot), acknowledged (their lights on); then "no more bets": booked and dealing."""
    for seat, spot in chips:
        await rig.place_chip(seat, spot, cents)
    await until(lambda: all(spot in lit(rig, seat) for seat, spot in chips), lambda: f"acknowledged: {rig.lights()}")
    await rig.press_lockout()
    await until(lambda: daemon.state.phase.value == "dealing", "dealing")

"""The line-protocol driver against the simulated device over a real PTY line (hil.wire.SerialWire).

Nothing here sleeps to wait: tests wait on the driver's event queue, on the simulator's ACKs, or on
a "barrier" command (when the driver has the ACK of a command sent after X, the line has carried
everything the device sent before it answered, so a late repeat of X would have arrived). The wire
paces bytes at the baud rate, so timings are those of a real line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from leaks import open_fds, opened_since

from controller.cards import parse_card
from controller.errors import InputError
from drivers.device import Device, DeviceUnavailable, UnsupportedCommand
from drivers.events import (
    CardDealt,
    CardsDispensed,
    DeviceDown,
    DeviceUp,
    DiceRolled,
    Event,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShoeJam,
    ShowAmounts,
    ShowMessage,
    ShuffleFault,
    ShufflerCount,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from drivers.health import Backoff
from drivers.line import CommandRejected, LineDevice, LineSettings
from drivers.line.core.frame import SEQ_MODULO, encode
from hil.line_device import LineDeviceSim, LineNak
from hil.wire import Direction, SerialWire

NAME = "table-dev"
TEST_TIMEOUT_S = 20.0
WAIT_S = 3.0

# Heartbeats off (minutes apart): a fault injected on "the next frame" hits the frame the test sends.
QUIET = dict(ack_timeout=0.2, retries=3, heartbeat_interval=60.0, heartbeat_timeout=120.0,
             backoff_initial=0.05, backoff_cap=0.2)
SIM_QUIET = dict(heartbeat_s=60.0, ack_timeout=0.2)
# Heartbeats on and short: for outages (mute, unplug).
LIVELY = dict(ack_timeout=0.05, retries=2, heartbeat_interval=0.1, heartbeat_timeout=0.4,
              backoff_initial=0.02, backoff_cap=0.1)
SIM_LIVELY = dict(heartbeat_s=0.1, ack_timeout=0.05)


@pytest.fixture(autouse=True)
def no_leaks():
    fds, threads = open_fds(), threading.active_count()
    yield
    assert not opened_since(fds), f"file descriptors leaked: {opened_since(fds)}"
    assert threading.active_count() <= threads + 1, "relay threads leaked"  # +1: a pool thread may linger


def arun(fn: Callable[..., Any]) -> Callable[..., None]:
    """Run an async test with a deadline; it must leave no task behind."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        async def main() -> None:
            async with asyncio.timeout(TEST_TIMEOUT_S):
                await fn(*args, **kwargs)
            leftover = asyncio.all_tasks() - {asyncio.current_task()}
            assert not leftover, f"tasks leaked: {leftover}"

        asyncio.run(main())

    return wrapper


@dataclass
class Bench:
    wire: SerialWire
    sim: LineDeviceSim
    driver: LineDevice
    queue: asyncio.Queue[Event]
    log: list[Event] = field(default_factory=list)

    async def next(self, timeout: float = WAIT_S) -> Event:
        async with asyncio.timeout(timeout):
            ev = await self.queue.get()
        self.log.append(ev)
        return ev

    def taken(self) -> list[Event]:
        """Everything emitted and not yet looked at (no waiting)."""
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        self.log.extend(out)
        return out

    async def barrier(self) -> None:
        await self.driver.send(SetLockoutLamp(False))


@contextlib.asynccontextmanager
async def bench(*, lively: bool = False, baud: int = 115200, seats: int | None = None, kind: str = "bench",
                sim_seats: int | None = None, port: str | None = None, wire: SerialWire | None = None,
                **overrides: Any) -> AsyncIterator[Bench]:
    """A wire, a simulated device on it and a running driver, connected; closed on exit. ``port``:
    the driver opens this path instead of the wire's (a symlink to it); ``wire``: the caller's."""
    own_wire = wire is None
    wire = wire or SerialWire(baud, name="line-test").start()
    try:
        sim_kw = dict(SIM_LIVELY if lively else SIM_QUIET)
        sim_kw.update({k[4:]: overrides.pop(k) for k in list(overrides) if k.startswith("sim_")})
        sim = LineDeviceSim(wire.device_port, name=NAME, kind=kind, baud=baud, seats=sim_seats, **sim_kw)
        settings = dict(LIVELY if lively else QUIET)
        settings.update(overrides)
        driver = LineDevice(NAME, LineSettings(port or wire.driver_port, baud=baud, **settings), seats=seats)
        assert isinstance(driver, Device)
        queue: asyncio.Queue[Event] = asyncio.Queue()
        await sim.start()
        task = asyncio.create_task(driver.run(queue.put_nowait))
        try:
            b = Bench(wire, sim, driver, queue)
            assert await b.next() == DeviceUp(NAME)
            await sim.settle()  # its power-up HELLO and the HELLO answering ours are acknowledged
            b.log.clear()
            yield b
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await sim.stop()
    finally:
        if own_wire:
            wire.close()


# --- every event, every command -----------------------------------------------------------------


@arun
async def test_every_event_kind_arrives_once_as_the_right_event():
    async with bench(lively=True, seats=7) as b:
        sim = b.sim
        steps = [
            (sim.place_chip(3, "main", 2500), [WagerSensed(NAME, 3, "main", 2500)]),
            (sim.place_chip(7, "progressive"), [WagerSensed(NAME, 7, "progressive")]),
            (sim.remove_chip(3, "main"), [WagerRemoved(NAME, 3, "main")]),
            (sim.press_lockout(), [LockoutPressed(NAME)]),
            (sim.shuffle(52), [ShufflerCount(NAME, 52)]),
            (sim.shuffle(312, "B"), [ShufflerCount(NAME, 312, "B")]),
            (sim.shuffle_fault("door open"), [ShuffleFault(NAME, "door open")]),
            (sim.dispense(41), [CardsDispensed(NAME, 41)]),
            (sim.jam(), [ShoeJam(NAME)]),
            (sim.deal([parse_card(c) for c in ("AS", "TD", "2C")]),
             [CardDealt(NAME, parse_card(c)) for c in ("AS", "TD", "2C")]),
            (sim.roll(6, 1), [DiceRolled(NAME, 6, 1)]),
        ]
        for action, want in steps:
            await action  # returns once the driver has acknowledged: the event is already emitted
            assert b.taken() == want
        await b.barrier()
        assert b.taken() == []
        assert not {"garbage", "oversize", "malformed", "crc", "bad_arg", "unknown_verb"} & set(b.driver.health.errors)


@arun
async def test_every_command_kind_is_applied_once():
    commands = [
        SetAcceptedLight(2, "main", True),
        SetAcceptedLight(4, "progressive", True),
        SetWinLight(3, True),
        SetLockoutLamp(True),
        ShowAmounts((("MEGA", 12_500_000), ("MINI", 250_000))),
        ShowMessage(SignMessage.WIN, "T12", 3, 12_500_000),
        ShowMessage(SignMessage.PENDING),
        ShowMessage(SignMessage.OFFLINE),
        ShowMessage(SignMessage.CLOSED),
        SetAcceptedLight(4, "progressive", False),
    ]
    async with bench(lively=True, seats=7) as b:
        for cmd in commands:
            await b.driver.send(cmd)
        assert b.sim.applied_commands == commands
        lights = b.sim.lights()
        assert lights["accepted"] == {(2, "main"): True, (4, "progressive"): False}
        assert lights["win"] == {3: True} and lights["lockout_lamp"] is True
        assert lights["seats"][2] == {"accepted": ["main"], "win": False}
        assert b.sim.sign() == {"amounts": [("MEGA", 12_500_000), ("MINI", 250_000)],
                                "message": {"message": "CLOSED", "table": None, "seat": None, "amount_cents": None}}
        assert b.taken() == []


@arun
async def test_at_9600_baud_over_the_paced_line():
    async with bench(baud=9600, ack_timeout=0.3, sim_ack_timeout=0.3) as b:
        loop = asyncio.get_running_loop()
        cmd = ShowMessage(SignMessage.WIN, "T12", 3, 12_500_000)
        t0 = loop.time()
        await b.driver.send(cmd)
        elapsed = loop.time() - t0
        # The frame and its ACK crossed a 9600-baud line (11 bits a character): not a shortcut.
        wire_time = (len(encode(0, "MESSAGE", ("WIN", "table=T12", "seat=3", "cents=12500000")))
                     + len(encode(0, "ACK"))) * 11 / 9600
        assert elapsed >= wire_time * 0.95
        assert b.sim.applied_commands == [cmd]
        await b.sim.deal([parse_card("QH")])
        assert b.taken() == [CardDealt(NAME, parse_card("QH"))]


# --- frame faults on the wire: retransmission, exactly once -------------------------------------

TO_DRIVER, TO_DEVICE = Direction.TO_DRIVER, Direction.TO_DEVICE


@pytest.mark.parametrize("fault, direction, what, evidence", [
    # the event frame is lost / garbled / late: the device sends it again
    ("drop", TO_DRIVER, "event", ("sim", "retransmits")),
    ("corrupt", TO_DRIVER, "event", ("driver_errors", "malformed")),
    ("delay", TO_DRIVER, "event", ("driver", "duplicates")),
    # the ACK of the event is lost / garbled: the device repeats it, the driver must not raise it twice
    ("drop", TO_DEVICE, "event", ("driver", "duplicates")),
    ("corrupt", TO_DEVICE, "event", ("driver", "duplicates")),
    # the command is lost / garbled / late: the driver sends it again
    ("drop", TO_DEVICE, "command", ("driver", "retransmits")),
    ("corrupt", TO_DEVICE, "command", ("sim_errors", "malformed")),
    ("delay", TO_DEVICE, "command", ("sim", "duplicates")),
    # the ACK of the command is lost / garbled: the device must not apply it twice
    ("drop", TO_DRIVER, "command", ("sim", "duplicates")),
    ("corrupt", TO_DRIVER, "command", ("sim", "duplicates")),
])
@arun
async def test_wire_fault_is_recovered_exactly_once(fault, direction, what, evidence):
    async with bench() as b:
        if fault == "drop":
            b.wire.drop_next(1, direction)
        elif fault == "corrupt":
            b.wire.corrupt_next(1, direction)
        else:
            b.wire.delay_next(QUIET["ack_timeout"] * 1.5, 1, direction)  # late, after the retransmission
        if what == "event":
            await b.sim.place_chip(2, "main", 500)
            await b.barrier()
            assert b.taken() == [WagerSensed(NAME, 2, "main", 500)]
        else:
            cmd = SetWinLight(2, True)
            await b.driver.send(cmd)
            await b.barrier()
            assert b.sim.applied_commands == [cmd, SetLockoutLamp(False)]
            assert b.taken() == []
        # The fault did hit the frame under test (else this test proves nothing).
        where, key = evidence
        counters = {"sim": b.sim.stats, "driver": b.driver.stats, "sim_errors": b.sim.errors,
                    "driver_errors": b.driver.health.errors}[where]
        assert counters[key] >= 1, (where, key, dict(counters))
        assert b.driver.up


@arun
async def test_crc_error_is_counted_and_the_repeat_delivered_once():
    async with bench() as b:
        hit = []

        def flip_a_digit(frame: bytes) -> bytes:
            if not hit and b" WAGER " in frame:
                hit.append(frame)
                return frame.replace(b"WAGER 2", b"WAGER 3")  # still well formed: only the CRC can tell
            return frame

        b.wire.set_hook(TO_DRIVER, flip_a_digit)
        await b.sim.place_chip(2, "main")
        await b.barrier()
        assert hit and b.driver.health.errors["crc"] == 1
        assert b.taken() == [WagerSensed(NAME, 2, "main")]


@arun
async def test_garbage_is_counted_and_raises_nothing():
    async with bench() as b:
        b.sim.send_garbage(b"\x00\xffnoise WAGER 1 main\r\n")
        b.sim.send_garbage(b"$" + b"7" * 300 + b"\r\n")
        b.sim.send_garbage(b"$0042 WAGER 1 main*0000\r\n")  # a wager with a wrong checksum
        b.sim.send_garbage(b"$0043 WAGER 1 main")  # cut off by the next frame
        await b.sim.place_chip(4, "main")
        await b.barrier()
        assert b.taken() == [WagerSensed(NAME, 4, "main")]
        errors = b.driver.health.errors
        assert errors["garbage"] >= 1 and errors["oversize"] == 1 and errors["crc"] == 1
        assert errors["malformed"] == 1
        assert b.driver.up


@arun
async def test_bad_arguments_are_naked_naming_the_field_and_counted():
    async with bench(seats=6) as b:
        sim = b.sim
        cases = [
            (sim.place_chip(9, "main"), ("seat", "RANGE")),
            (sim.send_raw("CARD", "ZZ"), ("card", "UNKNOWN")),
            (sim.send_raw("COUNT", "12x"), ("count", "SYNTAX")),
            (sim.send_raw("WAGER", "2", "main", "12.50"), ("amount_cents", "SYNTAX")),
            (sim.send_raw("DICE", "3"), ("args", "ARGS")),
            (sim.send_raw("FROB"), ("verb", "UNKNOWN")),
        ]
        for action, (fld, code) in cases:
            with pytest.raises(LineNak) as e:
                await action
            assert (e.value.field, e.value.code) == (fld, code)
        # A refused frame whose NAK is lost gets the same NAK again, and is counted once.
        b.wire.drop_next(1, TO_DEVICE)
        with pytest.raises(LineNak):
            await sim.send_raw("CARD", "1X")
        await sim.place_chip(6, "main")
        await b.barrier()
        assert b.taken() == [WagerSensed(NAME, 6, "main")]
        assert b.driver.health.errors["bad_arg"] == 6
        assert b.driver.health.errors["unknown_verb"] == 1
        # at least the one repeat (a loaded machine may have the device send it twice before the NAK comes back)
        assert b.driver.stats["duplicates"] >= 1
        assert b.driver.up


@arun
async def test_commands_refused_or_unsupported_by_the_device():
    async with bench(sim_seats=4) as b:
        with pytest.raises(CommandRejected) as e:
            await b.driver.send(SetWinLight(6, True))
        assert (e.value.field, e.value.code) == ("seat", "RANGE")
        assert isinstance(e.value, DeviceUnavailable)
        assert b.sim.applied_commands == []
        assert b.driver.up
    async with bench(kind="sign") as b:
        with pytest.raises(UnsupportedCommand):
            await b.driver.send(SetWinLight(1, True))
        await b.driver.send(ShowMessage(SignMessage.OFFLINE))
        assert b.sim.applied_commands == [ShowMessage(SignMessage.OFFLINE)]
    async with bench(seats=6) as b:
        with pytest.raises(InputError) as e2:
            await b.driver.send(SetWinLight(7, True))  # refused before it is sent
        assert e2.value.field == "seat"
        await b.barrier()
        assert b.sim.applied_commands == [SetLockoutLamp(False)]


# --- outages ------------------------------------------------------------------------------------


@arun
async def test_mute_is_down_once_then_up_once_within_the_backoff_bound():
    async with bench(lively=True) as b:
        loop = asyncio.get_running_loop()
        backoff = b.driver.backoff
        delays: list[float] = []
        sixth_wait = asyncio.Event()
        choose = backoff.delay

        def observed_delay() -> float:  # the driver's own backoff, watched
            d = choose()
            delays.append(d)
            if len(delays) == 6:
                sixth_wait.set()
            return d

        backoff.delay = observed_delay  # type: ignore[method-assign]
        b.sim.mute(True)
        with pytest.raises(DeviceUnavailable):  # never acknowledged
            await b.driver.send(SetWinLight(1, True))
        assert isinstance(await b.next(), DeviceDown)
        with pytest.raises(DeviceUnavailable):  # down: refused at once
            await b.driver.send(SetWinLight(1, True))
        # Six failed reconnects: without the cap the sixth wait would be 0.02 * 2**5 = 0.64 s.
        async with asyncio.timeout(WAIT_S):
            await sixth_wait.wait()
        # Unmute as the driver starts waiting: the worst moment.
        b.sim.mute(False)
        t0 = loop.time()
        assert await b.next() == DeviceUp(NAME)
        recovered = loop.time() - t0
        s = b.driver.settings
        bound = Backoff(s.backoff_initial, s.backoff_cap).bound  # what we configured
        assert backoff.bound == bound and max(delays) <= bound
        assert recovered <= bound + s.ack_timeout + 0.25, (recovered, delays)
        await b.driver.send(SetWinLight(1, True))
        await b.barrier()
        assert b.taken() == []
        assert [type(e) for e in b.log] == [DeviceDown, DeviceUp]  # however many attempts failed
        assert b.sim.applied_commands.count(SetWinLight(1, True)) == 1


@arun
async def test_unplug_replug_loses_nothing_and_invents_nothing():
    # The driver pings often; the device has no heartbeat of its own, so what it repeats while the
    # cable is out is the chip, not a STATUS.
    async with bench(lively=True, sim_heartbeat_s=60.0) as b:
        await b.sim.place_chip(1, "main", 100)
        assert b.taken() == [WagerSensed(NAME, 1, "main", 100)]
        b.wire.unplug()
        assert isinstance(await b.next(), DeviceDown)
        # Chips placed while the cable is out: the device repeats them until acknowledged.
        placed = asyncio.create_task(b.sim.place_chip(2, "main", 200))
        second = asyncio.create_task(b.sim.deal([parse_card("AS")]))
        with pytest.raises(DeviceUnavailable):
            await b.driver.send(SetWinLight(1, True))
        # Hold the driver's first HELLO after replug a while: the device's repeats of the chip
        # arrive before the ACK of the HELLO, and must wait until the link is up.
        b.wire.delay_next(0.08, 1, TO_DEVICE)
        b.wire.replug()
        assert await b.next() == DeviceUp(NAME)
        await placed
        await second
        await b.barrier()
        assert b.taken() == [WagerSensed(NAME, 2, "main", 200), CardDealt(NAME, parse_card("AS"))]
        assert [type(e) for e in b.log] == [WagerSensed, DeviceDown, DeviceUp, WagerSensed, CardDealt]
        assert b.driver.stats["ignored"] >= 1
        assert b.sim.applied_commands == [SetLockoutLamp(False)]


@arun
async def test_reboot_is_reported_and_its_first_frames_are_not_taken_for_repeats():
    async with bench() as b:
        await b.driver.send(SetWinLight(2, True))
        assert b.sim.lights()["win"] == {2: True}
        # A device that has been up a long time: its numbering wraps from 9999 to 0000 just before
        # it reboots, and its HELLO after the reboot is 0000 again.
        b.sim.link.tx_seq = SEQ_MODULO - 1
        await b.sim.shuffle(52)
        await b.sim.shuffle(52)
        assert b.taken() == [ShufflerCount(NAME, 52)] * 2
        assert b.driver.link.last_seq == 0
        b.sim.reboot()
        assert b.sim.lights() == {"accepted": {}, "win": {}, "lockout_lamp": False, "seats": {}}
        down = await b.next()
        assert isinstance(down, DeviceDown) and "rebooted" in down.reason
        assert await b.next() == DeviceUp(NAME)
        await b.sim.place_chip(5, "main")
        assert b.taken() == [WagerSensed(NAME, 5, "main")]
        await b.driver.send(SetWinLight(2, True))  # the daemon re-sends state on DeviceUp
        assert b.sim.lights()["win"] == {2: True}
        assert b.sim.applied_commands == [SetWinLight(2, True), SetWinLight(2, True)]  # once before, once after


@arun
async def test_port_that_disappears_and_returns_under_the_same_name(tmp_path: Path):
    link = tmp_path / "ttyLINE"  # as /dev/serial/by-id/... names a USB adapter
    first = SerialWire(115200, name="first").start()
    second: SerialWire | None = None
    link.symlink_to(first.driver_port)
    try:
        async with bench(port=str(link), wire=first) as b:
            await b.sim.place_chip(1, "main")
            assert b.taken() == [WagerSensed(NAME, 1, "main")]
            link.unlink()
            first.close()  # the adapter is pulled: both ends lose the port
            assert isinstance(await b.next(), DeviceDown)
            second = SerialWire(115200, name="second").start()
            await b.sim.move_to(second.device_port)
            link.symlink_to(second.driver_port)
            assert await b.next() == DeviceUp(NAME)
            await b.sim.place_chip(2, "main")
            await b.driver.send(SetWinLight(2, True))
            assert b.taken() == [WagerSensed(NAME, 2, "main")]
            assert b.sim.applied_commands == [SetWinLight(2, True)]
            assert b.driver.health.errors["down"] >= 1
    finally:
        first.close()
        if second is not None:
            second.close()


@arun
async def test_missing_port_is_down_and_refuses_commands_at_once(tmp_path: Path):
    driver = LineDevice(NAME, LineSettings(str(tmp_path / "nothing"), backoff_initial=0.01, backoff_cap=0.05))
    queue: asyncio.Queue[Event] = asyncio.Queue()
    task = asyncio.create_task(driver.run(queue.put_nowait))
    try:
        async with asyncio.timeout(WAIT_S):
            down = await queue.get()
        assert isinstance(down, DeviceDown) and "cannot open" in down.reason
        with pytest.raises(DeviceUnavailable):
            await driver.send(SetLockoutLamp(True))
        with pytest.raises(RuntimeError):
            await driver.run(queue.put_nowait)  # one run per driver
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert queue.empty()  # down once, however many attempts


@pytest.mark.parametrize("kw, field", [
    (dict(baud=9600, ack_timeout=0.05), "ack_timeout"),
    (dict(heartbeat_interval=1.0, heartbeat_timeout=1.2), "heartbeat_timeout"),
    (dict(backoff_initial=2.0, backoff_cap=1.0), "backoff_initial"),
    (dict(parity="X"), "parity"),
    (dict(retries=-1), "retries"),
    (dict(port=""), "port"),
])
def test_settings_are_checked(kw, field):
    kw = {"port": "/dev/ttyUSB0", **kw}
    with pytest.raises(InputError) as e:
        LineSettings(**kw)
    assert e.value.field == field

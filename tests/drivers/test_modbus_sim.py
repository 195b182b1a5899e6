"""The simulated Modbus devices (hil.modbus_devices) on their own, and the rig helpers the other Modbus
tests share (imported from here: ``from test_modbus_sim import ...``).

Every async test runs in its own event loop through ``run_async``, which fails the test if it leaves a task
running or a file descriptor open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from leaks import open_fds, opened_since

from drivers.events import DeviceUp, Event
from drivers.health import Backoff
from drivers.modbus import (
    DeviceException,
    ModbusBus,
    ModbusDevice,
    NoResponse,
    SerialBusSettings,
    Table,
    TcpSettings,
    load_register_map,
    make_device,
)
from hil.modbus_devices import ModbusBusSim, SimDevice, TcpFaultProxy
from hil.wire import SerialWire

ROOT = Path(__file__).resolve().parents[2]
MAPS = ROOT / "config" / "devices"
TEST_TIMEOUT_S = 20.0



def run_async(fn: Callable) -> Callable:
    """Run an async test in a fresh loop; fail on leaked tasks or file descriptors."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        before = open_fds()

        async def main():
            async with asyncio.timeout(TEST_TIMEOUT_S):
                await fn(*args, **kwargs)
            me = asyncio.current_task()
            leaked = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
            assert not leaked, f"tasks left running: {leaked}"

        asyncio.run(main())
        opened = opened_since(before)
        assert not opened, f"file descriptors leaked: {sorted(opened)}"

    return wrapper


# --- the rig --------------------------------------------------------------------------------------


@dataclass
class Spec:
    """A simulated device to put on the bus: unit, map file in config/devices, name, first seat."""

    unit: int
    map: str
    name: str
    first_seat: int = 1


@dataclass
class Rig:
    bus: ModbusBus
    sim: ModbusBusSim
    sims: dict[str, SimDevice]
    specs: dict[str, Spec]
    wire: SerialWire | None = None
    proxy: TcpFaultProxy | None = None
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    seen: list[Event] = field(default_factory=list)  # every event taken from the queue, in order
    tasks: list[asyncio.Task] = field(default_factory=list)

    def device(self, name: str, **options) -> ModbusDevice:
        spec = self.specs[name]
        options.setdefault("poll_interval", 0.01)
        options.setdefault("backoff", Backoff(initial=0.02, cap=0.2))
        options.setdefault("first_seat", spec.first_seat)
        dev = make_device(name, self.bus, spec.unit, load_register_map(MAPS / spec.map), **options)
        dev.attach(self.events.put_nowait)
        return dev

    def start(self, *devices: ModbusDevice) -> None:
        for d in devices:
            self.tasks.append(asyncio.create_task(d.run(self.events.put_nowait), name=f"run {d.name}"))

    async def stop_devices(self) -> None:
        for t in self.tasks:
            t.cancel()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        for r in results:
            if not isinstance(r, asyncio.CancelledError):
                raise AssertionError(f"run() ended with {r!r}")

    async def expect(self, pred: Callable[[Event], bool], timeout: float = 3.0) -> Event:
        """The next event that matches (the others stay in ``seen``)."""
        async with asyncio.timeout(timeout):
            while True:
                ev = await self.events.get()
                self.seen.append(ev)
                if pred(ev):
                    return ev

    async def expect_up(self, *names: str, timeout: float = 3.0) -> None:
        """A DeviceUp from each of `names`, in whatever order the bus's scheduler polled them."""
        waiting = set(names)
        while waiting:
            waiting.discard((await self.expect(lambda e: isinstance(e, DeviceUp) and e.device in waiting, timeout)).device)

    def drain(self) -> list[Event]:
        out = []
        while not self.events.empty():
            ev = self.events.get_nowait()
            self.seen.append(ev)
            out.append(ev)
        return out


@contextlib.asynccontextmanager
async def serial_rig(*specs: Spec, baud: int = 115200, **settings):
    settings.setdefault("timeout", 0.1)
    settings.setdefault("retries", 1)
    settings.setdefault("backoff_initial", 0.02)
    settings.setdefault("backoff_cap", 0.2)
    with SerialWire(baud, name="test") as wire:
        sim = ModbusBusSim(port=wire.device_port, baudrate=baud)
        sims = {s.name: sim.add_device(s.unit, MAPS / s.map, name=s.name, first_seat=s.first_seat) for s in specs}
        await sim.start()
        bus = ModbusBus(SerialBusSettings(port=wire.driver_port, baud=baud, parity="N", stopbits=2, **settings))
        rig = Rig(bus, sim, sims, {s.name: s for s in specs}, wire=wire)
        try:
            yield rig
        finally:
            await rig.stop_devices()
            await bus.close()
            await sim.stop()


@contextlib.asynccontextmanager
async def tcp_rig(*specs: Spec, proxy: bool = False, **settings):
    settings.setdefault("timeout", 0.1)
    settings.setdefault("retries", 1)
    settings.setdefault("backoff_initial", 0.02)
    settings.setdefault("backoff_cap", 0.2)
    sim = ModbusBusSim(host="127.0.0.1")
    sims = {s.name: sim.add_device(s.unit, MAPS / s.map, name=s.name, first_seat=s.first_seat) for s in specs}
    await sim.start()
    fault_proxy = None
    try:
        port = sim.tcp_port
        if proxy:
            fault_proxy = TcpFaultProxy("127.0.0.1", sim.tcp_port)
            await fault_proxy.start()
            port = fault_proxy.port
        bus = ModbusBus(TcpSettings(host="127.0.0.1", port=port, **settings))
        rig = Rig(bus, sim, sims, {s.name: s for s in specs}, proxy=fault_proxy)
        try:
            yield rig
        finally:
            await rig.stop_devices()
            await bus.close()
    finally:
        if fault_proxy is not None:
            await fault_proxy.stop()
        await sim.stop()


SEAT3 = Spec(3, "seat-single.toml", "seat-3", first_seat=3)
LOCKOUT = Spec(8, "lockout.toml", "lockout")
SIGN = Spec(9, "sign.toml", "sign")


# --- the simulator itself -------------------------------------------------------------------------


@run_async
async def test_registers_follow_the_map():
    async with serial_rig(SEAT3, LOCKOUT) as rig:
        seat = rig.sims["seat-3"]
        assert await rig.bus.read(3, Table.INPUT_REGISTER, 0, 3) == [0, 0, 0]
        seat.place_chip(3, "progressive", 0x12345)
        assert await rig.bus.read(3, Table.INPUT_REGISTER, 0, 3) == [1, 0x1, 0x2345]  # uint32, high word first
        await rig.bus.write(3, Table.COIL, 0, [True, True])
        assert seat.lights() == {"accepted": {(3, "progressive"): True}, "win": {3: True}}
        await rig.bus.write(3, Table.COIL, 1, [False])
        assert seat.lights()["win"] == {3: False}
        rig.sims["lockout"].press_lockout()
        rig.sims["lockout"].press_lockout()
        assert await rig.bus.read(8, Table.INPUT_REGISTER, 0, 1) == [2]
        with pytest.raises(KeyError):
            seat.place_chip(4, "progressive")  # this unit only has seat 3
        with pytest.raises(DeviceException) as exc:
            await rig.bus.read(3, Table.INPUT_REGISTER, 40, 1)  # not on the device
        assert exc.value.code == 2


@run_async
async def test_a_unit_not_on_the_bus_stays_silent():
    async with serial_rig(SEAT3, retries=0) as rig:
        with pytest.raises(NoResponse) as exc:
            await rig.bus.read(42, Table.INPUT_REGISTER, 0, 1)
        assert exc.value.kinds == ["timeout"]
        assert rig.sim.dropped_replies == 1
        assert await rig.bus.read(3, Table.INPUT_REGISTER, 0, 1) == [0]


@run_async
async def test_exception_mute_and_reboot():
    async with serial_rig(SEAT3, LOCKOUT, retries=0) as rig:
        seat, lock = rig.sims["seat-3"], rig.sims["lockout"]
        for code in (4, 6):
            seat.set_exception(code)
            with pytest.raises(DeviceException) as exc:
                await rig.bus.read(3, Table.INPUT_REGISTER, 0, 1)
            assert exc.value.code == code and exc.value.busy == (code == 6)
        seat.set_exception(None)
        with pytest.raises(ValueError):
            seat.set_exception(99)  # not a Modbus exception code
        seat.mute(True)
        with pytest.raises(NoResponse):
            await rig.bus.write(3, Table.COIL, 0, [True])
        assert seat.lights()["accepted"][(3, "progressive")] is False  # a muted device applies nothing
        seat.mute(False)
        await rig.bus.write(3, Table.COIL, 0, [True])
        seat.place_chip(3, "progressive", 500)
        lock.press_lockout()
        seat.reboot()
        lock.reboot()
        assert seat.lights()["accepted"][(3, "progressive")] is False  # outputs back to power-on values
        assert await rig.bus.read(3, Table.INPUT_REGISTER, 0, 3) == [1, 0, 500]  # the chip is still there
        assert await rig.bus.read(8, Table.INPUT_REGISTER, 0, 1) == [0]  # the counter restarted


@run_async
async def test_a_request_in_flight_at_stop_does_not_outlive_the_server():
    """pymodbus keeps no handle on a request's handler: one still in the device when the rig stops is cancelled
    with the server (before, it outlived the rig, and a test that checks for leftover tasks failed at random).
    And the one name the rig's shim relies on is still pymodbus' (hil/modbus_devices.py)."""
    from pymodbus.server.requesthandler import ServerRequestHandler

    from hil.modbus_devices import REQUEST_HANDLER

    assert ServerRequestHandler.handle_request.__qualname__ == REQUEST_HANDLER
    assert "run_coroutine_threadsafe(self.handle_request()" in inspect.getsource(ServerRequestHandler.handle_later)
    entered, never = asyncio.Event(), asyncio.Event()
    sim = ModbusBusSim(host="127.0.0.1")
    dev = sim.add_device(SEAT3.unit, MAPS / SEAT3.map, name=SEAT3.name, first_seat=SEAT3.first_seat)

    async def stuck(*args: object) -> None:
        entered.set()
        await never.wait()

    dev._action = stuck  # type: ignore[method-assign]  # the device answers nothing, ever
    await sim.start()
    bus = ModbusBus(TcpSettings(host="127.0.0.1", port=sim.tcp_port, timeout=5.0, retries=0, backoff_initial=0.02,
                                backoff_cap=0.2))
    read = asyncio.create_task(bus.read(3, Table.INPUT_REGISTER, 0, 1))
    try:
        await asyncio.wait_for(entered.wait(), 5)
        await sim.stop()
        left = [t for t in asyncio.all_tasks() if REQUEST_HANDLER in repr(t.get_coro()) and not t.done()]
        assert not left, left
    finally:
        read.cancel()
        await asyncio.gather(read, return_exceptions=True)
        await bus.close()


@run_async
async def test_tcp_server_hosts_several_units():
    async with tcp_rig(SEAT3, SIGN) as rig:
        rig.sims["seat-3"].place_chip(3, "progressive", 7)
        assert await rig.bus.read(3, Table.INPUT_REGISTER, 0, 3) == [1, 0, 7]
        await rig.bus.write(9, Table.HOLDING_REGISTER, 0, [0, 1234])
        assert rig.sims["sign"].sign()["amounts"][0] == (1, 1234)
        assert rig.sims["sign"].sign()["message"] is None


@run_async
async def test_wait_until_wakes_on_changes():
    async with serial_rig(SEAT3) as rig:
        seat = rig.sims["seat-3"]

        async def light_on_later():
            await rig.bus.write(3, Table.COIL, 0, [True])

        task = asyncio.create_task(light_on_later())
        await seat.wait_until(lambda: seat.lights()["accepted"][(3, "progressive")])
        await task
        with pytest.raises(TimeoutError):
            await seat.wait_until(lambda: seat.lights()["win"][3], timeout=0.05)

"""Whole tables from the shipped rig configurations, with the real simulators and the real drivers
connected through ``rig.connections()``: each control action reaches the right simulator and arrives at
its driver as the event it stands for; each fault shows at the device it names and nowhere else."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog.testing
from leaks import open_fds, opened_since

from drivers.events import (
    CardDealt,
    DeviceDown,
    DeviceUp,
    DiceRolled,
    Event,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShowAmounts,
    ShowMessage,
    ShufflerCount,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from drivers.health import Backoff
from drivers.line.driver import LineDevice, LineSettings
from drivers.modbus import ModbusBus, SerialBusSettings, TcpSettings, load_register_map, make_device
from hil.modbus_devices import SimDevice
from hil.rig import Rig

CONFIG = Path(__file__).resolve().parents[2] / "config" / "hil"

# Quick to notice a dead device, quick to come back: tests wait on events, never on fixed sleeps.
LINE_FAST = dict(ack_timeout=0.2, retries=2, heartbeat_interval=0.3, heartbeat_timeout=1.0, backoff_initial=0.05,
                 backoff_cap=0.2)
MODBUS_FAST = dict(timeout=0.15, retries=1, backoff_initial=0.05, backoff_cap=0.2)


class Drivers:
    """A real driver for every device of a running rig, built only from ``rig.connections()``, all
    feeding one event queue. Modbus devices on one bus share one ModbusBus, as in the daemon."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.seen: list[Event] = []
        self.devices: dict[str, Any] = {}
        self.buses: dict[str, ModbusBus] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _device(self, name: str, c: Any) -> Any:
        if c.transport == "line":
            return LineDevice(name, LineSettings(port=c.port, baud=c.baud, parity=c.parity, stopbits=c.stopbits,
                                                 **LINE_FAST), seats=self.rig.config.seats)
        bus = self.buses.get(c.bus)
        if bus is None:
            if c.transport == "rtu":
                settings: Any = SerialBusSettings(port=c.port, baud=c.baud, parity=c.parity, stopbits=c.stopbits,
                                                  **MODBUS_FAST)
            else:
                settings = TcpSettings(host=c.host, port=c.tcp_port, **MODBUS_FAST)
            bus = self.buses[c.bus] = ModbusBus(settings, name=c.bus)
        return make_device(name, bus, c.unit, load_register_map(c.register_map), first_seat=c.first_seat or 1,
                           poll_interval=0.02, backoff=Backoff(0.05, 0.2))

    async def __aenter__(self) -> Drivers:
        for name, c in self.rig.connections().items():
            dev = self.devices[name] = self._device(name, c)
            self._tasks.append(asyncio.create_task(dev.run(self.queue.put_nowait), name=f"driver-{name}"))
        await self.expect_all(DeviceUp, set(self.devices), timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Cancel until every driver has ended. On Python 3.11 asyncio.wait_for (used inside pymodbus'
        # client) returns a reply that arrives in the same loop iteration as the cancellation and drops
        # the cancellation; the next one is delivered at the driver's next await.
        pending = {t for t in self._tasks if not t.done()}
        async with asyncio.timeout(10):
            while pending:
                for t in pending:
                    t.cancel()
                _, pending = await asyncio.wait(pending, timeout=0.5)
            for bus in self.buses.values():
                await bus.close()

    async def expect(self, match: Callable[[Event], bool] | type, timeout: float = 5.0) -> Event:
        """The next event that matches (a predicate or an event class); the others stay in ``seen``."""
        pred = (lambda e: isinstance(e, match)) if isinstance(match, type) else match
        async with asyncio.timeout(timeout):
            while True:
                e = await self.queue.get()
                self.seen.append(e)
                if pred(e):
                    return e

    async def expect_all(self, kind: type, devices: set[str], timeout: float = 5.0) -> None:
        waiting = set(devices)
        async with asyncio.timeout(timeout):
            while waiting:
                e = await self.expect(lambda e: isinstance(e, kind) and e.device in waiting, timeout)
                waiting.discard(e.device)


async def until(cond: Callable[[], Any], timeout: float = 5.0) -> None:
    """Wait for a condition another task or thread makes true (for state that raises no event)."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def table(config: Path | str):
    with structlog.testing.capture_logs():
        async with Rig.from_file(config) as rig, Drivers(rig) as drivers:
            yield rig, drivers


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def errors(drivers: Drivers, name: str) -> int:
    return sum(drivers.devices[name].health.errors.values())


def test_minimal_table_end_to_end() -> None:
    async def main() -> None:
        before = open_fds()
        async with table(CONFIG / "minimal.toml") as (rig, d):
            assert isinstance(rig.simulator("seat-2"), SimDevice)
            assert await rig.place_chip(2, "progressive", 2500) == {"device": "seat-2", "acknowledged": None}
            assert await d.expect(WagerSensed) == WagerSensed("seat-2", 2, "progressive", 2500)
            await rig.place_chip(1, "progressive", 500)
            assert await d.expect(WagerSensed) == WagerSensed("seat-1", 1, "progressive", 500)
            await rig.remove_chip(2, "progressive")
            assert await d.expect(WagerRemoved) == WagerRemoved("seat-2", 2, "progressive")
            await rig.press_lockout()
            assert await d.expect(LockoutPressed) == LockoutPressed("lockout")
            assert (await rig.deal(["AS", "KD"]))["acknowledged"] is True
            assert [(await d.expect(CardDealt)).card for _ in range(2)] == [48, 46]

            # what the drivers command is what the rig reports the table shows
            await d.devices["seat-1"].send(SetAcceptedLight(1, "progressive", True))
            await d.devices["seat-2"].send(SetWinLight(2, True))
            await d.devices["lockout"].send(SetLockoutLamp(True))
            assert rig.lights() == {"seats": {1: {"accepted": ["progressive"], "win": False},
                                              2: {"accepted": [], "win": True}},
                                    "lockout_lamp": True}
            assert not any(isinstance(e, DeviceDown) for e in d.seen)
        assert not opened_since(before)
        assert asyncio.all_tasks() == {asyncio.current_task()}

    run(main())


def test_caribbean_stud_7_every_seat_and_the_sign() -> None:
    async def main() -> None:
        async with table(CONFIG / "caribbean-stud-7.toml") as (rig, d):
            conns = rig.connections()
            assert {conns[f"seat-{k}"].unit for k in range(1, 8)} == set(range(1, 8))
            assert len({conns[n].port for n in conns if conns[n].transport == "rtu"}) == 1
            for seat in range(1, 8):
                await rig.place_chip(seat, "progressive", 100 * seat)
                assert await d.expect(WagerSensed) == WagerSensed(f"seat-{seat}", seat, "progressive", 100 * seat)
            await rig.shuffle(52)
            assert await d.expect(ShufflerCount) == ShufflerCount("shuffler", 52, None)
            await rig.deal(["10h"])
            assert await d.expect(CardDealt) == CardDealt("shoe", 33)

            await d.devices["sign"].send(ShowAmounts((("progressive", 2_512_345),)))
            await d.devices["sign"].send(ShowMessage(SignMessage.WIN, "CS-07", 4, 2_512_345))
            sign = rig.sign()
            assert sign["amounts"][0][1] == 2_512_345
            assert sign["message"] == {"message": "WIN", "table": "CS-07", "seat": 4, "amount_cents": 2_512_345}
            await d.devices["seat-4"].send(SetWinLight(4, True))
            assert rig.lights()["seats"] == {4: {"accepted": [], "win": True}}

    run(main())


def test_caribbean_stud_7_faults_hit_the_named_device_only() -> None:
    async def main() -> None:
        async with table(CONFIG / "caribbean-stud-7.toml") as (rig, d):
            # a corrupted reply from unit 3: seat-3's driver counts a CRC error and retries; seat-4 sees nothing
            others = {n: errors(d, n) for n in ("seat-2", "seat-4", "lockout", "sign")}
            rig.corrupt("seat-3", 1)
            await until(lambda: d.devices["seat-3"].health.errors["crc"] >= 1)
            assert {n: errors(d, n) for n in others} == others
            rig.drop("seat-6", 1, "to_device")  # the request is lost: the driver times out once, then retries
            await until(lambda: d.devices["seat-6"].health.errors["timeout"] >= 1)
            assert d.devices["seat-6"].health.up


            # an exception code takes that unit down, and only that unit
            rig.exception("seat-5", 4)
            assert (await d.expect(DeviceDown)).device == "seat-5"
            rig.exception("seat-5", None)
            assert await d.expect(DeviceUp) == DeviceUp("seat-5")

            rig.mute("sign", True)
            assert (await d.expect(DeviceDown)).device == "sign"
            rig.mute("sign", False)
            assert await d.expect(DeviceUp) == DeviceUp("sign")

            # unplugging a bus device pulls the bus cable: all nine units go, the line devices stay
            modbus = {n for n, c in rig.connections().items() if c.transport == "rtu"}
            assert set(rig.unplug("seat-1")) == modbus
            await d.expect_all(DeviceDown, modbus)
            rig.replug("table-bus")
            await d.expect_all(DeviceUp, modbus, timeout=10)
            assert not any(isinstance(e, DeviceDown) and e.device in ("shuffler", "shoe") for e in d.seen)

            # a rebooted lock-out forgets its lamp and its press count; the driver sees the count go back
            # to zero and lights the lamp again
            await rig.press_lockout()
            assert await d.expect(LockoutPressed) == LockoutPressed("lockout")
            await d.devices["lockout"].send(SetLockoutLamp(True))
            assert rig.lights()["lockout_lamp"] is True
            rig.reboot("lockout")
            assert rig.lights()["lockout_lamp"] is False
            lockout = rig.simulator("lockout")
            await lockout.wait_until(lambda: rig.lights()["lockout_lamp"] is True, timeout=10)
            after = []
            while not d.queue.empty():
                after.append(d.queue.get_nowait())
            assert not any(isinstance(e, LockoutPressed) for e in after)  # a reboot is no press
            # the rig's transcript counts every fault it set and applied, per device and on the wire (a lab's
            # evidence); one set and not yet applied is in force
            rig.corrupt("seat-3", 1)
            await until(lambda: d.devices["seat-3"].health.errors["crc"] >= 2)
            rig.drop("seat-7", 150, "to_device")  # more than a few polls take: many still pending
            st = rig.status()
            dev = {x["name"]: x for x in st["devices"]}
            bus = next(b for b in st["buses"] if b["name"] == "table-bus")
            assert dev["seat-3"]["faults"]["corrupt"] == {"set": 2, "applied": 2, "pending": 0}
            assert dev["seat-6"]["faults"]["drop"] == {"set": 1, "applied": 1, "pending": 0}
            seven = dev["seat-7"]["faults"]["drop"]
            assert seven["set"] == 150 and seven["applied"] + seven["pending"] == 150 and seven["pending"] > 0
            assert bus["corrupted"] == 2 and bus["dropped"] >= 1 + seven["applied"]  # the wire goes on meanwhile
            assert bus["pending"]["drop"] <= seven["pending"] and dev["seat-4"]["faults"] == {}

    run(main())


def test_craps_hot_roller_over_tcp() -> None:
    async def main() -> None:
        async with table(CONFIG / "craps-hot-roller.toml") as (rig, d):
            c = rig.connections()["seat-3"]
            assert (c.transport, c.host, c.port) == ("tcp", "127.0.0.1", None) and c.tcp_port
            await rig.place_chip(3, "hot-roller", 500)  # the spot is the wager's id
            assert await d.expect(WagerSensed) == WagerSensed("seat-3", 3, "hot-roller", 500)
            await rig.roll(6, 5)
            assert await d.expect(DiceRolled) == DiceRolled("dice", 6, 5)
            await rig.press_lockout()
            assert await d.expect(LockoutPressed) == LockoutPressed("lockout")

            tcp = {n for n, c in rig.connections().items() if c.transport == "tcp"}
            total = sum(errors(d, n) for n in tcp)
            rig.drop("table-net", 1)  # one reply lost behind the gateway: a timeout, then the retry answers
            await until(lambda: sum(errors(d, n) for n in tcp) > total)
            assert all(d.devices[n].health.up for n in tcp)

            assert set(rig.unplug("table-net")) == tcp
            await d.expect_all(DeviceDown, tcp)
            rig.replug("seat-1")
            await d.expect_all(DeviceUp, tcp, timeout=10)
            assert not any(isinstance(e, DeviceDown) and e.device == "dice" for e in d.seen)

    run(main())


def test_a_start_that_fails_closes_everything_it_opened(tmp_path: Path) -> None:
    """The TCP port is taken: the rig refuses to start, naming the bus, and leaves nothing open."""
    import socket

    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            port = taken.getsockname()[1]
            text = (CONFIG / "craps-hot-roller.toml").read_text().replace("port = 0", f"port = {port}")
            cfg = tmp_path / "craps.toml"
            cfg.write_text(text)  # map names still resolve: config/devices/ of the project
            before = open_fds()
            rig = Rig.from_file(cfg)
            with structlog.testing.capture_logs():
                try:
                    await rig.start()
                except Exception as e:
                    assert type(e).__name__ == "RigError" and str(e).startswith("table-net: cannot start: ")
                else:
                    raise AssertionError("the rig started on a port in use")
            assert not rig.running
            assert not opened_since(before)
            assert asyncio.all_tasks() == {asyncio.current_task()}

    run(main())

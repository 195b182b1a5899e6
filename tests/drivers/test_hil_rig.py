"""The rig with stand-in simulators: lifecycle, connections, routing of control actions, faults by name.

The stand-ins record what they were asked; the real simulators are exercised in test_hil_integration.py.
Per-unit faults on an RTU bus are checked on the real SerialWire, by reading what crosses it.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from leaks import open_fds, opened_since

from hil.rig import Connection, Rig, RigError
from hil.rig_config import parse_rig_config
from hil.wire import Direction

# --- stand-ins for the simulators ---------------------------------------------------------------------


class FakeSimDevice:
    def __init__(self, unit: int, register_map: Any, name: str, first_seat: int) -> None:
        self.unit, self.name, self.kind, self.first_seat = unit, name, register_map.kind, first_seat
        self.calls: list[tuple[Any, ...]] = []
        self.accepted: dict[int, set[str]] = {}
        self.win: set[int] = set()
        self.lamp = False
        self.display: dict[str, Any] = {"message": "CLOSED"}
        self.muted = False
        self.exception_code: int | None = None
        self.reboots = 0

    def place_chip(self, seat: int, spot: str, amount_cents: int | None = None) -> None:
        if spot not in ("progressive", "ante"):
            raise ValueError(f"no spot {spot!r}")
        self.calls.append(("place_chip", seat, spot, amount_cents))

    def remove_chip(self, seat: int, spot: str) -> None:
        self.calls.append(("remove_chip", seat, spot))

    def press_lockout(self) -> None:
        self.calls.append(("press_lockout",))

    def lights(self) -> dict[str, Any]:
        if self.kind == "lockout":
            return {"lockout_lamp": self.lamp}
        return {"accepted": {(s, spot): True for s, v in self.accepted.items() for spot in v} | {(1, "ante"): False},
                "win": {s: True for s in self.win}}

    def sign(self) -> dict[str, Any]:
        return dict(self.display)

    def reboot(self) -> None:
        self.reboots += 1

    def set_exception(self, code: int | None) -> None:
        self.exception_code = code

    def mute(self, on: bool) -> None:
        self.muted = on


class FakeModbusBus:
    instances: list[FakeModbusBus] = []

    def __init__(self, *, port: str | None = None, host: str | None = None, tcp_port: int = 0,
                 baudrate: int = 19200) -> None:
        self.port, self.host, self.tcp_port, self.baudrate = port, host, tcp_port, baudrate
        self.devices: dict[int, FakeSimDevice] = {}
        self.running = False
        self._sock: socket.socket | None = None
        FakeModbusBus.instances.append(self)

    def add_device(self, unit: int, register_map: Any, *, name: str, first_seat: int = 1) -> FakeSimDevice:
        dev = FakeSimDevice(unit, register_map, name, first_seat)
        self.devices[unit] = dev
        return dev

    async def start(self) -> None:
        if self.host is not None:  # hold a real port, as the real server does
            self._sock = socket.create_server((self.host, self.tcp_port))
            self.tcp_port = self._sock.getsockname()[1]
        self.running = True

    async def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self.running = False


class FakeTcpProxy:
    """Listens where drivers connect; records the faults asked of it."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target, self.host, self.port = (target_host, target_port), host, port
        self.faults: list[tuple[Any, ...]] = []
        self._sock: socket.socket | None = None

    async def start(self) -> None:
        self._sock = socket.create_server((self.host, self.port))
        self.port = self._sock.getsockname()[1]

    async def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()

    def cut(self) -> None:
        self.faults.append(("cut",))

    def restore(self) -> None:
        self.faults.append(("restore",))

    def drop_next(self, n: int = 1) -> None:
        self.faults.append(("drop", n))

    def delay_next(self, seconds: float, n: int = 1) -> None:
        self.faults.append(("delay", seconds, n))

    # what the rig's status reads of a proxy (hil.modbus_devices.TcpFaultProxy): none applied, all pending
    dropped = delayed = 0

    def pending(self) -> dict[str, int]:
        return {"drop": sum(f[1] for f in self.faults if f[0] == "drop"),
                "delay": sum(f[2] for f in self.faults if f[0] == "delay")}


class FakeLineDevice:
    instances: list[FakeLineDevice] = []

    def __init__(self, port: str, *, name: str, kind: str, baud: int = 19200, heartbeat_s: float = 1.0,
                 seats: int | None = None, ack_wait_s: float = 5.0) -> None:
        self.port, self.name, self.kind, self.baud, self.heartbeat_s = port, name, kind, baud, heartbeat_s
        self.seats, self.ack_wait_s = seats, ack_wait_s
        self.applied_commands: list[Any] = []
        self.calls: list[tuple[Any, ...]] = []
        self.running = False
        self.muted = False
        self.fail_start = False
        FakeLineDevice.instances.append(self)

    async def start(self) -> None:
        if self.fail_start:
            raise OSError("port busy")
        self.running = True

    async def stop(self) -> None:
        self.running = False

    def __getattr__(self, verb: str) -> Any:
        if verb not in ("place_chip", "remove_chip", "press_lockout", "shuffle", "shuffle_fault", "dispense",
                        "jam", "deal", "roll", "send_garbage"):
            raise AttributeError(verb)

        async def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((verb, *args, *kwargs.values()))

        return record

    def lights(self) -> dict[str, Any]:
        return {}

    def sign(self) -> dict[str, Any]:
        return {"message": "PENDING"}

    def reboot(self) -> None:
        self.calls.append(("reboot",))

    def mute(self, on: bool) -> None:
        self.muted = on


def fake_map(path: Path) -> SimpleNamespace:
    """A stand-in register map: just its kind (and no local seats, so any seat list fits)."""
    return SimpleNamespace(**tomllib.loads(path.read_text()))


def fake_rig(cfg_text: str, tmp_path: Path) -> Rig:
    for kind in ("seat", "lockout", "sign"):
        (tmp_path / f"{kind}.toml").write_text(f'kind = "{kind}"\n')
    cfg = parse_rig_config(cfg_text, "rig.toml", base=tmp_path, load_map=fake_map)
    return Rig(cfg, source="rig.toml", modbus_bus=FakeModbusBus, line_device=FakeLineDevice, tcp_proxy=FakeTcpProxy,
               load_map=fake_map)


TABLE = """
table = "T1"
seats = 4

[[rtu]]
name = "bus-a"
baud = 19200
paced = false
devices = [
  { unit = 1, name = "seat-1", kind = "seat", map = "seat.toml", seats = [1] },
  { unit = 2, name = "seats-2-3", kind = "seat", map = "seat.toml", seats = [2, 3] },
  { unit = 10, name = "lockout", kind = "lockout", map = "lockout.toml" },
]

[[tcp]]
name = "net"
devices = [
  { unit = 1, name = "sign", kind = "sign", map = "sign.toml" },
  { unit = 4, name = "seat-4", kind = "seat", map = "seat.toml", seats = [4] },
]

[[line]]
name = "shuffler"
kind = "shuffler"
paced = false

[[line]]
name = "shoe"
kind = "shoe"
baud = 9600
heartbeat_s = 0.5

[[line]]
name = "dice"
kind = "dice"
"""


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- lifecycle and connections ------------------------------------------------------------------------


def test_start_stop_leaves_no_fds_tasks_or_threads(tmp_path: Path) -> None:
    import threading

    async def main() -> None:
        # the threads by identity, not by count: a thread of an earlier test may end meanwhile
        before_fds, before_threads = open_fds(), set(threading.enumerate())
        rig = fake_rig(TABLE, tmp_path)
        async with rig:
            assert rig.running
            assert opened_since(before_fds)  # the wires' PTYs are open
            relays = set(threading.enumerate()) - before_threads
            assert len(relays) == 4, relays  # one relay per wire: bus-a + 3 lines
            assert all(b.running for b in FakeModbusBus.instances[-2:])
            assert all(d.running for d in FakeLineDevice.instances[-3:])
        assert not rig.running
        assert not opened_since(before_fds)
        assert not any(t.is_alive() for t in relays) and not set(threading.enumerate()) - before_threads
        assert not any(b.running for b in FakeModbusBus.instances[-2:])
        assert not any(d.running for d in FakeLineDevice.instances[-3:])
        assert asyncio.all_tasks() == {asyncio.current_task()}

    run(main())


def test_serve_runs_as_a_task_until_cancelled(tmp_path: Path) -> None:
    async def main() -> None:
        before = open_fds()
        rig = fake_rig(TABLE, tmp_path)
        started = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(rig.serve(started))
            async with asyncio.timeout(5):
                await started.wait()
            assert (await rig.roll(2, 2))["device"] == "dice"
            task.cancel()
        assert not rig.running and not opened_since(before)
        assert not any(d.running for d in FakeLineDevice.instances[-3:])

    run(main())


def test_failed_start_undoes_what_started(tmp_path: Path) -> None:
    class Failing(FakeLineDevice):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            self.fail_start = k["name"] == "shoe"

    async def main() -> None:
        before = open_fds()
        rig = fake_rig(TABLE, tmp_path)
        rig._line_device = Failing
        with pytest.raises(RigError, match="shoe: cannot start: OSError: port busy"):
            await rig.start()
        assert not rig.running
        assert not opened_since(before)
        assert not any(d.running for d in FakeLineDevice.instances[-3:])
        assert not any(b.running for b in FakeModbusBus.instances[-2:])

    run(main())


def test_connections_tell_a_driver_where_each_device_is(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            conns = rig.connections()
            assert list(conns) == ["seat-1", "seats-2-3", "lockout", "sign", "seat-4", "shuffler", "shoe", "dice"]
            bus_port = conns["seat-1"].port
            assert bus_port and os.path.exists(bus_port)
            assert conns["seats-2-3"] == Connection(
                name="seats-2-3", kind="seat", transport="rtu", seats=(2, 3), bus="bus-a", port=bus_port,
                baud=19200, parity="N", stopbits=2, unit=2, first_seat=2,
                register_map=str((tmp_path / "seat.toml").resolve()))
            assert conns["lockout"].port == bus_port  # one cable for the whole bus
            sign = conns["sign"]
            assert (sign.transport, sign.host, sign.unit, sign.port) == ("tcp", "127.0.0.1", 1, None)
            assert sign.tcp_port and sign.tcp_port == conns["seat-4"].tcp_port
            with socket.create_connection((sign.host, sign.tcp_port), timeout=5):
                pass  # something listens there
            shoe = conns["shoe"]
            assert (shoe.transport, shoe.baud, shoe.unit, shoe.bus) == ("line", 9600, None, None)
            assert (shoe.parity, shoe.stopbits, shoe.first_seat) == ("N", 1, None)
            assert len({conns[n].port for n in ("shuffler", "shoe", "dice")} | {bus_port}) == 4
            # the simulators opened the device side of the same wires
            sim = rig.simulator("shoe")
            assert sim.port == rig.wire_of("shoe").device_port and sim.heartbeat_s == 0.5

            out = rig.write_driver_config(tmp_path / "drivers.toml")
            doc = tomllib.loads(out.read_text())
            assert doc["table"] == "T1" and doc["seats"] == 4
            by_name = {d["name"]: d for d in doc["device"]}
            assert by_name["seats-2-3"] == conns["seats-2-3"].as_dict()
            assert by_name["sign"]["tcp_port"] == sign.tcp_port
            assert "port" not in by_name["sign"] and "unit" not in by_name["shoe"]

    run(main())


def test_not_running_is_refused(tmp_path: Path) -> None:
    rig = fake_rig(TABLE, tmp_path)
    with pytest.raises(RigError, match="not running"):
        rig.connections()
    with pytest.raises(RigError, match="not running"):
        run(rig.place_chip(1, "progressive"))


# --- control actions reach the right simulator --------------------------------------------------------


def test_seat_actions_route_to_the_device_covering_the_seat(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            assert (await rig.place_chip(1, "progressive"))["device"] == "seat-1"
            assert (await rig.place_chip(3, "progressive", 500))["device"] == "seats-2-3"
            assert (await rig.remove_chip(2, "ante"))["device"] == "seats-2-3"
            assert (await rig.place_chip(4, "ante"))["device"] == "seat-4"
            assert rig.simulator("seat-1").calls == [("place_chip", 1, "progressive", None)]
            assert rig.simulator("seats-2-3").calls == [("place_chip", 3, "progressive", 500),
                                                        ("remove_chip", 2, "ante")]
            assert rig.simulator("seat-4").calls == [("place_chip", 4, "ante", None)]
            # a Modbus device knows the table seat of its first seat
            assert [rig.simulator(n).first_seat for n in ("seat-1", "seats-2-3", "seat-4")] == [1, 2, 4]
            assert await rig.place_chip(1, "ante") == {"device": "seat-1", "acknowledged": None}
            assert await rig.shuffle(52) == {"device": "shuffler", "acknowledged": True}
            with pytest.raises(RigError, match=r"seat 5 is not at this table \(seats 1-4\)"):
                await rig.place_chip(5, "progressive")
            with pytest.raises(RigError, match="seat 0"):
                await rig.remove_chip(0, "progressive")
            with pytest.raises(RigError, match="no spot 'bogus'"):
                await rig.place_chip(1, "bogus")
            for bad in (0, -5, True, "5.00"):
                with pytest.raises(RigError, match="amount_cents"):
                    await rig.place_chip(1, "progressive", bad)

    run(main())


def test_seat_without_a_device_is_named(tmp_path: Path) -> None:
    cfg = TABLE.replace("seats = 4", "seats = 6")

    async def main() -> None:
        async with fake_rig(cfg, tmp_path) as rig:
            with pytest.raises(RigError, match="no device covers seat 6"):
                await rig.place_chip(6, "progressive")

    run(main())


def test_kind_actions_route_by_kind(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            assert (await rig.press_lockout())["device"] == "lockout"
            assert rig.simulator("lockout").calls == [("press_lockout",)]
            assert (await rig.shuffle(52, "A"))["device"] == "shuffler"
            assert (await rig.shuffle_fault("door open"))["device"] == "shuffler"
            assert rig.simulator("shuffler").calls == [("shuffle", 52, "A"), ("shuffle_fault", "door open")]
            with pytest.raises(RigError, match="reason"):
                await rig.shuffle_fault(" ")
            assert (await rig.dispense(5))["device"] == "shoe"
            assert (await rig.jam_shoe())["device"] == "shoe"
            assert (await rig.deal(["AS", "kd", "10h", 0, 51]))["device"] == "shoe"
            # several cards: one frame each, queued in order
            assert rig.simulator("shoe").calls == [("dispense", 5), ("jam",), ("deal", [48]), ("deal", [46]),
                                                   ("deal", [33]), ("deal", [0]), ("deal", [51])]
            assert (await rig.roll(3, 4))["device"] == "dice"
            assert rig.simulator("dice").calls == [("roll", 3, 4)]
            assert rig.sign() == {"message": "CLOSED"}

            with pytest.raises(RigError, match="cards\\[1\\]: unknown card 'ZZ'"):
                await rig.deal(["AS", "ZZ"])
            with pytest.raises(RigError, match="cards\\[0\\]: 52 is not a card"):
                await rig.deal([52])
            with pytest.raises(RigError, match="die2 7"):
                await rig.roll(1, 7)
            with pytest.raises(RigError, match="'shoe' is a shoe device, not a shuffler"):
                await rig.shuffle(52, device="shoe")
            with pytest.raises(RigError, match="count -1"):
                await rig.shuffle(-1)
            # nothing reached a simulator from the refused calls
            assert len(rig.simulator("shoe").calls) == 7 and len(rig.simulator("dice").calls) == 1

    run(main())


def test_missing_or_ambiguous_kinds(tmp_path: Path) -> None:
    cfg = TABLE.replace('name = "dice"\nkind = "dice"', 'name = "shoe-2"\nkind = "shoe"')

    async def main() -> None:
        async with fake_rig(cfg, tmp_path) as rig:
            with pytest.raises(RigError, match="no dice device"):
                await rig.roll(1, 1)
            with pytest.raises(RigError, match=r"several shoe devices \(shoe, shoe-2\): name one"):
                await rig.jam_shoe()
            assert (await rig.jam_shoe(device="shoe-2"))["device"] == "shoe-2"

    run(main())


def test_lights_merge_seats_and_the_lockout_lamp(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            assert rig.lights() == {"seats": {}, "lockout_lamp": False}  # (1, "ante") is off: not listed
            rig.simulator("seats-2-3").accepted = {2: {"progressive"}, 3: {"ante", "progressive"}}
            rig.simulator("seats-2-3").win = {3}
            rig.simulator("seat-4").accepted = {4: {"progressive"}}
            rig.simulator("lockout").lamp = True
            assert rig.lights() == {
                "seats": {2: {"accepted": ["progressive"], "win": False},
                          3: {"accepted": ["ante", "progressive"], "win": True},
                          4: {"accepted": ["progressive"], "win": False}},
                "lockout_lamp": True,
            }

    run(main())


# --- faults -------------------------------------------------------------------------------------------


def test_device_faults_by_name(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            rig.reboot("seat-1")
            assert rig.simulator("seat-1").reboots == 1
            rig.exception("sign", 4)
            assert rig.simulator("sign").exception_code == 4
            rig.exception("sign", None)
            assert rig.simulator("sign").exception_code is None
            with pytest.raises(RigError, match="line protocol"):
                rig.exception("shoe", 4)
            for bad in (0, 9, 256):
                with pytest.raises(RigError, match=f"exception code {bad}: one of 1, 2, 3, 4"):
                    rig.exception("sign", bad)
            rig.mute("shoe", True)
            assert rig.simulator("shoe").muted
            await rig.garbage("shoe", b"\xff\x00")
            assert rig.simulator("shoe").calls[-1] == ("send_garbage", b"\xff\x00")
            with pytest.raises(RigError, match="no device or bus named 'nope'"):
                rig.unplug("nope")
            with pytest.raises(RigError, match="direction"):
                rig.drop("shoe", 1, "sideways")
            st = rig.status()
            shoe = next(d for d in st["devices"] if d["name"] == "shoe")
            assert shoe["muted"] is True and shoe["unplugged"] is False

    run(main())


def test_tcp_faults_go_to_the_proxy_drivers_connect_through(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            proxy = rig.node("sign").bus.proxy._proxy
            server = FakeModbusBus.instances[-1]
            assert proxy.target == ("127.0.0.1", server.tcp_port) and proxy.port != server.tcp_port
            assert rig.connections()["sign"].tcp_port == proxy.port
            assert rig.unplug("sign") == ["sign", "seat-4"]
            assert rig.status()["devices"][3]["unplugged"] is True
            assert rig.replug("net") == ["sign", "seat-4"]
            rig.drop("seat-4", 2)
            rig.delay("net", 0.5, 1)
            assert proxy.faults == [("cut",), ("restore",), ("drop", 2), ("delay", 0.5, 1)]
            with pytest.raises(RigError, match="no CRC"):
                rig.corrupt("sign", 1)
            with pytest.raises(RigError, match="only replies"):
                rig.drop("sign", 1, "to_device")
            with pytest.raises(RigError, match="no serial line"):
                await rig.garbage("sign", b"x")

    run(main())


def _read_frame(fd: int, timeout: float = 5.0) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout)
    assert ready, "nothing crossed the wire"
    return os.read(fd, 4096)


def _quiet(fd: int, timeout: float = 0.3) -> bool:
    """Nothing arrives within ``timeout``: only to prove a frame was lost where no counter says so."""
    return not select.select([fd], [], [], timeout)[0]


async def until(cond: Any, timeout: float = 5.0) -> None:
    """Wait for a condition that another thread (the wire's relay) makes true."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.002)


def test_rtu_faults_hit_only_the_named_unit(tmp_path: Path) -> None:
    """Frames cross the real wire: corrupt/drop named after seat-1 (unit 1) leave unit 2's frames alone."""

    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            wire = rig.wire_of("seat-1")
            drv = os.open(wire.driver_port, os.O_RDWR | os.O_NOCTTY)
            dev = os.open(wire.device_port, os.O_RDWR | os.O_NOCTTY)
            try:
                rig.corrupt("seat-1", 1)
                os.write(dev, b"\x02\x03\x00\x10")  # unit 2 first: untouched
                assert _read_frame(drv) == b"\x02\x03\x00\x10"
                os.write(dev, b"\x01\x03\x00\x10")
                assert _read_frame(drv) == b"\x01\x03\x00\x11"
                os.write(dev, b"\x01\x03\x00\x10")  # only one was asked for
                assert _read_frame(drv) == b"\x01\x03\x00\x10"

                faults = rig.node("seat-1").bus.unit_faults
                rig.drop("seats-2-3", 1, "to_device")
                os.write(drv, b"\x01\x01")  # unit 1: passes
                assert _read_frame(dev) == b"\x01\x01"
                os.write(drv, b"\x02\x01")
                await until(lambda: faults.dropped == 1)
                os.write(drv, b"\x02\x02")
                assert _read_frame(dev) == b"\x02\x02"

                await rig.garbage("lockout", b"\xde\xad")  # towards the driver, on the bus wire
                assert _read_frame(drv) == b"\xde\xad"

                assert rig.unplug("lockout") == ["seat-1", "seats-2-3", "lockout"]
                assert wire.unplugged
                os.write(dev, b"\x01\x01")
                assert _quiet(drv)
                rig.replug("bus-a")
                os.write(dev, b"\x01\x01")
                assert _read_frame(drv) == b"\x01\x01"
                st = rig.status()
                bus = next(b for b in st["buses"] if b["name"] == "bus-a")
                assert bus["pending"] == {"corrupt": 0, "drop": 0, "delay": 0}  # every unit fault applied
                assert bus["frames"][Direction.TO_DRIVER.value] == 5
            finally:
                os.close(drv)
                os.close(dev)

    run(main())


def test_line_device_faults_use_its_own_wire(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_rig(TABLE, tmp_path) as rig:
            wire = rig.wire_of("shuffler")
            drv = os.open(wire.driver_port, os.O_RDWR | os.O_NOCTTY)
            dev = os.open(wire.device_port, os.O_RDWR | os.O_NOCTTY)
            try:
                rig.corrupt("shuffler", 1, Direction.TO_DRIVER)
                os.write(dev, b"$0001 HELLO*0000\r\n")
                assert _read_frame(drv) == b"$0001 HELLO*0000\r\x0b"
                rig.drop("shuffler", 1, "to-device")
                os.write(drv, b"lost")
                await until(lambda: wire.stats.dropped == 1)
                os.write(drv, b"kept")
                assert _read_frame(dev) == b"kept"
                rig.delay("shuffler", 0.2, 1)
                t0 = time.monotonic()
                os.write(dev, b"late")
                assert _read_frame(drv) == b"late"
                assert time.monotonic() - t0 >= 0.2
                with pytest.raises(RigError, match="seconds"):
                    rig.delay("shuffler", 0)
                assert rig.unplug("shuffler") == ["shuffler"]
                assert wire.unplugged and not rig.wire_of("shoe").unplugged
            finally:
                os.close(drv)
                os.close(dev)

    run(main())

"""A whole simulated table from its configuration: wires, Modbus buses, line-protocol devices.

``Rig`` builds what the configuration (hil/rig_config.py) describes, starts all of it, tells a driver how to
reach each device (``connections()``), routes control actions to the simulator that handles them
(a chip at seat 3 goes to whichever device covers seat 3) and injects faults by device name (their
bookkeeping: hil/faults.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import structlog

from controller.cards import parse_card
from controller.errors import InputError
from hil.faults import EXCEPTION_CODES, Counts, InjectedFaults, UnitFaults, link_counts, wire_counts
from hil.rig_config import MapLoader, ModbusDeviceConfig, RigConfig, load_maps, load_rig_config
from hil.wire import Direction, SerialWire

log = structlog.get_logger("hil")

# Serial framing the simulators use, told to drivers: Modbus RTU on the rig is 8N2 (a PTY takes no parity;
# two stop bits keep the 11-bit character of the Modbus spec), the line protocol 8N1.
RTU_FRAMING = {"parity": "N", "stopbits": 2}
LINE_FRAMING = {"parity": "N", "stopbits": 1}
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
ACTION_TIMEOUT_S = 5.0
# How long a line device's event waits for the driver's ACK before the action reports "not yet
# acknowledged" (the device keeps retransmitting). Shorter than ACTION_TIMEOUT_S.
ACK_WAIT_S = 2.0


class RigError(RuntimeError):
    """A control action the rig cannot carry out (unknown device, no device at that seat, ...)."""


# --- what a driver needs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """How a driver reaches one simulated device while the rig runs (ports change every run)."""

    name: str
    kind: str
    transport: Literal["rtu", "tcp", "line"]
    seats: tuple[int, ...] = ()
    bus: str | None = None  # devices on one bus share its port or socket
    port: str | None = None  # serial path the driver opens (rtu, line)
    baud: int | None = None
    parity: str | None = None  # serial framing: 8 data bits, this parity, these stop bits
    stopbits: int | None = None
    host: str | None = None  # tcp
    tcp_port: int | None = None
    unit: int | None = None  # Modbus unit id
    first_seat: int | None = None  # Modbus seat device: the table seat of its map's seat 1
    register_map: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


def connections_toml(table: str, seats: int, conns: Iterable[Connection]) -> str:
    """The connections as TOML: ``table``, ``seats`` and one ``[[device]]`` table per device."""
    lines = [
        "# Driver connections of a running hardware-in-the-loop rig. Ports change on every run.",
        f"table = {_toml_value(table)}",
        f"seats = {seats}",
    ]
    for c in conns:
        lines += ["", "[[device]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in c.as_dict().items()]
    return "\n".join(lines) + "\n"


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string (ASCII, escaped) is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


# --- the rig ----------------------------------------------------------------------------------------


@dataclass
class _Bus:
    name: str
    transport: Literal["rtu", "tcp"]
    sim: Any
    wire: SerialWire | None = None
    baud: int | None = None
    host: str | None = None
    unit_faults: UnitFaults | None = None
    proxy: Any = None  # tcp: the fault proxy drivers connect through
    unplugged: bool = False
    nodes: list[_Node] = field(default_factory=list)

    @property
    def tcp_port(self) -> int:
        return int(self.proxy.port)


@dataclass
class _Node:
    """One simulated device as the rig sees it."""

    name: str
    kind: str
    transport: Literal["rtu", "tcp", "line"]
    seats: tuple[int, ...]
    sim: Any
    wire: SerialWire | None = None  # its own (line) or its bus's (rtu)
    bus: _Bus | None = None
    unit: int | None = None
    register_map: Path | None = None
    baud: int | None = None
    muted: bool = False
    exception: int | None = None


def _modbus_bus_factory() -> Callable[..., Any]:
    from hil.modbus_devices import ModbusBusSim  # pymodbus only for rigs with Modbus devices

    return ModbusBusSim


def _tcp_proxy_factory() -> Callable[..., Any]:
    from hil.modbus_devices import TcpFaultProxy

    return TcpFaultProxy


def _line_device_factory() -> Callable[..., Any]:
    from hil.line_device import LineDeviceSim

    return LineDeviceSim


def _direction(value: Direction | str) -> Direction:
    if isinstance(value, Direction):
        return value
    v = str(value).strip().lower().replace("-", "_")
    try:
        return Direction(v)
    except ValueError:
        raise RigError(f"direction {value!r}: must be to_driver or to_device") from None


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool | None:
    """Call a simulator method, plain (Modbus: the driver reads the new state when it polls) or async
    (line protocol: returns once the driver has acknowledged the frame).

    Returns None for a plain method, True once acknowledged, False when the simulator gave up waiting
    for the acknowledgement: the frame stays queued and is retransmitted until a driver takes it."""
    deadline = asyncio.timeout(ACTION_TIMEOUT_S)
    try:
        async with deadline:
            result = fn(*args, **kwargs)
            if not inspect.isawaitable(result):
                return None
            await result
            return True
    except TimeoutError:
        if deadline.expired():
            raise RigError(f"the simulator did not carry out {fn.__name__} within {ACTION_TIMEOUT_S:g} s") from None
        return False  # the simulator's own wait for the driver's ACK ran out
    except (ValueError, KeyError, TypeError, LookupError) as e:
        # The simulator refused (no such spot on this device, a count out of range): the caller's mistake.
        raise RigError(f"{fn.__name__}: {e}") from None
    except RuntimeError as e:  # the driver refused the frame (NAK), or the device rebooted meanwhile
        raise RigError(f"{fn.__name__}: {e}") from None


def _done(node: _Node, acked: bool | None) -> dict[str, Any]:
    """What a table action did: which device raised it, and whether a driver has acknowledged it yet
    (None: a Modbus device, whose driver finds the change when it polls)."""
    return {"device": node.name, "acknowledged": acked}


class _TcpBus:
    """A Modbus TCP bus as one thing to start and stop: the server, then the fault proxy in front of it
    (unplug cuts the proxy's connections; drop and delay hold its replies)."""

    def __init__(self, proxy_factory: Callable[..., Any], server: Any, host: str, port: int) -> None:
        self._factory = proxy_factory
        self._server = server
        self._host = host
        self._port = port
        self._proxy: Any = None

    async def start(self) -> None:
        await self._server.start()
        try:
            proxy = self._factory(self._host, int(self._server.tcp_port), host=self._host, port=self._port)
            await proxy.start()
        except BaseException:
            await self._server.stop()
            raise
        self._proxy = proxy

    async def stop(self) -> None:
        try:
            if self._proxy is not None:
                await self._proxy.stop()
        finally:
            await self._server.stop()

    @property
    def port(self) -> int:
        return int(self._proxy.port)

    def cut(self) -> None:
        self._proxy.cut()

    def restore(self) -> None:
        self._proxy.restore()

    def drop_next(self, n: int) -> None:
        self._proxy.drop_next(n)

    def delay_next(self, seconds: float, n: int) -> None:
        self._proxy.delay_next(seconds, n)

    @property
    def dropped(self) -> int:
        return int(self._proxy.dropped)

    @property
    def delayed(self) -> int:
        return int(self._proxy.delayed)

    def pending(self) -> dict[str, int]:
        return dict(self._proxy.pending())


class Rig:
    """A whole simulated table. ``async with Rig(config) as rig:`` starts it, leaving stops it.

    The simulator classes and the register-map loader can be swapped (tests use small fakes)."""

    def __init__(self, config: RigConfig, *, source: str = "rig", modbus_bus: Callable[..., Any] | None = None,
                 line_device: Callable[..., Any] | None = None, tcp_proxy: Callable[..., Any] | None = None,
                 load_map: MapLoader | None = None, ack_wait_s: float = ACK_WAIT_S) -> None:
        self.config = config
        self.ack_wait_s = ack_wait_s
        self._tcp_proxy = tcp_proxy
        self.source = source
        self._modbus_bus = modbus_bus
        self._line_device = line_device
        self._load_map = load_map
        self._buses: dict[str, _Bus] = {}
        self._nodes: dict[str, _Node] = {}
        self._by_seat: dict[int, _Node] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._injected = InjectedFaults()  # a lab's evidence
        self.log = log.bind(table=config.table)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> Rig:
        return cls(load_rig_config(path, load_map=kwargs.get("load_map")), source=str(path), **kwargs)

    # --- lifecycle --------------------------------------------------------------------------------

    async def __aenter__(self) -> Rig:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._stack is not None

    async def start(self) -> None:
        if self._stack is not None:
            raise RigError("the rig is already running")
        stack = contextlib.AsyncExitStack()
        try:
            maps = self._load_maps()
            starts = self._build(stack, maps)
            # Start every simulator at once and let each start finish even if a neighbour fails: a start
            # cancelled halfway (a serial port opening in a thread) would close its port only later.
            # Each stop is registered before its start, so whatever a failed start opened is closed.
            async with asyncio.timeout(START_TIMEOUT_S):
                results = await asyncio.gather(*(self._start_one(stack, name, sim) for name, sim in starts),
                                               return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
        except BaseException as e:
            await stack.aclose()
            self._forget()
            if isinstance(e, TimeoutError):
                raise RigError(f"the rig did not start within {START_TIMEOUT_S:g} s") from e
            raise
        self._stack = stack
        self.log.info("rig started", devices=len(self._nodes), source=self.source)

    async def stop(self) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        try:
            await stack.aclose()
        finally:
            self._forget()
            self.log.info("rig stopped")

    async def serve(self, started: asyncio.Event | None = None) -> None:
        """Run as one task of a TaskGroup until cancelled; ``started`` is set once every device runs."""
        async with self:
            if started is not None:
                started.set()
            await asyncio.get_running_loop().create_future()  # until cancelled; leaving stops the rig

    async def _start_one(self, stack: contextlib.AsyncExitStack, name: str, sim: Any) -> None:
        stack.push_async_callback(self._stop_one, name, sim)
        try:
            await sim.start()
        except Exception as e:
            raise RigError(f"{name}: cannot start: {type(e).__name__}: {e}") from e

    async def _stop_one(self, name: str, sim: Any) -> None:
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await sim.stop()
        except Exception as e:  # noqa: BLE001 - one stuck simulator must not keep the others' ports open
            self.log.error("simulator did not stop cleanly", device=name, error=f"{type(e).__name__}: {e}")

    def _forget(self) -> None:
        self._buses.clear()
        self._nodes.clear()
        self._by_seat.clear()

    def _load_maps(self) -> dict[Path, Any]:
        return load_maps(self.config, self.source, self._load_map)

    def _wire(self, stack: contextlib.AsyncExitStack, baud: int, paced: bool, name: str) -> SerialWire:
        wire = SerialWire(baud, paced=paced, name=name)
        stack.callback(wire.close)  # closed last: the simulators hold its device side open
        return wire.start()

    def _build(self, stack: contextlib.AsyncExitStack, maps: dict[Path, Any]) -> list[tuple[str, Any]]:
        """Create wires and simulators (not yet started); returns (name, simulator) to start."""
        cfg = self.config
        starts: list[tuple[str, Any]] = []
        modbus_bus = self._modbus_bus or (_modbus_bus_factory() if (cfg.rtu or cfg.tcp) else None)
        for rtu in cfg.rtu:
            assert modbus_bus is not None  # made above: there is a bus
            wire = self._wire(stack, rtu.baud, rtu.paced, rtu.name)
            faults = UnitFaults()
            for d in Direction:
                wire.set_hook(d, faults.hook(d))
            bus = _Bus(rtu.name, "rtu", modbus_bus(port=wire.device_port, baudrate=rtu.baud), wire=wire,
                       baud=rtu.baud, unit_faults=faults)
            self._add_modbus(bus, rtu.devices, maps)
            starts.append((rtu.name, bus.sim))
        tcp_proxy = self._tcp_proxy or (_tcp_proxy_factory() if cfg.tcp else None)
        for tcp in cfg.tcp:
            assert modbus_bus is not None and tcp_proxy is not None  # made above: there is a TCP bus
            # The server takes any free port; drivers connect through the fault proxy at the configured one.
            bus = _Bus(tcp.name, "tcp", modbus_bus(host=tcp.host, tcp_port=0), host=tcp.host)
            bus.proxy = _TcpBus(tcp_proxy, bus.sim, tcp.host, tcp.port)
            self._add_modbus(bus, tcp.devices, maps)
            starts.append((tcp.name, bus.proxy))
        line_device = self._line_device or (_line_device_factory() if cfg.line else None)
        for ld in cfg.line:
            assert line_device is not None  # made above: there is a line device
            wire = self._wire(stack, ld.baud, ld.paced, ld.name)
            # seats: the table's, so the device refuses a seat number the table has not got, as the driver does.
            sim = line_device(wire.device_port, name=ld.name, kind=ld.kind, baud=ld.baud,
                              heartbeat_s=ld.heartbeat_s, seats=cfg.seats, ack_wait_s=self.ack_wait_s)
            self._add_node(_Node(ld.name, ld.kind, "line", tuple(ld.seats), sim, wire=wire, baud=ld.baud))
            starts.append((ld.name, sim))
        return starts

    def _add_modbus(self, bus: _Bus, devices: list[ModbusDeviceConfig], maps: dict[Path, Any]) -> None:
        self._buses[bus.name] = bus
        for dev in devices:
            first: dict[str, Any] = {"first_seat": dev.seats[0]} if dev.seats else {}
            if dev.lenient:
                first["lenient"] = True
            lacks = {k: v for k, v in (("writes_single", dev.writes_single), ("read_back", dev.read_back))
                     if v != ModbusDeviceConfig.model_fields[k].default}  # what the device lacks, if anything
            sim = bus.sim.add_device(dev.unit, maps[dev.map], name=dev.name, **first, **lacks)
            node = _Node(dev.name, dev.kind, bus.transport, tuple(dev.seats), sim, wire=bus.wire, bus=bus,
                         unit=dev.unit, register_map=dev.map, baud=bus.baud)
            bus.nodes.append(node)
            self._add_node(node)

    def _add_node(self, node: _Node) -> None:
        self._nodes[node.name] = node
        for seat in node.seats:
            self._by_seat[seat] = node

    # --- what a driver needs ------------------------------------------------------------------------

    def connections(self) -> dict[str, Connection]:
        """Device name -> how a driver reaches it, in configuration order."""
        self._need_running()
        out: dict[str, Connection] = {}
        for n in self._nodes.values():
            if n.transport == "tcp":
                assert n.bus is not None
                where: dict[str, Any] = {"host": n.bus.host, "tcp_port": n.bus.tcp_port}
            else:
                assert n.wire is not None
                framing = RTU_FRAMING if n.transport == "rtu" else LINE_FRAMING
                where = {"port": n.wire.driver_port, "baud": n.baud, **framing}
            modbus_seat = n.transport != "line" and n.seats
            out[n.name] = Connection(
                name=n.name, kind=n.kind, transport=n.transport, seats=n.seats,
                bus=n.bus.name if n.bus else None, unit=n.unit,
                first_seat=n.seats[0] if modbus_seat else None,
                register_map=str(n.register_map) if n.register_map else None, **where,
            )
        return out

    def write_driver_config(self, path: str | os.PathLike[str]) -> Path:
        """The connections as TOML (written whole, then renamed: a reader never sees half a file)."""
        p = Path(path)
        text = connections_toml(self.config.table, self.config.seats, self.connections().values())
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
        return p

    # --- routing ------------------------------------------------------------------------------------

    def _need_running(self) -> None:
        if self._stack is None:
            raise RigError("the rig is not running")

    def node(self, name: str) -> _Node:
        self._need_running()
        try:
            return self._nodes[name]
        except KeyError:
            raise RigError(f"no device named {name!r}; devices: {', '.join(self._nodes)}") from None

    def simulator(self, name: str) -> Any:
        """The simulator object behind a device name (tests read its state)."""
        return self.node(name).sim

    def wire_of(self, name: str) -> SerialWire | None:
        """The serial wire a device or bus is on (None on Modbus TCP)."""
        return self._target(name)[2]

    def _target(self, name: str) -> tuple[_Node | None, _Bus | None, SerialWire | None]:
        """A device or a bus by name: (node or None, its bus or None, its wire or None)."""
        self._need_running()
        if name in self._nodes:
            n = self._nodes[name]
            return n, n.bus, n.wire
        if name in self._buses:
            b = self._buses[name]
            return None, b, b.wire
        known = [*self._nodes, *self._buses]
        raise RigError(f"no device or bus named {name!r}; known: {', '.join(known)}")

    def _seat(self, seat: int) -> _Node:
        self._need_running()
        if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= self.config.seats:
            raise RigError(f"seat {seat!r} is not at this table (seats 1-{self.config.seats})")
        node = self._by_seat.get(seat)
        if node is None:
            raise RigError(f"no device covers seat {seat}")
        return node

    def _of_kind(self, kind: str, device: str | None) -> _Node:
        if device is not None:
            node = self.node(device)
            if node.kind != kind:
                raise RigError(f"{device!r} is a {node.kind} device, not a {kind}")
            return node
        self._need_running()
        found = [n for n in self._nodes.values() if n.kind == kind]
        if not found:
            raise RigError(f"this rig has no {kind} device")
        if len(found) > 1:
            raise RigError(f"this rig has several {kind} devices ({', '.join(n.name for n in found)}): name one")
        return found[0]

    @staticmethod
    def _has(node: _Node, method: str) -> Callable[..., Any]:
        fn = getattr(node.sim, method, None)
        if fn is None:
            raise RigError(f"{node.name!r} ({node.kind}, {node.transport}) cannot {method.replace('_', ' ')}")
        return fn

    # --- control: the table -------------------------------------------------------------------------

    async def place_chip(self, seat: int, spot: str, amount_cents: int | None = None) -> dict[str, Any]:
        node = self._seat(seat)
        if amount_cents is not None and (isinstance(amount_cents, bool) or not isinstance(amount_cents, int)
                                         or amount_cents <= 0):
            raise RigError(f"amount_cents {amount_cents!r}: must be a positive whole number of cents")
        on = getattr(node.sim, "chip_on", None)  # a sensor of presence: placed again, it sees no change
        already = bool(on(seat, spot)) if on is not None else False
        done = _done(node, await _call(self._has(node, "place_chip"), seat, spot, amount_cents=amount_cents))
        return {**done, **({"already_on_the_spot": True} if already else {})}

    async def remove_chip(self, seat: int, spot: str) -> dict[str, Any]:
        node = self._seat(seat)
        return _done(node, await _call(self._has(node, "remove_chip"), seat, spot))

    async def press_lockout(self, device: str | None = None) -> dict[str, Any]:
        node = self._of_kind("lockout", device)
        return _done(node, await _call(self._has(node, "press_lockout")))

    async def shuffle(self, count: int, deck: str | None = None, *, device: str | None = None) -> dict[str, Any]:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RigError(f"count {count!r}: must be a whole number of cards")
        node = self._of_kind("shuffler", device)
        return _done(node, await _call(self._has(node, "shuffle"), count, deck))

    async def shuffle_fault(self, reason: str, *, device: str | None = None) -> dict[str, Any]:
        if not str(reason).strip():
            raise RigError("reason: say what went wrong, e.g. \"door open\"")
        node = self._of_kind("shuffler", device)
        return _done(node, await _call(self._has(node, "shuffle_fault"), str(reason)))

    async def jam_shoe(self, *, device: str | None = None) -> dict[str, Any]:
        node = self._of_kind("shoe", device)
        return _done(node, await _call(self._has(node, "jam")))

    async def dispense(self, count: int, *, device: str | None = None) -> dict[str, Any]:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RigError(f"count {count!r}: must be a whole number of cards")
        node = self._of_kind("shoe", device)
        return _done(node, await _call(self._has(node, "dispense"), count))

    async def deal(self, cards: Iterable[str | int], *, device: str | None = None) -> dict[str, Any]:
        """Cards read by the shoe, as notation ("AS", "10h") or ints 0..51 (controller.cards). A card
        dealt twice is passed on: catching that is the controller's job."""
        parsed = [_card(c, i) for i, c in enumerate(cards)]
        if not parsed:
            raise RigError("cards: deal at least one card")
        node = self._of_kind("shoe", device)
        fn = self._has(node, "deal")
        if len(parsed) == 1 or not inspect.iscoroutinefunction(fn):
            return _done(node, await _call(fn, parsed))
        # One card per call, all queued at once (tasks start in creation order, each queues its frame
        # in its first step): with no driver listening every card is still queued, not just the first.
        tasks = [asyncio.create_task(_call(fn, [c]), name=f"hil-deal-{node.name}-{i}") for i, c in enumerate(parsed)]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return _done(node, all(results))

    async def roll(self, die1: int, die2: int, *, device: str | None = None) -> dict[str, Any]:
        for label, d in (("die1", die1), ("die2", die2)):
            if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 6:
                raise RigError(f"{label} {d!r}: a die shows 1-6")
        node = self._of_kind("dice", device)
        return _done(node, await _call(self._has(node, "roll"), die1, die2))

    def sign(self, device: str | None = None) -> dict[str, Any]:
        """What the meter sign shows."""
        node = self._of_kind("sign", device)
        return dict(self._has(node, "sign")())

    def lights(self) -> dict[str, Any]:
        """Lights merged across devices: per seat the accepted spots and the win light, and the lock-out
        lamp (None when the rig has no lock-out device)."""
        self._need_running()
        seats: dict[int, dict[str, Any]] = {}
        lamp: bool | None = None
        for node in self._nodes.values():
            fn = getattr(node.sim, "lights", None)
            if fn is None:
                continue
            state = fn() or {}
            if node.kind == "lockout":
                lamp = bool(lamp) or bool(state.get("lockout_lamp", False))
                continue
            for (seat, spot), on in state.get("accepted", {}).items():
                entry = seats.setdefault(int(seat), {"accepted": [], "win": False})
                if on and spot not in entry["accepted"]:
                    entry["accepted"] = sorted([*entry["accepted"], spot])
            for seat, on in state.get("win", {}).items():
                entry = seats.setdefault(int(seat), {"accepted": [], "win": False})
                entry["win"] = entry["win"] or bool(on)
        # a seat shows up once something there is lit
        lit = {s: e for s, e in seats.items() if e["accepted"] or e["win"]}
        return {"seats": {s: lit[s] for s in sorted(lit)}, "lockout_lamp": lamp}

    # --- control: faults ----------------------------------------------------------------------------

    def unplug(self, name: str) -> list[str]:
        """Pull the cable between the driver and the device: its own line, or its bus (an RTU bus is one
        cable; a TCP bus loses its network link: connections are cut and refused). Returns the devices
        cut off."""
        node, bus, wire = self._target(name)
        if wire is not None:
            wire.unplug()
        elif bus is not None:
            bus.proxy.cut()
        if bus is not None:
            bus.unplugged = True
        cut = [n.name for n in bus.nodes] if bus is not None else [name]
        self._injected.add(bus.name if bus is not None else name, "unplug")
        self.log.info("unplugged", target=name, devices=cut)
        return cut

    def replug(self, name: str) -> list[str]:
        node, bus, wire = self._target(name)
        if wire is not None:
            wire.replug()
        elif bus is not None:
            bus.proxy.restore()
        if bus is not None:
            bus.unplugged = False
        back = [n.name for n in bus.nodes] if bus is not None else [name]
        self.log.info("replugged", target=name, devices=back)
        return back

    def corrupt(self, name: str, n: int = 1, direction: Direction | str = Direction.TO_DRIVER) -> None:
        """Flip a bit in the last byte (the CRC) of the next n frames; on an RTU bus only the named unit's.
        Not on Modbus TCP, which has no CRC of its own to break."""
        self._frame_fault("corrupt", name, n, direction)

    def drop(self, name: str, n: int = 1, direction: Direction | str = Direction.TO_DRIVER) -> None:
        """Lose the next n frames; on an RTU bus only the named unit's; on a TCP bus the next n replies."""
        self._frame_fault("drop", name, n, direction)

    def _frame_fault(self, what: Literal["corrupt", "drop"], name: str, n: int, direction: Direction | str) -> None:
        _count(n)
        d = _direction(direction)
        node, bus, wire = self._target(name)
        if wire is None:
            assert bus is not None
            if what == "corrupt":
                raise RigError(f"{name!r} is on Modbus TCP, which has no CRC to corrupt (TCP checks its own data)")
            if d is not Direction.TO_DRIVER:
                raise RigError(f"{name!r} is on Modbus TCP: only replies (to_driver) can be dropped")
            bus.proxy.drop_next(n)
        elif node is not None and node.transport == "rtu":
            assert bus is not None and bus.unit_faults is not None and node.unit is not None
            bus.unit_faults.add(what, node.unit, n, d)
        elif what == "corrupt":
            wire.corrupt_next(n, d)
        else:
            wire.drop_next(n, d)
        where = name if node is not None and node.transport in ("rtu", "line") else (bus.name if bus else name)
        self._injected.add(where, what, n)
        self.log.info("fault set", fault=what, target=name, n=n, direction=d.value)

    def delay(self, name: str, seconds: float, n: int = 1, direction: Direction | str = Direction.TO_DRIVER) -> None:
        """Hold the next n frames for ``seconds`` more. On a shared bus that is the next n frames on the bus,
        whichever unit sent them: a half-duplex bus (or a gateway) waits for its slowest answer anyway."""
        _count(n)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 60:
            raise RigError(f"seconds {seconds!r}: must be more than 0 and at most 60")
        d = _direction(direction)
        node, bus, wire = self._target(name)
        if wire is not None:
            wire.delay_next(float(seconds), n, d)
        else:
            assert bus is not None
            if d is not Direction.TO_DRIVER:
                raise RigError(f"{name!r} is on Modbus TCP: only replies (to_driver) can be delayed")
            bus.proxy.delay_next(float(seconds), n)
        self._injected.add(bus.name if bus is not None else name, "delay", n)  # a bus's next frames, whoever's
        self.log.info("fault set", fault="delay", target=name, seconds=seconds, n=n, direction=d.value)

    async def garbage(self, name: str, data: bytes) -> None:
        """Bytes that are no valid frame, sent towards the driver as if from the device."""
        if not data:
            raise RigError("garbage: give at least one byte")
        node, bus, wire = self._target(name)
        if node is not None and node.transport == "line":
            await _call(self._has(node, "send_garbage"), bytes(data))
        elif wire is not None:
            wire.inject(bytes(data), Direction.TO_DRIVER)
        else:
            raise RigError(f"{name!r} is on Modbus TCP: there is no serial line to put garbage on")
        self._injected.add(name if node is not None and node.transport == "line" else (bus.name if bus else name),
                           "garbage", len(data))
        self.log.info("fault set", fault="garbage", target=name, bytes=len(data))

    def reboot(self, name: str) -> None:
        """The device restarts: it forgets its lights and counters and comes back as if powered on."""
        node = self.node(name)
        self._has(node, "reboot")()
        self._injected.add(name, "reboot")
        self.log.info("rebooted", device=name)

    def exception(self, name: str, code: int | None) -> None:
        """Answer every request with this Modbus exception code (None: answer normally again)."""
        if code is not None and (isinstance(code, bool) or not isinstance(code, int) or code not in EXCEPTION_CODES):
            raise RigError(f"exception code {code!r}: one of {', '.join(map(str, EXCEPTION_CODES))} "
                           "(4 server device failure, 6 busy, ...) or none")
        node = self.node(name)
        if node.transport == "line":
            raise RigError(f"{name!r} speaks the line protocol, which has no Modbus exceptions")
        self._has(node, "set_exception")(code)
        node.exception = code
        if code is not None:
            self._injected.add(name, "exception")
        self.log.info("fault set", fault="exception", device=name, code=code)

    def mute(self, name: str, on: bool) -> None:
        """The device stops answering (on) or answers again (off); the wire stays up."""
        node = self.node(name)
        self._has(node, "mute")(bool(on))
        node.muted = bool(on)
        if on:
            self._injected.add(name, "mute")
        self.log.info("fault set", fault="mute", device=name, on=bool(on))

    # --- status -------------------------------------------------------------------------------------

    def _applied_pending(self, node: _Node | None, bus: _Bus | None = None) -> Counts:
        """(frames applied, frames pending) of the frame faults set where `node` (or `bus`) takes them."""
        if node is not None and node.transport == "rtu" and node.bus is not None and node.bus.unit_faults:
            assert node.unit is not None
            return node.bus.unit_faults.counts(node.unit)
        if node is not None and node.transport == "line" and node.wire is not None:
            return wire_counts(node.wire)
        if bus is not None and bus.wire is not None:  # what was set on the bus itself: the wire's own faults
            return wire_counts(bus.wire)
        if bus is not None:
            return link_counts(bus.proxy)
        return {}

    def status(self) -> dict[str, Any]:
        self._need_running()
        conns = self.connections()
        devices = []
        for n in self._nodes.values():
            d = conns[n.name].as_dict()
            d.update(muted=n.muted, exception=n.exception,
                     unplugged=bool((n.wire is not None and n.wire.unplugged) or (n.bus and n.bus.unplugged)),
                     faults=self._injected.at(n.name, self._applied_pending(n)))
            devices.append(d)
        buses = []
        for b in self._buses.values():
            entry: dict[str, Any] = {"name": b.name, "transport": b.transport,
                                     "devices": [n.name for n in b.nodes], "unplugged": b.unplugged}
            if b.wire is not None:
                entry.update(port=b.wire.driver_port, baud=b.baud, paced=b.wire.paced, **_wire_stats(b.wire))
                if b.unit_faults is not None:  # the units' own faults cross this wire too
                    entry["dropped"] += b.unit_faults.dropped
                    entry["corrupted"] += b.unit_faults.corrupted
                    for k, v in b.unit_faults.pending().items():
                        entry["pending"][k] += v
            else:
                entry.update(host=b.host, tcp_port=b.tcp_port, server_port=int(b.sim.tcp_port),
                             dropped=b.proxy.dropped, delayed=b.proxy.delayed,
                             pending={"corrupt": 0, **b.proxy.pending()})
            entry["faults"] = self._injected.at(b.name, self._applied_pending(None, b))
            buses.append(entry)
        lines = [{"name": n.name, "port": n.wire.driver_port, "baud": n.baud, "unplugged": n.wire.unplugged,
                  **_wire_stats(n.wire)}
                 for n in self._nodes.values() if n.transport == "line" and n.wire is not None]
        return {"table": self.config.table, "seats": self.config.seats, "source": self.source,
                "devices": devices, "buses": buses, "lines": lines}


def _wire_stats(wire: SerialWire) -> dict[str, Any]:
    s = wire.stats
    return {"frames": {d.value: s.frames[d] for d in Direction}, "dropped": s.dropped, "corrupted": s.corrupted,
            "delayed": s.delayed, "garbage_bytes": s.garbage_bytes, "pending": wire.pending()}


def _count(n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
        raise RigError(f"n {n!r}: must be a whole number of frames, 1-10000")


def _card(value: str | int, i: int) -> int:
    if isinstance(value, bool):
        raise RigError(f"cards[{i}]: {value!r} is not a card")
    if isinstance(value, int):
        if not 0 <= value <= 51:
            raise RigError(f"cards[{i}]: {value} is not a card number 0-51")
        return value
    try:
        return parse_card(value, f"cards[{i}]")
    except InputError as e:
        raise RigError(str(e)) from None

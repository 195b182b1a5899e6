"""Simulated Modbus devices for the rig: real pymodbus servers whose registers follow the same register
maps as the drivers.

``ModbusBusSim(port=wire.device_port)`` is an RTU server on a serial port (the device end of a
hil.wire.SerialWire, so bytes are paced at the baud rate) hosting several unit ids on one bus (8N2: a PTY
refuses parity settings, and two stop bits keep the 11-bit character of the spec, so drivers on the rig use
``parity="N", stopbits=2``);
``ModbusBusSim(host="127.0.0.1")`` is a Modbus TCP server on a free port. Each ``SimDevice`` is one unit:
chips on its spots, presses of its button, what the driver last wrote to its lights and sign.

A device is strict, as the device contract asks of a real one: only its map's addresses exist (its points
and its identity block). A request whose range touches any other address, a gap inside the map included,
answers exception 2 (illegal data address); a function the device does not support answers exception 1.
``lenient=True`` (per bus, or per device in ``add_device``) answers every address within the span of a
table's points, as the rig did before, for a test that needs a forgiving device.

How faults are made, with pymodbus 3.16's own hooks (no fork): every register access goes through the
``action`` of a ``pymodbus.simulator.SimDevice``, which fills the registers from this module's model and
can answer with a Modbus exception code; the server's ``trace_packet`` hook drops the reply of a muted
unit (and of a unit not on the bus, as a real RS-485 line would stay silent). ``TcpFaultProxy`` drops,
delays or cuts a TCP connection.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

from pymodbus.constants import ExcCodes
from pymodbus.framer import FramerType
from pymodbus.pdu import ExceptionResponse, ModbusPDU
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType as SimDataType
from pymodbus.simulator import SimData
from pymodbus.simulator import SimDevice as PymodbusSimDevice

from drivers.modbus.registermap import ButtonMode, Kind, Point, RegisterMap, Table, load_register_map

_FC_TABLE = {1: Table.COIL, 5: Table.COIL, 15: Table.COIL, 2: Table.DISCRETE_INPUT,
             3: Table.HOLDING_REGISTER, 6: Table.HOLDING_REGISTER, 16: Table.HOLDING_REGISTER,
             23: Table.HOLDING_REGISTER, 4: Table.INPUT_REGISTER}
_READ_FC = {Table.COIL: 1, Table.DISCRETE_INPUT: 2, Table.HOLDING_REGISTER: 3, Table.INPUT_REGISTER: 4}
_WRITE_FC = {Table.COIL: (5, 15), Table.HOLDING_REGISTER: (6, 16)}
_TUPLE_ORDER = (Table.COIL, Table.DISCRETE_INPUT, Table.HOLDING_REGISTER, Table.INPUT_REGISTER)
DEFAULT_PRESS_HOLD_S = 0.25


class SimDevice:
    """One simulated device (one unit id). Seats are table seats: the device's seat 1 is ``first_seat``."""

    lenient = False  # answer unmapped addresses within a table's span (ModbusBusSim.add_device sets it)

    def __init__(self, unit: int, register_map: RegisterMap, *, name: str, first_seat: int = 1,
                 writes_single: bool = False, read_back: bool = True) -> None:
        self.name = name
        # What a device may lack (docs/configuration.md, writes and read_back): functions 15 and 16
        # (answered with exception 1), and reading its outputs back (1 and 3: exception 1).
        self.writes_single = writes_single
        self.read_back = read_back
        self.requests_by_function: collections.Counter[int] = collections.Counter()  # what reached it, by function
        self.unit = unit
        self.map = register_map
        self.kind = register_map.kind.value
        self.first_seat = first_seat
        self._chips: dict[tuple[int, str], int | None] = {}  # (local seat, spot) -> amount in cents
        self._presses = 0
        self._held = False
        self._outputs: dict[Table, dict[int, int]] = {Table.COIL: {}, Table.HOLDING_REGISTER: {}}
        self._exception: int | None = None
        self._muted = False
        self._waiters: list[asyncio.Future[None]] = []
        self._release: asyncio.TimerHandle | None = None
        self.requests = 0  # frames addressed to this unit that reached the device (wait_until sees it grow)
        self.request_times: collections.deque[float] = collections.deque(maxlen=1024)  # monotonic, the latest
        self.reboots = 0
        # where each input point's registers come from
        self._inputs: dict[Table, dict[int, tuple[Point, int]]] = {t: {} for t in Table}
        for p in register_map.inputs:
            for i in range(p.width):
                self._inputs[p.table][p.address + i] = (p, i)
        self.model = register_map.model  # what the identity block says (a test sets another to play a wrong model)

    # --- the physical world -----------------------------------------------------------------------

    def _local(self, seat: int) -> int:
        return seat - self.first_seat + 1

    def _wager_point(self, seat: int, spot: str) -> Point:
        key = (self._local(seat), spot)
        for p in self.map.points("wager_present"):
            if (p.seat, p.spot) == key:
                return p
        raise KeyError(f"{self.name} has no wager spot {spot!r} at seat {seat}")

    def place_chip(self, seat: int, spot: str, amount_cents: int | None = None) -> None:
        self._wager_point(seat, spot)
        key = (self._local(seat), spot)
        if amount_cents is not None:
            for p in self.map.points("wager_amount"):
                if (p.seat, p.spot) == key:
                    p.encode(self._to_raw(p, amount_cents))  # refuse what the device could not hold
        self._chips[key] = amount_cents
        self._notify()

    def chip_on(self, seat: int, spot: str) -> bool:
        """Whether a chip is on the spot now (placed, and not removed since)."""
        self._wager_point(seat, spot)
        return (self._local(seat), spot) in self._chips

    def remove_chip(self, seat: int, spot: str) -> None:
        self._wager_point(seat, spot)
        self._chips.pop((self._local(seat), spot), None)
        self._notify()

    def press_lockout(self, hold_s: float | None = None) -> None:
        """One press. A counter device counts it; a momentary input is held for ``hold_s`` seconds."""
        button = self.map.one("button")
        if button.mode is ButtonMode.COUNTER:
            bits = 32 if button.width == 2 else 16
            self._presses = (self._presses + 1) % (1 << bits)
        else:
            self._held = True
            if self._release is not None:
                self._release.cancel()
            loop = asyncio.get_running_loop()
            self._release = loop.call_later(DEFAULT_PRESS_HOLD_S if hold_s is None else hold_s,
                                            self.release_lockout)
        self._notify()

    def release_lockout(self) -> None:
        self._held = False
        self._release = None
        self._notify()

    def reboot(self) -> None:
        """Power cycle: outputs and counters back to their power-on values (zero). Chips stay where they
        are: the sensors see them again."""
        for table in self._outputs.values():
            table.clear()
        self._presses = 0
        self.release_lockout()
        self.reboots += 1
        self._notify()

    def set_exception(self, code: int | None) -> None:
        """Answer every request with this Modbus exception code (4 device failure, 6 busy, ...) until None."""
        self._exception = None if code is None else int(ExcCodes(code))

    def mute(self, on: bool) -> None:
        """Stop answering at all (and ignore what is written meanwhile)."""
        self._muted = on

    # --- what the driver made the device show -----------------------------------------------------

    def _read_output(self, p: Point) -> bool | int | str:
        table = self._outputs[p.table]
        return p.decode([table.get(p.address + i, 0) for i in range(p.width)])

    def _table_seat(self, p: Point) -> int:
        assert p.seat is not None, "a seat's light has its seat"
        return self.first_seat + p.seat - 1

    def lights(self) -> dict:
        if self.map.kind is Kind.SEAT:
            return {
                "accepted": {(self._table_seat(p), p.spot): bool(self._read_output(p))
                             for p in self.map.points("accepted_light")},
                "win": {self._table_seat(p): bool(self._read_output(p)) for p in self.map.points("win_light")},
            }
        if self.map.kind is Kind.LOCKOUT:
            return {"lockout_lamp": bool(self._read_output(self.map.one("lamp")))}
        return {}

    def sign(self) -> dict:
        if self.map.kind is not Kind.SIGN:
            return {}
        amounts = []
        for p in sorted(self.map.points("meter_amount"), key=lambda p: p.slot or 0):
            amounts.append((p.meter if p.meter is not None else p.slot, self._cents(p)))
        code = self._read_output(self.map.one("message_code"))
        message = None
        if code:
            names = {v: k.value for k, v in self.map.message_codes.items()}
            message = {
                "message": names.get(int(code), int(code)),
                "table": self._read_output(self.map.one("message_table")),
                "seat": self._read_output(self.map.one("message_seat")),
                "amount_cents": self._cents(self.map.one("message_amount")),
            }
        return {"amounts": amounts, "message": message}

    def _cents(self, p: Point) -> int | Fraction:
        value = Fraction(int(self._read_output(p))) * p.scale
        return int(value) if value.denominator == 1 else value

    @staticmethod
    def _to_raw(p: Point, cents: int) -> int:
        raw = Fraction(cents) / p.scale
        if raw.denominator != 1:
            raise ValueError(f"{cents} cents is not a whole number of counts of {p.scale} cents")
        return int(raw)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds; it is checked whenever the device changes."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while not predicate():
                fut: asyncio.Future[None] = loop.create_future()
                self._waiters.append(fut)
                try:
                    await fut
                finally:
                    if fut in self._waiters:
                        self._waiters.remove(fut)

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # --- the addresses that exist (strict) -----------------------------------------------------------

    @cached_property
    def _mapped(self) -> dict[Table, frozenset[int]]:
        """The addresses each table has: the map's points and its identity block."""
        found: dict[Table, set[int]] = {t: set() for t in Table}
        points = [*self.map.inputs, *self.map.outputs]
        if self.map.identity is not None:
            points.append(self.map.identity)
        for p in points:
            found[p.table].update(range(p.address, p.end))
        return {t: frozenset(a) for t, a in found.items()}

    @cached_property
    def _writable(self) -> dict[Table, frozenset[int]]:
        found: dict[Table, set[int]] = {t: set() for t in Table}
        for p in self.map.outputs:
            found[p.table].update(range(p.address, p.end))
        return {t: frozenset(a) for t, a in found.items()}

    @cached_property
    def functions(self) -> frozenset[int]:
        """The function codes the device supports: the reads of the tables its map uses, and the single and
        multiple writes of the tables it has outputs in."""
        codes = {_READ_FC[t] for t, a in self._mapped.items() if a}
        for t, a in self._writable.items():
            if a:
                codes.update(_WRITE_FC[t])
        return frozenset(codes)

    def refusal(self, fc: int, address: int, count: int) -> ExcCodes | None:
        """The exception a strict device answers to this request, or None when it serves it."""
        if self.lenient:
            return None
        if fc not in self.functions:
            return ExcCodes.ILLEGAL_FUNCTION
        table = _FC_TABLE[fc]
        exists = self._mapped[table] if fc == _READ_FC[table] else self._writable[table]
        if count < 1 or any(a not in exists for a in range(address, address + count)):
            return ExcCodes.ILLEGAL_ADDRESS
        return None

    # --- registers --------------------------------------------------------------------------------

    def _input_value(self, table: Table, address: int) -> int:
        where = self._inputs[table].get(address)
        if where is None:
            return 0
        p, i = where
        if p.role == "wager_present":
            raw = p.encode((p.seat, p.spot) in self._chips)
        elif p.role == "wager_amount":
            assert p.seat is not None and p.spot is not None, "a wager's amount has its seat and spot"
            cents = self._chips.get((p.seat, p.spot))
            raw = p.encode(self._to_raw(p, cents) if cents is not None else 0)
        elif p.mode is ButtonMode.COUNTER:
            raw = p.encode(self._presses)
        else:
            raw = p.encode(self._held)
        return int(raw[i])

    def value(self, table: Table, address: int) -> int:
        """A coil/input (0 or 1) or register as a Modbus read would see it."""
        ident = self.map.identity
        if ident is not None and table is ident.table and ident.address <= address < ident.end:
            return int(ident.encode(self.model[:2 * ident.width])[address - ident.address])
        if address in self._inputs[table]:
            return self._input_value(table, address)
        return int(self._outputs.get(table, {}).get(address, 0))

    async def _action(self, fc: int, start: int, address: int, _count: int, registers: list[int],
                      values: list[int] | list[bool] | None) -> ExcCodes | None:
        if self._muted:
            return ExcCodes.DEVICE_BUSY  # not applied; the reply is dropped by the server's trace hook
        if self._exception is not None:
            return ExcCodes(self._exception)
        if (self.writes_single and fc in (15, 16)) or (not self.read_back and fc in (1, 3)):
            return ExcCodes.ILLEGAL_FUNCTION
        table = _FC_TABLE.get(fc)
        if table is None:
            return ExcCodes.ILLEGAL_FUNCTION
        if values is not None:
            if table not in self._outputs:
                return ExcCodes.ILLEGAL_ADDRESS
            for i, v in enumerate(values):
                self._outputs[table][address + i] = int(v)
            self._notify()
        # the runtime's registers are a copy of this model, refreshed on every access
        if table.is_bits:
            for r in range(len(registers)):
                base = (start + r) * 16
                registers[r] = sum(self.value(table, base + b) << b for b in range(16))
        else:
            for r in range(len(registers)):
                registers[r] = self.value(table, start + r) & 0xFFFF
        return None

    def _pymodbus_device(self) -> PymodbusSimDevice:
        blocks: list[list[SimData]] = []
        for table in _TUPLE_ORDER:
            points = [p for p in (*self.map.inputs, *self.map.outputs) if p.table is table]
            lo = min((p.address for p in points), default=0)
            hi = max((p.end for p in points), default=1)
            if table.is_bits:
                blocks.append([SimData(lo, count=hi - lo, values=False, datatype=SimDataType.BITS)])
            else:
                block = [SimData(lo, count=hi - lo, values=0, datatype=SimDataType.REGISTERS)]
                ident = self.map.identity
                if ident is not None and ident.table is table:  # a block of its own, far from the points
                    block.append(SimData(ident.address, count=ident.width, values=0,
                                         datatype=SimDataType.REGISTERS))
                    block.sort(key=lambda d: d.address)
                blocks.append(block)
        return PymodbusSimDevice(id=self.unit, simdata=tuple(blocks), action=self._action)  # type: ignore[arg-type]


# pymodbus starts each request's handler with run_coroutine_threadsafe (ServerRequestHandler.handle_later) and keeps
# no handle on it, so a request in flight when the server shuts down outlives it. The one reach into pymodbus'
# internals for it is here; tests/drivers/test_modbus_sim.py fails as soon as these names change.
REQUEST_HANDLER = "ServerRequestHandler.handle_request"


def _request_handler_of(task: asyncio.Task[Any], server: object) -> bool:
    coro = task.get_coro()
    if getattr(coro, "__qualname__", "") != REQUEST_HANDLER:
        return False
    frame = getattr(coro, "cr_frame", None)
    handler = frame.f_locals.get("self") if frame is not None else None
    return getattr(handler, "server", None) is server


async def stop_request_handlers(server: object) -> None:
    """Cancel the request handlers `server` left running (and those scheduled, not yet started)."""
    await asyncio.sleep(0)  # handle_later runs from call_soon: let a scheduled one become its task first
    await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() if not t.done() and _request_handler_of(t, server)]
    for t in left:
        t.cancel()
    await asyncio.gather(*left, return_exceptions=True)


class ModbusBusSim:
    """A bus of simulated devices behind one pymodbus server: RTU on a serial port, or Modbus TCP."""

    def __init__(self, *, port: str | None = None, host: str | None = None, tcp_port: int = 0,
                 baudrate: int = 19200, lenient: bool = False) -> None:
        if (port is None) == (host is None):
            raise ValueError("give a serial port or a TCP host, not both")
        self.lenient = lenient  # the default of add_device: see the module's doc
        self.port = port
        self.host = host
        self.tcp_port = tcp_port
        self.baudrate = baudrate
        self.devices: dict[int, SimDevice] = {}
        self._server: ModbusSerialServer | ModbusTcpServer | None = None
        self._rtu = port is not None
        self.dropped_replies = 0

    def add_device(self, unit: int, register_map: RegisterMap | str | Path, *, name: str,
                   first_seat: int = 1, lenient: bool | None = None, writes_single: bool = False,
                   read_back: bool = True) -> SimDevice:
        if self._server is not None:
            raise RuntimeError("add devices before start()")
        if not (1 <= unit <= 247 or (unit == 255 and not self._rtu)):  # TCP: 255, a device reached directly
            raise ValueError(f"unit {unit}: 1..247" + ("" if self._rtu else " or 255"))
        if unit in self.devices:
            raise ValueError(f"unit {unit} is already {self.devices[unit].name}")
        if not isinstance(register_map, RegisterMap):
            register_map = load_register_map(register_map)
        dev = SimDevice(unit, register_map, name=name, first_seat=first_seat, writes_single=writes_single,
                        read_back=read_back)
        dev.lenient = self.lenient if lenient is None else lenient
        self.devices[unit] = dev
        return dev

    async def start(self) -> None:
        if not self.devices:
            raise RuntimeError("no devices")
        sims = [d._pymodbus_device() for d in self.devices.values()]
        # pymodbus answers an unknown unit from unit 0 (or fails noisily): give it one, whose replies the
        # trace hook drops like any reply from a unit that is not on the bus.
        sims.append(PymodbusSimDevice(id=0, simdata=SimData(0, values=0, datatype=SimDataType.REGISTERS)))
        server: ModbusSerialServer | ModbusTcpServer
        if self._rtu:
            server = ModbusSerialServer(sims, framer=FramerType.RTU, port=self.port or "", baudrate=self.baudrate,
                                        parity="N", stopbits=2, trace_packet=self._trace,
                                        trace_pdu=self._strict)
        else:
            server = ModbusTcpServer(sims, framer=FramerType.SOCKET, address=(self.host or "127.0.0.1", self.tcp_port),
                                     trace_packet=self._trace, trace_pdu=self._strict)
        await server.serve_forever(background=True)
        self._server = server
        if not self._rtu:
            self.tcp_port = server.transport.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()
            await stop_request_handlers(server)
        for dev in self.devices.values():
            if dev._release is not None:
                dev._release.cancel()
                dev._release = None

    async def __aenter__(self) -> ModbusBusSim:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _unit_of(self, frame: bytes) -> int | None:
        if self._rtu:
            return frame[0] if frame else None
        return frame[6] if len(frame) > 6 else None

    def _strict(self, sending: bool, pdu: ModbusPDU) -> ModbusPDU:
        """A request the device refuses (see SimDevice.refusal) is answered with its exception, before any
        datastore sees it: every function code passes here, those pymodbus would answer itself included."""
        dev = self.devices.get(pdu.dev_id)
        if sending or dev is None or dev._muted or dev._exception is not None:
            return pdu
        fc = pdu.function_code
        if fc in (5, 6):
            count = 1
        elif fc in (15, 16):
            count = len(pdu.bits) if fc == 15 else len(pdu.registers)
        else:
            count = pdu.count
        code = dev.refusal(fc, pdu.address, count)
        return pdu if code is None else _Refused(pdu, code)

    def _trace(self, sending: bool, data: bytes) -> bytes:
        unit = self._unit_of(data)
        dev = self.devices.get(unit) if unit is not None else None
        if sending:
            if dev is None or dev._muted:
                self.dropped_replies += 1
                return b""
        elif dev is not None:
            dev.requests += 1
            at = 1 if self._rtu else 7  # the function code: after the unit id (RTU) or the MBAP header (TCP)
            if len(data) > at:
                dev.requests_by_function[data[at]] += 1
            dev.request_times.append(time.monotonic())
            dev._notify()
        return data


class _Refused(ModbusPDU):
    """A request that the server answers with an exception, whatever its function."""

    def __init__(self, request: ModbusPDU, code: ExcCodes) -> None:
        super().__init__(dev_id=request.dev_id, transaction_id=request.transaction_id)
        self.function_code = request.function_code
        self.code = code

    async def datastore_update(self, context: Any, device_id: int) -> ModbusPDU:
        return ExceptionResponse(self.function_code, self.code)


class TcpFaultProxy:
    """A TCP relay between a Modbus TCP client and server that can drop or delay replies and cut the
    connection, standing in for a pulled network cable or a lossy gateway."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._drop = 0
        self._delays: list[float] = []
        self._cut = False
        self._tasks: set[asyncio.Task] = set()
        self._handlers: set[asyncio.Task] = set()  # one per client connection (asyncio's, for _accept)
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0
        self.dropped = 0  # replies dropped, as asked (drop_next)
        self.delayed = 0  # replies delayed, as asked (delay_next)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._close_all()
        tasks = list(self._tasks) + list(self._handlers)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TcpFaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def drop_next(self, n: int = 1) -> None:
        self._drop += n

    def delay_next(self, seconds: float, n: int = 1) -> None:
        self._delays.extend([seconds] * n)

    def pending(self) -> dict[str, int]:
        """Faults set and not yet applied to a reply, by kind."""
        return {"drop": self._drop, "delay": len(self._delays)}

    def cut(self) -> None:
        """Pull the cable: close every connection and refuse new ones until ``restore``."""
        self._cut = True
        self._close_all()

    def restore(self) -> None:
        self._cut = False

    def _close_all(self) -> None:
        for w in list(self._writers):
            w.close()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        self._handlers.add(me)
        try:
            await self._relay(reader, writer)
        except asyncio.CancelledError:
            pass  # stop(): the handler ends with the proxy
        finally:
            self._handlers.discard(me)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.connections += 1
        self._writers.update((writer, up_writer))
        tasks = [asyncio.ensure_future(self._pump(reader, up_writer, replies=False)),
                 asyncio.ensure_future(self._pump(up_reader, writer, replies=True))]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(4096):
                if replies and self._drop:
                    self._drop -= 1
                    self.dropped += 1
                    continue
                if replies and self._delays:
                    self.delayed += 1
                    await asyncio.sleep(self._delays.pop(0))
                writer.write(data)
                await writer.drain()


__all__ = ["ModbusBusSim", "SimDevice", "TcpFaultProxy"]

"""Device drivers for Modbus devices described by a register map: seat wagering devices, the lock-out
button and the meter sign. Each implements drivers.device.Device.

A driver polls its device every ``poll_interval`` through the shared bus and turns what it reads into
events; ``send`` turns commands into writes. Faults, per the policy in docs/register-maps.md:

- every failed attempt is counted by kind in ``health.errors`` (``timeout``, ``crc``, ``garbage``, ``wrong_unit``,
  ``exception_<name>``) and logged loudly once per outage;
- a poll that gets no usable reply (after the bus' retries), or an exception reply other than busy, marks
  the device down (DeviceDown once); while down it is probed with a single attempt after a capped
  exponential backoff, and the first good poll raises DeviceUp once;
- a busy reply (exception 5 or 6) keeps the device up but skips that poll; ``busy_down_after`` busy polls in
  a row mark it down;
- a failed poll changes no state, so no fault becomes a phantom wager;
- the outputs last commanded (and acknowledged) are written again when the device comes back, and, while it
  is up, read back every ``verify_every`` polls (every poll for the sign) and written again if they differ:
  a device that rebooted between two polls comes back with its power-on outputs;
- a device whose map has an identity block is asked its model (one read) at first contact and on every
  reconnect attempt, before anything is written to it or polled: another model, or an exception, keeps it
  down with the reason (``identity_status``) and nothing is written to it until the right model answers; busy
  (5, 6) or a gateway's 10 or 11 says nothing about the model: "not checked yet", counted under the exception.

What a device can do (docs/configuration.md, the devices' ``writes`` and ``read_back``):

- ``writes="auto"`` writes consecutive outputs in one request (15, 16) until the device answers one with
  exception 1 (illegal function): then, for the rest of the run, one output a request (5, 6), logged once;
  ``"multiple"`` never falls back, ``"single"`` never tries. Register by register, a sign's message code
  still goes last.
- ``read_back=False``: the outputs are never read (1, 3): what the device shows cannot be proved. They are
  written again every ``RESEND_S`` instead, so that a device that restarted shows them again, and the device is
  up while it acknowledges its writes (a sign with nothing else to read has no other poll).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import structlog

from controller.errors import InputError
from drivers.device import DeviceUnavailable, UnsupportedCommand
from drivers.events import (
    Command,
    Event,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShowAmounts,
    ShowMessage,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from drivers.health import Backoff, DeviceHealth
from drivers.modbus import frames
from drivers.modbus.bus import BusError, DeviceException, ModbusBus, NoResponse, NotConnected, raise_if_cancelled
from drivers.modbus.core.codec import DataType
from drivers.modbus.core.edges import PressCounter, RisingEdge, Sensed, WagerEdges
from drivers.modbus.core.schedule import Read, Role
from drivers.modbus.registermap import ButtonMode, Kind, Point, RegisterMap, Table

log = structlog.get_logger("drivers.modbus")

WRITES = ("auto", "multiple", "single")
RESEND_S = 1.0  # a device without read-back: its outputs written again this often

# The values of a point as read or written: a table of bits reads bools, of registers ints.
Raw = list[int] | list[bool]


CHECKED = "checked"
NO_IDENTITY = "not checked: the map has no identity block"
NOT_YET_CHECKED = "not checked yet: the device has not answered"
# Exceptions that say nothing about the model: busy (5, 6), or a gateway that did not reach the device (10, 11).
NOT_AN_ANSWER = frozenset({*frames.BUSY_CODES, 10, 11})


class EmitError(RuntimeError):
    """``emit`` raised: not a device fault, so it ends ``run`` (the caller's queue is full or broken)."""


@dataclass(frozen=True)
class Block:
    """Points at consecutive addresses of one table, read or written in one request."""

    table: Table
    address: int
    count: int
    points: tuple[Point, ...]

    def slice(self, raw: Raw, point: Point) -> Raw:
        return raw[point.address - self.address:point.end - self.address]


def plan_blocks(points: Iterable[Point], *, write: bool = False) -> list[Block]:
    """Group points into requests: consecutive addresses of one table, up to the function's limit. Gaps
    are never read across (a device may refuse an address it does not have)."""
    limit = frames.MAX_WRITE if write else frames.MAX_READ
    order = list(Table)
    blocks: list[Block] = []
    for p in sorted(points, key=lambda p: (order.index(p.table), p.address)):
        last = blocks[-1] if blocks else None
        if (last is not None and last.table is p.table and last.address + last.count == p.address
                and last.count + p.width <= limit[p.table]):
            blocks[-1] = Block(p.table, last.address, last.count + p.width, (*last.points, p))
        else:
            blocks.append(Block(p.table, p.address, p.width, (p,)))
    return blocks


@dataclass(frozen=True)
class DeviceMetrics:
    name: str
    kind: str
    bus: str
    unit: int
    up: bool | None
    errors: dict[str, int]
    polls: int
    failed_polls: int
    last_poll_s: float | None


def _discard(_event: Event) -> None:
    pass


class ModbusDevice:
    """The common part of the three drivers; use ``make_device`` or a subclass."""

    kind: ClassVar[Kind]
    default_poll_interval: ClassVar[float] = 0.05

    def __init__(self, name: str, bus: ModbusBus, unit: int, register_map: RegisterMap, *,
                 first_seat: int = 1, poll_interval: float | None = None, backoff: Backoff | None = None,
                 verify_every: int = 20, busy_down_after: int = 5, writes: str = "auto",
                 read_back: bool = True) -> None:
        if register_map.kind is not self.kind:
            raise ValueError(f"{register_map.source} describes a {register_map.kind.value}, not a {self.kind.value}")
        if not (1 <= unit <= 247 or (unit == 255 and not bus.serial)):  # 255: a TCP device reached directly
            raise ValueError(f"unit {unit} is not a valid {'RTU' if bus.serial else 'TCP'} unit id")
        if first_seat < 1:
            raise ValueError("first_seat must be at least 1")
        if writes not in WRITES:
            raise ValueError(f"writes must be one of {', '.join(WRITES)}, not {writes!r}")
        self.name = name
        self.bus = bus
        self.unit = unit
        self.map = register_map
        self.first_seat = first_seat
        self.poll_interval = self.default_poll_interval if poll_interval is None else poll_interval
        if not 0 <= self.poll_interval <= 3600:
            raise ValueError("poll_interval must be 0..3600 seconds")
        self.backoff = backoff or Backoff(initial=0.1, cap=5.0)
        self.verify_every = verify_every
        self.busy_down_after = max(1, busy_down_after)
        self.writes = writes
        self.read_back = read_back
        self.single_detected = False  # auto: the device refused a multiple write (exception 1)
        self._resent_at = 0.0
        self._acked: dict[Point, Raw] = {}  # every output's last acknowledged value (a write-only sign's probe)
        self._emit: Callable[[Event], None] = _discard
        self.health = DeviceHealth(name, self._forward)
        self._commanded: dict[Point, Raw] = {}
        self._writing: dict[Point, Raw] = {}  # outputs being written now (a write may take several requests)
        # One write of outputs at a time (a send, a resend, a re-assert): a resend of several requests never
        # writes an older value over a send made meanwhile.
        self._output_lock = asyncio.Lock()
        self._busy_streak = 0
        self._since_verify = 0
        self.polls = 0
        self.failed_polls = 0
        self.last_poll_s: float | None = None
        self.identity_status = NO_IDENTITY if register_map.identity is None else NOT_YET_CHECKED
        self._identity_fault: str | None = None  # the last wrong answer, logged loudly once until it changes

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} unit {self.unit} on {self.bus.name}>"

    # --- Device protocol --------------------------------------------------------------------------

    async def run(self, emit: Callable[[Event], None]) -> None:
        """Poll when the bus's scheduler gives this device its turn (drivers/modbus/core/schedule.py); while down,
        probe after each step of the backoff."""
        self._emit = emit
        role = Role(self.kind.value)
        not_before = 0.0
        while True:
            raise_if_cancelled()  # a stop swallowed inside pymodbus still ends the loop (drivers/modbus/bus.py)
            async with self.bus.scheduler.turn(Read(self.name, role, self.poll_interval, not_before=not_before)):
                await self.poll_once()
            if self.health.up is False:
                not_before = time.monotonic() + self.backoff.delay()
            else:
                self.backoff.reset()
                not_before = 0.0

    async def send(self, command: Command) -> None:
        await self._send(self._plan(command))  # UnsupportedCommand / InputError before anything else

    async def send_many(self, commands: Sequence[Command]) -> None:
        """Several commands in as few requests as the map allows (a seat's lights at start-up: one); those the
        device cannot take are refused together once the others are written."""
        writes: dict[Point, Raw] = {}
        refused: list[str] = []
        for command in commands:
            try:
                writes.update(self._plan(command))
            except UnsupportedCommand as exc:
                refused.append(str(exc))
        if writes:
            await self._send(writes)
        if refused:
            raise UnsupportedCommand("; ".join(refused))

    async def _send(self, writes: dict[Point, Raw]) -> None:
        if self.health.up is False:
            raise DeviceUnavailable(f"{self.name} is down")
        self._refuse_unidentified()
        self._writing.update(writes)
        try:
            async with self._output_lock:
                await self._write(writes)
        except BusError as exc:
            # Not acknowledged: forget these outputs rather than re-assert a value the caller was told failed.
            for p in writes:
                self._commanded.pop(p, None)
            self._failed(exc)
            raise DeviceUnavailable(f"{self.name}: {exc}") from exc
        finally:
            for p in writes:
                self._writing.pop(p, None)
        self._commanded.update(writes)
        self._acked.update(writes)
        if not self.read_back:
            self._contact()  # acknowledged: the one sign of life a device without read-back gives

    # --- polling ----------------------------------------------------------------------------------

    def attach(self, emit: Callable[[Event], None]) -> None:
        """Where events go when ``poll_once`` is called directly (``run`` does this itself)."""
        self._emit = emit

    async def poll_once(self) -> bool:
        """One poll (or, while down, one probe). True if the device answered."""
        t0 = time.monotonic()
        probe = self.health.up is False
        try:
            if not await self._identify(0 if probe else None):
                self.failed_polls += 1
                return False
            await self._poll(0 if probe else None)
        except BusError as exc:
            self.failed_polls += 1
            self._failed(exc)
            return False
        except EmitError:
            raise
        except (ValueError, TypeError, LookupError) as exc:  # a decoding bug must not end run()
            self.failed_polls += 1
            self.health.error("internal", repr(exc))
            log.exception("poll failed", device=self.name)
            return False
        finally:
            self.polls += 1
            self.last_poll_s = time.monotonic() - t0
        return True

    async def _poll(self, retries: int | None) -> None:
        raise NotImplementedError

    @property
    def writes_mode(self) -> str:
        """How outputs are written now: "multiple", "single", or "single (detected)" (auto, after exception 1)."""
        if self.writes == "single":
            return "single"
        return "single (detected)" if self.single_detected else "multiple"

    def metrics(self) -> DeviceMetrics:
        return DeviceMetrics(self.name, self.kind.value, self.bus.name, self.unit, self.health.up,
                             dict(self.health.errors), self.polls, self.failed_polls, self.last_poll_s)

    @property
    def commanded(self) -> dict[Point, Raw]:
        return dict(self._commanded)

    # --- identity: the model at the unit, checked before anything else ----------------------------

    async def _identify(self, retries: int | None) -> bool:
        """Whether the device may be polled and written: up already (checked since the last contact was lost),
        or its map has no identity block, or it reports its map's model now. A bus fault raises BusError (a
        device that does not answer is down as from a poll); a wrong answer keeps it down."""
        ident = self.map.identity
        if ident is None or self.health.up is True:
            return True
        expected = f"expected model {self.map.model!r} (map {Path(self.map.source).name})"
        where = f"{ident.table.value} {ident.address}-{ident.end - 1}"
        try:
            raw = await self.bus.read(self.unit, ident.table, ident.address, ident.width, on_fault=self._fault,
                                      retries=retries)
        except DeviceException as exc:
            self.health.errors[exc.kind] += 1
            said = f"answered its identity block ({where}) with exception {exc.code} ({exc.name})"
            if exc.code in NOT_AN_ANSWER:
                # busy, or not reached behind a gateway: the model is still unknown, asked again at the next probe
                self.identity_status = f"not checked yet: exception {exc.code} ({exc.name})"
                self.health.down(f"{self.name} (bus {self.bus.name}, unit {self.unit}) {said}: model not checked yet")
                return False
        else:
            model = ident.decode(raw)
            if model == self.map.model:
                self._identity_fault = None
                self.identity_status = CHECKED
                return True
            said = f"reports model {model!r} at {where}"
        self._wrong_identity(f"{self.name} (bus {self.bus.name}, unit {self.unit}) {said}; {expected}")
        return False

    def _wrong_identity(self, reason: str) -> None:
        """Down with this reason; logged loudly the first time and whenever the answer changes."""
        self.identity_status = reason
        self.health.errors["identity"] += 1
        if self.health.up is False and reason != self._identity_fault:  # already down: health would log it quietly
            log.error("device down", device=self.name, kind="identity", detail=reason)
        self._identity_fault = reason
        self.health.down(reason)

    def _refuse_unidentified(self) -> None:
        """Nothing is written to a device whose model has not been checked since its last contact."""
        if self.map.identity is not None and self.health.up is not True:
            raise DeviceUnavailable(f"{self.name}: model not checked yet ({self.identity_status})")

    # --- shared machinery -------------------------------------------------------------------------

    def _forward(self, event: Event) -> None:
        try:
            self._emit(event)
        except Exception as exc:
            raise EmitError(f"{self.name}: emit failed for {event!r}") from exc

    def _fault(self, kind: str, detail: str) -> None:
        self.health.error(kind, detail)

    def _failed(self, exc: BusError) -> None:
        if isinstance(exc, DeviceException):
            self.health.error(exc.kind, str(exc))
            if exc.busy:
                self._busy_streak += 1
                if self._busy_streak >= self.busy_down_after:
                    self.health.down(f"busy for {self._busy_streak} polls in a row")
                return
            self.health.down(str(exc))
        elif isinstance(exc, (NoResponse, NotConnected)):
            self.health.down(str(exc))
        else:
            self.health.down(repr(exc))

    def _contact(self) -> bool:
        """The device answered a poll. True on first contact and on recovery."""
        self._busy_streak = 0
        recovered = self.health.up is not True
        self.health.ok()
        return recovered

    async def _read(self, blocks: list[Block], retries: int | None) -> dict[Point, Raw]:
        raw: dict[Point, Raw] = {}
        for block in blocks:
            values = await self.bus.read(self.unit, block.table, block.address, block.count,
                                         on_fault=self._fault, retries=retries)
            for p in block.points:
                raw[p] = block.slice(values, p)
        return raw

    async def _write(self, writes: dict[Point, Raw], retries: int | None = None) -> None:
        blocks = plan_blocks(writes, write=True)
        # Where a write takes several requests, the one with a message code goes last, so a sign never
        # shows a new message over old details.
        blocks.sort(key=lambda b: any(p.role == "message_code" for p in b.points))
        for block in blocks:
            values: list[int] = []  # one table's: all bools or all ints
            for p in block.points:
                values.extend(writes[p])
            if len(values) == 1 or self.writes_mode == "multiple":
                try:
                    await self.bus.write(self.unit, block.table, block.address, values, on_fault=self._fault,
                                         retries=retries)
                    continue
                except DeviceException as exc:
                    if exc.code != 1 or len(values) == 1 or self.writes != "auto":
                        raise
                    self.single_detected = True
                    log.warning("device refuses multiple writes (exception 1): writing one output a request "
                                "from now on", device=self.name, bus=self.bus.name, unit=self.unit, detail=str(exc))
            await self._write_singly(block, values, retries)

    async def _write_singly(self, block: Block, values: list[int], retries: int | None) -> None:
        # register by register (coil by coil); a message code is its block's first register: last here
        order = sorted(range(len(values)), key=lambda i: any(
            p.role == "message_code" and p.address == block.address + i for p in block.points))
        for i in order:
            await self.bus.write(self.unit, block.table, block.address + i, values[i:i + 1], on_fault=self._fault,
                                 retries=retries)

    async def _resend(self, retries: int | None) -> None:
        """A device without read-back: every output commanded written again (RESEND_S)."""
        self._resent_at = time.monotonic()
        async with self._output_lock:  # what is commanded once no send is writing: never an older value
            if self._commanded:
                await self._write(dict(self._commanded), retries)

    async def _reassert(self) -> None:
        async with self._output_lock:
            if not self._commanded:
                return
            log.info("re-asserting outputs", device=self.name, points=len(self._commanded))
            await self._write(dict(self._commanded))

    async def _verify(self) -> None:
        """Read back what was commanded; write again whatever differs."""
        commanded = dict(self._commanded)
        if not commanded or not self.read_back:
            return
        raw = await self._read(plan_blocks(commanded), None)
        await self._restore(raw, commanded)

    async def _restore(self, raw: dict[Point, Raw], commanded: dict[Point, Raw]) -> None:
        # A point being written now reads as either value: the write in flight decides it, not a read-back.
        lost = {p: v for p, v in commanded.items() if p in raw and _norm(raw[p]) != _norm(v)
                and self._commanded.get(p) == v and p not in self._writing}
        if lost:
            self.health.error("outputs_lost", f"{len(lost)} output(s) not as commanded (device restarted?): "
                              + ", ".join(p.path for p in lost))
            async with self._output_lock:  # a send made while waiting for it is newer: not written back over
                lost = {p: v for p, v in lost.items() if self._commanded.get(p) == v and p not in self._writing}
                if lost:
                    await self._write(lost)

    async def _after_contact(self, recovered: bool) -> None:
        if recovered:
            self._since_verify = 0
            self._resent_at = time.monotonic()
            await self._reassert()
            return
        if not self.read_back:
            if time.monotonic() - self._resent_at >= RESEND_S:
                await self._resend(None)
            return
        self._since_verify += 1
        if self.verify_every and self._since_verify >= self.verify_every:
            self._since_verify = 0
            await self._verify()

    def _plan(self, command: Command) -> dict[Point, Raw]:
        raise UnsupportedCommand(f"{self.name} ({self.kind.value}) does not take {type(command).__name__}")

    def _unsupported(self, command: Command, why: str) -> UnsupportedCommand:
        return UnsupportedCommand(f"{self.name}: {type(command).__name__}: {why}")


def _norm(values: Sequence[int]) -> list[int]:
    return [int(v) for v in values]


def _seat_spot(p: Point) -> tuple[int, str]:
    """The (seat, spot) of a seat's point: its register map gives it both (registermap.ROLES)."""
    assert p.seat is not None and p.spot is not None, p.path
    return p.seat, p.spot


class ModbusSeatDevice(ModbusDevice):
    """Wager sensors (and optionally amounts) for one or more seats, with accepted and win lights.

    Seats in the map are numbered from 1 on the device; ``first_seat`` is the table seat of the device's
    seat 1 (a one-seat unit at seat 3 has ``first_seat=3``)."""

    kind = Kind.SEAT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        m = self.map
        self._present = {_seat_spot(p): p for p in m.points("wager_present")}
        self._amount = {_seat_spot(p): p for p in m.points("wager_amount")}
        self._accepted = {_seat_spot(p): p for p in m.points("accepted_light")}
        self._win = {p.seat: p for p in m.points("win_light")}
        self._inputs = plan_blocks(m.inputs)
        self._edges: WagerEdges[tuple[int, str]] = WagerEdges()

    def table_seat(self, local: int) -> int:
        return self.first_seat + local - 1

    def _local(self, seat: int) -> int:
        return seat - self.first_seat + 1

    @property
    def wagers(self) -> dict[tuple[int, str], int | None]:
        """Spots reported present (table seat, spot) -> amount."""
        return {(self.table_seat(s), spot): a for (s, spot), a in self._edges.present.items()}

    async def _poll(self, retries: int | None) -> None:
        raw = await self._read(self._inputs, retries)
        recovered = self._contact()
        told = self._edges.present
        polled: dict[tuple[int, str], tuple[bool, int | None]] = {}
        for key, p in self._present.items():
            present = bool(p.decode(raw[p]))
            amount = None
            ap = self._amount.get(key)
            if ap is not None and present:
                amount = self._cents(ap, raw[ap], told.get(key))
            polled[key] = (present, amount)
        for edge in self._edges.update(polled):
            (local, spot) = edge.key
            seat = self.table_seat(local)
            if isinstance(edge, Sensed):
                self._forward(WagerSensed(self.name, seat, spot, edge.amount_cents, present_at_contact=recovered))
            else:
                self._forward(WagerRemoved(self.name, seat, spot))
        await self._after_contact(recovered)

    def _cents(self, p: Point, raw: Raw, previous: int | None) -> int | None:
        value = p.decode(raw)
        assert isinstance(value, int)
        if value < 0:
            self.health.error("bad_value", f"{p.path}: negative wager amount {value}")
            return previous
        return p.to_cents(value)

    def _plan(self, command: Command) -> dict[Point, Raw]:
        if isinstance(command, SetAcceptedLight):
            p = self._accepted.get((self._local(command.seat), command.spot))
            if p is None:
                raise self._unsupported(command, f"no accepted light for seat {command.seat} spot {command.spot!r}")
            return {p: p.encode(command.on)}
        if isinstance(command, SetWinLight):
            p = self._win.get(self._local(command.seat))
            if p is None:
                raise self._unsupported(command, f"no win light for seat {command.seat}")
            return {p: p.encode(command.on)}
        return super()._plan(command)


class ModbusLockoutButton(ModbusDevice):
    """The dealer's lock-out ("no more bets") button and its lamp.

    With a press counter (preferred) every press between two polls is seen; with a momentary input a
    press shorter than the poll interval can be missed. Presses made while the device was down or before
    first contact are not reported: the counter is read as a new baseline, because the lock-out means "now"
    and a press the controller could not hear at the time is stale."""

    kind = Kind.LOCKOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._button = self.map.one("button")
        self._lamp = self.map.one("lamp")
        self._inputs = plan_blocks([self._button])
        bits = 32 if self._button.dtype is DataType.UINT32 else 16
        self._counter = PressCounter(bits=bits) if self._button.mode is ButtonMode.COUNTER else None
        self._edge = RisingEdge()
        self._read_at: float | None = None  # when the last read that answered was sent

    async def _poll(self, retries: int | None) -> None:
        sent = time.monotonic()
        raw = await self._read(self._inputs, retries)
        previous, self._read_at = self._read_at, sent
        recovered = self._contact()
        value = self._button.decode(raw[self._button])
        presses = 0
        restarted = False
        if self._counter is not None:
            if recovered:
                self._counter.resync()
            resets = self._counter.resets
            presses, beyond = self._counter.update(int(value))
            restarted = self._counter.resets != resets
            if beyond:
                self.health.error("presses_dropped", f"{beyond} presses beyond {self._counter.max_presses} "
                                  "in one poll not reported")
        else:
            if recovered:
                self._edge.resync()
            presses = 1 if self._edge.update(bool(value)) else 0
        for _ in range(presses):
            self._forward(LockoutPressed(self.name, None if recovered else previous))
        # a counter that went back to zero is a restart: the lamp is at its power-on value now
        await self._after_contact(recovered or restarted)

    def _plan(self, command: Command) -> dict[Point, Raw]:
        if isinstance(command, SetLockoutLamp):
            return {self._lamp: self._lamp.encode(command.on)}
        return super()._plan(command)


class ModbusMeterSign(ModbusDevice):
    """A meter display: an amount per slot and a message area. Its poll reads back everything it shows
    (which is also how it notices a restart)."""

    kind = Kind.SIGN
    default_poll_interval = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        m = self.map
        self._slots = sorted(m.points("meter_amount"), key=lambda p: p.slot or 0)
        self._by_meter = {p.meter: p for p in self._slots if p.meter is not None}
        self._code = m.one("message_code")
        self._table = m.one("message_table")
        self._seat = m.one("message_seat")
        self._amount = m.one("message_amount")
        self._readback = plan_blocks(m.outputs)

    async def _poll(self, retries: int | None) -> None:
        if not self.read_back:
            # nothing to read: the writes are the poll, up once one is acknowledged; while down, what it last
            # acknowledged is the probe (what was refused since waits for the sender's resend at DeviceUp)
            async with self._output_lock:  # taken once no send is writing: never older than a send
                probe = dict(self._commanded or self._acked)
                if probe:
                    self._resent_at = time.monotonic()
                    await self._write(probe, retries)
            if probe:
                self._contact()
            elif self.health.up is not True and self.map.identity is not None:
                self._contact()  # its identity block just answered (poll_once): up, and the first writes may go
            return
        blocks = self._readback if self.health.up is True else self._readback[:1]
        raw = await self._read(blocks, retries)
        recovered = self._contact()
        if recovered:
            await self._reassert()
        else:
            await self._restore(raw, dict(self._commanded))

    def _plan(self, command: Command) -> dict[Point, Raw]:
        if isinstance(command, ShowAmounts):
            return self._plan_amounts(command)
        if isinstance(command, ShowMessage):
            return self._plan_message(command)
        return super()._plan(command)

    def _plan_amounts(self, command: ShowAmounts) -> dict[Point, Raw]:
        writes: dict[Point, Raw] = {}
        if not self._by_meter and len(command.amounts) > len(self._slots):
            raise InputError("amounts", f"{len(command.amounts)} amounts for a sign with {len(self._slots)} slots")
        for i, (meter_id, cents) in enumerate(command.amounts):
            if self._by_meter:
                p = self._by_meter.get(meter_id)
                if p is None:
                    raise InputError(f"amounts[{i}]", f"sign {self.name} has no slot for meter {meter_id!r}")
            else:
                p = self._slots[i]
            writes[p] = self._encode_cents(p, cents, f"amounts[{i}]")
        writes[self._code] = self._code.encode(0)  # amounts are the sign's normal face: no message
        return writes

    def _plan_message(self, command: ShowMessage) -> dict[Point, Raw]:
        msg = SignMessage(command.message)
        if msg is SignMessage.WIN:
            for field in ("table", "seat", "amount_cents"):
                if getattr(command, field) is None:
                    raise InputError(field, "required for a WIN message")
        try:
            table = self._table.encode(command.table or "")
        except (ValueError, UnicodeEncodeError) as exc:
            raise InputError("table", str(exc)) from None
        seat = command.seat or 0
        try:
            seat_raw = self._seat.encode(seat)
        except (ValueError, TypeError) as exc:
            raise InputError("seat", str(exc)) from None
        return {
            self._table: table,
            self._seat: seat_raw,
            self._amount: self._encode_cents(self._amount, command.amount_cents or 0, "amount_cents"),
            self._code: self._code.encode(self.map.message_codes[msg]),
        }

    @staticmethod
    def _encode_cents(p: Point, cents: int, field: str) -> Raw:
        if isinstance(cents, bool) or not isinstance(cents, int) or cents < 0:
            raise InputError(field, f"{cents!r} is not a whole, non-negative number of cents")
        try:
            return p.encode(p.from_cents(cents))
        except ValueError as exc:
            raise InputError(field, str(exc)) from None


DRIVERS: dict[Kind, type[ModbusDevice]] = {
    Kind.SEAT: ModbusSeatDevice,
    Kind.LOCKOUT: ModbusLockoutButton,
    Kind.SIGN: ModbusMeterSign,
}


def make_device(name: str, bus: ModbusBus, unit: int, register_map: RegisterMap, **options: Any) -> ModbusDevice:
    """The driver for the kind of device the map describes."""
    return DRIVERS[register_map.kind](name, bus, unit, register_map, **options)


__all__ = ["DRIVERS", "RESEND_S", "WRITES", "Block", "DeviceMetrics", "EmitError", "ModbusDevice",
           "ModbusLockoutButton", "ModbusMeterSign", "ModbusSeatDevice", "Raw", "make_device", "plan_blocks"]

"""One Modbus bus: an RS-485 line (RTU) or a TCP connection, shared by every device driver on it.

The bus owns one pymodbus client and one lock (BusLock): a transaction (request, reply, retries) holds
the lock from the first byte to the last, so requests from several drivers never interleave on the line;
writes (lights, lamp, sign) go before the polls waiting for it. On
serial it keeps the inter-frame silence t3.5 between the end of one frame and the start of the next
(Modbus over Serial Line v1.02 §2.5.1.1: 3.5 characters of 11 bits, a fixed 1.75 ms above 19200 baud),
timed from the last byte received, so the drivers' own work overlaps the silence.

Each attempt has a timeout; a missing or bad reply is retried ``retries`` times and every failed attempt is
reported by kind (``timeout``, ``crc``, ``garbage``) to the caller, which counts it against its device.
Exception replies are not retried: they are the device's answer. The connection (serial port or socket)
is opened lazily and, after a failure, again after a capped exponential backoff; pymodbus' own retries and
reconnects are off (see settings.py).

Everything is bounded: one request at a time, at most ``1 + retries`` attempts of ``timeout`` each, a
connection attempt of at most ``timeout``, a fixed-size transaction log.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient
from pymodbus.exceptions import ConnectionException, ModbusException
from pymodbus.framer import FramerType
from pymodbus.pdu import ModbusPDU

from drivers.health import Backoff
from drivers.modbus import frames
from drivers.modbus.core.schedule import Policy
from drivers.modbus.frames import Framing
from drivers.modbus.registermap import Table
from drivers.modbus.scheduler import BusScheduler
from drivers.modbus.settings import BusSettings, SerialBusSettings

log = structlog.get_logger("drivers.modbus")


class _StrayReplyFilter(logging.Filter):
    """pymodbus warns of a reply with no request waiting in words of its own; the bus reports the same bytes as
    `late` or `garbage`, naming the bus and the frame (`_stray`). One line, not two. pymodbus says its last line
    again as "Repeating....": dropped too when that line was one of these."""

    def __init__(self) -> None:
        super().__init__()
        self._dropped_last = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "without a corresponding request" in text:
            self._dropped_last = True
            return False
        if text == "Repeating....":
            return not self._dropped_last
        self._dropped_last = False
        return True


logging.getLogger("pymodbus.logging").addFilter(_StrayReplyFilter())

FaultSink = Callable[[str, str], None]
MAX_RX_BUFFERS = 8  # per attempt; a babbling line past this is garbage anyway
# pymodbus closes a TCP connection after retries+3 unanswered requests; the bus decides that instead.
_NEVER = 1 << 30


class BusError(Exception):
    kind = "bus"


class NotConnected(BusError):
    """The port or connection is not open (and the backoff has not yet allowed another try)."""

    kind = "not_connected"


class NoResponse(BusError):
    """No usable reply after every attempt. ``kinds``: why each attempt failed."""

    kind = "no_response"

    def __init__(self, message: str, kinds: Sequence[str]) -> None:
        super().__init__(message)
        self.kinds = list(kinds)


class DeviceException(BusError):
    """The device answered with a Modbus exception."""

    def __init__(self, unit: int, fc: int, code: int) -> None:
        self.code = code
        self.name = frames.EXCEPTION_NAMES.get(code, f"code_{code}")
        self.kind = f"exception_{self.name}"
        super().__init__(f"unit {unit} answered function {fc} with exception {code} ({self.name})")

    @property
    def busy(self) -> bool:
        return self.code in frames.BUSY_CODES


@dataclass(slots=True)
class Transaction:
    """One request/reply on the line, for tests, the benchmark and metrics."""

    unit: int
    fc: int
    tx_len: int
    rx_len: int
    started: float  # request handed to the transport (time.monotonic)
    ended: float  # last byte of the reply received, or the attempt given up
    outcome: str  # "ok", "exception_<name>" or a fault kind


@dataclass(slots=True)
class _Attempt:
    unit: int
    fc: int
    expect_len: int
    started: float = 0.0
    tx_len: int = 0
    last_rx: float = 0.0
    buffers: list[bytes] = field(default_factory=list)
    frame: bytes = b""
    bad_crc: bool = False
    lost: bool = False  # the connection went away under it
    wrong_unit: int | None = None  # TCP: the unit id of a reply from another unit (pymodbus drops it)
    timeout: asyncio.Timeout | None = None


class _AttemptFailed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def raise_if_cancelled() -> None:
    """pymodbus awaits replies with asyncio.wait_for, which on Python 3.11 drops a cancellation when the reply
    arrives in the same pass of the loop: the task would go on polling after being told to stop. Honour a
    pending cancellation here. (The timeout above cancels with the same mechanism; its expiry is also a
    pending cancellation, and re-raising it lets asyncio.timeout turn it into TimeoutError as usual.)"""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class BusLock:
    """One transaction on the line at a time, first come first served, except that writes (the outputs: accepted
    and win lights, the lock-out lamp, the sign) go before the reads waiting for the line. At the bus's pace
    every poller is always queued, so without this a sign update waits for a whole round of polls."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: dict[bool, collections.deque[asyncio.Future[None]]] = {True: collections.deque(),
                                                                         False: collections.deque()}

    @property
    def locked(self) -> bool:
        return self._held

    @property
    def waiting(self) -> int:
        return len(self._waiting[True]) + len(self._waiting[False])

    @contextlib.asynccontextmanager
    async def hold(self, urgent: bool) -> AsyncIterator[None]:
        if self._held or self._waiting[True] or self._waiting[False]:
            fut = asyncio.get_running_loop().create_future()
            self._waiting[urgent].append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():  # handed the line just as we were cancelled: pass it on
                    self._release()
                else:
                    with contextlib.suppress(ValueError):  # already dropped by a release
                        self._waiting[urgent].remove(fut)
                raise
        self._held = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        for queue in (self._waiting[True], self._waiting[False]):
            while queue:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(None)  # the line passes straight to the next holder
                    return
        self._held = False


class ModbusBus:
    """``async with ModbusBus(settings) as bus: await bus.read(unit, table, address, count)``."""

    def __init__(self, settings: BusSettings, *, name: str | None = None, log_size: int = 1024) -> None:
        self.settings = settings
        self.name = name or settings.describe()
        self.serial = isinstance(settings, SerialBusSettings)
        self.framing = Framing.RTU if self.serial else Framing.SOCKET
        self.silence = settings.silence if isinstance(settings, SerialBusSettings) else 0.0
        self._precise = settings.precise_timing if isinstance(settings, SerialBusSettings) else False
        self._lock = BusLock()
        max_rate = None if isinstance(settings, SerialBusSettings) else settings.max_rate  # serial: its baud rate
        self.scheduler = BusScheduler(Policy(settings.lockout_every, settings.health_interval, max_rate),
                                      transactions=lambda: self.transactions, writes=lambda: self.writes)
        self._client: AsyncModbusSerialClient | AsyncModbusTcpClient | None = None
        self._backoff = Backoff(settings.backoff_initial, settings.backoff_cap)
        self._next_connect_at = 0.0
        self._last_connect_error = ""
        self._quiet_since = 0.0  # when the line last went quiet (monotonic)
        self._attempt: _Attempt | None = None
        self._last_request: tuple[int, int] | None = None
        self._failures_in_a_row = 0
        # The port is reopened only when every unit that ever answered has failed since the last reply: one silent
        # unit polled again and again (its neighbours seldom) is that unit's fault, not the line's, and reopening
        # would fail the neighbour polled meanwhile.
        self._answered: set[int] = set()
        self._silent: set[int] = set()
        self._closed = False
        self.errors: Counter[str] = Counter()  # faults not attributable to one device
        self.transactions = 0
        self.writes = 0  # of the transactions: writes (the rate cap lets a due lock-out go ahead of their time)
        self.connects = 0
        self.log: collections.deque[Transaction] = collections.deque(maxlen=log_size)
        self._loud: set[str] = set()

    # --- lifecycle --------------------------------------------------------------------------------

    async def __aenter__(self) -> ModbusBus:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        async with self._lock.hold(urgent=True):
            self._drop_client()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connected

    def metrics(self) -> dict[str, object]:
        last = self.log[-1] if self.log else None
        return {
            "bus": self.name,
            "connected": self.connected,
            "transactions": self.transactions,
            "connects": self.connects,
            "errors": dict(self.errors),
            "last_transaction_s": (last.ended - last.started) if last else None,
        }

    # --- requests ---------------------------------------------------------------------------------

    async def read(self, unit: int, table: Table, address: int, count: int, *,
                   on_fault: FaultSink | None = None, retries: int | None = None) -> list[int] | list[bool]:
        """``count`` coils/inputs (bools) or registers (ints) from ``address``."""
        if not 1 <= count <= frames.MAX_READ[table]:
            raise ValueError(f"cannot read {count} from {table.value}")
        fc = frames.READ_FC[table]
        reply = await self._transact(unit, fc, count, address, None, on_fault, retries, urgent=False)
        if table.is_bits:
            return [bool(b) for b in reply.bits[:count]]
        return list(reply.registers)

    async def write(self, unit: int, table: Table, address: int, values: Sequence[int] | Sequence[bool], *,
                    on_fault: FaultSink | None = None, retries: int | None = None) -> None:
        """Coils (bools) or holding registers (ints) from ``address``; single or multiple function code
        by count."""
        count = len(values)
        if not table.writable or not 1 <= count <= frames.MAX_WRITE[table]:
            raise ValueError(f"cannot write {count} to {table.value}")
        fc = frames.write_fc(table, count)
        await self._transact(unit, fc, count, address, list(values), on_fault, retries, urgent=True)

    def _call(self, client: AsyncModbusSerialClient | AsyncModbusTcpClient, unit: int, fc: int, address: int,
              count: int, values: list[int] | list[bool] | None) -> Awaitable[ModbusPDU]:
        if fc == frames.READ_COILS:
            return client.read_coils(address, count=count, device_id=unit)
        if fc == frames.READ_DISCRETE_INPUTS:
            return client.read_discrete_inputs(address, count=count, device_id=unit)
        if fc == frames.READ_HOLDING_REGISTERS:
            return client.read_holding_registers(address, count=count, device_id=unit)
        if fc == frames.READ_INPUT_REGISTERS:
            return client.read_input_registers(address, count=count, device_id=unit)
        assert values is not None, "a write carries its values"
        if fc == frames.WRITE_SINGLE_COIL:
            return client.write_coil(address, bool(values[0]), device_id=unit)
        if fc == frames.WRITE_MULTIPLE_COILS:
            return client.write_coils(address, [bool(v) for v in values], device_id=unit)
        if fc == frames.WRITE_SINGLE_REGISTER:
            return client.write_register(address, int(values[0]), device_id=unit)
        return client.write_registers(address, [int(v) for v in values], device_id=unit)

    async def _transact(self, unit: int, fc: int, count: int, address: int, values: list[int] | list[bool] | None,
                        on_fault: FaultSink | None, retries: int | None, *, urgent: bool) -> ModbusPDU:
        attempts = 1 + (self.settings.retries if retries is None else retries)
        expect = frames.response_len(self.framing, fc, count)
        kinds: list[str] = []
        async with self._lock.hold(urgent):
            client = await self._ensure_connected()
            for _ in range(attempts):
                await self._wait_quiet()
                att = _Attempt(unit, fc, expect, started=time.monotonic())
                try:
                    reply = await self._attempt_once(client, att, address, count, values)
                except _AttemptFailed as failed:
                    self._record(att, failed.kind)
                    if failed.kind == "not_connected":
                        raise NotConnected(f"{self.name}: {failed.detail}") from None
                    kinds.append(failed.kind)
                    if on_fault is not None:
                        on_fault(failed.kind, failed.detail)
                    continue
                if reply.isError():
                    exc = DeviceException(unit, fc, reply.exception_code)
                    self._record(att, exc.kind)
                    self._replied(unit)
                    raise exc
                self._record(att, "ok")
                self._replied(unit)
                self._backoff.reset()  # a reply, not a mere connect: a link that drops at once keeps backing off
                # a good reply, but stray bytes arrived with it
                if on_fault is not None and att.frame and (len(att.frame) > expect
                                                           or any(not att.frame.startswith(b) for b in att.buffers)):
                    on_fault("garbage", f"{len(b''.join(att.buffers))} bytes around a {expect}-byte reply")
                return reply
            self._failures_in_a_row += 1
            self._silent.add(unit)
            if (self._failures_in_a_row >= self.settings.reconnect_after and self._silent >= self._answered
                    and self.connected):
                self._warn("reconnect", "no replies on the bus; reopening", failures=self._failures_in_a_row)
                self._drop_client(backoff=True)
                self._failures_in_a_row = 0
                self._silent.clear()
        raise NoResponse(f"unit {unit} function {fc}: no usable reply after {attempts} attempt(s) "
                         f"({', '.join(kinds)})", kinds)

    def _replied(self, unit: int) -> None:
        self._failures_in_a_row = 0
        self._silent.clear()
        self._answered.add(unit)

    async def _attempt_once(self, client: AsyncModbusSerialClient | AsyncModbusTcpClient, att: _Attempt, address: int,
                            count: int, values: list[int] | list[bool] | None) -> ModbusPDU:
        self._attempt = att
        self._last_request = (att.unit, att.fc)
        try:
            async with asyncio.timeout(self.settings.timeout) as timeout:
                att.timeout = timeout
                reply = await self._call(client, att.unit, att.fc, address, count, values)
                raise_if_cancelled()
        except TimeoutError:
            raise self._failure(att, "timed out") from None
        except ConnectionException as exc:
            self._drop_client(backoff=True)
            raise _AttemptFailed("not_connected", str(exc)) from None
        except ModbusException as exc:  # pymodbus gave up on its own (its timeout) or could not decode
            raise self._failure(att, str(exc)) from None
        finally:
            self._attempt = None
            self._quiet_since = max(self._quiet_since, att.last_rx if att.frame else time.monotonic())
        if not self._matches(reply, att, address, count):
            raise _AttemptFailed("garbage", f"reply does not match the request: {reply}")
        return reply

    def _failure(self, att: _Attempt, detail: str) -> _AttemptFailed:
        if att.lost:
            self._drop_client()
            return _AttemptFailed("not_connected", f"unit {att.unit}: connection lost")
        if not att.buffers:
            return _AttemptFailed("timeout", f"unit {att.unit}: no reply ({detail})")
        if att.wrong_unit is not None:
            self._warn("wrong_unit", "reply from another unit id dropped", asked=att.unit, answered=att.wrong_unit,
                       fc=att.fc)
            return _AttemptFailed("wrong_unit", f"unit {att.unit}: the reply came from unit {att.wrong_unit}; "
                                                "dropped")
        kind = ("crc" if att.bad_crc or (self.serial and frames.classify_failed_rx(
            att.buffers, att.unit, att.fc, att.expect_len) == "crc") else "garbage")
        return _AttemptFailed(kind, f"unit {att.unit}: {len(att.buffers[-1])} bytes, no valid reply "
                                    f"({att.buffers[-1][:16].hex()})")

    @staticmethod
    def _matches(reply: ModbusPDU, att: _Attempt, address: int, count: int) -> bool:
        if reply.dev_id != att.unit and reply.dev_id != 0:
            return False
        if reply.isError():
            return (reply.function_code & 0x7F) == att.fc
        if reply.function_code != att.fc:
            return False
        if att.fc in (frames.READ_COILS, frames.READ_DISCRETE_INPUTS):
            return len(reply.bits) >= count
        if att.fc in (frames.READ_HOLDING_REGISTERS, frames.READ_INPUT_REGISTERS):
            return len(reply.registers) == count
        if att.fc in (frames.WRITE_MULTIPLE_COILS, frames.WRITE_MULTIPLE_REGISTERS):
            return reply.address == address and reply.count == count
        return reply.address == address

    def _record(self, att: _Attempt, outcome: str) -> None:
        self.transactions += 1
        if att.fc not in frames.READ_FC.values():
            self.writes += 1
        end = att.last_rx if att.frame else time.monotonic()
        self.log.append(Transaction(att.unit, att.fc, att.tx_len, len(att.frame) if att.frame else 0,
                                    att.started, end, outcome))

    # --- silence ----------------------------------------------------------------------------------

    async def _wait_quiet(self) -> None:
        """Wait until the line has been quiet for t3.5 (the last part, in precise mode, in ``_hold``)."""
        if not self.silence:
            return
        remaining = self._quiet_since + self.silence - time.monotonic()
        if remaining <= 0:
            return
        if self._precise:
            # The loop's timers wake on whole milliseconds (epoll), which would stretch a 1.75 ms silence to
            # 2-3 ms: sleep the whole milliseconds here; _hold sleeps the rest (< 1.2 ms) precisely, once
            # the request is built, so building it overlaps the silence.
            remaining = int((remaining - 0.0002) * 1000) / 1000
        if remaining > 0:
            await asyncio.sleep(remaining)

    def _hold(self) -> None:
        """Right before a request goes out: whatever is left of t3.5 (also after stray bytes)."""
        rest = self._quiet_since + self.silence - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    # --- pymodbus hooks (called from the transport's callbacks, on the loop) ----------------------

    def _trace_packet(self, sending: bool, data: bytes) -> bytes:
        att = self._attempt
        if sending:
            if self.silence:
                self._hold()
            if att is not None:
                att.started = time.monotonic()
                att.tx_len = len(data)
            return data
        now = time.monotonic()
        self._quiet_since = now
        if att is None:
            self._stray(data)
            return data
        att.last_rx = now
        if len(att.buffers) < MAX_RX_BUFFERS:
            att.buffers.append(bytes(data))
        if (not self.serial and att.wrong_unit is None and att.timeout is not None and len(data) > 6
                and data[6] != att.unit):
            # Modbus TCP: one reply a request; one from another unit id is dropped, and no other will come
            att.wrong_unit = data[6]
            att.timeout.reschedule(asyncio.get_running_loop().time())
        if (self.serial and not att.bad_crc and att.timeout is not None
                and frames.bad_crc_reply(data, att.unit, att.fc, att.expect_len)):
            # a complete reply with a wrong CRC: pymodbus will drop it silently; give up now, not at timeout
            att.bad_crc = True
            att.timeout.reschedule(asyncio.get_running_loop().time())
        return data

    def _trace_pdu(self, sending: bool, pdu: ModbusPDU) -> ModbusPDU:
        att = self._attempt
        if not sending and att is not None and att.buffers:
            att.frame = att.buffers[-1]
        return pdu

    def _trace_connect(self, connected: bool) -> None:
        if connected or self._closed:
            return
        self._warn("disconnected", "connection lost")
        now = time.monotonic()
        if self._next_connect_at < now:
            self._next_connect_at = now + self._backoff.delay()
        att = self._attempt
        if att is not None and att.timeout is not None and not att.lost:
            att.lost = True  # no reply can come now: fail the attempt at once
            att.timeout.reschedule(asyncio.get_running_loop().time())

    def _stray(self, data: bytes) -> None:
        """Bytes with no request waiting: a late reply, or noise."""
        last = self._last_request
        kind = "late" if last and len(data) >= 2 and data[0] == last[0] and data[1] & 0x7F == last[1] else "garbage"
        self.errors[kind] += 1
        self._warn(kind, "bytes with no request waiting", length=len(data), head=data[:16].hex())

    def _warn(self, kind: str, event: str, **kw: object) -> None:
        if kind in self._loud:
            log.debug(event, bus=self.name, kind=kind, **kw)
        else:
            self._loud.add(kind)
            log.warning(event, bus=self.name, kind=kind, **kw)

    # --- connection -------------------------------------------------------------------------------

    def _make_client(self) -> AsyncModbusSerialClient | AsyncModbusTcpClient:
        s = self.settings
        client: AsyncModbusSerialClient | AsyncModbusTcpClient
        # pymodbus' timeout also bounds opening the port; ours (asyncio.timeout) fires first on requests.
        if isinstance(s, SerialBusSettings):
            client = AsyncModbusSerialClient(
                s.port, framer=FramerType.RTU, baudrate=s.baud, bytesize=s.bytesize, parity=s.parity,
                stopbits=s.stopbits, name=self.name, reconnect_delay=0, reconnect_delay_max=0,
                timeout=s.timeout * 2, retries=0, trace_packet=self._trace_packet, trace_pdu=self._trace_pdu,
                trace_connect=self._trace_connect)
        else:
            client = AsyncModbusTcpClient(
                s.host, port=s.port, framer=FramerType.SOCKET, name=self.name, reconnect_delay=0,
                reconnect_delay_max=0, timeout=s.timeout * 2, retries=0, trace_packet=self._trace_packet,
                trace_pdu=self._trace_pdu, trace_connect=self._trace_connect)
        client.set_max_no_responses(_NEVER)
        return client

    async def _ensure_connected(self) -> AsyncModbusSerialClient | AsyncModbusTcpClient:
        if self._closed:
            raise NotConnected(f"{self.name}: closed")
        if self._client is not None and self._client.connected:
            return self._client
        now = time.monotonic()
        if now < self._next_connect_at:
            raise NotConnected(f"{self.name}: not connected ({self._last_connect_error}); next try in "
                               f"{self._next_connect_at - now:.2f} s")
        self._drop_client()
        client = self._make_client()
        try:
            async with asyncio.timeout(self.settings.timeout * 2):
                ok = await client.connect()
                raise_if_cancelled()  # pymodbus connects through asyncio.wait_for too (see raise_if_cancelled)
        except TimeoutError:
            ok = False
        if not ok:
            client.close()
            self._last_connect_error = "cannot open" if self.serial else "cannot connect"
            self._next_connect_at = time.monotonic() + self._backoff.delay()
            self._warn("connect", "cannot connect", error=self._last_connect_error)
            raise NotConnected(f"{self.name}: {self._last_connect_error}")
        if self.serial:
            await asyncio.sleep(0)  # let the transport register its reader before the first request
        self._client = client
        self.connects += 1
        self._loud.discard("connect")
        self._loud.discard("disconnected")
        log.info("bus connected", bus=self.name)
        self._quiet_since = time.monotonic()
        return client

    def _drop_client(self, *, backoff: bool = False) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
            if backoff and not self._closed:
                self._next_connect_at = time.monotonic() + self._backoff.delay()


__all__ = ["MAX_RX_BUFFERS", "BusError", "BusLock", "DeviceException", "FaultSink", "ModbusBus", "NoResponse",
           "NotConnected", "Transaction", "raise_if_cancelled"]

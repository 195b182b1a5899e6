"""The line-protocol driver: one serial device (shoe, shuffler, seat sensors, sign, dice entry).

``LineDevice`` implements drivers.device.Device. One connection at a time:

1. open the port, send HELLO (a fresh boot id for this connection), wait for its ACK: the device is up;
2. supervise: PING when none of our frames was acknowledged for ``heartbeat_interval``; the device is
   down when nothing valid came from it for ``heartbeat_timeout``, when a frame of ours goes
   unacknowledged after ``retries`` retransmissions, or when the port goes away;
3. on down: close the port, wait ``Backoff.delay()``, start again at 1.

What the device sends is acknowledged, checked against the previous sequence number (a repeat is
acknowledged again, not raised again) and handed to ``emit``. Faults are counted in
``health.errors`` by kind and logged loudly once (drivers.health); nothing a device sends can raise
out of ``run``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from controller.errors import InputError
from drivers.device import DeviceUnavailable, UnsupportedCommand
from drivers.events import Command, Event
from drivers.health import Backoff, DeviceHealth
from drivers.line.core.frame import MAX_FRAME, OVERHEAD, SEQ_DIGITS, DecodeError, Frame, encode
from drivers.line.core.protocol import (
    ACK,
    CONTROLLER_KIND,
    NAK,
    NAK_UNKNOWN,
    PROTOCOL_VERSION,
    Hello,
    Link,
    Message,
    Nak,
    Ping,
    Role,
    Status,
    to_wire,
)
from drivers.line.port import FrameProtocol, close_port, open_port

log = structlog.get_logger("drivers.line")

_CHAR_BITS = 11  # worst case per character: start + 8 data + parity + stop (+ 2nd stop instead of parity)
_ACK_LEN = OVERHEAD + SEQ_DIGITS + 1 + len(ACK)


@dataclass(frozen=True)
class LineSettings:
    """One serial connection. Times in seconds."""

    port: str
    baud: int = 19200
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    ack_timeout: float = 0.5  # wait for ACK/NAK before retransmitting the same frame
    retries: int = 3  # retransmissions before the device counts as down
    heartbeat_interval: float = 1.0  # PING after this long without an ACK from the device
    heartbeat_timeout: float = 3.5  # down after this long without a valid frame from the device
    backoff_initial: float = 0.1  # reconnect delays: initial, doubling, up to cap (drivers.health.Backoff)
    backoff_cap: float = 5.0
    max_frame: int = MAX_FRAME
    open_timeout: float = 2.0

    def __post_init__(self) -> None:
        def bad(name: str, problem: str) -> InputError:
            return InputError(name, problem)

        if not self.port:
            raise bad("port", "a serial port path is required")
        if self.baud <= 0:
            raise bad("baud", f"must be positive, not {self.baud}")
        if self.bytesize not in (7, 8):
            raise bad("bytesize", "must be 7 or 8 (the protocol is ASCII)")
        if self.parity not in ("N", "E", "O"):
            raise bad("parity", "must be N, E or O")
        if self.stopbits not in (1, 1.5, 2):
            raise bad("stopbits", "must be 1, 1.5 or 2")
        if self.max_frame < 32:
            raise bad("max_frame", f"{self.max_frame} is too small (the protocol's limit is {MAX_FRAME})")
        # A frame and its ACK must fit on the line within the ACK timeout, or every frame is resent.
        line = (self.max_frame + _ACK_LEN) * _CHAR_BITS / self.baud
        if not self.ack_timeout > line:
            raise bad("ack_timeout", f"{self.ack_timeout}s is shorter than a longest frame and its ACK "
                      f"take on the line at {self.baud} baud ({line:.3f}s)")
        if self.retries < 0:
            raise bad("retries", "must be 0 or more")
        if self.heartbeat_interval <= 0:
            raise bad("heartbeat_interval", "must be positive")
        if not self.heartbeat_timeout > self.heartbeat_interval + self.ack_timeout:
            raise bad("heartbeat_timeout", "must exceed heartbeat_interval + ack_timeout, or a healthy "
                      "device's answer to PING arrives after its deadline")
        if not 0 < self.backoff_initial <= self.backoff_cap:
            raise bad("backoff_initial", "need 0 < backoff_initial <= backoff_cap")
        if self.open_timeout <= 0:
            raise bad("open_timeout", "must be positive")

    @property
    def transaction_timeout(self) -> float:
        """Longest one frame of ours can take: first send plus every retransmission."""
        return (self.retries + 1) * self.ack_timeout


class CommandRejected(DeviceUnavailable):
    """The device answered NAK: the command was not applied. ``field`` and ``code`` say why."""

    def __init__(self, device: str, field: str, code: str, frame: bytes) -> None:
        super().__init__(f"{device}: refused {frame!r}: {field} {code}")
        self.device = device
        self.field = field
        self.code = code


class _LinkLost(Exception):
    """The connection is no good any more; the reason goes into DeviceDown."""


class _NoAnswer(Exception):
    """A frame of ours was not acknowledged after all retransmissions."""


class LineDevice:
    """A device on the line protocol (drivers.device.Device).

    ``seats``: number of seats at the table; seat numbers outside 1..seats are refused both ways
    (NAKed when the device sends one, InputError when a command carries one).
    """

    def __init__(self, name: str, settings: LineSettings, *, seats: int | None = None) -> None:
        if seats is not None and seats < 1:
            raise InputError("seats", f"must be 1 or more, not {seats}")
        self.name = name
        self.settings = settings
        self.seats = seats
        self.backoff = Backoff(settings.backoff_initial, settings.backoff_cap)
        self.link = Link(Role.CONTROLLER, device=name, seats=seats, max_frame=settings.max_frame)
        self.health: DeviceHealth | None = None
        self.device_kind: str | None = None  # as announced in the device's HELLO
        self.device_status: Status | None = None  # its last STATUS
        # Not faults: retransmits (ours), duplicates (the device's, after a lost ACK), ignored
        # (device frames before our HELLO was acknowledged; the device repeats them).
        self.stats: Counter[str] = Counter()
        self._emit: Callable[[Event], None] | None = None
        self._proto: FrameProtocol | None = None
        self._connected = False
        self._running = False
        self._tx_lock = asyncio.Lock()
        self._pending: tuple[int, asyncio.Future[object]] | None = None
        self._lost: asyncio.Future[str] | None = None
        self._last_rx = 0.0  # last valid frame from the device
        self._last_acked = 0.0  # last ACK of one of ours

    @property
    def up(self) -> bool:
        return self._connected and self.health is not None and self.health.up is True

    # --- Device ------------------------------------------------------------------------------

    async def run(self, emit: Callable[[Event], None]) -> None:
        if self._running:
            raise RuntimeError(f"{self.name}: already running")
        self._running = True
        self._emit = emit
        self.health = DeviceHealth(self.name, emit)
        try:
            while True:
                try:
                    await self._connection()
                except _LinkLost as e:
                    self.health.down(str(e))
                except OSError as e:  # includes serial.SerialException and TimeoutError
                    self.health.down(f"cannot open {self.settings.port}: {e}")
                except Exception as e:  # a bug here must not take the table's other devices down
                    log.exception("line driver error", device=self.name)
                    self.health.down(f"driver error: {e!r}")
                await asyncio.sleep(self.backoff.delay())
        finally:
            self._running = False

    async def send(self, command: Command) -> None:
        """Deliver ``command``; return once the device has acknowledged it.

        DeviceUnavailable at once if the device is down, or if it never acknowledges;
        CommandRejected (a DeviceUnavailable) if it answers NAK; UnsupportedCommand if it does not
        know the verb; InputError if the command cannot be written (a bug in the caller).
        """
        verb, args = to_wire(command, seats=self.seats)
        encode(0, verb, args, max_frame=self.settings.max_frame)  # too long: raise before anything
        if not self.up:
            raise DeviceUnavailable(f"{self.name}: device is down")
        # Our frame may queue behind another one in flight (stop-and-wait): allow for both.
        limit = 2 * self.settings.transaction_timeout
        try:
            async with asyncio.timeout(limit):
                await self._transact(command)
        except TimeoutError:
            raise DeviceUnavailable(f"{self.name}: no ACK within {limit:.2f}s") from None
        except _NoAnswer as e:
            self._lose(str(e))
            raise DeviceUnavailable(f"{self.name}: {e}") from None
        except _LinkLost as e:
            raise DeviceUnavailable(f"{self.name}: {e}") from None
        except CommandRejected as e:
            if e.field == "verb" and e.code == NAK_UNKNOWN:
                raise UnsupportedCommand(f"{self.name} ({self.device_kind}) has no {verb}") from None
            raise

    # --- connection --------------------------------------------------------------------------

    async def _connection(self) -> None:
        """One connection, from open to loss. Raises _LinkLost or OSError; never returns normally."""
        loop = asyncio.get_running_loop()
        s = self.settings
        proto = FrameProtocol(self._on_item, self._on_port_lost, s.max_frame)
        self._lost = loop.create_future()
        self._proto = proto
        try:
            await open_port(s.port, proto, baud=s.baud, bytesize=s.bytesize, parity=s.parity,
                            stopbits=s.stopbits, timeout=s.open_timeout)
            conn_id = secrets.token_hex(4).upper()  # a new "boot" of ours per connection
            try:
                await self._transact(Hello(PROTOCOL_VERSION, CONTROLLER_KIND, conn_id))
            except _NoAnswer as e:
                raise _LinkLost(f"no answer to HELLO ({e})") from None
            except CommandRejected as e:
                raise _LinkLost(f"device refused HELLO: {e.field} {e.code}") from None
            self._connected = True
            self._last_rx = self._last_acked = loop.time()
            log.debug("line connected", device=self.name, port=s.port, boot_id=conn_id)
            assert self.health is not None
            self.health.ok()
            self.backoff.reset()
            await self._supervise()
        finally:
            self._connected = False
            self._fail_pending("connection closed")
            await close_port(proto)
            self._proto = None

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        s = self.settings
        lost = self._lost
        assert lost is not None
        pinger: asyncio.Task[None] | None = None
        try:
            while True:
                now = loop.time()
                if now - self._last_rx > s.heartbeat_timeout:
                    raise _LinkLost(f"nothing from the device for {s.heartbeat_timeout}s")
                ping_due = self._last_acked + s.heartbeat_interval
                if now >= ping_due and (pinger is None or pinger.done()) and not self._tx_lock.locked():
                    pinger = asyncio.create_task(self._ping())
                    ping_due = now + s.heartbeat_interval
                wake = min(self._last_rx + s.heartbeat_timeout, max(ping_due, now + s.ack_timeout / 4)) - now
                await asyncio.wait({lost}, timeout=max(wake, 0.001))
                if lost.done():
                    raise _LinkLost(lost.result())
        finally:
            if pinger is not None and not pinger.done():
                pinger.cancel()
                await asyncio.gather(pinger, return_exceptions=True)

    async def _ping(self) -> None:
        try:
            await self._transact(Ping())
        except _NoAnswer as e:
            self._lose(f"no answer to PING ({e})")
        except _LinkLost:
            pass  # the supervisor sees it too
        except CommandRejected as e:
            log.warning("device refused PING", device=self.name, field=e.field, code=e.code)

    def _lose(self, reason: str) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(reason)

    def _fail_pending(self, reason: str) -> None:
        if self._pending is not None and not self._pending[1].done():
            self._pending[1].set_exception(_LinkLost(reason))

    def _on_port_lost(self, exc: Exception | None) -> None:
        reason = f"port lost: {exc}" if exc else "port closed"
        self._lose(reason)
        self._fail_pending(reason)

    # --- transmit: stop-and-wait -------------------------------------------------------------

    async def _transact(self, msg: Message) -> None:
        """Send one frame and wait for its ACK, retransmitting it (same sequence number) after each
        ``ack_timeout``. Raises CommandRejected on NAK, _NoAnswer after the last try, _LinkLost."""
        loop = asyncio.get_running_loop()
        s = self.settings
        async with self._tx_lock:
            seq, data = self.link.next_frame(msg)
            for attempt in range(s.retries + 1):
                proto, lost = self._proto, self._lost
                if proto is None or lost is None or lost.done():
                    raise _LinkLost("link down")
                answer: asyncio.Future[object] = loop.create_future()
                self._pending = (seq, answer)
                try:
                    if not proto.write(data):
                        raise _LinkLost("port closed")
                    if attempt:
                        self.stats["retransmits"] += 1
                    await asyncio.wait({answer}, timeout=s.ack_timeout)
                finally:
                    self._pending = None
                if not answer.done():
                    assert self.health is not None
                    self.health.error("ack_timeout", f"no ACK within {s.ack_timeout}s (try {attempt + 1}) for {data!r}")
                    continue
                result = answer.result()  # raises _LinkLost if the port went away
                self._last_acked = loop.time()
                if isinstance(result, Nak):
                    raise CommandRejected(self.name, result.field, result.code, data)
                return
            raise _NoAnswer(f"no ACK for seq {seq:04d} after {s.retries + 1} tries")

    # --- receive -----------------------------------------------------------------------------

    def _on_item(self, item: Frame | DecodeError) -> None:
        try:
            self._receive(item)
        except Exception:  # a bug must not cost the frames behind this one in the same read
            log.exception("line driver: frame handling failed", device=self.name, item=repr(item))

    def _receive(self, item: Frame | DecodeError) -> None:
        health = self.health
        assert health is not None
        if isinstance(item, DecodeError):
            health.error(item.kind, f"{item.detail}: {item.data!r}")
            return
        frame = item
        self._last_rx = asyncio.get_running_loop().time()  # a good checksum is a sign of life
        if frame.verb in (ACK, NAK):
            r = self.link.receive(frame)
            if r.error is not None:
                health.error("bad_arg", f"{r.error} in {frame.raw!r}")
                return
            pending = self._pending
            if pending is not None and r.answer is not None and pending[0] == r.answer.seq and not pending[1].done():
                pending[1].set_result(r.answer)
            else:
                log.debug("stale answer", device=self.name, frame=frame.raw)
            return
        if not self._connected:
            # Until our HELLO is acknowledged nothing else is answered; the device repeats it.
            self.stats["ignored"] += 1
            log.debug("frame before our HELLO was acknowledged, not answered", device=self.name, frame=frame.raw)
            return
        r = self.link.receive(frame)
        if r.duplicate:
            self.stats["duplicates"] += 1
            log.debug("repeat of an applied frame, acknowledged again", device=self.name, frame=frame.raw)
        if r.error is not None:
            health.error("unknown_verb" if r.error.field == "verb" else "bad_arg", f"{r.error} in {frame.raw!r}")
        if r.rebooted:
            # Whatever the device showed is gone: tell the daemon, which re-sends state on DeviceUp.
            health.down(f"device rebooted (boot id {r.previous_boot} -> {self.link.peer_boot})")
            health.ok()
        msg = r.message
        if isinstance(msg, Hello):
            if msg.kind != self.device_kind:
                log.info("device hello", device=self.name, kind=msg.kind, boot_id=msg.boot_id)
            self.device_kind = msg.kind
        elif isinstance(msg, Status):
            if msg.state != "OK" and msg != self.device_status:
                log.warning("device status", device=self.name, state=msg.state, detail=msg.detail)
            self.device_status = msg
        elif msg is not None:
            assert self._emit is not None
            # a controller's end of the link (Role.CONTROLLER) decodes no Ping and no command: an event
            self._emit(msg)  # type: ignore[arg-type]
        if r.reply is not None and self._proto is not None:
            self._proto.write(r.reply)


__all__ = ["CommandRejected", "LineDevice", "LineSettings"]

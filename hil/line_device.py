"""A simulated device on our line protocol, for the hardware-in-the-loop rig.

It opens the device side of a hil.wire.SerialWire and behaves as docs/line-protocol.md asks of a
real device: HELLO with a fresh boot id on power-up, every frame retransmitted (same sequence number)
until acknowledged, one frame of its own in flight at a time, a repeated command acknowledged again
but applied once, STATUS heartbeats when idle, NAK naming the field for what it cannot accept.

The table side of the simulation is a set of async methods (``place_chip``, ``deal``...) that return
once the driver has acknowledged the frame; the device side is what it shows (``lights()``,
``sign()``) and every command it applied (``applied_commands``).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from typing import Any

import structlog

from drivers.events import (
    CardDealt,
    CardsDispensed,
    Command,
    DiceRolled,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShoeJam,
    ShowAmounts,
    ShowMessage,
    ShuffleFault,
    ShufflerCount,
    WagerRemoved,
    WagerSensed,
)
from drivers.line.core.frame import DecodeError, Frame
from drivers.line.core.protocol import (
    ACCEPTLIGHT,
    AMOUNTS,
    LOCKLAMP,
    MESSAGE,
    NAK_UNKNOWN,
    PROTOCOL_VERSION,
    WINLIGHT,
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

log = structlog.get_logger("hil.line_device")

# What each kind of device can show; any other kind (a test bench) takes every command. A device asked
# for something it has not got answers NAK verb UNKNOWN, as the specification says.
KIND_COMMANDS: dict[str, frozenset[str]] = {
    "seat": frozenset({ACCEPTLIGHT, WINLIGHT}),
    "lockout": frozenset({LOCKLAMP}),
    "sign": frozenset({AMOUNTS, MESSAGE}),
    "shuffler": frozenset(),
    "shoe": frozenset(),
    "dice": frozenset(),
}

_COMMAND_VERB = {SetAcceptedLight: ACCEPTLIGHT, SetWinLight: WINLIGHT, SetLockoutLamp: LOCKLAMP,
                 ShowAmounts: AMOUNTS, ShowMessage: MESSAGE}


class LineNak(RuntimeError):
    """The driver refused one of our frames (NAK): ``field`` and ``code`` as it sent them."""

    def __init__(self, field: str, code: str) -> None:
        super().__init__(f"driver refused the frame: {field} {code}")
        self.field = field
        self.code = code


class SimRebooted(RuntimeError):
    """The device rebooted before the frame was acknowledged: it is lost, as on real hardware."""


def _new_boot_id() -> str:
    return secrets.token_hex(4).upper()


class LineDeviceSim:
    """One simulated line-protocol device on ``port`` (a SerialWire's device_port)."""

    def __init__(self, port: str, *, name: str, kind: str, baud: int = 19200, heartbeat_s: float = 1.0,
                 ack_timeout: float = 0.25, ack_wait_s: float = 2.0, seats: int | None = None) -> None:
        if heartbeat_s <= 0 or ack_timeout <= 0 or ack_wait_s <= 0:
            raise ValueError("heartbeat_s, ack_timeout and ack_wait_s must be positive")
        self.port = port
        self.name = name
        self.kind = kind
        self.baud = baud
        self.heartbeat_s = heartbeat_s
        self.ack_timeout = ack_timeout  # retransmit after this long without ACK, indefinitely
        self.ack_wait_s = ack_wait_s  # how long an event method waits for the ACK before TimeoutError
        self.seats = seats
        self.applied_commands: list[Command] = []
        self.errors: Counter[str] = Counter()  # decode errors and NAKs sent, by kind
        self.stats: Counter[str] = Counter()  # retransmits, duplicates, ignored (muted), reboots
        self.boot_id = _new_boot_id()
        self.controller_boot: str | None = None
        self.link = Link(Role.DEVICE, seats=seats)
        self._proto: FrameProtocol | None = None
        self._muted = False
        self._unmuted: asyncio.Event | None = None
        self._queue: asyncio.Queue[tuple[Any, asyncio.Future[int] | None]] | None = None
        self._pending: tuple[int, asyncio.Future[object]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._current: asyncio.Future[int] | None = None  # the caller waiting on the frame in flight
        self._blank()
        to_wire(self._hello())  # a kind the protocol cannot carry is refused here (ArgError)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the port and power up (HELLO)."""
        self._unmuted = asyncio.Event()
        if not self._muted:
            self._unmuted.set()
        await self._open(self.port)
        self._power_up()

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._fail_queued(RuntimeError(f"{self.name}: stopped"))
        if self._proto is not None:
            await close_port(self._proto)
            self._proto = None

    async def move_to(self, port: str) -> None:
        """The same device (same boot, same state) on another port: a USB adapter that came back
        under a new name. Frames in flight are retransmitted there."""
        if self._proto is not None:
            await close_port(self._proto)
        self.port = port
        await self._open(port)

    async def _open(self, port: str) -> None:
        proto = FrameProtocol(self._on_item, self._on_lost)
        await open_port(port, proto, baud=self.baud)
        self._proto = proto

    def _power_up(self) -> None:
        self._queue = asyncio.Queue()
        self._tasks.append(asyncio.create_task(self._transmitter(), name=f"{self.name}-tx"))
        self._tasks.append(asyncio.create_task(self._heartbeat(), name=f"{self.name}-heartbeat"))
        self._queue.put_nowait((self._hello(), None))

    def _hello(self) -> Hello:
        return Hello(PROTOCOL_VERSION, self.kind.upper(), self.boot_id)

    def _blank(self) -> None:
        self._accepted: dict[tuple[int, str], bool] = {}
        self._win: dict[int, bool] = {}
        self._lamp = False
        self._amounts: list[tuple[str, int]] = []
        self._message: dict[str, Any] | None = None

    # --- what the hardware shows -----------------------------------------------------------------

    def lights(self) -> dict[str, Any]:
        seats: dict[int, dict[str, Any]] = {}
        for (seat, spot), on in sorted(self._accepted.items()):
            entry = seats.setdefault(seat, {"accepted": [], "win": False})
            if on:
                entry["accepted"].append(spot)
        for seat, on in sorted(self._win.items()):
            seats.setdefault(seat, {"accepted": [], "win": False})["win"] = on
        return {"accepted": dict(self._accepted), "win": dict(self._win), "lockout_lamp": self._lamp,
                "seats": seats}

    def sign(self) -> dict[str, Any]:
        return {"amounts": list(self._amounts), "message": None if self._message is None else dict(self._message)}

    # --- events the hardware raises ----------------------------------------------------------------

    async def place_chip(self, seat: int, spot: str, amount_cents: int | None = None) -> None:
        await self._raise(WagerSensed(self.name, seat, spot, amount_cents))

    async def remove_chip(self, seat: int, spot: str) -> None:
        await self._raise(WagerRemoved(self.name, seat, spot))

    async def press_lockout(self) -> None:
        await self._raise(LockoutPressed(self.name))

    async def shuffle(self, count: int, deck: str | None = None) -> None:
        await self._raise(ShufflerCount(self.name, count, deck))

    async def shuffle_fault(self, reason: str) -> None:
        await self._raise(ShuffleFault(self.name, reason))

    async def dispense(self, count: int) -> None:
        await self._raise(CardsDispensed(self.name, count))

    async def jam(self) -> None:
        await self._raise(ShoeJam(self.name))

    async def deal(self, cards: list[int]) -> None:
        for card in cards:
            await self._raise(CardDealt(self.name, card))

    async def roll(self, die1: int, die2: int) -> None:
        await self._raise(DiceRolled(self.name, die1, die2))

    async def send_raw(self, verb: str, *args: str) -> None:
        """A frame with any verb and arguments (a device with a firmware bug), sent like an event."""
        await self._post(("raw", verb, tuple(args)))

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait until everything queued has been acknowledged (or refused)."""
        assert self._queue is not None, "not started"
        async with asyncio.timeout(timeout):
            await self._queue.join()

    async def _raise(self, msg: Message) -> None:
        to_wire(msg, seats=self.seats)  # ArgError (a ValueError) now, to the caller, not in the transmitter
        await self._post(msg)

    async def _post(self, item: Any) -> None:
        if self._queue is None:
            raise RuntimeError(f"{self.name}: not started")
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even if nobody waits
        self._queue.put_nowait((item, fut))
        # The frame stays queued (and retransmitted) after a TimeoutError here, as a real device's would.
        async with asyncio.timeout(self.ack_wait_s):
            await asyncio.shield(fut)

    # --- faults ----------------------------------------------------------------------------------

    def reboot(self) -> None:
        """Power-cycle: lights off, sign blank, numbering from 0, unsent frames lost, HELLO with a new
        boot id."""
        for t in self._tasks:
            t.cancel()  # awaited in stop(); the old transmitter must not write again
        self._fail_queued(SimRebooted(f"{self.name} rebooted"))
        self._blank()
        self.boot_id = _new_boot_id()
        self.link = Link(Role.DEVICE, seats=self.seats)
        self.controller_boot = None
        self._pending = None
        self.stats["reboots"] += 1
        if self._proto is not None:
            self._proto.decoder.reset()
        log.info("simulated reboot", device=self.name, boot_id=self.boot_id)
        self._power_up()

    def send_garbage(self, data: bytes) -> None:
        if self._proto is not None:
            self._proto.write(bytes(data))

    def mute(self, on: bool) -> None:
        """Stop answering and heartbeating (frames received meanwhile are ignored), port kept open."""
        self._muted = bool(on)
        if self._unmuted is not None:
            if on:
                self._unmuted.clear()
            else:
                self._unmuted.set()

    # --- transmit --------------------------------------------------------------------------------

    def _fail_queued(self, exc: Exception) -> None:
        """Fail every caller still waiting for an ACK."""
        futs = [self._current]
        self._current = None
        q = self._queue
        while q is not None and not q.empty():
            futs.append(q.get_nowait()[1])
            q.task_done()
        for fut in futs:
            if fut is not None and not fut.done():
                fut.set_exception(exc)

    async def _transmitter(self) -> None:
        """Stop-and-wait: one frame at a time, resent every ack_timeout until ACK or NAK."""
        q, link = self._queue, self.link
        assert q is not None and self._unmuted is not None
        loop = asyncio.get_running_loop()
        while True:
            item, fut = await q.get()
            self._current = fut
            try:
                try:
                    seq, data = link.next_raw(item[1], item[2]) if isinstance(item, tuple) else link.next_frame(item)
                except ValueError as e:
                    if fut is not None and not fut.done():
                        fut.set_exception(e)
                    continue
                attempt = 0
                while True:
                    await self._unmuted.wait()
                    answer: asyncio.Future[object] = loop.create_future()
                    self._pending = (seq, answer)
                    if self._proto is not None:
                        self._proto.write(data)
                    if attempt:
                        self.stats["retransmits"] += 1
                    attempt += 1
                    await asyncio.wait({answer}, timeout=self.ack_timeout)
                    self._pending = None
                    if answer.done() and not answer.cancelled():
                        break
                result = answer.result()
                if fut is not None and not fut.done():
                    if isinstance(result, Nak):
                        fut.set_exception(LineNak(result.field, result.code))
                    else:
                        fut.set_result(seq)
            finally:
                if self._current is fut:
                    self._current = None
                q.task_done()

    async def _heartbeat(self) -> None:
        q = self._queue
        assert q is not None and self._unmuted is not None
        while True:
            await asyncio.sleep(self.heartbeat_s)
            await self._unmuted.wait()
            if q.empty() and self._pending is None:
                q.put_nowait((Status("OK"), None))

    # --- receive ---------------------------------------------------------------------------------

    def _on_lost(self, exc: Exception | None) -> None:
        log.info("simulated device lost its port", device=self.name, port=self.port, error=str(exc) if exc else None)

    def _on_item(self, item: Frame | DecodeError) -> None:
        if self._muted:
            self.stats["ignored"] += 1
            return
        if isinstance(item, DecodeError):
            self.errors[item.kind] += 1
            return
        frame = item
        r = self.link.receive(frame)
        if r.answer is not None or r.reply is None:  # an ACK/NAK of ours, or a bad one
            p = self._pending
            if r.answer is not None and p is not None and p[0] == r.answer.seq and not p[1].done():
                p[1].set_result(r.answer)
            elif r.error is not None:
                self.errors["bad_answer"] += 1
            return
        if r.duplicate:
            self.stats["duplicates"] += 1
        reply = r.reply
        if r.error is not None:
            self.errors["nak_sent"] += 1
            log.debug("refused", device=self.name, frame=frame.raw, error=str(r.error))
        msg = r.message
        if isinstance(msg, Hello):
            # A controller (re)connected: tell it who we are and which boot this is.
            self.controller_boot = msg.boot_id
            if self._queue is not None:
                self._queue.put_nowait((self._hello(), None))
        elif isinstance(msg, (Ping, Status)):
            pass
        elif msg is not None:
            allowed = KIND_COMMANDS.get(self.kind.lower())
            if allowed is not None and _COMMAND_VERB[type(msg)] not in allowed:
                self.errors["nak_sent"] += 1
                reply = self.link.refuse(frame.seq, "verb", NAK_UNKNOWN)
            else:
                self._apply(msg)  # type: ignore[arg-type]
        if reply is not None and self._proto is not None:
            self._proto.write(reply)

    def _apply(self, cmd: Command) -> None:
        self.applied_commands.append(cmd)
        match cmd:
            case SetAcceptedLight(seat, spot, on):
                self._accepted[(seat, spot)] = on
            case SetWinLight(seat, on):
                self._win[seat] = on
            case SetLockoutLamp(on):
                self._lamp = on
            case ShowAmounts(amounts):
                self._amounts = list(amounts)
                self._message = None  # amounts are the sign's normal face
            case ShowMessage(message, table, seat, amount):
                self._message = {"message": message.value, "table": table, "seat": seat, "amount_cents": amount}

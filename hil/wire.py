"""The serial cable of the rig: two PTY pairs joined by a relay that behaves like an RS-485 line.

The driver opens ``driver_port``, the simulated device (or a whole bus of them) opens ``device_port``.
Between them a relay thread:

- paces bytes at the configured baud rate: a frame of n characters written at t arrives at
  ``max(t, line free) + n * char_time``; the line is half-duplex, so one direction waits for the other;
- optionally holds a frame for the end-of-frame silence (3.5 characters, 1.75 ms above 19200 baud,
  Modbus over serial line v1.02 §2.5.1.1) before the device sees it, because a Modbus RTU device only knows
  a request has ended when the line has been quiet that long;
- injects faults: unplug/replug the cable, corrupt, drop or delay the next frames in either direction,
  garbage, and a hook per direction (like pymodbus' trace hooks) that may rewrite or drop a frame.

A "frame" here is what one read from the PTY returns: writers in this rig write each frame in one call.
The relay runs in its own thread with ``select`` timeouts, not on an event loop, because asyncio's timers
round up to a millisecond and a 115200-baud frame is shorter than that.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from drivers.modbus.frames import t35

# Modbus over serial line v1.02 §2.5.1.1: 1 start + 8 data + (parity or 2nd stop) + 1 stop = 11 bits.
CHAR_BITS = 11


def char_time(baud: int, char_bits: int = CHAR_BITS) -> float:
    return char_bits / baud


def frame_silence(baud: int, char_bits: int = CHAR_BITS) -> float:
    """The inter-frame silence t3.5 in seconds (the drivers' own figure: the rig and the bus agree)."""
    return t35(baud, char_bits)


class Direction(StrEnum):
    TO_DEVICE = "to_device"
    TO_DRIVER = "to_driver"


Hook = Callable[[bytes], bytes | None]


@dataclass
class _Faults:
    unplugged: bool = False
    corrupt: dict[Direction, int] = field(default_factory=lambda: {d: 0 for d in Direction})
    drop: dict[Direction, int] = field(default_factory=lambda: {d: 0 for d in Direction})
    delay: dict[Direction, list[float]] = field(default_factory=lambda: {d: [] for d in Direction})
    hooks: dict[Direction, Hook | None] = field(default_factory=lambda: {d: None for d in Direction})


@dataclass
class WireStats:
    frames: dict[Direction, int] = field(default_factory=lambda: {d: 0 for d in Direction})
    bytes: dict[Direction, int] = field(default_factory=lambda: {d: 0 for d in Direction})
    dropped: int = 0
    corrupted: int = 0
    delayed: int = 0
    garbage_bytes: int = 0


def _open_pty() -> tuple[int, int, str]:
    master, slave = os.openpty()
    tty.setraw(slave)  # no echo, no line discipline: bytes pass as they are
    os.set_blocking(master, False)
    return master, slave, os.ttyname(slave)


class SerialWire:
    """A paced, fault-injecting serial line between a driver and a simulated device."""

    def __init__(self, baud: int = 19200, *, paced: bool = True, hold_for_silence: bool = True,
                 char_bits: int = CHAR_BITS, name: str = "wire") -> None:
        if baud <= 0:
            raise ValueError("baud must be positive")
        self.baud = baud
        self.paced = paced
        self.hold_for_silence = hold_for_silence
        self.char_time = char_time(baud, char_bits)
        self.silence = frame_silence(baud, char_bits)
        self.name = name
        self.stats = WireStats()
        self._faults = _Faults()
        self._lock = threading.Lock()
        self._drv_master, self._drv_slave, self.driver_port = _open_pty()
        self._dev_master, self._dev_slave, self.device_port = _open_pty()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._pending: collections.deque[tuple[float, Direction, bytes]] = collections.deque()
        self._line_free_at = 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._relay, name=f"serial-wire-{name}", daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> SerialWire:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for fd in (self._drv_master, self._drv_slave, self._dev_master, self._dev_slave,
                   self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> SerialWire:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- faults ---------------------------------------------------------------------------------

    def unplug(self) -> None:
        """Pull the cable: everything written on either side from now on is lost."""
        with self._lock:
            self._faults.unplugged = True
            self._pending.clear()

    def replug(self) -> None:
        with self._lock:
            self._faults.unplugged = False

    @property
    def unplugged(self) -> bool:
        return self._faults.unplugged

    def corrupt_next(self, n: int = 1, direction: Direction = Direction.TO_DRIVER) -> None:
        """Flip one bit in the last byte (the CRC, for Modbus) of each of the next n frames."""
        with self._lock:
            self._faults.corrupt[direction] += n

    def drop_next(self, n: int = 1, direction: Direction = Direction.TO_DRIVER) -> None:
        with self._lock:
            self._faults.drop[direction] += n

    def delay_next(self, seconds: float, n: int = 1, direction: Direction = Direction.TO_DRIVER) -> None:
        """Hold each of the next n frames for ``seconds`` more than the wire would."""
        with self._lock:
            self._faults.delay[direction].extend([seconds] * n)

    def pending(self) -> dict[str, int]:
        """Frame faults set and not yet applied (the next frames on this wire will take them), by kind."""
        with self._lock:
            f = self._faults
            return {"corrupt": sum(f.corrupt.values()), "drop": sum(f.drop.values()),
                    "delay": sum(len(v) for v in f.delay.values())}

    def inject(self, data: bytes, direction: Direction = Direction.TO_DRIVER) -> None:
        """Put bytes on the line as if from the other end (noise, a babbling device)."""
        with self._lock:
            self.stats.garbage_bytes += len(data)
            self._schedule(time.monotonic(), direction, bytes(data))
        self._wake()

    def set_hook(self, direction: Direction, hook: Hook | None) -> None:
        """``hook(frame)`` returns the frame to deliver (possibly changed) or None to drop it."""
        with self._lock:
            self._faults.hooks[direction] = hook

    # --- relay ----------------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _schedule(self, now: float, direction: Direction, data: bytes) -> None:
        """Queue a frame for delivery at the time the line would have carried it (lock held)."""
        if not self.paced:
            self._pending.append((now, direction, data))
            return
        start = max(now, self._line_free_at)
        done = start + len(data) * self.char_time
        self._line_free_at = done
        deliver = done + (self.silence if self.hold_for_silence and direction is Direction.TO_DEVICE else 0.0)
        if self._pending and deliver < self._pending[-1][0]:
            deliver = self._pending[-1][0]  # keep delivery order = line order
        self._pending.append((deliver, direction, data))

    def _take(self, direction: Direction, data: bytes) -> bytes | None:
        """Apply faults to a frame just written (lock held). None: lost."""
        f = self._faults
        if f.unplugged:
            return None
        hook = f.hooks[direction]
        if hook is not None:
            hooked = hook(data)
            if not hooked:
                return None
            data = hooked
        if f.drop[direction]:
            f.drop[direction] -= 1
            self.stats.dropped += 1
            return None
        if f.corrupt[direction]:
            f.corrupt[direction] -= 1
            self.stats.corrupted += 1
            data = data[:-1] + bytes([data[-1] ^ 0x01])
        return data

    def _relay(self) -> None:
        sources = {self._drv_master: Direction.TO_DEVICE, self._dev_master: Direction.TO_DRIVER}
        targets = {Direction.TO_DEVICE: self._dev_master, Direction.TO_DRIVER: self._drv_master}
        readers = [self._drv_master, self._dev_master, self._wake_r]
        while not self._closed.is_set():
            with self._lock:
                next_at = self._pending[0][0] if self._pending else None
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            try:
                ready, _, _ = select.select(readers, [], [], timeout)
            except (OSError, ValueError):
                return
            now = time.monotonic()
            for fd in ready:
                if fd == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(fd, 4096)
                    continue
                try:
                    data = os.read(fd, 4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return
                direction = sources[fd]
                with self._lock:
                    taken = self._take(direction, data)
                    if taken is None:
                        continue
                    extra = 0.0
                    if self._faults.delay[direction]:
                        extra = self._faults.delay[direction].pop(0)
                        self.stats.delayed += 1
                    self._schedule(now + extra, direction, taken)
            self._deliver_due(targets)

    def _deliver_due(self, targets: dict[Direction, int]) -> None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._pending or self._pending[0][0] > now:
                    return
                _, direction, data = self._pending.popleft()
                if self._faults.unplugged:
                    continue
                self.stats.frames[direction] += 1
                self.stats.bytes[direction] += len(data)
            try:
                os.write(targets[direction], data)
            except BlockingIOError:
                pass  # the reader is gone and the PTY is full: a real line would lose it too
            except OSError:
                return

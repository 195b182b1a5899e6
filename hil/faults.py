"""Fault injection's bookkeeping: the faults of each unit on a shared RTU wire, and every fault set with how many
frames it hit and how many it waits for.

The rig (hil/rig.py) sets a fault by device or bus name; the frames are corrupted, dropped or delayed by the
serial wire (hil/wire.py), by a unit's ``UnitFaults`` on its bus's wire, or by a Modbus TCP bus's proxy
(hil/modbus_devices.py). What is counted here is what ``status`` reports: a lab's evidence (docs/hil.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from hil.wire import Direction, SerialWire

# The Modbus exception codes (Modbus application protocol v1.1b3 §7) a simulated device can answer with.
EXCEPTION_CODES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 11)

# Of each kind of frame fault: (frames it hit, frames it still waits for).
Counts = dict[str, tuple[int, int]]


class UnitFaults:
    """Corrupt or drop the next frames of one unit on a shared RTU wire.

    Installed as the wire's hook in both directions: an RTU frame starts with the unit address, in the
    request and in the reply, so a fault named after one device hits that device's traffic only.
    Runs in the wire's relay thread, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._corrupt: dict[tuple[int, Direction], int] = {}
        self._drop: dict[tuple[int, Direction], int] = {}
        self.corrupted = 0
        self.dropped = 0
        self.applied: dict[tuple[int, str], int] = {}  # (unit, "corrupt"|"drop") -> frames it hit

    def add(self, what: Literal["corrupt", "drop"], unit: int, n: int, direction: Direction) -> None:
        table = self._corrupt if what == "corrupt" else self._drop
        with self._lock:
            table[(unit, direction)] = table.get((unit, direction), 0) + n

    def pending(self) -> dict[str, int]:
        """Frames still to corrupt and to drop, on the bus (of one unit: counts)."""
        with self._lock:
            return {"corrupt": sum(self._corrupt.values()), "drop": sum(self._drop.values())}

    def counts(self, unit: int) -> Counts:
        """(frames hit, frames still to hit) of one unit's faults, by kind, read at one moment."""
        with self._lock:
            return {what: (self.applied.get((unit, what), 0), sum(v for (u, _), v in table.items() if u == unit))
                    for what, table in (("corrupt", self._corrupt), ("drop", self._drop))}

    def hook(self, direction: Direction) -> Callable[[bytes], bytes | None]:
        def apply(frame: bytes) -> bytes | None:
            if not frame:
                return frame
            key = (frame[0], direction)
            with self._lock:
                if self._drop.get(key):
                    self._drop[key] -= 1
                    self.dropped += 1
                    self.applied[(key[0], "drop")] = self.applied.get((key[0], "drop"), 0) + 1
                    return None
                if self._corrupt.get(key):
                    self._corrupt[key] -= 1
                    self.corrupted += 1
                    self.applied[(key[0], "corrupt")] = self.applied.get((key[0], "corrupt"), 0) + 1
                    return frame[:-1] + bytes([frame[-1] ^ 0x01])  # the CRC's last byte: the frame is bad
            return frame

        return apply


def wire_counts(wire: SerialWire) -> Counts:
    """The frame faults set on a serial wire itself (a line, or an RTU bus named as a whole)."""
    s, pending = wire.stats, wire.pending()
    return {"corrupt": (s.corrupted, pending["corrupt"]), "drop": (s.dropped, pending["drop"]),
            "delay": (s.delayed, pending["delay"])}


def link_counts(proxy: Any) -> Counts:
    """The replies dropped and delayed on a Modbus TCP bus (its fault proxy)."""
    pending = proxy.pending()
    return {"drop": (proxy.dropped, pending["drop"]), "delay": (proxy.delayed, pending["delay"])}


class InjectedFaults:
    """Every fault set, by where it applies (a device, or a bus or line when it hits whatever crosses it) and kind:
    frames for corrupt/drop/delay, bytes for garbage, times for the others."""

    def __init__(self) -> None:
        self._set: dict[tuple[str, str], int] = {}

    def add(self, where: str, kind: str, n: int = 1) -> None:
        self._set[(where, kind)] = self._set.get((where, kind), 0) + n

    def at(self, where: str, counts: Counts) -> dict[str, dict[str, int]]:
        """Every kind of fault set at `where`: how many were set, and of frame faults how many hit a frame and how
        many wait for the next frames."""
        out: dict[str, dict[str, int]] = {}
        for (w, kind), n in sorted(self._set.items()):
            if w == where:
                out[kind] = {"set": n}
                if kind in counts:
                    out[kind].update(applied=counts[kind][0], pending=counts[kind][1])
        return out

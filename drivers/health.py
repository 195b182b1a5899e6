"""Backoff and fault reporting shared by every driver.

A device that misbehaves is logged once loudly and then quietly until it recovers (as Home Assistant's
modbus integration does): the first failure of an outage at ERROR, repeats at DEBUG, recovery at INFO.
Reconnects wait a capped exponential backoff with jitter, so a bus full of rebooted devices does not
reconnect in lockstep.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from drivers.events import DeviceDown, DeviceUp, Event

log = structlog.get_logger("drivers")


@dataclass
class Backoff:
    """Capped exponential backoff: initial, initial*factor, ... up to ``cap`` seconds, with up to
    ``jitter`` (a fraction) added at random. ``reset()`` after a success."""

    initial: float = 0.1
    cap: float = 5.0
    factor: float = 2.0
    jitter: float = 0.1
    _next: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.cap):
            raise ValueError("backoff: need 0 < initial <= cap")
        self._next = self.initial

    def delay(self) -> float:
        """The next wait, and advance."""
        base = self._next
        self._next = min(self.cap, self._next * self.factor)
        # secrets: no shared PRNG state across drivers; the jitter need not be reproducible.
        return base * (1.0 + self.jitter * secrets.randbelow(1001) / 1000.0)

    def reset(self) -> None:
        self._next = self.initial

    @property
    def bound(self) -> float:
        """Longest single wait this backoff can produce."""
        return self.cap * (1.0 + self.jitter)


class DeviceHealth:
    """Up/down state of one device, error counters by kind, and the loud-once log.

    ``emit`` receives DeviceDown / DeviceUp exactly once per transition.
    """

    def __init__(self, device: str, emit: Callable[[Event], None]) -> None:
        self.device = device
        self._emit = emit
        self.up: bool | None = None  # None: never heard from
        self.errors: Counter[str] = Counter()
        self._loud_logged: set[str] = set()

    def ok(self) -> None:
        if self.up is not True:
            if self.up is False:
                log.info("device recovered", device=self.device)
            self.up = True
            self._loud_logged.clear()
            self._emit(DeviceUp(self.device))

    def error(self, kind: str, detail: str) -> None:
        """Count a fault that does not by itself mean the device is gone (CRC error, garbage,
        exception response). Logged loudly the first time per kind per outage/recovery cycle."""
        self.errors[kind] += 1
        self._log(kind, "device fault", detail)

    def down(self, reason: str) -> None:
        self.errors["down"] += 1
        if self.up is not False:
            self.up = False
            self._emit(DeviceDown(self.device, reason))
        self._log("down", "device down", reason)

    def _log(self, kind: str, event: str, detail: str) -> None:
        if kind in self._loud_logged:
            log.debug(event, device=self.device, kind=kind, detail=detail, count=self.errors[kind])
        else:
            self._loud_logged.add(kind)
            log.error(event, device=self.device, kind=kind, detail=detail)


__all__ = ["Backoff", "DeviceHealth"]

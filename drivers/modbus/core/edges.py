"""Polled states -> events, as pure functions of what was read: no I/O, no clocks.

Only successful polls reach these: a poll that failed (timeout, CRC error, exception) changes nothing, so a
fault never turns into a phantom wager, and a chip placed and removed while a device was unreachable is
never invented. What is compared is the last state the controller was told about, so a chip that is still
there after an outage (or at first contact) is reported once.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Sensed(Generic[K]):
    key: K
    amount_cents: int | None


@dataclass(frozen=True, slots=True)
class Removed(Generic[K]):
    key: K


class WagerEdges(Generic[K]):
    """Per wager spot: absent, or present with an amount (None where the device cannot read it).

    Events strictly alternate per spot, starting with Sensed: Sensed on a chip arriving, Removed on it
    leaving. A changed amount under a chip that stayed is Removed then Sensed with the new amount, so the
    latest Sensed always carries the amount on the spot and a consumer needs no third kind of event.
    """

    def __init__(self) -> None:
        self._told: dict[K, int | None] = {}  # spots reported present, with the amount reported

    def update(self, polled: Mapping[K, tuple[bool, int | None]]) -> list[Sensed[K] | Removed[K]]:
        out: list[Sensed[K] | Removed[K]] = []
        for key, (present, amount) in polled.items():
            if key in self._told:
                if not present:
                    del self._told[key]
                    out.append(Removed(key))
                elif amount != self._told[key]:
                    out.append(Removed(key))
                    out.append(Sensed(key, amount))
                    self._told[key] = amount
            elif present:
                self._told[key] = amount
                out.append(Sensed(key, amount))
        return out

    @property
    def present(self) -> dict[K, int | None]:
        return dict(self._told)


class PressCounter:
    """A press counter register the device increments on every press; the controller compares, never
    clears (a clear written between a read and the next press would lose that press).

    The first reading (and the first after an outage, see ``resync``) is the baseline. A reading below the
    last one is either a wrap (a small step modulo the counter's range) or a reset at power-on, after which
    the device has counted ``value`` presses from zero. At most ``max_presses`` are reported per reading.
    """

    def __init__(self, bits: int = 16, max_presses: int = 8, max_step: int = 1000) -> None:
        self.modulus = 1 << bits
        self.max_presses = max_presses
        self.max_step = max_step
        self._last: int | None = None
        self.resets = 0

    def resync(self) -> None:
        self._last = None

    def update(self, value: int) -> tuple[int, int]:
        """(presses to report, presses beyond ``max_presses`` not reported)."""
        if not 0 <= value < self.modulus:
            raise ValueError(f"counter value {value} out of range")
        last, self._last = self._last, value
        if last is None:
            return 0, 0
        step = (value - last) % self.modulus
        if value < last and step > self.max_step:
            self.resets += 1  # the device restarted and counts from zero again
            step = value
        return min(step, self.max_presses), max(0, step - self.max_presses)


class RisingEdge:
    """A momentary input: one press per off->on seen by a poll (a press shorter than the poll interval
    can be missed; that is why a counter is preferred)."""

    def __init__(self) -> None:
        self._last: bool | None = None

    def resync(self) -> None:
        self._last = None

    def update(self, on: bool) -> bool:
        last, self._last = self._last, on
        return last is False and on


__all__ = ["PressCounter", "Removed", "RisingEdge", "Sensed", "WagerEdges"]

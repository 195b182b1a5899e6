"""The interface every device driver offers, whatever its transport.

A driver runs as one task in the daemon's TaskGroup: ``run(emit)`` polls or listens forever, reconnects
with backoff, and hands each event to ``emit`` (a plain callable, usually ``queue.put_nowait``). It returns
only when cancelled; device faults never escape it. ``send(command)`` delivers a command, returning once the
device has acknowledged it, or raising ``DeviceUnavailable`` at once if the device is down (the caller
decides what an undelivered command means; nothing is queued behind the caller's back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from drivers.events import Command, Event


class DeviceUnavailable(RuntimeError):
    """A command could not be delivered: the device is down or did not acknowledge in time."""


class UnsupportedCommand(TypeError):
    """This kind of device has no such command (a sign has no win light)."""


@runtime_checkable
class Device(Protocol):
    name: str

    async def run(self, emit: Callable[[Event], None]) -> None: ...

    async def send(self, command: Command) -> None: ...


__all__ = ["Device", "DeviceUnavailable", "UnsupportedCommand"]

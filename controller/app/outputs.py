"""What the table's devices should show, and one sender per device that makes them show it.

The daemon never waits on a device: it records the desired state of each output (a seat's accepted light,
the lock-out lamp, the sign) and wakes the device's sender. The sender delivers the latest desired state,
one command at a time, with a timeout; when the device comes back after an outage (or a reboot that reset
its outputs to power-on values) every output is delivered again. A slow or dead device therefore delays
nothing but itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import structlog

from drivers.device import Device, DeviceUnavailable, UnsupportedCommand
from drivers.events import Command

log = structlog.get_logger("outputs")

SEND_TIMEOUT_S = 5.0


class DeviceOutputs:
    """`hold_until_up`: send nothing until the device has answered (the shell sets `up`), then everything at once: a
    device read back comes up without a write, and a write before that is written again at its DeviceUp anyway."""

    def __init__(self, device: Device, *, hold_until_up: bool = False) -> None:
        self.device = device
        self.hold_until_up = hold_until_up
        self._desired: dict[Hashable, Command] = {}
        self._dirty: list[Hashable] = []
        self._wake = asyncio.Event()
        self.up = False

    def want(self, key: Hashable, command: Command) -> None:
        """Make output `key` show `command` (the latest wins)."""
        if self._desired.get(key) == command and key not in self._dirty:
            return
        self._desired[key] = command
        if key not in self._dirty:
            self._dirty.append(key)
        self._wake.set()

    def desired(self) -> list[Command]:
        """What every output should show now (delivered or not yet)."""
        return list(self._desired.values())

    def resend_all(self) -> None:
        """After a recovery: every output again, in the order they were first set."""
        self._dirty = list(self._desired)
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.hold_until_up and not self.up:
                continue
            while len(self._dirty) > 1 and callable(getattr(self.device, "send_many", None)):
                if not await self._send_many():
                    break
            while self._dirty:
                key = self._dirty[0]
                command = self._desired[key]
                try:
                    async with asyncio.timeout(SEND_TIMEOUT_S):
                        await self.device.send(command)
                except UnsupportedCommand:
                    log.error("device cannot do this", device=self.device.name, command=repr(command))
                except (DeviceUnavailable, TimeoutError) as e:
                    # the device is down: everything is sent again when it is back (resend_all)
                    log.debug("command not delivered", device=self.device.name, command=repr(command), error=str(e))
                    break
                if self._dirty and self._dirty[0] == key and self._desired[key] == command:
                    self._dirty.pop(0)


    async def _send_many(self) -> bool:
        """Every output due in one call (a Modbus device writes consecutive outputs in one request). False: the
        device is down."""
        due = [(key, self._desired[key]) for key in self._dirty]
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await self.device.send_many([command for _, command in due])  # type: ignore[attr-defined]
        except UnsupportedCommand as e:
            log.error("device cannot do this", device=self.device.name, command=str(e))
        except (DeviceUnavailable, TimeoutError) as e:
            log.debug("commands not delivered", device=self.device.name, commands=len(due), error=str(e))
            return False
        for key, command in due:  # what changed meanwhile stays due
            if self._desired[key] == command and key in self._dirty:
                self._dirty.remove(key)
        return True


__all__ = ["SEND_TIMEOUT_S", "DeviceOutputs"]

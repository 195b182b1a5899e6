"""sd_notify(3) in a few lines: tell systemd we are ready, alive (watchdog), stopping, or what we do.

With ``Type=notify`` systemd passes a Unix datagram socket in ``$NOTIFY_SOCKET`` (a path, or an abstract
name starting with "@"). Without it (run by hand, in tests) every call does nothing. A failed send is
reported to the caller's log, never raised: the daemon must not stop because its supervisor is busy.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

_TIMEOUT_S = 1.0


class Notifier:
    def __init__(self, address: str | None = None) -> None:
        addr = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        if addr and addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace
        self.address = addr or None
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send ``KEY=value`` lines; True when delivered (or nothing to deliver to)."""
        if self.address is None:
            return True
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.settimeout(_TIMEOUT_S)
        try:
            self._sock.sendto("\n".join(fields).encode(), self.address)
            return True
        except OSError:
            return False

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Half of ``$WATCHDOG_USEC`` in seconds (systemd's advice), if the watchdog is on for this process."""
    if env is None:
        env = os.environ
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2e6 if value > 0 else None


__all__ = ["Notifier", "watchdog_interval"]

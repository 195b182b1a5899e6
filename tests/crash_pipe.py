"""The pipe to a crash-test child process: read its lines without sleeping, kill it with SIGKILL.

Shared by the ledger and meter crash tests.
"""

from __future__ import annotations

import os
import signal
import time


def read_lines(proc, sel, buf: bytearray, lines: list[str], *, counted: tuple[str, ...], until, deadline: float,
               to_eof: bool, where: str) -> bool:
    """Read lines until `until` lines starting with one of `counted` have been read (a str: until that
    exact line has been read; None: no such limit), the deadline passes, or EOF (returns True). With
    to_eof, passing the deadline is a hang and fails the test."""
    while True:
        if isinstance(until, str):
            if until in lines:
                return False
        elif until is not None and sum(1 for ln in lines if ln.startswith(counted)) >= until:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            assert not to_eof, f"{where}: child hung (lines so far: {lines[-5:]})"
            return False
        if not sel.select(left):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return True
        buf.extend(chunk)
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            lines.append(line.decode())


def kill(proc) -> bool:
    """SIGKILL the child if it is still running; whether it was."""
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    return True

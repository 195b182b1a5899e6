"""The pipe to a crash-test child process: read its lines without sleeping, kill it with SIGKILL.

Shared by the ledger and meter crash tests.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass


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


@dataclass(frozen=True)
class Moments:
    """When a cycle kills its child: while it opens (share `opening`, then up to `opening_s` more), at a
    random moment up to `anytime_s` after the start (until `anytime`), right after the k-th counted line
    (0 <= k <= `counted`, until 0.95), or never (the rest)."""

    opening: float
    opening_s: float
    anytime_s: float
    counted: int
    anytime: float = 0.25


def kill_cycle(proc: subprocess.Popen, stdin: bytes, rng: random.Random, moments: Moments, *,
               counted: tuple[str, ...], where: str, hang: float) -> tuple[list[str], bool]:
    """Run one crash cycle on a started child: give it `stdin`, kill it at a moment drawn
    from `moments`, read everything it wrote before the kill, and check that it either finished (DONE) or
    was killed. Returns its lines and whether SIGKILL ended it."""
    lines: list[str] = []
    buf = bytearray()

    def read(until, deadline: float, to_eof: bool = False) -> bool:
        return read_lines(proc, sel, buf, lines, counted=counted, until=until, deadline=deadline, to_eof=to_eof,
                          where=where)

    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
        mode = rng.random()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if mode < moments.opening:
            # kill while it opens: verifying, replaying, writing its self-check entry or a checkpoint
            if not read("OPENING", time.monotonic() + hang):
                read(None, time.monotonic() + rng.uniform(0, moments.opening_s))
            killed = kill(proc)
        elif mode < moments.anytime:
            read(None, time.monotonic() + rng.uniform(0, moments.anytime_s))  # a random moment after the start
            killed = kill(proc)
        elif mode < 0.95:
            # right after the k-th counted line (the writer is busy with the others)
            eof = read(rng.randint(0, moments.counted), time.monotonic() + hang)
            killed = False if eof else kill(proc)
        else:
            read(None, time.monotonic() + hang, to_eof=True)
            killed = False
        # what was written before the kill is still in the pipe: read to the end
        read(None, time.monotonic() + hang, to_eof=True)
        sel.close()
        rc = proc.wait(timeout=hang)
        err = proc.stderr.read().decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # 0: it finished before the kill (or was not killed); anything else is a failure of the child
    assert rc in (0, -signal.SIGKILL), f"{where}: child exited {rc}:\n{err}"
    if rc != -signal.SIGKILL and not killed:
        assert lines and lines[-1] == "DONE", f"{where}: child ended without DONE:\n{err}"
    return lines, rc == -signal.SIGKILL

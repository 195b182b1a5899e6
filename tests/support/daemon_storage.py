"""The table daemon started on a disk with no room: what tests/system/test_daemon_storage.py runs.

As a module: `ready_once` starts `progressived --config FILE` and stops it once it said READY=1 (a journal made
the way the daemon makes it), `start` runs it to its end, `head` reads the journal's last entry.

As a script, inside a private mount namespace (`unshare --mount`), on a tmpfs of its own:

    python tests/support/daemon_storage.py MOUNT CONFIG FREE_BYTES [--fresh]

mounts a small tmpfs on MOUNT (the state directory of CONFIG is in it), starts the daemon once on it (unless
--fresh), fills the tmpfs to the last byte and gives FREE_BYTES back, starts the daemon again, then makes room
and verifies the journal. Prints one JSON object: the second start's exit status and standard error, the
journal's head before and after, `progressivectl audit verify`'s exit status. The namespace ends with the
process, and the tmpfs with it: nothing is left mounted, whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
TMPFS_SIZE = "512k"


def state_dir(config: Path) -> Path:
    return Path(tomllib.loads(config.read_text(encoding="utf-8"))["state_dir"])


def start(config: Path, control: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`progressived --config FILE` run to its end (it is expected to end by itself)."""
    return subprocess.run([str(BIN / "progressived"), "--config", str(config), "--socket", str(control)],
                          capture_output=True, text=True, timeout=READY_TIMEOUT + STOP_TIMEOUT, check=False, **kwargs)


def ready_once(config: Path, control: Path) -> None:
    """Start the daemon, wait for READY=1 on its notify socket (the journal made, the meters defined), stop it
    (SIGTERM) and check its clean exit."""
    with tempfile.TemporaryDirectory(prefix="notify-") as d:
        path = os.path.join(d, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            sock.settimeout(READY_TIMEOUT)
            proc = subprocess.Popen([str(BIN / "progressived"), "--config", str(config), "--socket", str(control)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "NOTIFY_SOCKET": path})
            try:
                while True:
                    try:
                        fields = sock.recv(4096).decode()
                    except TimeoutError:
                        raise AssertionError(f"no READY=1 within {READY_TIMEOUT:g} s") from None
                    if "READY=1" in fields.splitlines():
                        break
            finally:
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=STOP_TIMEOUT)
    if proc.returncode != 0:
        raise AssertionError(f"the first start did not stop cleanly ({proc.returncode}): {err[-2000:]}")


def head(state: Path) -> int:
    """The sequence number of the journal's last entry (read-only, its WAL included)."""
    conn = sqlite3.connect(f"file:{state / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    finally:
        conn.close()


def head_of_a_copy(state: Path) -> int:
    """The journal's last entry, its WAL included, read from a copy outside the small disk: reading it in place
    would make its WAL and shared-memory index there (room the next start does not have), and reading the file
    alone would miss what a WAL not yet checkpointed holds."""
    with tempfile.TemporaryDirectory(prefix="head-") as d:
        for name in ("ledger.sqlite3", "ledger.sqlite3-wal"):
            if (state / name).exists():
                shutil.copyfile(state / name, Path(d) / name)
        return head(Path(d))


def fill(mount: Path, free: int) -> Path:
    """Write to a file on `mount` until the file system refuses (ENOSPC), then give `free` bytes back."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"\0" * 4096
    try:
        while True:
            os.write(fd, block)
    except OSError as e:
        if e.errno != 28:  # ENOSPC: full
            raise
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - free))
    return filler


def _main(mount: Path, config: Path, free: int, fresh: bool) -> dict[str, Any]:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "tmpfs", str(mount)], check=True,
                   capture_output=True)
    state = state_dir(config)
    control = Path(tempfile.mkdtemp(prefix="ctl-")) / "control.sock"
    before = None
    if not fresh:
        ready_once(config, control)
        before = head_of_a_copy(state)
    filler = fill(mount, free)
    try:
        second = start(config, control)
    except subprocess.TimeoutExpired as e:  # it started on a disk thought full
        return {"status": None, "stderr": str(e.stderr), "before": before, "after": None, "audit": None}
    filler.unlink()  # room again
    after = head(state) if (state / "ledger.sqlite3").exists() else None
    audit = subprocess.run([str(BIN / "progressivectl"), "audit", "verify", "--state", str(state)],
                           capture_output=True, text=True, timeout=60, check=False) if after is not None else None
    return {"status": second.returncode, "stderr": second.stderr, "before": before, "after": after,
            "audit": None if audit is None else audit.returncode}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(_main(Path(args[0]), Path(args[1]), int(args[2]), "--fresh" in args[3:])))

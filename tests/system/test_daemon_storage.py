"""A table daemon started where its journal cannot be written: one line on standard error and status 74 (the
storage error systemd restarts it after), never a traceback, never "damaged"; nothing of the journal lost.

The disk is full for real: a tmpfs of 512 KiB in a private mount namespace (`unshare --mount` as root, or
`unshare --user --map-root-user --mount` where user namespaces are allowed), filled to its last byte by a file;
the test is skipped where neither can mount. A file-size limit (RLIMIT_FSIZE, no privilege needed) refuses
the same writes everywhere else.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from daemon_storage import head, head_of_a_copy, ready_once, start
from tableproc import ROOT, TABLE, dump_toml, free_port

HELPER = Path(__file__).resolve().parents[1] / "support" / "daemon_storage.py"


def table_file(tmp_path: Path, state: Path) -> Path:
    """The example table with its journal in `state`, its files absolute and its serial ports absent (the
    devices are down: the journal is what is tested)."""
    doc = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    doc["state_dir"] = str(state)
    for name, dev in doc["devices"].items():
        if "register_map" in dev and dev["register_map"].endswith(".toml"):  # a path, not a shipped map's name
            dev["register_map"] = str((TABLE.parent / dev["register_map"]).resolve())
        if "port" in dev:
            dev["port"] = str(tmp_path / f"no-tty-{name}")
    for bus in doc["buses"].values():
        bus["port"] = str(tmp_path / "no-tty-bus")
    doc["metrics"] = {"listen": f"127.0.0.1:{free_port()}"}
    path = tmp_path / "table.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def namespace_command() -> list[str]:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("unshare(1) and mount(8) are needed to make a full disk")
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private", "--"]
    return ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--"]


def on_a_full_disk(tmp_path: Path, free: int, *, fresh: bool = False) -> dict:
    mount = tmp_path / "disk"
    mount.mkdir()
    config = table_file(tmp_path, mount / "state")
    probe = subprocess.run([*namespace_command(), "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    args = [str(mount), str(config), str(free)] + (["--fresh"] if fresh else [])
    r = subprocess.run([*namespace_command(), sys.executable, str(HELPER), *args], capture_output=True, text=True,
                       timeout=180, check=False, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.splitlines()[-1])


def one_storage_line(stderr: str, state: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("progressived: storage error, exiting to start again from the journal"), line
    assert f"{state}/ledger.sqlite3: the journal cannot be written at start-up" in line
    assert "Traceback" not in stderr and "damaged" not in line
    return line


@pytest.mark.parametrize(("free", "sqlite_says"), [
    (0, "SQLITE_IOERR_SHMSIZE"),  # not a byte: not even the shared-memory index of the journal can grow
    (32 * 1024, "SQLITE_FULL"),  # room for the index, none for the power-up self-check entry
])
def test_a_restart_on_a_full_disk_exits_74_with_one_line(tmp_path, free, sqlite_says):
    out = on_a_full_disk(tmp_path, free)
    assert out["status"] == 74, out
    if free and out["stderr"].startswith("ledger: fatal storage error"):
        # The power-up self-check found room where the first start left its WAL's pages behind (how many depends
        # on what that start journaled before its stop); the start's next entry, the fault watch's, did not:
        # the writer's own one line, nothing of the entry acknowledged.
        # The start's own entries (its self-check, its fault watch, ...) as far as that room went: never a wager's.
        lines = [ln for ln in out["stderr"].splitlines() if ln.strip()]
        assert len(lines) == 1 and "database or disk is full" in lines[0], out["stderr"]
        assert out["before"] is not None and out["before"] <= out["after"], out
    else:
        line = one_storage_line(out["stderr"], str(tmp_path / "disk" / "state"))
        # Not a byte free: the shared-memory index cannot grow (SHMSIZE), unless the first start left it as large
        # as this start needs, and the first write is then refused as the journal's own (FULL): one in six runs
        assert sqlite_says in line or (free == 0 and "SQLITE_FULL" in line), line
        # Nothing written, nothing lost: the journal as the first start left it.
        assert out["before"] is not None and out["after"] == out["before"]
    assert out["audit"] == 0  # and it verifies


def test_a_first_start_on_a_full_disk_exits_74_with_one_line(tmp_path):
    out = on_a_full_disk(tmp_path, 0, fresh=True)
    assert out["status"] == 74, out
    one_storage_line(out["stderr"], str(tmp_path / "disk" / "state"))


def test_a_start_that_cannot_grow_its_files_exits_74(tmp_path):
    """No privilege needed: a file-size limit refuses the journal's writes (EFBIG) as a full disk refuses them."""
    state = tmp_path / "state"
    config = table_file(tmp_path, state)
    control = tmp_path / "control.sock"
    ready_once(config, control)
    before = head_of_a_copy(state)
    # at most the journal's size, and under the 32 KiB of its shared-memory index (the first start's devices are all
    # down, each fault journaled: the journal may be larger than that)
    size = min((state / "ledger.sqlite3").stat().st_size, 24 * 1024)

    def small_files() -> None:  # in the child, before exec: no file it writes may grow past the journal's size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    r = start(config, control, preexec_fn=small_files)
    assert r.returncode == 74, r.stderr[-4000:]
    one_storage_line(r.stderr, str(state))
    assert head(state) == before

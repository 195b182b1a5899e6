"""The README's two opening commands, with every argument the README gives them, on a fresh checkout: a copy
of the tree's tracked files with no virtual environment, set up by the commands themselves as a newcomer's
first run would be."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _fresh_checkout(dest: Path) -> Path:
    """The tree as a clone of it would hold it (tracked and new files, nothing ignored), without .venv."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


# One worker runs them all (./test: --dist loadgroup), so the fresh checkout and its venv are made once.
pytestmark = pytest.mark.xdist_group("fresh-checkout")


@pytest.fixture(scope="module")
def checkout(request, tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    _made_by_one_worker(request, tmp_path_factory)
    return _fresh_checkout(tmp_path_factory.mktemp("clone"))


def _made_by_one_worker(request, tmp_path_factory) -> None:
    """With the group split each worker would make a checkout and install it (a minute of CPU for nothing): it
    happened silently once, when pytest changed its node ids under pytest-xdist (pytest-xdist#1386)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or not getattr(request.config.option, "loadgroup", False):
        return
    shared = tmp_path_factory.getbasetemp().parent  # one directory a run, each worker's below it
    (shared / f"fresh-checkout.{worker}").touch()
    made = sorted(p.name.removeprefix("fresh-checkout.") for p in shared.glob("fresh-checkout.*"))
    assert made == [worker], f"--dist loadgroup split the group 'fresh-checkout' over workers {made}"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PYTHON"] = getattr(sys, "_base_executable", sys.executable)  # the venv is made fresh from it
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_readme_opens_with_the_two_commands():
    first = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["./run", "./test"]
    # every argument the README documents for them is exercised below
    assert "`./run --rounds 3`" in README and "`./run --no-dealer`" in README
    assert "`./run --config FILE`" in README and "`./test ARGS...`" in README


def _notified(sock: socket.socket, timeout: float) -> str:
    sock.settimeout(timeout)
    return sock.recv(4096).decode()


def _run_until_ready(checkout: Path, tmp: Path, args: list[str]) -> tuple[subprocess.Popen, str]:
    """Starts ./run ARGS as systemd would (NOTIFY_SOCKET) and waits for READY=1: the daemon is serving."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp / "notify"))
    p = subprocess.Popen(["./run", *args], cwd=checkout, env={**_env(), "NOTIFY_SOCKET": str(tmp / "notify")},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for _ in range(240):  # the first start may still be installing
            try:
                return p, _notified(notify, 1)
            except TimeoutError:
                if p.poll() is not None:
                    break
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError(f"./run {' '.join(args)} never became ready:\n" + p.communicate()[0][-4000:])
    finally:
        notify.close()


def _interrupt(p: subprocess.Popen) -> str:
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C, as the README says
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 0, out[-4000:]
    return out


def test_run_with_rounds_sets_itself_up_and_stops(checkout):
    r = subprocess.run(["./run", "--rounds", "2"], cwd=checkout, env=_env(), capture_output=True, text=True,
                       timeout=400)
    assert r.returncode == 0, r.stderr[-4000:] + r.stdout[-2000:]
    played = [json.loads(line)["round"] for line in r.stdout.splitlines()
              if line.startswith("{") and json.loads(line).get("event") == "round played"]
    assert played == ["CS-07-r1", "CS-07-r2"]
    assert (checkout / ".venv" / "bin" / "progressived").exists()


def test_run_help_and_no_dealer(checkout, tmp_path):
    r = subprocess.run(["./run", "--help"], cwd=checkout, env=_env(), capture_output=True, text=True, timeout=400)
    assert r.returncode == 0 and "--no-dealer" in r.stdout, r.stderr[-2000:]
    p, ready = _run_until_ready(checkout, tmp_path, ["--no-dealer"])
    try:
        ctl = checkout / ".venv" / "bin" / "progressivectl"
        status = subprocess.run([ctl, "status", "--json", "--socket", str(checkout / ".progressive-demo" /
                                                                          "control.sock")],
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["table"] == "CS-07"
    finally:
        out = _interrupt(p)
    assert ready.startswith("READY=1")
    assert '"round played"' not in out  # nobody dealt


def test_run_with_a_config_file(checkout, tmp_path):
    """`./run --config FILE` runs a real table: here one with no hardware attached, its journal beside it."""
    text = (checkout / "config" / "tables" / "caribbean-stud.toml").read_text(encoding="utf-8")
    text, n = re.subn(r'^state_dir = .*$', f'state_dir = "{tmp_path / "state"}"', text, count=1, flags=re.M)
    assert n == 1
    table = checkout / "config" / "tables" / "no-hardware.toml"  # beside the register maps it names
    table.write_text(text, encoding="utf-8")
    sock = tmp_path / "control.sock"
    p, ready = _run_until_ready(checkout, tmp_path, ["--config", str(table), "--socket", str(sock),
                                                     "--log-format", "json"])
    try:
        assert ready.startswith("READY=1")
        assert (tmp_path / "state").is_dir()
    finally:
        _interrupt(p)


def test_test_passes_its_arguments_to_pytest(checkout):
    r = subprocess.run(["./test", "-n", "0", "tests/core/test_cards.py", "-q", "-p", "no:cacheprovider"], cwd=checkout, env=_env(),
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert re.search(r"\d+ passed", r.stdout)


def _walkthrough() -> list[str]:
    """The README's `--no-dealer` walk-through: the lines of its two blocks, in order (the variables first)."""
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    i = next(k for k, b in enumerate(blocks) if "$H place 5" in b)
    return [line for b in blocks[i:i + 2] for line in b.splitlines() if line.strip()]


def test_the_no_dealer_walkthrough_works_twice_in_a_row(checkout, tmp_path):
    """Each line of the walk-through as the README gives it, on one checkout, twice: the second `./run` goes on
    from the first one's journal, so its round and claim ids are others (before, the README named CS-07-r1 and
    CS-07-r1-c1, wrong after one run). Between a chip's placing and the lock-out the test waits for the wager, as a
    person typing does."""
    lines = _walkthrough()
    setup = "\n".join(line for line in lines if line.startswith(("H=", "S=")))
    ctl = [str(checkout / ".venv" / "bin" / "progressivectl"), "--timeout", "20"]
    sock = ["--socket", str(checkout / ".progressive-demo" / "control.sock")]

    def sh(line: str) -> str:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{setup}\n{line}"], cwd=checkout, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (line, r.stdout, r.stderr)
        return r.stdout

    def wagers() -> int:
        r = subprocess.run([*ctl[:1], "round", "--json", *sock], capture_output=True, text=True, timeout=60)
        return len(json.loads(r.stdout)["wagers"]) if r.returncode == 0 else -1

    for n in (1, 2):
        run = tmp_path / f"run-{n}"
        run.mkdir()
        p, _ready = _run_until_ready(checkout, run, ["--no-dealer"])
        said = []
        try:
            for _ in range(600):  # the rig's devices up: a chip placed now is seen
                st = subprocess.run([*ctl[:1], "status", "--json", *sock], capture_output=True, text=True, timeout=60)
                if st.returncode == 0 and all(d.get("up") for d in json.loads(st.stdout)["devices"]):
                    break
                time.sleep(0.1)  # the daemon raises no event for it: look again
            for line in lines:
                if line.startswith(("H=", "S=")):
                    continue
                for part in line.split("#")[0].split("; "):
                    before = wagers() if "$H place" in part else None
                    said.append(sh(part))
                    if before is not None:
                        deadline = time.monotonic() + 30
                        while wagers() <= before and time.monotonic() < deadline:
                            time.sleep(0.1)
        finally:
            _interrupt(p)
        text = "".join(said)
        assert "approved by demo-floor and paid" in text, text
        assert "flush" in text and "dealer" in text, text

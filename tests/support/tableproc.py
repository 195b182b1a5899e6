"""A table daemon (`progressived --config FILE`) as a child process, on a rig running in the test process.

The rig's ports change on every run, so the table's configuration is written for it: the example table file
is read with tomllib, its buses and line devices are moved to where `rig.connections()` says the rig's
devices are (as hil.attach does to a loaded configuration in memory), its relative paths are made
absolute, its journal, control socket, metrics port, supervisors and log format are the test's own, and
the result is written back as TOML next to the process's other files:

    async with Rig.from_file(RIG) as rig:
        t = TableProcess.on_rig(rig, tmp_path / "t1", supervisors={"floor-1": "s3cret-floor"})
        await t.start()                 # started, READY=1 received (sd_notify), every device up
        await t.control("round")        # the control socket, as progressivectl talks to it
        t.kill()                        # SIGKILL
        await t.start()                 # the same table again, from its journal
        await t.stop()                  # SIGTERM, and the clean exit checked
        assert (await t.audit()).returncode == 0      # progressivectl audit verify --state DIR

Several tables run side by side with a TableProcess each (each has its own directory, journal and
sockets); `adjust` edits the raw table document before it is written (an [mqtt] section, a linked meter).
`Tables` makes them and kills whatever still runs when a test ends: a test module's fixture yields one and
calls its `close()` in its finalizer, so that a failed test leaves no daemon behind. The metrics port is
chosen afresh at every start (a configuration must name a port, and the last one may be taken by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from controller.config.credentials import PBKDF2, hash_credential
from controller.service.control import MAX_SOCKET_PATH, ControlClient

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"

READY_TIMEOUT = 30.0  # start to READY=1: the journal verified, meters defined, drivers started
UP_TIMEOUT = 20.0  # READY=1 to every device answering
STOP_TIMEOUT = 20.0
# The smallest PBKDF2 work a configuration accepts: approvals in tests stay fast (the default takes ~0.5 s).
TEST_PBKDF2_ITERATIONS = 100_000


# --- the table's configuration, written for a rig ------------------------------------------------------


# The tests' tables read seats for health every 0.2 s while dealing, not the product's 1 s (drivers/modbus/
# schedule.py): what they wait for then (a chip collected, a device back) comes sooner; nothing else changes.
# The benchmarks keep the product's default.
RIG_HEALTH_INTERVAL = 0.2


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the configuration wants a real port: 0 is refused). Drawn below the
    ephemeral range (32768 and up on Linux), so that no connection of another test takes it as its own source port
    before the daemon binds it (seen: a restart's metrics port "already in use")."""
    for _ in range(64):
        port = random.randrange(20_000, 32_000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def credential_for(secret: str) -> str:
    return hash_credential(secret, PBKDF2, iterations=TEST_PBKDF2_ITERATIONS)


def _absolute(base: Path, text: str) -> str:
    p = Path(text)
    return str(p if p.is_absolute() else (base / p).resolve())


def _is_path(ref: str) -> bool:
    """A paytable or a register map given as a file (docs/configuration.md), not a built-in id or a shipped map's
    name."""
    return "/" in ref or "\\" in ref or ref.endswith(".toml")


def table_doc_for_rig(table_file: str | os.PathLike[str], connections: Mapping[str, Any], *, state_dir: Path,
                      supervisors: Mapping[str, str] | None = None, metrics_port: int | None = None,
                      log_format: str = "json", log_level: str = "info",
                      health_interval: float | None = None) -> dict[str, Any]:
    """The raw TOML document of `table_file`, pointed at a running rig: each bus and line device moved to
    its device's connection (port, baud and the rig's framing), relative paths made absolute, the journal
    in `state_dir`; `supervisors` (name -> secret) replace the file's; metrics on `metrics_port` (a free
    one by default)."""
    src = Path(table_file).resolve()
    base = src.parent
    with open(src, "rb") as f:
        doc = tomllib.load(f)
    doc["state_dir"] = str(Path(state_dir).resolve())
    _files_absolute(doc, base)
    buses = doc.get("buses", {})
    for name, dev in doc.get("devices", {}).items():
        if isinstance(dev.get("register_map"), str) and _is_path(dev["register_map"]):
            dev["register_map"] = _absolute(base, dev["register_map"])
        conn = connections.get(name)
        if conn is None:
            raise ValueError(f"devices.{name}: the rig has no device of that name")
        transport = dev.get("transport")
        if conn.transport != transport:
            raise ValueError(f"devices.{name}: {transport} in the configuration, {conn.transport} on the rig")
        target = dev if transport == "line" else buses[dev["bus"]]
        if transport == "tcp":
            target.update(host=conn.host, port=conn.tcp_port)
        else:
            target.update(port=conn.port, baud=conn.baud)
            for k in ("parity", "stopbits"):
                if getattr(conn, k, None) is not None:
                    target[k] = getattr(conn, k)
    if health_interval is not None:
        for bus in buses.values():
            bus["health_interval"] = Decimal(str(health_interval))
    if supervisors is not None:
        doc["supervisors"] = [{"name": n, "credential": credential_for(s)} for n, s in supervisors.items()]
    doc["metrics"] = {"listen": f"127.0.0.1:{metrics_port or free_port()}"}
    doc["logging"] = {"format": log_format, "level": log_level}
    return doc


def _files_absolute(doc: dict[str, Any], base: Path) -> None:
    """The paytables' and [mqtt]'s files of `doc` by absolute paths (relative ones are to `base`)."""
    for wager in doc.get("wagers", {}).values():
        if isinstance(wager.get("paytable"), str) and _is_path(wager["paytable"]):
            wager["paytable"] = _absolute(base, wager["paytable"])
    mqtt = doc.get("mqtt")
    if isinstance(mqtt, dict):
        for k in ("ca_file", "cert_file", "key_file", "password_file"):
            if isinstance(mqtt.get(k), str):
                mqtt[k] = _absolute(base, mqtt[k])


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal) and v.is_finite():  # a number that is not money (link_timeout = 1.5), exactly
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string (escaped, ASCII) is a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML (money is a string of dollars, never a float)")


def dump_toml(doc: Mapping[str, Any]) -> str:
    """TOML for what a table file holds: tables, arrays of tables, strings, integers, booleans and lists
    of them. Floats are refused (the configuration takes money and rates as strings); a number that is not
    money and not whole (a time in seconds) is given as a Decimal."""
    out: list[str] = []

    def is_table(v: Any) -> bool:
        return isinstance(v, dict)

    def is_table_array(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    def body(d: Mapping[str, Any], path: list[str]) -> None:
        for k, v in d.items():
            if not is_table(v) and not is_table_array(v):
                out.append(f"{_key(k)} = {_value(v)}")
        for k, v in d.items():
            if is_table(v):
                header = ".".join(_key(p) for p in (*path, k))
                out.extend(["", f"[{header}]"])
                body(v, [*path, k])
            elif is_table_array(v):
                header = ".".join(_key(p) for p in (*path, k))
                for item in v:
                    out.extend(["", f"[[{header}]]"])
                    body(item, [*path, k])

    body(doc, [])
    return "\n".join(out).lstrip("\n") + "\n"


# --- the process -------------------------------------------------------------------------------------


class TableProcess:
    """One table daemon in a child process, with its own directory: configuration, journal (`state_dir`),
    control socket, log (`log_path`: the daemon's JSON lines, every start appended) and stderr."""

    CONFIG_NAME = "table.toml"

    def __init__(self, directory: Path, doc: dict[str, Any], *, name: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.doc = doc
        self.name = name or str(doc.get("table", "table"))
        self.state_dir = Path(doc["state_dir"])
        self.config_path = self.dir / self.CONFIG_NAME
        self.log_path = self.dir / "daemon.log"
        self.stderr_path = self.dir / "daemon.stderr"
        self.config_path.write_text(dump_toml(doc), encoding="utf-8")
        sock_dir = self.dir
        if len(os.fsencode(str(sock_dir / "control.sock"))) > MAX_SOCKET_PATH - 8:
            sock_dir = Path(tempfile.mkdtemp(prefix="tp-"))  # a Unix socket path has at most 107 bytes
            self._own_sock_dir: Path | None = sock_dir
        else:
            self._own_sock_dir = None
        self.socket = sock_dir / "control.sock"
        self.notify_path = sock_dir / "notify.sock"
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.env.pop("PROGRESSIVE_SOCKET", None)
        self.env.pop("WATCHDOG_USEC", None)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.kills = 0
        self.ready_status: str | None = None  # STATUS= sent with READY=1 by the last start
        self._notify: socket.socket | None = None
        self._log_mark = 0  # where the current start's log begins

    @classmethod
    def on_rig(cls, rig: Any, directory: Path, *, table: str | os.PathLike[str] = TABLE,
               supervisors: Mapping[str, str] | None = None,
               adjust: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
               name: str | None = None, env: Mapping[str, str] | None = None,
               health_interval: float | None = None) -> TableProcess:
        """A table daemon for the table file `table`, pointed at the running rig `rig`."""
        directory = Path(directory).resolve()
        doc = table_doc_for_rig(table, rig.connections(), state_dir=directory / "state", supervisors=supervisors,
                                health_interval=health_interval)
        if adjust is not None:
            doc = adjust(doc) or doc
        return cls(directory, doc, name=name, env=env)

    # -- life cycle --

    def arguments(self) -> list[str]:
        """progressived's arguments."""
        return ["--config", str(self.config_path), "--socket", str(self.socket)]

    @property
    def metrics_url(self) -> str:
        return f"http://{self.doc['metrics']['listen']}/metrics"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def launch(self) -> None:
        """Start the child (not waiting for anything). A fresh metrics port each start: the last one may be
        taken by now."""
        assert not self.running, f"{self.name}: already running"
        self.doc["metrics"] = {"listen": f"127.0.0.1:{free_port()}"}
        self.config_path.write_text(dump_toml(self.doc), encoding="utf-8")
        self._close_notify()
        with contextlib.suppress(FileNotFoundError):
            self.notify_path.unlink()
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._notify.bind(str(self.notify_path))
        self._notify.setblocking(False)
        env = {**self.env, "NOTIFY_SOCKET": str(self.notify_path)}
        self._log_mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "controller.cli.daemon", *self.arguments()],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=ROOT)
        self.starts += 1
        self.ready_status = None

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """Wait for READY=1 on the notify socket (the journal verified, the meters defined, every driver
        running); its STATUS text. Fails, with the daemon's stderr, if the child exits first."""
        assert self.proc is not None and self._notify is not None
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name}: the daemon exited with {self.proc.returncode} before it was "
                                     f"ready:\n{self.stderr_tail()}\n{self.log_tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: no READY=1 within {timeout:g} s:\n{self.log_tail()}")
            try:
                data = await asyncio.wait_for(loop.sock_recv(self._notify, 4096), min(left, 0.25))
            except TimeoutError:
                continue  # look at the child again: it may have died
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            if fields.get("READY") == "1":
                self.ready_status = fields.get("STATUS", "")
                return self.ready_status

    async def wait_devices_up(self, timeout: float = UP_TIMEOUT) -> dict[str, Any]:
        """Wait until the daemon reports every device up (its drivers have talked to the rig); the status."""
        deadline = time.monotonic() + timeout
        while True:
            status = await self.control("status")
            if status["devices"] and all(d["up"] for d in status["devices"]):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: devices not up within {timeout:g} s: {status['devices']}")
            await asyncio.sleep(0.05)  # the daemon raises no event for this: look again

    def port_was_taken(self) -> bool:
        """Whether the daemon exited because its metrics port was taken between its choice and the bind."""
        return self.proc is not None and self.proc.poll() is not None and \
            "Address already in use" in self.stderr_tail(2)

    async def launch_ready(self) -> str:
        """Launch and wait for READY=1; the READY status text. A metrics port taken by another process between its
        choice and the daemon's bind is chosen again (at most 3 launches)."""
        for attempt in range(3):
            self.launch()
            try:
                return await self.wait_ready()
            except AssertionError:
                if not self.port_was_taken() or attempt == 2:
                    self.kill()
                    raise
        raise AssertionError("unreachable")

    async def start(self, *, devices_up: bool = True) -> str:
        """Launch, wait for READY=1 and (by default) for every device up; the READY status text."""
        status = await self.launch_ready()
        try:
            if devices_up:
                await self.wait_devices_up()
        except BaseException:
            self.kill()
            raise
        return status

    def kill(self) -> bool:
        """SIGKILL the daemon (if it runs) and reap it; whether it was running."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT)
        self.kills += 1
        return True

    def terminate(self) -> None:
        """SIGTERM: the daemon stops cleanly (see `stop` to wait for it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    async def wait_exit(self, timeout: float = STOP_TIMEOUT) -> int:
        assert self.proc is not None
        try:
            return await asyncio.to_thread(self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name}: the daemon did not exit within {timeout:g} s:\n"
                                 f"{self.log_tail()}") from None

    async def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM and wait; the exit status must be 0 (a clean stop)."""
        if self.proc is None:
            return 0
        self.terminate()
        rc = await self.wait_exit(timeout)
        assert rc == 0, f"{self.name}: the daemon exited with {rc} on SIGTERM:\n{self.stderr_tail()}"
        return rc

    def close(self) -> None:
        """Kill the child if it still runs; release the sockets. Safe to call more than once."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_TIMEOUT)
        self._close_notify()
        if self._own_sock_dir is not None:
            shutil.rmtree(self._own_sock_dir, ignore_errors=True)
            self._own_sock_dir = None

    def _close_notify(self) -> None:
        if self._notify is not None:
            self._notify.close()
            self._notify = None

    # -- talking to it --

    async def control(self, op: str, timeout: float = 10.0, **args: Any) -> Any:
        """One request on the control socket (controller.service.control's client): the result, or ControlError
        (refused) / DaemonUnavailable (no daemon answered)."""
        return await ControlClient(self.socket, timeout=timeout).call(op, **args)

    async def wait_round(self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30.0,
                         every: float = 0.05) -> dict[str, Any]:
        """Ask the daemon for its round every `every` seconds until `pred` holds (it raises no event a client
        could wait on); the round."""
        return await self._wait_answer("round", pred, what, timeout, every)

    async def wait_status(self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 15.0,
                          every: float = 0.05) -> dict[str, Any]:
        """The same for the daemon's status; the status."""
        return await self._wait_answer("status", pred, what, timeout, every)

    async def _wait_answer(self, op: str, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float,
                           every: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            info = await self.control(op)
            if pred(info):
                return info
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what}: the daemon's {op} is {info}")
            await asyncio.sleep(every)

    async def ctl(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """`progressivectl ARGS...` (for the offline commands: --state DIR)."""
        return await asyncio.to_thread(
            subprocess.run, [str(BIN / "progressivectl"), *args], capture_output=True, text=True, timeout=timeout)

    async def audit(self) -> subprocess.CompletedProcess:
        """`progressivectl audit verify --state DIR --json` on this table's journal."""
        return await self.ctl("audit", "verify", "--state", str(self.state_dir), "--json")

    async def offline(self, what: str) -> Any:
        """`progressivectl meters|history --state DIR --json` (the daemon stopped or running)."""
        r = await self.ctl(what, "--state", str(self.state_dir), "--json")
        assert r.returncode == 0, f"progressivectl {what}: {r.returncode}\n{r.stdout}{r.stderr}"
        return json.loads(r.stdout)

    # -- what it said --

    def log_events(self, *, this_start: bool = False) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (of every start, or of the current one only)."""
        if not self.log_path.exists():
            return []
        with open(self.log_path, "rb") as f:
            if this_start:
                f.seek(self._log_mark)
            text = f.read().decode(errors="replace")
        out = []
        for line in text.splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    out.append(json.loads(line))
        return out

    def log_tail(self, n: int = 40) -> str:
        return self.tail(self.log_path, n)

    def stderr_tail(self, n: int = 40) -> str:
        return self.tail(self.stderr_path, n)

    @staticmethod
    def tail(path: Path, n: int = 40) -> str:
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


class Tables:
    """The table processes of one test: `new(...)` makes one, `close()` kills whatever still runs (a test
    module's fixture calls it in its finalizer, so that a failed test leaves no daemon behind)."""

    def __init__(self) -> None:
        self.made: list[TableProcess] = []

    def new(self, rig: Any, directory: Path, **kwargs: Any) -> TableProcess:
        kwargs.setdefault("health_interval", RIG_HEALTH_INTERVAL)
        t = TableProcess.on_rig(rig, directory, **kwargs)
        self.made.append(t)
        return t

    def close(self) -> None:
        for t in self.made:
            t.close()

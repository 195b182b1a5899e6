"""A link in the test process: a real Mosquitto (TLS, the shipped ACL), a link authority and table links.

Used by the link tests; the authority and each table run as tasks that a test can stop and start again
over the same state directories, as a restart would. `AuthorityProcess` runs the authority as a child process
instead (`progressived --role link`), for the tests that kill it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from broker import Broker
from controller.config.authority import AuthorityConfig
from controller.config.model import MqttConfig, StandaloneMeter
from controller.link.authority import LinkAuthority
from controller.link.client import TableLink
from controller.meter.params import MeterParams
from rigtable import until
from tableproc import ROOT, dump_toml, free_port

PREFIX = "progressive/v1"
METER = "fchb-link"
RESET = 1_000_000  # cents: $10,000
RATE = Fraction(15, 100)
AT = datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc)


def mqtt_config(client_id: str, link_timeout: float = 2.0) -> MqttConfig:
    return MqttConfig(host="127.0.0.1", port=0, tls=True, client_id=client_id, topic_prefix=PREFIX,
                      link_timeout=link_timeout)


def authority_config(state_dir: Path, tables: tuple[str, ...], *, heartbeat: float = 0.2,
                     ceiling_cents: int | None = None) -> AuthorityConfig:
    params = MeterParams(METER, RESET, RATE, (100, 500), ceiling_cents=ceiling_cents)
    return AuthorityConfig(source=state_dir / "authority.toml", authority="link-1", state_dir=state_dir,
                           tables=tables, meters={METER: StandaloneMeter(METER, params)},
                           mqtt=mqtt_config("authority"), heartbeat=heartbeat)


class LinkRig:
    def __init__(self, tmp: Path, broker: Broker, tables: tuple[str, ...], *, link_timeout: float = 2.0,
                 heartbeat: float = 0.2) -> None:
        self.tmp, self.broker, self.tables = tmp, broker, tables
        self.cfg = authority_config(tmp / "authority", tables, heartbeat=heartbeat)
        self.link_timeout = link_timeout
        self.authority: LinkAuthority | None = None
        self.links: dict[str, TableLink] = {}
        self.alive_changes: dict[str, list[bool]] = {t: [] for t in tables}
        self._tasks: dict[str, asyncio.Task] = {}

    async def start_authority(self) -> LinkAuthority:
        a = LinkAuthority(self.cfg, settings=self.broker.settings("authority"), registry=CollectorRegistry())
        self.authority = a
        self._tasks["authority"] = asyncio.create_task(a.run(), name="authority")
        await until(lambda: a.ready.is_set() and a.mqtt is not None and a.mqtt.connected, "authority connected")
        return a

    async def stop_authority(self) -> None:
        await self._stop("authority")
        self.authority = None

    async def start_table(self, table: str, meter: str = "fchb") -> TableLink:
        link = TableLink(table, mqtt_config(table, self.link_timeout), {meter: METER}, self.tmp / table,
                         settings=self.broker.settings(table), on_alive=self.alive_changes[table].append)
        await asyncio.to_thread(link.open)
        self.links[table] = link
        self._tasks[table] = asyncio.create_task(self._run_table(link), name=f"table:{table}")
        await until(lambda: link.opened.is_set(), f"{table} link running")
        return link

    async def _run_table(self, link: TableLink) -> None:
        try:
            await link.run()
        finally:
            link.close()

    async def stop_table(self, table: str) -> None:
        await self._stop(table)
        self.links.pop(table, None)

    async def _stop(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 60)

    async def close(self) -> None:
        for name in list(self._tasks):
            await self._stop(name)

    def meter(self) -> Any:
        assert self.authority is not None and self.authority.ledger is not None
        return self.authority.ledger.state[METER]

    async def all_answered(self, timeout: float = 20.0) -> None:
        await until(lambda: all(link.ledger is not None and not link.outbox.pending for link in self.links.values()),
                    "every table's outbox answered", timeout)


# --- the link authority as a child process ---------------------------------------------------------------


class AuthorityProcess:
    """The link authority (`progressived --role link --config FILE`) in a child process, with its own directory:
    configuration (written from `doc`, a TOML document as tableproc.dump_toml takes it), journal (`state_dir`),
    log (`log_path`: its JSON lines, every start appended) and stderr. Like tableproc.TableProcess: `start()`
    waits for READY=1 on its notify socket, `kill()` is SIGKILL, `stop()` SIGTERM and a clean exit."""

    def __init__(self, directory: Path, doc: dict[str, Any], *, name: str = "authority") -> None:
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.doc = doc
        self.name = name
        self.state_dir = Path(doc["state_dir"])
        self.config_path = self.dir / "authority.toml"
        self.log_path = self.dir / "daemon.log"
        self.stderr_path = self.dir / "daemon.stderr"
        self.notify_path = self.dir / "notify.sock"
        self._own_sock_dir: Path | None = None
        if len(os.fsencode(str(self.notify_path))) > 100:  # a Unix socket path has at most 107 bytes
            self._own_sock_dir = Path(tempfile.mkdtemp(prefix="ap-"))
            self.notify_path = self._own_sock_dir / "notify.sock"
        self.config_path.write_text(dump_toml(doc), encoding="utf-8")
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.env.pop("WATCHDOG_USEC", None)
        self.proc: Any = None
        self.starts = 0
        self.kills = 0
        self._notify: Any = None

    @property
    def metrics_url(self) -> str:
        return f"http://{self.doc['metrics']['listen']}/metrics"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        assert not self.running, f"{self.name}: already running"
        self.doc["metrics"] = {"listen": f"127.0.0.1:{free_port()}"}  # afresh: the last one may be taken by now
        self.config_path.write_text(dump_toml(self.doc), encoding="utf-8")
        self._close_notify()
        with contextlib.suppress(FileNotFoundError):
            self.notify_path.unlink()
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._notify.bind(str(self.notify_path))
        self._notify.setblocking(False)
        env = {**self.env, "NOTIFY_SOCKET": str(self.notify_path)}
        with open(self.log_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller.cli.daemon", "--role", "link", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=ROOT)
        self.starts += 1

    async def wait_ready(self, timeout: float = 30.0) -> str:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name}: exited with {self.proc.returncode} before it was ready:\n"
                                     f"{self.tail(self.stderr_path)}\n{self.tail(self.log_path)}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: no READY=1 within {timeout:g} s:\n{self.tail(self.log_path)}")
            try:
                data = await asyncio.wait_for(loop.sock_recv(self._notify, 4096), min(left, 0.25))
            except TimeoutError:
                continue  # look at the child again: it may have died
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            if fields.get("READY") == "1":
                return fields.get("STATUS", "")

    async def start(self) -> str:
        self.launch()
        try:
            return await self.wait_ready()
        except BaseException:
            self.kill()
            raise

    def kill(self) -> bool:
        """SIGKILL (if it runs) and reap; whether it was running."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)
        self.kills += 1
        return True

    async def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; the exit status must be 0."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = await asyncio.to_thread(self.proc.wait, timeout)
        assert rc == 0, f"{self.name}: exited with {rc} on SIGTERM:\n{self.tail(self.stderr_path)}"
        return rc

    def close(self) -> None:
        """Kill the child if it still runs; release the notify socket. Safe to call more than once."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=20)
        self._close_notify()
        if self._own_sock_dir is not None:
            shutil.rmtree(self._own_sock_dir, ignore_errors=True)
            self._own_sock_dir = None

    def _close_notify(self) -> None:
        if self._notify is not None:
            self._notify.close()
            self._notify = None

    def log_events(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    out.append(json.loads(line))
        return out

    @staticmethod
    def tail(path: Path, n: int = 40) -> str:
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])

"""A table daemon on the rig with its control socket, and the pit console (`progressive-console`, a process of
its own as on a box) talking to it: for the console's HTTP and browser tests."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import subprocess
import sys
from pathlib import Path

import aiohttp

from controller.app.control import ControlServer
from controller.app.table import TableDaemon

from rigtable import daemon_on_rig, until, with_supervisor
from tableproc import free_port

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
CONSOLE = Path(sys.executable).parent / "progressive-console"
SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
ROYAL = ["AS", "KS", "QS", "JS", "TS"]  # Progressive Payout Wager: 100% of the meter, which resets
START_S = 15.0


class Console:
    """The console process: its URL, its log (JSON lines: stdout and stderr), and an HTTP client for it."""

    def __init__(self, url: str, log: Path, proc: asyncio.subprocess.Process) -> None:
        self.url, self.log, self.proc = url, log, proc
        self.origin = url.rstrip("/")

    def client(self) -> aiohttp.ClientSession:
        """A browser's manners: cookies kept (for an IP address too), redirects not followed, TLS not verified
        (the test's own certificate)."""
        return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                     connector=aiohttp.TCPConnector(ssl=False))


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl: .ci/run installs it)."""
    cert, key = directory / "console.crt", directory / "console.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return cert, key


@contextlib.asynccontextmanager
async def console_process(sock: Path, log: Path, *args: str, tls: bool = False):
    port = free_port()
    with open(log, "ab") as out:
        proc = await asyncio.create_subprocess_exec(
            str(CONSOLE), "--socket", str(sock), "--listen", f"127.0.0.1:{port}", "--log-format", "json", *args,
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    console = Console(f"{'https' if tls else 'http'}://127.0.0.1:{port}/", log, proc)
    try:
        await until(lambda: proc.returncode is not None or '"console serving"' in log.read_text(),
                    lambda: f"the console started: {log.read_text()[-2000:]}", START_S)
        assert proc.returncode is None, log.read_text()[-2000:]
        yield console
    finally:
        if proc.returncode is None:
            proc.terminate()
        async with asyncio.timeout(START_S):
            code = await proc.wait()
        assert code in (0, -15), f"the console exited {code}: {log.read_text()[-2000:]}"


@contextlib.asynccontextmanager
async def console_on_rig(tmp_path: Path, *args: str, tls: bool = False):
    """(daemon, rig, console): the daemon's control socket in `tmp_path`, the console talking to it."""
    sock = tmp_path / "control.sock"
    daemon_class = functools.partial(TableDaemon, control=lambda d: ControlServer(sock, d))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                             lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET)) as (daemon, rig):
        async with console_process(sock, tmp_path / "console.log", *args, tls=tls) as console:
            yield daemon, rig, console

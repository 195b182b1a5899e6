"""A table daemon on the rig with its control socket, and the pit console (`progressive-console`, a process of
its own as on a box) talking to it: for the console's HTTP and browser tests."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

from controller.app.table import TableDaemon
from controller.service.control import ControlServer

from rigtable import daemon_on_rig, until, with_supervisor
from tableproc import free_port

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
CONSOLE = Path(sys.executable).parent / "progressive-console"
SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
ROYAL = ["AS", "KS", "QS", "JS", "TS"]  # Progressive Payout Wager: 100% of the meter, which resets
START_S = 15.0
# What systemd does for a .socket unit: the listening socket as fd 3, $LISTEN_FDS and $LISTEN_PID (this very
# process: exec keeps it), then the console's own command line.
ACTIVATE = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.environ.update(LISTEN_FDS='1', "
            "LISTEN_PID=str(os.getpid())); os.execv(sys.argv[2], sys.argv[2:])")


def activated(sock: socket.socket, *args: str) -> list[str]:
    """The console's command line, started as by systemd with `sock` (pass_fds=(sock.fileno(),))."""
    return [sys.executable, "-c", ACTIVATE, str(sock.fileno()), str(CONSOLE), *args]


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


async def login_form(http: aiohttp.ClientSession, console: Console) -> tuple[str, str]:
    """What a visitor who has not logged in gets where a login is required: the page sends them to /login (with
    HSTS under TLS), its event stream is refused; then the login form's token and the cookie it set."""
    async with http.get(console.url, allow_redirects=False) as r:
        assert r.status == 303 and r.headers["Location"] == "/login"
        assert ("Strict-Transport-Security" in r.headers) == console.url.startswith("https:"), r.headers
    async with http.get(console.url + "events") as r:
        assert r.status == 403
    async with http.get(console.url + "login") as r:
        assert r.status == 200
        return csrf_of(await r.text()), r.headers["Set-Cookie"]


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl: .ci/run installs it)."""
    cert, key = directory / "console.crt", directory / "console.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return cert, key


@contextlib.asynccontextmanager
async def console_process(sock: Path, log: Path, *args: str, tls: bool = False,
                          listening: socket.socket | None = None):
    """The console on a free port of its own, or serving on `listening` as under systemd's socket activation."""
    own = ("--socket", str(sock), "--log-format", "json", *args)
    if listening is None:
        port = free_port()
        command, fds = [str(CONSOLE), "--listen", f"127.0.0.1:{port}", *own], ()
    else:
        port = listening.getsockname()[1]
        command, fds = activated(listening, *own), (listening.fileno(),)
    with open(log, "ab") as out:
        proc = await asyncio.create_subprocess_exec(*command, stdout=out, stderr=subprocess.STDOUT,
                                                    stdin=subprocess.DEVNULL, pass_fds=fds)
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
    async with (daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                              lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET)) as (daemon, rig),
                console_process(sock, tmp_path / "console.log", *args, tls=tls) as console):
        yield daemon, rig, console


@contextlib.asynccontextmanager
async def tls_console_on_rig(tmp_path: Path):
    """(daemon, rig, console) as console_on_rig, the console served with TLS on the test's own certificate (a
    supervisor's login required)."""
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    async with console_on_rig(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key), tls=True) as found:
        yield found

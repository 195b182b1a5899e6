"""A real Mosquitto for tests, configured from the files shipped in config/mosquitto/.

`start_broker(directory, users)` makes a CA and a server certificate for 127.0.0.1 and localhost (openssl,
EC P-256), a password file (mosquitto_passwd -U) with a random password for each user, copies the shipped ACL
as it is, derives mosquitto.conf from the shipped one (the listener's port and the files' paths
substituted, nothing else), starts the broker on a free port of 127.0.0.1 and returns once the port
accepts connections. `Broker.stop`/`start` restart it on the same port with the same persistence,
`pause`/`resume` freeze it (SIGSTOP/SIGCONT), `settings(user)` is how that user reaches it.

Skips the calling test when Mosquitto is not installed (Debian package ``mosquitto``, which has
``mosquitto_passwd`` too); openssl is assumed.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.link.mqtt import MqttSettings

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "mosquitto"
HOST = "127.0.0.1"
SBIN = ("/usr/sbin", "/usr/local/sbin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in SBIN:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def require_mosquitto() -> tuple[str, str]:
    """The paths of mosquitto and mosquitto_passwd; skips the test if either is missing."""
    broker, passwd = _tool("mosquitto"), _tool("mosquitto_passwd")
    if broker is None or passwd is None:
        pytest.skip("Mosquitto is not installed (Debian package mosquitto: mosquitto and mosquitto_passwd)")
    return broker, passwd


class _PortTaken(Exception):
    """The port chosen was taken by another process before the broker could listen on it."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _run(*args: str, cwd: Path) -> None:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")


def make_pki(directory: Path) -> dict[str, Path]:
    """A CA and a server certificate (SAN: 127.0.0.1, localhost) signed by it, EC P-256, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
         "-subj", "/CN=progressive test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _run("openssl", "req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost", cwd=directory)
    (directory / "server.ext").write_text(
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-sha256", "-extfile", "server.ext", "-out", "server.crt",
         cwd=directory)
    return {"ca": directory / "ca.crt", "cert": directory / "server.crt", "key": directory / "server.key"}


# The settings of the shipped mosquitto.conf that the tests rely on, exactly as shipped.
EXPECTED = {
    "allow_anonymous": "false",
    "require_certificate": "false",
    "persistence": "true",
    "per_listener_settings": "false",
}
PATHS = ("password_file", "acl_file", "cafile", "certfile", "keyfile", "persistence_location")


def derive_conf(shipped: str, *, port: int, files: dict[str, Path], user: str | None) -> str:
    """The shipped mosquitto.conf with the listener on `port` of 127.0.0.1 and the files of `files` (by
    setting name); every other line as shipped. Raises if the shipped file lacks what the tests check."""
    out: list[str] = []
    seen: dict[str, str] = {}
    listeners = 0
    for line in shipped.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            out.append(line)
            continue
        key, value = words[0], " ".join(words[1:])
        seen[key] = value
        if key == "listener":
            listeners += 1
            if value != "8883":
                raise AssertionError(f"shipped mosquitto.conf: listener {value}: expected one, on 8883")
            line = f"listener {port} {HOST}"
        elif key in PATHS:
            line = f"{key} {files[key]}"
        elif key in ("user", "pid_file"):
            continue
        out.append(line)
    if listeners != 1:
        raise AssertionError(f"shipped mosquitto.conf: {listeners} listeners, expected one (TLS, 8883)")
    for key, value in EXPECTED.items():
        if seen.get(key) != value:
            raise AssertionError(f"shipped mosquitto.conf: {key} is {seen.get(key)!r}, expected {value!r}")
    missing = [k for k in PATHS if k not in seen]
    if missing:
        raise AssertionError(f"shipped mosquitto.conf: no {', '.join(missing)}")
    if user is not None:
        # Started as root, Mosquitto would become the user "mosquitto", who cannot read these files.
        out.append(f"user {user}")
    return "\n".join(out) + "\n"


class Broker:
    """A Mosquitto process on 127.0.0.1:`port` with its files in `directory` (see `start_broker`)."""

    def __init__(self, directory: Path, users: Iterable[str], *, port: int | None = None,
                 operators: Iterable[str] = ()) -> None:
        self.mosquitto, self.mosquitto_passwd = require_mosquitto()
        self.directory = directory
        self.host = HOST
        self.port = port if port is not None else free_port()
        operators = tuple(operators)
        self.passwords = {u: secrets.token_urlsafe(12) for u in (*users, *operators)}
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        directory.mkdir(parents=True, exist_ok=True)
        pki = make_pki(directory / "pki")
        self.ca_file = pki["ca"]
        self.passwd_file = directory / "passwd"
        # In one go: a plain file hashed by one run of mosquitto_passwd (one run per user took 8 s for 1,000 users).
        self.passwd_file.write_text("".join(f"{u}:{p}\n" for u, p in self.passwords.items()))
        self.passwd_file.chmod(0o600)
        _run(self.mosquitto_passwd, "-U", str(self.passwd_file), cwd=directory)
        self.acl_file = directory / "acl"
        # An operator: a client that may publish and read every topic of the link, as whoever runs the broker can
        # (the attacks of the broker are run through it).
        self.acl_file.write_bytes((SHIPPED / "acl").read_bytes() + "".join(
            f"\nuser {o}\ntopic readwrite progressive/v1/#\n" for o in operators).encode())
        data = directory / "data"
        data.mkdir(exist_ok=True)
        files = {"password_file": self.passwd_file, "acl_file": self.acl_file, "cafile": pki["ca"],
                 "certfile": pki["cert"], "keyfile": pki["key"], "persistence_location": Path(f"{data}/")}
        user = pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() == 0 else None
        self.conf = directory / "mosquitto.conf"
        self._conf_args = (files, user)
        self._port_free_to_change = port is None  # until it first listens: clients learn the port from then on
        self._write_conf()
        self.log_file = directory / "mosquitto.log"

    # --- the process ---------------------------------------------------------------------------------

    def _write_conf(self) -> None:
        files, user = self._conf_args
        self.conf.write_text(derive_conf((SHIPPED / "mosquitto.conf").read_text(), port=self.port, files=files,
                                         user=user))

    def start(self, timeout: float = 10.0) -> None:
        """Start it. A first start whose free port another process took meanwhile (many tests pick ports at once)
        tries another port, a few times."""
        for _ in range(5):
            try:
                self._start(timeout)
            except _PortTaken:
                self.port = free_port()
                self._write_conf()
                continue
            self._port_free_to_change = False
            return
        raise RuntimeError(f"mosquitto: no free port taken in 5 tries:\n{self.log()}")

    def _start(self, timeout: float) -> None:
        if self.proc is not None:
            raise RuntimeError("broker already started")
        logged = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen([self.mosquitto, "-c", str(self.conf)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.paused = False
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                if self._port_free_to_change and "Address already in use" in self.log()[logged:]:
                    raise _PortTaken
                raise RuntimeError(f"mosquitto exited with {code}:\n{self.log()}")
            try:
                if " running" not in self.log()[logged:]:  # "mosquitto version X running": its listeners are open
                    raise OSError("not running yet")
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError as e:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"mosquitto did not listen on {self.port} within {timeout} s:\n{self.log()}") \
                        from e
                time.sleep(0.02)  # polling the port, with the deadline above

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker as its service would (SIGTERM: it saves its persistence first)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self.paused:
            proc.send_signal(signal.SIGCONT)
            self.paused = False
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def pause(self) -> None:
        """The broker stops answering, its connections stay open (a hung or unreachable broker)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # --- clients -------------------------------------------------------------------------------------

    def settings(self, user: str, **changes: Any) -> MqttSettings:
        """How `user` reaches this broker: TLS checked against the test CA, its password, client id = user;
        `changes` replace any setting (password="wrong", tls=False, protocol="3.1.1", ...)."""
        base = MqttSettings(host=self.host, port=self.port, tls=True, ca_file=self.ca_file, username=user,
                            password=self.passwords[user], client_id=user, keepalive=5, connect_timeout=3.0,
                            timeout=3.0, reconnect_min=0.1, reconnect_max=0.5)
        return replace(base, **changes)


def start_broker(directory: Path, users: Iterable[str], operators: Iterable[str] = ()) -> Broker:
    """A running broker for `users` (table ids and "authority") and `operators` (every topic); call `stop()`."""
    broker = Broker(directory, users, operators=operators)
    broker.start()
    return broker


@contextmanager
def running_broker(directory: Path, users: Iterable[str], **kwargs: Any) -> Iterator[Broker]:
    """A broker for the `users` (skipped without Mosquitto), stopped at the end: what each test module's fixture
    yields."""
    require_mosquitto()
    b = start_broker(directory, users, **kwargs)
    try:
        yield b
    finally:
        b.stop()


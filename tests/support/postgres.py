"""A real PostgreSQL for tests: a temporary cluster (initdb) on a free port of 127.0.0.1, started with pg_ctl.

    server = start_postgres()           # or the module-scoped fixture `postgres`
    url = server.new_database()         # a fresh database, its libpq URL (trust: no password)
    server.sql("SELECT ...")            # as the cluster's superuser
    server.stop()                       # stopped and removed

Debian's binaries are in /usr/lib/postgresql/<version>/bin (package postgresql); the newest is used. initdb and
postgres refuse to run as root: a test run as root runs them as the user `postgres` (runuser), the cluster's
directory owned by it. The calling test is skipped, with the reason, only when no PostgreSQL is installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

HOST = "127.0.0.1"
SUPERUSER = "postgres"


def server_bin() -> Path | None:
    """The bin directory of the newest PostgreSQL installed, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: [int(x) for x in Path(p).parts[-3].split(".") if x.isdigit()])
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Postgres:
    def __init__(self, bindir: Path, base: Path, port: int, as_user: list[str]) -> None:
        self.bindir, self.base, self.port, self._as = bindir, base, port, as_user
        self.data = base / "data"
        self._databases = 0

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=60, cwd=self.base)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{database}"

    def start(self) -> None:
        # fsync off: the tests' data need not survive the machine; synchronous_commit stays on
        opts = (f"-c listen_addresses={HOST} -c port={self.port} -c unix_socket_directories={self.base} "
                "-c fsync=off -c full_page_writes=off -c max_connections=60")
        self._run(str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data),
                  "-l", str(self.base / "log"), "-o", opts)

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(str(self.bindir / "pg_ctl"), "stop", "-w", "-m", mode, "-D", str(self.data))

    def sql(self, statement: str, params: Any = None, database: str = "postgres") -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        self._databases += 1
        name = f"journal_{os.getpid()}_{self._databases}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def start_postgres() -> Postgres:
    bindir = server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql: /usr/lib/postgresql/*/bin)")
    base = Path(tempfile.mkdtemp(prefix="progressive-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse root
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = Postgres(bindir, base, free_port(), as_user)
    try:
        server._run(str(bindir / "initdb"), "-D", str(server.data), "-U", SUPERUSER, "--auth=trust",
                    "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
        for _ in range(3):  # a port taken between free_port() and the start: another one
            try:
                server.start()
                break
            except RuntimeError:
                server.port = free_port()
        else:
            raise RuntimeError(f"PostgreSQL did not start: {(base / 'log').read_text(errors='replace')[-2000:]}")
    except BaseException:
        server.remove()
        raise
    return server


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL for the test module, removed at its end."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.remove()


__all__ = ["Postgres", "free_port", "postgres", "server_bin", "start_postgres"]

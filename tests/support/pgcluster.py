"""A replicated PostgreSQL pair under Patroni over etcd for tests, configured from config/patroni/patroni.yml.

`PgCluster().start()` starts, in a temporary directory, one etcd member and two Patroni nodes ("authority-a" and
"authority-b"), each with its own data directory, PostgreSQL port and REST API port on 127.0.0.1 (free ports; a
start that finds one taken meanwhile starts again on others). Their configuration is the shipped example with
the node's name, addresses, ports, directories and passwords substituted, nothing else (`derive_config`): so the
example is what is tested. Once Patroni reports a leader and a synchronous standby streaming from it, the
authority's role and database are made as the runbook makes them (docs/link-at-scale.md), with a passfile;
`url` is the multi-host URL a client uses.

`kill(node)` is the death of that node's box (SIGKILL of its Patroni and of every PostgreSQL process), `freeze(node)`
a hang of its Patroni alone (SIGSTOP); then `wait_leader(other)` returns the seconds from the loss until `other` is
the writable leader, `restart(node)` rejoins a node as the synchronous standby (Patroni rewinds it, or makes it
again from the leader), `heal()` brings both back, `stop()` ends every process, whatever the test left, and
removes the directory. PostgreSQL refuses to run as root: a test run as root runs Patroni (and so
PostgreSQL) as the user postgres.

Skips the calling test when Patroni, etcd, PostgreSQL or psycopg is missing (Debian packages patroni,
etcd-server, postgresql; .ci/run installs them).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "patroni" / "patroni.yml"
HOST = "127.0.0.1"
NODES = ("authority-a", "authority-b")
AUTHORITY_USER = "progressive"  # the authority's role and database (docs/link-at-scale.md)
AUTHORITY_DB = "progressive"

# The settings of the shipped patroni.yml that the tests rely on, exactly as shipped.
EXPECTED_DCS = {"synchronous_mode": True, "synchronous_mode_strict": False, "ttl": 20, "loop_wait": 2,
                "retry_timeout": 5}


def _which(name: str, *more: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for path in more:
        if os.access(path, os.X_OK):
            return path
    return None


def pg_bin_dir() -> str | None:
    """The newest installed PostgreSQL's programs (Debian: /usr/lib/postgresql/<version>/bin)."""
    dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.access(os.path.join(d, "postgres"), os.X_OK)]
    return max(dirs, key=lambda d: int(Path(d).parent.name)) if dirs else None


def require_pgcluster() -> tuple[str, str, str]:
    """The paths of patroni, etcd and PostgreSQL's bin directory; skips the test if any (or psycopg) is missing."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip: psycopg[binary])")
    patroni, etcd, bin_dir = _which("patroni", "/usr/bin/patroni"), _which("etcd", "/usr/bin/etcd"), pg_bin_dir()
    if patroni is None or etcd is None or bin_dir is None:
        pytest.skip("Patroni, etcd or PostgreSQL is not installed (Debian packages patroni, etcd-server, postgresql)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("run as root, and no user postgres to run PostgreSQL as (the package postgresql makes it)")
    return patroni, etcd, bin_dir


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def derive_config(shipped: dict[str, Any], *, name: str, api_port: int, pg_port: int, etcd_hosts: str,
                  directory: Path, bin_dir: str, passwords: dict[str, str]) -> dict[str, Any]:
    """The shipped patroni.yml for node `name` on 127.0.0.1: its name, addresses, ports, directories, passwords and
    the addresses of pg_hba substituted, the watchdog off; every other setting as shipped. Raises if the shipped
    file lacks what the tests rely on."""
    config = json.loads(json.dumps(shipped))  # a deep copy of plain YAML data
    dcs = config["bootstrap"]["dcs"]
    for key, value in EXPECTED_DCS.items():
        if dcs.get(key) != value:
            raise AssertionError(f"shipped patroni.yml: bootstrap.dcs.{key} is {dcs.get(key)!r}, expected {value!r}")
    if dcs["postgresql"].get("use_pg_rewind") is not True:
        raise AssertionError("shipped patroni.yml: bootstrap.dcs.postgresql.use_pg_rewind is not true")
    if "etcd3" not in config:
        raise AssertionError("shipped patroni.yml: no etcd3 section")
    config["name"] = name
    config["restapi"].update(listen=f"{HOST}:{api_port}", connect_address=f"{HOST}:{api_port}")
    config["etcd3"]["hosts"] = etcd_hosts
    pg = config["postgresql"]
    pg.update(listen=f"{HOST}:{pg_port}", connect_address=f"{HOST}:{pg_port}", data_dir=str(directory / "data"),
              bin_dir=bin_dir, pgpass=str(directory / "pgpass"))
    pg["parameters"]["unix_socket_directories"] = str(directory)
    for user, auth in pg["authentication"].items():
        auth["password"] = passwords[user]
    # Both boxes' addresses are 127.0.0.1 here: the entries of box B's address are left out (the same lines).
    hba, seen = [], set()
    for line in pg["pg_hba"]:
        words = line.split()
        if words[0] == "host":
            words[3] = f"{HOST}/32"
        if " ".join(words) not in seen:
            seen.add(" ".join(words))
            hba.append(" ".join(words))
    pg["pg_hba"] = hba
    # The watchdog would reset the box the tests run on when they hang a Patroni (the fencing they check
    # without it): off.
    config["watchdog"] = {"mode": "off"}
    return config


def runbook_role_commands() -> list[str]:
    """The commands of docs/link-at-scale.md that make the authority's role and database (the shell block with
    CREATE ROLE); raises if the runbook has none."""
    text = (ROOT / "docs" / "link-at-scale.md").read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if f"CREATE ROLE {AUTHORITY_USER} " in block:
            return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    raise AssertionError(f"docs/link-at-scale.md: no shell block that makes the role {AUTHORITY_USER}")


def _ppids() -> dict[int, int]:
    """Every process's parent, from /proc."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def processes_in(directory: Path) -> list[str]:
    """The command lines of the live processes that name `directory` (Patroni, etcd, a postmaster): none once the
    cluster is stopped."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(directory) in command:
                found.append(f"{entry}: {command.strip()}")
    return found


def _alive(pid: int) -> bool:
    """Running, neither gone nor a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(what: str, check: Callable[[], Any], timeout: float, log: Callable[[], str] = lambda: "") -> Any:
    """Poll `check` until it returns something true; fails after `timeout` seconds naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s\n{log()}")
        time.sleep(0.1)  # polling the REST API with the deadline above


class _PortTaken(Exception):
    """A port chosen free was taken by another process before ours listened on it."""


class Node:
    """One Patroni node, its PostgreSQL and their files in `directory`."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.directory = directory
        self.api_port = free_port()
        self.pg_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_file = directory / "patroni.log"
        self.config_file = directory / "patroni.yml"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def postmaster_pid(self) -> int | None:
        """The pid of this node's running postmaster. postmaster.pid outlives a killed one, and its number may be
        another process's by now: only a process started on this data directory is taken."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            return None
        return pid if str(self.data_dir).encode() in command else None


class PgCluster:
    """The pair and its etcd (see the module's docstring)."""

    def __init__(self) -> None:
        self.patroni, self.etcd, self.bin_dir = require_pgcluster()
        self.as_postgres = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="pgcluster-"))
        self.passwords = {u: secrets.token_urlsafe(16) for u in ("superuser", "replication", "rewind")}
        self.authority_password = secrets.token_urlsafe(16)
        self.passfile = self.directory / "authority.pgpass"
        self.nodes: dict[str, Node] = {}
        self.etcd_proc: subprocess.Popen[bytes] | None = None
        self.etcd_ports = (0, 0)
        self.killed_at: dict[str, float] = {}
        self.frozen: set[str] = set()

    # --- starting ------------------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> PgCluster:
        """etcd, both nodes, a leader with a streaming synchronous standby, and the authority's role and database.
        A start whose free port another process took meanwhile starts again on other ports, a few times."""
        for _ in range(3):
            try:
                self._start(timeout)
            except _PortTaken:
                self._stop_processes()
                for entry in self.directory.iterdir():
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                continue
            except BaseException:
                self.stop()
                raise
            return self
        self.stop()
        raise RuntimeError("pgcluster: no free ports taken in 3 tries")

    def _start(self, timeout: float) -> None:
        if self.as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
        self._start_etcd()
        for name in NODES:
            node = self.nodes[name] = Node(name, self.directory / name)
            node.directory.mkdir(mode=0o700)
            if self.as_postgres:
                shutil.chown(node.directory, "postgres", "postgres")
            self._write_config(node)
            self._start_node(node)

        def ready() -> bool:
            # PostgreSQL's or the REST API's port taken: Patroni may retry for ever, or exit
            if any("address already in use" in n.log().lower() for n in self.nodes.values()):
                raise _PortTaken
            return self._pair_ready()

        _wait_for("a leader and a synchronous standby streaming", ready, timeout, self.logs)
        self._make_authority_role()

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_ports = (client, peer)
        log_file = self.directory / "etcd.log"
        data = self.directory / "etcd"
        with log_file.open("ab") as log:
            self.etcd_proc = subprocess.Popen(
                [self.etcd, "--name", "etcd1", "--data-dir", str(data),
                 "--listen-client-urls", f"http://{HOST}:{client}", "--advertise-client-urls", f"http://{HOST}:{client}",
                 "--listen-peer-urls", f"http://{HOST}:{peer}", "--initial-advertise-peer-urls", f"http://{HOST}:{peer}",
                 "--initial-cluster", f"etcd1=http://{HOST}:{peer}", "--initial-cluster-state", "new",
                 "--initial-cluster-token", self.directory.name],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def healthy() -> bool:
            if self.etcd_proc is not None and self.etcd_proc.poll() is not None:
                text = log_file.read_text(errors="replace")
                if "address already in use" in text:
                    raise _PortTaken
                raise RuntimeError(f"etcd exited with {self.etcd_proc.returncode}:\n{text}")
            return (self._get(f"http://{HOST}:{client}/health") or {}).get("health") == "true"

        _wait_for("etcd healthy", healthy, 30, lambda: log_file.read_text(errors="replace"))

    def _write_config(self, node: Node) -> None:
        config = derive_config(yaml.safe_load(SHIPPED.read_text()), name=node.name, api_port=node.api_port,
                               pg_port=node.pg_port, etcd_hosts=f"{HOST}:{self.etcd_ports[0]}",
                               directory=node.directory, bin_dir=self.bin_dir, passwords=self.passwords)
        node.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        node.config_file.chmod(0o600)
        if self.as_postgres:
            shutil.chown(node.config_file, "postgres", "postgres")

    def _start_node(self, node: Node) -> None:
        command = [self.patroni, str(node.config_file)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(node.directory)}
        if self.as_postgres:
            # setpriv runs patroni itself (no process in between): the pid is Patroni's, whose death is the box's.
            command = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *command]
        with node.log_file.open("ab") as log:
            node.proc = subprocess.Popen(command, cwd=node.directory, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    # --- what Patroni reports ------------------------------------------------------------------------

    @staticmethod
    def _get(url: str) -> Any:
        """The JSON answer of a GET (also on an error status: Patroni's health answers 503 with a body), or None
        when nothing answers."""
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            with contextlib.suppress(ValueError):
                return json.loads(e.read())
            return None
        except (OSError, ValueError):
            return None

    def cluster(self, via: str | None = None) -> dict[str, Any] | None:
        """Patroni's /cluster (its members, their roles and states), asked of `via` or of any live node."""
        for node in ([self.nodes[via]] if via else self.nodes.values()):
            if node.proc is not None and node.proc.poll() is None and node.name not in self.frozen:
                answer = self._get(f"http://{HOST}:{node.api_port}/cluster")
                if answer:
                    return answer
        return None

    def dynamic_config(self) -> dict[str, Any]:
        """The cluster's configuration in etcd (Patroni's /config): what `patronictl edit-config` edits."""
        for node in self.nodes.values():
            if node.proc is not None and node.name not in self.frozen:
                answer = self._get(f"http://{HOST}:{node.api_port}/config")
                if answer:
                    return dict(answer)
        raise AssertionError("no node answers /config")

    def patronictl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`patronictl -c CONFIG ARGS` with the first node's configuration, as the runbook runs it on a box."""
        config = next(iter(self.nodes.values())).config_file
        return subprocess.run([shutil.which("patronictl") or "/usr/bin/patronictl", "-c", str(config), *args],
                              capture_output=True, text=True, timeout=30)

    @property
    def etcd_endpoints(self) -> str:
        return f"{HOST}:{self.etcd_ports[0]}"

    def roles(self) -> dict[str, tuple[str, str]]:
        """Each member's (role, state) as Patroni reports them: leader / sync_standby / replica, running / ..."""
        answer = self.cluster() or {}
        return {m["name"]: (m["role"], m.get("state", "")) for m in answer.get("members", [])}

    def _check_processes(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                raise RuntimeError(f"patroni {node.name} exited with {node.proc.returncode}:\n{node.log()[-4000:]}")

    def _pair_ready(self) -> bool:
        """A leader accepting writes and the other node its synchronous standby, streaming."""
        self._check_processes()
        roles = self.roles()
        leaders = [n for n, (role, state) in roles.items() if role == "leader" and state == "running"]
        standbys = [n for n, (role, state) in roles.items() if role == "sync_standby" and state in ("running",
                                                                                                     "streaming")]
        if len(leaders) != 1 or len(standbys) != 1:
            return False
        return self._streaming_sync(leaders[0], standbys[0])

    def _streaming_sync(self, leader: str, standby: str) -> bool:
        """The leader's PostgreSQL sends to `standby` synchronously (pg_stat_replication)."""
        import psycopg

        try:
            with psycopg.connect(self.dsn(leader, superuser=True), connect_timeout=2, autocommit=True) as conn:
                row = conn.execute("SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
                                   (standby,)).fetchone()
        except psycopg.Error:
            return False
        return row == ("streaming", "sync")

    def leader(self) -> str:
        """The name of the node Patroni reports as the leader."""
        names = [n for n, (role, _) in self.roles().items() if role == "leader"]
        if len(names) != 1:
            raise AssertionError(f"not one leader: {self.roles()}")
        return names[0]

    def replica(self) -> str:
        """The name of the other node."""
        leader = self.leader()
        return next(n for n in NODES if n != leader)

    # --- how clients reach it ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The authority's URL: both nodes, whichever accepts writes, the password from the passfile; a box that does
        not answer is given up after 3 s for the next (docs/link-at-scale.md)."""
        hosts = ",".join(f"{HOST}:{self.nodes[n].pg_port}" for n in NODES)
        return (f"postgresql://{AUTHORITY_USER}@{hosts}/{AUTHORITY_DB}"
                f"?target_session_attrs=read-write&connect_timeout=3&passfile={self.passfile}")

    def dsn(self, node: str, *, superuser: bool = False) -> str:
        """A connection to one node's PostgreSQL alone, as the authority (its database) or as the superuser."""
        port = self.nodes[node].pg_port
        if superuser:
            return f"host={HOST} port={port} dbname=postgres user=postgres password={self.passwords['superuser']}"
        return f"host={HOST} port={port} dbname={AUTHORITY_DB} user={AUTHORITY_USER} passfile={self.passfile}"

    def _make_authority_role(self) -> None:
        """The runbook's step 4 as it is written there (its commands run on the leader as the superuser, with the
        programs of PostgreSQL's bin directory and a random password), and the passfile its clients read (libpq
        ignores one others may read)."""
        import psycopg

        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGHOST": HOST,
               "PGPORT": str(self.nodes[self.leader()].pg_port), "PGUSER": "postgres", "PGDATABASE": "postgres",
               "PGPASSWORD": self.passwords["superuser"]}
        for line in runbook_role_commands():
            words = shlex.split(line.replace("the-password", self.authority_password))
            if words[:3] == ["sudo", "-u", "postgres"]:
                words = words[3:]
            words[0] = os.path.join(self.bin_dir, words[0])
            done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise RuntimeError(f"the runbook's {line!r}: exit {done.returncode}: {done.stderr.strip()}")
        self.passfile.write_text(f"{HOST}:*:{AUTHORITY_DB}:{AUTHORITY_USER}:{self.authority_password}\n")
        self.passfile.chmod(0o600)

        def replayed() -> bool:  # on the standby too (it replays a moment after it received)
            try:
                psycopg.connect(self.dsn(self.replica()), connect_timeout=2).close()
            except psycopg.Error:
                return False
            return True

        _wait_for("the authority's database on the standby", replayed, 30, self.logs)

    # --- a box dies, a box comes back ----------------------------------------------------------------

    def kill(self, name: str) -> None:
        """The death of `name`'s box: SIGKILL of its Patroni and of all its PostgreSQL processes at once."""
        node = self.nodes[name]
        self.killed_at[name] = time.monotonic()
        self.frozen.discard(name)
        self._kill_box(node)

    def _kill_box(self, node: Node) -> None:
        roots = [pid for pid in (node.proc.pid if node.proc else None, node.postmaster_pid()) if pid and _alive(pid)]
        for pid in roots:  # frozen first: neither forks a process the kill would miss
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        ppids = _ppids()
        victims = set(roots)
        while True:
            more = {pid for pid, parent in ppids.items() if parent in victims} - victims
            if not more:
                break
            victims |= more
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if node.proc is not None:
            node.proc.wait(10)
            node.proc = None
        _wait_for(f"{node.name}'s processes gone", lambda: not any(_alive(p) for p in victims), 10)

    def freeze(self, name: str) -> None:
        """`name`'s Patroni hangs (SIGSTOP) while its PostgreSQL runs on: a leader that no longer renews its key in
        etcd but still has its sessions (a stalled process). Its watchdog would reset the box: `kill` it. (Let go
        on, Patroni 3.0.2 may take the leader key back from the node promoted meanwhile, with its stale view of
        the cluster: patroni#2689, fixed in 3.0.3.)"""
        node = self.nodes[name]
        assert node.proc is not None
        self.killed_at[name] = time.monotonic()
        node.proc.send_signal(signal.SIGSTOP)
        self.frozen.add(name)

    def heal(self, timeout: float = 60.0) -> None:
        """Both nodes back (a frozen one killed, then restarted) and streaming synchronously: where each test starts."""
        for name in sorted(self.frozen):
            self.kill(name)  # as its watchdog would
        for name, node in self.nodes.items():
            if node.proc is None:
                self.restart(name, timeout)
        _wait_for("a leader and a synchronous standby streaming", self._pair_ready, timeout, self.logs)

    def wait_leader(self, name: str, timeout: float = 60.0) -> float:
        """Wait until `name` is the leader and accepts writes through `url`; the seconds since the last kill."""
        import psycopg

        killed = max(self.killed_at.values(), default=time.monotonic())

        def writable_leader() -> bool:
            self._check_processes()
            if self.roles().get(name, ("", ""))[0] != "leader":
                return False
            try:
                with psycopg.connect(self.dsn(name, superuser=True), connect_timeout=2, autocommit=True) as conn:
                    return conn.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,)
            except psycopg.Error:
                return False

        _wait_for(f"{name} the writable leader", writable_leader, timeout, self.logs)
        return time.monotonic() - killed

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Start `name`'s Patroni again (its box is back): it rejoins as the synchronous standby, rewound with
        pg_rewind (or made again from the leader), and returns once it streams synchronously."""
        self.start_node(name)
        self.wait_rejoined(name, timeout)

    def start_node(self, name: str) -> None:
        """Start `name`'s Patroni again (its box is back), waiting for nothing: what it becomes is Patroni's."""
        node = self.nodes[name]
        if node.proc is not None:
            raise RuntimeError(f"{name} is running")
        self._start_node(node)

    def wait_rejoined(self, name: str, timeout: float = 60.0) -> None:
        """Wait until `name` is the synchronous standby of the leader and streams from it."""

        def rejoined() -> bool:
            self._check_processes()
            roles = self.roles()
            leader = [n for n, (role, _) in roles.items() if role == "leader"]
            return (roles.get(name, ("", ""))[0] == "sync_standby" and len(leader) == 1
                    and self._streaming_sync(leader[0], name))

        _wait_for(f"{name} the streaming synchronous standby", rejoined, timeout, self.logs)

    # --- the end -------------------------------------------------------------------------------------

    def logs(self) -> str:
        """The last lines of every node's log (PostgreSQL's included), for a failure's message."""
        return "\n".join(f"--- {n.name} ---\n{n.log()[-3000:]}" for n in self.nodes.values())

    def _stop_processes(self) -> None:
        # The data is thrown away: Patroni killed (its own stop takes seconds, a checkpoint and a handover), then
        # an immediate shutdown of each PostgreSQL, which still removes its shared memory (a SIGKILL would leave
        # the segments behind); what is left after that is killed.
        self.frozen.clear()
        for node in self.nodes.values():
            if node.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    node.proc.kill()
                node.proc.wait(10)
                node.proc = None
        postmasters = [pid for pid in (n.postmaster_pid() for n in self.nodes.values()) if pid and _alive(pid)]
        for pid in postmasters:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGQUIT)
        with contextlib.suppress(TimeoutError):
            _wait_for("PostgreSQL stopped", lambda: not any(_alive(p) for p in postmasters), 10)
        for node in self.nodes.values():
            self._kill_box(node)
        if self.etcd_proc is not None:
            self.etcd_proc.terminate()
            try:
                self.etcd_proc.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd_proc.kill()
                self.etcd_proc.wait(10)
            self.etcd_proc = None
        self.nodes = {}

    def stop(self) -> None:
        """Stop every process (whatever state the test left) and remove the directory."""
        try:
            self._stop_processes()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def running_pgcluster() -> Iterator[PgCluster]:
    """A started pair (skipped without the packages), stopped at the end however the test ends."""
    cluster = PgCluster()
    try:
        yield cluster.start()
    finally:
        cluster.stop()

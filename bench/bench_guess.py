"""Guess-flood benchmark: a table's polls and watchdog while clients guess supervisors' secrets.

    .venv/bin/python bench/bench_guess.py            # print the results
    .venv/bin/python bench/bench_guess.py --write    # and put them in docs/benchmarks.md ("Supervisor secret guesses")
    .venv/bin/python bench/bench_guess.py --quick    # short windows (a smoke run)

The table is the example Caribbean Stud table on the seven-seat rig at 19,200 baud, the daemon
(`progressived --config FILE`) a child process with its supervisor's credential at the default cost (scrypt,
N=2^15, r=8, p=3: about a third of a second a check), its systemd watchdog on (WATCHDOG_USEC: a ping every
second, received on its notify socket). Three windows of the same length, one after the other:

- idle: nothing asks the daemon anything (the baseline);
- one user: 8 connections of one user pipeline wrong secrets for the supervisor's name and for made-up names,
  as fast as they are answered; the user is locked out after its 5th wrong guess (controller.service.auth), so most
  answers are refusals that hash nothing;
- many users (run as root: 24 connections, each opened by a process of a user of its own, the socket opened to
  them):
  every user's 5 guesses are checked before its lock-out, so the daemon's checking thread is busy the whole
  window, scrypt after scrypt: the worst a socket group can do.

Measured in each window: the poll cycle, from the simulated lock-out button's side (the time between two reads
of it, once a cycle), and the watchdog interval, from the notify socket's side (the time between two
WATCHDOG=1). The goal (docs/security.md): with a flood, the p99 of each stays within 1.1x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

from controller.config.credentials import hash_credential
from hil.rig import Rig

from bench_poll import percentile
from benchdoc import write_section
from tableproc import RIG, TableProcess

SECTION = "## Supervisor secret guesses"
SUPERVISOR, SECRET = "floor-1", "the-real-s3cret"
GOAL = 1.1
WATCHDOG_USEC = 2_000_000  # a ping every second
CONNECTIONS = 6  # below the daemon's 8 connections a user
USERS = 24  # with root: guessing users, each its own process

GUESSER = r"""
import asyncio, json, os, socket, sys, time
sock, seconds, tag, k = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
uids = [int(u) for u in sys.argv[5].split(",")] if len(sys.argv) > 5 else []

def connect_as(uid):
    # the peer of a connection is who connected: a child of that user connects and hands the socket over
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        socket.send_fds(b, [b"x"], [s.fileno()])
        os._exit(0)
    _msg, fds, _flags, _addr = socket.recv_fds(a, 1, 1)
    os.waitpid(pid, 0)
    return socket.socket(fileno=fds[0])

async def guesses(conn, i):
    if conn is None:
        reader, writer = await asyncio.open_unix_connection(sock)
    else:
        reader, writer = await asyncio.open_unix_connection(sock=conn)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        name = "floor-1" if n % 2 else f"probe-{tag}-{i}"
        req = {"op": "approve", "id": n, "args": {"claim_id": "x", "supervisor": name, "secret": f"guess-{tag}-{i}-{n}"}}
        writer.write((json.dumps(req) + "\n").encode())
        await writer.drain()
        line = await reader.readline()
        if not line:
            break
        n += 1
    writer.close()
    return n

async def main():
    conns = [connect_as(u) for u in uids] or [None] * k
    print(sum(await asyncio.gather(*(guesses(c, i) for i, c in enumerate(conns)))))
asyncio.run(main())
"""


class Watch:
    """Timestamps of the lock-out button's reads (the rig's side) and of the daemon's watchdog pings."""

    def __init__(self, rig: Rig, notify: socket.socket) -> None:
        self.lockout = rig.simulator("lockout")
        self.notify = notify
        self.polls: list[float] = []
        self.pings: list[float] = []
        self._tasks: list[asyncio.Task] = []

    async def __aenter__(self) -> Watch:
        self._tasks = [asyncio.create_task(self._polls()), asyncio.create_task(self._pings())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _polls(self) -> None:
        while True:
            n = self.lockout.requests
            await self.lockout.wait_until(lambda n=n: self.lockout.requests > n, timeout=60)
            self.polls.append(time.monotonic())

    async def _pings(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data = await loop.sock_recv(self.notify, 4096)
            if b"WATCHDOG=1" in data:
                self.pings.append(time.monotonic())


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(times)]


def summary(times: list[float]) -> dict:
    g = gaps(times)
    if not g:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    return {"n": len(g), "p50": percentile(g, 0.5), "p99": percentile(g, 0.99), "max": max(g)}


async def window(rig: Rig, t: TableProcess, seconds: float, flood: list[list[str]] | None) -> dict:
    procs: list[subprocess.Popen] = []
    async with Watch(rig, t._notify) as w:
        cpu0 = _cpu(t.pid)
        t0 = time.monotonic()
        for argv in flood or []:
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT))
        await asyncio.sleep(seconds)  # the window: the watchers record meanwhile
        guesses = 0
        for p in procs:
            out, err = await asyncio.to_thread(p.communicate, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"a guessing client failed: {err.decode()[-500:]}")
            guesses += int(out.decode().strip() or 0)
        wall = time.monotonic() - t0
        cpu = (_cpu(t.pid) - cpu0) / wall
    return {"polls": summary(w.polls), "pings": summary(w.pings), "guesses": guesses, "wall": wall,
            "daemon_cpu": cpu}


def _cpu(pid: int | None) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(seconds: float, work: Path) -> dict:
    credential = hash_credential(SECRET)  # the default: scrypt N=2^15, r=8, p=3
    async with Rig.from_file(RIG) as rig:
        def adjust(doc):
            doc["supervisors"] = [{"name": SUPERVISOR, "credential": credential}]
            return doc
        t = TableProcess.on_rig(rig, work / "table", adjust=adjust)
        t.env["WATCHDOG_USEC"] = str(WATCHDOG_USEC)
        try:
            await t.start()
            await asyncio.sleep(2.0)  # settled: the first outputs written, the first polls done
            out = {"idle": await window(rig, t, seconds, None)}
            argv = [sys.executable, "-c", GUESSER, str(t.socket), str(seconds)]
            out["one user"] = await window(rig, t, seconds, [[*argv, "u", str(CONNECTIONS)]])
            if os.geteuid() == 0:
                os.chmod(t.socket, 0o666)  # the socket group's members, as so many users
                os.chmod(t.socket.parent, 0o755)
                users = ",".join(str(60_000 + i) for i in range(USERS))
                out["many users"] = await window(rig, t, seconds, [[*argv, "m", "0", users]])
            await t.stop()
        finally:
            t.close()
    return out


def render(r: dict, seconds: float) -> str:
    idle = r["idle"]
    rows = []
    for name, w in r.items():
        poll_ratio = w["polls"]["p99"] / idle["polls"]["p99"]
        ping_ratio = w["pings"]["p99"] / idle["pings"]["p99"]
        rows.append(f"| {name} | {w['guesses']:,} | {w['polls']['p50'] * 1e3:.1f} | {w['polls']['p99'] * 1e3:.1f} | "
                    f"{poll_ratio:.2f}x | {w['pings']['p99'] * 1e3:.0f} | {w['pings']['max'] * 1e3:.0f} | "
                    f"{ping_ratio:.2f}x | {w['daemon_cpu'] * 100:.0f}% |")
    worst = max(max(w["polls"]["p99"] / idle["polls"]["p99"], w["pings"]["p99"] / idle["pings"]["p99"])
                for w in r.values())
    return "\n".join([
        SECTION,
        "",
        f"Measured {datetime.date.today().isoformat()} with Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs: the example table on the seven-seat rig at 19,200 baud, the daemon a child process "
        "whose supervisor's credential is at the default cost (scrypt, N=2^15, r=8, p=3), its watchdog pinging "
        f"every second; three windows of {seconds:.0f} s, one after the other. The poll cycle is measured at the "
        "simulated lock-out button (the time between two reads of it, once a cycle), the watchdog interval at the "
        "notify socket (between two WATCHDOG=1). One user: 6 connections of one user pipelining wrong secrets "
        "(locked out after 5). Many users: 24 connections of 24 users (each checked 5 times "
        "before its lock-out: the checking thread busy throughout).",
        "",
        "| window | guesses answered | poll cycle p50 ms | p99 ms | p99 vs idle | watchdog p99 ms | max ms | "
        "p99 vs idle | daemon CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Goal: every p99 within {GOAL}x of idle; worst here {worst:.2f}x"
        f" ({'met' if worst <= GOAL else 'missed'}). Reproduce: `.venv/bin/python bench/bench_guess.py --write` "
        "(as root for the many-users window).",
    ])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    a = p.parse_args()
    seconds = 5.0 if a.quick else a.seconds
    with tempfile.TemporaryDirectory(prefix="bench-guess-") as d:
        os.chmod(d, 0o755)  # the guessing users reach the socket below it
        result = asyncio.run(run(seconds, Path(d)))
    text = render(result, seconds)
    print(text)
    if a.write:
        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

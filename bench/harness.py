"""The harness the table benchmarks share (bench_table.py, bench_retries.py): the seven-seat rig at a baud rate and
`progressived` on it in a child process (tests/support/tableproc.py), the daemon's JSON log read as it grows, the machine
the figures were measured on, and the command line every benchmark takes (`--seed`, `--quick`, `--write`) with
its results written into their sections of docs/benchmarks.md.

A benchmark puts the tree, tests/support/ and bench/ on sys.path before it imports this module."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

from controller.money import format_cents
from hil.rig import Rig
from hil.rig_config import load_rig_config

from tableproc import TableProcess

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
SEATS = 7
STARTED_S = 15.0  # at most, for the daemon to show its meters on the sign after start-up


@contextlib.contextmanager
def ready_child(args: list[str]) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A benchmark's helper process (`python ARGS`: a rig, or a bare interpreter to measure against), yielded once
    its first line says READY (with the words after it); at the end its stdin is closed, which is its signal to
    stop, and it is killed if it has not stopped within 10 s."""
    child = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=ROOT)
    try:
        assert child.stdout is not None and child.stdin is not None
        line = child.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"{' '.join(args)[:60]}: did not start: {line}")
        yield child, line
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def versions() -> str:
    """What the figures were measured with: Python, pymodbus, SQLite, the machine."""
    import sqlite3

    import pymodbus

    return (f"Python {platform.python_version()}, pymodbus {pymodbus.__version__}, SQLite "
            f"{sqlite3.sqlite_version}, {platform.machine()}, {os.cpu_count()} CPUs")


def load() -> float:
    """The machine's load average over the last minute (the sections say how busy it was)."""
    return os.getloadavg()[0]


def timestamp(entry: dict[str, Any]) -> float:
    """The wall-clock time of one of the daemon's JSON log lines."""
    return datetime.datetime.fromisoformat(entry["timestamp"]).timestamp()


class Log:
    """The daemon's JSON log lines, read on from where the last look ended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.lines: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].decode(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    self.lines.append(json.loads(line))
        return self.lines

    def when(self, event: str, rid: str) -> float | None:
        """The time of the first `event` line of round `rid`, or None: not logged yet."""
        for e in self.read():
            if e.get("event") == event and e.get("round") == rid:
                return timestamp(e)
        return None

    def between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """The lines logged from wall-clock time `t0` to before `t1`."""
        return [e for e in self.read() if "timestamp" in e and t0 <= timestamp(e) < t1]


# --- the rig and the daemon on it ---------------------------------------------------------------------------


def rig_at(baud: int) -> Rig:
    """The seven-seat rig, its RS-485 bus at `baud` (the rig configuration changed in memory)."""
    cfg = load_rig_config(RIG)
    rtu = [bus.model_copy(update={"baud": baud}) for bus in cfg.rtu]
    return Rig(cfg.model_copy(update={"rtu": rtu}), source=str(RIG))


def sign_amounts(rig: Rig) -> tuple[Any, ...]:
    return tuple(rig.sign().get("amounts") or ())


async def sign_matches(rig: Rig, t: TableProcess) -> bool:
    """The sign shows the daemon's meters (slot 1 main, slot 2 bonus: the configuration's order)."""
    meters = {m["meter"]: m["amount"] for m in (await t.control("status"))["meters"]}
    slots = dict(sign_amounts(rig))
    return all(isinstance(slots.get(i), int) and format_cents(slots[i]) == meters[m]
               for i, m in ((1, "main"), (2, "bonus")))


async def device_up(t: TableProcess, name: str) -> bool:
    return any(d["id"] == name and d["up"] for d in (await t.control("status"))["devices"])


async def until_true(check: Callable[[], Awaitable[bool]], timeout: float, what: Callable[[], str]) -> None:
    """Ask `check` every 50 ms until it answers True; after `timeout` seconds, RuntimeError saying `what()`."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what()} within {timeout:g} s")
        await asyncio.sleep(0.05)


async def wait_device_up(t: TableProcess, name: str, timeout: float) -> None:
    await until_true(lambda: device_up(t, name), timeout, lambda: f"{name} not up again")


Adjust = Callable[[dict[str, Any]], dict[str, Any] | None]  # edits the table's raw configuration document


@contextlib.asynccontextmanager
async def table_on(baud: int, directory: Path, adjust: Adjust | None = None,
                   health_interval: float | None = None) -> AsyncIterator[tuple[Rig, TableProcess]]:
    """The rig at `baud` and a daemon on it (its configuration's raw document changed by `adjust`), every
    device up and the sign showing the meters."""
    async with rig_at(baud) as rig:
        t = TableProcess.on_rig(rig, directory, adjust=adjust, health_interval=health_interval)
        try:
            await t.start()
            await until_true(lambda: sign_matches(rig, t), STARTED_S,
                             lambda: f"the sign does not show the meters ({sign_amounts(rig)})")
            yield rig, t
            await t.stop()
        finally:
            t.close()


# --- the command line and the results ------------------------------------------------------------------------


def parser(doc: str | None, *, sections: str) -> argparse.ArgumentParser:
    """The benchmark's parser, with the options every benchmark takes; `sections` names what --write writes."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few samples, short windows")
    ap.add_argument("--write", action="store_true", help=f"write {sections} into docs/benchmarks.md")
    return ap


def parse(ap: argparse.ArgumentParser, quick: Callable[[argparse.Namespace], None]) -> argparse.Namespace:
    """The arguments, `quick` applied to them for a smoke run (whose numbers are never written); the rig's own
    info lines silenced."""
    args = ap.parse_args()
    if args.quick:
        if args.write:
            ap.error("--quick is a smoke run: its numbers are not written")
        quick(args)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return args


def report(texts: list[tuple[str, str]], write: bool) -> None:
    """Print each section's text; with `write`, put each into docs/benchmarks.md under its heading."""
    print()
    for _, text in texts:
        print(text)
    if write:
        from benchdoc import write_section

        for heading, text in texts:
            write_section(BENCHMARKS, heading, text)


def today() -> str:
    return datetime.date.today().isoformat()


__all__ = ["BENCHMARKS", "RIG", "ROOT", "SEATS", "STARTED_S", "TABLE", "Adjust", "Log", "device_up", "load", "parse",
           "parser", "report", "rig_at", "sign_amounts", "sign_matches", "table_on", "timestamp", "today", "until_true",
           "versions", "wait_device_up"]

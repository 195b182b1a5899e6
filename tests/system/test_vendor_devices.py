"""Devices a vendor built from docs/register-maps.md and the shipped maps alone (tests/support/vendor/: C on
libmodbus, its authors never read the drivers), against an independent master (Debian's mbpoll), the
conformance kit and a real table daemon.

The devices run in one process on one Modbus TCP port, like a gateway, one unit id each; the test places and
lifts chips and presses the button on the process's standard input, and reads what the outputs show from its
`dump` line (the lights, the lamp, the sign's slots and message)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tableproc import BIN, TableProcess, credential_for

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "support" / "vendor" / "pjdev.c"
MBPOLL = shutil.which("mbpoll")
CC = shutil.which("cc")
PKG_CONFIG = shutil.which("pkg-config")

SEAT, SINGLE_SEAT, LOCKOUT, SIGN = 1, 2, 20, 30


def _libmodbus_flags() -> list[str] | None:
    if PKG_CONFIG is None:
        return None
    r = subprocess.run([PKG_CONFIG, "--cflags", "--libs", "libmodbus"], capture_output=True, text=True, check=False)
    return r.stdout.split() if r.returncode == 0 else None


FLAGS = _libmodbus_flags()
pytestmark = pytest.mark.skipif((CC is None or FLAGS is None or MBPOLL is None) and not os.environ.get("CI"),
                                reason="a C compiler, Debian's libmodbus-dev and mbpoll are needed (CI installs them)")


@pytest.fixture(scope="module")
def pjdev(tmp_path_factory) -> Path:
    """The vendor's device program, compiled from its source."""
    exe = tmp_path_factory.mktemp("vendor") / "pjdev"
    r = subprocess.run([CC or "cc", "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-O2",
                        "-o", str(exe), str(SOURCE), *(FLAGS or [])], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return exe


class Devices:
    """The vendor's devices in a child process: `command` one line of its standard input, `dump` what the
    outputs show, `wait` on that with a deadline."""

    def __init__(self, exe: Path, *specs: str) -> None:
        self.proc = subprocess.Popen([str(exe), *specs], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.startswith("listening "), first + (self.proc.stderr.read() if self.proc.stderr else "")
        self.port = int(first.split()[1])

    def command(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def act(self, line: str) -> None:
        reply = self.command(line)
        assert reply == "ok", f"{line}: {reply}"

    def dump(self) -> dict[str, Any]:
        return json.loads(self.command("dump"))

    def unit(self, unit: int) -> dict[str, Any]:
        return self.dump()[str(unit)]

    async def wait(self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 10.0) -> dict[str, Any]:
        """Poll the dump until `pred` holds (the devices raise no event a test could wait on)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.dump()
            if pred(state):
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: the devices show {state}")
            await asyncio.sleep(0.02)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


@pytest.fixture
def devices(pjdev) -> Iterator[Callable[..., Devices]]:
    made: list[Devices] = []

    def start(*specs: str) -> Devices:
        d = Devices(pjdev, *specs)
        made.append(d)
        return d

    yield start
    for d in made:
        d.close()


# --- an independent master: mbpoll ----------------------------------------------------------------------------


def mbpoll(port: int, unit: int, kind: str, address: int, *values: int, count: int = 1,
           timeout: float = 2.0, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """mbpoll once against a unit, addresses from 0 (PDU addressing); with values it writes them."""
    args = [MBPOLL or "mbpoll", "-m", "tcp", "-p", str(port), "-a", str(unit), "-t", kind, "-r", str(address),
            "-0", "-1", "-o", str(timeout), *options]
    if not values:
        args += ["-c", str(count)]
    return subprocess.run([*args, "127.0.0.1", *map(str, values)], capture_output=True, text=True, timeout=20,
                          check=False)


def read(port: int, unit: int, kind: str, address: int, count: int = 1) -> list[int]:
    """What mbpoll reads, by address ("[4096]: 0x504A" lines)."""
    r = mbpoll(port, unit, kind, address, count=count)
    assert r.returncode == 0, r.stdout + r.stderr
    values = {}
    for line in r.stdout.splitlines():
        if line.startswith("[") and "]:" in line:
            addr, value = line.split("]:", 1)
            values[int(addr[1:])] = int(value.split()[0], 0)
    return [values[a] for a in range(address, address + count)]


def refused(port: int, unit: int, kind: str, address: int, *values: int, count: int = 1) -> str:
    """The exception mbpoll was answered with."""
    r = mbpoll(port, unit, kind, address, *values, count=count)
    assert r.returncode != 0, r.stdout
    return r.stdout + r.stderr


def text(registers: list[int]) -> str:
    """An identity block: two characters a register, the first in the high byte, padded with zeros."""
    return b"".join(r.to_bytes(2, "big") for r in registers).rstrip(b"\0").decode("ascii")


def test_mbpoll_reads_and_writes_each_device_as_the_maps_say(devices):
    d = devices(f"seat:{SEAT}", f"lockout:{LOCKOUT}", f"sign:{SIGN}")
    p = d.port
    # the seat: no chip, then a chip of $1,234.56 (32-bit cents, high word first)
    assert read(p, SEAT, "3", 0, 3) == [0, 0, 0]
    d.act(f"place {SEAT} 123456")
    assert read(p, SEAT, "3", 0, 3) == [1, 123456 >> 16, 123456 & 0xFFFF]
    r = mbpoll(p, SEAT, "3:int", 1, options=("-B",))  # mbpoll's own 32-bit reading, high word first
    assert "[1]: \t123456" in r.stdout, r.stdout
    d.act(f"lift {SEAT}")
    assert read(p, SEAT, "3", 0, 3) == [0, 0, 0]
    assert text(read(p, SEAT, "3:hex", 4096, 8)) == "PJ-SEAT-1"
    # its lights: one coil (function 5), both (function 15), read back (function 1)
    assert mbpoll(p, SEAT, "0", 0, 1).returncode == 0
    assert d.unit(SEAT)["accepted"] is True and d.unit(SEAT)["win"] is False
    assert mbpoll(p, SEAT, "0", 0, 0, 1).returncode == 0
    assert read(p, SEAT, "0", 0, 2) == [0, 1]
    assert (d.unit(SEAT)["accepted"], d.unit(SEAT)["win"]) == (False, True)
    # the lock-out: a press counter and a lamp
    assert read(p, LOCKOUT, "3", 0) == [0]
    d.act(f"press {LOCKOUT}")
    d.act(f"press {LOCKOUT}")
    assert read(p, LOCKOUT, "3", 0) == [2]
    assert mbpoll(p, LOCKOUT, "0", 0, 1).returncode == 0
    assert read(p, LOCKOUT, "0", 0) == [1] and d.unit(LOCKOUT)["lamp"] is True
    assert text(read(p, LOCKOUT, "3:hex", 4096, 8)) == "PJ-LOCKOUT-1"
    # the sign: slot 2 = $10,000.15, then a message in one request (code, seat, amount, table)
    assert mbpoll(p, SIGN, "4", 2, 1_000_015 >> 16, 1_000_015 & 0xFFFF).returncode == 0
    table = [int.from_bytes(b"VD-01\0\0\0"[i:i + 2], "big") for i in range(0, 8, 2)]
    assert mbpoll(p, SIGN, "4", 16, 1, 3, 0, 50_000, *table).returncode == 0
    sign = d.unit(SIGN)
    assert sign["slots"] == [0, 1_000_015, 0]
    assert sign["message"] == {"code": 1, "seat": 3, "amount": 50_000, "table": "VD-01"}
    assert read(p, SIGN, "4", 0, 6) == [0, 0, 1_000_015 >> 16, 1_000_015 & 0xFFFF, 0, 0]
    # written one register a request, a message shows once its code is written (the code last)
    assert mbpoll(p, SIGN, "4", 17, 5).returncode == 0
    assert d.unit(SIGN)["message"]["seat"] == 3
    assert mbpoll(p, SIGN, "4", 16, 2).returncode == 0
    assert d.unit(SIGN)["message"] == {"code": 2, "seat": 5, "amount": 50_000, "table": "VD-01"}
    assert read(p, SIGN, "4", 16, 2) == [2, 5]
    assert text(read(p, SIGN, "3:hex", 4096, 8)) == "PJ-SIGN-3"


def test_mbpoll_is_refused_outside_each_map_and_for_what_a_variant_lacks(devices):
    d = devices(f"seat:{SEAT}", f"seat:{SINGLE_SEAT},single-writes", f"lockout:{LOCKOUT}", f"sign:{SIGN},write-only")
    p = d.port
    address, function = "Illegal data address", "Illegal function"
    assert address in refused(p, SEAT, "3", 3)              # past the amount
    assert address in refused(p, SEAT, "3", 0, count=4)     # a range running past it
    assert address in refused(p, SEAT, "0", 2)              # a coil the map does not have
    assert address in refused(p, SEAT, "3", 4104)           # past the identity block
    assert function in refused(p, SEAT, "4", 0)             # no holding registers at all
    assert function in refused(p, SEAT, "1", 0)             # no discrete inputs
    assert address in refused(p, SIGN, "4", 6, 1)           # the gap between the slots and the message area
    assert address in refused(p, SIGN, "4", 4, 1, 2, 3)     # a write running into it
    assert function in refused(p, SIGN, "4", 0)             # write-only: holding registers are not read back
    assert mbpoll(p, SIGN, "4", 0, 0, 5).returncode == 0    # ...but written
    assert d.unit(SIGN)["slots"] == [5, 0, 0]
    assert function in refused(p, SINGLE_SEAT, "0", 0, 1, 1)  # no function 15...
    assert mbpoll(p, SINGLE_SEAT, "0", 1, 1).returncode == 0  # ...but 5
    assert d.unit(SINGLE_SEAT)["win"] is True
    assert address in refused(p, LOCKOUT, "0", 1, 1)
    assert d.dump()[str(SINGLE_SEAT)]["exceptions"] == {"15": 1}
    # no answer at all from a unit id nobody serves (a bus, or a gateway, with nothing there)
    r = mbpoll(p, 99, "3", 0, timeout=0.3)
    assert r.returncode != 0 and "timed out" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


# --- the conformance kit ---------------------------------------------------------------------------------------

KIT = BIN / "progressive-hil"


CODES = {0: None, 1: "WIN", 2: "PENDING", 3: "OFFLINE", 4: "CLOSED"}
CHIP = "1234.56"  # the value of the chip the kit asks the person at the bench to place


def cents(dollars: str) -> int:
    return int(Decimal(dollars.replace(",", "")) * 100)


class Bench:
    """The person at the bench the kit talks to (`--operator`): each instruction done on the vendor's device, each
    question about the sign answered from what the device shows (its dump), never from what was written."""

    def __init__(self, d: Devices, unit: int) -> None:
        self.d, self.unit = d, unit

    def __call__(self, said: str) -> str | None:
        """What to do on one of the kit's lines; the answer to type, for a question."""
        if said.rstrip().endswith("[y/n]"):
            return "y" if self.sign_shows(said) else "n"
        if m := re.search(r"place a chip of \$([\d,]+\.\d\d)", said):
            self.d.act(f"place {self.unit} {cents(m.group(1))}")
        elif "lift" in said:
            self.d.act(f"lift {self.unit}")
        elif m := re.search(r"press the lock-out button (\d+) times", said):
            for _ in range(int(m.group(1))):
                self.d.act(f"press {self.unit}")
        return None

    def sign_shows(self, question: str) -> bool:
        """'does the sign show slot 1 $10,011.11, ...; the message WIN: seat 3, $2,500.00, table BJ-01? [y/n]'"""
        sign = self.d.unit(self.unit)
        slots = {int(n): cents(v) for n, v in re.findall(r"slot (\d+) \$([\d,]+\.\d\d)", question)}
        if not slots or any(sign["slots"][n - 1] != v for n, v in slots.items()):
            return False
        message = sign["message"]
        if "no message" in question:
            return message["code"] == 0
        m = re.search(r"the message (\w+): seat (\d+), \$([\d,]+\.\d\d), table (\S*)\?", question)
        return m is not None and (CODES.get(message["code"]), message["seat"], message["amount"], message["table"]) \
            == (m.group(1), int(m.group(2)), cents(m.group(3)), m.group(4))


async def conform(d: Devices, kind: str, unit: int, *options: str) -> tuple[int, dict[str, Any], list[str]]:
    """`progressive-hil conform --operator --json` against one of the vendor's devices, a complete run with a
    person at the bench (`Bench`): the exit status, the report and what the kit said to the person. Questions
    end in "[y/n] " without a line's end, and are answered on the kit's standard input."""
    bench = Bench(d, unit)
    amount = ("--amount", CHIP) if kind == "seat" else ()
    proc = await asyncio.create_subprocess_exec(
        str(KIT), "conform", "--kind", kind, f"127.0.0.1:{d.port}", "--unit", str(unit), "--json", "--operator",
        "--operator-timeout", "10", *amount, *options,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    said: list[str] = []

    async def instructions() -> None:
        assert proc.stdin is not None and proc.stderr is not None
        pending = ""
        while chunk := await proc.stderr.read(4096):
            pending += chunk.decode(errors="replace")
            while True:
                line, nl, rest = pending.partition("\n")
                if not nl and not line.rstrip().endswith("[y/n]"):
                    break
                pending = rest
                said.append(line.strip())
                answer = bench(line)
                if answer is not None:
                    proc.stdin.write(answer.encode() + b"\n")
                    await proc.stdin.drain()

    try:
        async with asyncio.timeout(60):
            out, _ = await asyncio.gather(proc.stdout.read(), instructions())
            rc = await proc.wait()
    finally:
        if proc.returncode is None:  # the kit hung: leave nothing behind
            proc.kill()
            await proc.wait()
    assert out.strip(), f"no report (exit {rc}): " + "\n".join(said)
    return rc, json.loads(out), said


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    """Each check's outcome by name (PASS, FAIL, SKIP)."""
    return {c["name"]: str(c["outcome"]).upper() for c in report["checks"]}


def failed(report: dict[str, Any]) -> list[str]:
    return [name for name, outcome in outcomes(report).items() if outcome == "FAIL"]


@pytest.mark.parametrize(("spec", "kind", "unit", "options"), [
    (f"seat:{SEAT}", "seat", SEAT, ()),
    (f"seat:{SINGLE_SEAT},single-writes", "seat", SINGLE_SEAT, ("--writes", "single")),
    (f"seat:{SINGLE_SEAT},single-writes", "seat", SINGLE_SEAT, ()),        # auto: 15 answered exception 1
    (f"lockout:{LOCKOUT}", "lockout", LOCKOUT, ()),
    (f"sign:{SIGN}", "sign", SIGN, ()),
    (f"sign:{SIGN},write-only", "sign", SIGN, ("--read-back", "no")),
], ids=["seat", "seat-single-writes", "seat-single-writes-detected", "lockout", "sign", "sign-write-only"])
async def test_the_kit_passes_each_device_built_to_the_contract(devices, spec, kind, unit, options):
    d = devices(spec)
    rc, report, said = await conform(d, kind, unit, *options)
    assert (rc, report["verdict"], failed(report)) == (0, "PASS", []), (report, said)
    checks = outcomes(report)
    assert checks["identity"] == "PASS", checks
    assert "SKIP" not in {o for name, o in checks.items() if name.startswith("operator")}, checks  # a complete run
    if "single-writes" in spec:  # reported, not failed: the installer configures writes = "single"
        assert any("not supported" in json.dumps(c) or c["outcome"].upper() == "SKIP"
                   for c in report["checks"] if c["name"].startswith("function 15")), report["checks"]
    if kind == "lockout":
        assert d.unit(LOCKOUT)["presses"] == 3
    if kind == "sign":  # the person was asked about the display, and it showed what the kit wrote
        assert any(line.endswith("[y/n]") for line in said), said


@pytest.mark.parametrize(("spec", "check"), [
    (f"seat:{SEAT},any-address", "exception 2"),       # answers outside its map
    (f"seat:{SEAT},model=PJ-SEAT-2", "identity"),      # says another model
    (f"seat:{SEAT},low-word-first", "operator"),       # the chip's value with its words the other way round
], ids=["any-address", "wrong-model", "low-word-first"])
async def test_the_kit_fails_a_wrong_device_naming_the_check(devices, spec, check):
    d = devices(spec)
    rc, report, said = await conform(d, "seat", SEAT)
    assert (rc, report["verdict"]) == (1, "FAIL"), (report, said)
    assert failed(report) and all(name.startswith(check) for name in failed(report)), failed(report)


def test_the_bench_answers_from_what_the_sign_shows(devices):
    d = devices(f"sign:{SIGN}")
    bench = Bench(d, SIGN)
    question = "does the sign show slot 1 $10,011.11, slot 2 $0.00, slot 3 $0.00; {}? [y/n]"
    assert bench(question.format("no message")) == "n"  # the slots are 0 at power-on
    assert mbpoll(d.port, SIGN, "4", 0, 1_001_111 >> 16, 1_001_111 & 0xFFFF).returncode == 0
    assert bench(question.format("no message")) == "y"
    assert bench(question.format("the message WIN: seat 3, $25.00, table BJ-01")) == "n"


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """The daemon's metrics: (name, labels, value) of each sample."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")),
                        float(m.group(3))))
    return out


def sample(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """The one sample of `name` with these labels (among others it may have)."""
    (value,) = [v for n, ls, v in samples if n == name and labels.items() <= ls.items()] or [None]
    assert value is not None, f"no {name}{labels}: {[x for x in samples if x[0] == name]}"
    return value


# --- a table daemon with the vendor's devices ----------------------------------------------------------------


def table_doc(tmp_path: Path, port: int) -> dict[str, Any]:
    """A two-seat Caribbean Stud table cabled to the vendor's gateway as docs/configuration.md says: seat 2's
    device has no multiple writes (detected), the sign is write-only (read_back = false)."""
    def modbus(kind: str, unit: int, register_map: str, **more: Any) -> dict[str, Any]:
        return {"kind": kind, "transport": "tcp", "bus": "gateway", "unit": unit, "register_map": register_map, **more}

    return {
        "table": "VD-01", "game": "caribbean-stud", "seats": 2, "state_dir": str(tmp_path / "state"),
        "wagers": {"progressive": {"paytable": "caribbean-stud-progressive-d", "meter": "main"}},
        "meters": {"main": {"reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00", "5.00"]}},
        "cards": {"source": "dealer", "shuffler": "none"},
        "buses": {"gateway": {"transport": "tcp", "host": "127.0.0.1", "port": port}},
        "devices": {
            "seat-1": modbus("seat", SEAT, "seat-single", seats=[1]),
            "seat-2": modbus("seat", SINGLE_SEAT, "seat-single", seats=[2]),
            "lockout": modbus("lockout", LOCKOUT, "lockout"),
            "sign": modbus("sign", SIGN, "sign", read_back=False),
        },
        "supervisors": [{"name": "floor-1", "credential": credential_for("s3cret-floor")}],
    }


async def test_a_round_books_against_the_vendors_devices(devices, tmp_path):
    d = devices(f"seat:{SEAT}", f"seat:{SINGLE_SEAT},single-writes", f"lockout:{LOCKOUT}", f"sign:{SIGN},write-only")
    t = TableProcess(tmp_path / "table", table_doc(tmp_path, d.port))
    try:
        await t.start()
        # start-up (docs/register-maps.md, "Timing"): each seat's lights in one request (seat 2: function 15
        # refused, then one 5 a light), the lamp off, and the sign OFFLINE while the table is blocked (the stub
        # count due at start-up)
        state = await d.wait(lambda s: s[str(SIGN)]["message"]["code"] == 3 and s[str(SINGLE_SEAT)]["requests"].get(
            "5") == 2 and s[str(SEAT)]["requests"].get("15") == 1 and s[str(LOCKOUT)]["requests"].get("5") == 1,
            "start-up's writes")
        assert state[str(SIGN)]["message"] == {"code": 3, "seat": 0, "amount": 0, "table": "VD-01"}
        assert "5" not in state[str(SEAT)]["requests"] and state[str(SINGLE_SEAT)]["requests"]["15"] == 1, state
        # no counting shuffler: the stub is counted before the first round (docs/rounds.md)
        await t.control("stub_count", stub=52, dealt=0)
        await d.wait(lambda s: s[str(SIGN)]["slots"] == [1_000_000, 0, 0] and s[str(SIGN)]["message"]["code"] == 0,
                     "the sign shows the meter")
        d.act(f"place {SEAT} 500")
        d.act(f"place {SINGLE_SEAT} 100")
        await d.wait(lambda s: s[str(SEAT)]["accepted"] and s[str(SINGLE_SEAT)]["accepted"], "both wagers accepted")
        d.act(f"press {LOCKOUT}")
        await t.wait_round(lambda r: r["phase"] == "dealing", "booked and dealing")
        # 15% of $6.00 on the meter, at the sign (slot 1: the table's only meter); the lamp on
        state = await d.wait(lambda s: s[str(SIGN)]["slots"] == [1_000_090, 0, 0] and s[str(LOCKOUT)]["lamp"],
                             "the sign shows the booked meter")
        assert state[str(SIGN)]["message"]["code"] == 0
        r = await t.control("round")
        assert sorted((w["seat"], w["amount"]) for w in r["wagers"]) == [(1, "5.00"), (2, "1.00")]
        status = await t.control("status")
        assert status["blocks"] == [] and status["seats_disabled"] == [], status
        assert {dev["id"]: (dev["up"], dev["model"], dev["identity"]) for dev in status["devices"]} == {
            "seat-1": (True, "PJ-SEAT-1", "checked"), "seat-2": (True, "PJ-SEAT-1", "checked"),
            "lockout": (True, "PJ-LOCKOUT-1", "checked"), "sign": (True, "PJ-SIGN-3", "checked")}
        # what the table cannot verify, and how it learnt to write to seat 2, in status and the metrics
        assert {dev["id"]: (dev["writes"], dev["read_back"]) for dev in status["devices"]} == {
            "seat-1": ("multiple", True), "seat-2": ("single (detected)", True),
            "lockout": ("multiple", True), "sign": ("multiple", False)}, status["devices"]
        metrics = await asyncio.to_thread(scrape, t.metrics_url)
        assert sample(metrics, "progressive_device_read_back", device="sign") == 0
        assert sample(metrics, "progressive_device_read_back", device="seat-2") == 1
        assert sample(metrics, "progressive_device_writes_info", device="seat-1", mode="multiple") == 1
        # the drivers' state is copied into the metrics every 5 s (DEVICE_METRICS_S): seat 2's mode within that
        deadline = asyncio.get_running_loop().time() + 15.0
        while True:
            modes = {ls.get("mode"): v for n, ls, v in metrics
                     if n == "progressive_device_writes_info" and ls.get("device") == "seat-2"}
            if modes == {"single (detected)": 1}:  # and no longer "multiple"
                break
            assert asyncio.get_running_loop().time() < deadline, f"the metric says {modes}, not single (detected)"
            await asyncio.sleep(0.5)  # polling the metrics endpoint, which has no event to wait on
            metrics = await asyncio.to_thread(scrape, t.metrics_url)
        # seat 2 answered function 15 with exception 1 and was written coil by coil from then on; the sign
        # was never read back
        single = d.unit(SINGLE_SEAT)
        assert single["exceptions"].get("15", 0) >= 1 and single["requests"].get("5", 0) >= 2, single
        assert "3" not in d.unit(SIGN)["requests"], d.unit(SIGN)
        await t.stop()
    finally:
        t.close()


async def test_a_write_only_sign_unplugged_blocks_the_table_and_shows_the_meters_again_once_back(devices, tmp_path):
    d = devices(f"seat:{SEAT}", f"seat:{SINGLE_SEAT},single-writes", f"lockout:{LOCKOUT}", f"sign:{SIGN},write-only")
    t = TableProcess(tmp_path / "table", table_doc(tmp_path, d.port))
    try:
        await t.start()
        await t.control("stub_count", stub=52, dealt=0)
        await d.wait(lambda s: s[str(SIGN)]["slots"] == [1_000_000, 0, 0], "the sign shows the meter")
        d.act(f"unplug {SIGN}")
        await t.wait_status(lambda s: any(b["block"] == "device" for b in s["blocks"]), "the table blocked")
        d.act(f"plug {SIGN}")  # from power-on: slots 0 until the table writes them again
        await t.wait_status(lambda s: s["blocks"] == [] and all(x["up"] for x in s["devices"]),
                           "the sign back, the table open")
        state = await d.wait(lambda s: s[str(SIGN)]["slots"] == [1_000_000, 0, 0], "the sign shows the meter again")
        assert state[str(SIGN)]["message"]["code"] == 0
        assert "3" not in state[str(SIGN)]["requests"], state[str(SIGN)]  # never read back, even while down
        await t.stop()
    finally:
        t.close()


async def test_a_device_that_says_another_model_stays_down_with_nothing_written_until_the_right_one_is_in(
        devices, tmp_path):
    d = devices(f"seat:{SEAT}", f"seat:{SINGLE_SEAT},model=PJ-SEAT-2", f"lockout:{LOCKOUT}", f"sign:{SIGN}")
    doc = table_doc(tmp_path, d.port)
    del doc["devices"]["sign"]["read_back"]  # a sign that reads back: the default
    t = TableProcess(tmp_path / "table", doc)
    try:
        await t.start(devices_up=False)
        await t.control("stub_count", stub=52, dealt=0)
        expected = (f"seat-2 (bus gateway, unit {SINGLE_SEAT}) reports model 'PJ-SEAT-2' at input_register 4096-4103; "
                    "expected model 'PJ-SEAT-1' (map seat-single.toml)")
        status = await t.wait_status(lambda s: s["seats_disabled"], "seat 2 disabled")
        assert status["seats_disabled"] == [{"seat": 2, "device": "seat-2", "reason": expected}], status
        assert status["blocks"] == [], status  # the rest of the table wagers on
        assert d.unit(SINGLE_SEAT)["requests"].keys() == {"4"}  # only its identity read: nothing written
        d.act(f"swap {SINGLE_SEAT} PJ-SEAT-1")
        await t.wait_status(lambda s: not s["seats_disabled"] and all(x["up"] for x in s["devices"]),
                           "the right device up")
        d.act(f"place {SINGLE_SEAT} 100")
        await d.wait(lambda s: s[str(SINGLE_SEAT)]["accepted"], "its wager accepted")
        await t.stop()
    finally:
        t.close()



"""The conformance kit: drive one Modbus device through the device contract and report, check by check.

``progressive-hil conform --kind seat TARGET --unit N`` (hil/cli.py) runs it against a real device; the tests
run it against the rig's devices. Each check is PASS, FAIL or SKIP with a line saying what was sent and what
came back. The checks are pure functions of the answers (``check_*``, ``sign_protocol``, ``chip_order``); the
I/O is a ``Link`` (a pymodbus client: ``ModbusLink``) and ``run``, which sends the requests in order.

What is checked, in order: identity; every input read with its function code; every output written with
function 5 or 6 and read back with 1 or 3 (unless the device is declared write-only); functions 15 and 16
(optional: a device answering exception 1 is reported "not supported", not failed); exception 2 one past
every block of addresses and inside every gap; exception 1 for a function the contract never uses; the
time to answer (p99 of 100 reads under the controller's timeout); a sign's protocol (amounts, then a
message, then code 0); and, with an operator, a chip placed and lifted, presses counted, or what a sign's
display shows after each step of its protocol. Without an operator those checks are SKIP and the verdict is
INCOMPLETE, never PASS: registers that read back right do not prove what a sensor senses or a display shows.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from controller.money import format_cents, format_dollars_human
from drivers.modbus.registermap import ButtonMode, Kind, Point, RegisterMap, Table, load_register_map

KIT_VERSION = "1.0"
DEFAULT_MAPS = {"seat": "seat-single", "lockout": "lockout", "sign": "sign"}
BUDGET_S = {"tcp": 0.5, "serial": 0.25}  # the controller's timeout on each transport
TIMING_READS = 100
UNSUPPORTED_FC = 24  # read FIFO queue: the contract never uses it, a table device has no reason to support it
READ_FC = {Table.COIL: 1, Table.DISCRETE_INPUT: 2, Table.HOLDING_REGISTER: 3, Table.INPUT_REGISTER: 4}
SINGLE_FC = {Table.COIL: 5, Table.HOLDING_REGISTER: 6}
MULTIPLE_FC = {Table.COIL: 15, Table.HOLDING_REGISTER: 16}
MAX_READ = {True: 2000, False: 125}  # the most coils / registers one read may ask for (Modbus application protocol)
MAX_WRITE = {True: 1968, False: 123}  # ... and one write of 15 / 16 may carry
EXCEPTIONS = {1: "illegal function", 2: "illegal data address", 3: "illegal data value", 4: "device failure",
              5: "acknowledge", 6: "device busy", 10: "gateway path unavailable", 11: "gateway target failed"}
NOT_SUPPORTED_15_16 = 'not supported: configure writes = "single"'


class Outcome(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class Answer:
    """What came back: values (coils as 0/1), a Modbus exception code, or no answer (``error``)."""

    values: tuple[int, ...] | None = None
    exception: int | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.values is not None

    def show(self) -> str:
        if self.exception is not None:
            return f"exception {self.exception} ({EXCEPTIONS.get(self.exception, 'unknown')})"
        if self.error is not None:
            return f"no answer ({self.error})"
        return "acknowledged" if self.values == () else f"{list(self.values or ())}"


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    sent: str
    got: str
    required: bool = True
    needs: str | None = None  # the option that would run a check skipped for want of it (--operator, --amount)

    def line(self) -> str:
        return f"{self.outcome.value:4}  {self.name}: sent {self.sent}; got {self.got}"


@dataclass(frozen=True)
class Options:
    kind: Kind
    target: str
    unit: int
    map_name: str
    transport: str  # "tcp" or "serial"
    writes: str = "auto"  # auto | multiple | single, as the device declares
    read_back: bool = True
    operator_timeout_s: float = 60.0
    chip_cents: int | None = None  # the chip the operator places: its amount is checked (word order, scale)


@dataclass
class Report:
    version: str
    target: str
    unit: int
    map_name: str
    model: str
    kind: str
    date: str
    checks: list[Check] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """FAIL when a required check failed; else INCOMPLETE when a check could not run without an operator
        (or the chip's value); else PASS."""
        if self.failed:
            return "FAIL"
        return "INCOMPLETE" if self.incomplete else "PASS"

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.required and c.outcome is Outcome.FAIL]

    @property
    def incomplete(self) -> list[Check]:
        return [c for c in self.checks if c.outcome is Outcome.SKIP and c.needs is not None]


@dataclass(frozen=True)
class Display:
    """What a sign should show: each slot's amount (slot, cents) and the message, if any (its code's name,
    seat, amount in cents, table)."""

    amounts: tuple[tuple[int, int], ...]
    message: str | None = None
    seat: int | None = None
    amount_cents: int | None = None
    table: str | None = None

    def describe(self) -> str:
        shown = ", ".join(f"slot {slot} {format_dollars_human(cents)}" for slot, cents in self.amounts)
        if self.message is None:
            return f"{shown}; no message"
        return (f"{shown}; the message {self.message}: seat {self.seat}, "
                f"{format_dollars_human(self.amount_cents or 0)}, table {self.table}")


@dataclass(frozen=True)
class Instruction:
    """What the operator is asked to do: ``place`` or ``lift`` a chip at (seat, spot), or ``press`` the
    lock-out button ``times`` times. ``text`` says it to a person."""

    action: str
    text: str
    seat: int | None = None
    spot: str | None = None
    times: int = 0
    amount_cents: int | None = None
    display: Display | None = None  # ``confirm``: what the sign should show; the operator answers yes or no


# The operator's answer: True (yes) or False (no) to ``confirm``; None to the rest (None to ``confirm`` is no
# answer, a failure).
Operator = Callable[[Instruction], Awaitable[bool | None] | bool | None]


class Link(Protocol):
    async def read(self, fc: int, address: int, count: int) -> Answer: ...
    async def write(self, fc: int, address: int, values: Sequence[int]) -> Answer: ...
    async def unsupported(self) -> Answer: ...


# --- rendering (pure) -----------------------------------------------------------------------------------


def render_text(report: Report) -> str:
    lines = [f"progressive-hil conformance kit {report.version}",
             f"target: {report.target} unit {report.unit}",
             f"map: {report.map_name} ({report.kind}), model {report.model}",
             f"date: {report.date}", ""]
    lines += [c.line() + ("" if c.required else " (optional)") for c in report.checks]
    counts = {o: sum(1 for c in report.checks if c.outcome is o) for o in Outcome}
    lines.append("")
    summary = f"{counts[Outcome.PASS]} passed, {counts[Outcome.FAIL]} failed, {counts[Outcome.SKIP]} skipped"
    if report.verdict == "FAIL":
        lines.append(f"VERDICT: FAIL ({summary}; failed: {', '.join(c.name for c in report.failed)})")
    elif report.verdict == "INCOMPLETE":
        lines.append(f"VERDICT: INCOMPLETE: {_wanting(report.incomplete)} ({summary})")
    else:
        lines.append(f"VERDICT: PASS ({summary})")
    return "\n".join(lines) + "\n"


def _wanting(checks: Sequence[Check]) -> str:
    """ "3 checks need an operator (--operator), 1 check needs --amount" """
    parts = []
    for option in dict.fromkeys(c.needs for c in checks):
        n = sum(1 for c in checks if c.needs == option)
        what = "an operator (--operator)" if option == "--operator" else option
        parts.append(f"{n} check{'s' if n > 1 else ''} need{'' if n > 1 else 's'} {what}")
    return ", ".join(parts)


def report_json(report: Report) -> dict[str, Any]:
    out = asdict(report)
    out["checks"] = [{**asdict(c), "outcome": c.outcome.value} for c in report.checks]
    out["verdict"] = report.verdict
    return out


# --- the checks (pure) ----------------------------------------------------------------------------------


def request(fc: int, address: int, count: int | None = None, values: Sequence[int] | None = None) -> str:
    if values is not None:
        return f"function {fc} at {address} values {list(values)}"
    return f"function {fc} at {address} count {count}"


def check_identity(rmap: RegisterMap, answer: Answer) -> Check:
    ident = rmap.identity
    assert ident is not None, "only for a map with an identity block"
    sent = request(READ_FC[ident.table], ident.address, ident.width)
    if not answer.ok:
        return Check("identity", Outcome.FAIL, sent, f"{answer.show()}; expected model {rmap.model!r}")
    said = ident.decode(list(answer.values or ()))
    outcome = Outcome.PASS if said == rmap.model else Outcome.FAIL
    return Check("identity", outcome, sent, f"model {said!r}, expected {rmap.model!r}")


def check_read(name: str, p: Point, answer: Answer) -> Check:
    sent = request(READ_FC[p.table], p.address, p.width)
    if not answer.ok or len(answer.values or ()) != p.width:
        return Check(name, Outcome.FAIL, sent, answer.show())
    return Check(name, Outcome.PASS, sent, f"{answer.show()} = {p.decode(list(answer.values or ()))!r}")


def check_exception(name: str, sent: str, answer: Answer, expected: int) -> Check:
    outcome = Outcome.PASS if answer.exception == expected else Outcome.FAIL
    return Check(name, outcome, sent, f"{answer.show()}, expected exception {expected}")


def check_written(name: str, sent: str, answer: Answer) -> Check:
    return Check(name, Outcome.PASS if answer.ok else Outcome.FAIL, sent, answer.show())


def check_read_back(name: str, sent: str, answer: Answer, expected: Sequence[int]) -> Check:
    if answer.ok and list(answer.values or ()) == list(expected):
        return Check(name, Outcome.PASS, sent, answer.show())
    return Check(name, Outcome.FAIL, sent, f"{answer.show()}, expected {list(expected)}")


def check_multiple(name: str, sent: str, answer: Answer, writes: str) -> Check:
    """15/16 are optional: exception 1 is a capability to configure, unless the device declared them."""
    if answer.ok:
        return Check(name, Outcome.PASS, sent, answer.show(), required=False)
    if answer.exception == 1 and writes != "multiple":
        return Check(name, Outcome.SKIP, sent, f"{answer.show()}: {NOT_SUPPORTED_15_16}", required=False)
    # any other answer (or exception 1 from a device declaring multiple writes) takes the device down
    return Check(name, Outcome.FAIL, sent, answer.show())


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank percentile: of 100 samples, p99 is the 99th smallest."""
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def check_timing(sent: str, answers: Sequence[Answer], budget_s: float) -> tuple[Check, dict[str, float]]:
    missing = [a for a in answers if not a.ok]
    times = [a.seconds for a in answers if a.ok]
    name = f"timing: p99 of {len(answers)} reads under {budget_s} s"
    if not times:
        return Check(name, Outcome.FAIL, sent, f"no answer to any of {len(answers)}"), {}
    p50, p99 = percentile(times, 0.50), percentile(times, 0.99)
    got = f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    if missing:
        got += f"; {len(missing)} not answered ({missing[0].show()})"
    ok = not missing and p99 < budget_s
    return Check(name, Outcome.PASS if ok else Outcome.FAIL, sent, got), {"p50_s": p50, "p99_s": p99}


def blocks(addresses: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous runs (start, end) of a set of addresses."""
    runs: list[tuple[int, int]] = []
    for a in sorted(set(addresses)):
        if runs and runs[-1][1] == a:
            runs[-1] = (runs[-1][0], a + 1)
        else:
            runs.append((a, a + 1))
    return runs


def mapped(rmap: RegisterMap, *, outputs_only: bool = False) -> dict[Table, set[int]]:
    found: dict[Table, set[int]] = {t: set() for t in Table}
    points = list(rmap.outputs) if outputs_only else [*rmap.inputs, *rmap.outputs]
    if rmap.identity is not None and not outputs_only:
        points.append(rmap.identity)
    for p in points:
        found[p.table].update(range(p.address, p.end))
    return found


def _span(table: Table, start: int, end: int) -> str:
    return f"{table.value} {start}" if end - start == 1 else f"{table.value} {start}-{end - 1}"


def pattern(p: Point) -> list[int]:
    """A test value for an output, distinct per address, that its type can hold (registers or 0/1)."""
    if p.table.is_bits:
        return [1]
    if p.dtype.value == "ascii":
        return [int(v) for v in p.encode("PJ")]
    if p.width == 2:
        return [int(v) for v in p.encode(0x10000 * (1 + p.address % 100) + 0x1234)]
    return [int(v) for v in p.encode(0x100 + p.address % 0x100)]


def chip_order(samples: Sequence[tuple[bool, int]], placed: bool, has_amount: bool,
               expected: int | None = None) -> tuple[bool, str]:
    """Presence and amount over one placing (or lifting): the amount is right whenever presence reads on
    (placing: the amount first, then presence; lifting: presence off first, then the amount), and with no
    chip the amount reads 0. ``samples`` are (present, amount in cents) in the order read; ``expected``, the
    chip's amount: placing, the value the operator was told; lifting, the wager the placing ended with, which
    must read until presence goes off (a seat clearing the amount first reads as a new wager of 0)."""
    if not samples:
        return False, "no reading"
    seen = " -> ".join(f"{'on' if p else 'off'}/{a}" for p, a in _changes(samples))
    final_present, final_amount = samples[-1]
    if final_present != placed:
        return False, f"presence never went {'on' if placed else 'off'}: {seen}"
    if not has_amount:
        return True, seen
    wager = final_amount if placed else expected if expected is not None else next((a for p, a in samples if p), 0)
    if placed and final_amount <= 0:
        return False, f"a chip with amount {final_amount}: {seen}"
    if placed and expected is not None and final_amount != expected:
        return False, f"amount {final_amount} cents, expected {expected} (word order? scale?): {seen}"
    if not placed and final_amount != 0:
        return False, f"amount {final_amount} with no chip: {seen}"
    if any(p and a != wager for p, a in samples):
        return False, (f"presence on with an amount other than the wager (expected {wager} while presence is on): "
                       f"{seen}")
    if placed and any(not p and a != 0 for p, a in samples):
        return False, f"an amount with no chip before presence: {seen}"
    return True, seen


def _changes(samples: Sequence[tuple[bool, int]]) -> list[tuple[bool, int]]:
    out: list[tuple[bool, int]] = []
    for s in samples:
        if not out or out[-1] != s:
            out.append(s)
    return out


# --- the run (I/O) --------------------------------------------------------------------------------------


class _Counted:
    """A link that counts the requests answered (values or an exception) and the ones not answered."""

    def __init__(self, link: Link) -> None:
        self.inner = link
        self.answered = 0
        self.silent = 0

    def _count(self, answer: Answer) -> Answer:
        if answer.error is None:
            self.answered += 1
        else:
            self.silent += 1
        return answer

    async def read(self, fc: int, address: int, count: int) -> Answer:
        return self._count(await self.inner.read(fc, address, count))

    async def write(self, fc: int, address: int, values: Sequence[int]) -> Answer:
        return self._count(await self.inner.write(fc, address, values))

    async def unsupported(self) -> Answer:
        return self._count(await self.inner.unsupported())


class _Run:
    def __init__(self, link: Link, rmap: RegisterMap, opts: Options, operator: Operator | None) -> None:
        self.link = _Counted(link)
        self.map = rmap
        self.opts = opts
        self.operator = operator
        self.checks: list[Check] = []
        self.timing: dict[str, float] = {}
        self.multiple_ok = opts.writes != "single"

    def add(self, check: Check) -> None:
        self.checks.append(check)

    async def run(self) -> None:
        await self.identity()
        await self.inputs()
        if self.link.silent and not self.link.answered:
            self.add(Check("the device answers", Outcome.FAIL, f"{self.link.silent} requests to unit {self.opts.unit}",
                           "no answer to any: check the unit id, the address or port and the serial settings"))
            return
        await self.outputs()
        await self.multiple()
        await self.addresses()
        await self.function()
        await self.timing_check()
        if self.map.kind is Kind.SIGN:
            await self.sign()
        elif self.map.kind is Kind.SEAT:
            await self.seat_operator()
        else:
            await self.press_operator()

    def skip_for_operator(self, name: str, sent: str, what: str) -> None:
        self.add(Check(name, Outcome.SKIP, sent, f"not checked: needs a person to {what} (--operator)",
                       needs="--operator"))

    async def identity(self) -> None:
        ident = self.map.identity
        if ident is None:
            self.add(Check("identity", Outcome.SKIP, "nothing", "the map has no identity block"))
            return
        self.add(check_identity(self.map, await self.link.read(READ_FC[ident.table], ident.address, ident.width)))

    async def inputs(self) -> None:
        for p in self.map.inputs:
            name = f"read {p.path} {p.role} (function {READ_FC[p.table]})"
            self.add(check_read(name, p, await self.link.read(READ_FC[p.table], p.address, p.width)))

    async def _write_point(self, p: Point, raw: Sequence[int], label: str) -> bool:
        fc = SINGLE_FC[p.table]
        for i, v in enumerate(raw):
            sent = request(fc, p.address + i, values=[v])
            answer = await self.link.write(fc, p.address + i, [v])
            if not answer.ok:
                self.add(check_written(f"{label} {p.path} {p.role} (function {fc})", sent, answer))
                return False
        self.add(Check(f"{label} {p.path} {p.role} (function {fc})", Outcome.PASS,
                       ", ".join(request(fc, p.address + i, values=[v]) for i, v in enumerate(raw)), "acknowledged"))
        return True

    async def _read_back(self, p: Point, expected: Sequence[int], label: str) -> None:
        fc = READ_FC[p.table]
        name = f"{label} {p.path} {p.role} (function {fc})"
        if not self.opts.read_back:
            self.add(Check(name, Outcome.SKIP, "nothing", "declared write-only (read_back = false)"))
            return
        self.add(check_read_back(name, request(fc, p.address, p.width), await self.link.read(fc, p.address, p.width),
                                 expected))

    async def outputs(self) -> None:
        for p in self.map.outputs:
            raw = pattern(p)
            if await self._write_point(p, raw, "write"):
                await self._read_back(p, raw, "read back")
                zero = [0] * p.width
                if await self._write_point(p, zero, "clear"):
                    await self._read_back(p, zero, "read back cleared")

    async def multiple(self) -> None:
        outs = mapped(self.map, outputs_only=True)
        for table, fc in MULTIPLE_FC.items():
            most = MAX_WRITE[table.is_bits]
            runs = [(a, min(b, a + most)) for start, b in blocks(outs[table]) for a in range(start, b, most)]
            if not runs:
                continue
            name = f"function {fc} (write multiple {'coils' if table.is_bits else 'registers'})"
            if self.opts.writes == "single":
                self.add(Check(name, Outcome.SKIP, "nothing", 'declared writes = "single"', required=False))
                continue
            for start, end in runs:
                values = [1] * (end - start) if table.is_bits else [0x0101 * (a % 0x80 + 1) for a in range(start, end)]
                sent = request(fc, start, values=values)
                answer = await self.link.write(fc, start, values)
                check = check_multiple(f"{name} at {start}-{end - 1}", sent, answer, self.opts.writes)
                self.add(check)
                if not answer.ok:
                    self.multiple_ok = False
                    break
                if self.opts.read_back:
                    rfc = READ_FC[table]
                    self.add(check_read_back(f"read back {_span(table, start, end)} after function {fc} "
                                             f"(function {rfc})",
                                             request(rfc, start, end - start),
                                             await self.link.read(rfc, start, end - start), values))
                await self.link.write(fc, start, [0] * (end - start))

    async def addresses(self) -> None:
        every = mapped(self.map)
        outs = mapped(self.map, outputs_only=True)
        for table, addrs in every.items():
            if not self.opts.read_back and table.writable:
                continue  # a write-only device answers these reads with exception 1: probed by writing, below
            fc = READ_FC[table]
            for start, end in blocks(addrs):
                if end > 0xFFFF:
                    continue
                if end - start + 1 <= MAX_READ[table.is_bits]:  # longer: exception 3, whatever the map
                    sent = request(fc, start, end - start + 1)
                    self.add(check_exception(f"exception 2 one past {_span(table, start, end)} (function {fc})",
                                             sent, await self.link.read(fc, start, end - start + 1), 2))
                sent = request(fc, end, 1)
                self.add(check_exception(f"exception 2 at unmapped {table.value} {end} (function {fc})",
                                         sent, await self.link.read(fc, end, 1), 2))
            for (_, end), (nxt, _) in zip(blocks(addrs), blocks(addrs)[1:], strict=False):
                inside = (end + nxt) // 2
                if inside != end:
                    self.add(check_exception(f"exception 2 inside the gap {table.value} {end}-{nxt - 1}",
                                             request(fc, inside, 1), await self.link.read(fc, inside, 1), 2))
        for table, addrs in outs.items():
            if not addrs:
                continue
            fc = SINGLE_FC[table]
            for _, end in blocks(addrs):
                if end <= 0xFFFF and end not in every[table]:
                    self.add(check_exception(f"exception 2 writing unmapped {table.value} {end} (function {fc})",
                                             request(fc, end, values=[0]), await self.link.write(fc, end, [0]), 2))
            if not self.opts.read_back:  # the gaps, as the reads above would have probed them
                for (_, end), (nxt, _) in zip(blocks(every[table]), blocks(every[table])[1:], strict=False):
                    inside = (end + nxt) // 2
                    if inside != end:
                        self.add(check_exception(f"exception 2 writing inside the gap {table.value} {end}-{nxt - 1} "
                                                 f"(function {fc})", request(fc, inside, values=[0]),
                                                 await self.link.write(fc, inside, [0]), 2))

    async def function(self) -> None:
        self.add(check_exception(f"exception 1 for function {UNSUPPORTED_FC} (not in the contract)",
                                 f"function {UNSUPPORTED_FC} (read FIFO queue) at 0", await self.link.unsupported(), 1))

    async def timing_check(self) -> None:
        target = self._timed()
        if target is None:
            self.add(Check("timing", Outcome.SKIP, "nothing", "nothing to read on this device"))
            return
        fc, address, count = target
        answers: list[Answer] = []
        for _ in range(TIMING_READS):
            answers.append(await self.link.read(fc, address, count))
            if len(answers) >= 3 and all(a.error is not None for a in answers[-3:]):
                break  # three in a row not answered: the device is gone, waiting for 97 more tells nothing
        check, self.timing = check_timing(request(fc, address, count), answers, BUDGET_S[self.opts.transport])
        self.add(check)

    def _timed(self) -> tuple[int, int, int] | None:
        if self.map.inputs:
            p = self.map.inputs[0]
        elif self.map.identity is not None:
            p = self.map.identity
        elif self.opts.read_back and self.map.outputs:
            p = self.map.outputs[0]
        else:
            return None
        return READ_FC[p.table], p.address, p.width

    async def _write_values(self, values: list[tuple[Point, list[int]]], label: str) -> bool:
        """Write points in the order given: in one function 16 a contiguous run when multiple writes work,
        else register by register."""
        fc16 = self.multiple_ok
        regs: list[tuple[int, int]] = [(p.address + i, v) for p, raw in values for i, v in enumerate(raw)]
        if fc16:
            runs: list[tuple[int, list[int]]] = []
            for a, v in regs:
                if runs and runs[-1][0] + len(runs[-1][1]) == a:
                    runs[-1][1].append(v)
                else:
                    runs.append((a, [v]))
            todo = [(16, a, vs) for a, vs in runs]
        else:
            todo = [(6, a, [v]) for a, v in regs]
        for fc, a, vs in todo:
            answer = await self.link.write(fc, a, vs)
            if not answer.ok:
                self.add(Check(label, Outcome.FAIL, request(fc, a, values=vs), answer.show()))
                return False
        return True

    async def _sign_step(self, label: str, values: list[tuple[Point, list[int]]], expect: list[tuple[Point, list[int]]]
                         ) -> bool:
        if not await self._write_values(values, label):
            return False
        sent = "; ".join(f"{p.role} {raw}" for p, raw in values)
        if not self.opts.read_back:
            self.add(Check(label, Outcome.PASS, sent, "acknowledged (write-only: not read back)"))
            return True
        for p, raw in expect:
            answer = await self.link.read(3, p.address, p.width)
            if not answer.ok or list(answer.values or ()) != raw:
                self.add(Check(label, Outcome.FAIL, sent, f"{p.role} read back {answer.show()}, expected {raw}"))
                return False
        self.add(Check(label, Outcome.PASS, sent, "acknowledged and read back"))
        return True

    async def sign(self) -> None:
        slots = sorted(self.map.points("meter_amount"), key=lambda p: p.slot or 0)
        amounts = [(p, [int(v) for v in p.encode(p.from_cents(1_000_000 + 1111 * (p.slot or 0)))]) for p in slots]
        code, seat = self.map.one("message_code"), self.map.one("message_seat")
        amount, table = self.map.one("message_amount"), self.map.one("message_table")
        win = min(self.map.message_codes.values(), default=1)
        message = [(seat, [int(v) for v in seat.encode(3)]),
                   (amount, [int(v) for v in amount.encode(amount.from_cents(250_000))]),
                   (table, [int(v) for v in table.encode("BJ-01")]), (code, [int(v) for v in code.encode(win)])]
        message.sort(key=lambda pv: (pv[0] is code, pv[0].address))  # the code last when written singly
        if self.multiple_ok:
            message.sort(key=lambda pv: pv[0].address)
        zero = [(code, [0] * code.width)]
        # what a person should read: each slot's amount, the message (seat 3, $2,500.00, table BJ-01)
        shown = tuple((p.slot or 0, p.to_cents(p.from_cents(1_000_000 + 1111 * (p.slot or 0)))) for p in slots)
        name = {v: k.value for k, v in self.map.message_codes.items()}.get(win, str(win))
        with_message = Display(shown, name, 3, amount.to_cents(amount.from_cents(250_000)), "BJ-01")
        if not await self._sign_step("sign protocol: amounts", amounts, amounts):
            return
        await self._confirm("operator: sign shows the amounts", Display(shown))
        if not await self._sign_step("sign protocol: a message", message, [*message, *amounts]):
            return
        await self._confirm("operator: sign shows the message", with_message)
        if not await self._sign_step("sign protocol: code 0 (amounts shown again)", zero, [*zero, *amounts]):
            return
        await self._confirm("operator: sign shows code 0 (message cleared)", Display(shown))

    async def _confirm(self, name: str, display: Display) -> None:
        """Ask the operator whether the display shows ``display``: registers that read back right do not prove
        the words are in the right order on the display, nor that code 0 clears the message."""
        sent = display.describe()
        if self.operator is None:
            self.skip_for_operator(name, sent, "look at the display")
            return
        answer = await self._ask(Instruction("confirm", f"does the sign show {sent}?", display=display))
        if answer is None:
            self.add(Check(name, Outcome.FAIL, sent, "no answer from the operator"))
        else:
            self.add(Check(name, Outcome.PASS if answer else Outcome.FAIL, sent,
                           f"the operator answered {'yes' if answer else 'no'}"))

    async def _inputs_now(self, present: Point, amount: Point | None) -> tuple[bool, int] | None:
        if amount is not None and amount.table is present.table and not present.table.is_bits:
            lo, hi = min(present.address, amount.address), max(present.end, amount.end)
            answer = await self.link.read(READ_FC[present.table], lo, hi - lo)
            if not answer.ok:
                return None
            vals = list(answer.values or ())
            p_raw = vals[present.address - lo:present.end - lo]
            a_raw = vals[amount.address - lo:amount.end - lo]
            return bool(present.decode(p_raw)), amount.to_cents(int(amount.decode(a_raw)))
        answer = await self.link.read(READ_FC[present.table], present.address, present.width)
        if not answer.ok:
            return None
        on = bool(present.decode(list(answer.values or ())))
        if amount is None:
            return on, 0
        a = await self.link.read(READ_FC[amount.table], amount.address, amount.width)
        return (on, amount.to_cents(int(amount.decode(list(a.values or ()))))) if a.ok else None

    async def _ask(self, instruction: Instruction) -> bool | None:
        assert self.operator is not None
        result = self.operator(instruction)
        if inspect.isawaitable(result):
            result = await result
        return None if result is None else bool(result)

    async def _watch(self, read: Callable[[], Awaitable[Any]], until: Callable[[Any], bool],
                     settle_s: float = 0.3) -> list[Any]:
        samples: list[Any] = []
        deadline = time.monotonic() + self.opts.operator_timeout_s
        settled_at: float | None = None
        while time.monotonic() < deadline:
            s = await read()
            if s is not None:
                samples.append(s)
                if settled_at is None and until(s):
                    settled_at = time.monotonic() + settle_s
            if settled_at is not None and time.monotonic() >= settled_at:
                break
            await asyncio.sleep(0.01)
        return samples

    async def seat_operator(self) -> None:
        amounts = {(p.seat, p.spot): p for p in self.map.points("wager_amount")}
        for present in self.map.points("wager_present"):
            amount = amounts.get((present.seat, present.spot))
            where = f"seat {present.seat}, spot {present.spot}"
            sent = f"{where}: presence {present.describe()}" + (f", amount {amount.describe()}" if amount else "")
            if self.operator is None:
                for verb, what in (("placed", "place a chip"), ("lifted", "lift a chip")):
                    self.skip_for_operator(f"operator: chip {verb} at {where}", sent, what)
                continue
            before = await self._inputs_now(present, amount)
            if before is None or before[0] or before[1] != 0:
                self.add(Check(f"operator: no chip at {where}", Outcome.FAIL, sent,
                               f"read {before}, expected presence off and amount 0"))
                continue

            def read(p: Point = present, a: Point | None = amount) -> Awaitable[tuple[bool, int] | None]:
                return self._inputs_now(p, a)

            chip = self.opts.chip_cents
            of = f" of ${format_cents(chip)}" if chip is not None else ""
            await self._ask(Instruction("place", f"place a chip{of} on {where}", present.seat, present.spot,
                                        amount_cents=chip))
            samples = await self._watch(read, lambda s: bool(s[0]))
            ok, seen = chip_order(samples, True, amount is not None, chip)
            self.add(Check(f"operator: chip placed at {where}", Outcome.PASS if ok else Outcome.FAIL, sent, seen))
            if not ok:
                continue
            wager = samples[-1][1]
            if amount is not None and chip is None:
                self.add(Check(f"operator: chip amount at {where}", Outcome.SKIP, sent,
                               f"read {wager} cents, not compared with the chip's value (word order, scale)",
                               needs="--amount"))
            await self._ask(Instruction("lift", f"lift the chip from {where}", present.seat, present.spot))
            samples = await self._watch(read, lambda s: not s[0])
            # the wager the placing ended with must read until presence goes off
            ok, seen = chip_order(samples, False, amount is not None, wager if amount is not None else None)
            self.add(Check(f"operator: chip lifted at {where}", Outcome.PASS if ok else Outcome.FAIL, sent, seen))

    async def press_operator(self) -> None:
        if self.map.kind is not Kind.LOCKOUT:
            return
        button = self.map.one("button")
        fc = READ_FC[button.table]

        async def read() -> int | None:
            a = await self.link.read(fc, button.address, button.width)
            return int(button.decode(list(a.values or ()))) if a.ok else None

        times = 3
        sent = f"{button.describe()} ({button.mode.value if button.mode else 'counter'})"
        if self.operator is None:
            self.skip_for_operator("operator: presses counted", sent, f"press the lock-out button {times} times")
            return
        first = await read()
        if first is None:
            self.add(Check("operator: presses counted", Outcome.FAIL, sent, "no answer"))
            return
        await self._ask(Instruction("press", f"press the lock-out button {times} times", times=times))
        if button.mode is ButtonMode.MOMENTARY:
            edges = 0
            last = bool(first)
            deadline = time.monotonic() + self.opts.operator_timeout_s
            while time.monotonic() < deadline and edges < times:
                v = await read()
                if v is not None:
                    edges += int(bool(v) and not last)
                    last = bool(v)
                await asyncio.sleep(0.01)
            got = edges
        else:
            bits = 16 * button.width
            samples = await self._watch(read, lambda v: (v - first) % (1 << bits) >= times)
            got = (samples[-1] - first) % (1 << bits) if samples else 0
        self.add(Check("operator: presses counted", Outcome.PASS if got == times else Outcome.FAIL, sent,
                       f"{got} presses seen, expected {times}"))


async def run(link: Link, rmap: RegisterMap, opts: Options, *, operator: Operator | None = None,
              now: datetime | None = None) -> Report:
    """Every check, in order, against the device behind ``link``."""
    r = _Run(link, rmap, opts, operator)
    await r.run()
    date = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    return Report(KIT_VERSION, opts.target, opts.unit, opts.map_name, rmap.model, rmap.kind.value, date,
                  r.checks, r.timing)


# --- the link: a pymodbus client ------------------------------------------------------------------------


class ModbusLink:
    """Requests to one unit through a pymodbus client (TCP or RTU), each timed, never retried."""

    def __init__(self, client: Any, unit: int) -> None:
        self.client = client
        self.unit = unit

    async def _call(self, coro: Awaitable[Any], count: int | None = None) -> Answer:
        from pymodbus.exceptions import ModbusException  # the kit's only use of pymodbus beyond the client

        t0 = time.monotonic()
        try:
            r = await coro
        except (ModbusException, TimeoutError, OSError) as e:
            return Answer(error=str(e).splitlines()[0][:120] or type(e).__name__, seconds=time.monotonic() - t0)
        dt = time.monotonic() - t0
        if r.isError():
            return Answer(exception=int(getattr(r, "exception_code", 0)), seconds=dt)
        if count is None:
            return Answer(values=(), seconds=dt)
        raw = r.bits[:count] if r.bits else r.registers
        return Answer(values=tuple(int(v) for v in raw), seconds=dt)

    async def read(self, fc: int, address: int, count: int) -> Answer:
        c, u = self.client, self.unit
        call = {1: c.read_coils, 2: c.read_discrete_inputs, 3: c.read_holding_registers, 4: c.read_input_registers}[fc]
        return await self._call(call(address, count=count, device_id=u), count)

    async def write(self, fc: int, address: int, values: Sequence[int]) -> Answer:
        c, u = self.client, self.unit
        if fc == 5:
            return await self._call(c.write_coil(address, bool(values[0]), device_id=u))
        if fc == 6:
            return await self._call(c.write_register(address, values[0], device_id=u))
        if fc == 15:
            return await self._call(c.write_coils(address, [bool(v) for v in values], device_id=u))
        return await self._call(c.write_registers(address, list(values), device_id=u))

    async def unsupported(self) -> Answer:
        return await self._call(self.client.read_fifo_queue(address=0, device_id=self.unit))


def parse_target(target: str) -> tuple[str, str, int]:
    """``HOST:PORT`` -> ("tcp", host, port); a path -> ("serial", path, 0)."""
    if "/" not in target and ":" in target:
        host, _, port = target.rpartition(":")
        if not port.isdigit() or not 1 <= int(port) <= 65535 or not host:
            raise ValueError(f"target {target!r}: HOST:PORT with a port 1-65535, or a serial port path")
        return "tcp", host.strip("[]"), int(port)
    if not target:
        raise ValueError("target: HOST:PORT or a serial port path")
    return "serial", target, 0


def load_map(kind: Kind, name: str | None) -> tuple[RegisterMap, str]:
    """The map to check against: a shipped map's name, or a file."""
    from hil.rig_config import PROJECT_DEVICES

    chosen = name or DEFAULT_MAPS[kind.value]
    shipped = "/" not in chosen and not chosen.endswith(".toml")
    path = PROJECT_DEVICES / f"{chosen}.toml" if shipped else Path(chosen)
    rmap = load_register_map(path)
    if rmap.kind is not kind:
        raise ValueError(f"map {chosen}: a {rmap.kind.value} map, not {kind.value}")
    return rmap, chosen


async def conform(opts: Options, rmap: RegisterMap, *, baud: int = 19200, parity: str = "E", stopbits: int = 1,
                  operator: Operator | None = None) -> Report:
    """Connect to the target and run every check."""
    from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient

    transport, where, port = parse_target(opts.target)
    timeout = 2 * BUDGET_S[transport]
    client: Any
    if transport == "tcp":
        client = AsyncModbusTcpClient(where, port=port, timeout=timeout, retries=0, reconnect_delay=0)
    else:
        client = AsyncModbusSerialClient(where, baudrate=baud, parity=parity, stopbits=stopbits, timeout=timeout,
                                         retries=0, reconnect_delay=0)
    if not await client.connect():
        raise ConnectionError(f"cannot connect to {opts.target}")
    try:
        return await run(ModbusLink(client, opts.unit), rmap, opts, operator=operator)
    finally:
        client.close()

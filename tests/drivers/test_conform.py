"""The conformance kit (hil/conform.py, ``progressive-hil conform``) against the rig's devices, over Modbus TCP
and over RTU on a PTY pair: the rig's seat, lock-out and sign pass; deliberately wrong devices fail, each with
the check that catches it named; a run without the operator's checks is INCOMPLETE, never PASS. The operator
here is the rig itself: it places chips, presses the button, and answers what the sign shows from the sign's
decoded registers."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import types

import pytest
from pymodbus.client import AsyncModbusTcpClient

from drivers.modbus.registermap import Kind, Point, Table
from hil import cli, conform
from hil.modbus_devices import ModbusBusSim, SimDevice
from hil.rig import Rig
from hil.rig_config import parse_rig_config
from hil.wire import SerialWire

from test_modbus_sim import MAPS, run_async

SEAT, LOCKOUT, SIGN = 1, 20, 30
DEVICES = ((SEAT, "seat-single"), (LOCKOUT, "lockout"), (SIGN, "sign"))
KINDS = {SEAT: Kind.SEAT, LOCKOUT: Kind.LOCKOUT, SIGN: Kind.SIGN}


def tcp_bus(**lenient: bool) -> ModbusBusSim:
    bus = ModbusBusSim(host="127.0.0.1")
    for unit, name in DEVICES:
        bus.add_device(unit, MAPS / f"{name}.toml", name=name, **lenient)
    return bus


def operator_for(dev: SimDevice, *, presence_first: bool = False, clears_first: bool = False):
    """What a person at the device does when asked. ``presence_first``: a seat that reports the chip before
    its amount (the contract's order wrong); ``clears_first``: one that clears the amount before presence
    on a lift (the controller would read a new wager of 0)."""

    later: list[asyncio.Task] = []

    async def amount_after_reads(seat: int, spot: str) -> None:
        seen = dev.requests
        await dev.wait_until(lambda: dev.requests >= seen + 3)
        dev.place_chip(seat, spot, 500)

    async def presence_after_reads(seat: int, spot: str) -> None:
        seen = dev.requests
        await dev.wait_until(lambda: dev.requests >= seen + 3)
        dev.remove_chip(seat, spot)

    async def act(ins: conform.Instruction) -> bool | None:
        if ins.action == "confirm":  # what a person reads on the sign: the rig's decoded display
            assert ins.display is not None
            return shows(dev, ins.display)
        assert ins.seat is not None or ins.action == "press"
        cents = 500 if ins.amount_cents is None else ins.amount_cents
        if ins.action == "place" and presence_first:
            assert ins.spot is not None
            dev.place_chip(ins.seat, ins.spot, None)  # present, amount 0 while the kit reads it 3 times
            later.append(asyncio.create_task(amount_after_reads(ins.seat, ins.spot)))
        elif ins.action == "place":
            dev.place_chip(ins.seat, ins.spot, cents)
        elif ins.action == "lift" and clears_first:
            assert ins.spot is not None
            dev.place_chip(ins.seat, ins.spot, None)  # amount 0, presence on while the kit reads it 3 times
            later.append(asyncio.create_task(presence_after_reads(ins.seat, ins.spot)))
        elif ins.action == "lift":
            dev.remove_chip(ins.seat, ins.spot)
        else:
            for _ in range(ins.times):
                dev.press_lockout()
        return None

    return act


def shows(dev: SimDevice, expected: conform.Display) -> bool:
    """Whether the sign's display (what its registers decode to) is what the operator was asked to confirm."""
    sign = dev.sign()
    if [cents for _, cents in sign["amounts"]] != [cents for _, cents in expected.amounts]:
        return False
    m = sign["message"]
    if expected.message is None:
        return m is None
    return m is not None and (m["message"], m["seat"], m["amount_cents"], m["table"]) == (
        expected.message, expected.seat, expected.amount_cents, expected.table)


async def kit(bus: ModbusBusSim, unit: int, *, target: str | None = None, transport: str = "tcp",
              operator: bool = True, serial: dict | None = None, **opts) -> conform.Report:
    kind = KINDS[unit]
    behaviour = opts.pop("op", {})
    if kind is Kind.SEAT and operator:
        opts.setdefault("chip_cents", 500)  # as the command line requires --amount with --operator at a seat
    rmap, name = conform.load_map(kind, None)
    options = conform.Options(kind, target or f"127.0.0.1:{bus.tcp_port}", unit, name, transport,
                              operator_timeout_s=5.0, **opts)
    op = operator_for(bus.devices[unit], **behaviour) if operator else None
    return await conform.conform(options, rmap, operator=op, **(serial or {}))


def outcome(report: conform.Report, prefix: str) -> set[conform.Outcome]:
    found = {c.outcome for c in report.checks if c.name.startswith(prefix)}
    assert found, f"no check named {prefix!r} in {[c.name for c in report.checks]}"
    return found


def assert_passes(report: conform.Report) -> None:
    text = conform.render_text(report)
    assert report.passed, text
    assert text.rstrip().splitlines()[-1].startswith("VERDICT: PASS"), text
    assert not [c for c in report.checks if c.outcome is conform.Outcome.SKIP], text


@run_async
async def test_the_rig_passes_over_tcp():
    async with tcp_bus() as bus:
        reports = {unit: await kit(bus, unit) for unit, _ in DEVICES}
    for r in reports.values():
        assert_passes(r)
    seat, lockout, sign = reports[SEAT], reports[LOCKOUT], reports[SIGN]
    for r in reports.values():
        assert outcome(r, "identity") == {conform.Outcome.PASS}
        assert outcome(r, "exception 2") == {conform.Outcome.PASS}
        assert outcome(r, "exception 1") == {conform.Outcome.PASS}
        assert outcome(r, "timing") == {conform.Outcome.PASS}
        assert 0 < r.timing["p50_s"] <= r.timing["p99_s"] < 0.5
    assert outcome(seat, "operator: chip placed") == outcome(seat, "operator: chip lifted") == {conform.Outcome.PASS}
    assert outcome(lockout, "operator: presses counted") == {conform.Outcome.PASS}
    assert outcome(sign, "sign protocol") == {conform.Outcome.PASS}
    assert outcome(sign, "exception 2 inside the gap holding_register 6-15") == {conform.Outcome.PASS}
    # the report a vendor sends: its header, a line a check, one verdict
    text = conform.render_text(seat).splitlines()
    assert text[0] == f"progressive-hil conformance kit {conform.KIT_VERSION}"
    assert text[1].endswith(f"unit {SEAT}") and "model PJ-SEAT-1" in text[2] and text[3].startswith("date: ")
    assert sum(1 for line in text if line.startswith("VERDICT")) == 1
    assert json.loads(json.dumps(conform.report_json(seat)))["verdict"] == "PASS"


@run_async
async def test_the_rig_passes_over_rtu_on_a_pty_pair():
    with SerialWire(19200, name="conform") as wire:
        bus = ModbusBusSim(port=wire.device_port, baudrate=19200)
        for unit, name in DEVICES:
            bus.add_device(unit, MAPS / f"{name}.toml", name=name)
        async with bus:
            serial = {"baud": 19200, "parity": "N", "stopbits": 2}  # the rig's 8N2
            for unit, _ in DEVICES:
                report = await kit(bus, unit, target=wire.driver_port, transport="serial", serial=serial)
                # every check but the time to answer, which a loaded test machine cannot promise on a paced PTY
                text = conform.render_text(report)
                assert [c for c in report.checks if c.outcome is not conform.Outcome.PASS
                        and not c.name.startswith("timing")] == [], text
                assert 0.001 < report.timing["p50_s"] <= report.timing["p99_s"], text  # 8 bytes each way at 19200


@run_async
async def test_a_wrong_model_fails_identity():
    async with tcp_bus() as bus:
        bus.devices[SEAT].model = "PJ-SEAT-9"
        report = await kit(bus, SEAT, operator=False)
    assert not report.passed
    assert [c.name for c in report.failed] == ["identity"]
    assert "model 'PJ-SEAT-9', expected 'PJ-SEAT-1'" in conform.render_text(report)


@run_async
async def test_a_unit_that_does_not_answer_fails_at_once():
    async with tcp_bus() as bus:
        bus.devices[SEAT].mute(True)
        report = await kit(bus, SEAT)
    assert [c.name for c in report.failed] == ["identity", "read inputs[0] wager_present (function 4)",
                                               "read inputs[1] wager_amount (function 4)", "the device answers"]
    assert "no answer to any" in conform.render_text(report)


@run_async
async def test_a_lenient_device_fails_the_address_checks():
    async with tcp_bus(lenient=True) as bus:
        reports = {unit: await kit(bus, unit, operator=False) for unit, _ in DEVICES}
    for unit, r in reports.items():
        assert not r.passed, unit
        assert {c.name.split(" ")[0] for c in r.failed} == {"exception"}, conform.render_text(r)
    assert "exception 2 at unmapped coil 2 (function 1)" in {c.name for c in reports[SEAT].failed}
    assert "exception 2 inside the gap holding_register 6-15" in {c.name for c in reports[SIGN].failed}


@run_async
async def test_a_device_that_does_not_read_back_fails_read_back_unless_declared_write_only():
    async with tcp_bus() as bus:
        sign = bus.devices[SIGN]
        shows = sign.value
        sign.value = lambda table, address: 0 if table is Table.HOLDING_REGISTER else shows(table, address)  # type: ignore[method-assign]
        broken = await kit(bus, SIGN)
        declared = await kit(bus, SIGN, read_back=False)
    assert not broken.passed
    failed = {c.name.split(" outputs")[0].split(" (")[0] for c in broken.failed}
    assert "read back" in failed and "sign protocol: amounts" in failed, conform.render_text(broken)
    assert declared.passed, conform.render_text(declared)
    assert outcome(declared, "read back") == {conform.Outcome.SKIP}


@run_async
async def test_a_write_only_sign_passes_its_addresses_probed_by_writing():
    """A write-only sign answers every read of its holding registers with exception 1 (it has no function 3): the
    kit probes its unmapped addresses and gaps by writing, where exception 2 is what it must answer."""
    async with tcp_bus() as bus:
        bus.devices[SIGN].read_back = False
        report = await kit(bus, SIGN, read_back=False)
    assert report.passed, conform.render_text(report)
    names = [c.name for c in report.checks]
    assert "exception 2 writing inside the gap holding_register 6-15 (function 6)" in names, names
    assert not [n for n in names if n.startswith("exception 2") and "(function 3)" in n], names


@run_async
async def test_a_seat_reporting_presence_before_its_amount_fails_the_order():
    async with tcp_bus() as bus:
        report = await kit(bus, SEAT, op={"presence_first": True})
    assert [c.name for c in report.failed] == ["operator: chip placed at seat 1, spot progressive"]
    assert "on/0 -> on/500" in conform.render_text(report)


@run_async
async def test_a_seat_with_the_other_word_order_fails_the_operators_chip(tmp_path):
    little = tmp_path / "seat-little.toml"
    little.write_text((MAPS / "seat-single.toml").read_text().replace('word_order = "big"', 'word_order = "little"'))
    bus = ModbusBusSim(host="127.0.0.1")
    bus.add_device(SEAT, little, name="seat")
    async with bus:
        wrong = await kit(bus, SEAT, chip_cents=500)
        right_map = ModbusBusSim(host="127.0.0.1")
        right_map.add_device(SEAT, MAPS / "seat-single.toml", name="seat")
        async with right_map:
            right = await kit(right_map, SEAT, chip_cents=500)
    assert [c.name for c in wrong.failed] == ["operator: chip placed at seat 1, spot progressive"]
    assert "amount 32768000 cents, expected 500 (word order? scale?)" in conform.render_text(wrong)
    assert right.passed, conform.render_text(right)


@run_async
async def test_a_device_without_multiple_writes_is_told_to_configure_single_writes():
    async with tcp_bus() as bus:
        seat = bus.devices[SEAT]
        refuse = seat.refusal
        seat.refusal = lambda fc, a, n: 1 if fc == 15 else refuse(fc, a, n)  # type: ignore[method-assign,assignment,return-value]
        auto = await kit(bus, SEAT)
        declared = await kit(bus, SEAT, operator=False, writes="multiple")
    assert auto.passed, conform.render_text(auto)
    assert 'not supported: configure writes = "single"' in conform.render_text(auto)
    assert not declared.passed
    assert [c.name for c in declared.failed] == ["function 15 (write multiple coils) at 0-1"]


@run_async
async def test_a_seat_that_clears_its_amount_before_presence_on_a_lift_fails():
    async with tcp_bus() as bus:
        told = await kit(bus, SEAT, op={"clears_first": True})  # the chip's value given (--amount)
        placed = await kit(bus, SEAT, op={"clears_first": True}, chip_cents=None)  # the amount placing ended with
    for report in (told, placed):
        text = conform.render_text(report)
        assert "operator: chip lifted at seat 1, spot progressive" in [c.name for c in report.failed], text
        assert "on/0 -> off/0" in text and "expected 500" in text, text


@run_async
async def test_a_seat_whose_amount_is_not_checked_is_incomplete_not_passed(tmp_path):
    little = tmp_path / "seat-little.toml"  # the amount's words the other way round: 500 cents reads 32768000
    little.write_text((MAPS / "seat-single.toml").read_text().replace('word_order = "big"', 'word_order = "little"'))
    bus = ModbusBusSim(host="127.0.0.1")
    bus.add_device(SEAT, little, name="seat")
    async with bus:
        unchecked = await kit(bus, SEAT, chip_cents=None)
    text = conform.render_text(unchecked)
    assert not unchecked.passed and unchecked.verdict == "INCOMPLETE" and not unchecked.failed, text
    [skip] = [c for c in unchecked.checks if c.outcome is conform.Outcome.SKIP]
    assert skip.name == "operator: chip amount at seat 1, spot progressive" and skip.needs == "--amount", text
    assert "32768000" in skip.got, text
    assert text.rstrip().splitlines()[-1].startswith("VERDICT: INCOMPLETE: 1 check needs --amount"), text


@run_async
async def test_without_an_operator_the_report_is_incomplete():
    async with tcp_bus() as bus:
        bus.devices[SEAT].place_chip = lambda *a, **k: None  # type: ignore[method-assign]  # a sensor that never sees a chip
        reports = {unit: await kit(bus, unit, operator=False) for unit, _ in DEVICES}
    needed = {SEAT: ["operator: chip placed at seat 1, spot progressive",
                     "operator: chip lifted at seat 1, spot progressive"],
              LOCKOUT: ["operator: presses counted"],
              SIGN: ["operator: sign shows the amounts", "operator: sign shows the message",
                     "operator: sign shows code 0 (message cleared)"]}
    for unit, r in reports.items():
        text = conform.render_text(r)
        assert not r.passed and r.verdict == "INCOMPLETE" and not r.failed, text
        assert [c.name for c in r.checks if c.needs == "--operator"] == needed[unit], text
        assert {c.outcome for c in r.checks if c.needs} == {conform.Outcome.SKIP}
        n = len(needed[unit])
        verdict = f"VERDICT: INCOMPLETE: {n} check{'s' * (n > 1)} need{'s' * (n == 1)} an operator (--operator) ("
        assert text.rstrip().splitlines()[-1].startswith(verdict), text
        assert conform.report_json(r)["verdict"] == "INCOMPLETE"


@run_async
async def test_a_sign_that_shows_the_other_word_order_or_ignores_code_0_fails_the_operators_look():
    async with tcp_bus() as bus:
        sign = bus.devices[SIGN]
        right = await kit(bus, SIGN)
        decode = SimDevice._read_output

        def low_word_first(self: SimDevice, p: Point) -> bool | int | str:
            """The display takes the low word first; its registers still read back what was written."""
            if p.width == 2 and p.dtype.value == "uint32":
                regs = self._outputs[p.table]
                return p.decode([regs.get(p.address + 1, 0), regs.get(p.address, 0)])
            return decode(self, p)

        sign._read_output = types.MethodType(low_word_first, sign)  # type: ignore[method-assign]
        swapped = await kit(bus, SIGN)
        swapped_write_only = await kit(bus, SIGN, read_back=False)
        del sign._read_output
        shown, last = SimDevice.sign, {}

        def keeps_the_message(self: SimDevice) -> dict:
            """A sign that ignores code 0: the last message stays up."""
            now = shown(self)
            last["message"] = now["message"] or last.get("message")
            return {**now, "message": last["message"]}

        sign.sign = types.MethodType(keeps_the_message, sign)  # type: ignore[method-assign]
        ignores_0 = await kit(bus, SIGN)
    assert_passes(right)
    assert outcome(right, "operator: sign shows") == {conform.Outcome.PASS}
    for wrong in (swapped, swapped_write_only):
        text = conform.render_text(wrong)
        assert not wrong.passed and "operator: sign shows the amounts" in [c.name for c in wrong.failed], text
        assert {c.name for c in wrong.failed} <= {"operator: sign shows the amounts", "operator: sign shows the message",
                                                  "operator: sign shows code 0 (message cleared)"}, text
        assert "the operator answered no" in text and "slot 1 $10,011.11" in text, text
    assert [c.name for c in ignores_0.failed] == ["operator: sign shows code 0 (message cleared)"], \
        conform.render_text(ignores_0)


def test_percentiles_and_chip_order_are_pure():
    assert conform.percentile([0.001 * i for i in range(1, 101)], 0.99) == pytest.approx(0.099)
    assert conform.percentile([0.001 * i for i in range(1, 101)], 0.50) == pytest.approx(0.050)
    assert conform.chip_order([(False, 0), (True, 500)], True, True)[0]
    assert not conform.chip_order([(False, 500), (True, 500)], True, True)[0]  # an amount with no chip
    assert conform.chip_order([(True, 500), (False, 0)], False, True)[0]
    assert not conform.chip_order([(True, 500), (True, 0), (False, 0)], False, True)[0]  # amount first
    # on a lift the wager is the one placed, not the lift's first reading
    assert not conform.chip_order([(True, 0), (False, 0)], False, True, 500)[0]
    assert conform.chip_order([(True, 500), (False, 0)], False, True, 500)[0]
    display = conform.Display(((1, 1_001_111), (2, 1_002_222)), "WIN", 3, 250_000, "BJ-01")
    assert display.describe() == "slot 1 $10,011.11, slot 2 $10,022.22; the message WIN: seat 3, $2,500.00, table BJ-01"
    assert conform.Display(((1, 500),)).describe() == "slot 1 $5.00; no message"
    assert conform.blocks([0, 1, 2, 4, 16, 17]) == [(0, 3), (4, 5), (16, 18)]
    # 15/16 are optional only as exception 1, the answer the controller falls back to single writes on
    not_supported = conform.check_multiple("f15", "...", conform.Answer(exception=1), "auto")
    assert (not_supported.outcome, not_supported.required) == (conform.Outcome.SKIP, False)
    busy = conform.check_multiple("f15", "...", conform.Answer(exception=6), "auto")
    assert (busy.outcome, busy.required) == (conform.Outcome.FAIL, True)
    declared = conform.check_multiple("f15", "...", conform.Answer(exception=1), "multiple")
    assert (declared.outcome, declared.required) == (conform.Outcome.FAIL, True)


async def _cli(*argv: str) -> int:
    return await asyncio.to_thread(cli.main, list(argv))


@run_async
async def test_the_cli_exits_0_on_a_pass_1_on_a_failure_2_on_bad_input_3_incomplete(capsys, monkeypatch):
    level = logging.getLogger("pymodbus").level
    async with tcp_bus() as bus:
        where = f"127.0.0.1:{bus.tcp_port}"
        # without --operator the presses are not checked: incomplete, its own status
        assert await _cli("conform", "--kind", "lockout", where, "--unit", str(LOCKOUT)) == cli.EXIT_INCOMPLETE == 3
        assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith(
            "VERDICT: INCOMPLETE: 1 check needs an operator (--operator)")
        # the sign's operator answers on stdin what the display shows
        monkeypatch.setattr("sys.stdin", io.StringIO("y\nyes\nY\n"))
        assert await _cli("conform", "--kind", "sign", where, "--unit", str(SIGN), "--operator") == 0
        out = capsys.readouterr()
        assert out.out.rstrip().splitlines()[-1].startswith("VERDICT: PASS"), out
        assert "does the sign show slot 1 $10,011.11" in out.err
        monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n"))  # then no answer at all (end of input)
        assert await _cli("conform", "--kind", "sign", where, "--unit", str(SIGN), "--operator") == 1
        out = capsys.readouterr()
        assert "failed: operator: sign shows the message, operator: sign shows code 0 (message cleared)" in out.out
        bus.devices[LOCKOUT].model = "SOMETHING-ELSE"
        assert await _cli("conform", "--kind", "lockout", where, "--unit", str(LOCKOUT), "--json") == 1
        out = json.loads(capsys.readouterr().out)
        assert out["verdict"] == "FAIL" and [c["name"] for c in out["checks"] if c["outcome"] == "FAIL"] == ["identity"]
        assert await _cli("conform", "--kind", "seat", where, "--unit", "248") == 2
        assert "--unit: 248" in capsys.readouterr().err
        assert await _cli("conform", "--kind", "seat", where, "--unit", "1", "--map", "sign") == 2
        assert "--map" in capsys.readouterr().err
        assert await _cli("conform", "--kind", "seat", "127.0.0.1:notaport", "--unit", "1") == 2
        assert await _cli("conform", "--kind", "seat", where, "--unit", "1", "--operator", "--amount", "0") == 2
        assert "--amount" in capsys.readouterr().err
        # a seat's amount is checked against the chip's value: without it a wrong word order would pass
        assert await _cli("conform", "--kind", "seat", where, "--unit", "1", "--operator") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--amount" in err[0], err
    assert await _cli("conform", "--kind", "seat", where, "--unit", "1") == 1  # nothing listens any more
    assert "cannot connect" in capsys.readouterr().err
    assert logging.getLogger("pymodbus").level == level  # quiet only while the kit runs


RIG = """
table = "CONFORM-1"
seats = 2

[[tcp]]
name = "gateway"
devices = [
  { unit = 1, name = "seat-1", kind = "seat", map = "seat-single", seats = [1] },
  { unit = 2, name = "seat-2", kind = "seat", map = "seat-single", seats = [2], lenient = true },
]
"""


@run_async
async def test_the_rig_file_keeps_a_lenient_device_where_a_test_asks(tmp_path):
    cfg = parse_rig_config(RIG, "rig.toml", base=tmp_path)
    async with Rig(cfg, source="rig.toml") as rig:
        strict, lenient = rig.simulator("seat-1"), rig.simulator("seat-2")
        assert (strict.lenient, lenient.lenient) == (False, True)
        # what the rig's own client sees: exception 2 past the map, exception 1 for a function not supported
        conn = rig.connections()["seat-1"].as_dict()
        client = AsyncModbusTcpClient(conn["host"], port=conn["tcp_port"], timeout=1, retries=0)
        await client.connect()
        try:
            assert (await client.read_coils(0, count=3, device_id=1)).exception_code == 2
            assert (await client.read_coils(0, count=2, device_id=1)).bits[:2] == [False, False]
            assert (await client.read_holding_registers(0, count=1, device_id=1)).exception_code == 1
            assert not (await client.read_coils(0, count=3, device_id=2)).isError()  # lenient
        finally:
            client.close()

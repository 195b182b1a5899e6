"""Devices that lack what the contract makes optional (docs/configuration.md, a device's `writes` and `read_back`):
a device without multiple writes (functions 15 and 16 answered with exception 1) and a write-only sign (reads of
its outputs answered with exception 1), played by the rig's devices, over TCP and RTU."""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog

from drivers.device import DeviceUnavailable
from drivers.events import DeviceDown, DeviceUp, SetAcceptedLight, SetWinLight, ShowAmounts, ShowMessage, SignMessage
from drivers.modbus import frames

from test_modbus_serial import is_, kinds
from test_modbus_sim import SEAT3, SIGN, run_async, serial_rig, tcp_rig

SPOT = "progressive"
WIN = ShowMessage(SignMessage.WIN, table="T1", seat=6, amount_cents=5_000_00)


def _fcs(rig, unit: int, since: int = 0) -> list[int]:
    return [t.fc for t in list(rig.bus.log)[since:] if t.unit == unit]


def _written(bus) -> list[int]:
    """The addresses the bus wrote a single output at, in order, once acknowledged."""
    order: list[int] = []
    write = bus.write

    async def spy(unit, table, address, values, **kw):
        await write(unit, table, address, values, **kw)
        if len(values) == 1:
            order.append(address)

    bus.write = spy
    return order


@pytest.mark.parametrize("rig_of", [tcp_rig, serial_rig], ids=["tcp", "rtu"])
@run_async
async def test_auto_falls_back_to_single_writes_once_without_going_down(rig_of):
    async with rig_of(SIGN) as rig:
        sim = rig.sims["sign"]
        sim.writes_single = True
        order = _written(rig.bus)
        with structlog.testing.capture_logs() as logs:
            sign = rig.device("sign", poll_interval=0.05)
            assert sign.writes_mode == "multiple"
            rig.start(sign)
            await rig.expect_up("sign")
            await sign.send(ShowAmounts((("grand", 12_345_678),)))
            await sign.send(WIN)
            await sign.send(ShowAmounts((("grand", 99),)))
            await sim.wait_until(lambda: sim.sign()["message"] is None)
            n = len(rig.bus.log)
            polls = sign.polls
            await sim.wait_until(lambda: sign.polls >= polls + 3)  # read back meanwhile: nothing lost
        assert sim.sign() == {"amounts": [(1, 99), (2, 0), (3, 0)], "message": None}
        assert sign.writes_mode == "single (detected)" and sign.single_detected
        # one refused 16 in the run, then register by register; the WIN's code (register 16) after its details
        fcs = _fcs(rig, 9)
        assert fcs.count(frames.WRITE_MULTIPLE_REGISTERS) == 1
        assert order[:3] == [0, 1, 16]  # the amount (high word, then low word: shown once 1 is written), the code 0
        win = order[3:order.index(16, 3) + 1]
        assert win[0] == 17 and win[-1] == 16 and {17, 18, 19, 20} <= set(win)
        assert frames.WRITE_MULTIPLE_REGISTERS not in _fcs(rig, 9, n)
        warnings = [e for e in logs if e["log_level"] == "warning" and "multiple writes" in e["event"]]
        assert len(warnings) == 1 and warnings[0]["device"] == "sign"
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp"]  # no "device down" flap
        assert sign.health.errors["down"] == 0


@run_async
async def test_a_seat_without_15_gets_its_lights_back_one_coil_a_request():
    async with tcp_rig(SEAT3) as rig:
        sim = rig.sims["seat-3"]
        sim.writes_single = True
        seat = rig.device("seat-3", verify_every=1)
        rig.start(seat)
        await rig.expect_up("seat-3")
        await seat.send(SetAcceptedLight(3, SPOT, True))
        await seat.send(SetWinLight(3, True))
        sim.reboot()  # both lights lost: restored in one write of coils 0-1 (15), refused, then coil by coil
        await sim.wait_until(lambda: sim.lights() == {"accepted": {(3, SPOT): True}, "win": {3: True}})
        assert seat.writes_mode == "single (detected)"
        assert kinds(rig.drain()) == []
        assert _fcs(rig, 3).count(frames.WRITE_MULTIPLE_COILS) == 1


@run_async
async def test_writes_multiple_never_falls_back_and_single_never_tries():
    async with tcp_rig(SIGN) as rig:
        sim = rig.sims["sign"]
        sim.writes_single = True
        sign = rig.device("sign", writes="multiple")
        rig.start(sign)
        await rig.expect_up("sign")
        with pytest.raises(DeviceUnavailable):
            await sign.send(ShowAmounts((("grand", 1),)))
        assert await rig.expect(is_(DeviceDown, device="sign"))
        assert sign.writes_mode == "multiple"
        await rig.stop_devices()
        sim.writes_single = False
        single = rig.device("sign", writes="single")
        assert single.writes_mode == "single"
        assert await single.poll_once()  # its identity block read: checked before anything is written
        n = len(rig.bus.log)
        await single.send(WIN)
        assert frames.WRITE_MULTIPLE_REGISTERS not in _fcs(rig, 9, n)
        assert sim.sign()["message"]["message"] == "WIN"
    with pytest.raises(ValueError, match="writes"):
        rig.device("sign", writes="some")


@pytest.mark.parametrize("rig_of", [tcp_rig, serial_rig], ids=["tcp", "rtu"])
@run_async
async def test_a_write_only_sign_goes_down_when_read_back(rig_of):
    """What a write-only sign did to the table before `read_back` (and still does with the default): its first read
    back is refused, and it is down."""
    async with rig_of(SIGN) as rig:
        sim = rig.sims["sign"]
        sim.read_back = False
        sign = rig.device("sign", poll_interval=None)
        t0 = time.monotonic()
        rig.start(sign)
        down = await rig.expect(is_(DeviceDown, device="sign"))
        assert "exception 1" in down.reason and time.monotonic() - t0 < 1.5
        with pytest.raises(DeviceUnavailable):
            await sign.send(ShowAmounts((("grand", 1),)))


@pytest.mark.parametrize("rig_of", [tcp_rig, serial_rig], ids=["tcp", "rtu"])
@run_async
async def test_read_back_false_is_up_while_writes_are_acknowledged_and_resends_every_second(rig_of):
    async with rig_of(SIGN) as rig:
        sim = rig.sims["sign"]
        sim.read_back = False
        sign = rig.device("sign", poll_interval=None, read_back=False)
        rig.start(sign)
        assert await rig.expect(is_(DeviceUp, device="sign"))  # its identity block answered: up, nothing to write yet
        await sign.send(ShowAmounts((("grand", 12_345),)))  # acknowledged
        sim.reboot()  # its amounts back to zero: written again within a second
        t0 = time.monotonic()
        await sim.wait_until(lambda: sim.sign()["amounts"][0] == (1, 12_345), timeout=2.5)
        assert time.monotonic() - t0 < 1.5
        assert not {frames.READ_HOLDING_REGISTERS, frames.READ_COILS} & set(_fcs(rig, 9))  # never read back
        sim.mute(True)  # no acknowledgement: down at its next resend
        assert await rig.expect(is_(DeviceDown, device="sign"), timeout=3.0)
        sim.mute(False)
        sim.reboot()
        # probed with what it last acknowledged, and up again
        assert await rig.expect(is_(DeviceUp, device="sign"), timeout=3.0)
        await sim.wait_until(lambda: sim.sign()["amounts"][0] == (1, 12_345), timeout=2.5)
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp", "DeviceDown", "DeviceUp"]


@run_async
async def test_a_seat_without_read_back_has_its_lights_written_again_every_second():
    # the driver keeps the option; a table's configuration refuses it for a seat (only a sign may be write-only)
    async with serial_rig(SEAT3) as rig:
        sim = rig.sims["seat-3"]
        sim.read_back = False
        seat = rig.device("seat-3", read_back=False, verify_every=1)
        rig.start(seat)
        await rig.expect_up("seat-3")
        await seat.send(SetAcceptedLight(3, SPOT, True))
        sim.reboot()
        await sim.wait_until(lambda: sim.lights()["accepted"] == {(3, SPOT): True}, timeout=2.5)
        assert not {frames.READ_COILS} & set(_fcs(rig, 3))
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp"]


def _hold_the_resend(rig, dev, ours: set, *, before: bool):
    """Hold the device's own resend at its first request (before or after it is written) until `release` is set;
    `resent` is set once that resend's writes are all done. Requests of the tasks in `ours` pass."""
    held, release, resent = asyncio.Event(), asyncio.Event(), asyncio.Event()
    write, resend = rig.bus.write, dev._write

    async def bus_write(unit, table, address, values, **kw):
        hold = asyncio.current_task() not in ours and not held.is_set()
        if hold and before:
            held.set()
            await release.wait()
        await write(unit, table, address, values, **kw)
        if hold and not before:
            held.set()
            await release.wait()

    async def dev_write(writes, retries=None):
        await resend(writes, retries)
        if held.is_set() and asyncio.current_task() not in ours:
            resent.set()

    rig.bus.write, dev._write = bus_write, dev_write
    return held, release, resent


@pytest.mark.parametrize("before", [True, False], ids=["held-before-a-request", "held-after-a-request"])
@run_async
async def test_a_write_only_signs_resend_never_writes_over_a_newer_send(before):
    async with tcp_rig(SIGN) as rig:
        rig.sims["sign"].read_back = False
        sign = rig.device("sign", poll_interval=None, read_back=False)
        rig.start(sign)
        await rig.expect_up("sign")
        await sign.send(ShowAmounts((("grand", 111_11),)))
        await sign.send(WIN)
        ours = {asyncio.current_task()}
        held, release, resent = _hold_the_resend(rig, sign, ours, before=before)
        await asyncio.wait_for(held.wait(), 3)  # the resend of WIN and 111.11 is half-way
        cleared = asyncio.create_task(sign.send(ShowAmounts((("grand", 222_22),))))  # clears the message
        ours.add(cleared)
        await asyncio.sleep(0.05)  # the send has had every chance to go
        release.set()
        await asyncio.wait_for(resent.wait(), 3)
        await cleared
        assert rig.sims["sign"].sign()["amounts"][0] == (1, 222_22)
        assert rig.sims["sign"].sign()["message"] is None  # no WIN written back over a cleared sign


@run_async
async def test_a_write_only_seats_resend_never_writes_over_a_newer_send():
    async with tcp_rig(SEAT3) as rig:
        rig.sims["seat-3"].read_back = False
        seat = rig.device("seat-3", read_back=False)
        rig.start(seat)
        await rig.expect_up("seat-3")
        await seat.send(SetAcceptedLight(3, SPOT, True))
        ours = {asyncio.current_task()}
        held, release, resent = _hold_the_resend(rig, seat, ours, before=True)
        await asyncio.wait_for(held.wait(), 3)  # the resend has the light on in hand
        off = asyncio.create_task(seat.send(SetAcceptedLight(3, SPOT, False)))
        ours.add(off)
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.wait_for(resent.wait(), 3)
        await off
        assert rig.sims["seat-3"].lights()["accepted"] == {(3, SPOT): False}

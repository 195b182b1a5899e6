"""The Modbus drivers against the simulated devices over a real PTY pair (hil.wire.SerialWire), Modbus RTU:
every event and command, the shared bus, and every fault the wire and the devices can produce."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest

from controller.errors import InputError
from drivers.device import DeviceUnavailable, UnsupportedCommand
from drivers.events import (
    DeviceDown,
    DeviceUp,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShowAmounts,
    ShowMessage,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from drivers.modbus import SerialBusSettings, Table, frames
from hil.wire import Direction, frame_silence

from test_modbus_sim import LOCKOUT, SEAT3, SIGN, Spec, run_async, serial_rig

SEAT4 = Spec(4, "seat-single.toml", "seat-4", first_seat=4)
IO = Spec(1, "seat-io.toml", "table-io")
MOMENTARY = Spec(10, "lockout-momentary.toml", "lockout-m")
SPOT = "progressive"


def is_(cls, **fields):
    return lambda ev: isinstance(ev, cls) and all(getattr(ev, k) == v for k, v in fields.items())


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


WAGER_EVENTS = (WagerSensed, WagerRemoved)


def once(change):
    """A wire hook that changes the next frame only (hooks run under the wire's lock: no set_hook inside)."""
    done = []

    def hook(frame: bytes) -> bytes:
        if done:
            return frame
        done.append(frame)
        return change(frame)

    return hook


# --- events and commands --------------------------------------------------------------------------


@run_async
async def test_seat_device_events_and_commands():
    # a clean wire never fails a poll: the timeout is generous so that a loaded machine's scheduling stall is
    # not taken for one (the fault tests below keep the short timeout)
    async with serial_rig(SEAT3, timeout=1.0) as rig:
        dev, sim = rig.device("seat-3"), rig.sims["seat-3"]
        rig.start(dev)
        await rig.expect(is_(DeviceUp, device="seat-3"))
        sim.place_chip(3, SPOT, 2500)
        assert await rig.expect(is_(WagerSensed)) == WagerSensed("seat-3", 3, SPOT, 2500)
        await dev.send(SetAcceptedLight(3, SPOT, True))  # returns once acknowledged: the light is on
        assert sim.lights() == {"accepted": {(3, SPOT): True}, "win": {3: False}}
        await dev.send(SetWinLight(3, True))
        assert sim.lights()["win"] == {3: True}
        sim.remove_chip(3, SPOT)
        assert await rig.expect(is_(WagerRemoved)) == WagerRemoved("seat-3", 3, SPOT)
        sim.place_chip(3, SPOT, 500)
        assert await rig.expect(is_(WagerSensed)) == WagerSensed("seat-3", 3, SPOT, 500)
        await dev.send(SetAcceptedLight(3, SPOT, False))
        await dev.send(SetWinLight(3, False))
        assert sim.lights() == {"accepted": {(3, SPOT): False}, "win": {3: False}}
        for wrong in (SetWinLight(4, True), SetAcceptedLight(3, "ante", True), SetLockoutLamp(True),
                      ShowMessage(SignMessage.CLOSED), ShowAmounts((("grand", 1),))):
            with pytest.raises(UnsupportedCommand):
                await dev.send(wrong)
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp", "WagerSensed", "WagerRemoved", "WagerSensed"]
        assert dev.wagers == {(3, SPOT): 500}
        m = dev.metrics()
        assert (m.name, m.kind, m.unit, m.up) == ("seat-3", "seat", 3, True)
        assert m.polls >= 3 and m.failed_polls == 0 and m.errors == {} and 0 < m.last_poll_s < 1
        assert rig.bus.metrics()["connected"] and rig.bus.metrics()["transactions"] >= m.polls


@run_async
async def test_seven_seats_on_one_io_module():
    async with serial_rig(IO) as rig:
        dev, sim = rig.device("table-io"), rig.sims["table-io"]
        sim.place_chip(2, SPOT)
        sim.place_chip(7, SPOT)
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("table-io"), WagerSensed("table-io", 2, SPOT, None),
                               WagerSensed("table-io", 7, SPOT, None)]
        await dev.send(SetAcceptedLight(7, SPOT, True))
        await dev.send(SetWinLight(7, True))
        assert sim.value(Table.COIL, 6) == 1 and sim.value(Table.COIL, 14) == 1  # seat 7: outputs 7 and 15
        assert sum(sim.lights()["accepted"].values()) == 1 and sum(sim.lights()["win"].values()) == 1
        sim.remove_chip(2, SPOT)
        assert await dev.poll_once()
        assert rig.drain() == [WagerRemoved("table-io", 2, SPOT)]
        with pytest.raises(UnsupportedCommand):
            await dev.send(SetWinLight(8, True))


@run_async
async def test_lockout_counter_reports_every_press_once():
    async with serial_rig(LOCKOUT) as rig:
        dev, sim = rig.device("lockout"), rig.sims["lockout"]
        sim.press_lockout()  # before first contact: stale, not reported
        assert await dev.poll_once()
        sim.press_lockout()
        assert await dev.poll_once()
        for _ in range(3):  # three presses between two polls: a momentary input would have seen one at most
            sim.press_lockout()
        assert await dev.poll_once()
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("lockout")] + [LockoutPressed("lockout")] * 4
        await dev.send(SetLockoutLamp(True))
        assert sim.lights() == {"lockout_lamp": True}
        await dev.send(SetLockoutLamp(False))
        assert sim.lights() == {"lockout_lamp": False}
        with pytest.raises(UnsupportedCommand):
            await dev.send(SetWinLight(1, True))


@run_async
async def test_lockout_momentary_input():
    async with serial_rig(MOMENTARY) as rig:
        dev, sim = rig.device("lockout-m"), rig.sims["lockout-m"]
        assert await dev.poll_once()
        sim.press_lockout(hold_s=30)
        assert await dev.poll_once()
        assert await dev.poll_once()  # still held: the same press
        sim.release_lockout()
        assert await dev.poll_once()
        sim.press_lockout(hold_s=30)
        assert await dev.poll_once()
        sim.release_lockout()
        assert rig.drain() == [DeviceUp("lockout-m"), LockoutPressed("lockout-m"), LockoutPressed("lockout-m")]
        await dev.send(SetLockoutLamp(True))
        assert sim.lights() == {"lockout_lamp": True}


@run_async
async def test_sign_amounts_and_messages():
    async with serial_rig(SIGN) as rig:
        dev, sim = rig.device("sign"), rig.sims["sign"]
        assert await dev.poll_once()
        await dev.send(ShowAmounts((("grand", 12_345_678), ("major", 50_000))))
        assert sim.sign() == {"amounts": [(1, 12_345_678), (2, 50_000), (3, 0)], "message": None}
        await dev.send(ShowMessage(SignMessage.WIN, table="T7", seat=3, amount_cents=123_456))
        assert sim.sign()["message"] == {"message": "WIN", "table": "T7", "seat": 3, "amount_cents": 123_456}
        win = rig.bus.log[-1]
        assert (win.unit, win.fc, win.tx_len) == (9, 16, 9 + 2 * 8)  # the whole message area in one write
        for msg in (SignMessage.PENDING, SignMessage.OFFLINE, SignMessage.CLOSED):
            await dev.send(ShowMessage(msg))
            assert sim.sign()["message"] == {"message": msg.value, "table": "", "seat": 0, "amount_cents": 0}
        before = rig.bus.transactions
        for bad in (ShowMessage(SignMessage.WIN, table="T7"), ShowAmounts((("a", 1),) * 4),
                    ShowAmounts((("grand", -1),)), ShowAmounts((("grand", 1 << 32),)),
                    ShowMessage(SignMessage.WIN, table="a long table name", seat=1, amount_cents=1)):
            with pytest.raises(InputError):
                await dev.send(bad)
        with pytest.raises(UnsupportedCommand):
            await dev.send(SetWinLight(1, True))
        assert rig.bus.transactions == before  # refused before anything was written
        assert sim.sign()["amounts"][0] == (1, 12_345_678)


@run_async
async def test_devices_on_one_bus_never_interleave():
    async with serial_rig(SEAT3, SEAT4, LOCKOUT, SIGN) as rig:
        frames: list[tuple[Direction, bytes]] = []
        for d in Direction:
            rig.wire.set_hook(d, lambda data, d=d: frames.append((d, data)) or data)
        devs = [rig.device(n, verify_every=2, poll_interval=0) for n in ("seat-3", "seat-4", "lockout")]
        sign = rig.device("sign", poll_interval=0)
        rig.start(*devs, sign)
        await rig.expect_up("seat-3", "seat-4", "lockout", "sign")
        for i in range(4):  # commands from every driver at once, while all four poll
            await asyncio.gather(devs[0].send(SetAcceptedLight(3, SPOT, i % 2 == 0)),
                                 devs[1].send(SetWinLight(4, True)), devs[2].send(SetLockoutLamp(True)),
                                 sign.send(ShowAmounts((("grand", 100 + i),))))
        await rig.stop_devices()
        for d in Direction:
            rig.wire.set_hook(d, None)
        assert len(frames) > 40
        # on the line: request, its reply, request, its reply... never two requests in a row
        for i, (d, frame) in enumerate(frames):
            assert d is (Direction.TO_DEVICE if i % 2 == 0 else Direction.TO_DRIVER), f"frame {i}"
            if d is Direction.TO_DRIVER:
                assert frame[0] == frames[i - 1][1][0]  # from the unit just asked
        assert {f[0] for d, f in frames if d is Direction.TO_DEVICE} == {3, 4, 8, 9}
        # and t3.5 of silence between the end of one transaction and the start of the next
        log = list(rig.bus.log)
        assert all(t.outcome == "ok" for t in log)
        for a, b in pairwise(log):
            assert b.started >= a.ended + rig.bus.silence
        assert rig.sims["sign"].sign()["amounts"][0] == (1, 103)


@run_async
async def test_at_19200_baud():
    async with serial_rig(SEAT3, LOCKOUT, baud=19200, timeout=0.2) as rig:
        assert rig.bus.silence == pytest.approx(3.5 * 11 / 19200)
        seat, lock = rig.device("seat-3"), rig.device("lockout")
        rig.sims["seat-3"].place_chip(3, SPOT, 100)
        rig.sims["lockout"].press_lockout()
        assert await seat.poll_once() and await lock.poll_once()
        rig.sims["lockout"].press_lockout()
        assert await asyncio.gather(seat.poll_once(), lock.poll_once()) == [True, True]
        await seat.send(SetWinLight(3, True))
        assert rig.sims["seat-3"].lights()["win"][3]
        assert set(rig.drain()) == {DeviceUp("seat-3"), DeviceUp("lockout"), WagerSensed("seat-3", 3, SPOT, 100),
                                    LockoutPressed("lockout")}
        log = list(rig.bus.log)
        for a, b in pairwise(log):
            assert b.started - a.ended >= frame_silence(19200)
        # a read of 3 registers: 8 bytes out, 11 back, each 11 bits at 19200 baud, plus t3.5 on the wire (the
        # seat's first transaction reads its identity block, the second its inputs)
        t = log[1]
        assert (t.tx_len, t.rx_len) == (8, 11)
        assert t.ended - t.started >= 19 * 11 / 19200 + frame_silence(19200)


def test_t35_is_the_spec_silence():
    assert frames.t35(19200) == pytest.approx(3.5 * 11 / 19200) and frames.t35(19201) == 0.00175
    assert frames.t35(9600) == pytest.approx(3.5 * 11 / 9600) and frames.t35(57600) == 0.00175
    assert SerialBusSettings(port="x", baud=9600, parity="N", stopbits=1).silence == pytest.approx(3.5 * 10 / 9600)


# --- faults -----------------------------------------------------------------------------------------


@run_async
async def test_crc_errors_are_counted_and_never_a_wager():
    async with serial_rig(SEAT3) as rig:
        dev = rig.device("seat-3")
        assert await dev.poll_once()
        # noise flips the "chip present" bit of the next reply: the CRC no longer matches
        flipped = []

        def flip(frame: bytes) -> bytes:
            flipped.append(frame)
            return frame[:4] + bytes([frame[4] ^ 1]) + frame[5:]

        rig.wire.set_hook(Direction.TO_DRIVER, once(flip))
        assert await dev.poll_once()  # the retry got through
        assert flipped and dev.health.errors["crc"] == 1
        crc = [t for t in rig.bus.log if t.outcome == "crc"]
        assert len(crc) == 1 and crc[0].ended - crc[0].started < rig.bus.settings.timeout  # seen at once
        rig.wire.corrupt_next(2)  # both attempts of the next poll
        assert not await dev.poll_once()
        assert dev.health.errors["crc"] == 3
        assert await dev.poll_once()
        events = rig.drain()
        assert kinds(events) == ["DeviceUp", "DeviceDown", "DeviceUp"]
        assert "crc, crc" in events[1].reason


@run_async
async def test_garbage_is_counted_and_never_a_wager():
    async with serial_rig(SEAT3) as rig:
        dev = rig.device("seat-3")
        assert await dev.poll_once()
        # noise in front of the next reply
        rig.wire.set_hook(Direction.TO_DRIVER, once(lambda f: b"\xff\x00\xaa\x55" + f))
        assert await dev.poll_once()
        assert dev.health.errors["garbage"] == 1 and dev.health.up
        # and noise on an idle line
        rig.wire.inject(b"\x00\x13\x37\x00\x42")
        async with asyncio.timeout(2):
            while rig.bus.errors["garbage"] + dev.health.errors["garbage"] < 2:
                assert await dev.poll_once()
        assert dev.health.up
        assert not [e for e in rig.drain() if isinstance(e, WAGER_EVENTS)]


@run_async
async def test_a_silent_device_goes_down_once_and_comes_back_within_the_backoff():
    async with serial_rig(SEAT3) as rig:
        dev, sim = rig.device("seat-3"), rig.sims["seat-3"]
        rig.start(dev)
        await rig.expect(is_(DeviceUp))
        sim.mute(True)
        await rig.expect(is_(DeviceDown))
        n = sim.requests
        await sim.wait_until(lambda: sim.requests >= n + 4)  # four more probes, all unanswered
        sim.place_chip(3, SPOT, 700)
        loop = asyncio.get_running_loop()
        sim.mute(False)
        unmuted = loop.time()
        await rig.expect(is_(DeviceUp))
        # the probe under way at unmute may still time out; the next comes within one backoff step
        assert loop.time() - unmuted <= dev.backoff.bound + rig.bus.settings.timeout + 0.05
        await rig.expect(is_(WagerSensed))
        await rig.stop_devices()
        events = rig.seen + rig.drain()
        assert events == [DeviceUp("seat-3"), events[1], DeviceUp("seat-3"), WagerSensed("seat-3", 3, SPOT, 700)]
        assert isinstance(events[1], DeviceDown)
        assert dev.health.errors["timeout"] >= 5 and dev.health.errors["down"] >= 4


@run_async
async def test_dropped_and_delayed_replies():
    async with serial_rig(SEAT3) as rig:
        dev = rig.device("seat-3")
        assert await dev.poll_once()
        rig.wire.drop_next(1)
        assert await dev.poll_once()  # the retry
        assert dev.health.errors["timeout"] == 1 and dev.health.up
        rig.wire.drop_next(2)
        assert not await dev.poll_once()
        assert await dev.poll_once()
        assert kinds(rig.drain()) == ["DeviceUp", "DeviceDown", "DeviceUp"]
        rig.start(dev)
        rig.wire.delay_next(3 * rig.bus.settings.timeout, n=2)  # both attempts of a poll answered too late
        await rig.expect(is_(DeviceDown))
        await rig.expect(is_(DeviceUp))
        await rig.stop_devices()
        assert kinds(rig.drain()) == []
        assert not [e for e in rig.seen if isinstance(e, WAGER_EVENTS)]


@run_async
async def test_cable_pulled_and_plugged_back():
    async with serial_rig(SEAT3, LOCKOUT) as rig:
        seat, lock = rig.device("seat-3"), rig.device("lockout")
        rig.start(seat, lock)
        await rig.expect(is_(DeviceUp, device="seat-3"))
        await rig.expect(is_(DeviceUp, device="lockout"))
        rig.wire.unplug()
        downs = {(await rig.expect(is_(DeviceDown))).device, (await rig.expect(is_(DeviceDown))).device}
        assert downs == {"seat-3", "lockout"}
        with pytest.raises(DeviceUnavailable):
            await seat.send(SetWinLight(3, True))  # at once: nothing is queued
        rig.sims["seat-3"].place_chip(3, SPOT, 100)
        rig.sims["seat-3"].remove_chip(3, SPOT)  # placed and removed while unplugged: not invented
        rig.wire.replug()
        ups = {(await rig.expect(is_(DeviceUp))).device, (await rig.expect(is_(DeviceUp))).device}
        assert ups == {"seat-3", "lockout"}
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp"] * 2 + ["DeviceDown"] * 2 + ["DeviceUp"] * 2


@run_async
async def test_outputs_are_reasserted_after_a_reboot():
    async with serial_rig(SEAT3, LOCKOUT, SIGN) as rig:
        seat, lock = rig.device("seat-3", verify_every=2), rig.device("lockout", verify_every=2)
        sign = rig.device("sign", poll_interval=0.02)
        rig.start(seat, lock, sign)
        await rig.expect_up("seat-3", "lockout", "sign")
        await seat.send(SetAcceptedLight(3, SPOT, True))
        await seat.send(SetWinLight(3, True))
        await lock.send(SetLockoutLamp(True))
        await sign.send(ShowAmounts((("grand", 1_000_000), ("major", 20_000))))
        await sign.send(ShowMessage(SignMessage.PENDING))
        s_seat, s_lock, s_sign = rig.sims["seat-3"], rig.sims["lockout"], rig.sims["sign"]
        for s in (s_seat, s_lock, s_sign):
            s.reboot()
        assert not s_seat.lights()["win"][3] and not s_lock.lights()["lockout_lamp"] and not s_sign.sign()["message"]
        await s_seat.wait_until(lambda: s_seat.lights() == {"accepted": {(3, SPOT): True}, "win": {3: True}})
        await s_lock.wait_until(lambda: s_lock.lights() == {"lockout_lamp": True})
        await s_sign.wait_until(lambda: s_sign.sign() == {
            "amounts": [(1, 1_000_000), (2, 20_000), (3, 0)],
            "message": {"message": "PENDING", "table": "", "seat": 0, "amount_cents": 0}})
        await rig.stop_devices()
        for d in (seat, lock, sign):
            assert d.health.errors["outputs_lost"] >= 1 and d.health.up
        assert not [e for e in rig.seen + rig.drain() if isinstance(e, DeviceDown)]


@run_async
async def test_outputs_are_reasserted_when_a_device_comes_back():
    async with serial_rig(SEAT3) as rig:
        dev, sim = rig.device("seat-3", verify_every=0), rig.sims["seat-3"]
        assert await dev.poll_once()
        await dev.send(SetAcceptedLight(3, SPOT, True))
        sim.mute(True)
        assert not await dev.poll_once()
        with pytest.raises(DeviceUnavailable):
            await dev.send(SetWinLight(3, True))  # refused while down, and not remembered
        sim.reboot()  # it was power-cycled while down
        sim.mute(False)
        assert sim.lights()["accepted"][(3, SPOT)] is False
        assert await dev.poll_once()
        assert sim.lights() == {"accepted": {(3, SPOT): True}, "win": {3: False}}
        assert kinds(rig.drain()) == ["DeviceUp", "DeviceDown", "DeviceUp"]


@run_async
async def test_a_command_that_fails_is_not_reasserted():
    async with serial_rig(SEAT3, retries=0) as rig:
        dev, sim = rig.device("seat-3", verify_every=0), rig.sims["seat-3"]
        assert await dev.poll_once()
        await dev.send(SetWinLight(3, True))
        sim.mute(True)  # the driver does not know yet
        with pytest.raises(DeviceUnavailable):
            await dev.send(SetWinLight(3, False))
        assert kinds(rig.drain()) == ["DeviceUp", "DeviceDown"]
        assert dev.commanded == {}
        sim.mute(False)
        assert await dev.poll_once()
        assert sim.lights()["win"][3] is True  # neither the failed value nor the old one was written again
        assert rig.bus.log[-1].fc == 4



@run_async
async def test_exception_replies():
    async with serial_rig(SEAT3, retries=0) as rig:
        dev, sim = rig.device("seat-3", busy_down_after=3), rig.sims["seat-3"]
        assert await dev.poll_once()
        sim.set_exception(6)  # busy: alive, come back later
        sim.place_chip(3, SPOT, 100)
        assert not await dev.poll_once()
        assert not await dev.poll_once()
        assert dev.health.up and dev.health.errors["exception_busy"] == 2
        with pytest.raises(DeviceUnavailable):
            await dev.send(SetWinLight(3, True))  # a busy device did not acknowledge
        assert dev.health.up is False  # third busy answer in a row
        sim.set_exception(None)
        assert await dev.poll_once()
        sim.set_exception(4)  # device failure
        assert not await dev.poll_once()
        assert not await dev.poll_once()
        assert dev.health.errors["exception_device_failure"] == 2
        sim.set_exception(None)
        assert await dev.poll_once()
        assert kinds(rig.drain()) == ["DeviceUp", "DeviceDown", "DeviceUp", "WagerSensed", "DeviceDown", "DeviceUp"]


@run_async
async def test_wagers_across_an_outage():
    async with serial_rig(SEAT3) as rig:
        dev, sim = rig.device("seat-3"), rig.sims["seat-3"]
        assert await dev.poll_once()
        sim.mute(True)
        assert not await dev.poll_once()
        sim.place_chip(3, SPOT, 100)
        sim.remove_chip(3, SPOT)  # placed and removed while down: never reported
        assert not await dev.poll_once()
        sim.place_chip(3, SPOT, 500)  # placed while down, still there after: reported once
        sim.mute(False)
        assert await dev.poll_once()
        assert await dev.poll_once()
        sim.mute(True)
        assert not await dev.poll_once()
        sim.remove_chip(3, SPOT)  # removed while down: reported once it answers
        sim.mute(False)
        assert await dev.poll_once()
        assert await dev.poll_once()
        events = rig.drain()
        assert kinds(events) == ["DeviceUp", "DeviceDown", "DeviceUp", "WagerSensed", "DeviceDown", "DeviceUp",
                                 "WagerRemoved"]
        assert events[3] == WagerSensed("seat-3", 3, SPOT, 500)


@run_async
async def test_a_down_device_is_refused_at_once():
    async with serial_rig(SEAT3) as rig:
        dev = rig.device("seat-3")
        rig.sims["seat-3"].mute(True)
        assert not await dev.poll_once()
        before = rig.bus.transactions
        with pytest.raises(DeviceUnavailable):
            await dev.send(SetAcceptedLight(3, SPOT, True))
        assert rig.bus.transactions == before
        assert dev.metrics().up is False and dev.metrics().failed_polls == 1


def test_a_late_reply_is_reported_once_by_the_bus_and_not_again_by_pymodbus():
    """A reply after its request timed out is the bus's `late` (with its bytes, test_dropped_and_delayed_replies);
    pymodbus' own "received pdu without a corresponding request" warning about the same bytes is not a second line
    (a demo on a loaded box printed both). Logged as pymodbus logs it, through its own Log; its other warnings
    still pass."""
    import logging

    from pymodbus.logging import Log

    import drivers.modbus.bus  # noqa: F401 (installs the filter)

    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    pymodbus = logging.getLogger("pymodbus")
    pymodbus.addHandler(handler)
    Log.last_log_text = ""  # pymodbus says a line again as "Repeating....": start from none
    try:
        for _ in range(3):  # the second is pymodbus' "Repeating....", of a line dropped: dropped too
            Log.warning("ERROR: received pdu without a corresponding request, IGNORING")
        Log.warning("some other warning of pymodbus")
        Log.warning("some other warning of pymodbus")
    finally:
        pymodbus.removeHandler(handler)
    assert seen == ["some other warning of pymodbus", "Repeating...."], seen

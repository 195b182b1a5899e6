"""The Modbus drivers against the simulated devices over Modbus TCP (loopback), with a fault proxy for the
network's faults: every event and command, a device that stops answering, a cut connection."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

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

from test_modbus_serial import is_, kinds
from test_modbus_sim import LOCKOUT, SEAT3, SIGN, Spec, run_async, tcp_rig

IO = Spec(1, "seat-io.toml", "table-io")
SPOT = "progressive"


@run_async
async def test_every_event_and_command_over_tcp():
    async with tcp_rig(SEAT3, IO, LOCKOUT, SIGN) as rig:
        seat, io, lock, sign = (rig.device(n) for n in ("seat-3", "table-io", "lockout", "sign"))
        rig.start(seat, io, lock, sign)
        await rig.expect_up("seat-3", "table-io", "lockout", "sign")
        rig.sims["seat-3"].place_chip(3, SPOT, 1_500)
        assert await rig.expect(is_(WagerSensed, device="seat-3")) == WagerSensed("seat-3", 3, SPOT, 1_500)
        rig.sims["table-io"].place_chip(6, SPOT)
        assert await rig.expect(is_(WagerSensed, device="table-io")) == WagerSensed("table-io", 6, SPOT, None)
        rig.sims["seat-3"].remove_chip(3, SPOT)
        assert await rig.expect(is_(WagerRemoved)) == WagerRemoved("seat-3", 3, SPOT)
        rig.sims["lockout"].press_lockout()
        assert await rig.expect(is_(LockoutPressed)) == LockoutPressed("lockout")
        await seat.send(SetAcceptedLight(3, SPOT, True))
        await io.send(SetWinLight(6, True))
        await lock.send(SetLockoutLamp(True))
        await sign.send(ShowAmounts((("grand", 99_999_999),)))
        await sign.send(ShowMessage(SignMessage.WIN, table="T1", seat=6, amount_cents=5_000_00))
        assert rig.sims["seat-3"].lights()["accepted"] == {(3, SPOT): True}
        assert rig.sims["table-io"].lights()["win"][6] is True
        assert rig.sims["lockout"].lights() == {"lockout_lamp": True}
        assert rig.sims["sign"].sign() == {
            "amounts": [(1, 99_999_999), (2, 0), (3, 0)],
            "message": {"message": "WIN", "table": "T1", "seat": 6, "amount_cents": 500_000}}
        for msg in (SignMessage.PENDING, SignMessage.OFFLINE, SignMessage.CLOSED):
            await sign.send(ShowMessage(msg))
            assert rig.sims["sign"].sign()["message"]["message"] == msg.value
        with pytest.raises(UnsupportedCommand):
            await sign.send(SetLockoutLamp(True))
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp"] * 4 + ["WagerSensed", "WagerSensed", "WagerRemoved",
                                                                    "LockoutPressed"]
        assert rig.bus.silence == 0 and rig.bus.connects == 1


@run_async
async def test_a_silent_unit_goes_down_once_and_comes_back():
    async with tcp_rig(SEAT3, LOCKOUT) as rig:
        seat, lock = rig.device("seat-3"), rig.device("lockout")
        rig.start(seat, lock)
        await rig.expect(is_(DeviceUp, device="seat-3"))
        await rig.expect(is_(DeviceUp, device="lockout"))
        sim = rig.sims["seat-3"]
        sim.mute(True)
        assert await rig.expect(is_(DeviceDown)) == DeviceDown("seat-3", rig.seen[-1].reason)
        n = sim.requests
        await sim.wait_until(lambda: sim.requests >= n + 3)
        loop = asyncio.get_running_loop()
        sim.mute(False)
        unmuted = loop.time()
        await rig.expect(is_(DeviceUp, device="seat-3"))
        assert loop.time() - unmuted <= seat.backoff.bound + rig.bus.settings.timeout + 0.05
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp", "DeviceUp", "DeviceDown", "DeviceUp"]
        # the other unit behind the same connection kept working, and the connection was never dropped
        assert lock.health.up and lock.health.errors == {} and rig.bus.connects == 1


@run_async
async def test_a_cut_connection_is_reopened_with_backoff():
    async with tcp_rig(SEAT3, LOCKOUT, proxy=True) as rig:
        seat, lock = rig.device("seat-3"), rig.device("lockout")
        rig.start(seat, lock)
        await rig.expect(is_(DeviceUp, device="seat-3"))
        await rig.expect(is_(DeviceUp, device="lockout"))
        rig.proxy.cut()
        downs = {(await rig.expect(is_(DeviceDown))).device, (await rig.expect(is_(DeviceDown))).device}
        assert downs == {"seat-3", "lockout"}
        with pytest.raises(DeviceUnavailable):
            await lock.send(SetLockoutLamp(True))
        rig.sims["lockout"].press_lockout()  # while the controller could not hear it: stale
        rig.proxy.restore()
        ups = {(await rig.expect(is_(DeviceUp))).device, (await rig.expect(is_(DeviceUp))).device}
        assert ups == {"seat-3", "lockout"}
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp"] * 2 + ["DeviceDown"] * 2 + ["DeviceUp"] * 2
        assert rig.bus.connects >= 2 and rig.proxy.connections >= 2


@run_async
async def test_dropped_reply_is_retried_and_exceptions_counted():
    async with tcp_rig(SEAT3, proxy=True, retries=1) as rig:
        dev, sim = rig.device("seat-3"), rig.sims["seat-3"]
        assert await dev.poll_once()
        rig.proxy.drop_next(1)
        sim.place_chip(3, SPOT, 250)
        assert await dev.poll_once()  # the retry carries a new transaction id: the answer is the right one
        assert dev.health.errors["timeout"] == 1
        rig.proxy.delay_next(0.03)  # late, but within the timeout
        assert await dev.poll_once()
        sim.set_exception(4)
        assert not await dev.poll_once()
        sim.set_exception(None)
        assert await dev.poll_once()
        assert kinds(rig.drain()) == ["DeviceUp", "WagerSensed", "DeviceDown", "DeviceUp"]
        assert dev.health.errors["exception_device_failure"] == 1


@run_async
async def test_no_server_at_all():
    async with tcp_rig(SEAT3, proxy=True) as rig:
        rig.proxy.cut()
        dev = rig.device("seat-3")
        # the proxy accepts and closes at once: a link that drops right after connecting
        assert not await dev.poll_once()
        assert not await dev.poll_once()  # the bus waits its backoff before the next connection attempt
        assert rig.bus.connects == 1 and not rig.bus.connected
        assert kinds(rig.drain()) == ["DeviceDown"]
        rig.proxy.restore()
        async with asyncio.timeout(2):
            while not await dev.poll_once():
                pass  # each failed poll is a real connection attempt or a refusal of the bus
        assert kinds(rig.drain()) == ["DeviceUp"]


@run_async
async def test_a_device_reached_directly_answers_unit_255():
    async with tcp_rig(Spec(255, "sign.toml", "sign")) as rig:
        sign = rig.device("sign")
        rig.start(sign)
        await rig.expect_up("sign")
        await sign.send(ShowAmounts((("grand", 4_200),)))
        assert rig.sims["sign"].sign()["amounts"][0] == (1, 4_200)
    with pytest.raises(ValueError, match="unit 0 is not a valid TCP unit id"):
        rig.device("sign").__class__("x", rig.bus, 0, rig.device("sign").map)
    with pytest.raises(ValueError, match="unit 248"):
        rig.device("sign").__class__("x", rig.bus, 248, rig.device("sign").map)


@run_async
async def test_a_reply_from_another_unit_id_is_dropped_and_both_are_named():
    """A gateway that answers for the wrong unit: its reply is not the device's answer (pymodbus drops it); the bus
    fails the attempt at once, of its own kind, and logs both unit ids once."""
    import struct

    import structlog

    from drivers.modbus import ModbusBus, NoResponse, Table, TcpSettings

    handlers = []

    async def wrong_unit(reader, writer):
        handlers.append(asyncio.current_task())
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            while True:
                tid, _, length, unit = struct.unpack(">HHHB", await reader.readexactly(7))
                await reader.readexactly(length - 1)
                reply = bytes([4, 2, 0, 7])  # one input register: 7
                writer.write(struct.pack(">HHHB", tid, 0, len(reply) + 1, unit + 1) + reply)
        writer.close()

    server = await asyncio.start_server(wrong_unit, "127.0.0.1", 0)
    faults = []
    try:
        bus = ModbusBus(TcpSettings(host="127.0.0.1", port=server.sockets[0].getsockname()[1], timeout=2.0, retries=1))
        with structlog.testing.capture_logs() as logs:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(NoResponse) as exc:
                await bus.read(5, Table.INPUT_REGISTER, 0, 1, on_fault=lambda kind, detail: faults.append(kind))
            assert loop.time() - t0 < 1.0  # not the 2 s timeout of each attempt
        await bus.close()
    finally:
        server.close()
        for h in handlers:
            h.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()
    assert exc.value.kinds == ["wrong_unit", "wrong_unit"] and faults == ["wrong_unit", "wrong_unit"]
    (line,) = [e for e in logs if e.get("kind") == "wrong_unit" and e["log_level"] == "warning"]
    assert (line["asked"], line["answered"]) == (5, 6)
    assert not [e for e in logs if "garbage" in str(e.get("kind"))]


@run_async
async def test_a_tcp_bus_is_capped_at_max_rate_with_the_lock_out_read_first():
    """100 transactions a second by default: the lock-out read every other one (every 20 ms), the seats sharing the
    rest (uncapped, the same bus ran at about 300 a second, the lock-out read every 7 ms)."""
    specs = [Spec(u, "seat-single.toml", f"seat-{u}", first_seat=u) for u in range(1, 8)]
    async with tcp_rig(*specs, LOCKOUT) as rig:
        assert rig.bus.settings.max_rate == 100
        devices = [rig.device(s.name) for s in specs] + [rig.device("lockout")]
        rig.start(*devices)
        await rig.expect_up(*(d.name for d in devices))
        lock = rig.sims["lockout"]
        n = lock.requests
        await lock.wait_until(lambda: lock.requests >= n + 40)
        t = [x for x in rig.bus.log if x.started >= lock.request_times[-40]]
        span = t[-1].started - t[0].started
        assert (len(t) - 1) / span <= 100 * 1.05, (len(t), span)
        reads = list(lock.request_times)[-40:]
        period = (reads[-1] - reads[0]) / 39
        assert 0.019 <= period <= 0.030, period


@run_async
async def test_a_burst_of_writes_does_not_hold_up_the_lock_out_under_the_rate_cap():
    """A sign update written register by register and a light: 11 writes at once. They are not paced; the
    lock-out goes ahead of their time and keeps its cadence (before: its next read came 121 ms later)."""
    async with tcp_rig(SEAT3, SIGN, LOCKOUT, max_rate=100) as rig:
        rig.sims["sign"].writes_single = True
        seat, sign, lockout = rig.device("seat-3"), rig.device("sign"), rig.device("lockout")
        rig.start(seat, sign, lockout)
        await rig.expect_up("seat-3", "sign", "lockout")
        lock = rig.sims["lockout"]
        await lock.wait_until(lambda: lock.requests >= 10)
        writes, before = rig.bus.writes, lock.request_times[-1]
        await asyncio.gather(sign.send(ShowAmounts((("grand", 1234), ("major", 99), ("minor", 5)))),
                             seat.send(SetAcceptedLight(3, "progressive", True)))
        assert rig.bus.writes - writes >= 9  # the sign's single writes and the light
        n = lock.requests
        await lock.wait_until(lambda: lock.requests >= n + 10)
        reads = [t for t in lock.request_times if t >= before]
        gaps = [b - a for a, b in zip(reads, reads[1:], strict=False)]
        assert max(gaps) <= 0.045, [round(g * 1000) for g in gaps]  # 20-30 ms as without writes

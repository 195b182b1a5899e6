"""The model at a unit, checked before anything is written: the rig's devices answer their map's identity block
(hil/modbus_devices.py) and play another model when told, over RTU on a PTY pair and over Modbus TCP."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from drivers.device import DeviceUnavailable
from drivers.events import DeviceDown, DeviceUp, SetAcceptedLight, SetWinLight
from drivers.modbus import Table, frames
from hil.wire import Direction

from test_modbus_serial import is_, kinds
from test_modbus_sim import SEAT3, Spec, run_async, serial_rig, tcp_rig

IO = Spec(1, "seat-io.toml", "table-io")
SPOT = "progressive"
CHECKED, NO_IDENTITY = "checked", "not checked: the map has no identity block"
IDENTITY = 4096  # the shipped maps' identity block: input registers 4096-4103


def requests(rig) -> list[tuple[int, int, int]]:
    """A recorder of the requests that reach the devices on the wire: (unit, function, address)."""
    seen: list[tuple[int, int, int]] = []

    def hook(frame: bytes) -> bytes:
        seen.append((frame[0], frame[1], int.from_bytes(frame[2:4], "big")))
        return frame

    rig.wire.set_hook(Direction.TO_DEVICE, hook)
    return seen


@run_async
async def test_the_right_model_comes_up_after_one_identity_read():
    async with serial_rig(SEAT3) as rig:
        seen = requests(rig)
        dev = rig.device("seat-3")
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("seat-3")]
        assert dev.identity_status == CHECKED
        # the identity block first, once; then the poll
        assert seen[0] == (3, frames.READ_INPUT_REGISTERS, IDENTITY)
        assert await dev.poll_once()
        assert [r for r in seen if r[2] == IDENTITY] == [seen[0]]
        await dev.send(SetAcceptedLight(3, SPOT, True))
        assert rig.sims["seat-3"].lights()["accepted"] == {(3, SPOT): True}


@run_async
async def test_a_wrong_model_stays_down_with_the_reason_and_nothing_is_written():
    async with serial_rig(SEAT3) as rig:
        sim = rig.sims["seat-3"]
        sim.model = "PJ-SIGN-3"
        seen = requests(rig)
        dev = rig.device("seat-3")
        with pytest.raises(DeviceUnavailable, match="model not checked yet"):  # before first contact
            await dev.send(SetAcceptedLight(3, SPOT, True))
        with capture_logs() as logs:
            rig.start(dev)
            down = await rig.expect(is_(DeviceDown))
            with pytest.raises(DeviceUnavailable, match="is down"):
                await dev.send(SetAcceptedLight(3, SPOT, True))
            n = sim.requests
            await sim.wait_until(lambda: sim.requests >= n + 3)  # three more attempts: each one identity read
            await rig.stop_devices()
        reason = down.reason
        for word in ("seat-3", f"bus {rig.bus.name}", "unit 3", "'PJ-SIGN-3'", "'PJ-SEAT-1'", "seat-single.toml"):
            assert word in reason, (word, reason)
        assert dev.identity_status == reason and dev.health.up is False
        assert kinds(rig.seen + rig.drain()) == ["DeviceDown"]
        # on the wire: only the identity block was ever asked, nothing written or polled
        assert len(seen) >= 4 and set(seen) == {(3, frames.READ_INPUT_REGISTERS, IDENTITY)}
        assert sim.lights() == {"accepted": {(3, SPOT): False}, "win": {3: False}}
        assert dev.health.errors["identity"] >= len(seen) - 1  # the last may have been cut short by the stop
        # loud once, quiet on the repeats
        loud = [e for e in logs if e["log_level"] == "error" and e.get("device") == "seat-3"]
        assert len(loud) == 1 and loud[0]["detail"] == reason
        assert sum(1 for e in logs if e["log_level"] == "debug" and e.get("detail") == reason) >= 2


@run_async
async def test_a_device_answering_the_identity_block_with_an_exception_stays_down():
    async with tcp_rig(SEAT3) as rig:
        sim = rig.sims["seat-3"]
        sim.set_exception(2)
        dev = rig.device("seat-3")
        assert not await dev.poll_once()
        assert not await dev.poll_once()
        (down,) = rig.drain()
        assert isinstance(down, DeviceDown)
        assert "identity block (input_register 4096-4103) with exception 2 (illegal_address)" in down.reason
        assert "'PJ-SEAT-1'" in down.reason and "unit 3" in down.reason
        assert all(t.fc == frames.READ_INPUT_REGISTERS for t in rig.bus.log)
        sim.set_exception(None)
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("seat-3")] and dev.identity_status == CHECKED


@run_async
async def test_the_right_device_swapped_in_comes_up_on_reconnect():
    async with tcp_rig(SEAT3) as rig:
        sim, dev = rig.sims["seat-3"], rig.device("seat-3")
        rig.start(dev)
        await rig.expect(is_(DeviceUp))
        await dev.send(SetWinLight(3, True))
        # the device is pulled; another model is plugged in at its unit
        sim.mute(True)
        await rig.expect(is_(DeviceDown))
        sim.model = "PJ-LOCKOUT-1"
        sim.reboot()
        with capture_logs() as logs:
            sim.mute(False)
            await sim.wait_until(lambda: "PJ-LOCKOUT-1" in dev.identity_status)
        # down already (no answer): the new answer is logged loudly all the same
        assert [e["detail"] for e in logs if e["log_level"] == "error"] == [dev.identity_status]
        assert dev.health.up is False and sim.lights()["win"] == {3: False}  # the win light not written to it
        writes = [t for t in rig.bus.log if t.fc in (5, 6, 15, 16)]
        # the right model is put back: up, and what was commanded is written again
        sim.model = "PJ-SEAT-1"
        await rig.expect(is_(DeviceUp))
        await sim.wait_until(lambda: sim.lights()["win"] == {3: True})
        assert dev.identity_status == CHECKED
        assert len(writes) == 1  # the one write made while the first device was up
        await rig.stop_devices()
        assert kinds(rig.seen + rig.drain()) == ["DeviceUp", "DeviceDown", "DeviceUp"]


@run_async
async def test_a_map_without_identity_is_up_and_not_checked():
    async with serial_rig(IO) as rig:
        seen = requests(rig)
        dev = rig.device("table-io")
        assert dev.identity_status == NO_IDENTITY
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("table-io")]
        assert all(fc != frames.READ_INPUT_REGISTERS for _, fc, _ in seen)
        assert dev.identity_status == NO_IDENTITY
        assert await rig.bus.read(1, Table.DISCRETE_INPUT, 0, 1) == [False]


@pytest.mark.parametrize("code", [5, 6, 10, 11])
@run_async
async def test_busy_or_a_gateway_without_the_device_is_not_a_wrong_identity(code):
    async with tcp_rig(SEAT3) as rig:
        sim = rig.sims["seat-3"]
        sim.set_exception(code)
        dev = rig.device("seat-3")
        with capture_logs() as logs:
            assert not await dev.poll_once()
            assert not await dev.poll_once()  # probed again, still not checked
        (down,) = rig.drain()
        assert isinstance(down, DeviceDown) and f"with exception {code}" in down.reason
        name = frames.EXCEPTION_NAMES[code]
        assert dev.identity_status == f"not checked yet: exception {code} ({name})"
        assert dev.health.errors["identity"] == 0 and dev.health.errors[f"exception_{name}"] == 2
        assert not any("model" in str(e.get("detail", "")) and "expected" in str(e.get("detail", ""))
                       for e in logs if e["log_level"] == "error")
        sim.set_exception(None)
        assert await dev.poll_once()
        assert rig.drain() == [DeviceUp("seat-3")] and dev.identity_status == CHECKED

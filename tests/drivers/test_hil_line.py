"""The rig with the real line-protocol simulators, and the real line driver connected through
``rig.connections()``: every control action arrives at the driver as the event it stands for, and every
fault shows up where a driver would notice it."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from test_hil_table import Drivers, until

from drivers.events import (
    CardDealt,
    CardsDispensed,
    DeviceDown,
    DeviceUp,
    DiceRolled,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShoeJam,
    ShowMessage,
    ShuffleFault,
    ShufflerCount,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from hil.line_device import LineDeviceSim
from hil.rig import Rig, RigError
from hil.rig_config import parse_rig_config
from hil.wire import Direction

LINE_TABLE = """
table = "L1"
seats = 3

[[line]]
name = "seats"
kind = "seat"
seats = [1, 2, 3]
heartbeat_s = 0.3

[[line]]
name = "lockout"
kind = "lockout"
heartbeat_s = 0.3

[[line]]
name = "sign"
kind = "sign"
heartbeat_s = 0.3

[[line]]
name = "shuffler"
kind = "shuffler"
heartbeat_s = 0.3

[[line]]
name = "shoe"
kind = "shoe"
heartbeat_s = 0.3

[[line]]
name = "dice"
kind = "dice"
baud = 9600
heartbeat_s = 0.3
"""

@contextlib.asynccontextmanager
async def line_table(tmp_path: Path, text: str = LINE_TABLE):
    cfg = parse_rig_config(text, "line.toml", base=tmp_path)
    with structlog.testing.capture_logs():
        async with Rig(cfg, source="line.toml", ack_wait_s=3.0) as rig, Drivers(rig) as drivers:
            yield rig, drivers


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_every_table_action_reaches_the_driver(tmp_path: Path) -> None:
    async def main() -> None:
        async with line_table(tmp_path) as (rig, d):
            assert isinstance(rig.simulator("shoe"), LineDeviceSim)
            assert await rig.place_chip(2, "progressive", 500) == {"device": "seats", "acknowledged": True}
            assert await d.expect(lambda e: isinstance(e, WagerSensed)) == WagerSensed("seats", 2, "progressive", 500)
            await rig.remove_chip(2, "progressive")
            assert await d.expect(lambda e: isinstance(e, WagerRemoved)) == WagerRemoved("seats", 2, "progressive")
            await rig.press_lockout()
            assert await d.expect(lambda e: isinstance(e, LockoutPressed)) == LockoutPressed("lockout")
            await rig.shuffle(52, "A")
            assert await d.expect(lambda e: isinstance(e, ShufflerCount)) == ShufflerCount("shuffler", 52, "A")
            await rig.shuffle_fault("door open")
            assert await d.expect(lambda e: isinstance(e, ShuffleFault)) == ShuffleFault("shuffler", "door open")
            await rig.dispense(7)
            assert await d.expect(lambda e: isinstance(e, CardsDispensed)) == CardsDispensed("shoe", 7)
            await rig.jam_shoe()
            assert await d.expect(lambda e: isinstance(e, ShoeJam)) == ShoeJam("shoe")
            assert (await rig.deal(["AS", "KD", "10h"]))["acknowledged"] is True
            dealt = [await d.expect(lambda e: isinstance(e, CardDealt)) for _ in range(3)]
            assert [c.card for c in dealt] == [48, 46, 33]  # in the order dealt
            await rig.roll(3, 4)
            assert await d.expect(lambda e: isinstance(e, DiceRolled)) == DiceRolled("dice", 3, 4)

    run(main())


def test_what_the_driver_commands_shows_in_lights_and_sign(tmp_path: Path) -> None:
    async def main() -> None:
        async with line_table(tmp_path) as (rig, d):
            assert rig.lights() == {"seats": {}, "lockout_lamp": False}
            await d.devices["seats"].send(SetAcceptedLight(1, "progressive", True))
            await d.devices["seats"].send(SetAcceptedLight(3, "progressive", True))
            await d.devices["seats"].send(SetWinLight(3, True))
            await d.devices["lockout"].send(SetLockoutLamp(True))
            await d.devices["sign"].send(ShowMessage(SignMessage.WIN, "L1", 3, 1_234_567))
            assert rig.lights() == {
                "seats": {1: {"accepted": ["progressive"], "win": False},
                          3: {"accepted": ["progressive"], "win": True}},
                "lockout_lamp": True,
            }
            assert rig.sign()["message"] == {"message": "WIN", "table": "L1", "seat": 3, "amount_cents": 1_234_567}
            rig.reboot("seats")  # a reboot forgets the lights
            assert rig.lights()["seats"] == {}

    run(main())


def test_unplug_and_mute_take_the_device_down_and_back(tmp_path: Path) -> None:
    async def main() -> None:
        async with line_table(tmp_path) as (rig, d):
            rig.unplug("shoe")
            assert (await d.expect(lambda e: isinstance(e, DeviceDown))).device == "shoe"
            # an event raised while the cable is out is kept and retransmitted once it is back
            task = asyncio.create_task(rig.jam_shoe())
            rig.replug("shoe")
            assert await d.expect(lambda e: isinstance(e, (DeviceUp, DeviceDown))) == DeviceUp("shoe")
            assert await d.expect(lambda e: isinstance(e, ShoeJam)) == ShoeJam("shoe")
            assert (await task)["device"] == "shoe"

            rig.mute("dice", True)
            assert (await d.expect(lambda e: isinstance(e, DeviceDown))).device == "dice"
            rig.mute("dice", False)
            assert await d.expect(lambda e: isinstance(e, (DeviceUp, DeviceDown))) == DeviceUp("dice")
            assert not any(isinstance(e, DeviceDown) and e.device not in ("shoe", "dice") for e in d.seen)

    run(main())


def test_an_event_nobody_acknowledges_is_reported_as_such(tmp_path: Path) -> None:
    async def main() -> None:
        cfg = parse_rig_config(LINE_TABLE, "line.toml", base=tmp_path)
        with structlog.testing.capture_logs():
            async with Rig(cfg, source="line.toml", ack_wait_s=0.3) as rig:  # no driver at all
                assert await rig.roll(6, 6) == {"device": "dice", "acknowledged": False}
                assert (await rig.deal(["2C", "3C"]))["acknowledged"] is False

    run(main())


def test_frame_faults_are_counted_by_the_driver(tmp_path: Path) -> None:
    async def main() -> None:
        async with line_table(tmp_path) as (rig, d):
            dice = d.devices["dice"]
            assert dice.health is not None
            rig.corrupt("dice", 1)
            await rig.roll(1, 2)  # the corrupted copy is refused, the retransmission gets through
            assert await d.expect(lambda e: isinstance(e, DiceRolled)) == DiceRolled("dice", 1, 2)
            assert sum(dice.health.errors.values()) >= 1
            before = sum(dice.health.errors.values())
            await rig.garbage("dice", b"\x00\xff garbage \r\n")
            await until(lambda: sum(dice.health.errors.values()) > before)

            rig.drop("shuffler", 1, Direction.TO_DRIVER)
            await rig.shuffle(52)  # first copy lost, the device retransmits
            assert await d.expect(lambda e: isinstance(e, ShufflerCount)) == ShufflerCount("shuffler", 52, None)
            assert rig.wire_of("shuffler").stats.dropped == 1
            assert rig.simulator("shuffler").stats["retransmits"] >= 1

            rig.delay("shoe", 0.1, 1)
            await rig.dispense(1)
            assert await d.expect(lambda e: isinstance(e, CardsDispensed)) == CardsDispensed("shoe", 1)

            with pytest.raises(RigError, match="line protocol, which has no Modbus exceptions"):
                rig.exception("shoe", 4)

    run(main())


def test_reboot_is_seen_as_a_restarted_device(tmp_path: Path) -> None:
    async def main() -> None:
        async with line_table(tmp_path) as (rig, d):
            shoe = rig.simulator("shoe")
            boot = shoe.boot_id
            rig.reboot("shoe")
            assert shoe.boot_id != boot
            await rig.dispense(3)  # the rebooted device is talking to the driver again
            assert await d.expect(lambda e: isinstance(e, CardsDispensed)) == CardsDispensed("shoe", 3)
            assert d.devices["shoe"].up

    run(main())

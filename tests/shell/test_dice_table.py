"""The dice table daemon on the rig: real drivers (Modbus TCP positions, the dice entry on the line protocol),
real simulators. Chips are placed and dice keyed in through the rig's control API as at a craps table; the
tests then look at what the simulated hardware shows and at what the daemon reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
import structlog

from controller.app.dice_table import DiceTableDaemon
from controller.config import load_config
from controller.config.model import MetricsConfig
from controller.service.control import NotAvailable
from drivers.events import WagerSensed
from hil.attach import attach
from hil.rig import Rig

from rigtable import daemon_on_rig, lit, message, until, win

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "hot-roller-craps.toml"
RIG = ROOT / "config" / "hil" / "craps-hot-roller.toml"
HR = "hot-roller"


@contextlib.asynccontextmanager
async def dice_table(tmp_path, table: Path = TABLE, rig_file: Path = RIG):
    async with daemon_on_rig(DiceTableDaemon, table, rig_file, tmp_path / "state") as (daemon, rig):
        yield daemon, rig


def dice(daemon):
    return daemon.status()["dice"]


async def rolls(daemon, rig, *pairs):
    """Key in rolls at the dice entry and wait until the daemon has recorded them all."""
    before = daemon._series_no, dice(daemon)["series_rolls"]
    sevens = sum(1 for a, b in pairs if a + b == 7)
    for a, b in pairs:
        await rig.roll(a, b)
    if sevens:
        await until(lambda: daemon._series_no == before[0] + sevens, f"{pairs}: the 7 recorded")
    else:
        await until(lambda: dice(daemon)["series_rolls"] == before[1] + len(pairs),
                    lambda: f"{pairs}: rolls recorded: {dice(daemon)}")


def not_recognized(logs):
    return [e for e in logs if e.get("event") == "wager not recognized"]


async def test_hot_roller_series_on_the_rig(tmp_path):
    with structlog.testing.capture_logs() as logs:
        async with dice_table(tmp_path) as (daemon, rig):
            await until(lambda: rig.sign().get("message") is None, "the sign is blank")
            status = await daemon.call("status", {})
            assert status["round"] == {"id": "CR-01-s1", "phase": "betting"} and status["blocks"] == []
            assert status["meters"] == [] and status["dice"]["markers"] == []
            assert await daemon.call("meter_series", {"span": "30d"}) == []  # no meter, no series

            # before the come-out roll: acknowledged
            await rig.place_chip(1, HR, 500)
            await rig.place_chip(2, HR, 500)
            await until(lambda: HR in lit(rig, 1) and HR in lit(rig, 2), "positions 1 and 2 acknowledged")
            rnd = await daemon.call("round", {})
            assert rnd["wagers"] == [{"seat": 1, "spot": HR, "amount": "5.00"}, {"seat": 2, "spot": HR, "amount": "5.00"}]
            assert rnd["dice"]["wagers"] == [{"position": 1, "bet": HR, "amount": "5.00"},
                                             {"position": 2, "bet": HR, "amount": "5.00"}]

            # the dealer moves the wager to the boxperson's area (§ 623c.1(c)): not a withdrawal
            await rig.remove_chip(1, HR)
            await until(lambda: any(e.get("event") == "chip lifted wager stands" for e in logs), "lift logged")
            # a second chip at a position that has a wager is not recognized, and the wager's light stays on
            await rig.place_chip(1, HR, 1000)
            await until(lambda: len(not_recognized(logs)) == 1, "second wager at position 1 refused")
            assert not_recognized(logs)[0]["reason"] == "position already has a wager"
            await rig.remove_chip(1, HR)
            await until(lambda: (1, HR) not in daemon._sensed, "second chip lifted")

            await rolls(daemon, rig, (4, 4))
            d = dice(daemon)
            assert d["series_rolls"] == 1 and d["markers"] == ["4-4"] and d["last_roll"] == [4, 4]
            assert d["board"]["8"] == {"2-6": False, "3-5": False, "4-4": True}
            assert (await daemon.call("status", {}))["round"]["phase"] == "rolling"
            await until(lambda: rig.lights()["lockout_lamp"] is True, "lamp: Hot Roller wagers closed")

            # after the come-out roll: not recognized, no light, the rule named in the log, counted
            await rig.place_chip(3, HR, 500)
            await until(lambda: len(not_recognized(logs)) == 2, "wager after the come-out roll refused")
            late = not_recognized(logs)[1]
            assert late["position"] == 3 and late["reason"] == "after the come-out roll"
            assert late["rule"] == "§ 623c.1(b)" and "§ 623c.1(b)" in late["detail"]
            assert lit(rig, 3) == [] and (await daemon.call("round", {}))["not_recognized"] == 2
            text = daemon.metrics.exposition().decode()
            assert 'progressive_wagers_not_recognized_total{reason="after the come-out roll"} 1.0' in text
            assert 'progressive_wagers_accepted_total{spot="hot-roller"} 2.0' in text

            await rolls(daemon, rig, (2, 2), (3, 3), (1, 3), (1, 4), (6, 5))
            d = dice(daemon)
            assert d["markers"] == ["1-3", "1-4", "2-2", "3-3", "4-4"] and d["numbers_complete"] == [4]
            await rolls(daemon, rig, (3, 2))
            assert dice(daemon)["numbers_complete"] == [4, 5]
            assert HR in lit(rig, 1) and HR in lit(rig, 2)  # both wagers stand, lights on

            # the 7 with two numbers complete: both win 5 to 1 (Paytable A)
            await rolls(daemon, rig, (3, 4))
            await until(lambda: win(rig, 1) and win(rig, 2), "win lights on")
            await until(lambda: lit(rig, 1) == [] and lit(rig, 2) == [], "accepted lights off")
            await until(lambda: rig.lights()["lockout_lamp"] is False, "lamp off: next series open")
            status = await daemon.call("status", {})
            assert status["round"] == {"id": "CR-01-s2", "phase": "betting"}
            d = status["dice"]
            assert d["series_rolls"] == 0 and d["markers"] == [] and d["wagers"] == []
            assert [(r["position"], r["outcome"], r["numbers_complete"], r["award"], r["amount"]) for r in d["results"]] \
                == [(1, "two-numbers", 2, "5 to 1", "30.00"), (2, "two-numbers", 2, "5 to 1", "30.00")]
            settled = [e for e in logs if e.get("event") == "wager settled"]
            assert [(e["position"], e["numbers_complete"], e["amount"]) for e in settled] == [(1, 2, "30.00"), (2, 2, "30.00")]

            # the chip refused during the series is still on position 3: no wager of the new series ...
            await rig.place_chip(4, HR, 200)
            await until(lambda: HR in lit(rig, 4), "position 4 acknowledged in the new series")
            assert lit(rig, 3) == [] and [w["position"] for w in dice(daemon)["wagers"]] == [4]
            # Reported again without a removal (as a line-protocol seat does after a reboot): the standing wager
            # at 4 is the device repeating itself, the chip left on 3 is still no wager (events in order).
            count = len(not_recognized(logs))
            daemon.emit_for("seat-4")(WagerSensed("seat-4", 4, HR, 200))
            daemon.emit_for("seat-3")(WagerSensed("seat-3", 3, HR, 500))
            await until(lambda: len(not_recognized(logs)) > count, "the chip on position 3 reported again")
            assert [(e["position"], e["reason"]) for e in not_recognized(logs)[count:]] \
                == [(3, "chip left from a settled wager")]
            assert [w["position"] for w in dice(daemon)["wagers"]] == [4] and HR in lit(rig, 4)
            # the new series' first wager put the last series' win lights out
            await until(lambda: not win(rig, 1) and not win(rig, 2), "win lights off")

            # a 7 on the come-out roll loses every wager ...
            await rolls(daemon, rig, (6, 1))
            await until(lambda: lit(rig, 4) == [], "accepted light off")
            d = dice(daemon)
            assert [(r["position"], r["outcome"], r["award"], r["amount"]) for r in d["results"]] \
                == [(4, "lose", None, "0.00")]
            assert d["series"] == "CR-01-s3" and not any(win(rig, s) for s in (1, 2, 3, 4))
            # ... and the chip left on position 3 is a wager once lifted and placed again
            await rig.remove_chip(3, HR)
            await until(lambda: (3, HR) not in daemon._sensed, "position 3 lifted")
            await rig.place_chip(3, HR, 500)
            await until(lambda: HR in lit(rig, 3), "position 3 acknowledged after placing it again")

            # the card table's operations are not offered; an unknown one is unknown
            with pytest.raises(NotAvailable, match="not at a dice table"):
                await daemon.call("claim", {"seat": 1})
            with pytest.raises(LookupError):
                await daemon.call("nonsense", {})


async def test_device_down_refuses_new_wagers_rolls_go_on(tmp_path):
    with structlog.testing.capture_logs() as logs:
        async with dice_table(tmp_path) as (daemon, rig):
            await rig.place_chip(1, HR, 500)
            await until(lambda: HR in lit(rig, 1), "position 1 acknowledged")
            rig.mute("lockout", True)
            await until(lambda: daemon.status()["blocks"] == [{"block": "device", "sources": ["lockout"]}],
                        lambda: f"wagering disabled: {daemon.status()['blocks']}")
            await until(lambda: message(rig) == "OFFLINE", "sign says OFFLINE")
            await rig.place_chip(2, HR, 500)
            await until(lambda: not_recognized(logs), "wager while a device is down not recognized")
            assert not_recognized(logs)[0]["reason"] == "wagering disabled" and lit(rig, 2) == []
            assert HR in lit(rig, 1)  # the recognized wager stays
            assert dice(daemon)["accepting"] is False

            await rolls(daemon, rig, (1, 3), (2, 2), (1, 4), (2, 3))  # the game goes on
            assert dice(daemon)["numbers_complete"] == [4, 5]

            rig.mute("lockout", False)
            await until(lambda: daemon.status()["blocks"] == [], "wagering enabled again")
            await until(lambda: message(rig) is None, lambda: f"the sign is blank again: {rig.sign()}")
            await rolls(daemon, rig, (5, 2))
            await until(lambda: win(rig, 1), "the wager made before the outage is paid")
            assert [r["amount"] for r in dice(daemon)["results"]] == ["30.00"]


async def test_a_position_device_down_disables_that_position_only(tmp_path):
    """As at a card table (docs/rounds.md, "A device down"): position 2's device muted behind the gateway, the
    other positions wager on and the sign names position 2 between the meters' (blank) face."""
    with structlog.testing.capture_logs() as logs:
        async with dice_table(tmp_path) as (daemon, rig):
            rig.mute("seat-2", True)
            await until(lambda: [(x["seat"], x["device"]) for x in daemon.status()["seats_disabled"]]
                        == [(2, "seat-2")], lambda: f"position 2 disabled: {daemon.status()['seats_disabled']}")
            assert daemon.status()["blocks"] == [] and dice(daemon)["accepting"] is True
            assert [e["seats"] for e in logs if e["event"] == "seat wagering disabled"] == [[2]]
            await until(lambda: message(rig) == "OFFLINE" and rig.sign()["message"]["seat"] == 2,
                        lambda: f"the sign names position 2: {rig.sign()}")
            await rig.place_chip(1, HR, 500)
            await until(lambda: HR in lit(rig, 1), "position 1 acknowledged while position 2 is down")
            daemon.emit_for("seat-2")(WagerSensed("seat-2", 2, HR, 500))  # a report the outage overtook
            await until(lambda: not_recognized(logs), "the wager at position 2 not recognized")
            assert [(e["position"], e["reason"]) for e in not_recognized(logs)] == [(2, "seat wagering disabled")]
            assert [w["position"] for w in dice(daemon)["wagers"]] == [1]

            rig.mute("seat-2", False)
            await until(lambda: daemon.status()["seats_disabled"] == [], "position 2 enabled again")
            assert [e["seats"] for e in logs if e["event"] == "seat wagering enabled"] == [[2]]
            await until(lambda: message(rig) is None, lambda: f"the sign is blank again: {rig.sign()}")


# --- Six Eight Shake at a Props & Hops table ------------------------------------------------------

SHAKE_MAP = (ROOT / "config" / "devices" / "seat-hot-roller.toml").read_text().replace('"hot-roller"',
                                                                                      '"six-eight-shake"')
SHAKE_RIG = """
table = "PH-01"
seats = 2

[[tcp]]
name = "table-net"
host = "127.0.0.1"
port = 0
devices = [
  { unit = 1, name = "seat-1", kind = "seat", map = "seat-shake.toml", seats = [1] },
  { unit = 2, name = "seat-2", kind = "seat", map = "seat-shake.toml", seats = [2] },
]

[[line]]
name = "dice"
kind = "dice"
baud = 9600
"""
SHAKE_TABLE = """
table = "PH-01"
game = "props-and-hops"
seats = 2
state_dir = "state"

[wagers.props-and-hops]
paytable = "props-and-hops"

[buses.table-net]
transport = "tcp"
host = "127.0.0.1"
port = 5020
""" + "".join(f"""
[devices.seat-{s}]
kind = "seat"
transport = "tcp"
bus = "table-net"
unit = {s}
register_map = "seat-shake.toml"
seats = [{s}]
""" for s in (1, 2)) + """
[devices.dice]
kind = "dice-entry"
transport = "line"
port = "/dev/ttyUSB1"
baud = 9600
"""


async def test_six_eight_shake_on_the_rig(tmp_path):
    (tmp_path / "seat-shake.toml").write_text(SHAKE_MAP)
    (tmp_path / "rig.toml").write_text(SHAKE_RIG)
    (tmp_path / "table.toml").write_text(SHAKE_TABLE)
    spot = "six-eight-shake"
    with structlog.testing.capture_logs() as logs:
        async with dice_table(tmp_path, tmp_path / "table.toml", tmp_path / "rig.toml") as (daemon, rig):
            await rig.place_chip(1, spot, 100)
            await until(lambda: spot in lit(rig, 1), "seat 1 acknowledged")
            await rolls(daemon, rig, (1, 5), (4, 2))
            # a wager made between rolls counts only the throws after it (controller/dice/six_eight_shake.py)
            await rig.place_chip(2, spot, 100)
            await until(lambda: spot in lit(rig, 2), "seat 2 acknowledged between rolls")
            await rolls(daemon, rig, (3, 3))
            assert [(w["seat"], w["thrown"]) for w in dice(daemon)["wagers"]] == [(1, ["1-5", "2-4", "3-3"]), (2, ["3-3"])]
            # lifting the chip takes the wager down (§ 668a.2(f)(8))
            await rig.remove_chip(2, spot)
            await until(lambda: lit(rig, 2) == [], "seat 2 taken down: light off")
            assert [(r["seat"], r["outcome"], r["amount"]) for r in dice(daemon)["results"]] == [(2, "removed", "1.00")]
            await rolls(daemon, rig, (6, 2), (5, 3), (4, 4))
            await until(lambda: win(rig, 1) and lit(rig, 1) == [], "seat 1 won: win light on, accepted off")
            assert [(r["seat"], r["outcome"], r["award"], r["amount"]) for r in dice(daemon)["results"]][-1] \
                == (1, spot, "150 to 1", "151.00")
            assert dice(daemon)["wagers"] == [] and not not_recognized(logs)


async def test_progressived_runs_a_dice_table(tmp_path):
    """progressived's own start-up path picks the dice daemon for a dice game (the rig's ports through
    attach, the control socket answering with the dice state)."""
    from controller.cli.daemon import serve

    sock = tmp_path / "control.sock"
    cfg = load_config(TABLE)
    async with Rig.from_file(RIG) as rig:
        cfg = replace(attach(cfg, rig.connections()), state_dir=tmp_path / "state",
                      metrics=MetricsConfig("127.0.0.1", 0))
        task = asyncio.create_task(serve(cfg, socket=str(sock), listen=("127.0.0.1", 0)))
        try:
            await until(sock.exists, "control socket listening")
            await rig.place_chip(2, HR, 300)
            await until(lambda: HR in lit(rig, 2), "position 2 acknowledged")
            reader, writer = await asyncio.open_unix_connection(str(sock))
            writer.write(b'{"op": "round", "id": 1}\n')
            answer = json.loads(await reader.readline())
            writer.close()
            await writer.wait_closed()
            assert answer["ok"], answer
            assert answer["result"]["id"] == "CR-01-s1"
            assert answer["result"]["dice"]["wagers"] == [{"position": 2, "bet": HR, "amount": "3.00"}]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                async with asyncio.timeout(20):
                    assert await task == 0

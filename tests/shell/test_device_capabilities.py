"""A table's devices that lack what the contract makes optional (docs/configuration.md, `writes` and `read_back`):
their configuration, and a write-only sign on the rig that acknowledges its writes and does not block the table."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_config import base, one, problems, write

from controller.app.table import TableDaemon
from controller.config import load_config
from controller.config.devices import driver_settings

from rigtable import daemon_on_rig, lit, until

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"


def test_writes_and_read_back_are_given_to_the_driver(tmp_path):
    doc = base()
    doc["devices"]["sign"]["read_back"] = False
    doc["devices"]["seat-2"]["writes"] = "single"
    cfg = load_config(write(tmp_path, doc))
    specs = {m.name: m.options() for m in driver_settings(cfg).modbus}
    assert (specs["sign"]["read_back"], specs["sign"]["writes"]) == (False, "auto")
    assert (specs["seat-2"]["read_back"], specs["seat-2"]["writes"]) == (True, "single")
    assert (specs["seat-1"]["read_back"], specs["seat-1"]["writes"]) == (True, "auto")


@pytest.mark.parametrize(("key", "value"), [("writes", "many"), ("writes", 16), ("read_back", "no")])
def test_a_bad_capability_is_one_problem_naming_its_field(tmp_path, key, value):
    doc = base()
    doc["devices"]["sign"][key] = value
    one(problems(tmp_path, doc), f"devices.sign.{key}")


@pytest.mark.parametrize("device", ["seat-2", "lockout"])
def test_only_a_sign_may_be_write_only(tmp_path, device):
    doc = base()
    doc["devices"][device]["read_back"] = False  # an accepted light acknowledges a wager: it must be proved
    p = one(problems(tmp_path, doc), f"devices.{device}.read_back")
    assert "only a sign may be write-only" in p.message


def test_a_line_device_has_no_writes(tmp_path):
    doc = base()
    doc["devices"]["shoe"]["writes"] = "single"
    one(problems(tmp_path, doc), "devices.shoe.writes")


def _tcp(doc):
    doc["buses"]["table-bus"] = {"transport": "tcp", "host": "10.0.0.5"}
    for d in doc["devices"].values():
        if d.get("transport") == "rtu":
            d["transport"] = "tcp"
    return doc


@pytest.mark.parametrize("unit", [0, 248, 254, 256])
def test_tcp_unit_ids_are_1_to_247_and_255(tmp_path, unit):
    doc = _tcp(base())
    doc["devices"]["sign"]["unit"] = unit
    assert "1-247, or 255" in one(problems(tmp_path, doc), "devices.sign.unit").message


def test_tcp_unit_255_is_a_device_reached_directly(tmp_path):
    doc = _tcp(base())
    doc["devices"]["sign"]["unit"] = 255
    assert load_config(write(tmp_path, doc)).devices["sign"].unit == 255
    doc = base()
    doc["devices"]["sign"]["unit"] = 255  # not on a serial line
    one(problems(tmp_path, doc), "devices.sign.unit")


def _write_only_sign_rig(tmp_path) -> Path:
    text, n = re.subn(r'(name = "sign", kind = "sign", map = "sign")', r"\1, read_back = false", RIG.read_text())
    assert n == 1
    path = tmp_path / "write-only-sign.toml"
    path.write_text(text)
    return path


def _sign_read_back(read_back: bool):
    return lambda cfg: replace(cfg, devices={**cfg.devices, "sign": replace(cfg.devices["sign"], read_back=read_back)})


async def test_a_write_only_sign_that_acknowledges_does_not_block_the_table(tmp_path):
    async with daemon_on_rig(TableDaemon, TABLE, _write_only_sign_rig(tmp_path), tmp_path / "state",
                             _sign_read_back(False)) as (daemon, rig):
        sign = rig.node("sign").sim
        await until(lambda: sign.sign()["amounts"][0] == (1, 1_000_000), "the sign shows the meter")
        assert not daemon.state.blocked
        await rig.place_chip(3, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 3), "seat 3 acknowledged")
        status = await daemon.call("status", {})
        by_id = {d["id"]: d for d in status["devices"]}
        assert (by_id["sign"]["up"], by_id["sign"]["read_back"], by_id["sign"]["writes"]) == (True, False, "multiple")
        assert (by_id["seat-3"]["read_back"], by_id["shoe"]["read_back"]) == (True, None)
        text = daemon.metrics.exposition().decode()
        assert 'progressive_device_read_back{device="sign"} 0.0' in text
        assert 'progressive_device_read_back{device="seat-3"} 1.0' in text
        assert 'progressive_device_writes_info{device="sign",mode="multiple"} 1.0' in text
        # a power-cycled sign shows the meters again within a second or so, never having been read
        sign.reboot()
        await until(lambda: sign.sign()["amounts"][0] == (1, 1_000_000), "the sign shows the meter again", 3.0)
        assert daemon._info["sign"].errors == 0
        # and one that stops acknowledging is down, as any sign
        rig.mute("sign", True)
        await until(lambda: daemon.state.blocked, "the table blocked by its sign", 5.0)


def _seat_without_15_rig(tmp_path) -> Path:
    text, n = re.subn(r'(name = "seat-2", kind = "seat", map = "seat-single-bonus", seats = \[2\])',
                      r"\1, writes_single = true", RIG.read_text())
    assert n == 1
    path = tmp_path / "seat-without-15.toml"
    path.write_text(text)
    return path


async def test_a_seat_device_without_15_is_detected_once_and_never_goes_down(tmp_path):
    import structlog

    with structlog.testing.capture_logs() as logs:
        async with daemon_on_rig(TableDaemon, TABLE, _seat_without_15_rig(tmp_path), tmp_path / "state") as (
                daemon, rig):
            await rig.place_chip(2, "progressive", 100)
            await until(lambda: "progressive" in lit(rig, 2), "seat 2 acknowledged")
            status = {d["id"]: d for d in (await daemon.call("status", {}))["devices"]}
            assert (status["seat-2"]["writes"], status["seat-3"]["writes"]) == ("single (detected)", "multiple")
            assert status["seat-2"]["up"] and status["seat-2"]["errors"] == 0
            assert rig.node("seat-2").sim.requests_by_function[15] == 1  # the start-up's lights: refused once, then coil by coil
            await until(lambda: 'progressive_device_writes_info{device="seat-2",mode="single (detected)"} 1.0'
                        in daemon.metrics.exposition().decode(), "the metric says so", 7.0)
            assert 'device="seat-2",mode="multiple"' not in daemon.metrics.exposition().decode()
    warned = [e for e in logs if e["log_level"] == "warning" and "multiple writes" in e["event"]]
    assert [e["device"] for e in warned] == ["seat-2"]
    assert not [e for e in logs if e["event"] == "device down"]

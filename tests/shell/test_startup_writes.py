"""What a table writes to its devices at start-up, counted on the rig (the requests that reached each simulated
device, by function code): each seat device's lights in one request (15), the lock-out's lamp once, the sign's
face once. Before, each seat's lights went out one coil a request, again at its DeviceUp and once more with 15,
and the sign's face two or three times."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path

from controller.app.table import TableDaemon
from controller.config import load_config
from controller.config.devices import build_drivers
from hil.attach import attach
from hil.rig import Rig

from rigtable import daemon_on_rig, stop, until

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
SEATS = [f"seat-{s}" for s in range(1, 8)]
WRITES = (5, 6, 15, 16)


def _writes(rig, name: str) -> dict[int, int]:
    return {fc: n for fc, n in rig.node(name).sim.requests_by_function.items() if fc in WRITES}


async def _polled_again(rig, times: int = 21) -> None:
    """Every seat device read `times` more times: past its read-back of the lights (every 20 polls), so a write that
    was still to come has come."""
    sims = [rig.node(n).sim for n in SEATS]
    want = [s.requests_by_function[4] + times for s in sims]
    await until(lambda: all(s.requests_by_function[4] >= w for s, w in zip(sims, want, strict=True)), "the seats polled", 20.0)


async def test_each_seat_device_gets_its_lights_in_one_request_and_the_sign_its_face_once(tmp_path):
    """Seat 2's device is configured without 15 (`writes = "single"`): its four coils one request each."""
    def single(cfg):
        return replace(cfg, devices={**cfg.devices, "seat-2": replace(cfg.devices["seat-2"], writes="single")})

    async with daemon_on_rig(TableDaemon, TABLE, RIG, tmp_path / "state", single) as (daemon, rig):
        sign = rig.node("sign").sim
        await until(lambda: sign.sign()["amounts"][0] == (1, 1_000_000), "the sign shows the meters")
        await _polled_again(rig)
        assert _writes(rig, "seat-2") == {5: 4}
        for name in SEATS[:1] + SEATS[2:]:  # four coils each (three accepted lights, the win light): one write of 15
            assert _writes(rig, name) == {15: 1}, (name, _writes(rig, name))
        assert _writes(rig, "lockout") == {5: 1}
        assert _writes(rig, "sign") == {16: 1, 6: 1}  # the amounts, then the message code 0
        assert daemon._info["seat-1"].errors == 0
        status = {d["id"]: d for d in (await daemon.call("status", {}))["devices"]}
        assert status["seat-2"]["writes"] == "single" and status["seat-3"]["writes"] == "multiple"


@contextlib.asynccontextmanager
async def _daemon_with_the_lockout_muted(tmp_path):
    async with Rig.from_file(RIG) as rig:
        rig.mute("lockout", True)
        cfg = replace(attach(load_config(TABLE), rig.connections()), state_dir=tmp_path / "state")
        buses, devices = build_drivers(cfg)
        daemon = TableDaemon(cfg, devices, buses=buses)
        task = asyncio.create_task(daemon.run())
        try:
            yield daemon, rig
        finally:
            await stop(task)


async def _sign_read_back(rig, times: int = 2) -> None:
    """The sign read back `times` more times (once a second): a face it lost, or a write still to come, has come."""
    sim = rig.node("sign").sim
    want = sim.requests_by_function[3] + times
    await until(lambda: sim.requests_by_function[3] >= want, "the sign read back", 10.0)


async def test_a_table_that_starts_blocked_shows_offline_once(tmp_path):
    async with _daemon_with_the_lockout_muted(tmp_path) as (daemon, rig):
        sign = rig.node("sign").sim
        await until(lambda: (sign.sign()["message"] or {}).get("message") == "OFFLINE", "the sign shows OFFLINE")
        await _sign_read_back(rig)
        assert daemon.state.blocked
        assert _writes(rig, "sign") == {16: 1}  # the message area in one write, its code among it
        rig.mute("lockout", False)
        await until(lambda: sign.sign()["message"] is None, "the meters shown again")
        await _sign_read_back(rig)
        assert _writes(rig, "sign") == {16: 2, 6: 1}

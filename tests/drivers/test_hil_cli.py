"""``progressive-hil`` as people and scripts use it: ``run`` in a child process, commands from others, and
real drivers in this process connected through the connections file ``run`` writes. The commands run in this
process (``hil.cli.main``, tests/support/ctlrun.py) but for a few through the installed command: the contract."""

from __future__ import annotations

import asyncio
import json
import signal
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import structlog.testing
from test_hil_table import Drivers

from drivers.events import (
    CardDealt,
    DeviceDown,
    DeviceUp,
    LockoutPressed,
    SetAcceptedLight,
    WagerRemoved,
    WagerSensed,
)
from hil.rig import Connection

from ctlrun import HIL, run_hil

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "config" / "hil" / "minimal.toml"


async def hil(*argv: str, process: bool = False) -> tuple[int, str, str]:
    """A command, in a thread: it waits on the rig's socket while the drivers answer on this event loop."""
    r = await asyncio.to_thread(run_hil, *argv, process=process)
    return r.returncode, r.stdout, r.stderr


async def wait_for_socket(path: Path, proc: asyncio.subprocess.Process, timeout: float = 20) -> None:
    """Poll for the socket file with a deadline; fail at once if the rig exits instead."""
    async with asyncio.timeout(timeout):
        while not path.exists():
            if proc.returncode is not None:
                raise AssertionError(f"progressive-hil run exited with {proc.returncode}")
            await asyncio.sleep(0.02)


def rig_from_connections(path: Path) -> Any:
    """What Drivers needs, from the connections file alone (as the daemon's configuration will be)."""
    doc = tomllib.loads(path.read_text())
    conns = {d["name"]: Connection(**{**d, "seats": tuple(d.get("seats", ()))}) for d in doc["device"]}
    return SimpleNamespace(connections=lambda: conns, config=SimpleNamespace(seats=doc["seats"]))


def test_run_and_drive_from_the_command_line(tmp_path: Path) -> None:
    sock, conn_file = tmp_path / "hil.sock", tmp_path / "drivers.toml"

    async def main() -> None:
        run = await asyncio.create_subprocess_exec(
            str(HIL), "run", str(MINIMAL), "--control", str(sock), "--connections", str(conn_file),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            await wait_for_socket(sock, run)
            assert oct(sock.stat().st_mode & 0o777) == oct(0o600)
            assert conn_file.exists()
            async with Drivers(rig_from_connections(conn_file)) as d:
                code, out, err = await hil("--control", str(sock), "place", "1", "progressive", "--amount", "5.00",
                                           process=True)
                assert (code, out, err) == (0, "seat 1 progressive: chip placed ($5.00) on seat-1\n", "")
                assert await d.expect(WagerSensed) == WagerSensed("seat-1", 1, "progressive", 500)

                # placed again without being lifted: the device sees no new chip, and says so (before: "chip placed")
                code, out, err = await hil("--control", str(sock), "place", "1", "progressive", "--amount", "5.00")
                assert code == 0 and "a chip was on the spot already (never lifted)" in out, (out, err)
                assert "nothing is wagered" in out

                code, out, _ = await hil("--control", str(sock), "--json", "remove", "1", "progressive")
                assert code == 0
                assert json.loads(out) == {"ok": True, "result": {"device": "seat-1", "acknowledged": None}}
                assert await d.expect(WagerRemoved) == WagerRemoved("seat-1", 1, "progressive")

                code, out, _ = await hil("lockout", "--control", str(sock))  # options after the command too
                assert code == 0 and out == "lockout: sent by lockout\n"
                assert await d.expect(LockoutPressed) == LockoutPressed("lockout")

                code, out, _ = await hil("--control", str(sock), "deal", "AS", "KD")
                assert (code, out) == (0, "deal: sent by shoe; acknowledged by the driver\n")
                assert [(await d.expect(CardDealt)).card for _ in range(2)] == [48, 46]

                await d.devices["seat-2"].send(SetAcceptedLight(2, "progressive", True))
                code, out, _ = await hil("--control", str(sock), "lights")
                assert (code, out) == (0, "lock-out lamp: off\nseat 2: accepted progressive; win off\n")

                code, out, _ = await hil("--control", str(sock), "fault", "seat-2", "mute", "on")
                assert code == 0
                assert (await d.expect(DeviceDown)).device == "seat-2"
                code, out, _ = await hil("--control", str(sock), "status")
                assert code == 0 and "table MIN-1 (2 seats)" in out and "faults in force: seat-2: muted" in out
                code, out, _ = await hil("--control", str(sock), "--json", "status")
                status = json.loads(out)["result"]
                assert [x["name"] for x in status["devices"] if x["muted"]] == ["seat-2"]
                await hil("--control", str(sock), "fault", "seat-2", "mute", "off")
                assert await d.expect(DeviceUp) == DeviceUp("seat-2")

                code, out, _ = await hil("--control", str(sock), "unplug", "shoe")
                assert (code, out) == (0, "unplugged shoe: shoe\n")
                assert (await d.expect(DeviceDown)).device == "shoe"
                await hil("--control", str(sock), "replug", "shoe")
                assert await d.expect(DeviceUp) == DeviceUp("shoe")

                # refused by the rig: exit 1, the reason on stderr, nothing sent
                code, out, err = await hil("--control", str(sock), "reboot", "nobody", process=True)
                assert (code, out) == (1, "") and err.startswith("progressive-hil: no device named 'nobody'"), err
                for argv, reason in ((["place", "5", "progressive"], "seat 5 is not at this table (seats 1-2)"),
                                     (["roll", "1", "2"], "this rig has no dice device"),
                                     (["sign"], "this rig has no sign device"),
                                     (["fault", "seat-1", "exception", "9"], "exception code 9: one of")):
                    code, out, err = await hil("--control", str(sock), *argv)
                    assert (code, out) == (1, ""), argv
                    assert err.startswith("progressive-hil: ") and reason in err, (argv, err)
                # bad input: exit 2 before anything is sent
                code, out, err = await hil("--control", str(sock), "place", "1", "progressive", "--amount", "5.001")
                assert (code, out) == (2, "") and "--amount" in err and "more than 2 decimal places" in err
                code, _, err = await hil("--control", str(sock), "fault", "seat-1", "explode")
                assert code == 2 and "invalid choice: 'explode'" in err

                # a second rig on the same socket is refused, and the first keeps serving
                code, _, err = await hil("run", str(MINIMAL), "--control", str(sock), process=True)
                assert code == 1 and "another rig is already listening" in err
                assert (await hil("--control", str(sock), "status"))[0] == 0

                assert not any(isinstance(e, DeviceDown) and e.device in ("seat-1", "lockout") for e in d.seen)
        finally:
            if run.returncode is None:
                run.send_signal(signal.SIGINT)  # Ctrl-C
            async with asyncio.timeout(20):
                out, err = await run.communicate()
        assert run.returncode == 0, err.decode()
        text = out.decode()
        assert text.startswith("table MIN-1 (2 seats) from ")
        assert f"control socket: {sock}" in text and text.endswith("rig stopped\n")
        for name, c in rig_from_connections(conn_file).connections().items():
            assert any(line.startswith(name) and str(c.port) in line for line in text.splitlines())
        assert not sock.exists()

    async def bounded() -> None:
        async with asyncio.timeout(100):  # whatever hangs is cancelled, and the traceback shows where
            await main()

    with structlog.testing.capture_logs():
        asyncio.run(bounded())


def test_run_json_prints_the_connections(tmp_path: Path) -> None:
    sock = tmp_path / "s"

    async def main() -> None:
        run = await asyncio.create_subprocess_exec(str(HIL), "--json", "run", str(MINIMAL), "--control", str(sock),
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert run.stdout is not None
        async with asyncio.timeout(20):
            first = json.loads(await run.stdout.readline())
        assert first["table"] == "MIN-1" and first["control"] == str(sock)
        assert first["devices"]["seat-2"]["first_seat"] == 2 and first["devices"]["shoe"]["transport"] == "line"
        code, out, _ = await hil("--control", str(sock), "--json", "connections")
        assert code == 0 and json.loads(out)["result"] == first["devices"]
        run.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            await run.communicate()
        assert run.returncode == 0

    asyncio.run(main())


def test_check_and_bad_configurations(tmp_path: Path) -> None:
    r = run_hil("check", str(ROOT / "config" / "hil" / "caribbean-stud-7.toml"))
    assert r.returncode == 0 and r.stdout.endswith("table CS-07, 7 seats, 11 devices: ok\n")
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL.read_text().replace("unit = 2,", "unit = 1,"))
    for cmd in ("check", "run"):
        r = run_hil(cmd, str(bad), "--control", str(tmp_path / "s"))
        assert (r.returncode, r.stdout) == (2, ""), cmd
        assert r.stderr == (f"progressive-hil: {bad}: rtu[0].devices[1].unit: unit 1 is already used on bus "
                            "'bus' by 'seat-1'\n")
    assert not (tmp_path / "s").exists()
    r = run_hil("--control", str(tmp_path / "nobody.sock"), "status")
    assert r.returncode == 69 and "no rig is listening" in r.stderr

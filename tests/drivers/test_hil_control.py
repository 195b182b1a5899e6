"""The control socket (in process, stand-in simulators) and the command line's client side.

The whole thing as people use it, ``progressive-hil run`` in a subprocess with real simulators, is in
test_hil_cli.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from test_hil_rig import TABLE, fake_rig

from hil import control
from hil.control import ControlServer, ControlUnavailable, RigRefused, arequest

from ctlrun import run_hil


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def serving(tmp_path: Path, **kw: Any) -> tuple[Any, ControlServer, Path]:
    rig = fake_rig(TABLE, tmp_path)
    await rig.start()
    path = tmp_path / "ctl.sock"
    server = ControlServer(rig, path, **kw)
    await server.start()
    return rig, server, path


async def raw_exchange(path: Path, data: bytes) -> list[dict[str, Any]]:
    """Send raw bytes, read replies until the server hangs up or has answered every line."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
    try:
        writer.write(data)
        await writer.drain()
        replies = []
        async with asyncio.timeout(5):
            for _ in range(data.count(b"\n") or 1):
                line = await reader.readline()
                if not line:
                    break
                replies.append(json.loads(line))
        return replies
    finally:
        writer.close()


def test_requests_reach_the_simulators(tmp_path: Path) -> None:
    async def main() -> None:
        rig, server, path = await serving(tmp_path)
        try:
            assert await arequest(path, "place_chip", seat=3, spot="progressive", amount_cents=500) == \
                {"device": "seats-2-3", "acknowledged": None}
            assert rig.simulator("seats-2-3").calls == [("place_chip", 3, "progressive", 500)]
            assert (await arequest(path, "press_lockout"))["device"] == "lockout"
            assert (await arequest(path, "deal", cards=["AS", 5]))["device"] == "shoe"
            assert rig.simulator("shoe").calls[-2:] == [("deal", [48]), ("deal", [5])]
            assert await arequest(path, "roll", die1=6, die2=6) == {"device": "dice", "acknowledged": True}
            assert (await arequest(path, "shuffle", count=52, deck="B"))["device"] == "shuffler"
            assert rig.simulator("shuffler").calls[-1] == ("shuffle", 52, "B")
            assert await arequest(path, "sign") == {"message": "CLOSED"}
            rig.simulator("seat-1").accepted = {1: {"progressive"}}
            lights = await arequest(path, "lights")
            assert lights == {"seats": {"1": {"accepted": ["progressive"], "win": False}}, "lockout_lamp": False}
            assert await arequest(path, "mute", name="dice", on=True) is None
            assert rig.simulator("dice").muted
            assert await arequest(path, "exception", name="sign", code=6) is None
            assert rig.simulator("sign").exception_code == 6
            assert await arequest(path, "garbage", name="shoe", hex="ff 00") == {"bytes": 2}
            assert rig.simulator("shoe").calls[-1] == ("send_garbage", b"\xff\x00")
            assert await arequest(path, "unplug", name="shoe") == {"devices": ["shoe"]}
            assert rig.wire_of("shoe").unplugged
            status = await arequest(path, "status")
            assert status["table"] == "T1" and len(status["devices"]) == 8
            conns = await arequest(path, "connections")
            assert conns["seat-1"]["port"] == rig.wire_of("seat-1").driver_port
        finally:
            await server.close()
            await rig.stop()

    run(main())


def test_refusals_are_replies_not_disconnects(tmp_path: Path) -> None:
    async def main() -> None:
        rig, server, path = await serving(tmp_path)
        try:
            lines = [
                {"op": "place_chip", "seat": 9, "spot": "progressive", "id": 1},
                {"op": "place_chip", "seat": "3", "spot": "progressive"},
                {"op": "place_chip", "seat": 3},
                {"op": "place_chip", "seat": 3, "spot": "x", "colour": "red"},
                {"op": "fly"},
                ["not", "an", "object"],
                {"op": "mute", "name": "dice", "on": "yes"},
                {"op": "garbage", "name": "shoe", "hex": "zz"},
                {"op": "ping", "id": "last"},
            ]
            data = b"".join(json.dumps(x).encode() + b"\n" for x in lines) + b"{not json\n"
            replies = await raw_exchange(path, data)
            assert [r["ok"] for r in replies] == [False] * 8 + [True, False]
            assert replies[0] == {"id": 1, "ok": False, "error": "seat 9 is not at this table (seats 1-4)"}
            assert replies[1]["error"] == "seat: must be an integer, not '3'"
            assert replies[2]["error"] == "spot: is required"
            assert "unknown field(s) colour" in replies[3]["error"]
            assert replies[4]["error"].startswith("unknown op 'fly'; ops: ")
            assert "JSON object" in replies[5]["error"]
            assert replies[6]["error"] == "on: must be true or false, not 'yes'"
            assert "not hex bytes" in replies[7]["error"]
            assert replies[8] == {"id": "last", "ok": True, "result": {"table": "T1"}}
            assert replies[9]["error"] == "not a JSON object on one line"
            assert rig.simulator("seats-2-3").calls == []  # nothing refused reached a device
            with pytest.raises(RigRefused, match="no device covers seat"):
                rig.config = rig.config.model_copy(update={"seats": 5})
                await arequest(path, "remove_chip", seat=5, spot="ante")
        finally:
            await server.close()
            await rig.stop()

    run(main())


def test_long_lines_and_idle_clients_are_cut_off(tmp_path: Path) -> None:
    async def main() -> None:
        rig, server, path = await serving(tmp_path, max_line=1024, read_timeout=0.2)
        try:
            replies = await raw_exchange(path, b'{"op": "ping", "pad": "' + b"x" * 5000 + b'"}\n')
            assert replies == [{"ok": False, "error": "request longer than 1024 bytes"}]
            reader, writer = await asyncio.open_unix_connection(str(path))
            async with asyncio.timeout(5):
                assert await reader.read() == b""  # hung up on the silent client
            writer.close()
            assert await arequest(path, "ping") == {"table": "T1"}  # and still serving
        finally:
            await server.close()
            await rig.stop()

    run(main())


def test_socket_is_private_and_cleaned_up(tmp_path: Path) -> None:
    async def main() -> None:
        old = os.umask(0)  # even with a permissive umask
        try:
            rig, server, path = await serving(tmp_path)
        finally:
            os.umask(old)
        try:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            with pytest.raises(control.SocketInUse, match="already listening"):
                await ControlServer(rig, path).start()
        finally:
            await server.close()
            await rig.stop()
        assert not path.exists()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    run(main())


def test_stale_socket_is_replaced_but_other_files_are_not(tmp_path: Path) -> None:
    async def main() -> None:
        path = tmp_path / "ctl.sock"
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))
        stale.close()  # the file stays, nobody listens
        rig = fake_rig(TABLE, tmp_path)
        async with rig, ControlServer(rig, path):
            assert await arequest(path, "ping") == {"table": "T1"}
        other = tmp_path / "file"
        other.write_text("keep me")
        with pytest.raises(control.SocketInUse, match="not a socket"):
            await ControlServer(rig, other).start()
        assert other.read_text() == "keep me"
        with pytest.raises(ControlUnavailable):
            await arequest(path, "ping")

    run(main())


def test_cli_client_commands(tmp_path: Path) -> None:
    """The client half of the command line, against an in-process server (run in a thread: it blocks)."""

    async def main() -> None:
        rig, server, path = await serving(tmp_path)

        async def cli_run(*argv: str) -> tuple[int, str, str]:
            r = await asyncio.to_thread(run_hil, "--control", str(path), *argv)
            return r.returncode, r.stdout, r.stderr

        try:
            code, out, _ = await cli_run("place", "3", "progressive", "--amount", "5.10")
            assert code == 0 and out == "seat 3 progressive: chip placed ($5.10) on seats-2-3\n"
            assert rig.simulator("seats-2-3").calls[-1] == ("place_chip", 3, "progressive", 510)
            code, out, _ = await cli_run("--json", "remove", "3", "progressive")
            assert code == 0 and json.loads(out) == {"ok": True, "result": {"device": "seats-2-3",
                                                                            "acknowledged": None}}
            code, out, _ = await cli_run("deal", "AS", "KD", "10h")
            assert code == 0 and out == "deal: sent by shoe; acknowledged by the driver\n"
            assert rig.simulator("shoe").calls[-3:] == [("deal", [48]), ("deal", [46]), ("deal", [33])]
            code, out, _ = await cli_run("fault", "seat-1", "corrupt", "2", "--direction", "to-device")
            assert code == 0 and rig.node("seat-1").bus.unit_faults.pending() == {"corrupt": 2, "drop": 0}
            code, out, _ = await cli_run("fault", "sign", "exception", "4")
            assert code == 0 and rig.simulator("sign").exception_code == 4
            code, out, _ = await cli_run("fault", "sign", "exception", "off")
            assert rig.simulator("sign").exception_code is None
            code, out, _ = await cli_run("fault", "shoe", "garbage", "ff", "00")
            assert rig.simulator("shoe").calls[-1] == ("send_garbage", b"\xff\x00")
            code, out, _ = await cli_run("fault", "dice", "mute", "on")
            assert rig.simulator("dice").muted
            code, out, _ = await cli_run("lights")
            assert code == 0 and "lock-out lamp: off" in out
            code, out, _ = await cli_run("status", "--json")
            assert code == 0 and json.loads(out)["result"]["table"] == "T1"
            code, out, _ = await cli_run("status")
            assert "table T1 (4 seats)" in out and "seats-2-3" in out
            # a fault set and not yet applied is in force: the next frames will take it
            assert "faults in force: seat-1: 2 corrupt pending; dice: muted\n" in out, out
            assert "faults set: seat-1: corrupt 2 (0 applied); sign: exception 1; shoe: garbage 2 bytes; dice: mute 1\n" \
                in out, out

            # refused by the rig: status 1, the reason on stderr
            code, out, err = await cli_run("place", "9", "progressive")
            assert code == 1 and out == "" and "seat 9 is not at this table" in err
            code, out, err = await cli_run("--json", "roll", "1", "9")
            assert code == 1 and json.loads(out) == {"ok": False, "error": "die2 9: a die shows 1-6"}
            # bad input never reaches the rig: status 2
            calls = len(rig.simulator("seats-2-3").calls)
            for bad in (["place", "3", "progressive", "--amount", "5.001"],
                        ["place", "3", "progressive", "--amount", "1e3"],
                        ["fault", "seat-1", "delay", "soon"], ["fault", "shoe", "garbage", "xyz"],
                        ["place", "three", "progressive"], ["deal", "AS", "ZZ"],
                        ["fault", "shoe", "garbage", "ab" * 40_000]):  # a request longer than the rig takes
                code, out, err = await cli_run(*bad)
                assert code == 2 and err.startswith("progressive-hil: ") and len(err.splitlines()) == 1, (bad, err)
            assert len(rig.simulator("seats-2-3").calls) == calls
            assert rig.simulator("shoe").calls[-1] == ("send_garbage", b"\xff\x00")  # nothing more was sent
        finally:
            await server.close()
            await rig.stop()
        code, out, err = await cli_run("status")
        assert code == 69 and "no rig is listening" in err

    with structlog.testing.capture_logs():  # the rig's log lines would land in the captured stdout
        run(main())

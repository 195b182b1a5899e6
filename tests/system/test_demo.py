"""The README's main command: the daemon on its embedded default (`progressive-demo`: a simulated table, no
hardware, no broker) plays rounds with the scripted dealer and stops cleanly; its journal then holds every round,
booked and closed, and audits sound. `progressived` itself runs a configured table only."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def test_demo_plays_rounds_and_stops_cleanly(tmp_path):
    demo = tmp_path / "demo"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # as systemd's NOTIFY_SOCKET
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(0)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NOTIFY_SOCKET": str(tmp_path / "notify")}
    p = subprocess.Popen([BIN / "progressive-demo", "--demo-dir", str(demo), "--rounds", "2", "--log-format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        p.terminate()  # a clean stop, so that the log says where it stood
        out, err = p.communicate(timeout=30)
        raise AssertionError("the demo did not finish:\n" + err[-3000:] + out[-5000:]) from None
    assert p.returncode == 0, err[-3000:] + out[-3000:]
    told = []
    with contextlib.suppress(BlockingIOError):
        while True:
            told.append(notify.recv(4096).decode())
    notify.close()
    assert told[0].startswith("READY=1\nSTATUS=table CS-07: round CS-07-r1") and told[-1] == "STOPPING=1", told
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    played = [e for e in events if e.get("event") == "round played"]
    assert [e["round"] for e in played] == ["CS-07-r1", "CS-07-r2"]
    assert all(e.get("table") == "CS-07" for e in events if e.get("logger") != "hil")
    booked = [e for e in events if e.get("event") == "round booked"]
    assert booked and all(isinstance(e["amounts"]["main"], str) and len(e["magic_card"]) == 2 for e in booked), booked
    assert not [e for e in events if e.get("event") == "deck counted" and "deck" in e]  # no `deck=None`
    (finished,) = [e for e in events if e.get("event") == "demo finished"]
    assert finished["rounds"] == 2 and set(finished["amounts"]) == {"main", "bonus"}, finished
    # the dealer collects the chips before settling: nothing is left on a spot for the next round
    assert not [e for e in events if e.get("event") == "chips left on their spots"], events

    audit = subprocess.run([BIN / "progressivectl", "audit", "verify", "--state", str(demo / "state"), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    meters = subprocess.run([BIN / "progressivectl", "meters", "--state", str(demo / "state"), "--json"],
                            capture_output=True, text=True, timeout=120)
    main = {m["meter"]: m for m in json.loads(meters.stdout)}["main"]
    wagers = sum(len(e["players"]) for e in played)
    assert main["qualifying_wagers"] == {"count": wagers, "amount": f"{wagers}.00"}
    assert main["open_rounds"] == []


def test_a_bad_configuration_is_refused_with_every_problem(tmp_path):
    bad = tmp_path / "table.toml"
    bad.write_text('table = "T1"\ngame = "caribbean-stud"\nseats = 9\n')
    r = subprocess.run([BIN / "progressived", "--config", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "seats" in r.stderr and str(bad) in r.stderr


def test_progressived_needs_a_configuration_and_names_the_demo():
    r = subprocess.run([BIN / "progressived"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("progressived: --config FILE is required (the table's configuration); the demo on a "
                        "simulated table is progressive-demo\n")


def test_the_demos_bad_arguments_are_refused_with_status_2():
    for args, field in ((["--rounds", "0"], "--rounds"), (["--metrics", "nowhere"], "--metrics")):
        r = subprocess.run([BIN / "progressive-demo", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and field in r.stderr.splitlines()[-1], r.stderr


def test_the_exact_example_leaves_parts_of_a_cent_on_the_meter(tmp_path):
    """The shipped table whose rates leave a part of a cent with every $1 wager (config/tables/caribbean-stud-
    exact.toml), on the demo's rig: the meter holds them exactly, the sign shows the amount floored to the cent."""
    import progressive_examples

    table = progressive_examples.path("tables", "caribbean-stud-exact.toml")
    demo = tmp_path / "demo"
    r = subprocess.run([BIN / "progressive-demo", "--table", str(table), "--demo-dir", str(demo), "--rounds", "1",
                        "--log-format", "json"], capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    played = [json.loads(line) for line in r.stdout.splitlines() if '"round played"' in line]
    wagers = len(played[0]["players"])
    meters = subprocess.run([BIN / "progressivectl", "meters", "--state", str(demo / "state"), "--json"],
                            capture_output=True, text=True, timeout=120)
    main = {m["meter"]: m for m in json.loads(meters.stdout)}["main"]
    units = wagers * 1234  # 12.34 cents of each $1 wager, in hundredths of a cent
    assert main["current"] == f"{10000 + units // 10000}.{units % 10000:04d}"  # e.g. 10000.3702 after three
    assert main["shown"] == f"{10000 + units // 10000}.{units % 10000 // 100:02d}"  # the sign: floored to the cent
    assert main["reserve"] == f"0.{wagers * 111:04d}"


def test_a_table_not_cabled_as_the_rig_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "rig.toml"
    r = subprocess.run([BIN / "progressive-demo", "--rig", str(bad), "--demo-dir", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"progressive-demo: --rig: {bad}: no such file\n"


def test_a_second_demo_in_the_same_directory_is_refused_in_one_line(tmp_path):
    """`./run` while one runs: one line naming the directory, status 1, no traceback (before: 36 lines of one)."""
    demo = tmp_path / "demo"
    first = subprocess.Popen([BIN / "progressive-demo", "--demo-dir", str(demo), "--no-dealer", "--log-format", "json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rig = demo / "rig.sock"
        deadline = time.monotonic() + 60
        while not rig.is_socket():  # the first demo's rig holds it
            assert first.poll() is None and time.monotonic() < deadline, "the first demo did not start"
            time.sleep(0.05)
        second = subprocess.run([BIN / "progressive-demo", "--demo-dir", str(demo), "--rounds", "1"],
                                capture_output=True, text=True, timeout=90)
    finally:
        first.terminate()
        first.wait(30)
    assert second.returncode == 1, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "a demo is running there already" in lines[0], second.stderr
    assert "Traceback" not in second.stderr


def test_a_demo_stopped_by_sigterm_says_what_it_did_and_nothing_else(tmp_path):
    """systemctl stop, or Ctrl-C: the demo stops cleanly (status 0), logs its summary (rounds, the meters' amounts,
    where its journal is), and no library warns or prints a traceback on the way out."""
    demo = tmp_path / "demo"
    p = subprocess.Popen([BIN / "progressive-demo", "--demo-dir", str(demo), "--log-format", "json",
                          "--socket", str(tmp_path / "c.sock")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    try:
        assert p.stdout is not None
        for line in p.stdout:  # until the first round is played
            lines.append(line)
            if '"round played"' in line:
                break
        p.terminate()
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    lines += out.splitlines()
    assert p.returncode == 0, err[-3000:]
    events = [json.loads(line) for line in lines if line.startswith("{")]
    (finished,) = [e for e in events if e.get("event") == "demo finished"]
    assert finished["rounds"] >= 1 and set(finished["amounts"]) == {"main", "bonus"}, finished
    # a reply late on a loaded machine is the bus's to report (once, by the bus); anything else is not expected
    timing = {"late", "timeout"}
    assert not [e for e in events if e.get("level") in ("warning", "error", "critical")
                and e.get("kind") not in timing], events
    assert "Traceback" not in err and "pymodbus" not in err.lower() + "".join(lines).lower(), err[-3000:]

"""Hostile configurations: every file a configuration names is read one way (controller.tomlfile.files), a
regular file of bounded size; every path and every number is checked. A FIFO, a device, a file of gigabytes,
a path of thousands of characters or a number of 24 digits is one line naming the TOML path (or the file),
never a hang, never unbounded memory, never an internal error or a traceback.

The attacks run as real processes on real files: `progressivectl check-config` and `progressived --config`
with a FIFO, /dev/zero (under a memory limit), a sparse file of 2 GiB, a socket, a loop of symbolic links."""

from __future__ import annotations

import copy
import os
import resource
import socket
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from test_config import DEVICES, base, one, problems, write

from controller.config import check_config, load_config
from controller.config.authority import check_authority_config, is_authority_config
from controller.errors import InputError
from controller.link.mqtt import MqttSettingsError, read_password
from controller.paytables import load_paytable
from controller.tomlfile.files import MAX_CONFIG_BYTES, FileRefused, read_file, read_text
from drivers.modbus import RegisterMapError, load_register_map
from hil.rig_config import RigConfigError, load_rig_config

from linkrig import AUTHORITY_KEY, approvers_file, signing_key_file

BIN = Path(sys.executable).parent
LONG = "/tmp/" + "a" * 5000  # a path of 5,005 characters
DEEP = "/tmp/" + "b" * 300 + "/map.toml"  # a name longer than the system's 255 bytes: ENAMETOOLONG
ONE_GIB = 1 << 30


def small_memory() -> None:  # in a child before exec: reading /dev/zero to the end would need more
    resource.setrlimit(resource.RLIMIT_AS, (ONE_GIB, ONE_GIB))


def run(program: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / program), *args], capture_output=True, text=True, timeout=60, check=False,
                          **kwargs)


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": warning: " not in line]


# --- the files: one way to read them ---------------------------------------------------------------------------


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, a socket, a directory, a sparse file of 2 GiB, a loop of symbolic links, a character device."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock.toml"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(2 * ONE_GIB)
    (tmp_path / "dir.toml").mkdir()
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    yield {"fifo": fifo, "socket": sock_path, "dir": tmp_path / "dir.toml", "big": big, "loop": loop,
           "device": Path("/dev/zero")}
    sock.close()


REASONS = {
    "fifo": "it is a named pipe (FIFO), not a regular file",
    "socket": "it is a socket, not a regular file",
    "dir": "it is a directory, not a regular file",
    "big": "it is 2,147,483,648 bytes, more than the 1 MiB such a file may have",
    "loop": "too many levels of symbolic links",
    "device": "it is a character device, not a regular file",
}


@pytest.mark.parametrize("kind", sorted(REASONS))
def test_read_file_refuses_what_is_not_a_small_regular_file(specials, kind):
    with pytest.raises(FileRefused) as e:
        read_file(specials[kind])
    assert e.value.reason == REASONS[kind]


def test_read_file_maps_every_os_error_to_one_reason(tmp_path):
    cases = {LONG: "the path is too long (a name of more than 255 bytes, or 4096 in all)",
             DEEP: "the path is too long (a name of more than 255 bytes, or 4096 in all)",
             str(tmp_path / "nope.toml"): "no such file",
             str(tmp_path / "x" / "a.toml"): "no such file",
             "a\0b": "the path contains a NUL character"}
    (tmp_path / "file").write_text("x")
    cases[str(tmp_path / "file" / "a.toml")] = "a part of the path is not a directory"
    for path, reason in cases.items():
        with pytest.raises(FileRefused) as e:
            read_file(path)
        assert e.value.reason == reason, path
    with pytest.raises(FileRefused, match=r"\(5,005 characters\): the path is too long"):
        read_file(LONG)  # the message shows the path shortened


def test_read_file_reads_at_most_its_limit(tmp_path):
    p = tmp_path / "secret"
    p.write_bytes(b"x" * 4097)
    assert read_file(p).data == b"x" * 4097
    with pytest.raises(FileRefused, match="4,097 bytes, more than the 4 KiB"):
        read_file(p, limit=4096)
    p.write_bytes(b"x" * MAX_CONFIG_BYTES)
    assert len(read_text(p)) == MAX_CONFIG_BYTES


def test_every_reader_refuses_a_fifo_at_once(specials):
    """Each reader of a configuration-type file, on a FIFO nobody writes to: a refusal, not a hang."""
    fifo = specials["fifo"]
    with pytest.raises(InputError, match="cannot read the paytable file: it is a named pipe"):
        load_paytable(fifo)
    with pytest.raises(RegisterMapError, match="cannot read: it is a named pipe"):
        load_register_map(fifo)
    with pytest.raises(RigConfigError, match="cannot read the rig configuration: it is a named pipe"):
        load_rig_config(fifo)
    with pytest.raises(MqttSettingsError, match=f"mqtt password_file: cannot read {fifo}: it is a named pipe"):
        read_password(fifo)
    assert one(check_config(fifo), "").message == "cannot read the configuration: it is a named pipe (FIFO), not a " \
                                                  "regular file"
    assert not is_authority_config(fifo)
    assert check_authority_config(fifo)[0].message.startswith("cannot read the configuration: it is a named pipe")


def test_a_password_file_is_one_line_of_at_most_4_kib(tmp_path):
    p = tmp_path / "mqtt-password"
    p.write_text("x" * 5000 + "\n")
    with pytest.raises(MqttSettingsError, match=r"cannot read .*: it is 5,001 bytes, more than the 4 KiB"):
        read_password(p)
    p.write_text("s3cret\n")
    assert read_password(p) == "s3cret"


def test_check_config_on_a_fifo_does_not_hang(specials):
    r = run("progressivectl", "check-config", str(specials["fifo"]))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [f"{specials['fifo']}: cannot read the configuration: it is a named pipe (FIFO), "
                                     "not a regular file (hint: give the path of the table's TOML configuration file)"]
    d = run("progressived", "--config", str(specials["fifo"]))
    assert d.returncode == 2 and len(d.stderr.splitlines()) == 1 and "named pipe" in d.stderr


@pytest.mark.parametrize("kind", sorted(REASONS))
def test_a_paytable_that_is_not_a_small_regular_file(tmp_path, specials, kind):
    """`paytable = "/dev/zero"` read 15 GB; each kind is now one line, in a process with 1 GiB of memory."""
    doc = base()
    doc["wagers"]["flop"]["paytable"] = str(specials[kind])
    table = write(tmp_path, doc)
    r = run("progressivectl", "check-config", str(table), preexec_fn=small_memory)
    assert r.returncode == 2, r.stderr
    assert problem_lines(r.stderr) == [
        f"{table}: wagers.flop.paytable: {specials[kind]}: cannot read the paytable file: {REASONS[kind]} (hint: a "
        "paytable file's path is relative to this configuration file; docs/paytables.md describes the format)"]


@pytest.mark.parametrize("kind", ["fifo", "device", "big", "loop"])
def test_other_files_of_the_table_that_are_not_small_regular_files(tmp_path, specials, kind):
    doc = base()
    doc["devices"]["sign"]["register_map"] = str(specials[kind])
    assert REASONS[kind] in one(problems(tmp_path, doc), "devices.sign.register_map").message
    doc = base()
    doc["meters"]["main"] = {"linked": "pa-flop-1", "wager_sizes": ["1.00"]}
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1", "tls": False, "username": "fp-01", "password_file": str(specials[kind])}
    p = one(problems(tmp_path, doc), "mqtt.password_file")
    assert p.message == f"{specials[kind]}: {REASONS[kind].replace('1 MiB', '4 KiB')}"  # a password: 4 KiB at most


# --- paths: a problem at their TOML path, never an OSError ----------------------------------------------------


@pytest.mark.parametrize(("key", "at"), [
    ("state_dir", "state_dir"),
    ("register_map", "devices.sign.register_map"),
    ("paytable", "wagers.flop.paytable"),
    ("password_file", "mqtt.password_file"),
    ("ca_file", "mqtt.ca_file"),
])
@pytest.mark.parametrize("path", [LONG, DEEP], ids=["5005-characters", "a-name-of-300"])
def test_an_impossible_path_is_a_problem_at_its_key(tmp_path, key, at, path):
    doc = base()
    if key == "state_dir":
        doc["state_dir"] = path
    elif key == "register_map":
        doc["devices"]["sign"]["register_map"] = path
    elif key == "paytable":
        doc["wagers"]["flop"]["paytable"] = path
    else:
        doc["meters"]["main"] = {"linked": "pa-flop-1", "wager_sizes": ["1.00"]}
        doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "link.casino.example", "username": "fp-01", key: path}
    p = one(problems(tmp_path, doc), at)
    if path == LONG:
        assert p.message == ("the path is 5,005 characters long, more than the 1,024 a path in the configuration "
                             "may have")
    else:
        assert p.message.endswith("the path is too long (a name of more than 255 bytes, or 4096 in all)"), p.message


def test_check_config_and_the_daemon_on_a_path_of_5000_characters(tmp_path):
    """Was exit 70 (an internal error) in check-config and a raw traceback in the daemon."""
    for key in ("state_dir", "register_map"):
        doc = base()
        if key == "state_dir":
            doc["state_dir"] = LONG
        else:
            doc["devices"]["sign"]["register_map"] = LONG
        table = write(tmp_path, doc)
        for program, args in (("progressivectl", ["check-config"]), ("progressived", ["--config"])):
            r = run(program, *args, str(table))
            assert r.returncode == 2, (program, r.stderr)
            (line,) = problem_lines(r.stderr)
            assert "the path is 5,005 characters long" in line and "Traceback" not in r.stderr


def test_a_loop_of_links_as_state_dir(tmp_path):
    (tmp_path / "state").symlink_to(tmp_path / "state")
    p = one(problems(tmp_path, base()), "state_dir")
    assert p.message == "state: too many levels of symbolic links"


# --- numbers: each one bounded, the limit named ----------------------------------------------------------------

BIG = 10**23


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for k in parents:
        doc = doc[k]
    doc[last] = value


@pytest.mark.parametrize(("key", "value", "at", "says"), [
    ("meters.main.history_size", BIG, "meters.main.history_size", f"must be at most 10000, not {BIG}"),
    ("meters.main.reset", "100000000.01", "meters.main.reset",
     "$100,000,000.01 is more than $100,000,000.00, the most a meter's reset or ceiling may be"),
    ("meters.main.ceiling", 10**11, "meters.main.ceiling",
     "$100,000,000,000.00 is more than $100,000,000.00, the most a meter's reset or ceiling may be"),
    ("meters.main.wager_sizes", ["1.00", "10000.01"], "meters.main.wager_sizes[1]",
     "$10,000.01 is more than $10,000.00, the most an accepted wager may be"),
    ("meters.main.wager_sizes", [f"{i}.00" for i in range(1, 34)], "meters.main.wager_sizes", "must list at most 32"),
    ("cards.stub_count_every", BIG, "cards.stub_count_every", f"must be at most 1000, not {BIG}"),
    ("devices.seat-1.seats", [BIG], "devices.seat-1.seats[0]", f"must be at most 16, not {BIG}"),
    ("devices.shoe.baud", BIG, "devices.shoe.baud", f"must be at most 1000000, not {BIG}"),
    ("devices.shoe.retries", BIG, "devices.shoe.retries", f"must be at most 10, not {BIG}"),
    ("devices.shoe.max_frame", 10**6, "devices.shoe.max_frame", "must be at most 128, not 1000000"),
    ("devices.shoe.heartbeat_interval", Decimal("1e300"), "devices.shoe.heartbeat_interval",
     "must be at most 60, not 1e+300"),
    ("devices.sign.poll_interval", BIG, "devices.sign.poll_interval", "must be at most 3600"),
    ("devices.sign.unit", BIG, "devices.sign.unit", f"{BIG} is not a Modbus RTU unit id (1-247)"),
    ("buses.table-bus.baud", BIG, "buses.table-bus.baud", "1000000"),
    ("buses.table-bus.timeout", BIG, "buses.table-bus.timeout", "10"),
])
def test_every_number_is_bounded(tmp_path, key, value, at, says):
    doc = copy.deepcopy(base())
    _set(doc, key, value)
    p = one(problems(tmp_path, doc), at)
    assert says in p.message, p.message


def test_seats_of_an_unknown_game_are_bounded(tmp_path):
    doc = base()
    doc["game"] = "flop-pokr"
    doc["seats"] = BIG
    found = problems(tmp_path, doc)
    assert [p.message for p in found if p.path == "seats"] == [f"must be at most 16 (the most any game has), not {BIG}"]


def test_the_linked_meters_wager_sizes_and_the_authoritys_tables_are_bounded(tmp_path):
    doc = base()
    doc["meters"]["main"] = {"linked": "pa-flop-1", "wager_sizes": ["20000.00"]}
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1", "tls": False}
    p = one(problems(tmp_path, doc), "meters.main.wager_sizes[0]")
    assert p.message == "$20,000.00 is more than $10,000.00, the most an accepted wager may be"
    link = {"authority": "link-1", "state_dir": "state", "tables": [f"t-{i}" for i in range(10_001)],
            "meters": {"m": {"reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00"]}},
            "mqtt": {"host": "127.0.0.1", "tls": False}, "approvers_file": str(approvers_file(tmp_path)),
            "signing_key_file": str(signing_key_file(tmp_path))}
    found = check_authority_config(write(tmp_path, link, "link.toml"))
    assert [(p.path, p.message) for p in found] == [
        ("tables", "10,001 tables, more than the 10,000 one link authority may serve")]


def test_check_config_on_a_history_of_10_to_the_23(tmp_path):
    """Was accepted as sound."""
    doc = base()
    doc["meters"]["main"]["history_size"] = BIG
    table = write(tmp_path, doc)
    r = run("progressivectl", "check-config", str(table))
    assert r.returncode == 2
    assert problem_lines(r.stderr) == [f"{table}: meters.main.history_size: must be at most 10000, not {BIG}"]


PAYTABLE = """id = "p"
title = "t"
source = "s"
games = ["flop-poker"]
wager = "flop"
kind = "poker5"
pays = [{{ hand = "royal-flush", award = {award} }}]
"""


@pytest.mark.parametrize(("award", "says"), [
    ('"2,000,000 for 1"', "odds above 1,000,000 for 1, the most a paytable may pay"),
    ('"1999999 to 1"', "odds above 1,000,000 for 1, the most a paytable may pay"),
    ('"$1,000,000.01"', "more than $1,000,000.00, the most a fixed award may be"),
])
def test_a_paytables_awards_are_bounded(tmp_path, award, says):
    p = tmp_path / "p.toml"
    p.write_text(PAYTABLE.format(award=award), encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_paytable(p)
    assert e.value.field == f"{p}: pays[0].award" and says in e.value.problem


MAP = DEVICES / "sign.toml"


@pytest.mark.parametrize(("change", "where", "says"), [
    (("slot = 1", "slot = 1000000"), "outputs[0].slot", "must be 1..64"),
    ("scale", "outputs[0].scale", "out of range: from 1/1000000 to 1000000"),
])
def test_a_register_maps_numbers_are_bounded(tmp_path, change, where, says):
    text = MAP.read_text(encoding="utf-8")
    if change == "scale":
        text = text.replace("slot = 1\n", "slot = 1\nscale = 10000000\n", 1)
    else:
        assert change[0] in text
        text = text.replace(change[0], change[1], 1)
    p = tmp_path / "sign.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(RegisterMapError) as e:
        load_register_map(p)
    assert any(w == where and says in m for w, m in e.value.errors), e.value.errors


def test_a_register_map_of_many_points_is_refused_before_it_is_checked(tmp_path):
    points = "".join(f'[[inputs]]\nrole = "button"\ntable = "discrete_input"\naddress = {i}\n' for i in range(1025))
    p = tmp_path / "lockout.toml"
    p.write_text('kind = "lockout"\n' + points, encoding="utf-8")
    with pytest.raises(RegisterMapError) as e:
        load_register_map(p)
    assert e.value.errors[0][0] == "inputs" and "at most 1024" in e.value.errors[0][1]


def test_a_rig_files_seats_are_bounded(tmp_path):
    rig = tmp_path / "rig.toml"
    rig.write_text(f'table = "T1"\nseats = 2\n[[line]]\nname = "shoe"\nkind = "shoe"\nseats = [{BIG}]\n',
                   encoding="utf-8")
    with pytest.raises(RigConfigError) as e:
        load_rig_config(rig)
    assert e.value.field == f"{rig}: line[0].seats[0]" and "less than or equal to 12" in e.value.problem


def test_the_shipped_configurations_stay_sound():
    root = Path(__file__).resolve().parents[2]
    for table in sorted((root / "config" / "tables").glob("*.toml")):
        assert load_config(table).table
    for rig in sorted((root / "config" / "hil").glob("*.toml")):
        assert load_rig_config(rig).table
    for rmap in sorted((root / "config" / "devices").glob("*.toml")):
        assert load_register_map(rmap).kind
    for pt in sorted((root / "config" / "paytables").glob("*.toml")):
        assert load_paytable(pt).id

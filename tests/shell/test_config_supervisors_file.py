"""The supervisors' credential hashes kept from the control socket's group: `supervisors_file` holds the
[[supervisors]] entries in a file only the daemon's user reads; `check-config` (and the daemon, at start)
warns when the file holding the hashes can be read by its group or by others, and says plainly when it is
the one who cannot read them.

The attack is run for real where the tests run as root: a floor member (a user in the socket's group) reads
the files of an installation made as docs/operations.md says, as a process of that user."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from test_config import CREDENTIAL, DEVICES, dumps, one, write
from test_config import base as table_base

from controller.config import check_config, load_config
from controller.config.load import DAEMON_USER

BIN = Path(sys.executable).parent
CTL = BIN / "progressivectl"
ENTRY = {"name": "Pit Boss", "credential": CREDENTIAL}


def base() -> dict[str, Any]:
    """The tests' table, anchored off the box (a remote syslog): the warnings here are the supervisors' alone."""
    return {**table_base(), "anchor": {"syslog": "127.0.0.1:514"}}


def with_file(tmp_path: Path, entries: Any = None, *, mode: int = 0o600, ref: str = "supervisors.toml",
              text: str | None = None) -> Path:
    """The base table with its supervisors in a file of their own (mode `mode`); the table's path."""
    doc = base()
    del doc["supervisors"]
    doc["supervisors_file"] = ref
    sup = tmp_path / "supervisors.toml"
    sup.write_text(text if text is not None else dumps({"supervisors": entries if entries is not None else [ENTRY]}),
                   encoding="utf-8")
    sup.chmod(mode)
    return write(tmp_path, doc)


def ctl(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CTL), *args], capture_output=True, text=True, timeout=120, check=False, **kwargs)


# --- the file --------------------------------------------------------------------------------------------------


def test_the_supervisors_come_from_the_supervisors_file(tmp_path):
    cfg = load_config(with_file(tmp_path, [ENTRY, {"name": "Shift Manager", "credential": CREDENTIAL}]))
    assert [s.name for s in cfg.supervisors] == ["Pit Boss", "Shift Manager"]
    assert cfg.warnings == ()
    absolute = load_config(with_file(tmp_path, ref=str(tmp_path / "supervisors.toml")))
    assert [s.name for s in absolute.supervisors] == ["Pit Boss"]


def test_inline_supervisors_and_a_supervisors_file_at_once_is_a_problem(tmp_path):
    doc = base()
    doc["supervisors_file"] = "supervisors.toml"
    (tmp_path / "supervisors.toml").write_text(dumps({"supervisors": [ENTRY]}), encoding="utf-8")
    p = one(check_config(write(tmp_path, doc)), "supervisors_file")
    assert p.message == "and [[supervisors]] in this file both list supervisors: one or the other"
    assert "remove the [[supervisors]] entries from this file" in p.hint


def test_problems_inside_the_file_are_named_at_supervisors_file(tmp_path):
    entries = [ENTRY, {"name": "Pit Boss", "credential": CREDENTIAL}, {"name": "X", "credential": "letmein123"}]
    found = check_config(with_file(tmp_path, entries))
    assert [p.path for p in found] == ["supervisors_file"] * 2
    assert found[0].message == "supervisors.toml: supervisors[1].name: 'Pit Boss' is listed twice (already supervisors[0])"
    assert found[1].message.startswith("supervisors.toml: supervisors[2].credential: ")
    assert "letmein123" not in found[1].line()  # a credential that may be a password is never repeated


def test_look_alike_names_in_the_supervisors_file_are_refused_naming_the_file_and_both(tmp_path):
    """A Cyrillic "о" in "floor-1" is refused (before, it loaded as a second supervisor whose approvals read as
    floor-1's in approved_by), and so are two names with one skeleton (UTS #39: "1" and "l"); check-config says so
    in one line naming the file and both names."""
    for look_alike, says in (("fl\u043eor-1", "U+043E CYRILLIC SMALL LETTER O"),
                             ("floor-l", "'floor-l' reads as 'floor-1' (supervisors[0])")):
        entries = [{"name": "floor-1", "credential": CREDENTIAL}, {"name": look_alike, "credential": CREDENTIAL}]
        p = one(check_config(with_file(tmp_path, entries)), "supervisors_file")
        assert p.message.startswith("supervisors.toml: supervisors[1].name: ") and says in p.message, p.message
        r = ctl("check-config", str(tmp_path / "table.toml"))
        lines = [line for line in r.stderr.splitlines() if "supervisors[1].name" in line]
        assert r.returncode != 0 and len(lines) == 1 and "supervisors.toml" in lines[0] and says in lines[0], r.stderr


def test_a_supervisors_name_is_read_in_its_nfkc_form(tmp_path):
    """A fullwidth "ｆ" is an "f": the supervisor is "floor-1", as journaled in approved_by; and "ｆloor-1" beside
    "floor-1" is the same name listed twice."""
    cfg = load_config(with_file(tmp_path, [{"name": "\uff46loor-1", "credential": CREDENTIAL}]))
    assert [s.name for s in cfg.supervisors] == ["floor-1"]
    entries = [{"name": "floor-1", "credential": CREDENTIAL}, {"name": "\uff46loor-1", "credential": CREDENTIAL}]
    p = one(check_config(with_file(tmp_path, entries)), "supervisors_file")
    assert "'floor-1' is listed twice (already supervisors[0])" in p.message


def test_a_table_with_a_meter_needs_a_supervisor_in_the_file(tmp_path):
    p = one(check_config(with_file(tmp_path, text="# nobody yet\n")), "supervisors_file")
    assert p.message.startswith("supervisors.toml: supervisors: is required: a floorperson or above validates")
    p = one(check_config(with_file(tmp_path, text='supervisor = "typo"\n[[supervisors]]\nname = "A"\n'
                                                  f'credential = "{CREDENTIAL}"\n')), "supervisors_file")
    assert p.message == "supervisors.toml: supervisor: unknown key"


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: None, "supervisors.toml: cannot read it: no such file"),
    (lambda p: os.mkfifo(p), "supervisors.toml: cannot read it: it is a named pipe (FIFO), not a regular file"),
    (lambda p: p.mkdir(), "supervisors.toml: cannot read it: it is a directory, not a regular file"),
    (lambda p: p.write_bytes(b"x" * (1 << 20 | 1)),
     "supervisors.toml: cannot read it: it is 1,048,577 bytes, more than the 1 MiB such a file may have"),
    (lambda p: p.write_bytes(b'[[supervisors]]\nname = "caf\xe9"\n'), "supervisors.toml: is not UTF-8 text (byte 27)"),
    (lambda p: p.write_text("[[supervisors]\n"), "supervisors.toml: line 1: malformed TOML"),
])
def test_a_supervisors_file_that_cannot_be_used(tmp_path, make, says):
    doc = base()
    del doc["supervisors"]
    doc["supervisors_file"] = "supervisors.toml"
    make(tmp_path / "supervisors.toml")
    p = one(check_config(write(tmp_path, doc)), "supervisors_file")
    assert p.message.startswith(says), p.message


@pytest.mark.parametrize("value", ["", 7, "x" * 5000])
def test_supervisors_file_is_a_path(tmp_path, value):
    doc = base()
    del doc["supervisors"]
    doc["supervisors_file"] = value
    p = one(check_config(write(tmp_path, doc)), "supervisors_file")
    says = "must be the path of a file" if len(str(value)) < 10 else "the path is 5,000 characters"
    assert p.message.startswith(says)


# --- who can read the hashes: a warning, the status stays 0 --------------------------------------------------------


@pytest.mark.parametrize(("mode", "how"), [
    (0o644, "can be read by its group and others (mode 0644)"),
    (0o640, "can be read by its group (mode 0640)"),
    (0o604, "can be read by others (mode 0604)"),
    (0o620, "can be changed by its group (mode 0620)"),
    (0o600, None),
    (0o400, None),
])
def test_check_config_warns_when_others_can_read_the_supervisors_file(tmp_path, mode, how):
    table = with_file(tmp_path, mode=mode)
    sup = tmp_path / "supervisors.toml"
    r = ctl("check-config", str(table))
    assert r.returncode == 0 and r.stdout.startswith(f"{table}: sound\n"), r.stderr
    if how is None:
        assert r.stderr == ""
        return
    assert r.stderr.splitlines() == [
        f"{table}: warning: supervisors_file: {sup} holds the supervisors' credential hashes and {how}: whoever "
        f"reads a hash can guess at the secret offline, where no lock-out stops them (hint: chmod 0600 {sup}; "
        f"chown {DAEMON_USER} {sup})"]
    doc = json.loads(ctl("check-config", str(table), "--json").stdout)
    assert doc["ok"] is True and [w["path"] for w in doc["warnings"]] == ["supervisors_file"]
    assert doc["warnings"][0]["hint"] == f"chmod 0600 {sup}; chown {DAEMON_USER} {sup}"


def test_check_config_warns_about_inline_supervisors_in_a_readable_table_file(tmp_path):
    table = write(tmp_path, base())
    table.chmod(0o644)
    r = ctl("check-config", str(table))
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"{table}: warning: supervisors: {table} holds the supervisors' credential hashes and "
                           "can be read by its group and others (mode 0644)")
    assert f"(hint: chmod 0600 {table}; chown {DAEMON_USER} {table}; or move the [[supervisors]] entries to a " \
           "supervisors_file" in line
    table.chmod(0o600)
    assert ctl("check-config", str(table)).stderr == ""


def test_a_table_without_supervisors_is_not_warned_about(tmp_path):
    doc = base()
    del doc["supervisors"]
    del doc["meters"]
    doc["wagers"] = {"flop": {"paytable": "flop-poker-flop-wager"}}
    doc["devices"] = {k: v for k, v in doc["devices"].items() if k != "sign"}
    cfg = load_config(write(tmp_path, doc))
    assert cfg.supervisors == () and cfg.warnings == ()


def test_the_warnings_come_with_the_problems(tmp_path):
    table = with_file(tmp_path, mode=0o644)
    table.write_text(table.read_text(encoding="utf-8").replace('seats = 6', 'seats = 6\nseets = 6'), encoding="utf-8")
    r = ctl("check-config", str(table))
    assert r.returncode == 2
    assert [line.split(": ")[1] for line in r.stderr.splitlines()] == ["seets", "warning"]
    doc = json.loads(ctl("check-config", str(table), "--json").stdout)
    assert doc["ok"] is False and [w["path"] for w in doc["warnings"]] == ["supervisors_file"]


def test_the_daemon_logs_the_warning_at_start(tmp_path):
    table = with_file(tmp_path, mode=0o640)
    sup = tmp_path / "supervisors.toml"
    proc = subprocess.Popen([str(BIN / "progressived"), "--config", str(table), "--socket", str(tmp_path / "c.sock")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        found = None
        deadline = time.monotonic() + 60
        while found is None and time.monotonic() < deadline:  # its log, line by line, until the warning
            ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
            line = proc.stdout.readline() if ready else ""
            if not line:
                break
            event = json.loads(line)
            if event.get("path") == "supervisors_file":
                found = event
        assert found is not None, proc.stderr.read() if proc.poll() is not None else "no warning logged"
        assert found["level"] == "warning" and found["config"] == str(table)
        assert found["event"].startswith(f"{sup} holds the supervisors' credential hashes and can be read by its "
                                         "group (mode 0640)")
        assert found["hint"] == f"chmod 0600 {sup}; chown {DAEMON_USER} {sup}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


# --- the attack, as the users it is about ---------------------------------------------------------------------

GROUP = 64_300  # the control socket's group, "progressive"
DAEMON = 64_301  # the daemon's user, "progressive"
FLOOR = 64_302  # a floor member: in the socket's group, to use progressivectl
ROOT = Path(__file__).resolve().parents[2]
CTL_MAIN = "import sys; from controller.cli.ctl import main; sys.exit(main(sys.argv[1:]))"


def as_user(uid: int, gid: int, groups: list[int], *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *site_packages()])}
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False, user=uid, group=gid,
                          extra_groups=groups, env=env, cwd="/")


def site_packages() -> list[str]:
    import site as site_module

    return site_module.getsitepackages()


def interpreter() -> str | None:
    """A Python other users may run, with this project importable: this one, or the system's of the same
    version (a virtual environment under a private home directory cannot be run by them)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")):
        if exe is None:
            continue
        try:
            if as_user(FLOOR, FLOOR, [GROUP], exe, "-c", "import controller.config").returncode == 0:
                return exe
        except PermissionError:
            continue
    return None


def ctl_as(uid: int, gid: int, groups: list[int], python: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`progressivectl ARGS` as that user."""
    return as_user(uid, gid, groups, python, "-c", CTL_MAIN, *args)


@pytest.fixture
def site() -> Any:
    """An /etc/progressive of our own, anywhere other users can reach, and a Python they can run: removed
    afterwards."""
    if os.geteuid() != 0:
        pytest.skip("switching to other users needs root")
    python = interpreter()
    if python is None:
        pytest.skip("no Python with this project that another user can run here")
    top = Path(tempfile.mkdtemp(prefix="progressive-site-"))
    try:
        top.chmod(0o755)
        etc = top / "etc-progressive"
        etc.mkdir()
        os.chown(etc, 0, GROUP)
        etc.chmod(0o750)  # install -d -m 0750 -g progressive /etc/progressive
        devices = etc / "devices"
        shutil.copytree(DEVICES, devices)
        for p in [devices, *devices.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        yield etc, python
    finally:
        shutil.rmtree(top, ignore_errors=True)


def install(etc: Path, doc: dict[str, Any], name: str, mode: int, owner: int, group: int) -> Path:
    p = etc / name
    p.write_text(dumps(doc), encoding="utf-8")
    os.chown(p, owner, group)
    p.chmod(mode)
    return p


def site_table(etc: Path) -> dict[str, Any]:
    """The base table, its register maps beside it (relative paths: the copies in `etc`)."""
    doc = base()
    for dev in doc["devices"].values():
        if "register_map" in dev:
            dev["register_map"] = f"devices/{Path(dev['register_map']).name}"
    return doc


def test_a_floor_member_reads_the_hashes_of_a_table_file_installed_as_before(site):
    """As the install steps used to say (the table file 0644 in the group's directory): the attack works, and
    check-config says so."""
    etc, python = site
    table = install(etc, site_table(etc), "table.toml", 0o644, 0, 0)
    stolen = as_user(FLOOR, FLOOR, [GROUP], "cat", str(table))
    assert stolen.returncode == 0 and CREDENTIAL in stolen.stdout  # the hash, to crack offline
    r = ctl_as(FLOOR, FLOOR, [GROUP], python, "check-config", str(table))
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"{table}: warning: supervisors: {table} holds the supervisors' credential hashes and "
                           "can be read by its group and others (mode 0644)")


def test_a_floor_member_cannot_read_the_supervisors_file(site):
    """Installed as docs/operations.md says now: the table file 0640 root:progressive (no credentials in it),
    the supervisors file 0600 owned by the daemon's user."""
    etc, python = site
    doc = site_table(etc)
    sup = install(etc, {"supervisors": doc.pop("supervisors")}, "supervisors.toml", 0o600, DAEMON, GROUP)
    doc["supervisors_file"] = "supervisors.toml"
    table = install(etc, doc, "table.toml", 0o640, 0, GROUP)
    assert stat.S_IMODE(sup.stat().st_mode) == 0o600

    read_table = as_user(FLOOR, FLOOR, [GROUP], "cat", str(table))
    assert read_table.returncode == 0 and "scrypt$" not in read_table.stdout  # their file, without a hash
    stolen = as_user(FLOOR, FLOOR, [GROUP], "cat", str(sup))
    assert stolen.returncode != 0 and "Permission denied" in stolen.stderr and CREDENTIAL not in stolen.stdout

    r = ctl_as(FLOOR, FLOOR, [GROUP], python, "check-config", str(table))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"{table}: supervisors_file: supervisors.toml: cannot read it (permission denied): only the daemon's user "
        f"({DAEMON_USER}) or root can read the supervisors file (hint: check the configuration as root or as that "
        f"user: sudo -u {DAEMON_USER} progressivectl check-config FILE)"]

    daemon = ctl_as(DAEMON, GROUP, [], python, "check-config", str(table))  # the daemon's user reads both
    assert daemon.returncode == 0 and daemon.stderr == "", daemon.stderr
    assert daemon.stdout.startswith(f"{table}: sound\n")
    loaded = as_user(DAEMON, GROUP, [], python, "-c", "import sys; from controller.config import load_config; c = "
                     "load_config(sys.argv[1]); print([s.name for s in c.supervisors], len(c.warnings))", str(table))
    assert loaded.stdout.split("\n")[0] == "['Pit Boss'] 0", loaded.stderr

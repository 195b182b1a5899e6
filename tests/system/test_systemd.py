"""The systemd units: `systemd-analyze verify` accepts them and the hardening keeps the exposure low."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "progressived.service"
LINK_UNIT = ROOT / "systemd" / "progressived-link.service"  # the link authority (linked meters)
UNITS = pytest.mark.parametrize("unit_file", [UNIT, LINK_UNIT], ids=lambda p: p.name)
ANALYZE = shutil.which("systemd-analyze")

pytestmark = pytest.mark.skipif(ANALYZE is None and not os.environ.get("CI"),
                                reason="systemd-analyze is not installed (CI installs it)")


def _unit_here(tmp_path: Path, unit_file: Path = UNIT) -> Path:
    """The unit with ExecStart pointing at this environment's progressived (verify checks it exists)."""
    exe = Path(sys.executable).parent / "progressived"
    assert exe.exists(), "the package's console script is not installed"
    text = unit_file.read_text().replace("ExecStart=/usr/bin/progressived", f"ExecStart={exe}")
    out = tmp_path / unit_file.name
    out.write_text(text)
    return out


@UNITS
def test_unit_verifies(tmp_path, unit_file):
    unit = _unit_here(tmp_path, unit_file)
    r = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert unit_file.name not in r.stderr, r.stderr  # warnings about our unit


@UNITS
def test_unit_is_a_notify_service_with_watchdog(unit_file):
    text = unit_file.read_text()
    for line in ("Type=notify", "WatchdogSec=", "Restart=always", "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "StateDirectory=progressive"):
        assert line in text


@UNITS
def test_the_journals_are_the_daemons_users_only(unit_file, tmp_path):
    """The journals hold the supervisors' approval MACs (a guesser could test secrets against them offline): the
    socket group (the floor staff) must not read them. The unit's UMask and state directory mode say so, and a
    journal made under that umask is the daemon's user's only."""
    import os

    from controller.ledger import Ledger, software_digest
    from controller.round.journal import JournalReducer

    text = unit_file.read_text()
    assert "\nUMask=0077\n" in text and "\nStateDirectoryMode=0700\n" in text
    old = os.umask(0o077)
    try:
        with Ledger.open(tmp_path / "state", JournalReducer(), software_digest=software_digest()) as led:
            modes = {f.name: f.stat().st_mode for f in [led.db_path.parent, *led.db_path.parent.iterdir()]}
    finally:
        os.umask(old)
    assert len(modes) > 2 and all(m & 0o077 == 0 for m in modes.values()), {f: oct(m) for f, m in modes.items()}


@UNITS
def test_exposure_is_low(tmp_path, unit_file):
    unit = _unit_here(tmp_path, unit_file)
    r = subprocess.run([ANALYZE, "security", "--offline=yes", str(unit)], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout + r.stderr)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.5, r.stdout


def _state_directories(unit_file: Path) -> set[Path]:
    found: set[Path] = set()
    for line in unit_file.read_text().splitlines():
        if line.startswith("StateDirectory="):
            found.update(Path("/var/lib") / d for d in line.removeprefix("StateDirectory=").split())
    return found


def test_the_units_may_write_the_journal_and_its_anchor_where_the_examples_keep_them(tmp_path):
    """ProtectSystem=strict leaves only the StateDirectory= writable: the shipped configurations' state_dir and
    their anchor's default place beside it must be among them, or the daemon could not write its journal."""
    from controller.config import load_config
    from controller.config.authority import load_authority_config

    from linkrig import approvers_file, signing_key_file

    table = load_config(ROOT / "config" / "tables" / "caribbean-stud.toml")
    writable = _state_directories(ROOT / "systemd" / "progressived.service")
    assert {table.state_dir, table.anchor.file_for(table.state_dir).parent} <= writable, writable
    link = tmp_path / "link.toml"
    shutil.copyfile(ROOT / "config" / "link" / "authority.toml", link)
    for name in ("ca.crt", "mqtt-password"):
        (tmp_path / name).write_text("x\n")
        (tmp_path / name).chmod(0o600)
    approvers_file(tmp_path)
    signing_key_file(tmp_path)
    authority = load_authority_config(link)
    writable = _state_directories(ROOT / "systemd" / "progressived-link.service")
    assert {authority.state_dir, authority.anchor.file_for(authority.state_dir).parent} <= writable, writable

"""The systemd units: `systemd-analyze verify` accepts them and the hardening keeps the exposure low."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
def test_exposure_is_low(tmp_path, unit_file):
    unit = _unit_here(tmp_path, unit_file)
    r = subprocess.run([ANALYZE, "security", "--offline=yes", str(unit)], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout + r.stderr)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.5, r.stdout

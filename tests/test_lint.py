"""The code has no undefined names, unused imports or syntax errors (pyflakes rules via ruff)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pyflakes_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the test extra: ./test installs it"
    proc = subprocess.run(
        [ruff, "check", "--no-cache", "--select", "F,E9", "controller", "drivers", "hil", "tests", "bench"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

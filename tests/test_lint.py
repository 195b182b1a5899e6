"""The code passes ruff's rules as pyproject.toml selects them, the pure core type-checks under mypy --strict, and
the shell under mypy's defaults."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The shell is checked with mypy's defaults, the bodies of unannotated functions too, and every `type: ignore` must
# still be needed. (The rig, hil/, is test equipment: not held to it.)
SHELL_OPTIONS = ("--check-untyped-defs", "--warn-unused-ignores", "--follow-imports=silent")


def _mypy() -> str:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is in the test extra: ./test installs it"
    return mypy


def shell_files() -> list[str]:
    """The modules of controller/ and drivers/ outside the pure core."""
    from test_architecture import CORE_FILES

    core = set(CORE_FILES)
    out = []
    for path in sorted([*(ROOT / "controller").rglob("*.py"), *(ROOT / "drivers").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if path not in core:
            out.append(rel)
    return out


def test_ruff_clean():
    """The rules pyproject.toml selects ([tool.ruff.lint]): pyflakes, imports sorted, no blind except without its
    reason, no noqa that silences nothing."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the test extra: ./test installs it"
    proc = subprocess.run(
        [ruff, "check", "--no-cache", "controller", "drivers", "hil", "tests", "bench"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_pure_core_type_checks_strictly(tmp_path):
    """mypy --strict on the pure core as docs/architecture.md lists it (tests/test_architecture.py: CORE): no Any
    returned where a type is declared, no untyped function, no unused ignore. The shell is not held to it yet
    (test_the_shell_type_checks)."""
    from test_architecture import CORE

    proc = subprocess.run([_mypy(), "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path), *CORE],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_shell_type_checks(tmp_path):
    """mypy over the shell (SHELL_OPTIONS): the types at its seams (the link, the ledger's state, the daemon's
    control socket) are checked where they meet."""
    files = shell_files()
    assert "controller/app/table.py" in files and "controller/cli/daemon.py" in files
    assert "controller/meter_ledger.py" not in files and "controller/config/load.py" in files
    proc = subprocess.run([_mypy(), *SHELL_OPTIONS, "--cache-dir", str(tmp_path), *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

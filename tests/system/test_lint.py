"""The code passes ruff's rules as pyproject.toml selects them, controller/ and drivers/ type-check under
mypy --strict, and the rig, hil/, under mypy's defaults."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy() -> str:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is in the test extra: ./test installs it"
    return mypy


def checked_files() -> list[str]:
    """The modules mypy checks: controller/, drivers/ and the rig, hil/."""
    paths = [*(ROOT / "controller").rglob("*.py"), *(ROOT / "drivers").rglob("*.py"), *(ROOT / "hil").rglob("*.py")]
    return sorted(path.relative_to(ROOT).as_posix() for path in paths)


def test_ruff_clean():
    """The rules pyproject.toml selects ([tool.ruff.lint]): pyflakes, imports sorted, no blind except without its
    reason, no noqa that silences nothing, bugbear, pyupgrade, simplify, no function more complex than mccabe's
    15, and imports by absolute module path only."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the test extra: ./test installs it"
    proc = subprocess.run(
        [ruff, "check", "--no-cache", "controller", "drivers", "hil", "tests", "bench"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --strict as per-module options (mypy cannot scope the flag itself): one mypy process checks controller/ and
# drivers/ strictly and the rig with mypy's defaults, the standard library's stubs read once.
STRICT_PER_MODULE = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                     "disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_decorators",
                     "warn_return_any", "no_implicit_reexport", "strict_equality", "extra_checks")



def mypy_config() -> str:
    """Everywhere: mypy's defaults, the bodies of unannotated functions checked too, and every `type: ignore` still
    needed. controller/ and drivers/: --strict. paho-mqtt's Properties is unannotated: calling
    it is allowed. progressive_examples is config/ installed under another name, which mypy cannot find in an
    editable install."""
    lines = ["[mypy]", "check_untyped_defs = True", "warn_unused_ignores = True", "follow_imports = silent",
             "warn_redundant_casts = True", "untyped_calls_exclude = paho", "",
             "[mypy-controller,controller.*,drivers,drivers.*]"]
    lines += [f"{flag} = True" for flag in STRICT_PER_MODULE]
    lines += ["", "[mypy-progressive_examples,progressive_examples.*]", "ignore_missing_imports = True"]
    return "\n".join(lines) + "\n"


def run_mypy(tmp_path: Path, root: Path, files: list[str]) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "mypy.ini"
    config.write_text(mypy_config(), encoding="utf-8")
    return subprocess.run([_mypy(), "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), *files],
                          cwd=root, capture_output=True, text=True, timeout=300)


def test_the_code_type_checks(tmp_path):
    """mypy, in one run: controller/ and drivers/ under --strict (no Any returned where a type is declared, no
    untyped function, no unused ignore), so that the types at the seams (the link, the ledger's state, the
    daemon's control socket) are checked where they meet; the rig with mypy_config's options."""
    files = checked_files()
    assert "controller/app/table.py" in files and "controller/cli/daemon.py" in files
    assert "controller/meter/journal.py" in files and "drivers/modbus/bus.py" in files and "hil/rig.py" in files
    proc = run_mypy(tmp_path, ROOT, files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_strict_holds_but_for_the_rig(tmp_path):
    """The check itself: an unannotated function is an error in controller/ and drivers/, core or shell (the table
    daemon's modules among them), and allowed in the rig."""
    for pkg in ("controller", "controller/round", "controller/app", "drivers", "hil"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("", encoding="utf-8")
    body = "def f(x):\n    return x\n"
    strict = ["controller/round/m.py", "controller/app/m.py", "controller/app/table.py", "drivers/m.py"]
    lenient = ["hil/m.py"]
    for f in strict + lenient:
        (tmp_path / f).write_text(body, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    proc = run_mypy(out, tmp_path, strict + lenient)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for f in strict:
        assert f"{f}:1: error: Function is missing a type annotation" in proc.stdout, proc.stdout
    for f in lenient:
        assert f not in proc.stdout, proc.stdout

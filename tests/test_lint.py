"""The code passes ruff's rules as pyproject.toml selects them, the pure core type-checks under mypy --strict, and
the shell under mypy's defaults."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


# --strict as per-module options (mypy cannot scope the flag itself): one mypy process checks the core strictly
# and the shell with mypy's defaults, the standard library's stubs read once.
STRICT_PER_MODULE = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                     "disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_decorators",
                     "warn_return_any", "no_implicit_reexport", "strict_equality", "extra_checks")


def mypy_config(core_modules: list[str]) -> str:
    """The shell: mypy's defaults, the bodies of unannotated functions checked too, and every `type: ignore` still
    needed. (The rig, hil/, is test equipment: not held to it.)"""
    lines = ["[mypy]", "check_untyped_defs = True", "warn_unused_ignores = True", "follow_imports = silent",
             "warn_redundant_casts = True", "", f"[mypy-{','.join(core_modules)}]"]
    lines += [f"{flag} = True" for flag in STRICT_PER_MODULE]
    return "\n".join(lines) + "\n"


def run_mypy(tmp_path: Path, root: Path, core: list[str], shell: list[str]) -> subprocess.CompletedProcess[str]:
    def module(path: str) -> str:
        parts = Path(path).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    config = tmp_path / "mypy.ini"
    config.write_text(mypy_config(sorted({module(f) for f in core})), encoding="utf-8")
    return subprocess.run([_mypy(), "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
                           *core, *shell], cwd=root, capture_output=True, text=True, timeout=300)


def test_the_code_type_checks(tmp_path):
    """mypy, in one run: the pure core as docs/architecture.md lists it (tests/test_architecture.py: CORE) under
    --strict (no Any returned where a type is declared, no untyped function, no unused ignore); the shell with
    mypy_config's options, so that the types at its seams (the link, the ledger's state, the daemon's control socket) are
    checked where they meet."""
    from test_architecture import CORE_FILES

    files = shell_files()
    assert "controller/app/table.py" in files and "controller/cli/daemon.py" in files
    assert "controller/meter_ledger.py" not in files and "controller/config/load.py" in files
    core = [p.relative_to(ROOT).as_posix() for p in CORE_FILES]
    proc = run_mypy(tmp_path, ROOT, core, files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_core_is_held_to_strict_and_the_shell_is_not(tmp_path):
    """The check itself: an unannotated function is an error in a core module and allowed in the shell."""
    for pkg in ("controller", "controller/round", "controller/app"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("", encoding="utf-8")
    body = "def f(x):\n    return x\n"
    (tmp_path / "controller/round/m.py").write_text(body, encoding="utf-8")
    (tmp_path / "controller/app/m.py").write_text(body, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    proc = run_mypy(out, tmp_path, ["controller/round/m.py"], ["controller/app/m.py"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "controller/round/m.py:1: error: Function is missing a type annotation" in proc.stdout, proc.stdout
    assert "controller/app/m.py" not in proc.stdout, proc.stdout

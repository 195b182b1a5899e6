"""The functional core stays pure and the shell stays out of it (docs/architecture.md): read from the imports of
every module, so a module of the core that imports asyncio, a file, a device, the journal or the link fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The core, as docs/architecture.md lists it: modules and packages, relative to the repository.
CORE = ("controller/cards.py", "controller/hands", "controller/games.py", "controller/awards.py", "controller/money.py",
        "controller/errors.py", "controller/positions.py", "controller/exits.py", "controller/paytables", "controller/settlement.py", "controller/roundio.py",
        "controller/dice", "controller/odds", "controller/meter", "controller/meter_award.py",
        "controller/meter_ledger.py", "controller/faults.py", "controller/round",
        "controller/report/day.py", "controller/report/build.py", "controller/report/render.py", "controller/link/schema.py", "controller/link/approval.py", "controller/link/liveness.py",
        "controller/link/anchors.py",
        "controller/console/page.py", "controller/console/floor.py",
        "drivers/modbus/edges.py", "drivers/modbus/codec.py", "drivers/modbus/schedule.py", "drivers/line/frame.py", "drivers/line/protocol.py")
# The one reader of files in the core: operator paytables (through the bounded reader of config/files.py and the
# TOML parser of config/toml.py).
READERS = {"controller/paytables/load.py": {"os", "pathlib", "stat", "importlib", "controller.config.files",
                                           "controller.config.toml"}}
# What the core never imports: I/O, concurrency, clocks, devices, storage, the network, and the shell's packages.
SHELL = ("asyncio", "threading", "subprocess", "socket", "ssl", "select", "selectors", "signal", "sqlite3", "os",
         "pathlib", "io", "shutil", "tempfile", "time", "random", "secrets", "logging", "structlog", "pydantic",
         "tomllib", "serial", "serial_asyncio_fast", "pymodbus", "aiomqtt", "paho", "prometheus_client",
         "controller.app", "controller.cli", "controller.config", "controller.ledger", "controller.link", "hil")
CORE_LINK = ("controller.link.schema", "controller.link.approval", "controller.link.liveness")  # pure modules of the link: the core may read them


def _files(entry: str) -> list[Path]:
    p = ROOT / entry
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, at any depth (a function's own import counts)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)  # `from pkg import module`
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


CORE_FILES = [f for entry in CORE for f in _files(entry)]


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_nothing_of_the_shell(path: Path) -> None:
    allowed = READERS.get(str(path.relative_to(ROOT)), set())
    bad = sorted(name for name in imports(path)
                 if any(_under(name, s) for s in SHELL) and not any(_under(name, a) for a in (*allowed, *CORE_LINK)))
    assert not bad, f"{path.relative_to(ROOT)}: the pure core imports {', '.join(bad)}"


def test_the_check_sees_a_shell_import(tmp_path: Path) -> None:
    """The check itself: an import of the shell, relative or absolute, at any depth, is found."""
    (tmp_path / "controller" / "round").mkdir(parents=True)
    f = tmp_path / "controller" / "round" / "x.py"
    f.write_text("def f():\n    from ..ledger import Ledger\n    import asyncio\n", encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert {"controller.ledger", "controller.ledger.Ledger", "asyncio"} <= imports(f)
    finally:
        ROOT = saved


def test_every_package_of_the_tree_is_placed() -> None:
    """docs/architecture.md places every package: a new one is named there (core or shell) before it lands."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "controller").rglob("__init__.py")}
    packages |= {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "drivers").rglob("__init__.py")}
    missing = sorted(p for p in packages if p not in ("controller", "drivers")
                     and f"`{p.removeprefix('controller/')}/`" not in text and f"`{p}/`" not in text)
    assert not missing, f"docs/architecture.md does not place {missing}"


def test_the_daemon_never_imports_the_rig() -> None:
    """The rig (hil) is the test bench and the demo's: nothing of controller/ imports it, at any depth, so a table
    box runs no line of it (the demo is its own command, hil/demo.py)."""
    bad = sorted(f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "controller").rglob("*.py")
                 for name in imports(p) if _under(name, "hil"))
    assert not bad, bad


# One way to parse a TOML file and one way to name pydantic's errors by TOML path: controller/config/toml.py
# (parse_toml, validate_table). Outside controller/config/, no module imports tomllib or catches pydantic's
# ValidationError itself, so that no other reader, with its own messages, appears.
TOML_OWNER = "controller/config"
PRODUCT = ("controller", "drivers", "hil", "bench", "scripts")


def toml_readers(source: str) -> list[str]:
    """What in `source` parses TOML or reads pydantic's errors on its own: an import of tomllib, an import of
    pydantic's ValidationError, a handler that catches a ValidationError."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: imports tomllib" for a in node.names if a.name == "tomllib"]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "tomllib":
                found.append(f"line {node.lineno}: imports tomllib")
            if (node.module or "").split(".")[0] in ("pydantic", "pydantic_core"):
                found += [f"line {node.lineno}: imports ValidationError" for a in node.names
                          if a.name == "ValidationError"]
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}
            if "ValidationError" in names:
                found.append(f"line {node.lineno}: catches ValidationError")
    return found


def test_toml_is_parsed_and_its_errors_placed_in_one_place() -> None:
    files = [p for d in PRODUCT if (ROOT / d).is_dir() for p in sorted((ROOT / d).rglob("*.py"))]
    bad = [f"{rel}: {what}" for p in files
           if not (rel := p.relative_to(ROOT).as_posix()).startswith(TOML_OWNER + "/")
           for what in toml_readers(p.read_text(encoding="utf-8"))]
    assert not bad, ("parse TOML with controller.config.toml.parse_toml and validate a TOML table with "
                     f"validate_table: {bad}")


def test_the_check_sees_a_toml_reader() -> None:
    """The check itself: each way of parsing TOML or catching pydantic's errors alone is found."""
    assert len(toml_readers("import tomllib\nfrom tomllib import loads\n")) == 2
    assert toml_readers("from pydantic import BaseModel, ValidationError\n") == ["line 1: imports ValidationError"]
    source = ("try:\n    f()\nexcept (KeyError, pydantic.ValidationError):\n    pass\n"
              "try:\n    f()\nexcept ValidationError as e:\n    pass\n")
    assert toml_readers(source) == ["line 3: catches ValidationError", "line 7: catches ValidationError"]
    assert toml_readers("from controller.config.toml import parse_toml\n") == []

"""The functional core stays pure and the shell stays out of it (docs/architecture.md): read from the imports of
every module, so a module of the core that imports asyncio, a file, a device, the journal or the link fails here."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The plan, bottom to top (docs/architecture.md, "The plan"). A unit is a folder of controller/ or drivers/ (a
# package without its subpackages); the modules at the root of controller/ are one unit, the vocabulary. A module
# imports only from units in layers below its own, or from its own unit: no arrow back up, none across a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("controller",),  # the vocabulary: cards, money, games, awards, positions, errors, exit statuses
    ("controller/tomlfile", "drivers"),  # reading a named file and TOML; the drivers' events and Device contract
    ("controller/hands", "drivers/modbus/core", "drivers/line/core"),
    ("controller/paytables",),
    ("controller/dice",),
    ("controller/meter",),
    ("controller/odds",),
    ("controller/round",),
    ("controller/linkproto",),
    ("controller/report",),
    ("controller/console/view",),
    ("controller/ledger", "drivers/modbus", "drivers/line"),
    ("controller/config",),
    ("controller/service",),
    ("controller/link",),
    ("controller/app", "controller/authority", "controller/console"),
    ("controller/cli",),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
# The functional core: these folders are pure, whole.
PURE = ("controller", "controller/hands", "controller/paytables", "controller/dice", "controller/meter",
        "controller/odds", "controller/round", "controller/linkproto", "controller/report", "controller/console/view",
        "drivers/modbus/core", "drivers/line/core")
# The one reader of files in the core: operator paytables (through the bounded reader and the TOML parser of
# controller/tomlfile/).
READERS = {"controller/paytables/load.py": {"os", "pathlib", "stat", "importlib", "controller.tomlfile"}}
# What the core never imports: I/O, concurrency, clocks, devices, storage, the network, and the shell's packages.
SHELL = ("asyncio", "threading", "subprocess", "socket", "ssl", "select", "selectors", "signal", "sqlite3", "os",
         "pathlib", "io", "shutil", "tempfile", "time", "random", "secrets", "logging", "structlog", "pydantic",
         "tomllib", "serial", "serial_asyncio_fast", "pymodbus", "aiomqtt", "paho", "prometheus_client", "aiohttp",
         "controller.app", "controller.authority", "controller.cli", "controller.config", "controller.console",
         "controller.ledger", "controller.link", "controller.service", "controller.tomlfile", "drivers.modbus",
         "drivers.line", "drivers.health", "hil")


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


def _source_unit(path: Path) -> str:
    rel = path.relative_to(ROOT)
    folder = rel.parent.as_posix()
    assert folder in RANK, f"{rel}: its folder is in no layer of the plan"
    return folder


def _code_files() -> list[Path]:
    return [p for d in ("controller", "drivers") for p in sorted((ROOT / d).rglob("*.py"))]


def _target_unit(name: str) -> str | None:
    """The unit of an imported name: `controller.meter.ops.Op` is in controller/meter, `controller.money` (a module
    at the root) in controller, `controller` itself (its __version__) in controller."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        stem = ROOT.joinpath(*parts[:i])
        if stem.with_suffix(".py").is_file():
            return stem.parent.relative_to(ROOT).as_posix()
        if stem.is_dir() and (stem / "__init__.py").is_file():
            return stem.relative_to(ROOT).as_posix()
    return None


def back_arrows(files: list[Path]) -> list[str]:
    """Every import of `files` (at any depth: deferred and TYPE_CHECKING imports count) that reaches a unit in its
    own layer or above, other than its own unit."""
    bad = []
    for path in files:
        src = _source_unit(path)
        for name in sorted(imports(path)):
            if name.split(".")[0] not in ("controller", "drivers"):
                continue
            dst = _target_unit(name)
            if dst is None or dst == src:
                continue
            if RANK[dst] >= RANK[src]:
                bad.append(f"{path.relative_to(ROOT)} imports {name} ({dst}, layer {RANK[dst]}; its own: {src}, "
                           f"layer {RANK[src]})")
    return bad


def test_every_folder_is_in_one_layer_of_the_plan() -> None:
    folders = {p.parent.relative_to(ROOT).as_posix() for d in ("controller", "drivers")
               for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts}
    placed = [u for layer in LAYERS for u in layer]
    assert len(placed) == len(set(placed)), "a folder in two layers"
    assert folders == set(placed), {"not placed": sorted(folders - set(placed)), "gone": sorted(set(placed) - folders)}


def test_no_arrow_back_up_and_none_across_a_layer() -> None:
    bad = back_arrows(_code_files())
    assert not bad, "\n".join(bad)


def import_graph(files: list[Path]) -> dict[str, set[str]]:
    """Module -> the modules of `files` it imports. A module's import of its own package (the __init__ that
    re-exports it) is Python's package, not an arrow of the plan."""
    mods = {_module(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for m, p in mods.items():
        deps = set()
        for name in imports(p):
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                c = ".".join(parts[:i])
                if c in mods:
                    if c != m and not m.startswith(c + "."):
                        deps.add(c)
                    break
        graph[m] = deps
    return graph


def module_circles(files: list[Path]) -> list[list[str]]:
    """The circles between modules (strongly connected components of the imports, at any depth)."""
    graph = import_graph(files)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_circle_between_modules() -> None:
    assert module_circles(_code_files()) == []


def _pure(path: Path) -> bool:
    return path.relative_to(ROOT).parent.as_posix() in PURE


CORE_FILES = [p for p in _code_files() if _pure(p)]
PURE_MODULES = tuple(".".join(Path(u).parts) for u in PURE if u != "controller")


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_nothing_of_the_shell(path: Path) -> None:
    allowed = READERS.get(path.relative_to(ROOT).as_posix(), set())
    bad = sorted(name for name in imports(path)
                 if any(_under(name, s) for s in SHELL)
                 and not any(_under(name, a) for a in (*allowed, *PURE_MODULES)))
    assert not bad, f"{path.relative_to(ROOT)}: the pure core imports {', '.join(bad)}"


def test_the_checks_see_an_arrow_back_up_and_a_circle(tmp_path: Path) -> None:
    """The checks themselves, on a tree of their own: a deferred import from the core up into the shell is an
    arrow back up; two modules importing each other (one of them only for types) are a circle."""
    global ROOT
    for folder in ("controller/round", "controller/ledger"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("", encoding="utf-8")
    up = tmp_path / "controller" / "round" / "x.py"
    up.write_text("def f():\n    from controller.ledger import y\n", encoding="utf-8")
    down = tmp_path / "controller" / "ledger" / "y.py"
    down.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from controller.round import x\n",
                    encoding="utf-8")
    saved, ROOT = ROOT, tmp_path
    try:
        assert {line.split(" imports ")[0] for line in back_arrows([up, down])} == {"controller/round/x.py"}
        assert module_circles([up, down]) == [["controller.ledger.y", "controller.round.x"]]
    finally:
        ROOT = saved


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


# One way to parse a TOML file and one way to name pydantic's errors by TOML path: controller/tomlfile/toml.py
# (parse_toml, validate_table). Outside controller/tomlfile/, no module imports tomllib or catches pydantic's
# ValidationError itself, so that no other reader, with its own messages, appears.
TOML_OWNER = "controller/tomlfile"
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
    assert not bad, ("parse TOML with controller.tomlfile.toml.parse_toml and validate a TOML table with "
                     f"validate_table: {bad}")


def test_the_check_sees_a_toml_reader() -> None:
    """The check itself: each way of parsing TOML or catching pydantic's errors alone is found."""
    assert len(toml_readers("import tomllib\nfrom tomllib import loads\n")) == 2
    assert toml_readers("from pydantic import BaseModel, ValidationError\n") == ["line 1: imports ValidationError"]
    source = ("try:\n    f()\nexcept (KeyError, pydantic.ValidationError):\n    pass\n"
              "try:\n    f()\nexcept ValidationError as e:\n    pass\n")
    assert toml_readers(source) == ["line 3: catches ValidationError", "line 7: catches ValidationError"]
    assert toml_readers("from controller.tomlfile.toml import parse_toml\n") == []


# The public surface: every module of controller/ and drivers/ says what it exports (`__all__`, a literal list of
# names), and every name it lists is there once imported (a re-export, a star import's or its own).
EXPORTS_CHECK = """
import importlib, json, sys
bad = []
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    listed = list(getattr(module, "__all__", ()))
    bad += [f"{name}: {n!r} is in __all__ and not in the module" for n in listed if not hasattr(module, n)]
    bad += [f"{name}: {n!r} is twice in __all__" for n in sorted(set(listed)) if listed.count(n) > 1]
print(json.dumps(bad))
"""


def without_all(files: list[Path]) -> list[str]:
    """The modules of `files` with no `__all__` at their top, or one that is not a literal list or tuple of names."""
    bad = []
    for path in files:
        found = None
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            target = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in target) and node.value is not None:
                found = node.value
        if not (isinstance(found, (ast.List, ast.Tuple))
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in found.elts)):
            bad.append(_module(path))
    return bad


def unbound_exports(root: Path, modules: list[str]) -> list[str]:
    """The names of `modules`' `__all__` that importing them does not bind, in a fresh interpreter at `root`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", EXPORTS_CHECK, *modules], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def test_every_module_says_what_it_exports_and_exports_what_it_says() -> None:
    files = _code_files()
    assert without_all(files) == []
    assert unbound_exports(ROOT, sorted({_module(p) for p in files})) == []


def test_the_check_sees_a_module_without_all_and_a_name_that_is_not_there(tmp_path: Path) -> None:
    """The check itself, on a tree of its own: no `__all__`, one built at run time, and a name listed that the
    module does not define, are each found; a re-exported name and a star import's are there."""
    global ROOT
    (tmp_path / "drivers").mkdir()
    files = {"__init__.py": '__all__ = ["f", "absent"]\nfrom drivers.loose import *\n',
             "loose.py": "def f():\n    pass\n",
             "built.py": "__all__ = [n for n in ('g',)]\ng = 1\n",
             "wrong.py": '__all__ = ["h", "gone"]\nfrom drivers.loose import f as h\n'}
    for name, text in files.items():
        (tmp_path / "drivers" / name).write_text(text, encoding="utf-8")
    saved, ROOT = ROOT, tmp_path
    try:
        paths = sorted((tmp_path / "drivers").glob("*.py"))
        assert without_all(paths) == ["drivers.built", "drivers.loose"]
        assert unbound_exports(tmp_path, ["drivers", "drivers.wrong"]) == [
            "drivers: 'absent' is in __all__ and not in the module",
            "drivers.wrong: 'gone' is in __all__ and not in the module"]
    finally:
        ROOT = saved


# The shell's packages export their API lazily (controller/exports.py): importing the package, or one of its
# modules, imports none of its other modules, so that progressivectl does not load the day's reports and the journal
# with the control socket's client.
LAZY = ("controller.app", "controller.authority", "controller.link", "controller.linkproto", "controller.service",
        "controller.tomlfile")


def test_a_package_s_api_is_imported_when_asked_for() -> None:
    code = ("import importlib, json, sys\n"
            f"for p in {LAZY!r}:\n"
            "    importlib.import_module(p)\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({tuple(p + '.' for p in LAZY)!r}))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    out = subprocess.run([sys.executable, "-c", "import controller.service as s, sys; s.ControlClient; "
                          "print('controller.service.reports' in sys.modules, 'controller.service.control' in "
                          "sys.modules)"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr


MAX_CLASS_LINES = 400  # a class longer than this does more than one job: split it into objects built like ClaimDesk


def long_classes(files: list[Path]) -> list[str]:
    return [f"{p.relative_to(ROOT)}: {node.name} is {node.end_lineno - node.lineno + 1} lines"
            for p in files for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES]


def test_no_class_over_400_lines() -> None:
    assert long_classes(_code_files()) == []


def test_the_check_sees_a_long_class(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES, encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert long_classes([f]) == [f"x.py: Big is {MAX_CLASS_LINES + 1} lines"]
    finally:
        ROOT = saved

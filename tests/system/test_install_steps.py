"""The install of a table controller box, as docs/operations.md writes it ("Installing on a table controller box"),
run line by line as written; the files it installs (the box's table file, the register maps it names by name); and
the manual pages, rendered, against the programs' own parsers.

The install block runs here on the checkout (its .venv is the box's /opt/progressive); tests/system/test_packaging.py
runs the same block on the Debian package unpacked into a scratch root (PROGRESSIVE_PACKAGE=1). Only these
stand-ins replace what a test cannot do on the machine it runs on (`STANDINS`): `apt install` unpacks the package
into the root (dpkg-deb -x; nothing on the checkout), the account `progressive` of `install -o/-g` and `chown` is the
user running the test, `systemctl enable --now progressived` starts the daemon from the installed table file on the
demo's simulated devices and returns once it reports ready (sd_notify), `progressivectl` is the installation's, and
the paths /etc/progressive and /opt/progressive/bin/python are the root's. Every other line runs as written."""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from controller.config import load_config
from controller.config.credentials import verify_credential
from controller.config.load import check_config

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
EXAMPLES = ROOT / "config"
BIN = Path(sys.executable).parent
SECRET = "correct horse battery staple"


def install_block() -> str:
    """The shell block of "Installing on a table controller box", as written."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text.split("\n## Installing on a table controller box\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```sh\n", 1)[1].split("\n```", 1)[0] + "\n"


# The stand-ins, defined before the block runs (see the module's docstring).
STANDINS = r"""
set -euo pipefail
apt() {  # apt install ./PACKAGE.deb: unpacked into the root (the maintainer scripts: tests/system/test_packaging.py)
    [ "$1" = install ] && [ $# -eq 2 ] || { echo "apt stand-in: $*" >&2; return 2; }
    if [ -n "${DEB_ROOT:-}" ]; then dpkg-deb -x "$2" "$DEB_ROOT"; fi
}
_account() { if [ "$1" = progressive ]; then echo "$2"; else echo "$1"; fi; }
install() {  # the account progressive is the user running the test
    local a=() prev=""
    for x in "$@"; do
        case "$prev" in -o) x=$(_account "$x" "$(id -un)");; -g) x=$(_account "$x" "$(id -gn)");; esac
        a+=("$x"); prev=$x
    done
    command install "${a[@]}"
}
chown() { command chown "$(_account "$1" "$(id -un)")" "${@:2}"; }
systemctl() {  # the daemon from the installed table file, on the demo's simulated devices, until it is ready
    [ "$*" = "enable --now progressived" ] || { echo "systemctl stand-in: $*" >&2; return 2; }
    "$BOX_PYTHON" -c "$STARTER" "$ETC/table.toml" "$DEMO_DIR" "$PROGRESSIVE_SOCKET"
}
"""

# The starter of the systemctl stand-in: the demo on the installed table file, detached, once it is ready.
STARTER = r"""
import os, socket, subprocess, sys
table, demo, sock = sys.argv[1:4]
os.makedirs(demo, exist_ok=True)
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(os.path.join(demo, "notify"))
notify.settimeout(1)
with open(os.path.join(demo, "daemon.log"), "wb") as log:
    p = subprocess.Popen([os.environ["BOX_PYTHON"], os.environ["BOX_DEMO"], "--table", table, "--demo-dir", demo,
                          "--socket", sock, "--no-dealer", "--log-format", "json"], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                         env={**os.environ, "NOTIFY_SOCKET": os.path.join(demo, "notify")})
with open(os.path.join(demo, "pid"), "w") as f:
    f.write(str(p.pid))
while True:
    try:
        if notify.recv(4096).startswith(b"READY=1"):
            break
    except TimeoutError:
        if p.poll() is not None:
            sys.exit(f"the daemon exited with status {p.returncode} before it was ready")
"""


def run_install_block(tmp: Path, *, python: Path, bin_dir: Path, deb: Path | None = None,
                      root: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The block of docs/operations.md run in `tmp` with `python` and the programs of `bin_dir` as the box's; the
    root (/etc/progressive, and the package's files with `deb`) under `root`. The daemon it starts is stopped
    before this returns."""
    root = root or tmp / "root"
    etc = root / "etc" / "progressive"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    standin_bin = tmp / "standin-bin"
    standin_bin.mkdir()
    for cmd in ("progressivectl",):  # the installation's, as /usr/bin links it
        shim = standin_bin / cmd
        shim.write_text(f'#!/bin/sh\nexec "{python}" "{bin_dir / cmd}" "$@"\n')
        shim.chmod(0o755)
    written = install_block()
    unmapped = [p for p in re.findall(r"(?<![\w.$])/(?:etc|opt|usr|var|run|lib)/[\w./-]*", written)
                if not p.startswith("/etc/progressive") and p != "/opt/progressive/bin/python"]
    assert not unmapped, f"paths of the box this run does not map into its root: {unmapped}"
    block = written.replace("/etc/progressive", str(etc)).replace("/opt/progressive/bin/python", str(python))
    if deb is not None:
        shutil.copy(deb, tmp / deb.name)
    else:
        (tmp / "table-progressive_0-1_all.deb").write_bytes(b"")  # the checkout is installed already
    demo = tmp / "demo"
    env = {"PATH": f"{standin_bin}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8",
           "DEB_ROOT": str(root) if deb is not None else "", "ETC": str(etc), "DEMO_DIR": str(demo),
           "PROGRESSIVE_SOCKET": str(tmp / "control.sock"), "BOX_PYTHON": str(python),
           "BOX_DEMO": str(bin_dir / "progressive-demo"), "STARTER": STARTER}
    try:
        return subprocess.run(["bash", "-c", STANDINS + block], input=SECRET + "\n", capture_output=True, text=True,
                              cwd=tmp, env=env, timeout=300)
    finally:
        stop_daemon(demo)


def stop_daemon(demo: Path) -> None:
    """SIGTERM to the daemon the stand-in started, and its exit awaited (it is not our child: by its pidfd)."""
    try:
        pid = int((demo / "pid").read_text())
    except FileNotFoundError:
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        os.kill(pid, signal.SIGTERM)
        if not select.select([fd], [], [], 60)[0]:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the daemon did not stop within 60 s of SIGTERM")
    finally:
        os.close(fd)


def check_installed(r: subprocess.CompletedProcess[str], tmp: Path, root: Path) -> None:
    """What the block must have done: a sound configuration with no warning, and the daemon ready and answering."""
    log = (tmp / "demo" / "daemon.log").read_text() if (tmp / "demo" / "daemon.log").exists() else ""
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:] + log[-3000:]
    table = root / "etc" / "progressive" / "table.toml"
    assert f"{table}: sound\n" in r.stdout, r.stdout
    assert "warning" not in r.stderr, r.stderr
    status = r.stdout.split(f"{table}: sound\n", 1)[1].split("\ntable CS-07: caribbean-stud, up ", 1)
    assert len(status) == 2, r.stdout  # progressivectl status, from the daemon the stand-in started
    assert re.search(r"\nanchor: seq \d+ at \S+ \(keyed\)\n", status[1]), status[1]  # signed with journal.key
    etc = table.parent
    assert oct(etc.stat().st_mode & 0o777) == "0o750"
    assert oct(table.stat().st_mode & 0o777) == "0o640"
    assert oct((etc / "supervisors.toml").stat().st_mode & 0o777) == "0o600"
    assert oct((etc / "journal.key").stat().st_mode & 0o777) == "0o400"
    cfg = load_config(table)
    assert [s.name for s in cfg.supervisors] == ["Floor Supervisor 1"]
    assert verify_credential(SECRET, cfg.supervisors[0].credential)


def test_the_install_steps_run_as_written_on_the_checkout(tmp_path):
    r = run_install_block(tmp_path, python=BIN / "python", bin_dir=BIN)
    check_installed(r, tmp_path, tmp_path / "root")


def test_the_block_is_the_one_the_box_needs():
    """The lines that matter, so that an edit of the block that drops one fails here and not on a box."""
    block = install_block()
    for line in ('install -m 0640 -g progressive "$EX/box/table.toml" /etc/progressive/table.toml',
                 "progressivectl check-config /etc/progressive/table.toml", "systemctl enable --now progressived"):
        assert line in block, line


def test_the_box_table_is_the_caribbean_stud_example_as_a_box_runs_it():
    """box/table.toml is tables/caribbean-stud.toml with its supervisors in supervisors.toml and its journal
    anchored: any other difference is drift."""
    box = tomllib.loads((EXAMPLES / "box" / "table.toml").read_text(encoding="utf-8"))
    example = tomllib.loads((EXAMPLES / "tables" / "caribbean-stud.toml").read_text(encoding="utf-8"))
    assert box.pop("supervisors_file") == "supervisors.toml"
    assert box.pop("anchor") == {"key_file": "journal.key", "syslog": "logs.casino.example:514"}
    assert example.pop("supervisors")
    assert box == example


def test_an_example_copied_anywhere_keeps_its_register_maps_and_paytables(tmp_path):
    """The examples name the shipped maps and example paytables: copied away from config/ (as to /etc/progressive),
    each device's map and each wager's paytable is found."""
    for example in sorted((EXAMPLES / "tables").glob("*.toml")):
        copy = tmp_path / example.name
        shutil.copy(example, copy)
        copy.chmod(0o600)
        found = [p for p in check_config(copy) if p.path.startswith(("devices", "wagers"))]
        assert found == [], example.name


def test_an_unknown_paytable_name_is_refused_naming_the_built_in_ids_and_the_shipped_examples(tmp_path):
    text = (EXAMPLES / "tables" / "let-it-ride.toml").read_text(encoding="utf-8")
    path = tmp_path / "table.toml"
    path.write_text(text.replace('"let-it-ride-three-card-progressive-example"',
                                 '"let-it-ride-three-card-progresive-example"', 1), encoding="utf-8")
    path.chmod(0o600)
    (problem,) = [p for p in check_config(path) if p.path.startswith("wagers")]
    assert "unknown paytable 'let-it-ride-three-card-progresive-example'" in problem.message
    assert "did you mean 'let-it-ride-three-card-progressive-example'?" in problem.hint
    assert "progressive_examples" in problem.hint or "paytables" in problem.hint


def _table_with_map(tmp_path: Path, ref: str) -> Path:
    text = (EXAMPLES / "tables" / "caribbean-stud.toml").read_text(encoding="utf-8")
    text = text.replace('register_map = "sign"', f'register_map = "{ref}"', 1)
    path = tmp_path / "table.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_a_register_map_is_a_shipped_name_or_a_path_relative_to_the_file(tmp_path):
    from controller.config.check_devices import SHIPPED_MAPS

    assert SHIPPED_MAPS.is_dir() and (SHIPPED_MAPS / "sign.toml").is_file()
    own = tmp_path / "devices" / "my-sign.toml"
    own.parent.mkdir()
    shutil.copy(SHIPPED_MAPS / "sign.toml", own)
    cfg = load_config(_table_with_map(tmp_path, "devices/my-sign.toml"))
    assert cfg.devices["sign"].register_map_path == own.resolve()
    # a name is the shipped map, even with a file of that name beside the table
    shutil.copy(SHIPPED_MAPS / "sign.toml", tmp_path / "devices" / "sign.toml")
    cfg = load_config(_table_with_map(tmp_path, "sign"))
    assert cfg.devices["sign"].register_map_path == (SHIPPED_MAPS / "sign.toml").resolve()


def test_an_unknown_map_name_is_refused_naming_the_shipped_folder(tmp_path):
    from controller.config.check_devices import SHIPPED_MAPS

    (p,) = check_config(_table_with_map(tmp_path, "sgin"))
    assert p.path == "devices.sign.register_map" and p.message == "no shipped register map is named 'sgin'"
    assert p.hint.startswith("did you mean 'sign'? the shipped maps are lockout, lockout-momentary, seat-hot-roller")
    assert str(SHIPPED_MAPS) in p.hint and SHIPPED_MAPS.is_dir()


def test_a_missing_map_file_names_a_folder_that_exists(tmp_path):
    (p,) = check_config(_table_with_map(tmp_path, "../devices/sign.toml"))  # the examples' old relative path
    assert p.path == "devices.sign.register_map" and p.message == "../devices/sign.toml: no such file"
    folder = re.search(r"the shipped maps are in (\S+)\)", p.hint)
    assert folder and Path(folder[1]).is_dir() and 'register_map = "seat-single"' in p.hint, p.hint


# --- the manual pages ------------------------------------------------------------------------------------------


def _manpages():
    spec = importlib.util.spec_from_file_location("manpages", ROOT / "scripts" / "manpages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(page: Path) -> str:
    """A page as man shows it (wide, so that no option is broken across lines); groff's warnings fail it."""
    if shutil.which("man") is None or shutil.which("groff") is None:
        pytest.fail("man and groff are needed to render the manual pages (Debian's man-db and groff-base)")
    text = gzip.decompress(page.read_bytes()).decode() if page.suffix == ".gz" else page.read_text()
    warn = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=text, capture_output=True, text=True,
                          timeout=60)
    assert warn.returncode == 0 and warn.stderr == "", f"{page.name}: {warn.stderr}"
    r = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MANWIDTH": "250", "MAN_KEEP_FORMATTING": ""})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings and positionals of `parser` (not its commands, nor a command's -h)."""
    top = parser.prog.count(" ") == 0
    return [o for a in parser._actions if not isinstance(a, argparse._SubParsersAction)
            and (top or not isinstance(a, argparse._HelpAction))
            for o in (a.option_strings or [a.metavar if isinstance(a.metavar, str) else a.dest])]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, sub in a.choices.items()}


def _tags(lines: list[str]) -> set[str]:
    """What the items of a rendered list are tagged with: each option of a tag line, and a command's words."""
    tags: set[str] = set()
    for line in lines:
        words = line.split()
        if words:
            tags.add(" ".join(words[:2]))
            tags.update(part.split()[0] for part in line.strip().split(", ") if part.strip())
    return tags


def _sections(shown: str) -> dict[str | None, list[str]]:
    """The rendered page's lines by command (None: the rest), a command's section under COMMANDS."""
    out: dict[str | None, list[str]] = {None: []}
    current: str | None = None
    commands = False
    for line in shown.splitlines():
        if re.fullmatch(r"[A-Z][A-Z ]+", line):
            commands, current = line == "COMMANDS", None
        elif commands and re.fullmatch(r"   \S+", line):
            current = line.strip()
            out[current] = []
            continue
        out.setdefault(current, []).append(line)
    return out


def check_page(program: str, page: Path) -> None:
    """The page renders with its sections, and lists every option and command of `program`'s parser where it
    belongs: the program's options under OPTIONS, each command's under that command."""
    shown = render(page)
    section = page.name.split(".")[1]
    assert shown.startswith(f"{program.upper()}({section})"), shown[:200]
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SEE ALSO"):
        assert f"\n{heading}\n" in shown, f"{page.name}: no {heading}"
    assert f"\n       {program} - " in shown, shown[:400]  # the NAME line whatis reads
    parser = _manpages().parser_of(program)
    parts = _sections(shown)
    missing = [o for o in _arguments(parser) if o not in _tags(parts[None])]
    for name, sub in _commands(parser).items():
        if name not in parts:
            missing.append(name)
            continue
        tags = _tags(parts[name])
        missing += [f"{name} {o}" for o in _arguments(sub) if o not in tags]
        for inner, inner_sub in _commands(sub).items():
            missing += [f"{name} {x}" for x in (inner, *_arguments(inner_sub))
                        if x not in tags and f"{name} {x}" not in tags]
    assert not missing, f"{page.name} does not show: {missing}"


@pytest.mark.parametrize("program", ["progressived", "progressivectl", "progressive-hil", "progressive-console",
                                     "progressive-demo"])
def test_each_man_page_renders_and_shows_every_option(program, tmp_path):
    manpages = _manpages()
    assert manpages.main([str(tmp_path), "9.9"]) == 0
    (page,) = tmp_path.glob(f"man*/{program}.[18]")
    check_page(program, page)
    assert "table-progressive 9.9" in render(page)


def test_the_man_page_check_sees_an_option_missing(tmp_path):
    """The check itself: a page without one of the options fails it."""
    manpages = _manpages()
    assert manpages.main([str(tmp_path), "9.9"]) == 0
    page = tmp_path / "man8" / "progressived.8"
    text = page.read_text()
    page.write_text(text.replace("\\fB\\-\\-socket\\fR", "\\fB\\-\\-sock\\fR"))
    with pytest.raises(AssertionError, match="--socket"):
        check_page("progressived", page)


def test_each_man_page_fits_a_terminal_of_80_columns(tmp_path):
    """The usage lines were set without filling: progressive-console's SYNOPSIS ran to 190 columns past the
    terminal's edge. Now every line of every page fits 80 columns, a bracketed option kept whole."""
    if shutil.which("man") is None:
        pytest.fail("man is needed to render the manual pages (Debian's man-db)")
    assert _manpages().main([str(tmp_path), "9.9"]) == 0
    pages = sorted(tmp_path.glob("man*/*.[18]"))
    assert len(pages) == 5
    for page in pages:
        shown = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=60, check=True,
                               env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MANWIDTH": "80"}).stdout
        wide = [line for line in shown.splitlines() if len(line) > 80]
        assert not wide, f"{page.name}: {wide}"
        assert "[--log-format {auto,json,console}]" in shown or "--log-format" not in shown, page.name


@pytest.mark.parametrize("program", ["progressived", "progressivectl", "progressive-hil", "progressive-console",
                                     "progressive-demo"])
def test_every_option_says_what_it_does(program):
    """A man page lists each option with the help its parser gives: an option without one was listed bare (20 were)."""
    manpages = _manpages()

    def bare(parser, where):
        for action in parser._actions:  # argparse keeps no public list of a parser's arguments
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from bare(sub, f"{where} {name}")
            elif action.help is None and action.option_strings and action.dest != "help":
                yield f"{where} {'/'.join(action.option_strings)}"

    assert list(bare(manpages.parser_of(program), program)) == []

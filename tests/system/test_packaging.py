"""Releases: the wheel and the Debian package that `scripts/release` builds, installed as a box would have them.

The package is unpacked into a scratch root (`dpkg-deb -x`) and run from there, from another directory, with an
empty environment: `progressivectl check-config` on a shipped example, the demo (two rounds), `audit verify` on the
demo's journal, and the maintainer script that makes the account and the state directories, in the scratch root; the
install steps of docs/operations.md run as written on the unpacked package (tests/system/test_install_steps.py); the venv
with nothing to build with; the documentation with its images and every link resolving; each man page rendered with
every option of its program. Building takes half a minute (a venv with every dependency): it runs with
PROGRESSIVE_PACKAGE=1, as `.ci/run` does; the check of pyproject's package list runs always."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import controller

from test_install_steps import check_installed, check_page, run_install_block

ROOT = Path(__file__).resolve().parents[2]
BUILD = os.environ.get("PROGRESSIVE_PACKAGE", "") not in ("", "0")


def test_every_package_and_data_directory_is_in_pyproject() -> None:
    """pyproject lists its packages (config/ is installed as progressive_examples): a new package or data directory
    missing from the list would be missing from every release."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    tree: set[str] = set()
    for top in ("controller", "drivers", "hil"):
        for d in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if d.name != "__pycache__" and any(f.is_file() and f.suffix in (".py", ".toml") for f in d.iterdir()):
                tree.add(".".join(d.relative_to(ROOT).parts))
    tree.add("progressive_examples")
    tree |= {f"progressive_examples.{d.name}" for d in (ROOT / "config").iterdir()
             if d.is_dir() and d.name != "__pycache__"}
    assert listed == tree, f"missing: {sorted(tree - listed)}; not in the tree: {sorted(listed - tree)}"


MAN_PAGES = {"progressived": "man8/progressived.8.gz", "progressivectl": "man1/progressivectl.1.gz",
             "progressive-hil": "man1/progressive-hil.1.gz", "progressive-console": "man1/progressive-console.1.gz",
             "progressive-demo": "man1/progressive-demo.1.gz"}

needs_build = pytest.mark.skipif(not BUILD, reason="builds a release: PROGRESSIVE_PACKAGE=1 (.ci/run sets it)")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("dpkg-deb") is None:
        pytest.fail("dpkg-deb is needed to build the Debian package (.ci/run installs dpkg)")
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([ROOT / "scripts" / "release", out], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    wheel, deb = (Path(line) for line in r.stdout.split())
    assert wheel.is_file() and deb.is_file()
    return wheel, deb


def _run(*argv: object, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}  # nothing of the checkout, no venv
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@needs_build
def test_the_debian_package_describes_itself(release) -> None:
    _, deb = release
    fields = dict(line.split(": ", 1) for line in subprocess.run(
        ["dpkg-deb", "-f", deb], capture_output=True, text=True, check=True).stdout.splitlines() if ": " in line)
    assert fields["Package"] == "table-progressive" and fields["Version"] == f"{controller.__version__}-1"
    assert fields["Depends"].startswith("python3.") and "systemd" in fields["Depends"]
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/lib/systemd/system/progressived.service", "./usr/lib/systemd/system/progressived-link.service",
                 "./usr/lib/systemd/system/progressive-console.socket",
                 "./usr/lib/sysusers.d/progressive.conf", "./usr/lib/tmpfiles.d/progressive.conf",
                 "./usr/share/doc/table-progressive/operations.md", "./opt/progressive/pyvenv.cfg"):
        assert f" {path}\n" in listing, path
    for cmd in ("progressived", "progressivectl", "progressive-demo", "progressive-hil"):
        assert f"./usr/bin/{cmd} -> /opt/progressive/bin/{cmd}" in listing, cmd
    for page in MAN_PAGES.values():
        assert f" ./usr/share/man/{page}\n" in listing, page
    assert "/etc/" not in listing  # the operator's files are the operator's: the package ships none


@needs_build
def test_the_installed_files_check_a_configuration_and_run_the_demo(release, tmp_path) -> None:
    _, deb = release
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True, timeout=120)
    venv = root / "opt" / "progressive"
    python = venv / "bin" / "python"
    # nothing in the package names the directory it was built in
    stale = subprocess.run(["grep", "-rlI", "/tmp/", venv / "bin", venv / "pyvenv.cfg"], capture_output=True, text=True)
    assert stale.stdout == "", stale.stdout
    assert next((venv / "bin").glob("progressived")).read_text().startswith("#!/opt/progressive/bin/python\n")

    where = _run(python, "-c", "import controller, hil, progressive_examples; "
                 "print(controller.__file__); print(progressive_examples.DIR)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(venv)) for line in where.stdout.split()), where.stdout

    example = next(venv.glob("lib/python3.*/site-packages/progressive_examples/tables/caribbean-stud.toml"))
    examples = example.parent.parent  # the monitoring's files too (docs/operations.md, "Dashboards and alerts")
    assert (examples / "prometheus" / "progressive-rules.yml").is_file()
    assert (examples / "grafana" / "progressive-table.json").is_file()
    assert (examples / "alertmanager" / "alertmanager.yml").is_file()
    checked = _run(python, venv / "bin" / "progressivectl", "check-config", example, cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout.startswith(f"{example}: sound\n"), checked.stdout + checked.stderr

    demo = _run(python, venv / "bin" / "progressive-demo", "--rounds", "2", "--demo-dir", tmp_path / "demo",
                "--log-format", "json", cwd=tmp_path, timeout=180)
    assert demo.returncode == 0, demo.stderr[-3000:] + demo.stdout[-3000:]
    played = [e for e in map(json.loads, filter(None, demo.stdout.splitlines())) if e.get("event") == "round played"]
    assert [e["round"] for e in played] == ["CS-07-r1", "CS-07-r2"]
    audit = _run(python, venv / "bin" / "progressivectl", "audit", "verify", "--state", tmp_path / "demo" / "state",
                 cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr


@needs_build
def test_the_maintainer_script_makes_the_account_and_the_state_directories(release, tmp_path) -> None:
    _, deb = release
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True, timeout=120)
    subprocess.run(["dpkg-deb", "-e", deb, root / "DEBIAN"], check=True, timeout=60)
    for script in ("postinst", "prerm", "postrm"):
        assert subprocess.run(["sh", "-n", root / "DEBIAN" / script]).returncode == 0, script
    if os.geteuid() != 0:
        pytest.skip("systemd-sysusers --root needs root to write the scratch root's account files")
    (root / "etc").mkdir()
    r = subprocess.run(["sh", root / "DEBIAN" / "postinst", "configure"], capture_output=True, text=True,
                       env={**os.environ, "DPKG_ROOT": str(root)}, timeout=60)
    assert r.returncode == 0, r.stderr
    passwd = (root / "etc" / "passwd").read_text()
    assert passwd.startswith("progressive:") and ":/var/lib/progressive:" in passwd
    assert "progressive" in next(line for line in (root / "etc" / "group").read_text().splitlines()
                                 if line.startswith("dialout:"))
    for d in ("progressive", "progressive-anchor"):
        assert oct((root / "var" / "lib" / d).stat().st_mode & 0o777) == "0o700", d


@pytest.fixture(scope="module")
def unpacked(release, tmp_path_factory) -> Path:
    """The package's files, as a box has them (read only)."""
    root = tmp_path_factory.mktemp("unpacked")
    subprocess.run(["dpkg-deb", "-x", release[1], root], check=True, timeout=120)
    return root


@needs_build
def test_the_install_steps_of_the_docs_run_as_written_on_the_package(release, tmp_path) -> None:
    """docs/operations.md's block, verbatim but for its stand-ins (tests/system/test_install_steps.py), on the package
    unpacked into a scratch root: check-config says sound with no warning, and the daemon starts from the file."""
    root = tmp_path / "root"
    venv = root / "opt" / "progressive"
    r = run_install_block(tmp_path, python=venv / "bin" / "python", bin_dir=venv / "bin", deb=release[1], root=root)
    check_installed(r, tmp_path, root)


@needs_build
def test_the_venv_has_nothing_to_build_with(unpacked) -> None:
    """A box runs the venv: no pip, no setuptools, no wheels, no activate scripts for any shell."""
    venv = unpacked / "opt" / "progressive"
    site = next(venv.glob("lib/python3.*/site-packages"))
    found = sorted(str(p.relative_to(venv)) for p in [
        *venv.glob("bin/pip*"), *venv.glob("bin/activate*"), *venv.glob("bin/Activate*"),
        *site.glob("pip"), *site.glob("pip-*"), *site.glob("setuptools"), *site.glob("setuptools-*"),
        *site.glob("pkg_resources"), *site.glob("_distutils_hack"), *site.glob("distutils-precedence.pth"),
        *venv.rglob("*.whl")])
    assert found == [], found
    assert (venv / "bin" / "python").exists() and (site / "controller").is_dir()


@needs_build
def test_the_documentation_has_its_images_and_every_link_resolves(unpacked) -> None:
    doc = unpacked / "usr" / "share" / "doc" / "table-progressive"
    pages = sorted(doc.glob("*.md"))
    assert {p.name for p in pages} == {"README.md", *(p.name for p in (ROOT / "docs").glob("*.md"))}
    assert {p.name for p in (doc / "images").iterdir()} == {p.name for p in (ROOT / "docs" / "images").iterdir()}
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not path.startswith("mailto:") and not (page.parent / path).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == [], broken
    for unit in (unpacked / "usr" / "lib" / "systemd" / "system").iterdir():
        for line in unit.read_text().splitlines():
            if line.startswith("Documentation=file:"):
                assert (unpacked / line.removeprefix("Documentation=file:").lstrip("/")).is_file(), line


@needs_build
@pytest.mark.parametrize("program", sorted(MAN_PAGES))
def test_each_installed_man_page_renders_with_every_option(unpacked, program) -> None:
    page = unpacked / "usr" / "share" / "man" / MAN_PAGES[program]
    assert page.read_bytes()[:2] == b"\x1f\x8b"  # gzipped, as Debian installs them
    check_page(program, page)


@needs_build
def test_a_wrong_register_map_on_a_box_names_the_installed_maps(unpacked, tmp_path) -> None:
    """On a box, the hint of a map not found names the package's devices/ folder, which is there."""
    venv = unpacked / "opt" / "progressive"
    example = next(venv.glob("lib/python3.*/site-packages/progressive_examples/box/table.toml"))
    table = tmp_path / "table.toml"
    table.write_text(example.read_text().replace('register_map = "sign"', 'register_map = "sgin"'))
    r = _run(venv / "bin" / "python", venv / "bin" / "progressivectl", "check-config", table, cwd=tmp_path)
    line = next(line for line in r.stderr.splitlines() if "devices.sign.register_map" in line)
    folder = re.search(r" in (/\S+/progressive_examples/devices);", line)
    assert r.returncode == 2 and folder and Path(folder[1]).is_dir(), r.stderr
    assert folder[1].startswith(str(venv)) and "did you mean 'sign'?" in line, line

"""A register map named by a bare name is one of the package's shipped maps, never a file elsewhere
(controller/config/check_devices.py): hostile names and paths are each one line naming the TOML path, as
`progressivectl check-config` prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_config import base, write

BIN = Path(sys.executable).parent


def _check(tmp_path: Path, register_map: str) -> list[str]:
    doc = base()
    doc["devices"]["sign"]["register_map"] = register_map
    r = subprocess.run([str(BIN / "progressivectl"), "check-config", str(write(tmp_path, doc))], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return [line for line in r.stderr.splitlines() if ": warning: " not in line]


def test_a_name_that_is_no_shipped_map_never_reaches_outside_the_shipped_folder(tmp_path):
    (tmp_path / "con.toml").write_text("")  # a file beside the table's: a bare name never means it
    for name in ("..", ".", "a\x00b", "con", "*", "x" * 5000):
        (line,) = _check(tmp_path, name)
        assert "devices.sign.register_map: no shipped register map is named " in line and len(line) < 600, line


def test_a_map_path_with_a_newline_is_one_line_and_forges_none(tmp_path):
    """Was three lines, the middle one whatever the path said ("FAKE: all checks passed")."""
    (line,) = _check(tmp_path, "x\nFAKE: all checks passed\ny.toml")
    assert r"devices.sign.register_map: x\nFAKE: all checks passed\ny.toml: no such file" in line, line

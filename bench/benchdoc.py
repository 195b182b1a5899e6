"""Writing a benchmark's results into its own section of docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the section that starts with `heading` (or add it), leaving other sections alone."""
    old = path.read_text() if path.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: section + "\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.parent.mkdir(exist_ok=True)
    path.write_text(new.rstrip("\n") + "\n")

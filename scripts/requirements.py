"""The requirements of the package and of the extras named (comma-separated), one a line, from pyproject.toml:
what `pip install -e ".[EXTRAS]"` would install, without building the package again (scripts/venv.sh). Exits 1
when it cannot say (an unknown extra, an extra that names the package itself): the caller installs the usual way."""

import sys
from pathlib import Path

from controller.tomlfile.toml import parse_toml  # the package is installed: this runs in its venv

project = parse_toml(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
lines = list(project["dependencies"])
for extra in sys.argv[1].split(","):
    lines += project.get("optional-dependencies", {}).get(extra.strip(), [None])
if any(line is None or line.replace("_", "-").lower().startswith(project["name"].lower()) for line in lines):
    sys.exit(1)
print("\n".join(lines))

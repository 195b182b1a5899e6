"""progressived: the table daemon.

The daemon (rounds, lock-out, devices, meters, metrics, systemd) is not built yet; until then this
entry point says so plainly instead of pretending to run.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="progressived", description="Table progressive controller daemon")
    p.add_argument("--version", action="version", version=f"progressived {__version__}")
    p.add_argument("--config", help="configuration file (TOML)")
    p.parse_args(argv)
    print(
        "progressived: the table daemon is not available in this version; "
        "the rules engine is: try `progressivectl odds` or `progressivectl settle`",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())

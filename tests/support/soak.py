"""How long the soaks run: a short run by default (every check still made), the long one with PROGRESSIVE_SOAK=1.

    CYCLES = cycles("LEDGER_CRASH_CYCLES", default=60, soak=5000)

A test's own variable wins (LEDGER_CRASH_CYCLES=N); otherwise PROGRESSIVE_SOAK=1 gives the soak's count. Tests
using it are marked `soak` (pytestmark), so `./test -m soak` runs just them and `-m "not soak"` leaves them out.
"""

from __future__ import annotations

import os

import pytest

SOAK = os.environ.get("PROGRESSIVE_SOAK", "") not in ("", "0")
mark = pytest.mark.soak


def cycles(variable: str, *, default: int, soak: int) -> int:
    """The count named by `variable`, else the soak's (PROGRESSIVE_SOAK=1), else the default run's."""
    return int(os.environ.get(variable, str(soak if SOAK else default)))

"""Open file descriptors, for tests that must leave none behind. Each is named by what it is open on (a number
reused for another file is another one), and a test compares what is open after it with what was before as
sets, not counts: a leftover of an earlier test on the same worker, closed when the collector reaches it during
the test, is no leak and hides none."""

from __future__ import annotations

import contextlib
import os


def open_fds() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            out.add(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return out


def opened_since(before: set[str]) -> list[str]:
    """What is open now that was not in `before` (one closed meanwhile is no leak)."""
    return sorted(open_fds() - before)

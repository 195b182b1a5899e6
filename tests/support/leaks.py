"""Open file descriptors, for tests that must leave none behind. Each is named by what it is open on (a number
reused for another file is another one), and a test compares what is open after it with what was before as sets,
not counts. The snapshot before is taken after a collection: a leftover of an earlier test on the same worker
closed by the collector during the test would otherwise free a number (a PTY's /dev/ptmx, say) that a descriptor
the test leaks could take again under the same name, unseen."""

from __future__ import annotations

import contextlib
import gc
import os


def _listing() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            out.add(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return out


def open_fds() -> set[str]:
    """What is open now, leftovers of earlier tests collected first: the snapshot a test starts from."""
    gc.collect()
    return _listing()


def opened_since(before: set[str]) -> list[str]:
    """What is open now that was not in `before` (one closed meanwhile is no leak)."""
    return sorted(_listing() - before)

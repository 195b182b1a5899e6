"""The daemon's heap after start-up, out of the cyclic garbage collector's way.

Everything alive once the daemon is ready (the imports, the configuration, the drivers, the journal's state) lives
as long as the process. A full collection walks all of it (30-95 ms in bench/bench_table.py's runs), on the event
loop, at a moment chosen by allocation counts, so now and then during a lock-out's booking. Frozen (gc.freeze),
those objects are no longer walked; a full collection scans only what was made since. Reference counting still
frees them; only a reference cycle among them would be kept, and start-up's objects are kept anyway.
"""

from __future__ import annotations

import asyncio
import gc
import time

import structlog

log = structlog.get_logger("controller.heap")


async def freeze_when_ready(ready: asyncio.Event) -> None:
    """Once `ready` is set: collect what start-up left as garbage, then freeze the rest (once; a process's own
    task, not a library's: it changes the whole process)."""
    await ready.wait()
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.info("start-up heap frozen", objects=gc.get_freeze_count(),
             ms=round((time.perf_counter() - t0) * 1e3, 1))


__all__ = ["freeze_when_ready"]

"""A card table's device faults and wagering blocks into its journal (controller/round/faults.py decides what is written).

Every entry goes through the ledger's single writer like any other, durably, but is only queued: nothing of the
round (a lock-out, a booking) waits for it. `submit_future` puts it on the writer's queue at once, in order, and
its outcome is looked at in the writer's thread; a refusal (a bug) is logged with its traceback, a storage failure
stops the process as it does for every entry. With the bound of controller/round/faults.py (one down and one up entry a
device or a block a minute at most), an entry ahead of a booking in the writer's queue costs that booking at most
one small batch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any

import structlog

from controller.ledger import Ledger, LedgerError
from controller.ledger.chain import utc_now
from controller.ledger.writer import Receipt
from controller.round.faults import FAULT_WATCH, HOLD, Entry, FaultWatch

log = structlog.get_logger("table")


class FaultJournal:
    def __init__(self, ledger: Ledger[Any], *, hold: timedelta | None = None,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._ledger = ledger
        self._clock = clock
        self.watch = FaultWatch(HOLD if hold is None else hold)
        self._epoch = ledger.startup.self_check.seq  # this run's: keys are never used again after a restart
        self._n = 0
        self._changed = asyncio.Event()

    def start(self) -> None:
        """The watch's start, durable before any device is heard (blocking: from a thread): whatever the journal
        holds open from before (a crash) ends here."""
        ((kind, body),) = self.watch.start(self._clock())
        self._ledger.submit(kind, body, f"{FAULT_WATCH}:{self._epoch}:0")

    def device(self, name: str, up: bool, *, kind: str, seats: Iterable[int], reason: str, model: str = "") -> None:
        due = self.watch.next_due()
        self._write(self.watch.device(name, up, self._clock(), kind=kind, seats=seats, reason=reason, model=model))
        self._poke(due)

    def blocks(self, blocks: Mapping[str, Iterable[str]]) -> None:
        """At every step of the round (cheap: a few causes compared)."""
        due = self.watch.next_due()
        self._write(self.watch.blocks(blocks, self._clock()))
        self._poke(due)

    def _poke(self, due: datetime | None) -> None:
        if self.watch.next_due() != due:  # an end held, or one dropped (a flap): run() sets its timer again
            self._changed.set()

    def stop(self) -> None:
        """A clean stop: queued before the ledger closes (which writes what was queued)."""
        self._write(self.watch.stop(self._clock()))

    async def run(self) -> None:
        """Journal each end once it has been held long enough."""
        while True:
            due = self.watch.next_due()
            wait = None if due is None else max((due - self._clock()).total_seconds(), 0.0)
            with contextlib.suppress(TimeoutError):  # the next end due, or a change first
                await asyncio.wait_for(self._changed.wait(), wait)
            self._changed.clear()
            self._write(self.watch.due(self._clock()))

    def _write(self, entries: list[Entry]) -> None:
        for kind, body in entries:
            self._n += 1
            try:
                self._ledger.submit_future(kind, body, f"{kind}:{self._epoch}:{self._n}").add_done_callback(_written)
            except LedgerError as e:  # closed or failed: the process is stopping
                log.error("fault not journaled", kind=kind, body=body, error=str(e))


def _written(done: Future[Receipt]) -> None:
    """In the writer's thread. A storage failure is the writer's to report (it stops the process)."""
    if done.cancelled():
        return
    e = done.exception()
    if e is not None and not isinstance(e, LedgerError):
        log.error("fault not journaled", error=f"{type(e).__name__}: {e}", exc_info=e)


__all__ = ["FaultJournal"]

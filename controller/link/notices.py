"""What a table tells its link authority beside its operations: never journaled, and moving no money.

The head of the table's own journal (its anchor) is kept off the box at the authority; the table's floor line is
what the floor view at the authority shows of it (its round, blocks, pending claims). Each goes only to an
authority that takes it: an older one would drop the message and count it as a bad schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import structlog

from controller.linkproto import schema
from controller.service.logs import LogBudget

log = structlog.get_logger("controller.link.notices")

FLOOR_EVERY_S = 1.0  # the table's floor line is looked at this often, and sent when it changed (display only)
FLOOR_REFRESH_S = 30.0  # and sent unchanged this often: an authority that restarted or missed one has it again
FLOOR_LOG_EVERY_S = 10.0  # one line in this time about a floor line not made

Publish = Callable[[schema.Message, int], Awaitable[bool]]  # (message, QoS) -> whether the broker took it


class Notices:
    """The table's anchor and floor line, sent through `publish` while `connected` to an authority that
    `accepts` them. `floor` is set by the daemon (None while the table is not running)."""

    def __init__(self, table: str, *, publish: Publish, connected: Callable[[], bool],
                 accepts: Callable[[str], bool], clock: Callable[[], float]) -> None:
        self.table, self.publish, self.connected, self.accepts, self.clock = table, publish, connected, accepts, clock
        self.anchor: schema.JournalAnchor | None = None  # the last anchor of the table's own journal, to send
        self.floor: Callable[[], schema.FloorLine | None] | None = None
        self._floor_sent: tuple[schema.FloorLine, float] | None = None  # the last sent (its `at` blank), when
        self._warned = LogBudget(1, FLOOR_LOG_EVERY_S)

    async def send_anchor(self) -> None:
        """The last anchor kept, to an authority that takes anchors (again at each connection's expect)."""
        if self.anchor is not None and self.accepts("anchor"):
            await self.publish(self.anchor, 1)

    async def send_floor(self) -> bool:
        """The table's floor line to an authority that takes it, if it changed since the last sent (or that is
        FLOOR_REFRESH_S old): QoS 0, not retained, never journaled; it moves no money. Whether one was sent."""
        if self.floor is None or not self.connected() or not self.accepts("floor"):
            return False
        try:
            line = self.floor()
        except Exception:  # a view of the table not made is no reason to stop its link
            if self._warned.take("floor") is not None:
                log.exception("the table's floor line not made", table=self.table)
            return False
        if line is None:
            return False
        now, shown = self.clock(), replace(line, at="")
        if self._floor_sent is not None and self._floor_sent[0] == shown and \
                now - self._floor_sent[1] < FLOOR_REFRESH_S:
            return False
        if not await self.publish(line, 0):
            return False
        self._floor_sent = (shown, now)
        return True

    def floor_again(self) -> None:
        """The next look sends the floor line even unchanged: an authority (re)started, or the table reconnected."""
        self._floor_sent = None

    async def floor_sender(self) -> None:
        """`send_floor` every FLOOR_EVERY_S, until cancelled."""
        while True:
            await asyncio.sleep(FLOOR_EVERY_S)
            await self.send_floor()


__all__ = ["FLOOR_EVERY_S", "FLOOR_LOG_EVERY_S", "FLOOR_REFRESH_S", "Notices", "Publish"]

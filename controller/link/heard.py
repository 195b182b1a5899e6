"""Whether a table hears its link authority now: the link up or down (58 Pa. Code 605a.8; New York 5321.18).

The link is *up* while the authority has been heard (a heartbeat of now, a meter's news, an answer) within the
link timeout on a connection that is up; down at once at the authority's `offline` status. While it is down the
table stops recognizing progressive wagers; it resumes by itself when the authority is heard again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from controller.link.rejections import Rejections
from controller.linkproto import schema

log = structlog.get_logger("controller.link.heard")

HEARTBEAT_WINDOW_S = 60.0  # how far a heartbeat's time may be from this box's clock


class AuthorityHeard:
    """When the authority was last heard and whether the link is up; `on_alive` is told each change. A heartbeat
    counts only when it is of now and not heard before (the broker may hold messages back and play them later)."""

    def __init__(self, table: str, timeout: float, rejections: Rejections, *, connected: Callable[[], bool],
                 clock: Callable[[], float], on_alive: Callable[[bool], None] = lambda up: None) -> None:
        self.table, self.timeout, self.rejections = table, timeout, rejections
        self.connected, self.clock, self.on_alive = connected, clock, on_alive
        self.wall: Callable[[], datetime] = lambda: datetime.now(UTC)  # heartbeats' times are compared with it
        self.alive = False
        self.last_heard: float | None = None
        self._heartbeats: dict[str, float] = {}  # the `at` of each heartbeat taken within the window

    def heard(self) -> None:
        """The authority was heard now: the link comes up if its connection is."""
        self.last_heard = self.clock()
        if not self.alive and self.connected():
            self._set_alive(True)

    def offline(self) -> None:
        """The authority's `offline` status (its MQTT will): the link is down now, not at the timeout."""
        self.last_heard = None
        self._set_alive(False)

    def heartbeat(self, msg: schema.Heartbeat) -> None:
        """The authority's heartbeat: heard, when it is fresh; rejected as played back when it is not."""
        if not self.fresh(msg.at):
            self.rejections.reject("played_back", "a heartbeat heard before, or not of now: not taken as the "
                                   "authority's", at=msg.at)
            return
        self.heard()

    def fresh(self, at: str) -> bool:
        """Whether a heartbeat sent `at` says the authority is there now: within HEARTBEAT_WINDOW_S of this box's
        clock (the boxes keep NTP time), and not one heard already (the broker may hold heartbeats back and play
        them later, for as long as that window at most)."""
        try:
            sent = datetime.fromisoformat(at)
        except ValueError:
            return False
        if sent.tzinfo is None or abs((self.wall() - sent).total_seconds()) > HEARTBEAT_WINDOW_S:
            return False
        horizon = self.wall().timestamp() - HEARTBEAT_WINDOW_S
        self._heartbeats = {a: t for a, t in self._heartbeats.items() if t >= horizon}
        if at in self._heartbeats:
            return False
        self._heartbeats[at] = sent.timestamp()
        return True

    def look(self) -> None:
        """The link goes down when its connection is, or when the authority is not heard within the timeout."""
        if self.alive and (not self.connected() or self.last_heard is None
                           or self.clock() - self.last_heard > self.timeout):
            self._set_alive(False)

    async def watch(self) -> None:
        """`look` several times a timeout (at least every second), until cancelled."""
        while True:
            await asyncio.sleep(min(self.timeout / 4, 1.0))
            self.look()

    def _set_alive(self, up: bool) -> None:
        if up == self.alive:
            return
        self.alive = up
        (log.info if up else log.error)("link authority " + ("heard again" if up else "not heard"),
                                        table=self.table, timeout=self.timeout)
        self.on_alive(up)


__all__ = ["HEARTBEAT_WINDOW_S", "AuthorityHeard"]

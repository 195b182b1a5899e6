"""The link is up while the authority is heard within the timeout on a connection that is up (58 Pa. Code 605a.8)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from controller.link.heard import HEARTBEAT_WINDOW_S, AuthorityHeard
from controller.link.rejections import Rejections
from controller.linkproto import schema

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


class Table:
    """An AuthorityHeard on a clock, a wall clock and a connection the test moves."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.ticks, self.now, self.connected = 0.0, NOW, True
        self.changes: list[bool] = []
        self.heard = AuthorityHeard("cs-01", timeout, Rejections("cs-01"), connected=lambda: self.connected,
                                    clock=lambda: self.ticks, on_alive=self.changes.append)
        self.heard.wall = lambda: self.now


def at(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def test_heard_brings_the_link_up_only_on_a_connection_that_is_up():
    t = Table()
    t.connected = False
    t.heard.heard()
    assert (t.heard.alive, t.heard.last_heard, t.changes) == (False, 0.0, [])
    t.connected, t.ticks = True, 0.5
    t.heard.heard()
    t.heard.heard()
    assert (t.heard.alive, t.heard.last_heard, t.changes) == (True, 0.5, [True])


def test_silence_past_the_timeout_or_a_lost_connection_brings_it_down():
    t = Table(timeout=2.0)
    t.heard.heard()
    t.ticks = 2.0
    t.heard.look()
    assert t.heard.alive  # within the timeout
    t.ticks = 2.1
    t.heard.look()
    assert not t.heard.alive and t.changes == [True, False]
    t.heard.heard()
    t.connected = False
    t.heard.look()
    assert t.changes == [True, False, True, False]


def test_the_authoritys_offline_status_brings_it_down_at_once():
    t = Table()
    t.heard.heard()
    t.heard.offline()
    assert (t.heard.alive, t.heard.last_heard, t.changes) == (False, None, [True, False])


def test_a_heartbeat_counts_once_and_only_when_it_is_of_now():
    t = Table()
    beat = schema.Heartbeat("link-1", at(NOW), 40)
    t.heard.heartbeat(beat)
    assert t.heard.alive
    t.heard.last_heard = None
    t.heard.heartbeat(beat)  # played back
    old = schema.Heartbeat("link-1", at(NOW - timedelta(seconds=HEARTBEAT_WINDOW_S + 0.5)), 39)
    t.heard.heartbeat(old)  # recorded long ago
    assert t.heard.last_heard is None and t.heard.rejections.counts == {"played_back": 2}
    assert not t.heard.fresh("2026-12-05T08:00:00")  # no zone: not comparable with this box's clock
    assert not t.heard.fresh("yesterday")
    t.now += timedelta(seconds=HEARTBEAT_WINDOW_S + 1)
    assert t.heard.fresh(at(t.now))
    assert not t.heard.fresh(at(NOW))  # forgotten, but out of the window


async def test_the_watch_brings_the_link_down_when_the_authority_falls_silent():
    t = Table(timeout=0.04)  # looks every 10 ms
    down = asyncio.Event()
    t.heard.on_alive = lambda up: None if up else down.set()
    t.heard.heard()
    t.ticks = 1.0
    watch = asyncio.create_task(t.heard.watch())
    try:
        await asyncio.wait_for(down.wait(), 5)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert not t.heard.alive

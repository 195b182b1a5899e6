"""The table's floor line and anchor go to an authority that takes them: never journaled, moving no money."""

from __future__ import annotations

from dataclasses import replace

from controller.link.notices import FLOOR_REFRESH_S, Notices
from controller.linkproto import schema

LINE = schema.FloorLine("cs-01", "2026-12-05T08:00:00Z", "cs-01-r1", "betting")
ANCHOR = schema.JournalAnchor("cs-01", 40, "ab" * 32, "2026-12-05T08:00:00Z")


class Link:
    """Notices over a broker the test answers for: what was published (message, QoS), and whether it is taken."""

    def __init__(self) -> None:
        self.published: list[tuple[schema.Message, int]] = []
        self.connected, self.takes, self.kinds, self.ticks = True, True, {"floor", "anchor"}, 0.0
        self.line: schema.FloorLine | None = LINE

        async def publish(msg: schema.Message, qos: int) -> bool:
            if self.takes:
                self.published.append((msg, qos))
            return self.takes

        self.notices = Notices("cs-01", publish=publish, connected=lambda: self.connected,
                               accepts=lambda kind: kind in self.kinds, clock=lambda: self.ticks)
        self.notices.floor = lambda: self.line


async def test_the_floor_line_is_sent_when_it_changed_and_refreshed_unchanged():
    link = Link()
    assert await link.notices.send_floor()
    link.line = replace(LINE, at="2026-12-05T08:00:01Z")  # only its time: unchanged
    link.ticks = FLOOR_REFRESH_S - 1
    assert not await link.notices.send_floor()
    link.ticks = FLOOR_REFRESH_S
    assert await link.notices.send_floor()  # unchanged, but an authority that missed it has it again
    link.line = replace(LINE, phase="dealing")
    assert await link.notices.send_floor()
    link.notices.floor_again()  # an authority (re)started
    assert await link.notices.send_floor()
    assert [(m.phase, m.at, qos) for m, qos in link.published] == [
        ("betting", LINE.at, 0), ("betting", "2026-12-05T08:00:01Z", 0), ("dealing", LINE.at, 0),
        ("dealing", LINE.at, 0)]


async def test_no_floor_line_to_an_authority_that_does_not_take_it_or_unreached():
    link = Link()
    link.kinds = {"anchor"}
    assert not await link.notices.send_floor()
    link.kinds, link.connected = {"floor"}, False
    assert not await link.notices.send_floor()
    link.connected, link.takes = True, False
    assert not await link.notices.send_floor()  # the broker did not take it: sent at the next look
    link.takes = True
    assert await link.notices.send_floor()
    link.line = None  # the table not running
    link.notices.floor_again()
    assert not await link.notices.send_floor()
    assert len(link.published) == 1


async def test_a_floor_line_not_made_does_not_stop_the_link():
    link = Link()

    def broken() -> schema.FloorLine:
        raise KeyError("round")

    link.notices.floor = broken
    assert not await link.notices.send_floor()
    assert link.published == []


async def test_the_anchor_goes_to_an_authority_that_takes_anchors():
    link = Link()
    await link.notices.send_anchor()  # none kept yet
    link.notices.anchor = ANCHOR
    link.kinds = {"floor"}
    await link.notices.send_anchor()
    assert link.published == []
    link.kinds = {"anchor"}
    await link.notices.send_anchor()
    assert link.published == [(ANCHOR, 1)]

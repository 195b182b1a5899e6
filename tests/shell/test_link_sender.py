"""The outbox is sent in order and again until the authority's answer to that very operation is journaled."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from controller.ledger import Ledger
from controller.link.outbox import OutboxReducer
from controller.link.rejections import Rejections
from controller.link.sender import RESEND_AFTER, LinkRefused, OutboxSender
from controller.link.verify import Verification
from controller.linkproto import schema
from controller.meter import ops

AT = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def book(rid: str) -> ops.BookContributions:
    return ops.BookContributions(rid, "cs-01", ((1, 100), (3, 500)), AT)


class Link:
    """An OutboxSender on a real link journal, over a broker the test answers for."""

    def __init__(self, tmp_path) -> None:
        self.published: list[schema.Op] = []
        self.takes, self.ticks, self.heard = True, 0.0, 0
        self.tasks: list[asyncio.Task[object]] = []

        async def publish(msg: schema.Message) -> bool:
            assert isinstance(msg, schema.Op)
            if self.takes:
                self.published.append(msg)
            return self.takes

        def spawn(coro: Coroutine[Any, Any, object], name: str) -> None:
            self.tasks.append(asyncio.ensure_future(coro))

        def heard() -> None:
            self.heard += 1

        self.rejections = Rejections("cs-01")
        self.sender = OutboxSender("cs-01", {"fchb": "fchb-link"}, Verification("cs-01", (), self.rejections),
                                   publish=publish, spawn=spawn, heard=heard, clock=lambda: self.ticks)
        self.sender.ledger = Ledger.open(tmp_path, OutboxReducer(), software_digest="test")

    def sent(self) -> list[int]:
        return [op.seq for op in self.published]

    def ack(self, seq: int, result: dict[str, Any], *, table: str = "cs-01") -> schema.Ack:
        op = self.sender.outbox.pending[seq].as_op(table)
        return schema.Ack(seq, 40 + seq, result, schema.op_digest(op))

    def close(self) -> None:
        assert self.sender.ledger is not None
        self.sender.ledger.close()


@pytest.fixture
def link(tmp_path):
    link = Link(tmp_path)
    yield link
    link.close()


async def test_an_operation_is_durable_then_sent_and_its_answer_journaled(link):
    seq = await link.sender.send(book("r1"), "fchb", "r1:book:fchb")
    await asyncio.gather(*link.tasks)
    assert seq == 1 and link.sent() == [1] and link.published[0].meter == "fchb-link"
    assert await link.sender.send(book("r1"), "fchb", "r1:book:fchb") == 1  # a retry keeps its number
    waiting = asyncio.ensure_future(link.sender.answer(seq, 5))
    await asyncio.sleep(0)  # it waits
    ack = link.ack(seq, {"contributed": "0.90"})
    await link.sender.take(ack)
    assert await waiting == {"contributed": "0.90"} and link.heard == 1
    assert link.sender.outbox.pending == {} and link.sender.outbox.acked == 1
    assert await link.sender.answer(seq, 5) == {"contributed": "0.90"}  # from the journal
    await link.sender.take(ack)  # a repeat: answered before, nothing happens
    assert (link.sender.outbox.acked, link.heard) == (1, 1)


async def test_a_refusal_is_final_and_journaled(link):
    seq = link.sender.journal(ops.CloseRound("r1", AT), "fchb", "r1:close:fchb")
    digest = schema.op_digest(link.sender.outbox.pending[seq].as_op("cs-01"))
    await link.sender.take(schema.Refused(seq, "round_id", "not open", digest))
    with pytest.raises(LinkRefused) as e:
        await link.sender.answer(seq, 5)
    assert (e.value.field, link.sender.outbox.refused) == ("round_id", 1)


async def test_an_answer_to_another_operation_is_not_taken_and_the_operation_is_sent_again(link):
    seq = link.sender.journal(book("r1"), "fchb", "r1:book:fchb")
    link.ticks = 1000.0
    await link.sender.resend()
    link.ticks = 1000.1
    await link.sender.take(link.ack(seq, {}, table="cs-02"))  # signed, but of cs-02's operation
    assert seq in link.sender.outbox.pending and link.rejections.counts == {"not_our_operation": 1}
    await link.sender.resend(due_only=True)
    assert link.sent() == [1, 1]  # at once, not RESEND_AFTER later
    with pytest.raises(TimeoutError):
        await link.sender.answer(seq, 0.01)
    assert seq in link.sender.outbox.pending  # still waiting: applied when the authority is reached


async def test_a_lock_acknowledged_for_another_claim_is_not_taken(link):
    lock = ops.LockPercentAward("r1", "cs-01", 3, "royal-flush", "100% of meter", Fraction(100), AT, "c-1")
    seq = link.sender.journal(lock, "fchb", "c-1:lock")
    await link.sender.take(link.ack(seq, {"claim": "c-2"}))
    assert seq in link.sender.outbox.pending and link.rejections.counts == {"not_our_operation": 1}
    await link.sender.take(link.ack(seq, {"claim": "c-1"}))
    assert link.sender.outbox.pending == {}


async def test_the_outbox_is_sent_in_order_and_only_what_is_due(link):
    for n in (1, 2, 3):
        link.sender.journal(book(f"r{n}"), "fchb", f"r{n}:book:fchb")
    link.takes = False
    await link.sender.resend()  # the broker takes none: stops at the first
    link.takes = True
    await link.sender.resend()
    assert link.sent() == [1, 2, 3]
    link.ticks = RESEND_AFTER - 0.1
    await link.sender.take(link.ack(2, {}))
    await link.sender.resend(due_only=True)  # sent too recently
    link.ticks = RESEND_AFTER + 0.1
    await link.sender.resend(due_only=True)
    assert link.sent() == [1, 2, 3, 1, 3]

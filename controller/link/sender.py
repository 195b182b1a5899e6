"""A table's outbox sent to its link authority in order, and the authority's answers taken.

An operation on a linked meter is journaled in the table's link journal (controller.link.outbox) before it is
sent, and sent again until the authority's answer is journaled as well, through any restart or outage: the
authority applies it once (controller.authority.authority). An answer is taken only for the operation it names
(controller.link.verify); it is journaled before whoever waits for it is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

import structlog

from controller.errors import InputError
from controller.ledger import Ledger
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import Found, lookup
from controller.link.outbox import LINK_ACK, LINK_SEND, Outbox, Sent, send_body
from controller.link.verify import Verification
from controller.linkproto import schema
from controller.meter import ops as meter_ops
from controller.meter.journal import LINK_REFUSED

log = structlog.get_logger("controller.link.sender")

RESEND_AFTER = 2.0  # seconds without an answer before the outbox is sent again

Spawn = Callable[[Coroutine[Any, Any, object], str], None]  # run a coroutine beside the link, named; not awaited


class LinkRefused(InputError):
    """The authority's rules refused an operation (final)."""


class OutboxSender:
    """The outbox's operations journaled, published (`publish`: whether the broker took it) in the order of their
    sequence numbers, sent again RESEND_AFTER without an answer and at each `expect`; each answer matched to its
    operation, journaled, and handed to whoever waits in `answer`. `ledger` is the link journal, set once opened."""

    def __init__(self, table: str, linked: dict[str, str], verification: Verification, *,
                 publish: Callable[[schema.Message], Awaitable[bool]], spawn: Spawn, heard: Callable[[], None],
                 clock: Callable[[], float]) -> None:
        self.table, self.linked, self.verification = table, linked, verification
        self.publish, self.spawn, self.heard, self.clock = publish, spawn, heard, clock
        self.ledger: Ledger[Outbox] | None = None
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._kick = asyncio.Event()
        self._last_sent: dict[int, float] = {}  # seq -> when it was last handed to the broker

    @property
    def outbox(self) -> Outbox:
        """The outbox as journaled (the journal is open)."""
        assert self.ledger is not None
        return self.ledger.state

    # --- journaling and sending --------------------------------------------------------------------------

    async def send(self, op: meter_ops.Op, meter: str, key: str, approval: dict[str, str] | None = None) -> int:
        """Journal meter operation `op` on the table's linked meter `meter` and send it. Returns its sequence
        number once it is durable in the outbox; `answer(seq)` waits for the authority's outcome. A retry
        with the same key returns the same sequence number."""
        assert self.ledger is not None
        try:
            receipt = await self.ledger.submit_async(LINK_SEND, send_body(meter, self.linked[meter], op, approval), key)
            seq = int(receipt.result["seq"])
        except KeyConflict:
            seq = await asyncio.to_thread(self._first_journaled, key)
        sent = self.ledger.state.pending.get(seq)
        if sent is not None:
            self._publish_soon(sent)
        return seq

    def journal(self, op: meter_ops.Op, meter: str, key: str) -> int:
        """Journal meter operation `op` on the table's linked meter `meter` without sending it; blocking (at
        start-up, before the link runs, or in a thread). Returns its sequence number once it is durable in the
        outbox: it is sent with every pending operation once the link runs (the resender, a new connection's
        hello). A retry with the same key returns the same sequence number."""
        assert self.ledger is not None
        try:
            return int(self.ledger.submit(LINK_SEND, send_body(meter, self.linked[meter], op), key).result["seq"])
        except KeyConflict:
            return self._first_journaled(key)

    def _first_journaled(self, key: str) -> int:
        """The sequence number of the operation journaled under `key`: a retry made at another moment (another
        time in its body) conflicts with it, and the operation first journaled is the one sent."""
        return int(self._journaled(key).result["seq"])

    def _publish_soon(self, sent: Sent) -> None:
        """Publish a journaled operation without waiting for the broker: `send` returns once the operation is
        durable, not after the broker's acknowledgement, which a broker that hangs withholds for PUBLISH_TIMEOUT
        (every lock-out and settlement would wait that long). A publish that fails is sent again by the
        resender, or on the next connection (hello, expect)."""
        self.spawn(self._publish_op(sent), f"link-send:{sent.seq}")

    async def _publish_op(self, sent: Sent) -> bool:
        ok = await self.publish(sent.as_op(self.table))
        if ok:
            self._last_sent[sent.seq] = self.clock()
        return ok

    async def resend(self, *, due_only: bool = False) -> None:
        """What the authority has not answered, in order: it applies what it has not, and answers again what
        it has. `due_only`: only operations sent more than RESEND_AFTER ago (a slow authority is not flooded
        with repeats of what it is still working on). Stops at the first the broker does not take."""
        now = self.clock()
        for seq in sorted(self.outbox.pending):
            sent = self.outbox.pending.get(seq)
            if sent is None or (due_only and now - self._last_sent.get(seq, 0.0) < RESEND_AFTER):
                continue
            if not await self._publish_op(sent):
                return
        for seq in [s for s in self._last_sent if s not in self.outbox.pending]:
            del self._last_sent[seq]

    async def resender(self) -> None:
        """Resend what is due every RESEND_AFTER, or at once when kicked (an answer taken or not taken), until
        cancelled."""
        while True:
            try:
                async with asyncio.timeout(RESEND_AFTER):
                    await self._kick.wait()
            except TimeoutError:
                pass
            self._kick.clear()
            if self.outbox.pending:
                await self.resend(due_only=True)

    # --- answers ----------------------------------------------------------------------------------------

    async def answer(self, seq: int, timeout: float) -> dict[str, Any]:
        """The authority's result of operation `seq`; raises LinkRefused, or TimeoutError (it stays in the outbox
        and is applied when the authority is reached: the caller may wait again)."""
        fut = self._answers.get(seq)
        if fut is None:
            if seq not in self.outbox.pending:
                return await asyncio.to_thread(self._journaled_answer, seq)
            fut = self._answers[seq] = asyncio.get_running_loop().create_future()
        async with asyncio.timeout(timeout):
            return await asyncio.shield(fut)

    async def take(self, msg: schema.Ack | schema.Refused) -> None:
        """The authority's answer to a pending operation: taken when it names that operation (and, for a lock,
        its claim), journaled, and handed to whoever waits; one for another operation has that operation sent
        again. A repeat of an answer taken is ignored."""
        sent = self.outbox.pending.get(msg.seq)
        if sent is None:
            return  # answered before (a repeat)
        if not self.verification.same_operation(msg, sent):
            self._last_sent.pop(msg.seq, None)  # asked again at once
            self._kick.set()
            return
        self.heard()
        if not self.verification.same_claim(msg, sent):
            return
        assert self.ledger is not None
        if isinstance(msg, schema.Ack):
            await self.ledger.submit_async(LINK_ACK, {"seq": msg.seq, "entry": msg.entry, "result": msg.result},
                                           f"answer:{msg.seq}")
            outcome: dict[str, Any] | LinkRefused = msg.result
        else:
            await self.ledger.submit_async(LINK_REFUSED, {"seq": msg.seq, "field": msg.field,
                                                          "message": msg.message}, f"answer:{msg.seq}")
            log.error("link authority refused an operation", seq=msg.seq, field=msg.field, error=msg.message)
            outcome = LinkRefused(msg.field, msg.message)
        fut = self._answers.pop(msg.seq, None)
        if fut is not None and not fut.done():
            if isinstance(outcome, Exception):
                fut.set_exception(outcome)
                fut.exception()  # retrieved: nobody may be waiting
            else:
                fut.set_result(outcome)
        self._kick.set()

    def _journaled(self, key: str) -> Found:
        """The entry journaled under `key` in the link journal (blocking: from a thread)."""
        assert self.ledger is not None
        found = lookup(self.ledger.db_path, key)
        if found is None:
            raise LookupError(f"nothing is journaled under {key!r}")
        return found

    def _journaled_answer(self, seq: int) -> dict[str, Any]:
        found = self._journaled(f"answer:{seq}")
        if found.kind == LINK_REFUSED:
            raise LinkRefused(found.body["field"], found.body["message"])
        return cast(dict[str, Any], found.body["result"])  # journaled JSON: an answer's result is an object


__all__ = ["RESEND_AFTER", "LinkRefused", "OutboxSender", "Spawn"]

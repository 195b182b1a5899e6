"""Each table's operations applied once, in the order the table numbered them (docs/link-protocol.md).

A table numbers its operations 1, 2, 3, ... (its durable outbox, controller.link.outbox). Each is applied strictly
in that order under the idempotency key ``link:<table>:<seq>`` and answered only after its COMMIT (the journal's
writer commits what is submitted meanwhile together). A repeat of an applied operation is answered with the
journaled outcome and applies nothing; one ahead of the next expected is answered with `Expect` so the table
resends from there; a refusal by the rules is journaled too, so that the table's sequence moves on exactly once."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping

from controller.authority import rules
from controller.authority.hit_rate import HitRate
from controller.authority.limited_log import LimitedLog, log
from controller.authority.metrics import AuthorityMetrics
from controller.authority.watch import TableWatch
from controller.errors import InputError
from controller.ledger import Ledger, Receipt
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import JournalReader
from controller.linkproto import approval, schema
from controller.meter.journal import LINK_REFUSED, Meters

Reply = Callable[[str, schema.Message], Awaitable[None]]  # (table, answer): sent, never awaited for its delivery


class OperationSequence:
    """Applies each table's operations once in its order, and answers its hellos with what it expects next.
    `next_seq`: table -> the number of its next operation (from the journal at start). What an applied operation
    changed goes to `published` (its meter, and its win for the signs); a payment asks `anchor_payment` for an
    anchor of the journal's head."""

    def __init__(self, ledger: Ledger[Meters], keys: JournalReader, next_seq: Mapping[str, int], *,
                 approvers: Mapping[str, bytes], metrics: AuthorityMetrics, notes: LimitedLog, watch: TableWatch,
                 reply: Reply, reference: Callable[[str], schema.JournalAnchor | None],
                 published: Callable[[str, schema.Win | None], None], anchor_payment: Callable[[], None]) -> None:
        self.ledger, self.keys, self.next_seq = ledger, keys, dict(next_seq)
        self.approvers, self.metrics, self.notes, self.watch = approvers, metrics, notes, watch
        self.reply, self.reference, self.published, self.anchor_payment = reply, reference, published, anchor_payment
        self.hellos: dict[str, str] = {}  # table -> the nonce of its last hello, named in each `expect`
        self.hit_rate = HitRate()

    def expect(self, table: str) -> schema.Expect:
        """What the authority expects of `table` next: its next number, the kinds it takes, its journal's reference
        anchor, whose approvals it verifies, and the nonce of the table's last hello."""
        return schema.Expect(self.next_seq.get(table, 1), schema.ANNOUNCED, self.reference(table),
                             frozenset(self.approvers), self.hellos.get(table, ""))

    async def hello(self, msg: schema.Hello) -> None:
        """A table (re)connected: answered with `expect`; a table behind the authority is an alert."""
        self.hellos[msg.table] = msg.nonce
        expected = self.next_seq.get(msg.table, 1)
        if msg.next_seq < expected:  # the table lost journal entries the authority has applied
            self.metrics.anomalies.labels(msg.table, "table behind").inc()
            self.notes.say(f"behind:{msg.table}", "table is behind the authority: its link journal lost entries (or "
                           "someone with its credentials says so)", table=msg.table, table_next=msg.next_seq,
                           authority_next=expected)
        await self.reply(msg.table, self.expect(msg.table))

    async def apply(self, op: schema.Op) -> None:
        """One operation of a table: applied if it is the next expected, answered from the journal if it was."""
        digest = schema.op_digest(op)  # what every answer to it names
        expected = self.next_seq.get(op.table, 1)
        if op.seq > expected:
            self.metrics.dropped.labels("ahead").inc()
            await self.reply(op.table, self.expect(op.table))
        elif op.seq < expected:
            await self._again(op, digest)
        else:
            await self._next(op, digest)

    async def _again(self, op: schema.Op, digest: str) -> None:
        """An operation already journaled under its number: the same one is answered as then; another one sent first
        under it (someone with the table's credentials) leaves the table's refused, and is an alert."""
        done = await self.keys.alookup(op.key)
        if done is None:  # cannot happen with an intact journal: keys are applied in order
            self.notes.drop("stale", table=op.table, seq=op.seq)
            return
        if rules.same_operation(op, done, digest):
            self.metrics.applied.labels(op.table, "repeat").inc()
            await self.reply(op.table, rules.answer(op, done, digest))
            return
        self.metrics.anomalies.labels(op.table, "sequence taken").inc()
        self.notes.say(f"seq-taken:{op.table}", "a table's operation number was used by another operation: the "
                       "table's is refused", table=op.table, seq=op.seq, kind=op.kind, journaled=done.kind)
        await self.reply(op.table, schema.Refused(
            op.seq, "seq", f"operation {op.seq} of table {op.table} is another operation in the authority's journal "
                           f"({done.kind}): not applied (someone else sent it with this table's credentials)", digest))

    async def _next(self, op: schema.Op, digest: str) -> None:
        """The next operation of the table: journaled, applied or refused, and answered after its commit."""
        body = {"meter": op.meter, **op.body}
        if op.kind == "lock-percent-award":  # the lock's nonce is the authority's, never a table's
            body["nonce"] = secrets.token_hex(16)
        seat, shares = rules.hit_of(op, self.ledger.state)
        t0 = time.perf_counter()
        answer: schema.Ack | schema.Refused
        try:
            meters = self.ledger.state
            problem = rules.foreign(op, meters) or rules.not_a_later_share(op, meters) or self._unapproved(op)
            if problem is not None:
                raise InputError(*problem)
            if op.approval is not None:
                body["approval"] = op.approval  # journaled with the payment, for the audit
            receipt = await self.ledger.submit_async(op.kind, body, op.key)
        except KeyConflict:  # the key is new when op.seq is the next expected: a journal out of step
            self.notes.drop("stale", table=op.table, seq=op.seq)
            return
        except InputError as e:  # a rules error is final: journal it so the sequence moves on once
            answer = await self._refuse(op, e, digest)
        else:
            answer = schema.Ack(op.seq, receipt.seq, receipt.result, digest)
            self._applied(op, receipt, seat, shares)
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        self.next_seq[op.table] = op.seq + 1
        self.watch.answered(op.table, op.seq, "refused" if isinstance(answer, schema.Refused) else "applied")
        await self.reply(op.table, answer)

    async def _refuse(self, op: schema.Op, e: InputError, digest: str) -> schema.Refused:
        if rules.is_alarm(op, e.field):  # an honest table never sends it
            self.metrics.anomalies.labels(op.table, "award refused").inc()
            self.notes.say(f"award-refused:{op.table}", "an award refused: the table asked for what its rounds do not "
                           "hold", table=op.table, seq=op.seq, kind=op.kind, error=str(e))
        refused = {"table": op.table, "seq": op.seq, "field": e.field, "message": e.problem, "op": digest}
        await self.ledger.submit_async(LINK_REFUSED, refused, op.key)
        self.metrics.applied.labels(op.table, "refused").inc()
        self.notes.say(f"refused:{op.table}", "table operation refused", level="warning", table=op.table, seq=op.seq,
                       kind=op.kind, error=str(e))
        return schema.Refused(op.seq, e.field, e.problem, digest)

    def _applied(self, op: schema.Op, receipt: Receipt, seat: int, shares: int) -> None:
        self.metrics.applied.labels(op.table, "applied").inc()
        won = rules.win(op, receipt.seq, receipt.result, seat, shares) if op.kind in rules.WIN_KINDS else None
        self.published(op.meter, won)
        if op.kind in approval.APPROVED_KINDS:
            self.anchor_payment()
        self.hit_rate.saw(op, self.metrics, log)

    def _unapproved(self, op: schema.Op) -> rules.Problem | None:
        """A payment without an approval this authority can verify (controller.linkproto.approval), or None."""
        terms = rules.approved_terms(op, self.ledger.state)
        if terms is None:
            return None
        problem = approval.check(self.approvers, op.kind, op.table, op.meter, terms, op.approval)
        if problem is None:
            return None
        self.metrics.anomalies.labels(op.table, "unapproved payment").inc()
        self.notes.say(f"unapproved:{op.table}", "a payment without a verified approval refused", table=op.table,
                       seq=op.seq, kind=op.kind, error=problem)
        return "approval", problem


__all__ = ["OperationSequence", "Reply"]

"""Each table's operations applied once in its order (controller/authority/sequence.py), on a real journal of the
authority's: applied and answered after the commit, a repeat answered from the journal and applied never again, an
operation ahead answered with what is expected, a number taken by another operation refused, a rules refusal
journaled so the sequence moves on once, a payment applied only with an approval the authority verifies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.authority.sequence import OperationSequence
from controller.authority.watch import TableWatch
from controller.ledger.reader import JournalReader
from controller.linkproto import schema
from controller.meter import ops
from controller.meter.journal import LINK_REFUSED

from authority_journal import TABLES, booking, journal, lock, op, parts, sample
from linkrig import AT, METER, approval_keys, signed


class Sequence:
    """An OperationSequence on a journal in `directory`, with what it answered, published and anchored."""

    def __init__(self, led: Any, keys: JournalReader, next_seq: dict[str, int] | None = None) -> None:
        self.led = led
        self.metrics, notes = parts()
        self.watch = TableWatch(TABLES, self.metrics, notes)
        self.answers: list[tuple[str, schema.Message]] = []
        self.published: list[tuple[str, schema.Win | None]] = []
        self.anchored = 0
        self.reference = {"cs-01": schema.JournalAnchor("cs-01", 40, "ab" * 32, "2026-11-30T01:02:03Z")}

        async def reply(table: str, msg: schema.Message) -> None:
            self.answers.append((table, msg))

        def anchor() -> None:
            self.anchored += 1

        self.seq = OperationSequence(led, keys, next_seq or {}, approvers=approval_keys(), metrics=self.metrics,
                                     notes=notes, watch=self.watch, reply=reply, reference=self.reference.get,
                                     published=lambda m, w: self.published.append((m, w)), anchor_payment=anchor)

    async def send(self, sent: schema.Op) -> schema.Message:
        self.answers.clear()
        await self.seq.apply(sent)
        [(table, answer)] = self.answers
        assert table == sent.table
        return answer


@contextlib.contextmanager
def sequence(tmp_path: Path) -> Iterator[Sequence]:
    with journal(tmp_path) as led:
        keys = JournalReader(led.db_path)
        try:
            yield Sequence(led, keys)
        finally:
            keys.close()


async def test_an_operation_is_applied_once_whatever_is_sent_again(tmp_path):
    with sequence(tmp_path) as s:
        first = op("cs-01", 1, booking("cs-01", 1))
        ack = await s.send(first)
        assert isinstance(ack, schema.Ack) and ack.op == schema.op_digest(first) and ack.seq == 1
        head, amount = s.led.head.seq, s.led.state[METER].current_cents
        assert await s.send(first) == ack  # the same answer, from the journal
        assert (s.led.head.seq, s.led.state[METER].current_cents) == (head, amount)  # nothing applied again
        assert s.seq.next_seq == {"cs-01": 2} and s.published == [(METER, None)]
        assert sample(s.metrics, "progressive_link_operations_total", table="cs-01", outcome="repeat") == 1
        assert s.watch.liveness.tables["cs-01"].ack_seq == 1


async def test_an_operation_ahead_is_answered_with_the_number_expected_and_applies_nothing(tmp_path):
    with sequence(tmp_path) as s:
        head = s.led.head.seq
        expect = await s.send(op("cs-01", 3, booking("cs-01", 3)))
        assert isinstance(expect, schema.Expect) and expect.next_seq == 1 and s.led.head.seq == head
        assert expect.anchor == s.reference["cs-01"] and expect.approvers == frozenset(approval_keys())
        assert sample(s.metrics, "progressive_link_messages_dropped_total", reason="ahead") == 1


async def test_a_number_taken_by_another_operation_refuses_the_tables_own(tmp_path):
    with sequence(tmp_path) as s:
        await s.send(op("cs-01", 1, booking("cs-01", 1)))
        own = op("cs-01", 1, booking("cs-01", 2))
        refused = await s.send(own)
        assert isinstance(refused, schema.Refused) and refused.field == "seq" and refused.op == schema.op_digest(own)
        assert "is another operation in the authority's journal (book-contributions)" in refused.message
        assert sample(s.metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="sequence taken") == 1
        assert "cs-01-r2" not in s.led.state[METER].open_rounds


async def test_a_refusal_is_journaled_once_and_the_sequence_moves_on(tmp_path):
    with sequence(tmp_path) as s:
        planted = op("fcp-02", 1, booking("cs-01", 1))  # another table's round
        refused = await s.send(planted)
        assert isinstance(refused, schema.Refused) and refused.field == "body.table"
        done = await s.seq.keys.alookup(planted.key)
        assert done is not None and done.kind == LINK_REFUSED and done.body["op"] == refused.op
        assert await s.send(planted) == refused  # answered again as refused, journaled once
        assert s.seq.next_seq == {"fcp-02": 2} and s.published == []
        assert sample(s.metrics, "progressive_link_anomalies_total", table="fcp-02", anomaly="award refused") == 1
        assert sample(s.metrics, "progressive_link_operations_total", table="fcp-02", outcome="refused") == 1
        assert s.watch.liveness.tables["fcp-02"].ack_outcome == "refused"


async def test_a_lock_takes_the_authoritys_nonce_and_shows_its_win(tmp_path):
    with sequence(tmp_path) as s:
        await s.send(op("cs-01", 1, booking("cs-01", 1)))
        taken = op("cs-01", 2, lock("cs-01", 1, seat=2))
        ack = await s.send(taken)
        held = s.led.state[METER].locked["cs-01-r1-c1:0"]
        assert len(held.nonce) == 32 and ack.result["nonce"] == held.nonce  # never the table's
        meter, win = s.published[-1]
        assert meter == METER and win is not None and (win.seat, win.state, win.entry) == (2, "locked", ack.entry)
        assert win.cents == held.amount_cents and s.anchored == 0


async def test_a_payment_is_applied_only_with_an_approval_the_authority_verifies(tmp_path):
    with sequence(tmp_path) as s:
        await s.send(op("cs-01", 1, booking("cs-01", 1)))
        taken = lock("cs-01", 1)
        locked = (await s.send(op("cs-01", 2, taken))).result
        pay = ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT)
        refused = await s.send(op("cs-01", 3, pay))  # no approval
        assert isinstance(refused, schema.Refused) and refused.field == "approval"
        assert sample(s.metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="unapproved payment") == 1
        assert "cs-01-r1-c1:0" in s.led.state[METER].locked and s.anchored == 0
        paid = await s.send(op("cs-01", 4, pay, signed(pay, "cs-01", locked=locked, lock=taken)))
        assert isinstance(paid, schema.Ack), paid
        assert not s.led.state[METER].locked and s.anchored == 1  # a payment anchors the journal's head
        assert s.published[-1][1] is not None and s.published[-1][1].state == "paid"
        assert (await s.seq.keys.alookup(op("cs-01", 4, pay).key)).body["approval"]["by"] == "floor-1"


@pytest.mark.parametrize("table_next, behind", [(1, True), (5, False)])
async def test_a_hello_is_answered_with_what_is_expected_and_a_table_behind_is_an_alert(tmp_path, table_next, behind):
    with journal(tmp_path) as led:
        keys = JournalReader(led.db_path)
        try:
            s = Sequence(led, keys, {"cs-01": 5})
            await s.seq.hello(schema.Hello("cs-01", table_next, "n0nce"))
            [(table, expect)] = s.answers
            assert table == "cs-01" and isinstance(expect, schema.Expect)
            assert (expect.next_seq, expect.hello, expect.kinds) == (5, "n0nce", schema.ANNOUNCED)
            alerts = sample(s.metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="table behind")
            assert alerts == (1 if behind else 0)
        finally:
            keys.close()

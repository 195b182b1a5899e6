"""What the tables send the authority, sorted as it comes off the broker (controller/authority/inbox.py): what is not
a configured table's own message of this version dropped and counted by its reason; a goodbye and a floor line
heard and never queued; each table's operations, hellos and anchors handed on in its order by a worker of its own,
which an exception does not end."""

from __future__ import annotations

import asyncio
import json

from controller.authority.inbox import QUEUE_PER_TABLE, Inbox
from controller.authority.watch import TableWatch
from controller.linkproto import schema

from authority_journal import TABLES, booking, op, parts, sample
from linkrig import PREFIX

TOPICS = schema.Topics(PREFIX)


def stop_workers() -> None:
    """The tables' workers wait for ever: the test ends them."""
    for task in asyncio.all_tasks():
        if task.get_name().startswith("table:"):
            task.cancel()


class Handed:
    """An inbox whose handlers record what reached them, in order; `fail` raises for that operation number."""

    def __init__(self, tg: asyncio.TaskGroup, fail: int | None = None) -> None:
        self.metrics, notes = parts()
        self.watch = TableWatch(TABLES, self.metrics, notes)
        self.got: list[schema.Message] = []
        self.fail = fail
        self.arrived = asyncio.Event()

        async def on_op(msg: schema.Op) -> None:
            if msg.seq == self.fail:
                raise RuntimeError("the journal said no")
            self.got.append(msg)
            self.arrived.set()

        async def on_other(msg: schema.Message) -> None:
            self.got.append(msg)
            self.arrived.set()

        self.inbox = Inbox(TABLES, TOPICS, self.metrics, notes, self.watch, tg, on_op=on_op, on_hello=on_other,
                           on_anchor=on_other)

    def send(self, msg: schema.Message, table: str | None = None) -> None:
        self.inbox.on_message(TOPICS.up(table or msg.table), schema.encode(msg))

    async def until(self, n: int) -> None:
        while len(self.got) < n:
            self.arrived.clear()
            await self.arrived.wait()

    def dropped(self, reason: str) -> float:
        return sample(self.metrics, "progressive_link_messages_dropped_total", reason=reason)


async def test_what_is_not_a_configured_tables_own_message_is_dropped_by_its_reason():
    async with asyncio.TaskGroup() as tg:
        h = Handed(tg)
        hello = schema.Hello("cs-01", 1, "00" * 16)
        h.inbox.on_message(f"{PREFIX}/tables/cs-01/down", schema.encode(hello))
        h.send(schema.Hello("lir-03", 1, "00" * 16))
        h.inbox.on_message(TOPICS.up("cs-01"), b"{not json")
        h.inbox.on_message(TOPICS.up("cs-01"), json.dumps({**json.loads(schema.encode(hello)), "v": 1}).encode())
        h.send(schema.Expect(1), "cs-01")  # the authority's message, on a table's topic
        h.send(hello, "fcp-02")  # cs-01's hello on fcp-02's topic
        assert [h.dropped(r) for r in ("bad_topic", "unknown_table", "bad_schema", "old_version", "wrong_table")] == \
            [1, 1, 2, 1, 1]
        assert h.inbox.queues == {} and not h.watch.liveness.tables["fcp-02"].online


async def test_each_tables_messages_reach_their_handlers_in_its_order():
    async with asyncio.TaskGroup() as tg:
        h = Handed(tg)
        sent = [schema.Hello("cs-01", 1, "00" * 16), op("cs-01", 1, booking("cs-01", 1)),
                schema.JournalAnchor("cs-01", 9, "ab" * 32, "2026-11-30T01:02:03Z"),
                op("cs-01", 2, booking("cs-01", 2)),
                op("fcp-02", 1, booking("fcp-02", 1))]
        for msg in sent:
            h.send(msg)
        await h.until(len(sent))
        assert h.got == sent and set(h.inbox.queues) == {"cs-01", "fcp-02"}
        assert h.watch.liveness.tables["cs-01"].online and h.watch.liveness.tables["cs-01"].heard == "op"
        stop_workers()


async def test_a_goodbye_and_a_floor_line_are_heard_and_never_queued():
    async with asyncio.TaskGroup() as tg:
        h = Handed(tg)
        h.send(schema.Hello("cs-01", 1, "00" * 16))
        h.send(schema.FloorLine("cs-01", "2026-11-30T01:02:03Z", "cs-01-r1", "betting"))
        h.send(schema.TableOffline("cs-01", "stopped"))
        await h.until(1)
        assert not h.watch.liveness.tables["cs-01"].online and h.watch.floor["cs-01"][0].round_id == "cs-01-r1"
        assert h.inbox.queues["cs-01"].empty() and len(h.got) == 1
        stop_workers()


async def test_a_message_that_fails_is_an_alert_and_the_next_is_still_taken():
    async with asyncio.TaskGroup() as tg:
        h = Handed(tg, fail=1)
        h.send(op("cs-01", 1, booking("cs-01", 1)))
        h.send(op("cs-01", 2, booking("cs-01", 2)))
        await h.until(1)
        assert [m.seq for m in h.got] == [2]
        assert sample(h.metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="message not applied") == 1
        stop_workers()


async def test_a_table_that_sends_faster_than_its_worker_takes_loses_what_is_beyond_its_queue():
    async with asyncio.TaskGroup() as tg:
        h = Handed(tg)
        for seq in range(1, QUEUE_PER_TABLE + 11):  # all before its worker runs once
            h.send(op("cs-01", seq, booking("cs-01", seq)))
        h.send(op("fcp-02", 1, booking("fcp-02", 1)))  # another table's queue is its own
        assert h.dropped("queue_full") == 10
        await h.until(QUEUE_PER_TABLE + 1)
        assert [m.seq for m in h.got if m.table == "cs-01"] == list(range(1, QUEUE_PER_TABLE + 1))
        stop_workers()

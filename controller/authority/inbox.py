"""What the tables send the authority, sorted as it comes off the broker: dropped and counted when it is not a
configured table's own message of this protocol's version; else heard (liveness, floor lines) and queued to the
table's own worker, which hands its operations, hellos and anchors on one after another in the table's order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from controller.authority.limited_log import LimitedLog
from controller.authority.metrics import AuthorityMetrics
from controller.authority.watch import TableWatch
from controller.errors import InputError
from controller.linkproto import schema

QUEUE_PER_TABLE = 256  # operations waiting per table; beyond it they are dropped and the table resends
TableMessage = schema.Op | schema.Hello | schema.JournalAnchor  # what a table's worker hands on
FROM_TABLES = (schema.Op, schema.Hello, schema.JournalAnchor, schema.TableOffline, schema.FloorLine)


class Inbox:
    """The authority's subscription to every table's `up` topic (`on_message`, MQTT's callback) and one worker task
    a table, started at its first message in `tasks`. A message that fails in a worker is an alert, never the end
    of the worker."""

    def __init__(self, tables: tuple[str, ...], topics: schema.Topics, metrics: AuthorityMetrics, notes: LimitedLog,
                 watch: TableWatch, tasks: asyncio.TaskGroup, *, on_op: Callable[[schema.Op], Awaitable[None]],
                 on_hello: Callable[[schema.Hello], Awaitable[None]],
                 on_anchor: Callable[[schema.JournalAnchor], Awaitable[None]]) -> None:
        self.tables, self.topics, self.metrics, self.notes, self.watch = tables, topics, metrics, notes, watch
        self.tasks = tasks
        self.on_op, self.on_hello, self.on_anchor = on_op, on_hello, on_anchor
        self.queues: dict[str, asyncio.Queue[TableMessage]] = {}

    def on_message(self, topic: str, payload: bytes) -> None:
        """One message off the broker, sorted without waiting: the table's worker does the waiting."""
        parts = self.topics.parse(topic)
        if len(parts) != 3 or parts[0] != "tables" or parts[2] != "up":
            self.notes.drop("bad_topic", topic=topic)
            return
        table = parts[1]
        if table not in self.tables:
            self.notes.drop("unknown_table", table=table)
            return
        try:
            msg = schema.decode(topic, payload)
        except InputError as e:
            if e.field == "v":
                self._older_version(table, str(e))
            else:
                self.notes.drop("bad_schema", table=table, error=str(e))
            return
        if not isinstance(msg, FROM_TABLES):
            self.notes.drop("bad_schema", table=table, error=f"{type(msg).__name__} is not a table's message")
            return
        if msg.table != table:
            self.notes.drop("wrong_table", table=table, claims=msg.table)
            return
        self.watch.heard(table, msg)
        if isinstance(msg, schema.TableOffline):
            return
        if isinstance(msg, schema.FloorLine):
            self.watch.floor_line(msg)
            return
        self._queue(table, msg)

    def _queue(self, table: str, msg: TableMessage) -> None:
        q = self.queues.get(table)
        if q is None:
            q = self.queues[table] = asyncio.Queue(QUEUE_PER_TABLE)
            self.tasks.create_task(self._worker(table, q), name=f"table:{table}")
        try:
            q.put_nowait(msg)
        except asyncio.QueueFull:
            self.notes.drop("queue_full", table=table)

    def _older_version(self, table: str, error: str) -> None:
        """A message of a table of another version of the protocol: dropped and counted, never answered. A version 1
        table cannot check what this authority says, so nothing of it is applied; nor is any of it refused, since a
        refusal is final and its bookings would be lost: they wait in its outbox, and are sent again once the table
        is upgraded (docs/link-protocol.md, "Version changes"). The table itself drops every message of this
        authority naming the version, and shows the link OFFLINE."""
        self.notes.drop("old_version", table=table, error=error)

    async def _worker(self, table: str, q: asyncio.Queue[TableMessage]) -> None:
        """One table's messages, strictly one after another in the table's order."""
        while True:
            msg = await q.get()
            try:
                if isinstance(msg, schema.Hello):
                    await self.on_hello(msg)
                elif isinstance(msg, schema.JournalAnchor):
                    await self.on_anchor(msg)
                else:
                    await self.on_op(msg)
            except Exception:  # noqa: BLE001 - an alert and a line; the table's next message is still taken
                self.metrics.anomalies.labels(table, "message not applied").inc()
                self.notes.exception(f"not-applied:{table}", "table message not applied", table=table,
                                     seq=getattr(msg, "seq", None))


__all__ = ["FROM_TABLES", "QUEUE_PER_TABLE", "Inbox", "TableMessage"]

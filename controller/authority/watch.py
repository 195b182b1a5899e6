"""Each linked table as the authority last heard it: online or OFFLINE, its last operation answered, and its floor
line for the floor view (display only, never money: docs/security.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from controller.authority.limited_log import LimitedLog
from controller.authority.metrics import AuthorityMetrics
from controller.linkproto import schema
from controller.linkproto.liveness import Liveness

FLOOR_MIN_S = 0.5  # a table's floor lines taken at most this often (it sends one a second at most)
MESSAGE_TYPE = {schema.Op: "op", schema.Hello: "hello", schema.JournalAnchor: "anchor", schema.FloorLine: "floor"}
Heard = schema.Op | schema.Hello | schema.JournalAnchor | schema.FloorLine | schema.TableOffline


class TableWatch:
    """The tables' liveness (controller.linkproto.liveness) and their metrics, and each table's last floor line.
    `clock` is the wall's (what the status shows), `tick` a monotonic one (the floor lines' rate)."""

    def __init__(self, tables: tuple[str, ...], metrics: AuthorityMetrics, notes: LimitedLog, *,
                 clock: Callable[[], float] = time.time, tick: Callable[[], float] = time.monotonic) -> None:
        self.metrics, self.notes, self.clock, self.tick = metrics, notes, clock, tick
        self.liveness = Liveness(tables, clock())
        # table -> its last floor line and when it came (clock()): its round, blocks and claims on the floor view
        self.floor: dict[str, tuple[schema.FloorLine, float]] = {}
        self._floor_at: dict[str, float] = {}  # table -> when its last floor line was taken (tick())
        for t in tables:
            metrics.table_online.labels(t).set(0)

    def resumed(self, next_seq: Mapping[str, int]) -> None:
        """The last operation of each table the journal holds as answered (when is in the journal, not here)."""
        for t, n in next_seq.items():
            if t in self.liveness.tables:
                self.liveness.answered(t, n - 1, "journaled", None)
                self.metrics.table_ack_seq.labels(t).set(n - 1)

    def heard(self, table: str, msg: Heard) -> None:
        """Online at any message of the table's own, OFFLINE at its goodbye or its will (only its own topic can
        say either: the broker's ACL and the wrong_table check)."""
        now = self.clock()
        if isinstance(msg, schema.TableOffline):
            if self.liveness.offline(table, msg.reason, now):  # a line a table and interval: a flapping table
                self.notes.say(f"offline:{table}", "linked table offline",  # cannot fill the log
                               level="info" if msg.reason == "stopped" else "warning", table=table, reason=msg.reason)
            online = 0
        else:
            if self.liveness.heard(table, MESSAGE_TYPE[type(msg)], now):
                self.notes.say(f"online:{table}", "linked table online", level="info", table=table)
            online = 1
        self.metrics.table_online.labels(table).set(online)
        self.metrics.table_heard.labels(table).set(now)

    def answered(self, table: str, seq: int, outcome: str) -> None:
        """The table's operation `seq` journaled and answered ("applied" or "refused")."""
        now = self.clock()
        self.liveness.answered(table, seq, outcome, now)
        self.metrics.table_ack.labels(table).set(now)
        self.metrics.table_ack_seq.labels(table).set(seq)

    def floor_line(self, line: schema.FloorLine) -> None:
        """A table's floor line, kept for the floor view (nothing else reads it); at most one per FLOOR_MIN_S a
        table: more is dropped and counted (an honest table sends one a second at most)."""
        tick = self.tick()
        if tick - self._floor_at.get(line.table, -FLOOR_MIN_S) < FLOOR_MIN_S:
            self.notes.drop("floor_too_often", table=line.table)
            return
        self._floor_at[line.table] = tick
        self.floor[line.table] = (line, self.clock())


__all__ = ["FLOOR_MIN_S", "Heard", "TableWatch"]

"""Everything the authority says on the link, each message sealed with its signature (controller.linkproto.signing):
the tables act on nothing else. A table's answers, the meters' values and wins, the heartbeat, its own status."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from controller.authority.metrics import AuthorityMetrics
from controller.ledger import Ledger
from controller.ledger.chain import format_time, utc_now
from controller.link.mqtt import PUBLISH_TIMEOUT, LinkDown, MqttLink
from controller.linkproto import schema, signing
from controller.meter.journal import Meters

METER_INTERVAL = 0.05  # seconds between two passes of meter values, by default (the authority's `meter_interval`)


class Publisher:
    """The authority's signed messages, published while connected and never queued here: a table resends what it
    has not heard about, and a meter's next value replaces the last. Meter values and wins are coalesced: under load
    one retained message per meter per `meter_interval` (every table gets each one: on hundreds of tables a longer
    interval spares the broker and the tables, docs/link-at-scale.md)."""

    def __init__(self, authority: str, ledger: Ledger[Meters], signer: signing.Signer, topics: schema.Topics,
                 metrics: AuthorityMetrics, tasks: asyncio.TaskGroup, *, heartbeat: float,
                 meter_interval: float = METER_INTERVAL) -> None:
        self.authority, self.ledger, self.signer, self.topics = authority, ledger, signer, topics
        self.metrics, self.tasks, self.heartbeat, self.meter_interval = metrics, tasks, heartbeat, meter_interval
        self.mqtt: MqttLink | None = None
        self._dirty: set[str] = set()
        self._dirty_event = asyncio.Event()
        self._wins: list[schema.Win] = []

    async def reply(self, table: str, msg: schema.Message) -> None:
        """An answer to `table`, sent without holding up its next operation: the answer is journaled, and a lost
        one is answered again when the table resends."""
        coro = self.publish(self.topics.down(table), msg)
        try:
            self.tasks.create_task(coro, name=f"answer:{table}")
        except RuntimeError:  # stopping
            coro.close()

    async def publish(self, topic: str, msg: schema.Message, *, qos: int = 1, retain: bool = False) -> bool:
        """Published if connected (True); not, and the broker marked gone, otherwise."""
        if self.mqtt is None:
            return False
        try:
            await self.mqtt.publish(topic, self.signer.seal(topic, schema.encode(msg)), qos=qos, retain=retain,
                                    timeout=PUBLISH_TIMEOUT)
            return True
        except (LinkDown, TimeoutError):
            self.metrics.connected.set(0)
            return False

    def changed(self, meters: Iterable[str], win: schema.Win | None = None) -> None:
        """Meters whose value changed, and a win to show: published in the next pass."""
        self._dirty.update(meters)
        if win is not None:
            self._wins.append(win)
        self._dirty_event.set()

    async def connected(self) -> None:
        """At each connection to the broker: the authority online (retained), every meter's value again."""
        self.metrics.connected.set(1)
        await self.publish(self.topics.status, schema.Status(self.authority, "online"), retain=True)
        self.changed(self.ledger.state)

    async def publish_changes(self) -> None:
        """One pass: the wins in their order, then each changed meter's value (retained)."""
        wins, self._wins = self._wins, []
        for w in wins:
            await self.publish(self.topics.win(w.meter), w)
        dirty, self._dirty = self._dirty, set()
        for mid in sorted(dirty):
            if mid in self.ledger.state:
                await self.publish(self.topics.meter(mid), self.meter_value(mid), retain=True)

    async def run_meters(self) -> None:
        """The passes, at most one per `meter_interval` (a rate limit: what changes meanwhile goes in the next)."""
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            await self.publish_changes()
            await asyncio.sleep(self.meter_interval)

    def meter_value(self, mid: str) -> schema.MeterValue:
        """A meter's value as published, its gauge set."""
        s = self.ledger.state[mid]
        self.metrics.meter_cents.labels(mid).set(s.current_cents)
        locked = tuple((c, lk.amount_cents) for c, lk in sorted(s.locked.items()))
        return schema.MeterValue(mid, s.current_cents, self.ledger.head.seq, format_time(utc_now()),
                                 s.params.reset_cents, locked)

    async def run_heartbeat(self) -> None:
        """The authority's heartbeat, every `heartbeat` seconds: its journal's head and every meter's amount."""
        while True:
            hb = schema.Heartbeat(self.authority, format_time(utc_now()), self.ledger.head.seq,
                                  {m: s.current_cents for m, s in self.ledger.state.items()})
            await self.publish(self.topics.heartbeat, hb, qos=0)
            await asyncio.sleep(self.heartbeat)


__all__ = ["METER_INTERVAL", "Publisher"]

"""The link authority: owns linked meters in its own ledger and applies the tables' operations exactly once.

Each table numbers its operations 1, 2, 3, ... (its durable outbox, controller.link.outbox). The
authority applies a table's operations strictly in that order, each under the idempotency key
``link:<table>:<seq>``, and acknowledges one only after its COMMIT. A repeat of an applied operation is
answered with the journaled outcome and applies nothing; an operation ahead of the next expected one is
answered with `Expect` so the table resends from there; a refusal by the rules is journaled too, so that
the table's sequence moves on exactly once. Messages from tables not in the configuration, with a bad
schema, or whose payload names another table than the topic are dropped and counted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import InputError
from ..ledger import Ledger, software_digest
from ..ledger.errors import KeyConflict
from ..ledger.chain import format_time, utc_now
from ..meter_ledger import LINK_REFUSED, MetersReducer, configure_meter
from ..money import format_cents, parse_cents
from . import schema
from ..ledger.reader import Found, JournalReader
from .journal_keys import last_link_seqs
from .mqtt import LinkDown, MqttLink, MqttSettings

log = structlog.get_logger("controller.link.authority")

METER_INTERVAL = 0.05  # seconds between two passes of meter values: a sign needs no more, every table gets each
QUEUE_PER_TABLE = 256  # operations waiting per table; beyond it they are dropped and the table resends
PUBLISH_TIMEOUT = 5.0
WIN_KINDS = {"lock-percent-award": "locked", "pay-locked-award": "paid", "release-locked-award": "released"}
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
DROPPED = ("unknown_table", "bad_schema", "wrong_table", "stale", "ahead", "queue_full", "bad_topic")


class AuthorityMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.registry = r
        self.applied = Counter("progressive_link_operations_total", "Table operations journaled, by outcome",
                               ["table", "outcome"], registry=r)
        self.dropped = Counter("progressive_link_messages_dropped_total", "Messages dropped, by reason",
                               ["reason"], registry=r)
        self.meter_cents = Gauge("progressive_meter_amount_cents", "Amount of the linked meter, in cents",
                                 ["meter"], registry=r)
        self.commit_latency = Histogram("progressive_ledger_commit_seconds",
                                        "From submitting an operation to its durable receipt",
                                        buckets=_SECONDS, registry=r)
        self.connected = Gauge("progressive_link_broker_connected", "1 while connected to the broker",
                               registry=r)
        for reason in DROPPED:
            self.dropped.labels(reason)


class LinkAuthority:
    def __init__(self, cfg: Any, *, settings: MqttSettings | None = None,
                 registry: CollectorRegistry | None = None,
                 ledger_options: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        self.topics = schema.Topics(cfg.mqtt.topic_prefix)
        self.settings = settings if settings is not None else MqttSettings.from_config(cfg.mqtt)
        offline = schema.encode(schema.Status(cfg.authority, "offline"))
        self.settings = _with_will(self.settings, (self.topics.status, offline, True))
        self.metrics = AuthorityMetrics(registry)
        self.ledger: Ledger | None = None
        self.keys: JournalReader | None = None
        self.next_seq: dict[str, int] = {}
        self.mqtt: MqttLink | None = None
        self.ready = asyncio.Event()
        self._queues: dict[str, asyncio.Queue] = {}
        self._dirty: set[str] = set()
        self._dirty_event = asyncio.Event()
        self._wins: list[schema.Win] = []
        self._ledger_options = ledger_options or {}
        self._tg: asyncio.TaskGroup | None = None

    # --- start-up ------------------------------------------------------------------------------------

    def _open(self) -> None:
        led = Ledger.open(self.cfg.state_dir, MetersReducer(), software_digest=software_digest(),
                          **self._ledger_options)
        try:
            for m in self.cfg.meters.values():
                try:  # a change is refused while any linked table has a round open or a lock pending
                    done = configure_meter(led, m.params, self.cfg.authority,
                                           f"configuration {self.cfg.source.name}", utc_now())
                except InputError as e:
                    log.error("linked meter parameters not changed", meter=m.id, error=str(e))
                    continue
                if done == "defined":
                    log.info("linked meter defined", meter=m.id, reset=format_cents(m.params.reset_cents))
                elif done == "changed":
                    log.warning("linked meter parameters changed by the configuration", meter=m.id)
            self.keys = JournalReader(led.db_path)
            self.next_seq = {t: n + 1 for t, n in last_link_seqs(self.keys).items()}
        except BaseException:
            led.close()
            raise
        self.ledger = led

    async def run(self) -> None:
        await asyncio.to_thread(self._open)
        assert self.ledger is not None
        for mid in self.ledger.state:
            self._dirty.add(mid)
            self.metrics.meter_cents.labels(mid).set(self.ledger.state[mid].current_cents)
        self.mqtt = MqttLink(self.settings, (self.topics.all_up,), ignore_retained=True)
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self.mqtt.run(self._on_message, self._on_connect), name="mqtt")
                tg.create_task(self._publish_meters(), name="meters")
                tg.create_task(self._heartbeat(), name="heartbeat")
                self.ready.set()
                log.info("link authority ready", authority=self.cfg.authority, meters=sorted(self.ledger.state),
                         tables=list(self.cfg.tables))
        finally:
            led, self.ledger = self.ledger, None
            if self.keys is not None:
                self.keys.close()
            if led is not None:  # not in a thread: a second cancellation must not leave it half closed
                led.close()

    async def _on_connect(self) -> None:
        self.metrics.connected.set(1)
        await self._publish(self.topics.status, schema.Status(self.cfg.authority, "online"), retain=True)
        self._dirty.update(self.ledger.state if self.ledger else ())
        self._dirty_event.set()

    # --- messages in ---------------------------------------------------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        parts = self.topics.parse(topic)
        if len(parts) != 3 or parts[0] != "tables" or parts[2] != "up":
            self._drop("bad_topic", topic=topic)
            return
        table = parts[1]
        if table not in self.cfg.tables:
            self._drop("unknown_table", table=table)
            return
        try:
            msg = schema.decode(topic, payload)
        except InputError as e:
            self._drop("bad_schema", table=table, error=str(e))
            return
        if not isinstance(msg, schema.Op | schema.Hello):
            self._drop("bad_schema", table=table, error=f"{type(msg).__name__} is not a table's message")
            return
        if msg.table != table:
            self._drop("wrong_table", table=table, claims=msg.table)
            return
        q = self._queues.get(table)
        if q is None:
            q = self._queues[table] = asyncio.Queue(QUEUE_PER_TABLE)
            assert self._tg is not None
            self._tg.create_task(self._table_worker(table, q), name=f"table:{table}")
        try:
            q.put_nowait(msg)
        except asyncio.QueueFull:
            self._drop("queue_full", table=table)

    def _drop(self, reason: str, **detail: Any) -> None:
        self.metrics.dropped.labels(reason).inc()
        log.warning("link message dropped", reason=reason, **detail)

    async def _table_worker(self, table: str, q: asyncio.Queue) -> None:
        """One table's operations, strictly one after another in the table's order."""
        while True:
            msg = await q.get()
            if isinstance(msg, schema.Hello):
                expected = self.next_seq.get(table, 1)
                if msg.next_seq < expected:  # the table lost journal entries the authority has applied
                    log.error("table is behind the authority: its link journal lost entries", table=table,
                              table_next=msg.next_seq, authority_next=expected)
                await self._reply(table, schema.Expect(expected, schema.TABLE_OPS))
                continue
            try:
                await self._apply(msg)
            except Exception:  # noqa: BLE001 - one bad operation must not stop the link; the table resends it
                log.exception("table operation not applied", table=table, seq=msg.seq)

    async def _apply(self, op: schema.Op) -> None:
        assert self.ledger is not None and self.keys is not None
        expected = self.next_seq.get(op.table, 1)
        if op.seq > expected:
            self.metrics.dropped.labels("ahead").inc()
            await self._reply(op.table, schema.Expect(expected, schema.TABLE_OPS))
            return
        if op.seq < expected:
            done = await self.keys.alookup(op.key)
            if done is None:  # cannot happen with an intact journal: keys are applied in order
                self._drop("stale", table=op.table, seq=op.seq)
                return
            self.metrics.applied.labels(op.table, "repeat").inc()
            await self._reply(op.table, _answer(op.seq, done))
            return
        body = {"meter": op.meter, **op.body}
        seat, shares = self._hit_of(op)
        t0 = time.perf_counter()
        answer: Any
        try:
            problem = _foreign(op) or _not_a_later_share(op, self.ledger.state)
            if problem is not None:
                raise InputError(*problem)
            receipt = await self.ledger.submit_async(op.kind, body, op.key)
        except KeyConflict:  # the key is new when op.seq is the next expected: a journal out of step
            self._drop("stale", table=op.table, seq=op.seq)
            return
        except InputError as e:  # a rules error is final: journal it so the sequence moves on once
            refused = {"table": op.table, "seq": op.seq, "field": e.field, "message": e.problem}
            receipt = await self.ledger.submit_async(LINK_REFUSED, refused, op.key)
            answer = schema.Refused(op.seq, e.field, e.problem)
            self.metrics.applied.labels(op.table, "refused").inc()
            log.warning("table operation refused", table=op.table, seq=op.seq, kind=op.kind, error=str(e))
        else:
            answer = schema.Ack(op.seq, receipt.seq, receipt.result)
            self.metrics.applied.labels(op.table, "applied").inc()
            self._dirty.add(op.meter)
            self._dirty_event.set()
            if op.kind in WIN_KINDS:
                self._wins.append(_win(op, receipt.seq, receipt.result, seat, shares))
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        self.next_seq[op.table] = op.seq + 1
        await self._reply(op.table, answer)

    def _hit_of(self, op: schema.Op) -> tuple[int, int]:
        """(seat, shares) of a hit: in a lock's body, or in the lock that a payment or release settles."""
        if isinstance(op.body.get("seat"), int):
            shares = op.body.get("shares", 1)
            return op.body["seat"], shares if isinstance(shares, int) else 1
        meter = self.ledger.state.get(op.meter) if self.ledger else None
        claim = op.body.get("claim")
        lock = meter.locked.get(claim) if meter is not None and isinstance(claim, str) else None
        return (lock.seat, lock.shares) if lock is not None else (0, 1)

    # --- messages out --------------------------------------------------------------------------------

    async def _reply(self, table: str, msg: Any) -> None:
        """Sent without holding up the table's next operation: the answer is journaled, and a lost one is
        answered again when the table resends."""
        coro = self._publish(self.topics.down(table), msg)
        try:
            assert self._tg is not None
            self._tg.create_task(coro, name=f"answer:{table}")
        except RuntimeError:  # stopping
            coro.close()

    async def _publish(self, topic: str, msg: Any, *, qos: int = 1, retain: bool = False) -> bool:
        """Publish if connected; a table resends what it has not heard about, so nothing is queued here."""
        if self.mqtt is None:
            return False
        try:
            await self.mqtt.publish(topic, schema.encode(msg), qos=qos, retain=retain, timeout=PUBLISH_TIMEOUT)
            return True
        except (LinkDown, TimeoutError):
            self.metrics.connected.set(0)
            return False

    async def _publish_meters(self) -> None:
        """Retained meter values and wins, coalesced: under load one message per meter per pass."""
        while True:
            await self._dirty_event.wait()
            self._dirty_event.clear()
            wins, self._wins = self._wins, []
            for w in wins:
                await self._publish(self.topics.win(w.meter), w)
            dirty, self._dirty = self._dirty, set()
            for mid in sorted(dirty):
                if self.ledger is None or mid not in self.ledger.state:
                    continue
                await self._publish(self.topics.meter(mid), self.meter_value(mid), retain=True)
            await asyncio.sleep(METER_INTERVAL)  # a rate limit: what changes meanwhile goes in the next pass

    def meter_value(self, mid: str) -> schema.MeterValue:
        assert self.ledger is not None
        s = self.ledger.state[mid]
        self.metrics.meter_cents.labels(mid).set(s.current_cents)
        locked = tuple((c, lk.amount_cents) for c, lk in sorted(s.locked.items()))
        return schema.MeterValue(mid, s.current_cents, self.ledger.head.seq, format_time(utc_now()),
                                 s.params.reset_cents, locked)

    async def _heartbeat(self) -> None:
        while True:
            if self.ledger is not None:
                hb = schema.Heartbeat(self.cfg.authority, format_time(utc_now()), self.ledger.head.seq,
                                      {m: s.current_cents for m, s in self.ledger.state.items()})
                await self._publish(self.topics.heartbeat, hb, qos=0)
            await asyncio.sleep(self.cfg.heartbeat)


def _foreign(op: schema.Op) -> tuple[str, str] | None:
    """A table may only move its own rounds: the round ids it books are its own (``<table>-r<n>``)."""
    if "table" in op.body and op.body["table"] != op.table:
        return "body.table", f"is {op.body['table']!r}: table {op.table} may only send its own operations"
    rid = op.body.get("round_id")
    if isinstance(rid, str) and not rid.startswith(f"{op.table}-r"):
        return "body.round_id", f"{rid!r} is not a round of table {op.table}"
    return None


def _not_a_later_share(op: schema.Op, meters: Any) -> tuple[str, str] | None:
    """A table takes a percentage of a linked meter only by locking it (§ 605a.8: the amount is fixed at the
    authority at the hit). `pay-percent-award` is accepted for a later share of an award on the dealer's hand
    only (§ 639a.12(e)(2)): one whose first share a lock took from the meter and paid, so that nothing more is
    taken from the meter."""
    if op.kind != "pay-percent-award":
        return None
    b = op.body
    rid, seat, shares = b.get("round_id"), b.get("seat"), b.get("shares")
    meter = meters.get(op.meter)
    booking = meter.open_rounds.get(rid) if meter is not None and isinstance(rid, str) else None
    if booking is not None and isinstance(seat, int) and isinstance(shares, int) and shares > 1:
        on_dealer = {booking.wagers[i][0] for i in booking.on_dealer if i < len(booking.wagers)}
        if (seat in on_dealer or not booking.on_dealer) and any(
                (sh.hand, sh.award, sh.shares) == (b.get("hand"), b.get("award"), shares) for sh in booking.shared):
            return None
    return "kind", ("a table takes a percentage of a linked meter by locking it (lock-percent-award, then "
                    "pay-locked-award); pay-percent-award pays only a later share of a shared award whose first "
                    "share was paid, to a seat that wagered on the dealer's hand")


def _answer(seq: int, done: Found) -> Any:
    if done.kind == LINK_REFUSED:
        return schema.Refused(seq, str(done.body.get("field", "")), str(done.body.get("message", "")))
    return schema.Ack(seq, done.seq, done.result if isinstance(done.result, dict) else {})


def _win(op: schema.Op, entry: int, result: dict[str, Any], seat: int, shares: int) -> schema.Win:
    """A hit for every sign of the link; an award shared on the dealer's hand (§ 639a.12(e)(2)) as the signs of
    its own table show it: the dealer's position (seat 0) and the whole award."""
    try:
        cents = parse_cents(result.get("amount", "0"), "amount")
    except InputError:
        cents = 0
    if shares > 1:
        seat, cents = 0, cents * shares
    return schema.Win(op.meter, op.table, seat, cents, str(op.body.get("claim", "")), WIN_KINDS[op.kind], entry)


def _with_will(settings: MqttSettings, will: tuple[str, bytes, bool]) -> MqttSettings:
    return replace(settings, will=will)

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
import hashlib
import heapq
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from structlog.typing import FilteringBoundLogger

from controller import __version__
from controller.errors import InputError
from controller.ledger import Ledger, software_digest
from controller.ledger.chain import format_time, utc_now
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import Found, JournalReader
from controller.link.journal_keys import last_link_seqs
from controller.link.mqtt import PUBLISH_TIMEOUT, LinkDown, MqttLink, MqttSettings
from controller.linkproto import anchors, approval, schema, signing
from controller.linkproto.liveness import Liveness, floor_json, table_json
from controller.meter.journal import (
    LINK_REFUSED,
    TABLE_ANCHOR,
    TABLE_ANCHOR_CLEARED,
    Meters,
    configure_meter,
)
from controller.money import format_cents, parse_cents
from controller.round.journal import JournalReducer
from controller.service.anchoring import Anchoring, AnchorMetrics
from controller.service.auth import AuthMetrics, SupervisorCheck
from controller.service.control import PEER, NotAvailable, UnknownOp
from controller.service.logs import LogBudget
from controller.service.operations import AUTHORITY_OPERATIONS, OPERATIONS, check_arguments
from controller.service.reports import MeterSeries
from controller.service.views import meter_json

if TYPE_CHECKING:
    from controller.config.authority import AuthorityConfig

log = structlog.get_logger("controller.authority.authority")

METER_INTERVAL = 0.05  # seconds between two passes of meter values: a sign needs no more, every table gets each
QUEUE_PER_TABLE = 256  # operations waiting per table; beyond it they are dropped and the table resends
WIN_KINDS = {"lock-percent-award": "locked", "pay-locked-award": "paid", "release-locked-award": "released"}
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
DROPPED = ("unknown_table", "bad_schema", "wrong_table", "stale", "ahead", "queue_full", "bad_topic", "anchor_too_often",
           "old_version", "floor_too_often")
FLOOR_MIN_S = 0.5  # a table's floor lines taken at most this often (it sends one a second at most)
OPEN_ROUNDS_SHOWN = 16  # a table's open rounds in `status`: its latest (the floor view shows the last)
TableMessage = schema.Op | schema.Hello | schema.JournalAnchor  # what a table sends the authority
_MESSAGE_TYPE = {schema.Op: "op", schema.Hello: "hello", schema.JournalAnchor: "anchor", schema.FloorLine: "floor"}


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
        self.hits = Counter("progressive_link_hits_total", "Percentage-of-meter awards locked, by table", ["table"],
                            registry=r)
        self.anomalies = Counter("progressive_link_anomalies_total",
                                 "What a table asked that an honest table does not: a payment without a verified "
                                 "approval, an award on a round it did not book, hits far beyond the odds",
                                 ["table", "anomaly"], registry=r)
        self.table_online = Gauge("progressive_link_table_online",
                                  "1 while the table is connected to the broker as the authority last heard (its hello "
                                  "or operations: 1; its goodbye or its MQTT will: 0; not heard since the start: 0)",
                                  ["table"], registry=r)
        self.table_heard = Gauge("progressive_link_table_last_heard_timestamp_seconds",
                                 "When the authority last heard a message of the table", ["table"], registry=r)
        self.table_ack = Gauge("progressive_link_table_last_ack_timestamp_seconds",
                               "When the authority last journaled and answered an operation of the table", ["table"],
                               registry=r)
        self.table_ack_seq = Gauge("progressive_link_table_last_ack_seq",
                                   "The number of the table's last operation the authority journaled and answered",
                                   ["table"], registry=r)
        self.anchors = AnchorMetrics(r)
        self.anchor_suspect = Gauge("progressive_link_table_anchor_suspect",
                                    "1 while an anchor of the table's journal further ahead than it could have grown "
                                    "is kept aside as planted, until a supervisor clears it", ["table"], registry=r)
        self.auth = AuthMetrics(r)  # the console's logins, checked as at a table
        ProcessCollector(registry=r)  # process_start_time_seconds: a restart shows as its change
        for reason in DROPPED:
            self.dropped.labels(reason)


class LinkAuthority:
    def __init__(self, cfg: AuthorityConfig, *, settings: MqttSettings | None = None,
                 registry: CollectorRegistry | None = None,
                 ledger_options: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        self.topics = schema.Topics(cfg.mqtt.topic_prefix)
        self.settings = settings if settings is not None else MqttSettings.from_config(cfg.mqtt)
        # Everything the authority publishes is signed (controller.linkproto.signing): tables act on nothing else.
        if cfg.signing_key is None:
            raise InputError("signing_key_file", "is required: the tables act only on what the authority signs")
        self.signer = signing.Signer(cfg.signing_key)
        offline = self.signer.seal(self.topics.status, schema.encode(schema.Status(cfg.authority, "offline")))
        self.settings = _with_will(self.settings, (self.topics.status, offline, True))
        self.metrics = AuthorityMetrics(registry)
        self.ledger: Ledger[Meters] | None = None
        self.keys: JournalReader | None = None
        self.next_seq: dict[str, int] = {}
        self.anchors: dict[str, schema.JournalAnchor] = {}  # table -> the reference anchor of its journal (held)
        self.held: dict[str, anchors.TableAnchors] = {}  # table -> its reference and the anchor kept aside
        self._hellos: dict[str, str] = {}  # table -> the nonce of its last hello, named in each `expect`
        # Who approves payments from the linked meters (name -> approval key): none listed, none is paid.
        self.approvers: Mapping[str, bytes] = cfg.approvers
        # Who may log in to the authority's console (made in `run`): none listed, nobody can.
        self.supervisors: SupervisorCheck | None = None
        self.anchoring: Anchoring | None = None
        self._odds = _HitRate()
        self.series = MeterSeries(cfg.state_dir, cfg.report)
        self.mqtt: MqttLink | None = None
        self.ready = asyncio.Event()
        self._queues: dict[str, asyncio.Queue[TableMessage]] = {}
        self._dirty: set[str] = set()
        self._dirty_event = asyncio.Event()
        self._wins: list[schema.Win] = []
        self._ledger_options = ledger_options or {}
        self._tg: asyncio.TaskGroup | None = None
        self._budget = LogBudget(1, LOG_EVERY_S)  # _log_limited: one line per kind and table in LOG_EVERY_S
        self._anchored_at: dict[str, float] = {}  # table -> when its last anchor was journaled (monotonic)
        self.liveness = Liveness(cfg.tables, time.time())  # each table online or OFFLINE, its last answer
        # table -> its last floor line and when it came (time.time()): what the floor view shows of its round, blocks
        # and claims; display only, never money (docs/security.md)
        self.floor: dict[str, tuple[schema.FloorLine, float]] = {}
        self._floor_at: dict[str, float] = {}  # table -> when its last floor line was taken (monotonic)
        self._started = time.monotonic()
        for t in cfg.tables:
            self.metrics.table_online.labels(t).set(0)

    # --- start-up ------------------------------------------------------------------------------------

    def _open(self) -> None:
        led = Ledger.open(self.cfg.state_dir, JournalReducer(), software_digest=software_digest(),
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
            for t, n in self.next_seq.items():
                if t in self.liveness.tables:  # answered before this start: when is in the journal, not here
                    self.liveness.answered(t, n - 1, "journaled", None)
                    self.metrics.table_ack_seq.labels(t).set(n - 1)
            self._held_anchors(self.keys.entries(ANCHOR_PREFIX))
        except BaseException:
            led.close()
            raise
        self.ledger = led

    async def run(self) -> None:
        await asyncio.to_thread(self._open)
        assert self.ledger is not None
        a = self.cfg.anchor
        self.anchoring = Anchoring(self.ledger, a.file_for(self.cfg.state_dir), a.key_file, table=self.cfg.authority,
                                   metrics=self.metrics.anchors, syslog=a.syslog)
        try:
            await asyncio.to_thread(self.anchoring.check)  # a journal rolled back or rewritten: refused here
            await self.anchoring.anchor("start")
        except BaseException:
            self.ledger.close()
            self.ledger = None
            if self.keys is not None:
                self.keys.close()
            raise
        for mid in self.ledger.state:
            self._dirty.add(mid)
            self.metrics.meter_cents.labels(mid).set(self.ledger.state[mid].current_cents)
        self.mqtt = MqttLink(self.settings, (self.topics.all_up,), ignore_retained=True)
        if self.cfg.supervisors:  # their secrets checked off the loop, one at a time, throttled, as at a table
            self.supervisors = SupervisorCheck(self.cfg.supervisors, self.metrics.auth)
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self.mqtt.run(self._on_message, self._on_connect), name="mqtt")
                tg.create_task(self._publish_meters(), name="meters")
                tg.create_task(self._heartbeat(), name="heartbeat")
                tg.create_task(self.anchoring.run(), name="anchor")
                self.ready.set()
                log.info("link authority ready", authority=self.cfg.authority, meters=sorted(self.ledger.state),
                         tables=list(self.cfg.tables))
        finally:
            led, self.ledger = self.ledger, None
            if self.keys is not None:
                self.keys.close()
            if led is not None:  # not in a thread: a second cancellation must not leave it half closed
                led.close()
                if led.failed is None:
                    try:
                        self.anchoring.anchor_now("close")  # the final head, checkpoint included
                    except OSError as e:
                        log.error("journal anchor not written at close", error=e.strerror or str(e))
            self.anchoring.close()
            if self.supervisors is not None:
                self.supervisors.close()
                self.supervisors = None


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
            if e.field == "v":
                self._older_version(table, str(e))
            else:
                self._drop("bad_schema", table=table, error=str(e))
            return
        if not isinstance(msg, (schema.Op, schema.Hello, schema.JournalAnchor, schema.TableOffline, schema.FloorLine)):
            self._drop("bad_schema", table=table, error=f"{type(msg).__name__} is not a table's message")
            return
        if msg.table != table:
            self._drop("wrong_table", table=table, claims=msg.table)
            return
        self._liveness(table, msg)
        if isinstance(msg, schema.TableOffline):
            return
        if isinstance(msg, schema.FloorLine):
            self._floor_line(msg)
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

    def _floor_line(self, line: schema.FloorLine) -> None:
        """A table's floor line, kept for the floor view (nothing else reads it); at most one per FLOOR_MIN_S a
        table: more is dropped and counted (an honest table sends one a second at most)."""
        tick = time.monotonic()
        if tick - self._floor_at.get(line.table, -FLOOR_MIN_S) < FLOOR_MIN_S:
            self._drop("floor_too_often", table=line.table)
            return
        self._floor_at[line.table] = tick
        self.floor[line.table] = (line, time.time())

    def _older_version(self, table: str, error: str) -> None:
        """A message of a table of another version of the protocol: dropped and counted, never answered. A version 1
        table cannot check what this authority says, so nothing of it is applied; nor is any of it refused, since a
        refusal is final and its bookings would be lost: they wait in its outbox, and are sent again once the table
        is upgraded (docs/link-protocol.md, "Version changes"). The table itself drops every message of this
        authority naming the version, and shows the link OFFLINE."""
        self._drop("old_version", table=table, error=error)

    def _expect(self, table: str) -> schema.Expect:
        return schema.Expect(self.next_seq.get(table, 1), schema.ANNOUNCED, self.anchors.get(table),
                             frozenset(self.approvers), self._hellos.get(table, ""))

    def _liveness(self, table: str, msg: schema.TableOffline | schema.FloorLine | TableMessage) -> None:
        """Online at any message of the table's own, OFFLINE at its goodbye or its will (only its own topic can
        say either: the broker's ACL and the wrong_table check)."""
        now = time.time()
        if isinstance(msg, schema.TableOffline):
            if self.liveness.offline(table, msg.reason, now):  # a line a table and interval: a flapping table
                self._log_limited(f"offline:{table}", "linked table offline",  # cannot fill the log
                                  level="info" if msg.reason == "stopped" else "warning", table=table,
                                  reason=msg.reason)
            online = 0
        else:
            if self.liveness.heard(table, _MESSAGE_TYPE[type(msg)], now):
                self._log_limited(f"online:{table}", "linked table online", level="info", table=table)
            online = 1
        self.metrics.table_online.labels(table).set(online)
        self.metrics.table_heard.labels(table).set(now)

    def _answered(self, table: str, seq: int, outcome: str) -> None:
        now = time.time()
        self.liveness.answered(table, seq, outcome, now)
        self.metrics.table_ack.labels(table).set(now)
        self.metrics.table_ack_seq.labels(table).set(seq)

    def _drop(self, reason: str, **detail: Any) -> None:
        self.metrics.dropped.labels(reason).inc()
        self._log_limited(f"drop:{reason}:{detail.get('table', detail.get('topic'))}", "link message dropped",
                          level="warning", reason=reason, **detail)

    def _log_limited(self, key: str, event: str, *, level: str = "error", **detail: Any) -> None:
        """Log `event` at most once per LOG_EVERY_S for `key` (a kind of message and its table), with how many were
        not logged since; what a message said is cut to LOG_TEXT characters. A table's credentials must not be a
        way to fill the log (the metrics count every one)."""
        held = self._budget.take(key)
        if held is None:
            return
        cut = {k: (v[:LOG_TEXT] + "...") if isinstance(v, str) and len(v) > LOG_TEXT else v for k, v in detail.items()}
        getattr(log, level)(event, **cut, **({"not_logged_before": held} if held else {}))

    async def _table_worker(self, table: str, q: asyncio.Queue[TableMessage]) -> None:
        """One table's operations, strictly one after another in the table's order."""
        while True:
            msg = await q.get()
            try:
                if isinstance(msg, schema.Hello):
                    self._hellos[table] = msg.nonce
                    expected = self.next_seq.get(table, 1)
                    if msg.next_seq < expected:  # the table lost journal entries the authority has applied
                        self.metrics.anomalies.labels(table, "table behind").inc()
                        self._log_limited(f"behind:{table}", "table is behind the authority: its link journal lost "
                                          "entries (or someone with its credentials says so)", table=table,
                                          table_next=msg.next_seq, authority_next=expected)
                    await self._reply(table, self._expect(table))
                elif isinstance(msg, schema.JournalAnchor):
                    await self._keep_anchor(msg)
                else:
                    await self._apply(msg)
            except Exception:
                self.metrics.anomalies.labels(table, "message not applied").inc()
                held = self._budget.take(f"not-applied:{table}")
                if held is not None:
                    log.exception("table message not applied", table=table, seq=getattr(msg, "seq", None),
                                  **({"not_logged_before": held} if held else {}))

    async def _apply(self, op: schema.Op) -> None:
        assert self.ledger is not None and self.keys is not None
        digest = schema.op_digest(op)  # what every answer to it names
        expected = self.next_seq.get(op.table, 1)
        if op.seq > expected:
            self.metrics.dropped.labels("ahead").inc()
            await self._reply(op.table, self._expect(op.table))
            return
        if op.seq < expected:
            done = await self.keys.alookup(op.key)
            if done is None:  # cannot happen with an intact journal: keys are applied in order
                self._drop("stale", table=op.table, seq=op.seq)
                return
            if not _same_operation(op, done, digest):
                # The number was used by another operation: someone with the table's credentials sent it first.
                # The table's own is not applied; it is told so, and it is an alert.
                self.metrics.anomalies.labels(op.table, "sequence taken").inc()
                self._log_limited(f"seq-taken:{op.table}", "a table's operation number was used by another "
                                  "operation: the table's is refused", table=op.table, seq=op.seq, kind=op.kind,
                                  journaled=done.kind)
                await self._reply(op.table, schema.Refused(
                    op.seq, "seq", f"operation {op.seq} of table {op.table} is another operation in the authority's "
                                   f"journal ({done.kind}): not applied (someone else sent it with this table's "
                                   "credentials)", digest))
                return
            self.metrics.applied.labels(op.table, "repeat").inc()
            await self._reply(op.table, _answer(op, done, digest))
            return
        body = {"meter": op.meter, **op.body}
        if op.kind == "lock-percent-award":  # the lock's nonce is the authority's, never a table's
            body["nonce"] = secrets.token_hex(16)
        seat, shares = self._hit_of(op)
        t0 = time.perf_counter()
        answer: schema.Ack | schema.Refused
        try:
            meters = self.ledger.state
            problem = _foreign(op, meters) or _not_a_later_share(op, meters) or self._unapproved(op)
            if problem is not None:
                raise InputError(*problem)
            if op.approval is not None:
                body["approval"] = op.approval  # journaled with the payment, for the audit
            receipt = await self.ledger.submit_async(op.kind, body, op.key)
        except KeyConflict:  # the key is new when op.seq is the next expected: a journal out of step
            self._drop("stale", table=op.table, seq=op.seq)
            return
        except InputError as e:  # a rules error is final: journal it so the sequence moves on once
            # an honest table never sends an award the authority refuses, nor another table's round or claim
            if (op.kind in AWARD_KINDS and e.field != "approval") or e.field in ("body.table", "body.round_id",
                                                                                  "body.claim"):
                self.metrics.anomalies.labels(op.table, "award refused").inc()
                self._log_limited(f"award-refused:{op.table}", "an award refused: the table asked for what its "
                                  "rounds do not hold", table=op.table, seq=op.seq, kind=op.kind, error=str(e))
            refused = {"table": op.table, "seq": op.seq, "field": e.field, "message": e.problem,
                       "op": digest}
            receipt = await self.ledger.submit_async(LINK_REFUSED, refused, op.key)
            answer = schema.Refused(op.seq, e.field, e.problem, digest)
            self.metrics.applied.labels(op.table, "refused").inc()
            self._log_limited(f"refused:{op.table}", "table operation refused", level="warning", table=op.table,
                              seq=op.seq, kind=op.kind, error=str(e))
        else:
            answer = schema.Ack(op.seq, receipt.seq, receipt.result, digest)
            self.metrics.applied.labels(op.table, "applied").inc()
            self._dirty.add(op.meter)
            self._dirty_event.set()
            if op.kind in WIN_KINDS:
                self._wins.append(_win(op, receipt.seq, receipt.result, seat, shares))
            if op.kind in approval.APPROVED_KINDS and self._tg is not None and self.anchoring is not None:
                self._tg.create_task(self.anchoring.anchor_or_alert("payment"), name="anchor:payment")
            self._odds.saw(op, self.metrics, log)
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        self.next_seq[op.table] = op.seq + 1
        self._answered(op.table, op.seq, "refused" if isinstance(answer, schema.Refused) else "applied")
        await self._reply(op.table, answer)

    def _unapproved(self, op: schema.Op) -> tuple[str, str] | None:
        """A payment without an approval this authority can verify (controller.linkproto.approval), or None."""
        body = op.body
        if op.kind == "pay-locked-award":  # the approval names the lock by its number: the lock held now
            meter = self.ledger.state.get(op.meter) if self.ledger else None
            claim = op.body.get("claim")
            lock = meter.locked.get(claim) if meter is not None and isinstance(claim, str) else None
            if lock is None:
                return None  # nothing to pay: the meter refuses it, naming why
            # what the lock held is for (seat, hand, amount, ...): an approval of another lock does not verify
            body = {**op.body, **approval.lock_terms(lock, lock.number, lock.nonce, lock.amount_cents)}
        problem = approval.check(self.approvers, op.kind, op.table, op.meter, body, op.approval)
        if problem is None:
            return None
        self.metrics.anomalies.labels(op.table, "unapproved payment").inc()
        self._log_limited(f"unapproved:{op.table}", "a payment without a verified approval refused", table=op.table,
                          seq=op.seq, kind=op.kind, error=problem)
        return "approval", problem

    async def _keep_anchor(self, a: schema.JournalAnchor) -> None:
        """A table's journal head, kept off its box (docs/security.md): every report journaled with its verdict
        (controller.linkproto.anchors), the reference sent back at each connection. Behind the reference is an alert
        (`anchor went back`) and the new reference; further ahead than the table's journal could have grown is an
        alert (`anchor far ahead`), kept aside and never the reference."""
        assert self.ledger is not None
        now = time.time()
        held = self.held.get(a.table, anchors.TableAnchors())
        verdict = anchors.judge(held, a, now)
        if verdict == "repeat":
            return  # sent again at a connection: journaled when it came first
        # One report a second per table and budget: a flood of planted anchors spends the alerts' budget, not the
        # one true reports are accepted under.
        budget = f"{a.table}:{'accepted' if verdict == 'accepted' else 'alert'}"
        tick = time.monotonic()
        if tick - self._anchored_at.get(budget, -ANCHOR_EVERY_S) < ANCHOR_EVERY_S:
            self._drop("anchor_too_often", table=a.table)
            return
        self._anchored_at[budget] = tick
        body = {"table": a.table, "seq": a.seq, "hash": a.hash, "at": a.at, **({"mac": a.mac} if a.mac else {}),
                "verdict": verdict, "received": format_time(datetime.fromtimestamp(now, timezone.utc))}
        try:
            await self.ledger.submit_async(TABLE_ANCHOR, body, f"{ANCHOR_PREFIX}{a.table}:{a.seq}:{time.time_ns()}")
        except KeyConflict:
            return  # two reports within the clock's tick: cannot happen with one worker a table
        ref = held.reference.anchor.seq if held.reference is not None else None
        self.held[a.table] = anchors.after(self.held.get(a.table, anchors.TableAnchors()), verdict,
                                           anchors.Report(a, now))
        self._held_changed(a.table)
        if verdict == "behind":
            self.metrics.anomalies.labels(a.table, "anchor went back").inc()
            self._log_limited("anchor-back:" + a.table, "a table's anchor went back: its journal rolled back or was "
                              "rewritten, or an anchor was sent with its credentials (judged from it now)",
                              table=a.table, seq=a.seq, hash=a.hash, reference=ref)
        elif verdict == "suspect":
            self.metrics.anomalies.labels(a.table, "anchor far ahead").inc()
            assert held.reference is not None
            self._log_limited("anchor-ahead:" + a.table, "a table's anchor is further ahead than its journal could "
                              "have grown: kept aside as planted, not taken as the reference (a supervisor clears it: "
                              "progressivectl clear-anchor)", table=a.table, seq=a.seq, reference=ref,
                              furthest=anchors.furthest(held.reference, now))

    def _held_anchors(self, entries: list[tuple[str, Found]]) -> None:
        """The tables' anchors as the journal's reports and clearings left them (at start, in a thread)."""
        now = time.time()
        for _key, found in entries:
            t = found.body.get("table") if isinstance(found.body, dict) else None
            if isinstance(t, str):
                self.held[t] = _replayed(self.held.get(t, anchors.TableAnchors()), found, now)
        for t in self.held:
            self._held_changed(t)
        for t in self.cfg.tables:
            self.metrics.anchor_suspect.labels(t).set(1 if t in self.held and self.held[t].suspect else 0)

    def _held_changed(self, table: str) -> None:
        held = self.held[table]
        if held.reference is not None:
            self.anchors[table] = held.reference.anchor
        self.metrics.anchor_suspect.labels(table).set(0 if held.suspect is None else 1)

    async def _clear_anchor(self, args: dict[str, Any]) -> dict[str, Any]:
        """A supervisor clears the anchor kept aside for a table (planted far ahead), journaled with their name."""
        assert self.ledger is not None
        table, seq = args.get("table"), args.get("seq")
        if not isinstance(table, str) or table not in self.cfg.tables:
            raise InputError("table", f"{table!r} is not a table of this authority ({', '.join(self.cfg.tables)})")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq < 2**63:
            raise InputError("seq", "must be the entry number of the anchor kept aside (status: anchor_suspect.seq)")
        who = await self._authenticate(args)
        held = self.held.get(table, anchors.TableAnchors())
        if held.suspect is None:
            raise InputError("table", f"no anchor of table {table} is kept aside: nothing to clear")
        if held.suspect.anchor.seq != seq:
            raise InputError("seq", f"the anchor kept aside for table {table} is at entry {held.suspect.anchor.seq}, "
                             f"not {seq}")
        body = {"table": table, "seq": seq, "hash": held.suspect.anchor.hash, "suspects": held.suspects,
                "cleared_by": who, "at": format_time(utc_now())}
        receipt = await self.ledger.submit_async(TABLE_ANCHOR_CLEARED, body,
                                                 f"{ANCHOR_PREFIX}{table}:cleared:{time.time_ns()}")
        self.held[table] = anchors.cleared(self.held.get(table, held))
        self._held_changed(table)
        log.warning("a table's anchor kept aside cleared", table=table, seq=seq, suspects=held.suspects,
                    cleared_by=who, entry=receipt.seq)
        return {"table": table, "cleared": seq, "suspects": held.suspects, "cleared_by": who, "entry": receipt.seq}

    def _hit_of(self, op: schema.Op) -> tuple[int, int]:
        """(seat, shares) of a hit: in a lock's body, or in the lock that a payment or release settles."""
        if isinstance(op.body.get("seat"), int):
            shares = op.body.get("shares", 1)
            return op.body["seat"], shares if isinstance(shares, int) else 1
        meter = self.ledger.state.get(op.meter) if self.ledger else None
        claim = op.body.get("claim")
        lock = meter.locked.get(claim) if meter is not None and isinstance(claim, str) else None
        return (lock.seat, lock.shares) if lock is not None else (0, 1)

    # --- the control socket (reads, and a supervisor's clearing of a planted anchor) ----------------------

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """The authority's control socket: reads, checks a supervisor's secret for the console's login, and clears a
        planted anchor on a supervisor's secret (docs/operations.md). Nothing on it moves a meter."""
        if op not in AUTHORITY_OPERATIONS:
            if op in OPERATIONS:
                raise NotAvailable(f"{op}: not offered by the link authority: its socket answers "
                                   f"{', '.join(AUTHORITY_OPERATIONS)} only (it moves no meter)")
            raise UnknownOp(op)
        check_arguments(op, args, AUTHORITY_OPERATIONS)
        if self.ledger is None:
            raise NotAvailable("the link authority is not running its journal (starting or stopping)")
        if op == "meters":
            return [meter_json(s) for _m, s in sorted(self.ledger.state.items())]
        if op == "meter_series":  # the linked meters' plots, from the authority's journal as a table's from its own
            return await self.series.answer(args)
        if op == "authenticate":
            return {"supervisor": await self._authenticate(args)}
        if op == "clear_anchor":
            return await self._clear_anchor(args)
        return self.status()

    async def _authenticate(self, args: dict[str, Any]) -> str:
        """The console's login: the supervisor's name if the secret is theirs (controller.service.auth, as a table's
        `authenticate`); PermissionError otherwise. It opens the page only: nothing here approves or moves."""
        if self.supervisors is None:
            raise NotAvailable("no supervisors are configured at the authority: nobody can log in to its console "
                               "(supervisors_file in its configuration)")
        return await self.supervisors.check(args.get("supervisor"), args.get("secret"), PEER.get().get("peer_uid"))

    def status(self) -> dict[str, Any]:
        """The authority, its meters and every configured table as it knows them (docs/operations.md)."""
        assert self.ledger is not None
        opened = _open_rounds(self.ledger.state)
        return {
            "role": "link-authority",
            "authority": self.cfg.authority,
            "version": __version__,
            "broker_connected": bool(self.mqtt is not None and self.mqtt.connected),
            "time_zone": self.cfg.report.time_zone,
            "meters": [{"meter": m, "amount": format_cents(s.current_cents), "reset": format_cents(s.params.reset_cents),
                        "locked": [{"claim": c, "amount": format_cents(lk.amount_cents), "table": lk.table,
                                    "seat": lk.seat, "round_id": lk.round_id, "hand": lk.hand, "award": lk.award,
                                    "shares": lk.shares, "at": format_time(lk.at)}
                                   for c, lk in sorted(s.locked.items())]}
                       for m, s in sorted(self.ledger.state.items())],
            "tables": [{**table_json(t, st, (a.seq, a.at) if (a := self.anchors.get(t)) else None),
                        "anchor_suspect": _suspect_json(self.held.get(t)),
                        "open_rounds": opened.get(t, []),
                        "floor": floor_json(*self.floor[t]) if t in self.floor else None}
                       for t, st in self.liveness.tables.items()],
            "ledger_head_seq": self.ledger.head.seq,
            "uptime_seconds": round(time.monotonic() - self._started),
        }

    # --- messages out --------------------------------------------------------------------------------

    async def _reply(self, table: str, msg: schema.Message) -> None:
        """Sent without holding up the table's next operation: the answer is journaled, and a lost one is
        answered again when the table resends."""
        coro = self._publish(self.topics.down(table), msg)
        try:
            assert self._tg is not None
            self._tg.create_task(coro, name=f"answer:{table}")
        except RuntimeError:  # stopping
            coro.close()

    async def _publish(self, topic: str, msg: schema.Message, *, qos: int = 1, retain: bool = False) -> bool:
        """Publish if connected; a table resends what it has not heard about, so nothing is queued here."""
        if self.mqtt is None:
            return False
        try:
            await self.mqtt.publish(topic, self.signer.seal(topic, schema.encode(msg)), qos=qos, retain=retain,
                                    timeout=PUBLISH_TIMEOUT)
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


LOG_EVERY_S = 10.0  # a kind of refusal or drop of one table is logged at most this often (all are counted)
LOG_TEXT = 200  # characters of a table's own text (an error message quoting it) in a log line
ANCHOR_EVERY_S = 1.0  # a table's anchors journaled at most this often (a table anchors every minute, and at events)
ANCHOR_PREFIX = "anchor:"  # the authority journals table T's anchor of entry N under "anchor:T:N"
AWARD_KINDS = frozenset({"pay-fixed-award", "lock-percent-award", "pay-locked-award", "pay-percent-award"})
HIT_WINDOW = 10_000  # wagers
HIT_LIMIT = 3  # percentage-of-meter hits of one table within its last HIT_WINDOW wagers before an alert


class _HitRate:
    """Hits far beyond the odds, per table: a percentage of the meter (a royal flush, a straight flush) comes
    about 0.15 times in 10,000 wagers at the games of a Five Card Hand Bonus or a Progressive Payout Wager; more
    than HIT_LIMIT locks within a table's last HIT_WINDOW wagers (a chance of about 1 in 50,000) is an alert.
    Counted since the authority's start."""

    def __init__(self) -> None:
        self._wagers: dict[str, int] = {}
        self._locks: dict[str, list[int]] = {}

    def saw(self, op: schema.Op, metrics: AuthorityMetrics, logger: FilteringBoundLogger) -> None:
        if op.kind == "book-contributions":
            wagers = op.body.get("wagers")
            self._wagers[op.table] = self._wagers.get(op.table, 0) + (len(wagers) if isinstance(wagers, list) else 0)
        elif op.kind == "lock-percent-award":
            now = self._wagers.get(op.table, 0)
            locks = [w for w in self._locks.get(op.table, []) if now - w < HIT_WINDOW] + [now]
            self._locks[op.table] = locks
            metrics.hits.labels(op.table).inc()
            if len(locks) > HIT_LIMIT:
                metrics.anomalies.labels(op.table, "hits beyond the odds").inc()
                logger.error("hits far beyond the odds", table=op.table, locks=len(locks), within_wagers=HIT_WINDOW,
                             limit=HIT_LIMIT)


def _journaled_anchor(body: dict[str, Any]) -> schema.JournalAnchor:
    return schema.JournalAnchor(body["table"], body["seq"], body["hash"], body["at"], body.get("mac"))


def _replayed(held: anchors.TableAnchors, found: Found, now: float) -> anchors.TableAnchors:
    """`held` after one journaled report or clearing. A report journaled before verdicts (the highest was kept)
    is taken as the reference when higher, as then, received at this start."""
    if found.kind == TABLE_ANCHOR_CLEARED:
        return anchors.cleared(held)
    if found.kind != TABLE_ANCHOR:
        return held
    a = _journaled_anchor(found.body)
    verdict, received = found.body.get("verdict"), found.body.get("received")
    if verdict not in anchors.VERDICTS:
        if held.reference is None or a.seq > held.reference.anchor.seq:
            return anchors.after(held, "accepted", anchors.Report(a, now))
        return held
    try:
        when = datetime.fromisoformat(received).timestamp() if isinstance(received, str) else now
    except ValueError:
        when = now
    return anchors.after(held, verdict, anchors.Report(a, when))


def _open_rounds(meters: Meters) -> dict[str, list[dict[str, Any]]]:
    """table -> its rounds booked on a linked meter and not closed, from the authority's journal: (meter, round), its
    latest OPEN_ROUNDS_SHOWN in the order of their numbers. One pass over the open rounds, whatever their number: a
    table's password can book rounds it never closes, and the console asks for the status twice a second."""
    found: dict[str, list[tuple[int, str, str]]] = {}
    for m, s in meters.items():
        for rid, booking in s.open_rounds.items():
            table = booking.table
            number = rid[len(table) + 2:]
            if rid.startswith(f"{table}-r") and number.isascii() and number.isdigit():
                found.setdefault(table, []).append((int(number), m, rid))
    return {t: [{"meter": m, "round_id": rid} for _n, m, rid in sorted(heapq.nlargest(OPEN_ROUNDS_SHOWN, rows))]
            for t, rows in found.items()}


def _suspect_json(held: anchors.TableAnchors | None) -> dict[str, Any] | None:
    if held is None or held.suspect is None:
        return None
    a = held.suspect.anchor
    return {"seq": a.seq, "hash": a.hash, "at": a.at, "reports": held.suspects}


def _foreign(op: schema.Op, meters: Meters) -> tuple[str, str] | None:
    """A table may only move its own rounds and its own claims: the round ids it books are its own
    (``<table>-r<n>``), a claim it locks is of that round (``<round>-c<k>...``), and a lock it pays or releases is
    one it took (claim ids are no secret: every table hears them on the win topic)."""
    if "table" in op.body and op.body["table"] != op.table:
        return "body.table", f"is {op.body['table']!r}: table {op.table} may only send its own operations"
    rid = op.body.get("round_id")
    if isinstance(rid, str) and not re.fullmatch(re.escape(op.table) + r"-r[0-9]+", rid):  # not a mere prefix:
        return "body.round_id", f"{rid!r} is not a round of table {op.table}"  # table "cs" is not "cs-rail"'s
    claim = op.body.get("claim")
    if op.kind == "lock-percent-award" and isinstance(claim, str) and isinstance(rid, str) \
            and not re.fullmatch(re.escape(rid) + r"-c[0-9]+:[0-9]+", claim):
        return "body.claim", f"{claim!r} is not a claim of round {rid}"
    if op.kind in ("pay-locked-award", "release-locked-award") and isinstance(claim, str):
        meter = meters.get(op.meter)
        lock = meter.locked.get(claim) if meter is not None else None
        if lock is not None and lock.table != op.table:
            return "body.claim", f"{claim!r} is a lock of table {lock.table}, not of table {op.table}"
    return None


def _not_a_later_share(op: schema.Op, meters: Meters) -> tuple[str, str] | None:
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


def _digest(op: schema.Op) -> str:
    """What a table's operation was (kind, meter and body), for a refusal journaled without them."""
    text = json.dumps([op.kind, op.meter, op.body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _same_operation(op: schema.Op, done: Found, digest: str) -> bool:
    """Whether the journal's entry under the operation's key is this operation (a table resending it), and not
    another one sent first under the same number."""
    if done.kind == LINK_REFUSED:
        body = done.body if isinstance(done.body, dict) else {}
        if "op" in body:  # the whole operation as sent, approval included: a copy with another approval is another
            return bool(body["op"] == digest)
        older = body.get("operation")  # journaled before: kind, meter and body only
        return older is None or older == _digest(op)  # refusals journaled before the digest: taken as the same
    if done.kind != op.kind or not isinstance(done.body, dict):
        return False
    if done.body.get("approval") != op.approval:  # a payment's approval is part of what was applied
        return False
    added = ("approval", "nonce")  # what the authority journals beside the table's body
    return {k: v for k, v in done.body.items() if k not in added} == \
        {k: v for k, v in {"meter": op.meter, **op.body}.items() if k not in added}


def _answer(op: schema.Op, done: Found, digest: str) -> schema.Ack | schema.Refused:
    if done.kind == LINK_REFUSED:
        return schema.Refused(op.seq, str(done.body.get("field", "")), str(done.body.get("message", "")), digest)
    return schema.Ack(op.seq, done.seq, done.result if isinstance(done.result, dict) else {}, digest)


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


__all__ = ["ANCHOR_EVERY_S", "ANCHOR_PREFIX", "AWARD_KINDS", "DROPPED", "FLOOR_MIN_S", "HIT_LIMIT", "HIT_WINDOW",
           "LOG_EVERY_S", "LOG_TEXT", "METER_INTERVAL", "OPEN_ROUNDS_SHOWN", "QUEUE_PER_TABLE", "WIN_KINDS",
           "AuthorityMetrics", "LinkAuthority", "TableMessage"]

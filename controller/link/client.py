"""A table's side of the link: its durable outbox, its MQTT session, and whether the authority is heard.

An operation on a linked meter is journaled in the table's link journal (``<state_dir>/link``) before it
is sent, and sent again until the authority's answer is journaled as well, through any restart or outage:
the authority applies it once (controller.authority.authority). The link is *up* while the authority has been
heard (a heartbeat, a meter, an answer) within ``link_timeout``; when it is not, the table stops
recognizing progressive wagers (58 Pa. Code 605a.8; New York 5321.18) and resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import structlog

from controller.config.model import MqttConfig
from controller.errors import InputError
from controller.ledger import Ledger, software_digest
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import Found, lookup
from controller.link.mqtt import PUBLISH_TIMEOUT, LinkDown, MqttLink, MqttSettings
from controller.link.outbox import LINK_ACK, LINK_SEND, Outbox, OutboxReducer, Sent, send_body
from controller.linkproto import schema, signing
from controller.meter import ops as meter_ops
from controller.meter.award import RESET_FLOOR_CENTS
from controller.meter.journal import LINK_REFUSED
from controller.service.logs import LogBudget

log = structlog.get_logger("controller.link.client")

RESEND_AFTER = 2.0  # seconds without an answer before the outbox is sent again
GOODBYE_TIMEOUT = 1.0  # seconds a clean stop waits for the broker to take the table's `offline`
REJECT_LOG_EVERY_S = 10.0  # one line per kind of message not acted on in this time (every one is counted)
HEARTBEAT_WINDOW_S = 60.0  # how far a heartbeat's time may be from this box's clock
HELLO_EVERY_S = 1.0  # hellos at the authority's `online` status, at most this often
FLOOR_EVERY_S = 1.0  # the table's floor line is looked at this often, and sent when it changed (display only)
FLOOR_REFRESH_S = 30.0  # and sent unchanged this often: an authority that restarted or missed one has it again
HELLO_NONCES = 8  # hellos of this table whose `expect` is still taken (the authority may answer an older one late)


class LinkRefused(InputError):
    """The authority's rules refused an operation (final)."""


class TableLink:
    def __init__(self, table: str, mqtt: MqttConfig, linked: dict[str, str], state_dir: Path, *,
                 settings: MqttSettings | None = None, on_alive: Callable[[bool], None] = lambda up: None,
                 on_meter: Callable[[str], None] = lambda meter: None,
                 on_win: Callable[[schema.Win], None] = lambda win: None,
                 on_rejected: Callable[[str], None] = lambda reason: None,
                 clock: Callable[[], float] = time.monotonic, ledger_options: dict[str, Any] | None = None) -> None:
        self.table = table
        self.linked = dict(linked)  # table meter id -> the authority's meter id
        self.topics = schema.Topics(mqtt.topic_prefix)
        self.timeout = float(mqtt.link_timeout)
        self.settings = settings if settings is not None else MqttSettings.from_config(mqtt)
        # The broker tells the authority when this table's connection drops (a crash, a cut cable): its will, on
        # its own up topic (the ACL lets it write there only; docs/link-protocol.md, "Liveness").
        lost = schema.encode(schema.TableOffline(table, "lost"))
        self.settings = replace(self.settings, will=(self.topics.up(table), lost, False))
        self.state_dir = Path(state_dir)
        self.on_alive, self.on_meter, self.on_win, self.on_rejected = on_alive, on_meter, on_win, on_rejected
        # Only what the link authority signed is acted on (controller.linkproto.signing): the broker and a table's MQTT
        # password can publish on every topic this table reads.
        self.verifier = signing.Verifier(mqtt.authority_keys)
        self.rejected: dict[str, int] = {}  # reason -> messages not acted on (status, metrics)
        self._warned = LogBudget(1, REJECT_LOG_EVERY_S)
        self._hello_nonces: deque[str] = deque(maxlen=HELLO_NONCES)  # this connection's hellos, newest last
        self._heartbeats: dict[str, float] = {}  # the `at` of each heartbeat taken within the window
        self._hello_at = -HELLO_EVERY_S  # when the last hello at the authority's `online` status was sent
        self.wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
        self._wins_seen: dict[str, int] = {}  # authority meter -> the entry of the newest win taken
        self.clock = clock
        self.ledger: Ledger[Outbox] | None = None
        self.mqtt: MqttLink | None = None
        self.alive = False
        self.values: dict[str, schema.MeterValue] = {}  # by the authority's meter id
        self.last_heard: float | None = None
        self.opened = asyncio.Event()
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._down: asyncio.Queue[schema.Ack | schema.Refused | schema.Expect] = asyncio.Queue(1024)
        self._kick = asyncio.Event()
        self._last_sent: dict[int, float] = {}  # seq -> when it was last handed to the broker
        self._ledger_options = ledger_options or {}
        self._tg: asyncio.TaskGroup | None = None  # run's: the first publish of each operation runs in it
        self.authority_kinds: frozenset[str] = schema.BASE_OPS  # what the authority said it takes (expect)
        self.anchor: schema.JournalAnchor | None = None  # the last anchor of the table's own journal, to send
        self.on_anchor: Callable[[schema.JournalAnchor], None] = lambda anchor: None  # the authority's, at expect
        # Whose approvals of payments the authority verifies, as it last said (None: not heard yet, or an older
        # authority that verifies none).
        self.approvers: frozenset[str] | None = None
        # What the floor view at the authority shows of this table (its round, blocks, pending claims), or None while
        # the table is not running: set by the daemon; sent when it changed, at most every FLOOR_EVERY_S.
        self.floor: Callable[[], schema.FloorLine | None] | None = None
        self._floor_sent: tuple[schema.FloorLine, float] | None = None  # the last sent (its `at` blank), when

    # --- lifecycle -----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (or create) the link journal; blocking, run it in a thread."""
        self.ledger = Ledger.open(self.state_dir, OutboxReducer(), software_digest=software_digest(),
                                  **self._ledger_options)

    def close(self) -> None:
        led, self.ledger = self.ledger, None
        if led is not None:
            led.close()

    async def run(self) -> None:
        """Runs until cancelled; the caller has opened the journal."""
        assert self.ledger is not None
        self.mqtt = MqttLink(self.settings, self.topics.table_subscriptions(self.table))
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self.mqtt.run(self._on_message, self._on_connect), name="link-mqtt")
                tg.create_task(self._answers_worker(), name="link-answers")
                tg.create_task(self._resender(), name="link-resend")
                tg.create_task(self._watch(), name="link-watch")
                tg.create_task(self._floor_sender(), name="link-floor")
                self.opened.set()
                try:
                    await asyncio.Future()  # until cancelled: the stop
                finally:
                    await self._goodbye()
        finally:
            self._tg = None

    async def _goodbye(self) -> None:
        """A clean stop says so before the connection closes (a clean disconnect sends no will), to an authority
        that takes `offline` (an older one would drop it and count it as a bad schema). Best effort."""
        if self.mqtt is None or not self.mqtt.connected or not self.accepts("offline"):
            return
        with contextlib.suppress(LinkDown, TimeoutError):
            await self.mqtt.publish(self.topics.up(self.table), schema.encode(schema.TableOffline(self.table, "stopped")),
                                    qos=1, timeout=GOODBYE_TIMEOUT)

    def status(self) -> dict[str, Any]:
        """For `progressivectl status`: whether the authority is heard, and what waits for it."""
        heard = None if self.last_heard is None else round(self.clock() - self.last_heard, 1)
        box = self.outbox if self.ledger is not None else None
        return {"up": self.alive, "connected": bool(self.mqtt and self.mqtt.connected),
                "heard_seconds_ago": heard, "timeout_seconds": self.timeout,
                "waiting": len(box.pending) if box else None, "next_seq": box.next_seq if box else None,
                "rejected": dict(sorted(self.rejected.items()))}

    def accepts(self, kind: str) -> bool:
        """Whether the authority, as last heard, takes operations of `kind` (an older one takes BASE_OPS only)."""
        return kind in self.authority_kinds

    @property
    def outbox(self) -> Outbox:
        assert self.ledger is not None
        return self.ledger.state

    # --- sending -------------------------------------------------------------------------------------

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
        start-up, before `run`, or in a thread). Returns its sequence number once it is durable in the outbox:
        the link sends it with every pending operation once it runs (the resender, a new connection's hello).
        A retry with the same key returns the same sequence number."""
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
        tg = self._tg
        if tg is None:
            return  # not running: sent when the link runs and connects
        coro = self._publish_op(sent)
        try:
            tg.create_task(coro, name=f"link-send:{sent.seq}")
        except RuntimeError:  # the link is stopping: the outbox keeps the operation for the next start
            coro.close()

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

    def _op(self, sent: Sent) -> schema.Op:
        return schema.Op(self.table, sent.seq, sent.kind, sent.linked, dict(sent.body),
                         None if sent.approval is None else dict(sent.approval))

    def _digest(self, sent: Sent) -> str:
        return schema.op_digest(self._op(sent))

    async def _publish_op(self, sent: Sent) -> bool:
        ok = await self._publish(self.topics.up(self.table), self._op(sent))
        if ok:
            self._last_sent[sent.seq] = self.clock()
        return ok

    async def _publish(self, topic: str, msg: schema.Message, *, qos: int = 1) -> bool:
        if self.mqtt is None:
            return False
        try:
            await self.mqtt.publish(topic, schema.encode(msg), qos=qos, timeout=PUBLISH_TIMEOUT)
            return True
        except (LinkDown, TimeoutError):
            return False

    async def _resend(self, *, due_only: bool = False) -> None:
        """What the authority has not answered, in order: it applies what it has not, and answers again what
        it has. `due_only`: only operations sent more than RESEND_AFTER ago (a slow authority is not flooded
        with repeats of what it is still working on)."""
        now = self.clock()
        for seq in sorted(self.outbox.pending):
            sent = self.outbox.pending.get(seq)
            if sent is None or (due_only and now - self._last_sent.get(seq, 0.0) < RESEND_AFTER):
                continue
            if not await self._publish_op(sent):
                return
        for seq in [s for s in self._last_sent if s not in self.outbox.pending]:
            del self._last_sent[seq]

    async def _resender(self) -> None:
        while True:
            try:
                async with asyncio.timeout(RESEND_AFTER):
                    await self._kick.wait()
            except TimeoutError:
                pass
            self._kick.clear()
            if self.outbox.pending:
                await self._resend(due_only=True)

    def send_anchor(self, anchor: schema.JournalAnchor) -> None:
        """Keep the head of the table's own journal off the box, at the authority (if it takes anchors: an older
        one would drop the message): sent now if connected, and again at each connection."""
        self.anchor = anchor
        tg = self._tg
        if tg is None:
            return
        coro = self._send_anchor()
        try:
            tg.create_task(coro, name=f"link-anchor:{anchor.seq}")
        except RuntimeError:
            coro.close()

    async def _send_anchor(self) -> None:
        if self.anchor is not None and self.accepts("anchor"):
            await self._publish(self.topics.up(self.table), self.anchor)

    async def _floor_sender(self) -> None:
        while True:
            await asyncio.sleep(FLOOR_EVERY_S)
            await self.send_floor()

    async def send_floor(self) -> bool:
        """The table's floor line to an authority that takes it, if it changed since the last sent (or that is
        FLOOR_REFRESH_S old): QoS 0, not retained, never journaled; it moves no money. Whether one was sent."""
        if self.floor is None or self.mqtt is None or not self.mqtt.connected or not self.accepts("floor"):
            return False
        try:
            line = self.floor()
        except Exception:  # a view of the table not made is no reason to stop its link
            held = self._warned.take("floor")
            if held is not None:
                log.exception("the table's floor line not made", table=self.table)
            return False
        if line is None:
            return False
        now, shown = self.clock(), replace(line, at="")
        if self._floor_sent is not None and self._floor_sent[0] == shown and \
                now - self._floor_sent[1] < FLOOR_REFRESH_S:
            return False
        if not await self._publish(self.topics.up(self.table), line, qos=0):
            return False
        self._floor_sent = (shown, now)
        return True

    async def _on_connect(self) -> None:
        nonce = secrets.token_hex(16)
        self._hello_nonces.append(nonce)
        await self._publish(self.topics.up(self.table), schema.Hello(self.table, self.outbox.next_seq, nonce))

    # --- receiving -----------------------------------------------------------------------------------

    def _reject(self, reason: str, event: str, **detail: Any) -> None:
        """A message not acted on: counted by reason, and logged once per reason and REJECT_LOG_EVERY_S (whoever
        publishes on the table's topics must not be able to fill its log)."""
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.on_rejected(reason)
        held = self._warned.take(reason)
        if held is not None:
            log.error(event, reason=reason, table=self.table, **detail,
                      **({"not_logged_before": held} if held else {}))

    def _on_message(self, topic: str, payload: bytes) -> None:
        if len(payload) > schema.MAX_PAYLOAD:  # before anything parses it
            self._reject("bad_schema", "link message dropped", topic=topic,
                         error=f"{len(payload)} bytes, more than {schema.MAX_PAYLOAD}")
            return
        problem = self.verifier.check(topic, payload)
        try:
            msg = schema.decode(topic, payload)
        except InputError as e:
            if e.field == "v":  # an authority of another version: one clear line, not one per message
                self._reject("version", "link message of another protocol version: not acted on", topic=topic,
                             error=str(e))
            else:
                self._reject("bad_schema", "link message dropped", topic=topic, error=str(e))
            return
        if problem is not None:
            self._reject("not_signed", "link message not signed by the link authority: not acted on", topic=topic,
                         type=type(msg).__name__, error=problem)
            return
        parts = self.topics.parse(topic)
        if isinstance(msg, schema.Status):
            if msg.state == "offline":
                self.last_heard = None
                self._set_alive(False)
            elif msg.state == "online" and self._tg is not None and \
                    self.clock() - self._hello_at >= HELLO_EVERY_S:  # a status played back again and again: one
                # The authority (re)started, perhaps with another version or other approvers: hello again, so that
                # its `expect` says what it takes now.
                self._hello_at = self.clock()
                coro = self._on_connect()
                try:
                    self._tg.create_task(coro, name="link-hello")
                except RuntimeError:
                    coro.close()
            return
        match msg:
            case schema.MeterValue() if parts == ("meters", msg.meter):
                self._meter_value(msg)
            case schema.Win() if parts == ("meters", msg.meter, "win"):
                if msg.entry <= self._wins_seen.get(msg.meter, 0):
                    self._reject("played_back", "a win heard before: not shown again", meter=msg.meter,
                                 entry=msg.entry)
                    return
                self._wins_seen[msg.meter] = msg.entry
                self._heard()
                self.on_win(msg)
            case schema.Heartbeat() if parts == ("authority", "heartbeat"):
                if not self._fresh_heartbeat(msg.at):
                    self._reject("played_back", "a heartbeat heard before, or not of now: not taken as the "
                                 "authority's", at=msg.at)
                    return
                self._heard()
            case schema.Ack() | schema.Refused() | schema.Expect() if parts == ("tables", self.table, "down"):
                try:  # heard once matched with what this table asked (_answers_worker)
                    self._down.put_nowait(msg)
                except asyncio.QueueFull:  # the answer comes again when the outbox is resent
                    log.warning("link answer dropped: queue full", seq=getattr(msg, "seq", None))
            case _:
                self._reject("bad_topic", "a link message on a topic it does not belong on: not acted on",
                             topic=topic, type=type(msg).__name__)

    def _fresh_heartbeat(self, at: str) -> bool:
        """A heartbeat says the authority is there now: its time within HEARTBEAT_WINDOW_S of this box's clock (the
        boxes keep NTP time), and not one heard already (the broker may hold heartbeats back and play them later,
        for as long as that window at most)."""
        try:
            sent = datetime.fromisoformat(at)
        except ValueError:
            return False
        if sent.tzinfo is None or abs((self.wall() - sent).total_seconds()) > HEARTBEAT_WINDOW_S:
            return False
        horizon = self.wall().timestamp() - HEARTBEAT_WINDOW_S
        self._heartbeats = {a: t for a, t in self._heartbeats.items() if t >= horizon}
        if at in self._heartbeats:
            return False
        self._heartbeats[at] = sent.timestamp()
        return True

    def _meter_value(self, msg: schema.MeterValue) -> None:
        """A linked meter's amount for the signs: never one under its reset, nor under the $10,000 floor, and
        never one older than shown (a value played back): newer in the journal, or sent later by an authority whose
        journal starts again (a restore)."""
        if msg.cents < max(msg.reset_cents, RESET_FLOOR_CENTS):
            self._reject("under_reset", "a linked meter's value under its reset amount: not shown", meter=msg.meter,
                         amount=msg.cents, reset=msg.reset_cents)
            return
        last = self.values.get(msg.meter)
        if last is not None and (msg.entry, msg.at) == (last.entry, last.at):
            return  # the value shown, again (the broker's retained copy at a new connection): not news of the authority
        if last is not None and msg.entry <= last.entry and msg.at <= last.at:
            self._reject("played_back", "a linked meter's value older than the one shown: not shown",
                         meter=msg.meter, entry=msg.entry, shown=last.entry)
            return
        if last is not None and msg.entry < last.entry:
            self._wins_seen.pop(msg.meter, None)  # the authority's journal started again: so do its entries
        self._heard()
        self.values[msg.meter] = msg
        for local, linked in self.linked.items():
            if linked == msg.meter:
                self.on_meter(local)

    def _heard(self) -> None:
        self.last_heard = self.clock()
        if not self.alive and self.mqtt is not None and self.mqtt.connected:
            self._set_alive(True)

    def _set_alive(self, up: bool) -> None:
        if up == self.alive:
            return
        self.alive = up
        (log.info if up else log.error)("link authority " + ("heard again" if up else "not heard"),
                                        table=self.table, timeout=self.timeout)
        self.on_alive(up)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(min(self.timeout / 4, 1.0))
            connected = self.mqtt is not None and self.mqtt.connected
            if self.alive and (not connected or self.last_heard is None
                               or self.clock() - self.last_heard > self.timeout):
                self._set_alive(False)

    async def _answers_worker(self) -> None:
        while True:
            msg = await self._down.get()
            if isinstance(msg, schema.Expect):
                if msg.hello not in self._hello_nonces:
                    self._reject("played_back", "an expect that answers no hello of this table: not taken",
                                 hello=msg.hello)
                    continue
                self._heard()
                self.authority_kinds = msg.kinds if msg.kinds is not None else schema.BASE_OPS
                self.approvers = msg.approvers
                self._floor_sent = None  # an authority (re)started, or this table reconnected: its line again
                if msg.anchor is not None:
                    self.on_anchor(msg.anchor)
                await self._resend()
                await self._send_anchor()
                continue
            sent = self.outbox.pending.get(msg.seq)
            if sent is None:
                continue  # answered before (a repeat)
            if msg.op != self._digest(sent):
                # Signed, but the answer to another operation under this number (one someone else sent first with
                # this table's credentials, or an old answer played back): this one is asked again.
                self._reject("not_our_operation", "the authority's answer is for another operation under this "
                             "number: not taken; the operation is sent again", seq=msg.seq)
                self._last_sent.pop(msg.seq, None)
                self._kick.set()
                continue
            self._heard()
            if isinstance(msg, schema.Ack) and sent.kind == "lock-percent-award" and \
                    msg.result.get("claim") != sent.body.get("claim"):
                self._reject("not_our_operation", "the authority's answer to a lock names another claim: not taken",
                             seq=msg.seq, claim=sent.body.get("claim"), answered=msg.result.get("claim"))
                continue
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


__all__ = ["FLOOR_EVERY_S", "FLOOR_REFRESH_S", "GOODBYE_TIMEOUT", "HEARTBEAT_WINDOW_S", "HELLO_EVERY_S", "HELLO_NONCES",
           "REJECT_LOG_EVERY_S", "RESEND_AFTER", "LinkRefused", "TableLink"]

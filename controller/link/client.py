"""A table's side of the link: its durable outbox, its MQTT session, and whether the authority is heard.

`TableLink` is the one entry the table daemon uses; it composes objects with one job each: the outbox sent in
order and its answers taken (controller.link.sender), the checks of what is heard (verify), whether the authority
is heard (heard), the linked meters' values and wins (meters), what the authority takes (terms), and the anchor
and floor line told to it (notices). An operation on a linked meter is journaled in the table's link journal
(``<state_dir>/link``) before it is sent, and sent again until the authority's answer is journaled as well: the
authority applies it once. While the authority is not heard within ``link_timeout`` the table stops recognizing
progressive wagers (58 Pa. Code 605a.8; New York 5321.18) and resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import structlog

from controller.config.model import MqttConfig
from controller.ledger import Ledger, software_digest
from controller.link.heard import HEARTBEAT_WINDOW_S, AuthorityHeard
from controller.link.meters import LinkedMeterValues
from controller.link.mqtt import PUBLISH_TIMEOUT, LinkDown, MqttLink, MqttSettings
from controller.link.notices import FLOOR_EVERY_S, FLOOR_REFRESH_S, Notices
from controller.link.outbox import Outbox, OutboxReducer
from controller.link.rejections import REJECT_LOG_EVERY_S, Rejections
from controller.link.sender import RESEND_AFTER, LinkRefused, OutboxSender
from controller.link.terms import HELLO_EVERY_S, HELLO_NONCES, AuthorityTerms
from controller.link.verify import Verification
from controller.linkproto import schema, signing
from controller.meter import ops as meter_ops

# Where each lived before the parts: imported from here by the daemon, its tests and benchmarks.
__all__ = ["FLOOR_EVERY_S", "FLOOR_REFRESH_S", "GOODBYE_TIMEOUT", "HEARTBEAT_WINDOW_S", "HELLO_EVERY_S",
           "HELLO_NONCES", "PUBLISH_TIMEOUT", "REJECT_LOG_EVERY_S", "RESEND_AFTER", "LinkRefused", "TableLink"]

log = structlog.get_logger("controller.link.client")

GOODBYE_TIMEOUT = 1.0  # seconds a clean stop waits for the broker to take the table's `offline`

T = TypeVar("T")


class _Kept(Generic[T]):
    """An attribute of TableLink that one of its parts keeps: read and set on the link, by the name it has always
    had (the daemon sets `floor`, the tests `wall`, `last_heard` and `authority_kinds`)."""

    def __init__(self, part: str, name: str | None = None) -> None:
        self.part, self.name = part, name or ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    @overload
    def __get__(self, link: None, owner: type) -> _Kept[T]: ...
    @overload
    def __get__(self, link: object, owner: type | None = None) -> T: ...
    def __get__(self, link: object, owner: type | None = None) -> T | _Kept[T]:
        if link is None:
            return self
        value: T = getattr(getattr(link, self.part), self.name)
        return value

    def __set__(self, link: object, value: T) -> None:
        setattr(getattr(link, self.part), self.name, value)


class TableLink:
    """A table's session with its link authority: the link journal opened and closed, the MQTT connection run,
    each message heard checked and handed to the part whose job it is, and what the daemon asks (send, journal,
    answer, status, accepts) answered through those parts."""

    # What the parts keep, read and set here as ever.
    ledger: _Kept[Ledger[Outbox] | None] = _Kept("sender")
    rejected: _Kept[dict[str, int]] = _Kept("rejections", "counts")
    on_rejected: _Kept[Callable[[str], None]] = _Kept("rejections")
    verifier: _Kept[signing.Verifier] = _Kept("verification")
    alive: _Kept[bool] = _Kept("heard")
    last_heard: _Kept[float | None] = _Kept("heard")
    wall: _Kept[Callable[[], datetime]] = _Kept("heard")
    on_alive: _Kept[Callable[[bool], None]] = _Kept("heard")
    values: _Kept[dict[str, schema.MeterValue]] = _Kept("meters")
    on_meter: _Kept[Callable[[str], None]] = _Kept("meters")
    on_win: _Kept[Callable[[schema.Win], None]] = _Kept("meters")
    authority_kinds: _Kept[frozenset[str]] = _Kept("terms", "kinds")
    approvers: _Kept[frozenset[str] | None] = _Kept("terms")
    anchor: _Kept[schema.JournalAnchor | None] = _Kept("notices")
    floor: _Kept[Callable[[], schema.FloorLine | None] | None] = _Kept("notices")

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
        self.clock = clock  # each part has it from here: the link's one clock
        self.mqtt: MqttLink | None = None
        self.opened = asyncio.Event()
        self.on_anchor: Callable[[schema.JournalAnchor], None] = lambda anchor: None  # the authority's, at expect
        self._ledger_options = ledger_options or {}
        self._tg: asyncio.TaskGroup | None = None  # run's: what runs beside the link (publishes, hellos) runs in it
        self._down: asyncio.Queue[schema.Ack | schema.Refused | schema.Expect] = asyncio.Queue(1024)
        self.rejections = Rejections(table, on_rejected)
        self.verification = Verification(table, mqtt.authority_keys, self.rejections)
        self.heard = AuthorityHeard(table, self.timeout, self.rejections, connected=self._connected, clock=clock,
                                    on_alive=on_alive)
        self.meters = LinkedMeterValues(self.linked, self.rejections, heard=self.heard.heard, on_meter=on_meter,
                                        on_win=on_win)
        self.terms = AuthorityTerms(table, self.rejections, clock=clock)
        self.notices = Notices(table, publish=self._publish, connected=self._connected, accepts=self.accepts,
                               clock=clock)
        self.sender = OutboxSender(table, self.linked, self.verification, publish=self._publish, spawn=self._spawn,
                                   heard=self.heard.heard, clock=clock)

    # --- lifecycle -----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (or create) the link journal; blocking, run it in a thread."""
        self.ledger = Ledger.open(self.state_dir, OutboxReducer(), software_digest=software_digest(),
                                  **self._ledger_options)

    def close(self) -> None:
        """Close the link journal (what waits in it is sent at the next start)."""
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
                tg.create_task(self.sender.resender(), name="link-resend")
                tg.create_task(self.heard.watch(), name="link-watch")
                tg.create_task(self.notices.floor_sender(), name="link-floor")
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
        return {"up": self.alive, "connected": self._connected(),
                "heard_seconds_ago": heard, "timeout_seconds": self.timeout,
                "waiting": len(box.pending) if box else None, "next_seq": box.next_seq if box else None,
                "rejected": dict(sorted(self.rejected.items()))}

    def accepts(self, kind: str) -> bool:
        """Whether the authority, as last heard, takes operations of `kind` (an older one takes BASE_OPS only)."""
        return self.terms.accepts(kind)

    @property
    def outbox(self) -> Outbox:
        """The outbox as journaled (the journal is open)."""
        return self.sender.outbox

    # --- what the daemon sends -------------------------------------------------------------------------

    async def send(self, op: meter_ops.Op, meter: str, key: str, approval: dict[str, str] | None = None) -> int:
        """Journal meter operation `op` on the table's linked meter `meter` and send it. Returns its sequence
        number once it is durable in the outbox; `answer(seq)` waits for the authority's outcome. A retry
        with the same key returns the same sequence number."""
        return await self.sender.send(op, meter, key, approval)

    def journal(self, op: meter_ops.Op, meter: str, key: str) -> int:
        """Journal meter operation `op` on the table's linked meter `meter` without sending it; blocking (at
        start-up, before `run`, or in a thread). Returns its sequence number once it is durable in the outbox:
        the link sends it with every pending operation once it runs (the resender, a new connection's hello).
        A retry with the same key returns the same sequence number."""
        return self.sender.journal(op, meter, key)

    async def answer(self, seq: int, timeout: float) -> dict[str, Any]:
        """The authority's result of operation `seq`; raises LinkRefused, or TimeoutError (it stays in the outbox
        and is applied when the authority is reached: the caller may wait again)."""
        return await self.sender.answer(seq, timeout)

    def send_anchor(self, anchor: schema.JournalAnchor) -> None:
        """Keep the head of the table's own journal off the box, at the authority (if it takes anchors: an older
        one would drop the message): sent now if connected, and again at each connection."""
        self.anchor = anchor
        if self._tg is not None:
            self._spawn(self.notices.send_anchor(), f"link-anchor:{anchor.seq}")

    async def send_floor(self) -> bool:
        """The table's floor line to an authority that takes it, if it changed since the last sent (or that is
        FLOOR_REFRESH_S old): QoS 0, not retained, never journaled; it moves no money. Whether one was sent."""
        return await self.notices.send_floor()

    # --- the connection ------------------------------------------------------------------------------

    def _connected(self) -> bool:
        return self.mqtt is not None and self.mqtt.connected

    def _spawn(self, coro: Coroutine[Any, Any, object], name: str) -> None:
        """Run `coro` in run's task group without waiting for it; when the link is not running or is stopping it
        is not run (what it would send is sent at the next connection: hello, expect, the resender)."""
        tg = self._tg
        if tg is None:
            coro.close()
            return
        try:
            tg.create_task(coro, name=name)
        except RuntimeError:  # the link is stopping
            coro.close()

    async def _publish(self, msg: schema.Message, qos: int = 1) -> bool:
        """`msg` on the table's up topic; whether the broker took it within PUBLISH_TIMEOUT."""
        if self.mqtt is None:
            return False
        try:
            await self.mqtt.publish(self.topics.up(self.table), schema.encode(msg), qos=qos, timeout=PUBLISH_TIMEOUT)
            return True
        except (LinkDown, TimeoutError):
            return False

    async def _on_connect(self) -> None:
        await self._publish(self.terms.hello(self.outbox.next_seq))

    async def _hello_later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self.terms.deferred_hello_due()
        await self._on_connect()

    # --- receiving -----------------------------------------------------------------------------------

    def _on_message(self, topic: str, payload: bytes) -> None:
        """A message heard: checked (verify), then handed to the part it is for, on the topic it belongs on."""
        msg = self.verification.message(topic, payload)
        if msg is None:
            return
        parts = self.topics.parse(topic)
        match msg:
            case schema.Status(state="offline"):
                self.heard.offline()
            case schema.Status(state="online"):
                # The authority (re)started, perhaps with another version or other approvers: hello again, so that
                # its `expect` says what it takes now (a status played back again and again: one).
                if self._tg is not None and self.terms.hello_due():
                    self._spawn(self._on_connect(), "link-hello")
                elif self._tg is not None and (wait := self.terms.defer_hello()) is not None:
                    self._spawn(self._hello_later(wait), "link-hello")
            case schema.Status():
                pass
            case schema.MeterValue() if parts == ("meters", msg.meter):
                self.meters.value(msg)
            case schema.Win() if parts == ("meters", msg.meter, "win"):
                self.meters.win(msg)
            case schema.Heartbeat() if parts == ("authority", "heartbeat"):
                self.heard.heartbeat(msg)
            case schema.Ack() | schema.Refused() | schema.Expect() if parts == ("tables", self.table, "down"):
                try:  # heard once matched with what this table asked (_answers_worker)
                    self._down.put_nowait(msg)
                except asyncio.QueueFull:  # the answer comes again when the outbox is resent
                    log.warning("link answer dropped: queue full", seq=getattr(msg, "seq", None))
            case _:
                self.rejections.reject("bad_topic", "a link message on a topic it does not belong on: not acted on",
                                       topic=topic, type=type(msg).__name__)

    async def _answers_worker(self) -> None:
        while True:
            msg = await self._down.get()
            if isinstance(msg, schema.Expect):
                await self._expected(msg)
            else:
                await self.sender.take(msg)

    async def _expected(self, msg: schema.Expect) -> None:
        """The authority's `expect` to a hello of this table: its terms taken, its anchor of the table's journal
        compared (on_anchor), and what it has not answered sent again, with the anchor and the floor line."""
        if not self.terms.answers_hello(msg):
            return
        self.heard.heard()
        self.terms.take(msg)
        self.notices.floor_again()
        if msg.anchor is not None:
            self.on_anchor(msg.anchor)
        await self.sender.resend()
        await self.notices.send_anchor()

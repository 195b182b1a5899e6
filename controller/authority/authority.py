"""The link authority: owns linked meters in its own ledger and applies the tables' operations exactly once.

`LinkAuthority` is the process's one entry (`progressived --role link`): it opens the journal, checks its anchor,
and composes the objects that do the work (docs/architecture.md, "The link authority"): the inbox of the tables'
messages (inbox.py), each table's operations applied once in its order (sequence.py), its liveness and floor line
(watch.py), its journal's anchors (table_anchors.py), the signed messages out (publisher.py), and the control
socket's operations (handlers.py) with the `status` view (views.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from controller import __version__
from controller.authority import handlers
from controller.authority.inbox import Inbox
from controller.authority.limited_log import LimitedLog, log
from controller.authority.metrics import AuthorityMetrics
from controller.authority.publisher import Publisher
from controller.authority.sequence import OperationSequence
from controller.authority.table_anchors import ANCHOR_PREFIX, AnchorKeeper
from controller.authority.views import Seen, status_json
from controller.authority.watch import TableWatch
from controller.errors import InputError
from controller.ledger import Ledger, software_digest
from controller.ledger.chain import utc_now
from controller.ledger.reader import JournalReader
from controller.link.journal_keys import last_link_seqs
from controller.link.mqtt import MqttLink, MqttSettings
from controller.linkproto import schema, signing
from controller.linkproto.anchors import TableAnchors
from controller.linkproto.liveness import Liveness
from controller.meter.journal import Meters, configure_meter
from controller.money import format_cents
from controller.round.journal import JournalReducer
from controller.service.anchoring import Anchoring
from controller.service.auth import SupervisorCheck
from controller.service.control import PEER, NotAvailable
from controller.service.reports import MeterSeries

if TYPE_CHECKING:
    from controller.config.authority import AuthorityConfig

HOLD_CHECK_S = 1.0  # how often an authority proves it still holds a journal on PostgreSQL
# How long that proof may wait behind a write: a leader that lost its standby commits alone within a few of
# Patroni's loops (2 s each); a write waiting longer is on a server that will not acknowledge it.
HOLD_STALL_S = 15.0


class LinkAuthority:
    """The link authority's process. `run` is its start-up (`_start_up`: the journal opened, the configuration's
    meters defined in it, its anchor checked, what it holds of the tables read back), its serving (`_serve`: the
    broker's session, the tables' messages, the meters' values, the heartbeat, the anchors) and its shutdown
    (`_shut_down`: the journal closed and anchored at its final head). `call` answers its control socket."""

    def __init__(self, cfg: AuthorityConfig, *, settings: MqttSettings | None = None,
                 registry: CollectorRegistry | None = None,
                 ledger_options: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        self.topics = schema.Topics(cfg.mqtt.topic_prefix)
        # Everything the authority publishes is signed (controller.linkproto.signing): tables act on nothing else.
        if cfg.signing_key is None:
            raise InputError("signing_key_file", "is required: the tables act only on what the authority signs")
        self.signer = signing.Signer(cfg.signing_key)
        offline = self.signer.seal(self.topics.status, schema.encode(schema.Status(cfg.authority, "offline")))
        settings = settings if settings is not None else MqttSettings.from_config(cfg.mqtt)
        self.settings = replace(settings, will=(self.topics.status, offline, True))
        self.metrics = AuthorityMetrics(registry)
        self.notes = LimitedLog(self.metrics.dropped)
        self.watch = TableWatch(cfg.tables, self.metrics, self.notes)  # each table online or OFFLINE, its last answer
        # Who approves payments from the linked meters (name -> approval key): none listed, none is paid.
        self.approvers: Mapping[str, bytes] = cfg.approvers
        self.series = MeterSeries(cfg.journal or cfg.state_dir, cfg.report)
        self.ready = asyncio.Event()
        # Set while the journal (on PostgreSQL) is another authority's: this one waits for it, a standby, and answers
        # no table until it holds it (`standby_reason` says why it waits).
        self.standby = asyncio.Event()
        self.standby_reason = ""
        self._stop_waiting = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.metrics.active.set(0)
        self._ledger_options = ledger_options or {}
        self._started = time.monotonic()
        # Made in `run`:
        self.ledger: Ledger[Meters] | None = None
        self.keys: JournalReader | None = None
        self.anchoring: Anchoring | None = None
        self.keeper: AnchorKeeper | None = None
        self.supervisors: SupervisorCheck | None = None  # who may log in to the console: none listed, nobody can
        self.mqtt: MqttLink | None = None
        self.publisher: Publisher | None = None
        self.sequence: OperationSequence | None = None
        self.inbox: Inbox | None = None

    # --- what the tests and the console read ---------------------------------------------------------------

    @property
    def tables(self) -> tuple[str, ...]:
        return self.cfg.tables

    @property
    def liveness(self) -> Liveness:
        return self.watch.liveness

    @property
    def floor(self) -> dict[str, tuple[schema.FloorLine, float]]:
        """table -> its last floor line and when it came: display only, never money (docs/security.md)."""
        return self.watch.floor

    @property
    def next_seq(self) -> dict[str, int]:
        """table -> the number of its next operation (none before the start)."""
        return self.sequence.next_seq if self.sequence is not None else {}

    @property
    def anchors(self) -> dict[str, schema.JournalAnchor]:
        """table -> the reference anchor of its journal."""
        return self.keeper.reference if self.keeper is not None else {}

    @property
    def held(self) -> dict[str, TableAnchors]:
        """table -> its reference and the anchor kept aside."""
        return self.keeper.held if self.keeper is not None else {}

    # --- start-up, serving, shutdown ----------------------------------------------------------------------

    async def run(self) -> None:
        """Start up, serve until cancelled, shut down."""
        next_seq = await self._start_up()
        try:
            async with asyncio.TaskGroup() as tg:
                self._serve(tg, next_seq)
        finally:
            self._shut_down()

    def _open(self) -> tuple[Ledger[Meters], JournalReader, AnchorKeeper, dict[str, int]]:
        """In a thread: the journal opened, the configuration's meters defined or changed in it (a change is refused
        while any linked table has a round open or a lock pending), each table's next number and anchors read."""
        led = Ledger.open(self.cfg.state_dir, JournalReducer(), software_digest=software_digest(),
                          journal_url=self.cfg.journal, stop=self._stop_waiting, on_standby=self._on_standby,
                          **self._ledger_options)
        keys = None
        try:
            for m in self.cfg.meters.values():
                try:
                    done = configure_meter(led, m.params, self.cfg.authority,
                                           f"configuration {self.cfg.source.name}", utc_now())
                except InputError as e:
                    log.error("linked meter parameters not changed", meter=m.id, error=str(e))
                    continue
                if done == "defined":
                    log.info("linked meter defined", meter=m.id, reset=format_cents(m.params.reset_cents))
                elif done == "changed":
                    log.warning("linked meter parameters changed by the configuration", meter=m.id)
            keys = JournalReader(led.journal)
            next_seq = {t: n + 1 for t, n in last_link_seqs(keys).items()}
            keeper = AnchorKeeper(led, self.cfg.tables, self.metrics, self.notes)
            keeper.replay(keys.entries(ANCHOR_PREFIX))
        except BaseException:
            if keys is not None:
                keys.close()
            led.close()
            raise
        return led, keys, keeper, next_seq

    def _on_standby(self, why: str) -> None:
        """From the opening thread: the journal is another authority's (or its server cannot be reached)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody to tell
                self._loop.call_soon_threadsafe(self._standing_by, why)

    def _standing_by(self, why: str) -> None:
        self.standby_reason = why
        self.metrics.active.set(0)
        self.standby.set()

    async def _open_journal(self) -> tuple[Ledger[Meters], JournalReader, AnchorKeeper, dict[str, int]]:
        """_open in a thread; cancelled (a standby stopped), its wait is ended and what it opened closed."""
        self._loop = asyncio.get_running_loop()
        opening = asyncio.ensure_future(asyncio.to_thread(self._open))
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            self._stop_waiting.set()
            try:
                led, keys, _keeper, _next = await opening
            except BaseException:  # noqa: BLE001 - the wait ended (LedgerClosed), or opening failed: nothing open
                raise asyncio.CancelledError() from None
            keys.close()
            led.close()
            raise

    async def _start_up(self) -> dict[str, int]:
        """The journal opened (on PostgreSQL: once this authority holds it) and its anchor checked (a journal rolled
        back or rewritten is refused here: closed again), and anchored at the start; each table's next number."""
        led, keys, keeper, next_seq = await self._open_journal()
        self.standby.clear()
        self.metrics.active.set(1)
        a = self.cfg.anchor
        self.anchoring = Anchoring(led, a.file_for(self.cfg.state_dir), a.key_file, table=self.cfg.authority,
                                   metrics=self.metrics.anchors, syslog=a.syslog)
        try:
            await asyncio.to_thread(self.anchoring.check)
            await self.anchoring.anchor("start")
        except BaseException:
            led.close()
            keys.close()
            raise
        self.ledger, self.keys, self.keeper = led, keys, keeper
        self.watch.resumed(next_seq)
        for mid, s in led.state.items():
            self.metrics.meter_cents.labels(mid).set(s.current_cents)
        self.mqtt = MqttLink(self.settings, (self.topics.all_up,), ignore_retained=True)
        if self.cfg.supervisors:  # their secrets checked off the loop, one at a time, throttled, as at a table
            self.supervisors = SupervisorCheck(self.cfg.supervisors, self.metrics.auth)
        return next_seq

    def _serve(self, tg: asyncio.TaskGroup, next_seq: dict[str, int]) -> None:
        """The publisher, the sequence of each table's operations and the inbox built on the journal; the broker's
        session, the meters' values, the heartbeat and the anchors run in `tg`."""
        assert self.ledger is not None and self.keys is not None and self.keeper is not None
        assert self.anchoring is not None and self.mqtt is not None
        self.publisher = publisher = Publisher(self.cfg.authority, self.ledger, self.signer, self.topics,
                                               self.metrics, tg, heartbeat=self.cfg.heartbeat,
                                               meter_interval=self.cfg.meter_interval)
        publisher.mqtt = self.mqtt  # every meter's value published at each connection
        anchoring = self.anchoring

        def anchor_payment() -> None:
            coro = anchoring.anchor_or_alert("payment")
            try:
                tg.create_task(coro, name="anchor:payment")
            except RuntimeError:  # stopping: the close anchors the final head
                coro.close()

        # `_reply` late-bound: the one way an answer leaves, replaceable on the instance (a lost answer)
        self.sequence = seq = OperationSequence(
            self.ledger, self.keys, next_seq, approvers=self.approvers, metrics=self.metrics, notes=self.notes,
            watch=self.watch, reply=lambda table, msg: self._reply(table, msg), reference=self.keeper.reference.get,
            published=lambda meter, win: publisher.changed((meter,), win), anchor_payment=anchor_payment)
        self.inbox = inbox = Inbox(self.cfg.tables, self.topics, self.metrics, self.notes, self.watch, tg,
                                   on_op=seq.apply, on_hello=seq.hello, on_anchor=self.keeper.keep)
        tg.create_task(self.mqtt.run(inbox.on_message, publisher.connected), name="mqtt")
        tg.create_task(publisher.run_meters(), name="meters")
        tg.create_task(publisher.run_heartbeat(), name="heartbeat")
        tg.create_task(anchoring.run(), name="anchor")
        if self.ledger.engine == "postgresql":
            tg.create_task(self._hold_journal(self.ledger), name="journal")
        self.ready.set()
        log.info("link authority ready", authority=self.cfg.authority, meters=sorted(self.ledger.state),
                 tables=list(self.cfg.tables))

    async def _hold_journal(self, led: Ledger[Meters]) -> None:
        """Every HOLD_CHECK_S, that this authority still holds the journal on PostgreSQL: one that lost its session
        (and the journal's lock with it) while no operation came stops at once (the ledger's fatal hook), before it
        says anything more to the tables or to the broker, where another authority now serves."""
        while True:
            await asyncio.sleep(HOLD_CHECK_S)
            try:  # raises when the session is gone: the task group ends
                await asyncio.wait_for(asyncio.wrap_future(led.check_session()), HOLD_STALL_S)
            except TimeoutError:
                # The check waits behind a write that its server does not acknowledge: a primary whose synchronous
                # standby follows another one now (its Patroni hung). Its session answers, so nothing else shows it;
                # stop, instead of telling the tables the authority is alive while it can answer nothing.
                log.error("journal writer stuck: stopping", seconds=HOLD_STALL_S)
                led.give_up(f"a write waited over {HOLD_STALL_S:g} s for its server's acknowledgement")
                raise

    def _shut_down(self) -> None:
        """The journal closed and anchored at its final head (not in a thread: a second cancellation must not leave
        it half closed), the supervisors' checks stopped."""
        led, self.ledger = self.ledger, None
        if self.keys is not None:
            self.keys.close()
        if led is not None:
            led.close()
            if led.failed is None and self.anchoring is not None:
                try:
                    self.anchoring.anchor_now("close")  # the final head, checkpoint included
                except OSError as e:
                    log.error("journal anchor not written at close", error=e.strerror or str(e))
        if self.anchoring is not None:
            self.anchoring.close()
        if self.supervisors is not None:
            self.supervisors.close()
            self.supervisors = None

    async def _reply(self, table: str, msg: schema.Message) -> None:
        """An answer to `table` (controller.authority.publisher: sent without holding up its next operation)."""
        if self.publisher is not None:
            await self.publisher.reply(table, msg)

    # --- the control socket --------------------------------------------------------------------------------

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """The authority's control socket (handlers.py): reads, a supervisor's login for the console, and the
        clearing of a planted anchor on a supervisor's secret (docs/operations.md). Nothing on it moves a meter."""
        return await handlers.call(self, op, args)

    async def supervisor(self, args: dict[str, Any]) -> str:
        """The supervisor's name if the secret is theirs (controller.service.auth, as at a table); PermissionError
        otherwise."""
        if self.supervisors is None:
            raise NotAvailable("no supervisors are configured at the authority: nobody can log in to its console "
                               "(supervisors_file in its configuration)")
        return await self.supervisors.check(args.get("supervisor"), args.get("secret"), PEER.get().get("peer_uid"))

    def status(self) -> dict[str, Any]:
        """The authority, its meters and every configured table as it knows them (docs/operations.md)."""
        assert self.ledger is not None
        seen = Seen(self.liveness.tables, self.anchors, self.held, self.floor)
        return status_json(self.cfg.authority, __version__, bool(self.mqtt is not None and self.mqtt.connected),
                           self.cfg.report.time_zone, self.ledger.state, self.ledger.head.seq, seen,
                           time.monotonic() - self._started)

    def meter_value(self, mid: str) -> schema.MeterValue:
        """A linked meter's value as the authority publishes it."""
        assert self.publisher is not None
        return self.publisher.meter_value(mid)


__all__ = ["LinkAuthority"]

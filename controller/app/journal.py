"""The round's journal at a card table: what ending or starting a round writes to the meters (bookings at
lock-out, reversals at a void, closes at a settle), through each meter's port (meter_port.py), with their
metrics; what only a supervisor lifts (TABLE_STATE: a deck block, a void asked for), so that a restart does not
lift it; and, at start-up, the journal opened with the table's meters defined, and the reversal of a lock-out
booked on only some of its meters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import structlog

from controller.app import linked
from controller.app.claim_desk import ClaimDesk
from controller.app.linked import LinkedMeterView
from controller.app.meter_port import Meters
from controller.app.metrics import Metrics
from controller.app.setup import standalone_meters
from controller.cards import card_str
from controller.config.model import TableConfig
from controller.errors import InputError
from controller.ledger import Ledger, software_digest
from controller.ledger.chain import utc_now
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import JournalReader
from controller.link.client import TableLink
from controller.meter import MeterState
from controller.meter import ops as meter_ops
from controller.meter.journal import Meters as MeterStates
from controller.meter.journal import configure_meter, op_body
from controller.money import UNITS_PER_CENT, format_cents, parse_units
from controller.positions import position_name
from controller.round import model as rm
from controller.round.journal import TABLE_STATE, JournalReducer
from controller.round.resume import Kept

log = structlog.get_logger("table")

Spawn = Callable[..., asyncio.Task[Any]]  # the daemon's guarded spawn(coro, name, *, fatal=False)


def open_ledger(cfg: TableConfig) -> Ledger[MeterStates]:
    """The table's journal, with each of its meters the journal does not have yet created; a meter whose
    parameters the configuration changed gets a recorded parameter change (refused while one of its rounds is
    open). Blocking: run it in a thread."""
    led = Ledger.open(cfg.state_dir, JournalReducer(), software_digest=software_digest())
    try:
        for m in standalone_meters(cfg):
            done = configure_meter(led, m.params, cfg.table, f"configuration {cfg.source.name}", utc_now())
            if done == "defined":
                log.info("meter defined", meter=m.id, reset=format_cents(m.params.reset_cents))
            elif done == "changed":
                log.warning("meter parameters changed by the configuration", meter=m.id)
    except BaseException:
        led.close()
        raise
    return led


class RoundJournal:
    """Writes a round's bookings, reversals and closes (each in its own task, whose answer goes back to the round
    machine through `apply`) and the table's kept state. `booked`: round id -> the meters booked; `writes`: round
    id -> the task writing its close or reversal (a settle or a void waits for it: `durable`)."""

    def __init__(self, cfg: TableConfig, metrics: Metrics, ledger: Ledger[MeterStates], meters: Meters,
                 desk: ClaimDesk, link: TableLink | None, *, spawn: Spawn, apply: Callable[[rm.Input], None],
                 show_meters: Callable[[], None]) -> None:
        self.cfg, self.metrics, self.ledger, self.meters, self.desk, self.link = cfg, metrics, ledger, meters, desk, link
        self._spawn, self._apply, self._show_meters = spawn, apply, show_meters
        self.booked: dict[str, tuple[str, ...]] = {}
        self.writes: dict[str, asyncio.Task[Any]] = {}
        self.kept = Kept()  # what only a supervisor lifts, as last journaled (TABLE_STATE)
        self._kept_no = 0  # the number of the last TABLE_STATE record
        self._kept_write: asyncio.Task[Any] | None = None

    # --- start-up (blocking: run in a thread) --------------------------------------------------------

    def undo_partial_bookings(self) -> None:
        """A lock-out booked on only some of its meters (the controller stopped between two journal entries) never
        completed: dealing waits for the whole booking, so the round was not dealt. What it booked is reversed,
        as a void returns every wager, and betting opens on the next round. The table's own meters and its linked
        meters alike: a booking on a linked meter is in the link journal, and its reversal is journaled there
        (the link sends it to the authority once it runs). Blocking: run it in a thread, before the link runs."""
        meters: dict[str, MeterState | LinkedMeterView] = {**self.ledger.state, **linked.resume_views(self.link)}

        def never_booked(m: str, rid: str) -> bool:
            # Open there, or ended there (closed or voided: a stop between two closes or voids of one round is
            # not an unfinished lock-out; `resume` leaves such a round open for the dealer to settle or void).
            st = meters.get(m)
            return st is None or (rid not in st.open_rounds and rid not in st.recent_rounds)

        for meter, st in sorted(meters.items()):
            for rid in sorted(st.open_rounds):
                missing = [m for m in st.open_rounds[rid].round_meters if never_booked(m, rid)]
                if not missing:
                    continue
                op = meter_ops.VoidRound(rid, utc_now(), f"lock-out not completed: not booked on {', '.join(missing)} "
                                                        "when the controller stopped")
                key = f"{rid}:void:{meter}"
                if self.link is not None and meter in self.link.linked:
                    self.link.journal(op, meter, key)
                else:
                    self.ledger.submit(op.kind, op_body(meter, op), key)
                log.warning("partial booking reversed", round=rid, meter=meter, missing=missing)

    def read_kept(self) -> Kept:
        """The last TABLE_STATE record, now `kept`."""
        with JournalReader(self.ledger.db_path) as r:
            records = r.entries(f"{TABLE_STATE}:")
        if records:
            key, found = records[-1]
            asked = found.body["void_requested"] or {}
            self.kept = Kept(frozenset(found.body["deck"]), asked.get("round_id"), asked.get("reason"))
            self._kept_no = int(key.rsplit(":", 1)[1])
        return self.kept

    # --- what only a supervisor lifts ----------------------------------------------------------------

    def keep(self, s: rm.TableState, rid: str) -> None:
        """Journal what only a supervisor lifts when it changed (a deck block, a void asked for), so that a
        restart does not lift it."""
        kept = Kept(frozenset(s.blocks.get(rm.Block.DECK, frozenset())), rid if s.void_requested else None,
                    s.void_requested)
        if kept == self.kept:
            return
        self.kept, self._kept_no = kept, self._kept_no + 1
        body = {"deck": sorted(kept.deck), "void_requested": None if kept.void_round is None else
                {"round_id": kept.void_round, "reason": kept.void_reason}}
        self._kept_write = self._spawn(self.ledger.submit_async(TABLE_STATE, body, f"{TABLE_STATE}:{self._kept_no}"),
                                       f"table-state:{self._kept_no}", fatal=True)

    async def kept_durable(self) -> None:
        if self._kept_write is not None:
            await asyncio.shield(self._kept_write)

    # --- bookings, reversals, closes -----------------------------------------------------------------

    def write(self, e: rm.Book | rm.Reverse | rm.Close) -> None:
        """Carry out a write the round machine asked for, in the background."""
        match e:
            case rm.Book():
                self._spawn(self._book(e), f"book:{e.round_id}", fatal=True)
            case rm.Reverse():
                self.writes[e.round_id] = self._spawn(self._reverse(e), f"void:{e.round_id}", fatal=True)
            case rm.Close(round_id=rid):
                self.writes[rid] = self._spawn(self._close(rid), f"close:{rid}", fatal=True)

    async def durable(self, rid: str) -> None:
        """Wait until the journal holds what ending round `rid` wrote (its close or its reversal)."""
        task = self.writes.pop(rid, None)
        if task is not None:
            await asyncio.shield(task)

    async def _submit(self, op: meter_ops.Op, meter: str, key: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        result = await self.meters.port(meter).submit(op, meter, key)
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        return result

    async def _book(self, e: rm.Book) -> None:
        now = utc_now()
        drawing = {w.meter for w in self.cfg.wagers.values() if w.wager.magic_and_lucky and w.meter}
        writes = []
        for meter, wagers in e.wagers.items():
            draws = {"magic_card": e.magic_card, "lucky_seat": e.lucky_seat} if meter in drawing else {}
            op = meter_ops.BookContributions(e.round_id, self.cfg.table, wagers, now, **draws,
                                             on_dealer=tuple(e.on_dealer.get(meter, ())),
                                             round_meters=tuple(e.wagers) if len(e.wagers) > 1 else ())
            writes.append(self._submit(op, meter, f"{e.round_id}:book:{meter}"))
        # Every meter's booking queued before any is awaited: the journal's writer commits what is queued together
        # in one transaction, so the round is on disk after one fsync, not one a meter. Each booking names the
        # round's meters: one found without the others at a start is reversed (undo_partial_bookings).
        results = await asyncio.gather(*writes)
        for meter, result in zip(e.wagers, results, strict=True):
            if "contributed" in result:  # a linked meter's is counted at its authority
                contributed = parse_units(result["contributed"], "contributed")
                self.metrics.contributions.labels(meter).inc(contributed // UNITS_PER_CENT)
        log.info("round booked", round=e.round_id, meters=sorted(e.wagers),
                 amounts={m: format_cents(s.current_cents) for m, s in sorted(self.ledger.state.items())},
                 **({"magic_card": card_str(e.magic_card)} if e.magic_card is not None else {}),
                 **({"lucky_seat": position_name(e.lucky_seat)} if e.lucky_seat is not None else {}))
        # the WAL folded while dealing, not inside the COMMIT of a later press's booking
        self.ledger.wal_checkpoint().add_done_callback(self._wal_folded)
        self.booked[e.round_id] = tuple(sorted(e.wagers))
        self._apply(rm.Booked(e.round_id))
        self._show_meters()

    def _wal_folded(self, done: Future[tuple[int, int, float]]) -> None:
        """In the ledger's writer thread (the metrics are thread-safe); a failure is the writer's to report."""
        if not done.cancelled() and done.exception() is None:
            self.metrics.wal_checkpoint.observe(done.result()[2])

    async def _reverse(self, e: rm.Reverse) -> None:
        """Reverse a voided round's booking on each meter, after its claims have ended (their locks given back:
        the authority reverses no round with an award locked). A meter that refuses (an award was paid) sends
        the round back to dealing, with the reason logged."""
        await self.desk.idle()
        await self._release_unsettled_locks(e.round_id, "the round was voided")
        now = utc_now()
        for meter in e.meters:
            op = meter_ops.VoidRound(e.round_id, now, e.reason)
            try:
                await self._submit(op, meter, f"{e.round_id}:void:{meter}")
            except KeyConflict:
                log.warning("round reversed on the meter before", round=e.round_id, meter=meter)
            except InputError as err:  # RulesError: an award was paid in the round
                log.error("void refused by the meter: the round is dealt again", round=e.round_id, meter=meter,
                          error=str(err))
                self._apply(rm.VoidRefused(e.round_id, str(err)))
                return
        self.booked.pop(e.round_id, None)
        self.metrics.rounds.labels("voided").inc()
        self._apply(rm.Voided(e.round_id))
        self._show_meters()

    async def _close(self, rid: str) -> None:
        await self.desk.idle()
        await self._release_unsettled_locks(rid, "the round was settled without the claim's approval")
        now = utc_now()
        for meter in self.booked.pop(rid, ()):
            try:
                await self._submit(meter_ops.CloseRound(rid, now), meter, f"{rid}:close:{meter}")
            except KeyConflict:
                log.warning("round closed on the meter before", round=rid, meter=meter)
            except InputError as err:  # it stays open there: a restart resumes it, to be settled again
                log.error("close refused by the meter", round=rid, meter=meter, error=str(err))
        self.metrics.rounds.labels("closed").inc()

    async def _release_unsettled_locks(self, rid: str, reason: str) -> None:
        """Awards of round `rid` still locked at the link authority that no claim of the desk holds (a journal
        of an older version) go back to the meter before the round ends: the authority ends no round with one."""
        if self.link is None:
            return
        for lock_id, (meter, lock_round) in sorted(self.link.outbox.locks.items()):
            if lock_round == rid:
                op = meter_ops.ReleaseLockedAward(lock_id, "controller", reason, utc_now())
                await self._submit(op, meter, f"{lock_id}:release")
                log.warning("locked award released", lock=lock_id, reason=reason)


__all__ = ["RoundJournal", "open_ledger"]

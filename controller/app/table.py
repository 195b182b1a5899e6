"""The card table daemon: devices in, round machine, claim desk, ledger and device outputs out.

One task owns the round state: every input (a device event, a ledger acknowledgement, a request on the
control socket) goes through `apply`, which runs the pure step of controller.round.machine and then schedules
its effects without waiting on them. Effects that reach the disk (bookings, reversals, closes) run as tasks
that feed their acknowledgement back in as the next input; effects that reach devices are desired states that
each device's sender delivers (outputs.py). Jackpot claims belong to the claim desk (claim_desk.py); the sign
to its owner (sign.py); what every table daemon shares to the shell (shell.py). Nothing a device does can stop
the daemon: driver tasks swallow their own faults, and a storage error stops the process (the ledger's fatal
hook) so that systemd starts it again from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from drivers import events as ev
from drivers.device import Device
from drivers.modbus.schedule import Phase as BusPhase

from .. import __version__
from ..cards import card_str, cards_str, parse_cards
from ..config.model import TableConfig
from ..errors import InputError, RulesError
from ..ledger import Ledger, software_digest
from ..ledger.anchor import Anchor
from ..ledger.chain import format_time, utc_now
from ..ledger.errors import KeyConflict
from ..ledger.reader import Found, JournalReader, lookup
from ..link.schema import FloorLine, JournalAnchor, Win
from ..meter import MeterState
from ..meter import ops as meter_ops
from ..meter_ledger import DEAL, TABLE_STATE, MetersReducer, configure_meter, op_body
from ..meter_ledger import Meters as MeterStates
from ..money import UNITS_PER_CENT, format_cents, parse_units
from ..positions import position_name
from ..report.build import TABLE, Source
from ..round import claim_machine as cm
from ..round import detect, machine
from ..round import model as rm
from ..round.resume import Kept, resume
from . import linked, logs
from .anchoring import Anchoring
from .claim_desk import ClaimDesk, RoundView
from .control import PEER
from .fault_journal import FaultJournal
from .linked import LinkedMeterView
from .meter_port import LinkedMeters, LocalMeters, Meters
from .metrics import Metrics
from .operations import check_arguments
from .reports import DayReports, MeterSeries
from .sdnotify import Notifier
from .setup import award_spots, standalone_meters, table_rules
from .shell import ControlFactory, TableShell, close_buses
from .views import hit_json, hit_kind, meter_json, meter_titles, table_json

if TYPE_CHECKING:
    from drivers.modbus.bus import ModbusBus

log = structlog.get_logger("table")

DEAL_SETTLED_S = 3.0  # a complete deal from the card-reading shoe is claimed if no card more comes this long
DETECTED_CLAIM_S = 8.0  # how long a settle waits for the shoe's detected hits to be claimed (the CLI waits 10 s)
CLAIM_RECHECK_S = 0.25  # a detected hit waiting for another claim's verification looks again this often
FIRST_CARD = ":first"  # `{round}:deal:first`: a deal began (journaled at its first card)
DROPPED = ":dropped"  # `{round}:deal:dropped`: a card more came after the claims of its hits began


class Detected:
    """The hits the card-reading shoe detected in a complete deal of round `rid`, `dealt` cards long, and how far
    their claims have got: claimed in order, `next` the first not claimed yet; `now` claims them without waiting
    for DEAL_SETTLED_S (the dealer settles: the deal is over); `moved` is set at every step. `restored`: read again
    from the journal at a restart (its wait passed before the stop; hits the shoe claimed before are left)."""

    def __init__(self, rid: str, dealt: int, hits: tuple[detect.Hit, ...], *, restored: bool = False) -> None:
        self.rid, self.dealt, self.hits, self.restored = rid, dealt, hits, restored
        self.next = 0
        self.end = ""  # how the claiming ended: "claimed" (each hit), "dropped" (the deal or the round changed),
        # "failed" (an error: the hits left still hold the settle)
        self.blocked = False  # the next hit waits for a claim before it to be settled (one at a time)
        self.now = asyncio.Event()
        self.moved = asyncio.Event()

    @property
    def over(self) -> bool:
        return bool(self.end)

    @property
    def left(self) -> tuple[detect.Hit, ...]:
        """The hits not claimed yet that still hold the settle."""
        return self.hits[self.next:] if self.end in ("", "failed") else ()

    def step(self, *, to: int | None = None, end: str = "", blocked: bool = False) -> None:
        if to is not None:
            self.next = to
        self.end = self.end or end
        self.blocked = blocked
        self.moved.set()


SHOE_JAM = "shoe jam (§ 667a.13(e))"


class TableDaemon(TableShell):
    def __init__(self, cfg: TableConfig, devices: dict[str, Device], *, buses: dict[str, ModbusBus] | None = None,
                 metrics: Metrics | None = None, notifier: Notifier | None = None,
                 control: ControlFactory | None = None,
                 draw: Callable[[int], int] = secrets.randbelow, clock: Callable[[], datetime] = utc_now) -> None:
        super().__init__(cfg, devices, buses=buses, metrics=metrics, notifier=notifier, control=control)
        self.rules = table_rules(cfg)
        self.metrics.percent_award_chances(award_spots(cfg, self.rules))
        self._draw = draw
        self.clock = clock  # the gaming day's (tests move it)
        self.series = MeterSeries(cfg.state_dir, cfg.report, clock=clock)
        self.ledger: Ledger[MeterStates] | None = None
        self.anchoring: Anchoring | None = None
        self.faults: FaultJournal | None = None  # device faults and blocks into the journal
        self.meters: Meters | None = None
        self.desk: ClaimDesk | None = None
        self.state: rm.TableState | None = None
        self._booked: dict[str, tuple[str, ...]] = {}  # round id -> meters booked
        self._writes: dict[str, asyncio.Task[Any]] = {}  # round id -> the task writing its close or reversal
        self._lock_pressed_at: float | None = None
        self._press_window_from: float | None = None  # the lock-out read before the press (drivers' LockoutPressed)
        self._not_recognized = 0
        self._cards: list[int] = []
        self._changed = asyncio.Event()  # set and replaced at every change of the round or its claims
        self._detected: Detected | None = None  # the shoe's hits of the last complete deal, and their claims
        self._deal_unknown: str | None = None  # a round dealt across a restart before its deal was complete
        self._kept = Kept()  # what only a supervisor lifts, as last journaled (TABLE_STATE)
        self._kept_no = 0  # the number of the last TABLE_STATE record
        self._kept_write: asyncio.Task[Any] | None = None
        # Linked meters (§ 605a.8) live at the link authority; this table keeps a durable outbox for them.
        self.link = linked.make_link(cfg, on_alive=self._link_alive, on_meter=lambda _m: self._show_meters(),
                                     on_win=self._link_win,
                                     on_rejected=lambda reason: self.metrics.link_rejected.labels(reason).inc())
        if self.link is not None:  # what the floor view at the authority shows of this table (display only)
            self.link.floor = self._floor_line
        logs.set_table_context(table=cfg.table)

    # --- start-up ----------------------------------------------------------------------------------

    def _open_ledger(self) -> Ledger[MeterStates]:
        led = Ledger.open(self.cfg.state_dir, MetersReducer(), software_digest=software_digest())
        try:
            self._define_meters(led)
        except BaseException:
            led.close()
            raise
        return led

    def _define_meters(self, led: Ledger[MeterStates]) -> None:
        """Create each of the table's meters the journal does not have yet; a meter whose parameters the
        configuration changed gets a recorded parameter change (refused while one of its rounds is open)."""
        for m in standalone_meters(self.cfg):
            done = configure_meter(led, m.params, self.cfg.table, f"configuration {self.cfg.source.name}", utc_now())
            if done == "defined":
                log.info("meter defined", meter=m.id, reset=format_cents(m.params.reset_cents))
            elif done == "changed":
                log.warning("meter parameters changed by the configuration", meter=m.id)

    async def run(self) -> None:
        self.ledger = await asyncio.to_thread(self._open_ledger)
        try:
            a, link = self.cfg.anchor, self.link
            send = None if link is None else (lambda x: link.send_anchor(
                JournalAnchor(self.cfg.table, x.seq, x.hash, x.at, x.mac)))
            self.anchoring = anchoring = Anchoring(self.ledger, a.file_for(self.cfg.state_dir), a.key_file,
                                                   table=self.cfg.table, metrics=self.metrics.anchors,
                                                   syslog=a.syslog, send=send)
            if link is not None:
                def compare(theirs: JournalAnchor) -> None:
                    with contextlib.suppress(RuntimeError):  # stopping: compared at the next start
                        self.spawn(anchoring.compare(Anchor(theirs.seq, theirs.hash, theirs.at, theirs.mac)),
                                   "anchor-compare")
                link.on_anchor = compare
            await asyncio.to_thread(self.anchoring.check)  # a journal rolled back or rewritten: refused here
            faults = FaultJournal(self.ledger)
            await asyncio.to_thread(faults.start)
            self.faults = faults
            if self.link is not None:
                await asyncio.to_thread(self.link.open)
            self.meters = Meters(LocalMeters(self.ledger), LinkedMeters(self.link) if self.link is not None else None)
            async with asyncio.TaskGroup() as tg:
                self._tasks = tg
                self.desk = ClaimDesk(self.cfg, self.rules, self.meters, self.ledger, round_now=self._round_view,
                                      win_light=self.win_light, sign=self.sign, metrics=self.metrics,
                                      spawn=self.spawn, on_change=self._claims_changed, on_paid=self._paid)
                self._outputs_at_start()
                await asyncio.to_thread(self._undo_partial_bookings)
                self._kept, self._kept_no = await asyncio.to_thread(self._journaled_kept)
                meters: dict[str, MeterState | LinkedMeterView] = {**self.ledger.state,
                                                                  **linked.resume_views(self.link)}
                resumed = resume(self.rules, meters, self._kept)
                if resumed.open_round is not None:
                    rid = resumed.open_round
                    self._booked[rid] = tuple(sorted(m for m, s in meters.items() if rid in s.open_rounds))
                    logs.set_table_context(table=self.cfg.table, round=rid)
                    log.warning("round was open when the controller stopped: settle or void it", round=rid)
                    self._after_step(resumed.step)
                    await self.desk.restore(rid)
                    await self._restore_deal(rid)
                else:
                    self._after_step(resumed.step)
                if self.link is not None:
                    if not self.link.alive:  # until the authority is heard: no progressive wagers
                        self.apply(rm.BlockRaised(rm.Block.LINK, "link"))
                    self.spawn(self.link.run(), "link", fatal=True)
                await self.start_services(tg, "rounds")
                self.spawn(faults.run(), "fault-journal")
                await self.anchoring.anchor("start")
                self.spawn(self.anchoring.run(), "anchor")
                source = Source(TABLE, self.cfg.table, meter_titles(self.cfg))
                self.spawn(DayReports(self.cfg.state_dir, self.cfg.report, clock=self.clock, source=source).run(),
                           "day-report")
                self._show_meters()
                self.ready.set()
                self.notifier.ready(f"table {self.cfg.table}: round {self._round_id()}")
                log.info("table ready", table=self.cfg.table, round=self._round_id())
        finally:
            self.notifier.stopping()
            self.supervisors.close()
            await close_buses(self.buses)
            led, self.ledger = self.ledger, None
            if self.faults is not None:
                self.faults.stop()  # queued: the ledger's close writes it
                self.faults = None
            if led is not None:
                await asyncio.to_thread(led.close)
                if self.anchoring is not None and led.failed is None:
                    try:
                        self.anchoring.anchor_now("close")  # the final head, checkpoint included
                    except OSError as e:
                        log.error("journal anchor not written at close", error=e.strerror or str(e))
                    finally:
                        self.anchoring.close()
            if self.link is not None:
                self.link.close()  # not in a thread: a second cancellation must not leave it open

    def _undo_partial_bookings(self) -> None:
        """A lock-out booked on only some of its meters (the controller stopped between two journal entries) never
        completed: dealing waits for the whole booking, so the round was not dealt. What it booked is reversed,
        as a void returns every wager, and betting opens on the next round. The table's own meters and its linked
        meters alike: a booking on a linked meter is in the link journal, and its reversal is journaled there
        (the link sends it to the authority once it runs). Blocking: run it in a thread, before the link runs."""
        assert self.ledger is not None
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

    def _journaled_kept(self) -> tuple[Kept, int]:
        """The last TABLE_STATE record (blocking: from a thread)."""
        assert self.ledger is not None
        with JournalReader(self.ledger.db_path) as r:
            records = r.entries(f"{TABLE_STATE}:")
        if not records:
            return Kept(), 0
        key, found = records[-1]
        asked = found.body["void_requested"] or {}
        return (Kept(frozenset(found.body["deck"]), asked.get("round_id"), asked.get("reason")),
                int(key.rsplit(":", 1)[1]))

    def _keep(self) -> None:
        """Journal what only a supervisor lifts when it changed (a deck block, a void asked for), so that a
        restart does not lift it."""
        assert self.state is not None
        s = self.state
        kept = Kept(frozenset(s.blocks.get(rm.Block.DECK, frozenset())),
                    self._round_id() if s.void_requested else None, s.void_requested)
        if kept == self._kept:
            return
        self._kept, self._kept_no = kept, self._kept_no + 1
        body = {"deck": sorted(kept.deck), "void_requested": None if kept.void_round is None else
                {"round_id": kept.void_round, "reason": kept.void_reason}}
        assert self.ledger is not None
        self._kept_write = self.spawn(self.ledger.submit_async(TABLE_STATE, body, f"{TABLE_STATE}:{self._kept_no}"),
                                      f"table-state:{self._kept_no}", fatal=True)

    async def _kept_durable(self) -> None:
        if self._kept_write is not None:
            await asyncio.shield(self._kept_write)

    def _outputs_at_start(self) -> None:
        """Every light off first: a restarted controller owns its outputs, and lights the stopped one left on
        would tell players a wager was accepted or a hand won (a resumed round lights its own again)."""
        for d in self.cfg.devices_of("seat"):
            if d.name not in self._outputs:
                continue
            rmap = d.register_map
            if rmap is not None:
                offset = d.first_seat - 1
                accepted = [(p.seat + offset, p.spot) for p in rmap.points("accepted_light") if p.seat and p.spot]
                wins = [p.seat + offset for p in rmap.points("win_light") if p.seat]
            else:  # a line-protocol device has a light for every spot of its seats
                accepted = [(seat, spot) for seat in d.seats for spot in self.rules.spots]
                wins = list(d.seats)
            for seat, spot in accepted:
                self.accepted_light(seat, spot, False)
            for seat in wins:
                self.win_light(seat, False)

    def healthy(self) -> bool:
        return self.ledger is not None and self.ledger.failed is None

    # --- inputs ------------------------------------------------------------------------------------

    def on_device_event(self, e: ev.Event) -> None:
        match e:
            case ev.WagerSensed(device=_, seat=seat, spot=spot, amount_cents=amount):
                if spot not in self.rules.spots:
                    log.warning("wager on a spot this table does not offer", device=e.device, seat=seat, spot=spot)
                elif e.present_at_contact and self.state is not None and (seat, spot) not in self.state.accepted:
                    # on the spot before the controller could see it (a restart, a device back): it may be a
                    # chip of the last round; a wager is placed while betting is open and seen (§ 639a.2(c))
                    self._note("wager not recognized", {"reason": "present-at-contact: lift it and place it again",
                                                        "seat": seat, "spot": spot})
                else:
                    self.apply(rm.ChipSensed(seat, spot, amount))
            case ev.WagerRemoved(device=_, seat=seat, spot=spot):
                if spot in self.rules.spots:
                    self.apply(rm.ChipRemoved(seat, spot))
            case ev.LockoutPressed(previous_read_at=previous):
                self._lock_pressed_at = time.monotonic()
                self._press_window_from = previous
                self.apply(rm.LockoutPressed(**self._draws()))
                self._press_window_from = None  # observed if the press froze the wagers
            case ev.ShufflerCount(count=count, deck=deck):
                self.apply(rm.ShuffleCounted(count, deck))
            case ev.ShuffleFault(reason=reason):
                log.warning("shuffle fault: reshuffle (§ 667a.13(d))", device=e.device, reason=reason)
            case ev.CardsDispensed(count=count):
                self.apply(rm.CardsDispensed(count))
            case ev.ShoeJam():
                self._shoe_jam(e.device)
            case ev.CardDealt(card=card):
                if self.state is None or self.state.phase not in (rm.Phase.LOCKING, rm.Phase.DEALING):
                    # the deal begins after "no more bets" (§ 639a.8(b), § 667a.8(b)): no card of a round's deal
                    log.warning("card read outside a deal: ignored", device=e.device, card=card_str(card))
                else:
                    self._cards.append(card)
                    self._shoe_card()
            case ev.DiceRolled(die1=d1, die2=d2):
                log.info("dice rolled", device=e.device, die1=d1, die2=d2)

    def device_changed(self, name: str, up: bool) -> None:
        seats = self.seats_of(name)
        if self.faults is not None:
            info = self._info[name]
            self.faults.device(name, up, kind=info.kind, seats=seats, reason=info.last_error or "")
        if seats:  # a seat's wagering device: its seats only; the rest of the table wagers on
            self.apply(rm.SeatsUp(name) if up else rm.SeatsDown(name, seats))
        else:
            self.apply(rm.BlockCleared(rm.Block.DEVICE, name) if up else rm.BlockRaised(rm.Block.DEVICE, name))

    def _draws(self) -> dict[str, int | None]:
        """Magic Card and Lucky Bonus position (§ 639a.1), drawn from the OS CSPRNG at lock-out. The position is
        one of the seats 1..N, or the dealer's position (0) where the wager that pays it may be placed on the
        dealer's hand (§ 639a.1, § 641a.1 "Lucky Bonus" (ii)); elsewhere a seat only (§ 643a.1 "Lucky Bonus":
        "the position that is randomly selected" is where a player is seated). Each position equally likely."""
        paying = [w.wager for w in self.cfg.wagers.values() if w.wager.magic_and_lucky]
        if not paying:
            return {"magic_card": None, "lucky_seat": None}
        magic = self._draw(52)
        seats = self.cfg.seats
        if any(w.lucky_dealer_position for w in paying):
            lucky = self._draw(seats + 1)  # 0 (the dealer's position), 1..N
        else:
            lucky = 1 + self._draw(seats)  # 1..N
        return {"magic_card": magic, "lucky_seat": lucky}

    def _shoe_jam(self, device: str) -> None:
        """§ 667a.13(e): a jammed dealing shoe voids the round being dealt, unless an award of it was paid."""
        if self.state is None or self.state.phase is not rm.Phase.DEALING:
            log.warning("shoe jam outside a round", device=device)
            return
        assert self.desk is not None
        why = self._paid_refusal()
        if why is not None:
            log.error("shoe jam: the round is not voided", device=device, round=self._round_id(), reason=why)
        elif self.desk.busy:  # a claim in the middle of a step: the void comes right after it
            self.spawn(self._void_when_idle(device, self._round_id()), f"shoe-jam:{self._round_id()}")
        else:
            self._void(SHOE_JAM)

    async def _void_when_idle(self, device: str, rid: str) -> None:
        assert self.desk is not None
        desk = self.desk
        await self._until(lambda: self._round_id() != rid or self.state is None
                          or self.state.phase is not rm.Phase.DEALING or not desk.busy)
        if self._round_id() != rid or self.state is None or self.state.phase is not rm.Phase.DEALING:
            log.warning("shoe jam: the round ended meanwhile", device=device, round=rid)
            return
        why = self._paid_refusal()
        if why is not None:
            log.error("shoe jam: the round is not voided", device=device, round=rid, reason=why)
            return
        self._void(SHOE_JAM)

    def _frozen(self) -> None:
        """The wagers were just frozen (the round left betting)."""
        if self._press_window_from is not None:
            self.metrics.lockout_window.observe(time.monotonic() - self._press_window_from)
            self._press_window_from = None

    def apply(self, event: rm.Input) -> None:
        """Run one input through the round machine and carry out its effects. A refused input is logged
        and changes nothing."""
        assert self.state is not None
        try:
            out = machine.step(self.rules, self.state, event)
        except (InputError, RulesError) as err:
            log.warning("input refused", input=repr(event), error=str(err))
            return
        self._after_step(out)

    def _act(self, event: rm.Input) -> None:
        """Apply an input asked for on the control socket: a refusal goes back to the asker."""
        assert self.state is not None
        self._after_step(machine.step(self.rules, self.state, event))  # InputError / RulesError reach the client

    def _after_step(self, out: rm.Step) -> None:
        if out.state.phase is not rm.Phase.BETTING and self.state is not None and self.state.phase is rm.Phase.BETTING:
            self._frozen()
        self.state = out.state
        self.metrics.set_phase(out.state.phase.value)
        bus_phase = BusPhase.BETTING if out.state.phase is rm.Phase.BETTING else BusPhase.DEALING
        for bus in self.buses.values():  # seats read fast only while a wager can be recognized
            bus.scheduler.set_phase(bus_phase)
        for block in rm.Block:
            self.metrics.blocked.labels(block.value).set(1 if out.state.blocks.get(block) else 0)
        if self.faults is not None:
            self.faults.blocks({b.value: sources for b, sources in out.state.blocks.items()})
        for effect in out.effects:
            self._effect(effect)
        self.sign.offline(out.state.blocked)
        self.show_seats_disabled(out.state.seats_down)
        if self._tasks is not None:
            self._keep()
        self._state_changed()

    def _paid(self) -> None:
        """A claim was paid: anchor the journal now (its end, lost or rolled back, would take the payout)."""
        if self.anchoring is not None:
            with contextlib.suppress(RuntimeError):  # stopping: anchored at close
                self.spawn(self.anchoring.anchor_or_alert("payout"), "anchor")

    def _claims_changed(self) -> None:
        self._show_meters()  # a payout moved a meter
        self._state_changed()

    def _state_changed(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _until(self, predicate: Callable[[], bool], recheck: float | None = None) -> None:
        """Wait until `predicate` holds (checked at every change of the round or its claims, and every `recheck`
        seconds too when given: a claim's verification ends without a change)."""
        while not predicate():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(recheck):
                    await self._changed.wait()

    # --- effects -----------------------------------------------------------------------------------

    def _effect(self, e: rm.Effect) -> None:
        match e:
            case rm.Light(seat=seat, spot=spot, on=on):
                self.accepted_light(seat, spot, on)
            case rm.Lamp(on=on):
                self.lamp(on)
            case rm.Book():
                self.spawn(self._book(e), f"book:{e.round_id}", fatal=True)
            case rm.Reverse():
                self._writes[e.round_id] = self.spawn(self._reverse(e), f"void:{e.round_id}", fatal=True)
            case rm.Close(round_id=rid):
                self._writes[rid] = self.spawn(self._close(rid), f"close:{rid}", fatal=True)
            case rm.Reconcile(round_id=rid, counts=counts):
                if self._lock_pressed_at is not None:
                    self.metrics.lockout_latency.observe(time.monotonic() - self._lock_pressed_at)
                    self._lock_pressed_at = None
                log.info("wagers locked: count the chips", round=rid, accepted=dict(counts))
            case rm.Opened(round_id=rid):
                self._cards.clear()
                self._not_recognized = 0
                if self.desk is not None:
                    self.desk.open(rid)
                logs.set_table_context(table=self.cfg.table, round=rid)
                log.info("betting open", round=rid)
            case rm.Note(what=what, detail=detail):
                self._note(what, dict(detail))

    def _note(self, what: str, detail: dict[str, Any]) -> None:
        if what == "wager accepted":
            self.metrics.wagers.labels(detail["spot"]).inc()
            self.metrics.wagers_cents.labels(detail["spot"]).inc(detail["cents"])
        elif what == "wager not recognized":
            self._not_recognized += 1
            self.metrics.not_recognized.labels(detail["reason"].split(":")[0]).inc()
        elif what == "seat wagering disabled" and detail["device"] in self._info:
            detail["reason"] = self._info[detail["device"]].last_error
        level = "warning" if what in ("wager not recognized", "deck count wrong", "stub count wrong",
                                      "deck not alternated", "round voided", "wagering disabled", "void requested",
                                      "void refused", "round resumed", "void request overruled",
                                      "seat wagering disabled", "chips left on their spots") else "info"
        getattr(log, level)(what, **detail)

    async def _durable(self, rid: str) -> None:
        """Wait until the journal holds what ending round `rid` wrote (its close or its reversal)."""
        task = self._writes.pop(rid, None)
        if task is not None:
            await asyncio.shield(task)

    async def _submit(self, op: meter_ops.Op, meter: str, key: str) -> dict[str, Any]:
        assert self.meters is not None
        t0 = time.perf_counter()
        result = await self.meters.port(meter).submit(op, meter, key)
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        return result

    async def _book(self, e: rm.Book) -> None:
        now = utc_now()
        drawing = {w.meter for w in self.cfg.wagers.values() if w.wager.magic_and_lucky and w.meter}
        for meter, wagers in e.wagers.items():
            draws = {"magic_card": e.magic_card, "lucky_seat": e.lucky_seat} if meter in drawing else {}
            op = meter_ops.BookContributions(e.round_id, self.cfg.table, wagers, now, **draws,
                                             on_dealer=tuple(e.on_dealer.get(meter, ())),
                                             round_meters=tuple(e.wagers) if len(e.wagers) > 1 else ())
            result = await self._submit(op, meter, f"{e.round_id}:book:{meter}")
            if "contributed" in result:  # a linked meter's is counted at its authority
                contributed = parse_units(result["contributed"], "contributed")
                self.metrics.contributions.labels(meter).inc(contributed // UNITS_PER_CENT)
        log.info("round booked", round=e.round_id, meters=sorted(e.wagers),
                 amounts={m: format_cents(s.current_cents) for m, s in sorted(self.ledger.state.items())}
                 if self.ledger is not None else {},
                 **({"magic_card": card_str(e.magic_card)} if e.magic_card is not None else {}),
                 **({"lucky_seat": position_name(e.lucky_seat)} if e.lucky_seat is not None else {}))
        if self.ledger is not None:  # the WAL folded while dealing, not inside the COMMIT of a later press's booking
            self.ledger.wal_checkpoint().add_done_callback(self._wal_folded)
        self._booked[e.round_id] = tuple(sorted(e.wagers))
        self.apply(rm.Booked(e.round_id))
        self._show_meters()

    def _wal_folded(self, done: Future[tuple[int, int, float]]) -> None:
        """In the ledger's writer thread (the metrics are thread-safe); a failure is the writer's to report."""
        if not done.cancelled() and done.exception() is None:
            self.metrics.wal_checkpoint.observe(done.result()[2])

    async def _reverse(self, e: rm.Reverse) -> None:
        """Reverse a voided round's booking on each meter, after its claims have ended (their locks given back:
        the authority reverses no round with an award locked). A meter that refuses (an award was paid) sends
        the round back to dealing, with the reason logged."""
        assert self.desk is not None
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
                self.apply(rm.VoidRefused(e.round_id, str(err)))
                return
        self._booked.pop(e.round_id, None)
        self.metrics.rounds.labels("voided").inc()
        self.apply(rm.Voided(e.round_id))
        self._show_meters()

    async def _close(self, rid: str) -> None:
        assert self.desk is not None
        await self.desk.idle()
        await self._release_unsettled_locks(rid, "the round was settled without the claim's approval")
        now = utc_now()
        for meter in self._booked.pop(rid, ()):
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

    def _link_alive(self, up: bool) -> None:
        """The link authority heard again, or not within the link timeout (§ 605a.8; NY 5321.18)."""
        if self.state is not None:
            self.apply(rm.BlockCleared(rm.Block.LINK, "link") if up else rm.BlockRaised(rm.Block.LINK, "link"))

    def _link_win(self, win: Win) -> None:
        """A hit on a linked meter at any table: every sign of the link shows it, then the new amount."""
        if win.state != "paid" or win.table == self.cfg.table:
            return  # this table shows its own wins itself (the claim desk)
        self.sign.win(win.table, win.seat, win.cents)

    def _show_meters(self) -> None:
        """The amounts of the meters, for the sign and the metrics (the sign shows OFFLINE while progressive
        wagering is disabled, and its messages over either)."""
        if self.ledger is None or self.state is None:
            return
        meters = self.ledger.state
        amounts = tuple((m.id, meters[m.id].current_cents) for m in standalone_meters(self.cfg) if m.id in meters)
        if self.link is not None:
            amounts += tuple((m, self.link.values[a].cents) for m, a in self.link.linked.items()
                             if a in self.link.values)
        for mid, cents in amounts:
            self.metrics.meter_cents.labels(mid).set(cents)
        self.sign.meters(amounts)

    # --- the round as the desk and the control socket see it -----------------------------------------

    def _round_id(self) -> str:
        assert self.state is not None
        return rm.round_id(self.cfg.table, self.state.round_no)

    def _round_view(self) -> RoundView:
        assert self.state is not None
        return RoundView(self._round_id(), self.state.phase is rm.Phase.DEALING, self.state.phase.value,
                         self.state.accepted, self.state.void_requested)

    def _paid_refusal(self) -> str | None:
        """Why the round being dealt can never be voided, or None: a void returns every wager, so nothing of the
        round may have been paid (its claims, and the table's own meters' bookings, say so)."""
        assert self.desk is not None and self.ledger is not None and self.state is not None
        why = cm.void_refusal(self.desk.state)
        if why is not None:
            return why
        rid = self._round_id()
        for meter, st in sorted(self.ledger.state.items()):
            booking = st.open_rounds.get(rid)
            if booking is not None and booking.paid:
                return f"an award was paid in round {rid} on meter {meter}: it can no longer be voided; settle it"
        return None

    def _void_refusal(self) -> str | None:
        """Why the round cannot be voided now: something of it paid, or a claim in the middle of a step."""
        assert self.desk is not None
        return self._paid_refusal() or self.desk.refusal_to_void()

    def _void(self, reason: str) -> None:
        """Void the round being dealt: its claims end, then its booking is reversed (in the background).
        Checked before anything moves: RulesError and nothing changes."""
        assert self.desk is not None and self.state is not None
        machine.step(self.rules, self.state, rm.VoidRound(reason))  # refused here if the round is not dealt
        why = self._void_refusal()
        if why is not None:
            raise RulesError("round_id", why)
        self.desk.void(reason)
        self._act(rm.VoidRound(reason))

    # --- the control socket's operations ------------------------------------------------------------

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """The control socket's operations (docs/operations.md has their arguments and results)."""
        assert self.state is not None and self.ledger is not None and self.desk is not None
        check_arguments(op, args)
        match op:
            case "status":
                return self.status()
            case "round":
                return self.round_info()
            case "meters":
                return [meter_json(s) for _m, s in sorted(self.ledger.state.items())]
            case "history":  # as `history --state` reads it from the journal; with kinds, what each payout is
                kinds = args.get("kinds") is True
                return [hit_json(m, h, hit_kind(self.cfg, m, h) if kinds else None)
                        for m, s in sorted(self.ledger.state.items()) for h in s.history]
            case "meter_series":
                return await self.series.answer(args)
            case "settle":
                who = await self.supervisor(args) if "supervisor" in args else None
                return await self._settle(args.get("round_id"), who)
            case "void":
                who = await self.supervisor(args)
                reason = args.get("reason")
                if not isinstance(reason, str) or not reason.strip():
                    raise InputError("reason", "say why the round is voided")
                if "round_id" in args and args["round_id"] != self._round_id():  # checked after the secret's hash
                    shown = args["round_id"] if isinstance(args["round_id"], str) else repr(args["round_id"])
                    raise RulesError("round_id", f"round {shown} is not the current round {self._round_id()}: "
                                                 "nothing voided")
                return await self._void_asked(f"{reason} (by {who})")
            case "deck_replaced":
                who = await self.supervisor(args)
                self._act(rm.DeckReplaced(who))
                await self._kept_durable()
                return {"message": f"new deck confirmed by {who}"}
            case "stub_count":
                return await self._stub_count(args)
            case "close_table":
                who = await self.supervisor(args)
                self._act(rm.BlockRaised(rm.Block.CLOSED, who))
                return {"message": f"table {self.cfg.table} closed by {who}: no progressive wagers"}
            case "open_table":
                who = await self.supervisor(args)
                for holder in list(self.state.blocks.get(rm.Block.CLOSED, ())):
                    self._act(rm.BlockCleared(rm.Block.CLOSED, holder))
                return {"message": f"table {self.cfg.table} opened by {who}"}
            case "claim":
                return await self.desk.claim(args)
            case "approve":
                if self.desk.needs_approval_key(args.get("claim_id")):  # a linked meter: the authority verifies it
                    who, key = await self.supervisors.check_and_derive(
                        args.get("supervisor"), args.get("secret"), PEER.get().get("peer_uid"))
                    return await self.desk.approve(args.get("claim_id"), who, key)
                who = await self.supervisor(args)
                return await self.desk.approve(args.get("claim_id"), who)
            case "reject":
                reason = args.get("reason")
                if not isinstance(reason, str) or not reason.strip():
                    raise InputError("reason", "say why the claim is rejected")
                who = await self.supervisor(args)
                return await self.desk.reject(args.get("claim_id"), who, reason)
            case "authenticate":
                return {"supervisor": await self.supervisor(args)}
        raise LookupError(op)

    async def _settle(self, round_id: object, who: str | None = None) -> dict[str, Any]:
        assert self.state is not None and self.desk is not None
        rid = self._round_id()
        if round_id != rid:
            shown = round_id if isinstance(round_id, str) else repr(round_id)
            raise RulesError("round_id", f"round {shown} is not the current round {rid}")
        left = await self._detected_claimed(rid)
        why = self.desk.refusal_to_settle()
        if left:  # named, whatever else holds the round: a settle never drops them
            hits = "; ".join(h.describe() for h in left)
            unclaimed = (f"the shoe's detected hit{'s' if len(left) > 1 else ''} of round {rid} not claimed yet: "
                         f"{hits} (claimed one at a time, each after the one before is settled; or a supervisor "
                         "voids the round)")
            why = f"{why}; then {unclaimed}" if why else unclaimed
        if why is not None:
            raise RulesError("round_id", why)
        if who is not None and self.state.void_requested is not None and self._paid_refusal() is None:
            raise RulesError("round_id", f"round {rid} is to be voided ({self.state.void_requested}) and can be: a "
                                         "supervisor settles such a round only where its void cannot be (an award "
                                         "of it was paid)")
        wagers = len(self.state.accepted)
        self._act(rm.RoundSettled(rid, who))
        await self._durable(rid)
        counted = f"{wagers} wager" + ("" if wagers == 1 else "s")
        return {"message": f"round {rid} settled ({counted}); round {self._round_id()} open for betting"}

    async def _void_asked(self, reason: str) -> dict[str, Any]:
        assert self.state is not None and self.desk is not None
        rid = self._round_id()
        wagers = len(self.state.accepted)
        voided = [c.id for c in self.desk.state.claims if c.status in ("locking", "pending")]
        self._void(reason)
        await self._durable(rid)
        if self._round_id() == rid:  # the meter refused the reversal: the round is dealt again
            raise RulesError("round_id", f"round {rid} was not voided: the meter refused to reverse it (the log says "
                                         "why); it is dealt again")
        claims = f"; claims voided with it: {', '.join(voided)}" if voided else ""
        return {"message": f"round {rid} voided: {wagers} wagers returned{claims}", "claims_voided": voided}

    async def _stub_count(self, args: dict[str, Any]) -> dict[str, Any]:
        """The dealer's stub count (§ 667a.8(f)); with a supervisor's credential, the supervisor's recount."""
        assert self.state is not None
        who = await self.supervisor(args) if "supervisor" in args else None
        self._act(rm.StubCounted(args.get("stub"), args.get("dealt"), who))
        await self._kept_durable()
        ok = not self.state.blocks.get(rm.Block.DECK)
        if ok:
            return {"message": "stub count recorded: 52 cards", "deck_ok": True}
        if self.state.void_requested is not None:
            return {"message": f"stub count wrong: wagering is disabled and round {self._round_id()} is to be voided "
                               "(§ 667a.8(h)): a supervisor confirms the void (progressivectl void), or recounts",
                    "deck_ok": False, "void_requested": True}
        return {"message": "stub count wrong: the deck is removed (§ 667a.8(h))", "deck_ok": False}

    # --- the card-reading shoe ------------------------------------------------------------------------

    def _shoe_card(self, *, restored: bool = False) -> None:
        """A card of the round's deal read by the card-reading shoe. At a table whose cards come from the shoe
        (`cards.source` "shoe"), once the deal is complete each hand a wager of the round pays is detected
        (controller/round/detect.py) and claimed as the dealer would claim it, by "shoe" (docs/rounds.md)."""
        if self.cfg.cards is None or self.cfg.cards.source != "shoe" or self.state is None:
            return
        rid, n = self._round_id(), len(self._cards)
        if rid == self._deal_unknown:
            return
        if n == 1 and not restored:  # a deal begun: a restart before it is complete knows it lost cards
            self.spawn(self._journal_deal(rid, tuple(self._cards), FIRST_CARD), f"deal:{rid}")
        spots = [detect.SpotWager(s, self.cfg.wagers[r.wager].wager, self.cfg.wagers[r.wager].paytable, r.on_dealer)
                 for s, r in self.rules.spots.items()]
        try:
            found = detect.detect(self.cfg.game, spots, self.state.accepted, self._cards)
        except InputError as err:
            if n == 1 or err.field.startswith(f"cards[{n - 1}]"):  # once: at the card at fault (or the first card)
                log.error("shoe deal not read: the dealer claims its hits", round=rid, error=str(err))
            return
        if not found.deal.complete:
            return
        log.info("deal complete", round=rid, seats=list(found.deal.seats), cards=cards_str(self._cards),
                 hits=len(found.hits))
        for hit in found.hits:
            log.info("hit detected", round=rid, seat=position_name(hit.seat), spot=hit.spot, cards=cards_str(hit.cards),
                     hand=hit.hand, award=hit.award)
        if found.hits:
            det = self._detected = Detected(rid, n, found.hits, restored=restored)
            if restored:
                det.now.set()  # its wait for a card more passed before the stop
            self.spawn(self._claim_detected(det), f"detected:{rid}")

    async def _journal_deal(self, rid: str, cards: tuple[int, ...], what: str = "") -> None:
        """The deal's cards in the journal: `{rid}:deal` the deal whose hits are being claimed (a restart claims those
        left), FIRST_CARD that a deal began (a restart before the deal was complete knows it lost cards), DROPPED
        that a card more came after its claims began (a restart claims none)."""
        assert self.ledger is not None
        with contextlib.suppress(KeyConflict):  # journaled before the restart that read it again
            await self.ledger.submit_async(DEAL, {"round_id": rid, "cards": [card_str(c) for c in cards]},
                                           f"{rid}:deal{what}")

    async def _restore_deal(self, rid: str) -> None:
        """At a restart in a round being dealt: a deal the shoe read complete, whose hits were being claimed, is read
        again from the journal and its hits not claimed by the shoe before are claimed; a deal begun and not complete
        (or dropped) before the stop is not read at all: its cards before the stop are lost."""
        assert self.ledger is not None and self.state is not None
        if self.cfg.cards is None or self.cfg.cards.source != "shoe" or self.state.phase is not rm.Phase.DEALING:
            return

        def read() -> tuple[Found | None, bool]:
            assert self.ledger is not None
            db = self.ledger.db_path
            deal = lookup(db, f"{rid}:deal")
            begun = lookup(db, f"{rid}:deal{FIRST_CARD}") is not None or lookup(db, f"{rid}:deal{DROPPED}") is not None
            return (deal if deal is not None and lookup(db, f"{rid}:deal{DROPPED}") is None else None), begun

        deal, begun = await asyncio.to_thread(read)
        if deal is None:
            if begun:  # what the shoe reads now is not the deal from its start: hands detected could be others
                self._deal_unknown = rid
                log.warning("the shoe's cards of the round before the restart are not known: the dealer claims its "
                            "hits", round=rid)
            return
        self._cards = list(parse_cards(deal.body["cards"], "cards"))
        log.info("deal read again from the journal: its hits are claimed", round=rid, cards=cards_str(self._cards))
        self._shoe_card(restored=True)

    async def _claim_detected(self, det: Detected) -> None:
        """Claim the hits of a complete deal through the dealer's claim path, one at a time in settlement order,
        once no card more came for DEAL_SETTLED_S (a card more means a seat the controller does not see was dealt),
        or at once when the dealer settles the round (`det.now`: the deal is over)."""
        assert self.desk is not None
        desk, rid = self.desk, det.rid
        end = "failed"  # unless it ends as it should
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DEAL_SETTLED_S):
                await det.now.wait()

        def dealing() -> bool:
            return self._round_id() == rid and self.state is not None and self.state.phase is rm.Phase.DEALING

        def dropped(i: int) -> bool:
            if dealing() and len(self._cards) == det.dealt:
                return False
            log.warning("detected hits not claimed", round=rid, left=[h.describe() for h in det.hits[i:]],
                        reason="the shoe read a card more" if dealing() else "the round is no longer dealt")
            return True

        try:
            if dropped(0):
                end = "dropped"
                return
            if not det.restored:  # the deal whose hits are claimed: a restart claims those left
                await self._journal_deal(rid, tuple(self._cards[:det.dealt]))
            for i, hit in enumerate(det.hits):
                while True:
                    # the booking on disk; no claim left unsettled (one at a time), none being verified
                    det.step(blocked=desk.state.open is not None)
                    await self._until(lambda: self._round_id() != rid or self.state is None or (
                        self.state.phase is not rm.Phase.LOCKING and desk.state.open is None and desk.busy is None),
                        CLAIM_RECHECK_S)
                    det.step()
                    if dropped(i):
                        if dealing():  # a card more: a restart claims none of them
                            await self._journal_deal(rid, tuple(self._cards), DROPPED)
                        end = "dropped"
                        return
                    if det.restored and any(c.claimed_by == "shoe" and (c.seat, c.spot) == (hit.seat, hit.spot)
                                            for c in desk.state.claims):
                        break  # claimed by the shoe before the restart (approved, rejected, ...): left as it is
                    try:
                        got = await desk.claim(hit.claim(), by="shoe")
                    except InputError as err:  # a RulesError too: claimed by the dealer already, settled before, ...
                        if desk.busy is not None:
                            continue  # another claim was being verified: this one after it
                        log.warning("detected hit not claimed", round=rid, hit=hit.describe(), error=str(err))
                    else:
                        log.info("detected hit claimed", round=rid, claim=got["claim_id"], status=got["status"],
                                 by="shoe")
                    break
                det.step(to=i + 1)
            end = "claimed"
        finally:
            det.step(end=end)

    async def _detected_claimed(self, rid: str) -> tuple[detect.Hit, ...]:
        """Before the round is settled: the hits the shoe detected in its deal are claimed now (the dealer's settle
        says the deal is over), as far as they can be (one claim at a time, each after the one before is settled);
        the hits not claimed yet (by the shoe or the dealer). A settle never ends a round with one of them."""
        det = self._detected
        if det is None or det.rid != rid:
            return ()
        det.now.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DETECTED_CLAIM_S):
                # blocked: the next hit waits for a claim that waits for a supervisor (not one that just ended)
                while not (det.over or (det.blocked and self.desk is not None and self.desk.state.open is not None)):
                    det.moved.clear()
                    await det.moved.wait()
        assert self.desk is not None
        claimed = {(c.seat, c.spot) for c in self.desk.state.claims} if self.desk.state.round_id == rid else set()
        return tuple(h for h in det.left if (h.seat, h.spot) not in claimed)

    # --- views ---------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        assert self.state is not None and self.ledger is not None
        s = self.state
        return {
            "table": self.cfg.table,
            "game": self.cfg.game.id,
            "version": __version__,
            "round": {"id": self._round_id(), "phase": s.phase.value},
            "blocks": [{"block": b.value, "sources": sorted(src)} for b, src in sorted(s.blocks.items()) if src],
            "seats_disabled": self.seats_disabled_json(s.seats_down),
            "devices": self.devices_json(),
            "meters": [{"meter": m, "amount": format_cents(st.current_cents)}
                       for m, st in sorted(self.ledger.state.items())]
                      + ([{"meter": m, "linked": a, "amount": format_cents(self.link.values[a].cents)
                           if a in self.link.values else None} for m, a in sorted(self.link.linked.items())]
                         if self.link is not None else []),
            "ledger_head_seq": self.ledger.head.seq,
            "ledger_head_hash": self.ledger.head.hash,
            "anchor": self.anchoring.json() if self.anchoring is not None else None,
            "uptime_seconds": self.uptime(),
            **({"link": self.link.status()} if self.link is not None else {}),
            **table_json(self.cfg),
            "lights": self.lights_json(),
        }

    def _floor_line(self) -> FloorLine | None:
        if self.state is None or self.ledger is None or self.desk is None or self.link is None:
            return None  # starting
        claims = self.desk.state.claims if self.desk.state.round_id == self._round_id() else ()
        return linked.floor_line(self.cfg.table, self.status(), claims, self.link.linked.values(),
                                 format_time(utc_now()))

    def round_info(self) -> dict[str, Any]:
        assert self.state is not None and self.desk is not None
        s = self.state
        return {
            "id": self._round_id(),
            "phase": s.phase.value,
            "wagers": [{"seat": seat, "spot": spot, "amount": format_cents(c)}
                       for (seat, spot), c in sorted(s.accepted.items())],
            "not_recognized": self._not_recognized,
            "claims": self.desk.claims_json() if self.desk.state.round_id == self._round_id() else [],
            "void_requested": s.void_requested,
        }


__all__ = ["DEAL_SETTLED_S", "TableDaemon"]

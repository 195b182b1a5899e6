"""The card table daemon: devices in, round machine, claim desk, ledger and device outputs out.

One task owns the round state: every input (a device event, a ledger acknowledgement, a request on the
control socket) goes through `apply`, which runs the pure step of controller.round.machine and then schedules
its effects without waiting on them. Effects that reach the disk (bookings, reversals, closes) run as tasks
that feed their acknowledgement back in as the next input; effects that reach devices are desired states that
each device's sender delivers (outputs.py). The daemon is a composition of objects with one job each: the
jackpot claims belong to the claim desk (claim_desk.py); bookings, reversals, closes and the kept state to the
round's journal (journal.py); the shoe's deal, its detected hits and its jams to the shoe (shoe.py); the lock-out's
draws and timings to lockout.py; the control socket's operations to one handler each (handlers.py); the views to
card_views.py; the sign to its owner (sign.py); what every table daemon shares to the shell (shell.py). Nothing a device does can stop
the daemon: driver tasks swallow their own faults, and a storage error stops the process (the ledger's fatal
hook) so that systemd starts it again from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from controller.app import linked
from controller.app.card_views import blocks_json, card_status, meters_json, round_json
from controller.app.claim_desk import ClaimDesk, RoundView
from controller.app.fault_journal import FaultJournal
from controller.app.handlers import CARD_TABLE
from controller.app.journal import RoundJournal, open_ledger
from controller.app.linked import LinkedMeterView
from controller.app.lockout import LockoutTimer, draws
from controller.app.meter_port import LinkedMeters, LocalMeters, Meters
from controller.app.metrics import Metrics
from controller.app.setup import award_spots, standalone_meters, table_rules
from controller.app.shell import ControlFactory, TableShell
from controller.app.shoe import Shoe
from controller.cards import card_str
from controller.config.model import TableConfig
from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.ledger.anchor import Anchor
from controller.ledger.chain import format_time, utc_now
from controller.linkproto.schema import FloorLine, JournalAnchor, Win
from controller.meter import MeterState
from controller.meter.journal import Meters as MeterStates
from controller.report.build import TABLE, Source
from controller.round import claim_machine as cm
from controller.round import machine
from controller.round import model as rm
from controller.round.resume import resume
from controller.service import logs
from controller.service.anchoring import Anchoring
from controller.service.reports import DayReports, MeterSeries
from controller.service.sdnotify import Notifier
from controller.service.views import meter_titles
from drivers import events as ev
from drivers.device import Device
from drivers.modbus.core.schedule import Phase as BusPhase

if TYPE_CHECKING:
    from drivers.modbus.bus import ModbusBus

log = structlog.get_logger("table")

DEAL_SETTLED_S = 3.0  # a complete deal from the card-reading shoe is claimed if no card more comes this long


class TableDaemon(TableShell):
    """The daemon of a card table: the round machine's one owner (`apply`), composed of the claim desk, the round's
    journal (journal.py), the card-reading shoe (shoe.py) and the control socket's operations (handlers.py)."""

    handlers = CARD_TABLE

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
        self.journal: RoundJournal | None = None
        self.shoe: Shoe | None = None
        self.lockout = LockoutTimer(self.metrics)
        self._not_recognized = 0
        self._changed = asyncio.Event()  # set and replaced at every change of the round or its claims
        # Linked meters (§ 605a.8) live at the link authority; this table keeps a durable outbox for them.
        self.link = linked.make_link(cfg, on_alive=self._link_alive, on_meter=lambda _m: self._show_meters(),
                                     on_win=self._link_win,
                                     on_rejected=lambda reason: self.metrics.link_rejected.labels(reason).inc())
        if self.link is not None:  # what the floor view at the authority shows of this table (display only)
            self.link.floor = self._floor_line
        logs.set_table_context(table=cfg.table)

    # --- start-up ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Start up (the journal opened and checked, the round resumed), serve until cancelled, shut down."""
        self.ledger = await asyncio.to_thread(open_ledger, self.cfg)
        try:
            await self._open_journal(self.ledger)
            async with asyncio.TaskGroup() as tg:
                self._tasks = tg
                await self._resume(self.ledger)
                await self._serve(tg)
        finally:
            await self._shut_down()

    async def _open_journal(self, led: Ledger[MeterStates]) -> None:
        """The journal's anchor checked (a journal rolled back or rewritten is refused here), the fault journal
        and the link's outbox opened, and the meters' ports."""
        a, link = self.cfg.anchor, self.link
        send = None if link is None else (lambda x: link.send_anchor(
            JournalAnchor(self.cfg.table, x.seq, x.hash, x.at, x.mac)))
        self.anchoring = anchoring = Anchoring(led, a.file_for(self.cfg.state_dir), a.key_file, table=self.cfg.table,
                                               metrics=self.metrics.anchors, syslog=a.syslog, send=send)
        if link is not None:
            def compare(theirs: JournalAnchor) -> None:
                with contextlib.suppress(RuntimeError):  # stopping: compared at the next start
                    self.spawn(anchoring.compare(Anchor(theirs.seq, theirs.hash, theirs.at, theirs.mac)),
                               "anchor-compare")
            link.on_anchor = compare
        await asyncio.to_thread(anchoring.check)
        faults = FaultJournal(led)
        await asyncio.to_thread(faults.start)
        self.faults = faults
        if link is not None:
            await asyncio.to_thread(link.open)
        self.meters = Meters(LocalMeters(led), LinkedMeters(link) if link is not None else None)

    async def _resume(self, led: Ledger[MeterStates]) -> None:
        """The claim desk, the round's journal and the shoe; the round where the journal left it (a round open at
        the stop is resumed, with its claims and its deal), every light off before."""
        assert self.meters is not None
        self.desk = desk = ClaimDesk(self.cfg, self.rules, self.meters, led, round_now=self._round_view,
                                     win_light=self.win_light, sign=self.sign, metrics=self.metrics,
                                     spawn=self.spawn, on_change=self._claims_changed, on_paid=self._paid)
        self.journal = journal = RoundJournal(self.cfg, self.metrics, led, self.meters, desk, self.link,
                                              spawn=self.spawn, apply=self.apply, show_meters=self._show_meters)
        self.shoe = Shoe(self.cfg, self.rules, led, desk, round_now=lambda: self.state, spawn=self.spawn,
                         until=self._until, settled_s=DEAL_SETTLED_S, void=self.void,
                         paid_refusal=self.paid_refusal)
        self.lights_off(self.rules.spots)  # a resumed round lights its own again
        await asyncio.to_thread(journal.undo_partial_bookings)
        kept = await asyncio.to_thread(journal.read_kept)
        meters: dict[str, MeterState | LinkedMeterView] = {**led.state, **linked.resume_views(self.link)}
        resumed = resume(self.rules, meters, kept)
        rid = resumed.open_round
        if rid is None:
            self._after_step(resumed.step)
            return
        journal.booked[rid] = tuple(sorted(m for m, s in meters.items() if rid in s.open_rounds))
        logs.set_table_context(table=self.cfg.table, round=rid)
        log.warning("round was open when the controller stopped: settle or void it", round=rid)
        self._after_step(resumed.step)
        await desk.restore(rid)
        await self.shoe.restore(rid)

    async def _serve(self, tg: asyncio.TaskGroup) -> None:
        """The link, the services every table runs, the fault journal, the anchors and the day's reports."""
        assert self.anchoring is not None and self.faults is not None
        if self.link is not None:
            if not self.link.alive:  # until the authority is heard: no progressive wagers
                self.apply(rm.BlockRaised(rm.Block.LINK, "link"))
            self.spawn(self.link.run(), "link", fatal=True)
        await self.start_services(tg, "rounds")
        self.spawn(self.faults.run(), "fault-journal")
        await self.anchoring.anchor("start")
        self.spawn(self.anchoring.run(), "anchor")
        source = Source(TABLE, self.cfg.table, meter_titles(self.cfg))
        self.spawn(DayReports(self.cfg.state_dir, self.cfg.report, clock=self.clock, source=source).run(),
                   "day-report")
        self._show_meters()
        self.ready.set()
        self.notifier.ready(f"table {self.cfg.table}: round {self.round_id()}")
        log.info("table ready", table=self.cfg.table, round=self.round_id())

    async def _shut_down(self) -> None:
        """The shell's services stopped, the journal closed and anchored at its final head, the link's outbox closed
        (not in a thread: a second cancellation must not leave it open)."""
        await self.stop_services()
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
            self.link.close()

    def healthy(self) -> bool:
        """The journal is open and has not failed: the systemd watchdog is fed only then."""
        return self.ledger is not None and self.ledger.failed is None

    # --- inputs ------------------------------------------------------------------------------------

    def on_device_event(self, e: ev.Event) -> None:
        """A device's event to the round machine (chips, lock-out, shuffler, dispenser) or the shoe, else logged."""
        match e:
            case ev.WagerSensed():
                self._wager_sensed(e)
            case ev.WagerRemoved(device=_, seat=seat, spot=spot):
                if spot in self.rules.spots:
                    self.apply(rm.ChipRemoved(seat, spot))
            case ev.LockoutPressed(previous_read_at=previous):
                self.lockout.pressed(previous)
                self.apply(rm.LockoutPressed(**self._draws()))
                self.lockout.applied()
            case ev.ShufflerCount(count=count, deck=deck):
                self.apply(rm.ShuffleCounted(count, deck))
            case ev.ShuffleFault(reason=reason):
                log.warning("shuffle fault: reshuffle (§ 667a.13(d))", device=e.device, reason=reason)
            case ev.CardsDispensed(count=count):
                self.apply(rm.CardsDispensed(count))
            case ev.ShoeJam():
                if self.shoe is None:
                    log.warning("shoe jam outside a round", device=e.device)
                else:
                    self.shoe.jammed(e.device)
            case ev.CardDealt():
                self._card_dealt(e)
            case ev.DiceRolled(die1=d1, die2=d2):
                log.info("dice rolled", device=e.device, die1=d1, die2=d2)

    def _wager_sensed(self, e: ev.WagerSensed) -> None:
        seat, spot = e.seat, e.spot
        if spot not in self.rules.spots:
            log.warning("wager on a spot this table does not offer", device=e.device, seat=seat, spot=spot)
        elif e.present_at_contact and self.state is not None and (seat, spot) not in self.state.accepted:
            # on the spot before the controller could see it (a restart, a device back): it may be a
            # chip of the last round; a wager is placed while betting is open and seen (§ 639a.2(c))
            self._note("wager not recognized", {"reason": "present-at-contact: lift it and place it again",
                                                "seat": seat, "spot": spot})
        else:
            self.apply(rm.ChipSensed(seat, spot, e.amount_cents))

    def _card_dealt(self, e: ev.CardDealt) -> None:
        if self.state is None or self.state.phase not in (rm.Phase.LOCKING, rm.Phase.DEALING):
            # the deal begins after "no more bets" (§ 639a.8(b), § 667a.8(b)): no card of a round's deal
            log.warning("card read outside a deal: ignored", device=e.device, card=card_str(e.card))
        elif self.shoe is not None:
            self.shoe.dealt(e.card)

    def device_changed(self, name: str, up: bool) -> None:
        """A device down or back: journaled; its seats down or up, or (no seats) a block of the whole table."""
        seats = self.seats_of(name)
        if self.faults is not None:
            info = self._info[name]
            self.faults.device(name, up, kind=info.kind, seats=seats, reason=info.last_error or "", model=info.model)
        if seats:  # a seat's wagering device: its seats only; the rest of the table wagers on
            self.apply(rm.SeatsUp(name) if up else rm.SeatsDown(name, seats))
        else:
            self.apply(rm.BlockCleared(rm.Block.DEVICE, name) if up else rm.BlockRaised(rm.Block.DEVICE, name))

    def _draws(self) -> dict[str, int | None]:
        return draws(self.cfg, self._draw)

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

    def act(self, event: rm.Input) -> None:
        """Apply an input asked for on the control socket: a refusal goes back to the asker."""
        assert self.state is not None
        self._after_step(machine.step(self.rules, self.state, event))  # InputError / RulesError reach the client

    def _after_step(self, out: rm.Step) -> None:
        if out.state.phase is not rm.Phase.BETTING and self.state is not None and self.state.phase is rm.Phase.BETTING:
            self.lockout.frozen()
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
        if self._tasks is not None and self.journal is not None:
            self.journal.keep(out.state, self.round_id())
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
            case rm.Book() | rm.Reverse() | rm.Close():
                assert self.journal is not None
                self.journal.write(e)
            case rm.Reconcile(round_id=rid, counts=counts):
                self.lockout.locked()
                log.info("wagers locked: count the chips", round=rid, accepted=dict(counts))
            case rm.Opened(round_id=rid):
                if self.shoe is not None:
                    self.shoe.opened()
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

    def round_id(self) -> str:
        """The id of the table's current round ("CS-07-r12")."""
        assert self.state is not None
        return rm.round_id(self.cfg.table, self.state.round_no)

    _round_id = round_id  # the name the tests read

    def _round_view(self) -> RoundView:
        assert self.state is not None
        return RoundView(self.round_id(), self.state.phase is rm.Phase.DEALING, self.state.phase.value,
                         self.state.accepted, self.state.void_requested)

    def paid_refusal(self) -> str | None:
        """Why the round being dealt can never be voided, or None: a void returns every wager, so nothing of the
        round may have been paid (its claims, and the table's own meters' bookings, say so)."""
        assert self.desk is not None and self.ledger is not None and self.state is not None
        why = cm.void_refusal(self.desk.state)
        if why is not None:
            return why
        rid = self.round_id()
        for meter, st in sorted(self.ledger.state.items()):
            booking = st.open_rounds.get(rid)
            if booking is not None and booking.paid:
                return f"an award was paid in round {rid} on meter {meter}: it can no longer be voided; settle it"
        return None

    def _void_refusal(self) -> str | None:
        """Why the round cannot be voided now: something of it paid, or a claim in the middle of a step."""
        assert self.desk is not None
        return self.paid_refusal() or self.desk.refusal_to_void()

    def void(self, reason: str) -> None:
        """Void the round being dealt: its claims end, then its booking is reversed (in the background).
        Checked before anything moves: RulesError and nothing changes."""
        assert self.desk is not None and self.state is not None
        machine.step(self.rules, self.state, rm.VoidRound(reason))  # refused here if the round is not dealt
        why = self._void_refusal()
        if why is not None:
            raise RulesError("round_id", why)
        self.desk.void(reason)
        self.act(rm.VoidRound(reason))

    # --- views ---------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The control socket's `status`: round, meters, devices, lights, journal head and anchor, link."""
        assert self.state is not None and self.ledger is not None
        link = self.link
        meters = meters_json(self.ledger.state, link.linked if link else None, link.values if link else {})
        shell = {"seats_disabled": self.seats_disabled_json(self.state.seats_down), "devices": self.devices_json(),
                 "uptime_seconds": self.uptime(), "lights": self.lights_json()}
        return card_status(self.cfg, self.state, self.round_id(), meters, self.ledger.head,
                           anchor=self.anchoring.json() if self.anchoring is not None else None,
                           link=link.status() if link is not None else None, shell=shell)

    def _floor_line(self) -> FloorLine | None:
        if self.state is None or self.ledger is None or self.desk is None or self.link is None:
            return None  # starting
        claims = self.desk.state.claims if self.desk.state.round_id == self.round_id() else ()
        # asked every second: only what the line carries, not the whole status (devices, lights, meters, anchor)
        shown = {"round": {"id": self.round_id(), "phase": self.state.phase.value}, "blocks": blocks_json(self.state),
                 "seats_disabled": self.seats_disabled_json(self.state.seats_down)}
        return linked.floor_line(self.cfg.table, shown, claims, self.link.linked.values(), format_time(utc_now()))

    def round_info(self) -> dict[str, Any]:
        """The control socket's `round`: the round's phase, its wagers, the ones not recognized and its claims."""
        assert self.state is not None and self.desk is not None
        claims = self.desk.claims_json() if self.desk.state.round_id == self.round_id() else []
        return round_json(self.state, self.round_id(), self._not_recognized, claims)


__all__ = ["DEAL_SETTLED_S", "TableDaemon"]

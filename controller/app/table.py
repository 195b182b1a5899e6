"""The table daemon: devices in, round machine, ledger and device outputs out.

One task owns the round state: every input (a device event, a ledger acknowledgement, a request on the
control socket) goes through `_apply`, which runs the pure step and then schedules its effects without
waiting on them. Effects that reach the disk (bookings, reversals, closes) run as tasks that feed their
acknowledgement back in as the next input; effects that reach devices are desired states that each
device's sender delivers (outputs.py). Nothing a device does can stop the daemon: driver tasks swallow
their own faults, and a storage error stops the process (the ledger's fatal hook) so that systemd starts it
again from the journal.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from drivers import events as ev
from drivers.device import Device

from .. import __version__
from ..config.credentials import verify_credential
from ..config.model import TableConfig
from ..errors import InputError, RulesError
from ..ledger import Ledger, software_digest
from ..ledger.errors import KeyConflict
from ..ledger.chain import utc_now
from ..meter import ops as meter_ops
from ..meter_ledger import MetersReducer, configure_meter, op_body
from ..money import UNITS_PER_CENT, format_cents, parse_cents, parse_units
from ..round import machine
from ..round import model as rm
from . import detect, linked, logs
from ..awards import PercentOfMeter, parse_award
from ..cards import card_str, cards_str
from ..link.client import Refused as LinkRefused
from ..settlement import DEALER_POSITION
from .claims import DEALER, Claim, Draws, RoundClaims, claim_spot, hit_hand, verify, verify_dealer
from .metrics import Metrics
from .outputs import DeviceOutputs
from .sdnotify import Notifier, watchdog_interval
from .setup import resume, standalone_meters, table_rules

log = structlog.get_logger("table")

LINK_ANSWER_S = 10.0  # how long a claim waits for the link authority to lock its award
WIN_DISPLAY_S = 10.0  # the sign shows a win this long, then the new amount (several states: within 30 s)
SIGN_REFRESH_S = 10.0  # the sign shows the meters again at least this often (several states: within 30 s)
DEVICE_METRICS_S = 5.0  # how often the drivers' counters are copied into the metrics
EVENT_QUEUE = 10_000  # device events waiting for the round task (bounded: a babbling device cannot eat memory)
DEAL_SETTLED_S = 3.0  # a complete deal from the card-reading shoe is claimed if no card more comes this long


def payout_key(rid: str, seat: object, spot: str, i: int) -> str:
    """The journal key of payout `i` of a hand: by the hand, not the claim, so that a hand claimed again after a
    restart is never paid twice (§ 639a.11(c)(5))."""
    who = "dealer" if seat in (DEALER, DEALER_POSITION) else seat
    return f"{rid}:{who}:{spot}:pay:{i}"


@dataclass
class DeviceInfo:
    kind: str
    up: bool | None = None
    errors: int = 0  # outages since start
    last_error: str | None = None


class TableDaemon:
    def __init__(self, cfg: TableConfig, devices: dict[str, Device], *, buses: dict[str, Any] | None = None,
                 metrics: Metrics | None = None, notifier: Notifier | None = None,
                 control: Callable[[TableDaemon], Any] | None = None,
                 draw: Callable[[int], int] = secrets.randbelow) -> None:
        self.cfg = cfg
        self.rules = table_rules(cfg)
        self.devices = devices
        self.buses = buses or {}
        self.metrics = metrics or Metrics(cfg.table)
        self.notifier = notifier or Notifier()
        self._control_factory = control
        self._draw = draw
        self.ledger: Ledger | None = None
        self.state: rm.TableState | None = None
        self._events: asyncio.Queue = asyncio.Queue(EVENT_QUEUE)
        self._outputs = {name: DeviceOutputs(d) for name, d in devices.items()}
        self._info = {name: DeviceInfo(cfg.devices[name].kind) if name in cfg.devices else DeviceInfo("?")
                      for name in devices}
        self._seat_device: dict[int, str] = {}
        for d in cfg.devices.values():
            if d.kind == "seat":
                for s in d.seats:
                    self._seat_device[s] = d.name
        self._booked: dict[str, tuple[str, ...]] = {}  # round id -> meters booked
        self._writes: dict[str, asyncio.Task] = {}  # round id -> the task writing its close or reversal
        self._claims = RoundClaims("")
        self._locks: dict[str, dict[int, str]] = {}  # claim -> payout index -> its lock at the link authority
        self._win_seats: set[int] = set()
        self._lock_pressed_at: float | None = None
        self._not_recognized = 0
        self._cards: list[int] = []
        self._tasks: asyncio.TaskGroup | None = None
        self.ready = asyncio.Event()
        self.started_at = time.monotonic()
        # Linked meters (§ 605a.8) live at the link authority; this table keeps a durable outbox for them.
        self.link = linked.make_link(cfg, on_alive=self._link_alive, on_meter=lambda _m: self._show_meters(),
                                     on_win=self._link_win)
        logs.set_table_context(table=cfg.table)

    # --- start-up ----------------------------------------------------------------------------------

    def _open_ledger(self) -> Ledger:
        led = Ledger.open(self.cfg.state_dir, MetersReducer(), software_digest=software_digest())
        try:
            self._define_meters(led)
        except BaseException:
            led.close()
            raise
        return led

    def _define_meters(self, led: Ledger) -> None:
        """Create each of the table's meters the journal does not have yet; a meter whose parameters the
        configuration changed gets a recorded parameter change (refused while one of its rounds is open)."""
        for m in standalone_meters(self.cfg):
            done = configure_meter(led, m.params, self.cfg.table, f"configuration {self.cfg.source.name}", utc_now())
            if done == "defined":
                log.info("meter defined", meter=m.id, reset=format_cents(m.params.reset_cents))
            elif done == "changed":
                log.warning("meter parameters changed by the configuration", meter=m.id)

    # --- running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        self.ledger = await asyncio.to_thread(self._open_ledger)
        try:
            if self.link is not None:
                await asyncio.to_thread(self.link.open)
            async with asyncio.TaskGroup() as tg:
                self._tasks = tg
                self._outputs_at_start()
                await asyncio.to_thread(self._undo_partial_bookings)
                meters = {**self.ledger.state, **linked.resume_views(self.link)}
                self.state, open_round = resume(self.rules, meters)
                if open_round is not None:
                    self._booked[open_round] = tuple(sorted(
                        m for m, s in meters.items() if open_round in s.open_rounds))
                    log.warning("round was open when the controller stopped: settle or void it", round=open_round)
                    self._after_step(rm.Step(self.state, (rm.Lamp(True),)))
                else:
                    first = machine.start(self.rules, self.state.round_no)
                    self._after_step(first)
                if self.link is not None:
                    if not self.link.alive:  # until the authority is heard: no progressive wagers
                        self.apply(rm.BlockRaised(rm.Block.LINK, "link"))
                    tg.create_task(self.link.run(), name="link")
                await start_services(self, tg, "rounds")
                self._show_meters()
                self.ready.set()
                self.notifier.ready(f"table {self.cfg.table}: round {rm.round_id(self.cfg.table, self.state.round_no)}")
                log.info("table ready", table=self.cfg.table, round=rm.round_id(self.cfg.table, self.state.round_no))
        finally:
            self.notifier.stopping()
            await close_buses(self.buses)
            led, self.ledger = self.ledger, None
            if led is not None:
                await asyncio.to_thread(led.close)
            if self.link is not None:
                self.link.close()  # not in a thread: a second cancellation must not leave it open

    def _undo_partial_bookings(self) -> None:
        """A lock-out booked on only some of its meters (the controller stopped between two journal entries) never
        completed: dealing waits for the whole booking, so the round was not dealt. What it booked is reversed,
        as a void returns every wager, and betting opens on the next round. The table's own meters and its linked
        meters alike: a booking on a linked meter is in the link journal, and its reversal is journaled there
        (the link sends it to the authority once it runs). Blocking: run it in a thread, before the link runs."""
        assert self.ledger is not None
        meters = {**self.ledger.state, **linked.resume_views(self.link)}

        def never_booked(m: str, rid: str) -> bool:
            # Open there, or ended there (closed or voided: a stop between two closes or voids of one round is
            # not an unfinished lock-out; `resume` leaves such a round open for the dealer to settle or void).
            st = meters.get(m)
            return st is None or (rid not in st.open_rounds and rid not in st.recent_rounds)

        for meter, st in sorted(meters.items()):
            for rid, booking in sorted(st.open_rounds.items()):
                missing = [m for m in booking.round_meters if never_booked(m, rid)]
                if not missing:
                    continue
                op = meter_ops.VoidRound(rid, utc_now(), f"lock-out not completed: not booked on {', '.join(missing)} "
                                                        "when the controller stopped")
                key = f"{rid}:void:{meter}"
                if self._is_linked(meter):
                    self.link.journal(op, meter, key)
                else:
                    self.ledger.submit(op.kind, op_body(meter, op), key)
                log.warning("partial booking reversed", round=rid, meter=meter, missing=missing)

    def _outputs_at_start(self) -> None:
        """Every light off first: a restarted controller owns its outputs, and lights the stopped one left on
        would tell players a wager was accepted or a hand won (a resumed round lights its own again)."""
        for d in self.cfg.devices_of("seat"):
            out = self._outputs.get(d.name)
            if out is None:
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
                out.want(("accepted", seat, spot), ev.SetAcceptedLight(seat, spot, False))
            for seat in wins:
                out.want(("win", seat), ev.SetWinLight(seat, False))

    def _emit_for(self, name: str) -> Callable[[ev.Event], None]:
        def emit(event: ev.Event) -> None:
            try:
                self._events.put_nowait(event)
            except asyncio.QueueFull:
                log.error("event queue full: device event dropped", device=name, event=repr(event))
        return emit

    async def _consume(self) -> None:
        while True:
            event = await self._events.get()
            try:
                self._on_device_event(event)
            except Exception:  # noqa: BLE001 - one bad event must not stop the table
                log.exception("device event failed", event=repr(event))

    async def _watchdog(self, interval: float) -> None:
        while True:
            if self.ledger is not None and self.ledger.failed is None:
                self.notifier.watchdog()
            await asyncio.sleep(interval)

    async def _device_metrics(self) -> None:
        """Copy each driver's own counters into the metrics (Prometheus counters only go up: add the
        difference since the last look)."""
        seen: dict[tuple[str, str], int] = {}
        while True:
            for name, dev in self.devices.items():
                health = getattr(dev, "health", None)
                errors = dict(getattr(health, "errors", None) or {})
                get = getattr(dev, "metrics", None)
                m = get() if callable(get) else None
                if m is not None:
                    errors = dict(m.errors)
                    if m.last_poll_s is not None:
                        self.metrics.device_poll.labels(name).observe(m.last_poll_s)
                for kind, n in errors.items():
                    before = seen.get((name, kind), 0)
                    if n > before:
                        self.metrics.device_errors.labels(name, kind).inc(n - before)
                        seen[(name, kind)] = n
            await asyncio.sleep(DEVICE_METRICS_S)

    async def _sign_refresh(self) -> None:
        while True:
            await asyncio.sleep(SIGN_REFRESH_S)
            self._show_meters()

    # --- inputs ------------------------------------------------------------------------------------

    def _on_device_event(self, e: ev.Event) -> None:
        match e:
            case ev.WagerSensed(device=_, seat=seat, spot=spot, amount_cents=amount):
                if spot not in self.rules.spots:
                    log.warning("wager on a spot this table does not offer", device=e.device, seat=seat, spot=spot)
                elif e.present_at_contact and self.state is not None and (seat, spot) not in self.state.accepted:
                    # on the spot before the controller could see it (a restart, a device back): it may be a
                    # chip of the last round; a wager is placed while betting is open and seen (§ 639a.2(c))
                    self._note("wager-not-recognized", {"reason": "present-at-contact: lift it and place it again",
                                                        "seat": seat, "spot": spot})
                else:
                    self.apply(rm.ChipSensed(seat, spot, amount))
            case ev.WagerRemoved(device=_, seat=seat, spot=spot):
                if spot in self.rules.spots:
                    self.apply(rm.ChipRemoved(seat, spot))
            case ev.LockoutPressed():
                self._lock_pressed_at = time.monotonic()
                self.apply(rm.LockoutPressed(**self._draws()))
            case ev.ShufflerCount(count=count, deck=deck):
                self.apply(rm.ShuffleCounted(count, deck))
            case ev.ShuffleFault(reason=reason):
                log.warning("shuffle fault: reshuffle (§ 667a.13(d))", device=e.device, reason=reason)
            case ev.CardsDispensed(count=count):
                self.apply(rm.CardsDispensed(count))
            case ev.ShoeJam():
                if self.state is not None and self.state.phase is rm.Phase.DEALING:
                    self.apply(rm.VoidRound("shoe jam (§ 667a.13(e))"))
                else:
                    log.warning("shoe jam outside a round", device=e.device)
            case ev.CardDealt(card=card):
                if self.state is None or self.state.phase not in (rm.Phase.LOCKING, rm.Phase.DEALING):
                    # the deal begins after "no more bets" (§ 639a.8(b), § 667a.8(b)): no card of a round's deal
                    log.warning("card read outside a deal: ignored", device=e.device, card=card_str(card))
                else:
                    self._cards.append(card)
                    self._shoe_card()
            case ev.DiceRolled(die1=d1, die2=d2):
                log.info("dice rolled", device=e.device, die1=d1, die2=d2)
            case ev.DeviceDown(reason=reason):
                self._device_state(e.device, False, reason)
            case ev.DeviceUp():
                self._device_state(e.device, True, "")

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

    def _device_state(self, name: str, up: bool, reason: str) -> None:
        info = self._info.setdefault(name, DeviceInfo("?"))
        info.up = up
        self.metrics.device_up.labels(name, info.kind).set(1 if up else 0)
        if up:
            if name in self._outputs:
                self._outputs[name].resend_all()
            self.apply(rm.BlockCleared(rm.Block.DEVICE, name))
        else:
            info.errors += 1
            info.last_error = reason
            self.apply(rm.BlockRaised(rm.Block.DEVICE, name))

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

    def _after_step(self, out: rm.Step) -> None:
        was_blocked = self.state.blocked if self.state is not None else False
        self.state = out.state
        self.metrics.set_phase(out.state.phase.value)
        for block in rm.Block:
            self.metrics.blocked.labels(block.value).set(1 if out.state.blocks.get(block) else 0)
        for effect in out.effects:
            self._effect(effect)
        if out.state.blocked != was_blocked:
            self._show_meters()

    # --- effects -----------------------------------------------------------------------------------

    def _effect(self, e: rm.Effect) -> None:
        match e:
            case rm.Light(seat=seat, spot=spot, on=on):
                name = self._seat_device.get(seat)
                if name in self._outputs:
                    self._outputs[name].want(("accepted", seat, spot), ev.SetAcceptedLight(seat, spot, on))
            case rm.Lamp(on=on):
                for d in self.cfg.devices_of("lockout"):
                    if d.name in self._outputs:
                        self._outputs[d.name].want("lamp", ev.SetLockoutLamp(on))
            case rm.Book():
                self._spawn(self._book(e), f"book:{e.round_id}")
            case rm.Reverse():
                self._writes[e.round_id] = self._spawn(self._reverse(e), f"void:{e.round_id}")
            case rm.Close(round_id=rid):
                self._writes[rid] = self._spawn(self._close(rid), f"close:{rid}")
            case rm.Reconcile(round_id=rid, counts=counts):
                if self._lock_pressed_at is not None:
                    self.metrics.lockout_latency.observe(time.monotonic() - self._lock_pressed_at)
                    self._lock_pressed_at = None
                log.info("wagers locked: count the chips", round=rid, accepted=dict(counts))
            case rm.Opened(round_id=rid):
                self._cards.clear()
                self._not_recognized = 0
                self._claims = RoundClaims(rid)
                for seat in sorted(self._win_seats):
                    self._win_light(seat, False)
                self._win_seats.clear()
                logs.set_table_context(table=self.cfg.table, round=rid)
                log.info("betting open", round=rid)
            case rm.Note(what=what, detail=detail):
                self._note(what, dict(detail))

    def _note(self, what: str, detail: dict[str, Any]) -> None:
        if what == "wager-accepted":
            self.metrics.wagers.labels(detail["spot"]).inc()
            self.metrics.wagers_cents.labels(detail["spot"]).inc(detail["cents"])
        elif what == "wager-not-recognized":
            self._not_recognized += 1
            self.metrics.not_recognized.labels(detail["reason"].split(":")[0]).inc()
        level = "warning" if what in ("wager-not-recognized", "deck-count-wrong", "stub-count-wrong",
                                      "deck-not-alternated", "round-voided", "wagering-disabled") else "info"
        getattr(log, level)(what, **detail)

    def _spawn(self, coro, name: str) -> asyncio.Task:
        assert self._tasks is not None
        return self._tasks.create_task(coro, name=name)

    async def _durable(self, rid: str) -> None:
        """Wait until the journal holds what ending round `rid` wrote (its close or its reversal)."""
        task = self._writes.pop(rid, None)
        if task is not None:
            await asyncio.shield(task)

    async def _submit(self, op, meter: str, key: str):
        assert self.ledger is not None
        t0 = time.perf_counter()
        if self.link is not None and meter in self.link.linked:  # durable in the outbox; applied at the authority
            receipt = linked.LinkReceipt(await self.link.send(op, meter, key))
        else:
            receipt = await self.ledger.submit_async(op.kind, op_body(meter, op), key)
        self.metrics.commit_latency.observe(time.perf_counter() - t0)
        return receipt

    async def _book(self, e: rm.Book) -> None:
        now = utc_now()
        drawing = {w.meter for w in self.cfg.wagers.values() if w.wager.magic_and_lucky and w.meter}
        for meter, wagers in e.wagers.items():
            draws = {"magic_card": e.magic_card, "lucky_seat": e.lucky_seat} if meter in drawing else {}
            op = meter_ops.BookContributions(e.round_id, self.cfg.table, wagers, now, **draws,
                                             on_dealer=tuple(e.on_dealer.get(meter, ())),
                                             round_meters=tuple(e.wagers) if len(e.wagers) > 1 else ())
            receipt = await self._submit(op, meter, f"{e.round_id}:book:{meter}")
            if "contributed" in receipt.result:  # a linked meter's is counted at its authority
                contributed = parse_units(receipt.result["contributed"], "contributed")
                self.metrics.contributions.labels(meter).inc(contributed // UNITS_PER_CENT)
        log.info("round booked", round=e.round_id, meters=sorted(e.wagers), magic_card=e.magic_card,
                 lucky_seat=e.lucky_seat)
        self._booked[e.round_id] = tuple(sorted(e.wagers))
        self.apply(rm.Booked(e.round_id))
        self._show_meters()

    async def _reverse(self, e: rm.Reverse) -> None:
        now = utc_now()
        await self._release_unsettled_locks(e.round_id, "the round was voided")
        for meter in e.meters:
            op = meter_ops.VoidRound(e.round_id, now, e.reason)
            await self._submit(op, meter, f"{e.round_id}:void:{meter}")
        self._booked.pop(e.round_id, None)
        self.metrics.rounds.labels("voided").inc()
        self.apply(rm.Voided(e.round_id))
        self._show_meters()

    async def _close(self, rid: str) -> None:
        now = utc_now()
        await self._release_unsettled_locks(rid, "the round was settled without the claim's approval")
        for meter in self._booked.pop(rid, ()):
            op = meter_ops.CloseRound(rid, now)
            await self._submit(op, meter, f"{rid}:close:{meter}")
        self.metrics.rounds.labels("closed").inc()

    def _link_alive(self, up: bool) -> None:
        """The link authority heard again, or not within the link timeout (§ 605a.8; NY 5321.18)."""
        if self.state is not None:
            self.apply(rm.BlockCleared(rm.Block.LINK, "link") if up else rm.BlockRaised(rm.Block.LINK, "link"))

    def _link_win(self, win) -> None:
        """A hit on a linked meter at any table: every sign of the link shows it, then the new amount."""
        if win.state != "paid" or win.table == self.cfg.table:
            return  # this table shows its own wins itself (_pay)
        self._show_sign(ev.ShowMessage(ev.SignMessage.WIN, table=win.table, seat=win.seat, amount_cents=win.cents))
        self._spawn(self._show_meters_later(WIN_DISPLAY_S), f"sign-after-link-win:{win.claim}")

    def _show_meters(self) -> None:
        """Every sign shows the meters, or OFFLINE while progressive wagering is disabled."""
        if self.ledger is None or self.state is None:
            return
        meters = self.ledger.state
        amounts = tuple((m.id, meters[m.id].current_cents) for m in standalone_meters(self.cfg) if m.id in meters)
        if self.link is not None:
            amounts += tuple((m, self.link.values[a].cents) for m, a in self.link.linked.items()
                             if a in self.link.values)
        for mid, cents in amounts:
            self.metrics.meter_cents.labels(mid).set(cents)
        for d in self.cfg.devices_of("sign"):
            out = self._outputs.get(d.name)
            if out is None:
                continue
            if self.state.blocked:
                out.want("sign", ev.ShowMessage(ev.SignMessage.OFFLINE, table=self.cfg.table))
            else:
                out.want("sign", ev.ShowAmounts(amounts))

    # --- the control socket's operations ------------------------------------------------------------

    def _supervisor(self, args: dict[str, Any]) -> str:
        name = args.get("supervisor")
        secret = args.get("secret")
        sup = self.cfg.supervisor(name) if isinstance(name, str) else None
        if sup is None or not isinstance(secret, str) or not verify_credential(secret, sup.credential):
            raise PermissionError("supervisor name or credential not accepted")
        return sup.name

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """The control socket's operations (docs/operations.md has their arguments and results)."""
        assert self.state is not None and self.ledger is not None
        rid = rm.round_id(self.cfg.table, self.state.round_no)
        match op:
            case "status":
                return self.status()
            case "round":
                return self.round_info()
            case "meters":
                from ..cli.audit import meter_json
                return [meter_json(s) for _m, s in sorted(self.ledger.state.items())]
            case "history":
                from ..cli.audit import hit_json
                return [hit_json(m, h) for m, s in sorted(self.ledger.state.items()) for h in s.history]
            case "settle":
                if self._claims.pending is not None:
                    raise RulesError("round_id", f"{self._claims.pending.id} awaits a supervisor: approve or reject "
                                                 "it before the round is settled")
                wagers = len(self.state.accepted)
                self._act(rm.RoundSettled(str(args.get("round_id", ""))))
                await self._durable(str(args.get("round_id", "")))
                return {"message": f"round {args.get('round_id')} settled ({wagers} wagers); "
                                   f"round {rm.round_id(self.cfg.table, self.state.round_no)} open for betting"}
            case "void":
                who = self._supervisor(args)
                reason = args.get("reason")
                if not isinstance(reason, str) or not reason.strip():
                    raise InputError("reason", "say why the round is voided")
                wagers = len(self.state.accepted)
                self._act(rm.VoidRound(f"{reason} (by {who})"))
                await self._durable(rid)
                return {"message": f"round {rid} voided: {wagers} wagers returned"}
            case "deck_replaced":
                who = self._supervisor(args)
                self._act(rm.DeckReplaced(who))
                return {"message": f"new deck confirmed by {who}"}
            case "stub_count":
                self._act(rm.StubCounted(args.get("stub"), args.get("dealt")))
                ok = not self.state.blocks.get(rm.Block.DECK)
                return {"message": "stub count recorded: 52 cards" if ok else
                        "stub count wrong: the deck is removed (§ 667a.8(h))", "deck_ok": ok}
            case "close_table":
                who = self._supervisor(args)
                self._act(rm.BlockRaised(rm.Block.CLOSED, who))
                return {"message": f"table {self.cfg.table} closed by {who}: no progressive wagers"}
            case "open_table":
                who = self._supervisor(args)
                for holder in list(self.state.blocks.get(rm.Block.CLOSED, ())):
                    self._act(rm.BlockCleared(rm.Block.CLOSED, holder))
                return {"message": f"table {self.cfg.table} opened by {who}"}
            case "claim":
                return await self._claim(args)
            case "approve":
                who = self._supervisor(args)
                claim = self._claims.get(args.get("claim_id"))
                if claim.status != "pending":
                    raise RulesError("claim_id", f"{claim.id} is {claim.status}")
                await self._pay(claim, who)
                return {"message": f"{claim.describe()}: approved by {who} and paid", "claim_id": claim.id}
            case "reject":
                who = self._supervisor(args)
                claim = self._claims.get(args.get("claim_id"))
                reason = args.get("reason")
                if not isinstance(reason, str) or not reason.strip():
                    raise InputError("reason", "say why the claim is rejected")
                if claim.status != "pending":
                    raise RulesError("claim_id", f"{claim.id} is {claim.status}")
                if claim.id in self._locks:  # a linked meter gets its locked amount back
                    await self._release_linked(claim, who, reason)
                self._claims = self._claims.with_claim(replace(claim, status="rejected", by=who, reason=reason))
                for seat in claim.winners:  # a light another claim of the round turned on stays on
                    if seat not in self._claims.lit:
                        self._win_light(seat, False)
                self._show_meters()
                log.warning("claim rejected", claim=claim.id, seat=claim.seat, by=who, reason=reason)
                return {"message": f"{claim.id} rejected by {who}: nothing paid", "claim_id": claim.id}
        raise LookupError(op)

    async def _claim(self, args: dict[str, Any], by: str = "dealer") -> dict[str, Any]:
        """A hit claimed by the dealer with the cards (§ 639a.11(c)(5)-(6), § 667a.11(d)(2)): a seat's own hand
        (`seat` a number, optionally `spot`), or the dealer's hand for every seat that wagered on it (`seat`
        "dealer", § 639a.12(e)(2)). Magic Card and Lucky Bonus payouts come with the hand they are paid on.
        `by`: who claims it ("dealer", or "shoe" for a hit detected from the card-reading shoe)."""
        assert self.state is not None and self.ledger is not None
        rid = rm.round_id(self.cfg.table, self.state.round_no)
        if self.state.phase is not rm.Phase.DEALING:
            raise RulesError("claim", f"round {rid} is {self.state.phase.value}: hits are claimed while it is dealt")
        if self._claims.round_id != rid:  # a round resumed after a restart: number claims after those journaled
            self._claims = RoundClaims(rid, first=await asyncio.to_thread(self._next_claim_number, rid))
        seat = args.get("seat")
        spot = claim_spot(self.rules, self.state.accepted, seat, args.get("spot"))
        rule = self.rules.spots[spot]
        known = any(c.spot == spot and c.seat == (DEALER_POSITION if seat == DEALER else seat)
                    for c in self._claims.claims)  # else claims.verify says how it was settled
        if not known and await asyncio.to_thread(self._journaled, rule.meter, payout_key(rid, seat, spot, 0)):
            raise RulesError("seat", f"the {spot} hand of {'the dealer' if seat == DEALER else f'seat {seat}'} "
                                     f"in round {rid} is paid already")
        wcfg = self.cfg.wagers[rule.wager]
        is_linked = self._is_linked(rule.meter)
        if rule.meter not in self.ledger.state and not is_linked:
            raise RulesError("spot", f"meter {rule.meter} is not kept at this table: its hits are not claimed here")
        draws = await self._round_draws(rid, rule.meter) if wcfg.wager.magic_and_lucky else Draws()
        if rm.round_id(self.cfg.table, self.state.round_no) != rid or self.state.phase is not rm.Phase.DEALING:
            raise RulesError("claim", f"round {rid} ended while the claim was being verified")
        meter_units, reset_units = self._meter_now(rule.meter)  # as it stands now, after any wait
        common: dict[str, Any] = dict(
            game=self.cfg.game, wager=wcfg.wager, paytable=wcfg.paytable, meter_units=meter_units,
            reset_units=reset_units, spot=spot, meter=rule.meter, cards=args.get("cards"), draws=draws)
        on_spot = {st: c for (st, sp), c in self.state.accepted.items() if sp == spot}
        if seat == DEALER:
            claim = verify_dealer(self._claims, wagers=on_spot, **common)
        else:
            claim = verify(self._claims, seat=seat, wager_cents=self.state.accepted.get((seat, spot)), others=on_spot,
                           **common)
        if is_linked:
            claim = await self._lock_linked(claim)
        self._claims = self._claims.with_claim(claim)
        for winner in claim.winners:
            self._win_light(winner, True)  # § 639a.11(c)(5)(ii): the light the dealer verifies
        log.info("claim verified", claim=claim.id, seat=claim.seat, spot=spot, amount=format_cents(claim.amount_cents),
                 approval=claim.needs_approval, by=by)
        shown = {"claim_id": claim.id, **({"draws": draws.to_json()} if wcfg.wager.magic_and_lucky else {})}
        # A hit the shoe detected is never paid on the controller's say alone: which seat was dealt which
        # cards rests on the dealing order (docs/rounds.md), so a person confirms it like a large award.
        if not claim.needs_approval and by != "shoe":
            await self._pay(claim, by)
            return {"message": f"{claim.describe()}: paid by the table", **shown, "status": "paid"}
        self._show_sign(ev.ShowMessage(ev.SignMessage.PENDING, table=self.cfg.table, seat=claim.seat,
                                       amount_cents=claim.amount_cents))
        return {"message": f"{claim.describe()}: awaiting a supervisor's approval "
                           f"(progressivectl approve {claim.id})", **shown, "status": "pending"}

    def _shoe_card(self) -> None:
        """A card of the round's deal read by the card-reading shoe. At a table whose cards come from the shoe
        (`cards.source` "shoe"), once the deal is complete each hand a wager of the round pays is detected
        (controller/app/detect.py) and claimed as the dealer would claim it, by "shoe" (docs/rounds.md)."""
        if self.cfg.cards is None or self.cfg.cards.source != "shoe" or self.state is None:
            return
        rid, n = rm.round_id(self.cfg.table, self.state.round_no), len(self._cards)
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
            log.info("hit detected", round=rid, seat=hit.seat, spot=hit.spot, cards=cards_str(hit.cards),
                     hand=hit.hand, award=hit.award)
        if found.hits:
            self._spawn(self._claim_detected(rid, n, found.hits), f"detected:{rid}")

    async def _claim_detected(self, rid: str, dealt: int, hits: tuple[detect.Hit, ...]) -> None:
        """Claim the hits of a complete deal through the dealer's claim path, one at a time in settlement order,
        once no card more came for DEAL_SETTLED_S: a card more means a seat the controller does not see was dealt."""
        await asyncio.sleep(DEAL_SETTLED_S)

        def dealing() -> bool:
            return rm.round_id(self.cfg.table, self.state.round_no) == rid and self.state.phase is rm.Phase.DEALING

        for i, hit in enumerate(hits):
            while rm.round_id(self.cfg.table, self.state.round_no) == rid and (
                    self.state.phase is rm.Phase.LOCKING or self._claims.pending is not None):
                await asyncio.sleep(0.05)  # the booking on disk; a claim awaiting approval (one at a time)
            if not dealing() or len(self._cards) != dealt:
                log.warning("detected hits not claimed", round=rid, left=[h.describe() for h in hits[i:]],
                            reason="the shoe read a card more" if dealing() else "the round is no longer dealt")
                return
            try:
                got = await self._claim(hit.claim(), by="shoe")
            except InputError as err:  # a RulesError too: claimed by the dealer already, settled before, ...
                log.warning("detected hit not claimed", round=rid, hit=hit.describe(), error=str(err))
                continue
            except Exception:  # noqa: BLE001 - a detection must not stop the table
                log.exception("detected hit not claimed", round=rid, hit=hit.describe())
                continue
            log.info("detected hit claimed", round=rid, claim=got["claim_id"], status=got["status"], by="shoe")

    def _journal_of(self, meter: str) -> Any:
        return self.link.ledger.db_path if self._is_linked(meter) else self.ledger.db_path

    def _journaled(self, meter: str, key: str) -> bool:
        """Whether `key` is in the journal that keeps `meter` (a blocking read on a connection of its own)."""
        from ..ledger import journal
        conn = journal.connect(self._journal_of(meter), "ro")
        try:
            return key in journal.find_keys(conn, [key])
        finally:
            conn.close()

    def _next_claim_number(self, rid: str) -> int:
        """One more than the highest claim number of round `rid` in the journals: claim ids stay unique across a
        restart, and so do the keys of what they journal."""
        from ..link.journal_keys import KeyIndex
        prefix, last = f"{rid}-c", 0
        for db in {self._journal_of(r.meter) for r in self.rules.spots.values()}:
            keys = KeyIndex(db)
            try:
                for key in keys.with_prefix(prefix):
                    number = key[len(prefix):].split(":", 1)[0]
                    last = max(last, int(number)) if number.isdigit() else last
            finally:
                keys.close()
        return last + 1

    def _is_linked(self, meter: str) -> bool:
        return self.link is not None and meter in self.link.linked

    def _meter_now(self, meter: str) -> tuple[int, int]:
        """(amount, reset amount) of a meter in meter units; a linked meter's as the authority last sent it."""
        assert self.ledger is not None
        if not self._is_linked(meter):
            m = self.ledger.state[meter]
            return m.current, m.params.reset_cents * UNITS_PER_CENT
        value = self.link.values.get(self.link.linked[meter])
        if value is None:
            raise RulesError("claim", f"the link authority's meter {self.link.linked[meter]} has not been heard yet")
        return value.cents * UNITS_PER_CENT, value.reset_cents * UNITS_PER_CENT

    async def _lock_linked(self, claim: Claim) -> Claim:
        """A percentage award on a linked meter is locked at the authority now, at this player's turn (§ 605a.8):
        the meter resets at once for every table; approval pays the lock, rejection releases it. A shared award
        (the dealer's hand) is locked once, with its number of shares. The amounts are the authority's."""
        assert self.link is not None
        now = utc_now()
        payouts = list(claim.payouts)
        locks: dict[int, str] = {}
        per_share: dict[str, int] = {}
        for i, p in enumerate(payouts):
            award = parse_award(p.award, "award")
            if not isinstance(award, PercentOfMeter):
                continue
            if p.shared_by > 1 and p.award in per_share:
                payouts[i] = replace(p, amount=per_share[p.award])
                continue
            lock_id = f"{claim.id}:{i}"
            op = meter_ops.LockPercentAward(claim.round_id, self.cfg.table, p.seat, hit_hand(p), p.award, award.percent,
                                            now, lock_id, shares=p.shared_by)
            seq = await self.link.send(op, claim.meter, f"{claim.id}:lock:{i}")
            try:
                result = await self.link.answer(seq, LINK_ANSWER_S)
            except TimeoutError:
                raise RulesError("claim", f"the link authority has not answered the lock of {lock_id} within "
                                          f"{LINK_ANSWER_S:.0f} s: it waits in the outbox; claim again") from None
            except LinkRefused as e:
                raise RulesError("claim", f"the link authority refused the lock of {lock_id}: {e.problem}") from None
            per_share[p.award] = parse_cents(result["amount"], "amount")
            payouts[i] = replace(p, amount=per_share[p.award])
            locks[i] = lock_id
        self._locks[claim.id] = locks
        return replace(claim, payouts=tuple(payouts))

    async def _release_unsettled_locks(self, rid: str, reason: str) -> None:
        """Awards of round `rid` still locked at the link authority (a claim forgotten in a restart) go back to
        the meter before the round ends: the authority refuses to end a round with one pending."""
        if self.link is None:
            return
        for lock_id, (meter, lock_round) in sorted(self.link.outbox.locks.items()):
            if lock_round == rid:
                op = meter_ops.ReleaseLockedAward(lock_id, "controller", reason, utc_now())
                await self._submit(op, meter, f"{lock_id}:release")
                log.warning("locked award released", lock=lock_id, reason=reason)

    async def _release_linked(self, claim: Claim, who: str, reason: str) -> None:
        now = utc_now()
        for i, lock_id in self._locks.pop(claim.id, {}).items():
            op = meter_ops.ReleaseLockedAward(lock_id, who, reason, now)
            await self._submit(op, claim.meter, f"{claim.id}:release:{i}")

    async def _round_draws(self, rid: str, meter: str) -> Draws:
        """The Magic Card and Lucky Bonus position of round `rid` as its booking on `meter` recorded them in the
        journal at lock-out (§ 639a.1): a claim pays on what was recorded, also after a restart."""
        if self._claims.draws is not None:
            return self._claims.draws
        assert self.ledger is not None
        key = f"{rid}:book:{meter}"
        is_linked = self._is_linked(meter)
        db = self.link.ledger.db_path if is_linked else self.ledger.db_path

        def read() -> dict[str, Any] | None:
            from ..ledger import journal
            from ..ledger.chain import Entry

            conn = journal.connect(db, "ro")
            try:
                found = journal.find_keys(conn, [key])
            finally:
                conn.close()
            if key not in found:
                return None
            body = Entry(found[key][1]).body
            return body["body"] if is_linked else body  # a link journal holds the operation in its send

        body = await asyncio.to_thread(read)
        if body is None:
            booked = self.link.outbox.open_rounds.get(meter, {}) if is_linked else self.ledger.state[meter].open_rounds
            if rid in booked:
                raise RulesError("claim", f"the booking of round {rid} on meter {meter} is not in the journal under "
                                          f"{key!r}: its Magic Card and Lucky Bonus cannot be read; settle by hand")
            return Draws()  # nothing booked on the meter: no wager to pay
        draws = Draws.from_booking(body, key)
        self._claims = self._claims.with_draws(draws)
        return draws

    async def _pay(self, claim: Claim, who: str) -> None:
        """Pay every payout of an approved claim through the ledger, then show the win."""
        now = utc_now()
        locks = self._locks.pop(claim.id, {})
        for i, p in enumerate(claim.payouts):
            award = parse_award(p.award, "award")
            if i in locks:  # locked at the link authority when claimed
                op = meter_ops.PayLockedAward(locks[i], who, now)
            elif isinstance(award, PercentOfMeter):  # shared: one share of an award on the dealer's hand
                op = meter_ops.PayPercentAward(claim.round_id, self.cfg.table, p.seat, hit_hand(p), p.award,
                                               award.percent, now, who, shares=p.shared_by)
            else:  # a fixed or odds payout, a Magic Card or Lucky Bonus, or an Envy Bonus to another player
                op = meter_ops.PayFixedAward(claim.round_id, self.cfg.table, p.seat, hit_hand(p), p.award, p.amount,
                                             p.paid_by, now, who)
            try:
                receipt = await self._submit(op, claim.meter, payout_key(claim.round_id, claim.seat, claim.spot, i))
            except KeyConflict:  # paid before a restart (a claim cut short): never twice
                log.warning("payout journaled before: not paid again", claim=claim.id, seat=p.seat, payout=i)
                continue
            paid = receipt.result.get("paid")
            if paid is not None and parse_cents(paid, "paid") != p.amount:
                log.error("meter paid another amount than the claim showed", claim=claim.id, shown=p.amount,
                          paid=paid)
            label = p.award if p.kind == "paytable" else p.kind
            self.metrics.hits.labels(claim.meter, label).inc()
            self.metrics.payouts.labels(claim.meter, label, p.paid_by).inc(p.amount)
        self._claims = self._claims.with_claim(replace(claim, status="paid", by=who))
        log.info("claim paid", claim=claim.id, seat=claim.seat, amount=format_cents(claim.amount_cents), by=who)
        self._show_sign(ev.ShowMessage(ev.SignMessage.WIN, table=self.cfg.table, seat=claim.seat,
                                       amount_cents=claim.amount_cents))
        self._spawn(self._show_meters_later(WIN_DISPLAY_S), f"sign-after-win:{claim.id}")

    async def _show_meters_later(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._show_meters()

    def _show_sign(self, command: ev.Command) -> None:
        for d in self.cfg.devices_of("sign"):
            if d.name in self._outputs:
                self._outputs[d.name].want("sign", command)

    def _win_light(self, seat: int, on: bool) -> None:
        name = self._seat_device.get(seat)
        if name in self._outputs:
            self._outputs[name].want(("win", seat), ev.SetWinLight(seat, on))
        if on:
            self._win_seats.add(seat)

    def _act(self, event: rm.Input) -> None:
        """Apply an input asked for on the control socket: a refusal goes back to the asker."""
        assert self.state is not None
        out = machine.step(self.rules, self.state, event)  # InputError / RulesError reach the client
        self._after_step(out)

    def status(self) -> dict[str, Any]:
        assert self.state is not None and self.ledger is not None
        s = self.state
        return {
            "table": self.cfg.table,
            "game": self.cfg.game.id,
            "version": __version__,
            "round": {"id": rm.round_id(self.cfg.table, s.round_no), "phase": s.phase.value},
            "blocks": [{"block": b.value, "sources": sorted(src)} for b, src in sorted(s.blocks.items()) if src],
            "devices": [{"id": n, "kind": i.kind, "up": i.up, "errors": i.errors, "last_error": i.last_error}
                        for n, i in sorted(self._info.items())],
            "meters": [{"meter": m, "amount": format_cents(st.current_cents)}
                       for m, st in sorted(self.ledger.state.items())]
                      + ([{"meter": m, "linked": a, "amount": format_cents(self.link.values[a].cents)
                           if a in self.link.values else None} for m, a in sorted(self.link.linked.items())]
                         if self.link is not None else []),
            "ledger_head_seq": self.ledger.head.seq,
            "uptime_seconds": round(time.monotonic() - self.started_at, 1),
            **({"link": self.link.status()} if self.link is not None else {}),
        }

    def round_info(self) -> dict[str, Any]:
        assert self.state is not None
        s = self.state
        return {
            "id": rm.round_id(self.cfg.table, s.round_no),
            "phase": s.phase.value,
            "wagers": [{"seat": seat, "spot": spot, "amount": format_cents(c)}
                       for (seat, spot), c in sorted(s.accepted.items())],
            "not_recognized": self._not_recognized,
        }


async def start_services(daemon: Any, tg: asyncio.TaskGroup, consumer: str) -> None:
    """The tasks every table daemon runs: each device's driver and output sender, the consumer of device
    events, the sign refresh, the drivers' metrics, the systemd watchdog and the control socket."""
    for name, dev in daemon.devices.items():
        tg.create_task(dev.run(daemon._emit_for(name)), name=f"device:{name}")
        tg.create_task(daemon._outputs[name].run(), name=f"outputs:{name}")
    tg.create_task(daemon._consume(), name=consumer)
    tg.create_task(daemon._sign_refresh(), name="sign")
    tg.create_task(daemon._device_metrics(), name="device-metrics")
    interval = watchdog_interval()
    if interval:
        tg.create_task(daemon._watchdog(interval), name="watchdog")
    control = daemon._control_factory(daemon) if daemon._control_factory else None
    if control is not None:
        await control.start()
        tg.create_task(_stop_on_cancel(control), name="control")


async def close_buses(buses: dict[str, Any]) -> None:
    for bus in buses.values():
        try:
            await bus.close()
        except Exception:  # noqa: BLE001 - closing: nothing left to protect
            pass


async def _stop_on_cancel(control: Any) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await control.stop()

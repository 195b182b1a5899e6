"""The dice table daemon: Hot Roller Craps (§ 623c.1), and the Six Eight Shake wager at a Props & Hops
table (§ 668a.2(f)(8)), tracked from the devices at the table.

Chips come from the wagering devices at the positions (or whatever device reports them), rolls from the
dice-entry terminal. One task owns the state: every device event goes through the queue to
`_on_device_event`, which steps the pure machine of `controller.dice` and then says what the devices
should show (accepted and win lights, the lamp, the sign) through each device's sender (outputs.py),
never waiting on a device.

Neither wager is progressive: the table pays it at the paytable's odds, so there is no meter, no booking
and no journal. The state of the series is in memory only (docs/rounds.md, "Dice tables").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from controller import __version__
from controller.app.handlers import DICE_TABLE
from controller.app.metrics import Metrics
from controller.app.shell import ControlFactory, TableShell
from controller.config.model import TableConfig
from controller.dice.hot_roller import BET as HOT_ROLLER
from controller.dice.hot_roller import HotRoller
from controller.dice.props_and_hops import REMOVED, PropsAndHops
from controller.dice.roll import COMBINATIONS, Roll, combination_str, parse_roll
from controller.dice.six_eight_shake import BET as SIX_EIGHT_SHAKE
from controller.dice.six_eight_shake import COMBINATIONS as SHAKE_COMBINATIONS
from controller.errors import InputError, RulesError
from controller.money import format_cents
from controller.round.machine import seat_disabled_because, seats_marked
from controller.service import logs
from controller.service.sdnotify import Notifier
from controller.service.views import table_json
from drivers import events as ev
from drivers.device import Device

if TYPE_CHECKING:
    from drivers.modbus.bus import ModbusBus

log = structlog.get_logger("dice-table")

SpotKey = tuple[int, str]  # (position or seat, spot)

PHASES = ("betting", "rolling")  # the values of `round.phase` at a dice table

# Why the rules refused a wager, by the field their RulesError names: the label of the metric.
_REFUSAL = {
    "roll": "after the come-out roll",
    "position": "position already has a wager",
    "seat": "seat already has a wager",
    "bet": "not offered",
}


@dataclass(frozen=True)
class Settled:
    """One wager settled (or taken down), as the log and the status show it."""

    series: str
    roll: Roll | None  # the roll that settled it; None for a Six Eight Shake taken down between rolls
    seat: int
    spot: str
    wager_cents: int
    outcome: str  # a paytable key, "lose" or "removed"
    award: str | None  # the paytable's odds, e.g. "10 to 1"; None for a loss or a removal
    amount_cents: int  # what the player receives, the wager included; 0 for a loss
    numbers_complete: int | None = None  # Hot Roller only

    @property
    def won(self) -> bool:
        return self.award is not None

    def json(self, who: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "series": self.series,
            "roll": None if self.roll is None else [self.roll.first, self.roll.second],
            who: self.seat,
            "bet": self.spot,
            "wager": format_cents(self.wager_cents),
            "outcome": self.outcome,
            "award": self.award,
            "amount": format_cents(self.amount_cents),
        }
        if self.numbers_complete is not None:
            out["numbers_complete"] = self.numbers_complete
        return out


class _DiceGame(Protocol):
    """What the daemon asks of its game (one class per dice game below)."""

    @property
    def who(self) -> str: ...  # what the wager areas are called: "position" or "seat"

    @property
    def rule(self) -> str: ...

    @property
    def spots(self) -> tuple[str, ...]: ...

    @property
    def accepting(self) -> bool: ...

    def probe(self, seat: int, spot: str, cents: int | None) -> None: ...

    def place(self, seat: int, spot: str, cents: int) -> None: ...

    def holds(self, seat: int, spot: str) -> bool: ...

    def lift(self, seat: int, spot: str, series: str) -> Settled | None: ...

    def roll(self, r: Roll, series: str) -> list[Settled]: ...

    def wagers(self) -> list[tuple[int, str, int]]: ...

    def json(self) -> dict[str, Any]: ...


class _HotRollerGame:
    """Hot Roller Craps: one wager per position, only before the come-out roll, fixed until the 7."""

    who = "position"  # how the wager areas are called (§ 623c.1(a)(2)(i))
    rule = "§ 623c.1(b)"

    def __init__(self, cfg: TableConfig) -> None:
        self.machine = HotRoller.new(cfg.wagers[HOT_ROLLER].paytable, f"wagers.{HOT_ROLLER}.paytable")
        self.spots: tuple[str, ...] = (HOT_ROLLER,)

    @property
    def accepting(self) -> bool:
        return self.machine.series_rolls == 0

    def probe(self, seat: int, spot: str, cents: int | None) -> None:
        """Raise what the rules would say about a wager here now (RulesError), changing nothing; an
        unknown amount is tried as 1 cent (its absence is refused later, after the rules and the blocks)."""
        self.machine.place(seat, 1 if cents is None else cents)

    def place(self, seat: int, spot: str, cents: int) -> None:
        self.machine = self.machine.place(seat, cents)

    def holds(self, seat: int, spot: str) -> bool:
        return self.machine.wager_at(seat) is not None

    def lift(self, seat: int, spot: str, series: str) -> Settled | None:
        """None: no wager there. A standing wager cannot be removed: `remove` raises RulesError."""
        if self.machine.wager_at(seat) is None:
            return None
        self.machine.remove(seat)  # always refuses (RulesError): the wager stands until the 7
        return None

    def roll(self, r: Roll, series: str) -> list[Settled]:
        self.machine, resolutions = self.machine.roll(r)
        return [Settled(series, r, x.position, HOT_ROLLER, x.wager_cents, x.outcome,
                        None if x.award is None else x.award.describe(), x.amount_cents, x.numbers_complete)
                for x in resolutions]

    def wagers(self) -> list[tuple[int, str, int]]:
        return [(w.position, HOT_ROLLER, w.wager_cents) for w in self.machine.wagers]

    def json(self) -> dict[str, Any]:
        m = self.machine
        return {
            "paytable": m.paytable_id,
            "markers": [combination_str(c) for c in COMBINATIONS if c in m.markers],
            "numbers_complete": list(m.numbers_complete),
            "board": {str(n): combos for n, combos in m.board().items()},
            "wagers": [{"position": w.position, "bet": HOT_ROLLER, "amount": format_cents(w.wager_cents)}
                       for w in m.wagers],
        }


class _SixEightShakeGame:
    """The Six Eight Shake wager of a Props & Hops table: made between rolls, one open per seat, taken down
    when its chip is lifted (any time before a seven), won once its six combinations are thrown."""

    who = "seat"
    rule = "§ 668a.2(f)(8)"
    accepting = True  # between any two rolls (§ 668a.2(a))

    def __init__(self, cfg: TableConfig) -> None:
        wid = next(iter(cfg.wagers))
        self.machine = PropsAndHops.new(cfg.wagers[wid].paytable, field=f"wagers.{wid}.paytable")
        self.spots: tuple[str, ...] = (SIX_EIGHT_SHAKE,) if SIX_EIGHT_SHAKE in self.machine.offered else ()

    def probe(self, seat: int, spot: str, cents: int | None) -> None:
        self.machine.place(seat, spot, 1 if cents is None else cents)

    def place(self, seat: int, spot: str, cents: int) -> None:
        self.machine = self.machine.place(seat, spot, cents)

    def holds(self, seat: int, spot: str) -> bool:
        return self.machine.shake_at(seat) is not None

    def lift(self, seat: int, spot: str, series: str) -> Settled | None:
        if self.machine.shake_at(seat) is None:
            return None
        self.machine, x = self.machine.remove_six_eight_shake(seat)
        return Settled(series, None, x.seat, x.bet, x.wager_cents, x.outcome, None, x.amount_cents)

    def roll(self, r: Roll, series: str) -> list[Settled]:
        self.machine, resolutions = self.machine.roll(r)
        return [Settled(series, r, x.seat, x.bet, x.wager_cents, x.outcome,
                        None if x.award is None else x.award.describe(), x.amount_cents)
                for x in resolutions]

    def wagers(self) -> list[tuple[int, str, int]]:
        return sorted((s.seat, SIX_EIGHT_SHAKE, s.wager_cents) for s in self.machine.shakes)

    def json(self) -> dict[str, Any]:
        return {
            "paytable": self.machine.paytable_id,
            "wagers": [{"seat": s.seat, "bet": SIX_EIGHT_SHAKE, "amount": format_cents(s.wager_cents),
                        "thrown": [combination_str(c) for c in SHAKE_COMBINATIONS if c in s.thrown],
                        "lammers": [combination_str(c) for c in s.lammers]}
                       for s in sorted(self.machine.shakes, key=lambda s: s.seat)],
        }


_GAMES: dict[str, Callable[[TableConfig], _DiceGame]] = {"hot-roller-craps": _HotRollerGame,
                                                         "props-and-hops": _SixEightShakeGame}


class DiceTableDaemon(TableShell):
    """The daemon of a dice table (``cfg.game.dice``): the same control operations, logs, metrics and
    start-up as the card table's (controller.app.shell), with the series of rolls in place of rounds of cards."""

    handlers = DICE_TABLE

    def __init__(self, cfg: TableConfig, devices: dict[str, Device], *, buses: dict[str, ModbusBus] | None = None,
                 metrics: Metrics | None = None, notifier: Notifier | None = None,
                 control: ControlFactory | None = None) -> None:
        if not cfg.game.dice or cfg.game.id not in _GAMES:
            raise InputError("game", f"{cfg.game.id!r} is not a dice game this daemon runs")
        super().__init__(cfg, devices, buses=buses, metrics=metrics, notifier=notifier, control=control)
        self.game = _GAMES[cfg.game.id](cfg)
        self._dice_entry = {d.name for d in cfg.devices_of("dice-entry")}
        self._sensed: dict[SpotKey, int | None] = {}  # chips on the sensors now
        self._stale: set[SpotKey] = set()  # chips left from a settled wager: lift and place again
        self._down: dict[str, str] = {}  # device of the whole table -> why it is down
        self._seats_down: Mapping[str, frozenset[int]] = {}  # a position's device that does not answer -> its seats
        self._closed_by: set[str] = set()  # supervisors who closed the table
        self._win_seats: set[int] = set()
        self._series_no = 1  # counted from the daemon's start
        self._series_rolls = 0
        self._last_roll: Roll | None = None
        self._results: list[Settled] = []  # the last series in which something was settled
        self._not_recognized = 0  # this series
        logs.set_table_context(table=cfg.table, round=self.series_id)

    @property
    def series_id(self) -> str:
        return f"{self.cfg.table}-s{self._series_no}"

    @property
    def blocked(self) -> bool:
        return bool(self._down or self._closed_by)

    # --- running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        if self.cfg.meters:
            raise RulesError("meters", "a dice table has no progressive meter in this version: its wagers are "
                                       "paid by the table at the paytable's odds")
        if not self.game.spots:
            log.warning("the paytable offers no wager this controller tracks: rolls are recorded, chips are not",
                        game=self.cfg.game.id)
        try:
            async with asyncio.TaskGroup() as tg:
                await self.start_services(tg, "rolls")
                self._lamp()
                self._show_state()
                self._set_metrics()
                self.show_seats_disabled(self._seats_down)
                self.ready.set()
                self.notifier.ready(f"table {self.cfg.table}: series {self.series_id}")
                log.info("table ready", table=self.cfg.table, game=self.cfg.game.id, series=self.series_id)
        finally:
            await self.stop_services()

    # --- inputs ------------------------------------------------------------------------------------

    def on_device_event(self, e: ev.Event) -> None:
        match e:
            case ev.WagerSensed(seat=seat, spot=spot, amount_cents=amount):
                self._chip_sensed(e.device, seat, spot, amount)
            case ev.WagerRemoved(seat=seat, spot=spot):
                self._chip_removed(e.device, seat, spot)
            case ev.DiceRolled(die1=d1, die2=d2):
                self._rolled(e.device, d1, d2)
            case ev.LockoutPressed():
                log.info("lock-out pressed: no effect at a dice table (the come-out roll closes Hot Roller "
                         "wagering, § 623c.1(b))", device=e.device)
            case _:
                log.warning("event a dice table does not use", device=e.device, event=repr(e))

    def _chip_sensed(self, device: str, seat: int, spot: str, amount: int | None) -> None:
        if spot not in self.game.spots:
            log.warning("wager on a spot this table does not track", device=device, seat=seat, spot=spot)
            return
        key = (seat, spot)
        repeated = key in self._sensed  # sensed again without a removal between: the device repeating itself
        self._sensed[key] = amount
        if repeated and self.game.holds(seat, spot):
            return
        if key in self._stale:
            self._refuse(key, "chip left from a settled wager",
                         "chip left from a settled wager: lift it and place it again")
            return
        try:
            self.game.probe(seat, spot, amount)
        except RulesError as err:
            self._refuse(key, _REFUSAL.get(err.field, "refused by the rules"), err.problem, rule=self.game.rule)
            return
        except InputError as err:
            self._refuse(key, "invalid", str(err))
            return
        if self.blocked:
            self._refuse(key, "wagering disabled", "wagering disabled: " + "; ".join(
                f"{b['block']} ({', '.join(b['sources'])})" for b in self._blocks()))
            return
        down = seat_disabled_because(self._seats_down, seat)
        if down is not None:
            self._refuse(key, down.split(":")[0], down)
            return
        if amount is None:
            self._refuse(key, "no amount", "the device cannot read the amount and the configuration gives no wager "
                                           "size for a fixed-odds dice wager")
            return
        self.game.place(seat, spot, amount)
        self._clear_win_lights(None if isinstance(self.game, _HotRollerGame) else seat)
        self.accepted_light(seat, spot, True)
        self.metrics.wagers.labels(spot).inc()
        self.metrics.wagers_cents.labels(spot).inc(amount)
        log.info("wager accepted", **{self.game.who: seat}, spot=spot, amount=format_cents(amount),
                 series=self.series_id)

    def _refuse(self, key: SpotKey, label: str, detail: str, rule: str | None = None) -> None:
        """Not recognized: no light (a wager standing at the same place keeps its own), logged, counted."""
        seat, spot = key
        self._not_recognized += 1
        self.metrics.not_recognized.labels(label).inc()
        extra = {"rule": rule} if rule else {}
        log.warning("wager not recognized", **{self.game.who: seat}, spot=spot, reason=label, detail=detail,
                    series=self.series_id, **extra)

    def _chip_removed(self, device: str, seat: int, spot: str) -> None:
        if spot not in self.game.spots:
            return
        key = (seat, spot)
        self._sensed.pop(key, None)
        self._stale.discard(key)
        try:
            settled = self.game.lift(seat, spot, self.series_id)
        except RulesError as err:
            # § 623c.1(c): the dealer moves the wager to the boxperson's area; it stands until the 7
            log.info("chip lifted wager stands", **{self.game.who: seat}, spot=spot, rule=self.game.rule,
                     detail=err.problem, series=self.series_id)
            return
        if settled is not None:
            self._settle(settled)

    def _rolled(self, device: str, d1: int, d2: int) -> None:
        if device not in self._dice_entry:
            log.warning("dice roll from a device that is not the dice entry: ignored", device=device, die1=d1,
                        die2=d2)
            return
        try:
            r = parse_roll((d1, d2))
        except InputError as err:
            log.warning("dice roll refused", device=device, error=str(err))
            return
        self._clear_win_lights(None)
        self._series_rolls += 1
        self._last_roll = r
        settled = self.game.roll(r, self.series_id)
        detail: dict[str, Any] = {}
        if isinstance(self.game, _HotRollerGame) and r.total != 7:
            shown = self.game.json()
            detail = {"markers": shown["markers"], "numbers_complete": shown["numbers_complete"]}
        log.info("dice rolled", dice=str(r), total=r.total, roll=self._series_rolls, series=self.series_id, **detail)
        for s in settled:
            self._settle(s)
        if r.total == 7:
            self._new_series()
        self._lamp()
        self._set_metrics()

    def _settle(self, s: Settled) -> None:
        key = (s.seat, s.spot)
        self.accepted_light(s.seat, s.spot, False)
        if s.won:
            self.win_light(s.seat, True)
            self._win_seats.add(s.seat)
        if key in self._sensed:
            self._stale.add(key)
        self._results = [r for r in self._results if r.series == s.series] + [s]
        numbers = {} if s.numbers_complete is None else {"numbers_complete": s.numbers_complete}
        what = "wager taken down" if s.outcome == REMOVED else "wager settled"
        log.info(what, **{self.game.who: s.seat}, spot=s.spot, series=s.series,
                 roll=None if s.roll is None else str(s.roll), outcome=s.outcome, award=s.award,
                 wager=format_cents(s.wager_cents), amount=format_cents(s.amount_cents), **numbers)

    def _new_series(self) -> None:
        """After a 7: every chip still on a sensor was not collected and is no wager of the new series."""
        ended = self.series_id
        self._stale |= set(self._sensed)
        self._series_no += 1
        self._series_rolls = 0
        self._not_recognized = 0
        logs.set_table_context(table=self.cfg.table, round=self.series_id)
        log.info("series ended", series=ended, next=self.series_id)

    def device_changed(self, name: str, up: bool) -> None:
        seats = self.seats_of(name)
        if seats:  # a position's wagering device: its positions only
            self._seats_down, disabled, enabled = seats_marked(self._seats_down, name,
                                                               None if up else frozenset(seats))
            changed = enabled if up else disabled
            if changed:
                log.warning("seat wagering enabled" if up else "seat wagering disabled", device=name,
                            seats=sorted(changed), reason="" if up else self._info[name].last_error)
            self.show_seats_disabled(self._seats_down)
            return
        was = self.blocked
        if up:
            self._down.pop(name, None)
        else:
            self._down[name] = self._info[name].last_error or "down"
        if self.blocked != was:
            log.warning("wagering disabled" if self.blocked else "wagering enabled", device=name,
                        reason=self._info[name].last_error if not up else "")
        self._set_metrics()
        self._show_state()

    # --- outputs -----------------------------------------------------------------------------------

    def _clear_win_lights(self, seat: int | None) -> None:
        """Win lights go off at the next roll, and at a new wager (Hot Roller: any; Six Eight Shake: the
        seat's own)."""
        for s in sorted(self._win_seats if seat is None else self._win_seats & {seat}):
            self.win_light(s, False)
            self._win_seats.discard(s)

    def _lamp(self) -> None:
        """The lock-out lamp is lit while Hot Roller wagers are closed: from the come-out roll to the 7."""
        self.lamp(not self.game.accepting)

    def _show_state(self) -> None:
        """The sign is blank at a dice table (nothing progresses); OFFLINE while wagering is disabled."""
        self.sign.offline(self.blocked)

    def _set_metrics(self) -> None:
        phase = self._phase()
        for p in PHASES:
            self.metrics.round_phase.labels(p).set(1 if p == phase else 0)
        self.metrics.blocked.labels("device").set(1 if self._down else 0)
        self.metrics.blocked.labels("closed").set(1 if self._closed_by else 0)

    def _phase(self) -> str:
        return "betting" if self.game.accepting else "rolling"

    def block_closed(self, who: str, closed: bool) -> None:
        if closed:
            self._closed_by.add(who)
        else:
            self._closed_by.clear()
        log.warning("table closed" if closed else "table opened", by=who)
        self._set_metrics()
        self._show_state()

    def _blocks(self) -> list[dict[str, Any]]:
        out = []
        if self._closed_by:
            out.append({"block": "closed", "sources": sorted(self._closed_by)})
        if self._down:
            out.append({"block": "device", "sources": sorted(self._down)})
        return out

    def dice(self) -> dict[str, Any]:
        """The state of the dice game for a display: the series, the markers, the wagers, the last results."""
        return {
            "game": self.cfg.game.id,
            "series": self.series_id,
            "series_rolls": self._series_rolls,
            "last_roll": None if self._last_roll is None else [self._last_roll.first, self._last_roll.second],
            "accepting": self.game.accepting and not self.blocked,
            **self.game.json(),
            "results": [r.json(self.game.who) for r in self._results],
        }

    def status(self) -> dict[str, Any]:
        return {
            "table": self.cfg.table,
            "game": self.cfg.game.id,
            "version": __version__,
            "round": {"id": self.series_id, "phase": self._phase()},
            "blocks": self._blocks(),
            "seats_disabled": self.seats_disabled_json(self._seats_down),
            "devices": self.devices_json(),
            "meters": [],
            "ledger_head_seq": None,
            "uptime_seconds": self.uptime(),
            "dice": self.dice(),
            **table_json(self.cfg),
            "lights": self.lights_json(),
        }

    def round_info(self) -> dict[str, Any]:
        return {
            "id": self.series_id,
            "phase": self._phase(),
            "wagers": [{"seat": seat, "spot": spot, "amount": format_cents(c)} for seat, spot, c in self.game.wagers()],
            "not_recognized": self._not_recognized,
            "dice": self.dice(),
        }


__all__ = ["PHASES", "DiceTableDaemon", "Settled", "SpotKey"]

"""Settling a sequence of dice rolls for the command line (``progressivectl settle``).

Input, already decoded from JSON:
- Hot Roller positions ``{"position": 1..16, "wager": "5.00"}``, optionally ``"roll": k`` (the roll
  the wager is made before; default 0, and it must start a series, § 623c.1(b));
- Props & Hops positions ``{"seat": 1..6, "bet": "field", "wager": "5.00", "roll": k}``, and for
  Six Eight Shake optionally ``"removed_before_roll": k``;
- rolls ``[[1, 3], [2, 2], ...]``.

Output: every wager's fate in the order settled, roll by roll, then what is still open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from controller.dice.hot_roller import BET as HOT_ROLLER_BET
from controller.dice.hot_roller import HotRoller
from controller.dice.layout import HopLayout
from controller.dice.pays import PaytableLike
from controller.dice.props_and_hops import PropsAndHops, PropsResolution
from controller.dice.roll import COMBINATIONS, Roll, combination_str, parse_roll
from controller.dice.six_eight_shake import BET as SIX_EIGHT_SHAKE
from controller.dice.six_eight_shake import COMBINATIONS as SHAKE_COMBINATIONS
from controller.errors import InputError, RulesError
from controller.games import game as find_game
from controller.money import format_cents, parse_cents
from controller.positions import settlement_order

HOT_ROLLER_GAME = "hot-roller-craps"
PROPS_AND_HOPS_GAME = "props-and-hops"


@dataclass(frozen=True)
class DiceAward:
    """One wager's fate. Exactly one of `position` (Hot Roller) and `seat` (Props & Hops) is set."""

    bet: str
    wager_cents: int
    roll: int  # the roll that settled it (a removal: the roll it was taken down before)
    outcome: str  # paytable key, "lose" or "removed"
    award: str | None  # the award as the paytable states it; None for a loss or removal
    amount_cents: int  # received, the wager included for "to 1" odds; 0 for a loss; the wager if removed
    position: int | None = None
    seat: int | None = None
    entry: int | None = None  # index of the wager in the input positions


@dataclass(frozen=True)
class DiceSettlement:
    game_id: str
    paytable_id: str
    rolls: tuple[Roll, ...]
    awards: tuple[DiceAward, ...]
    open: HotRoller | PropsAndHops  # the machine after the last roll: markers, lammers, unresolved wagers


def _index(value: object, field: str, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= hi:
        raise InputError(field, f"must be a roll index from 0 to {hi}, not {value!r}")
    return value


def _entries(positions: object, allowed: tuple[str, ...], required: tuple[str, ...]) -> list[Mapping[str, object]]:
    if not isinstance(positions, list):
        raise InputError("positions", f"must be a list of wagers, not {positions!r}")
    for i, p in enumerate(positions):
        where = f"positions[{i}]"
        if not isinstance(p, Mapping):
            raise InputError(where, f"a wager is an object such as {{\"{required[0]}\": 1, \"wager\": \"5.00\"}}, not {p!r}")
        unknown = [k for k in p if k not in allowed]
        if unknown:
            raise InputError(where, f"unknown key {unknown[0]!r}; the keys are {', '.join(allowed)}")
        for k in required:
            if k not in p:
                raise InputError(where, f"{k!r} is missing")
    return positions


def _wager(value: object, field: str) -> int:
    cents = parse_cents(value, field)
    if cents <= 0:
        raise InputError(field, f"a wager must be more than 0.00, not {value!r}")
    return cents


def _rolls(rolls: object) -> tuple[Roll, ...]:
    if not isinstance(rolls, list):
        raise InputError("rolls", f"must be a list of rolls such as [[1, 3], [2, 2]], not {rolls!r}")
    return tuple(parse_roll(r, f"rolls[{i}]") for i, r in enumerate(rolls))


def settle_dice(
    game_id: str, paytable: PaytableLike, positions: list[dict[str, Any]], rolls: list[Any], layout: HopLayout | None = None
) -> DiceSettlement:
    """Play `rolls` against the wagers in `positions`; pure. Every error names its field."""
    g = find_game(game_id)
    if game_id == HOT_ROLLER_GAME:
        return _hot_roller(paytable, positions, _rolls(rolls))
    if game_id == PROPS_AND_HOPS_GAME:
        return _props_and_hops(paytable, positions, _rolls(rolls), layout)
    raise InputError("game", f"{g.title} is not a dice game; dice games: {HOT_ROLLER_GAME}, {PROPS_AND_HOPS_GAME}")


def _hot_roller(paytable: PaytableLike, positions: list[dict[str, Any]], rolls: tuple[Roll, ...]) -> DiceSettlement:
    machine = HotRoller.new(paytable)
    entries = _entries(positions, ("position", "wager", "roll", "bet"), ("position", "wager"))
    before: dict[int, list[tuple[int, int, int]]] = {}
    for i, p in enumerate(entries):
        where = f"positions[{i}]"
        if "bet" in p and p["bet"] != HOT_ROLLER_BET:
            raise InputError(f"{where}.bet", f"Hot Roller Craps has one wager, {HOT_ROLLER_BET!r}, not {p['bet']!r}")
        cents = _wager(p["wager"], f"{where}.wager")
        k = _index(p.get("roll", 0), f"{where}.roll", len(rolls))
        before.setdefault(k, []).append((i, p["position"], cents))  # type: ignore[arg-type]
    awards: list[DiceAward] = []
    for k in range(len(rolls) + 1):
        for i, position, cents in before.get(k, ()):
            try:
                machine = machine.place(position, cents, tag=i)
            except InputError as e:
                raise e.at(f"positions[{i}]") from None
        if k == len(rolls):
            break
        machine, settled = machine.roll(rolls[k])
        awards += [
            DiceAward(HOT_ROLLER_BET, s.wager_cents, k, s.outcome, s.award.describe() if s.award else None,
                      s.amount_cents, position=s.position, entry=s.tag)
            for s in settled
        ]
    return DiceSettlement(HOT_ROLLER_GAME, machine.paytable_id, rolls, tuple(awards), machine)


def _award(r: PropsResolution) -> DiceAward:
    return DiceAward(r.bet, r.wager_cents, r.roll, r.outcome, r.award.describe() if r.award else None,
                     r.amount_cents, seat=r.seat, entry=r.tag)


def _props_schedule(entries: list[Mapping[str, object]],
                    n_rolls: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The positions placed before each roll, and the Six Eight Shake wagers taken down before each: roll -> the
    entries' indices."""
    placed: dict[int, list[int]] = {}
    removed: dict[int, list[int]] = {}
    for i, p in enumerate(entries):
        where = f"positions[{i}]"
        _wager(p["wager"], f"{where}.wager")
        k = _index(p.get("roll", 0), f"{where}.roll", n_rolls)
        placed.setdefault(k, []).append(i)
        if "removed_before_roll" in p:
            if p["bet"] != SIX_EIGHT_SHAKE:
                raise InputError(f"{where}.removed_before_roll",
                                 f"only a Six Eight Shake wager may be taken down (§ 668a.2(f)(8)), not {p['bet']!r}")
            r = _index(p["removed_before_roll"], f"{where}.removed_before_roll", n_rolls)
            if r < k:
                raise InputError(f"{where}.removed_before_roll", f"is before the roll the wager is made before ({k})")
            removed.setdefault(r, []).append(i)
    return placed, removed


def _props_and_hops(
    paytable: PaytableLike, positions: list[dict[str, Any]], rolls: tuple[Roll, ...], layout: HopLayout | None
) -> DiceSettlement:
    machine = PropsAndHops.new(paytable, layout)
    entries = _entries(positions, ("seat", "bet", "wager", "roll", "removed_before_roll"), ("seat", "bet", "wager"))
    placed, removed = _props_schedule(entries, len(rolls))

    awards: list[DiceAward] = []
    settled_at: dict[int, DiceAward] = {}

    def take_down(i: int) -> None:
        nonlocal machine
        seat = entries[i]["seat"]
        open_ = machine.shake_at(seat)  # type: ignore[arg-type]
        if open_ is None or open_.tag != i:
            done = settled_at[i]
            raise RulesError(
                f"positions[{i}].removed_before_roll",
                f"the wager was already settled on roll {done.roll} ({done.outcome}); it may be taken down only "
                "before a seven is rolled (§ 668a.2(f)(8))",
            )
        machine, out = machine.remove_six_eight_shake(open_.seat)
        awards.append(_award(out))

    for k in range(len(rolls) + 1):
        for i in removed.get(k, ()):
            if cast(int, entries[i].get("roll", 0)) < k:  # (checked above) taken down before roll k: first, so the seat is free again
                take_down(i)
        for i in placed.get(k, ()):
            p = entries[i]
            try:
                machine = machine.place(p["seat"], p["bet"], _wager(p["wager"], "wager"), tag=i)
            except InputError as e:
                raise e.at(f"positions[{i}]") from None
        for i in removed.get(k, ()):
            if entries[i].get("roll", 0) == k:  # made and taken down before the same roll
                take_down(i)
        if k == len(rolls):
            break
        machine, settled = machine.roll(rolls[k])
        for s in settled:
            a = _award(s)
            awards.append(a)
            settled_at[s.tag] = a  # type: ignore[index]
    return DiceSettlement(PROPS_AND_HOPS_GAME, machine.paytable_id, rolls, tuple(awards), machine)


def _open_json(machine: HotRoller | PropsAndHops) -> dict[str, object]:
    if isinstance(machine, HotRoller):
        return {
            "series_rolls": machine.series_rolls,
            "markers": [combination_str(c) for c in COMBINATIONS if c in machine.markers],
            "numbers_complete": list(machine.numbers_complete),
            "wagers": [{"position": w.position, "bet": HOT_ROLLER_BET, "wager": format_cents(w.wager_cents)}
                       for w in machine.wagers],
        }
    return {
        "wagers": [{"seat": w.seat, "bet": w.bet, "wager": format_cents(w.wager_cents), "roll": w.roll}
                   for w in sorted(machine.wagers, key=lambda w: settlement_order(w.seat))],
        "six_eight_shake": [
            {
                "seat": s.seat,
                "wager": format_cents(s.wager_cents),
                "roll": s.placed_before_roll,
                "thrown": [combination_str(c) for c in SHAKE_COMBINATIONS if c in s.thrown],
                "lammers": [combination_str(c) for c in s.lammers],
            }
            for s in sorted(machine.shakes, key=lambda s: settlement_order(s.seat))
        ],
    }


def to_json(settlement: DiceSettlement) -> dict[str, object]:
    """Plain JSON data; money as decimal strings of dollars."""
    awards = []
    for a in settlement.awards:
        who = {"position": a.position} if a.position is not None else {"seat": a.seat}
        awards.append({
            **who,
            "wager": format_cents(a.wager_cents),
            "bet": a.bet,
            "roll": a.roll,
            "outcome": a.outcome,
            "award": a.award,
            "amount": format_cents(a.amount_cents),
            "paid_by": "table",
        })
    return {
        "game": settlement.game_id,
        "paytable": settlement.paytable_id,
        "rolls": [[r.first, r.second] for r in settlement.rolls],
        "awards": awards,
        "open": _open_json(settlement.open),
    }


__all__ = ["HOT_ROLLER_GAME", "PROPS_AND_HOPS_GAME", "DiceAward", "DiceSettlement", "settle_dice", "to_json"]

"""Where a table stands when its controller starts, from what its journals hold: a pure function.

The round after the last one the journals know opens for betting; a round that was booked and neither closed
nor voided (the controller stopped while it was dealt) is resumed, dealing, with its accepted wagers restored
from its bookings, each on its spot, and their accepted lights on again: a light turned off would tell the
player a recognized wager was not (docs/rounds.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Protocol

from controller.round.machine import raise_block, start
from controller.round.model import Block, Effect, Lamp, Light, Note, Phase, Step, TableRules, TableState


class BookingView(Protocol):
    """What resuming reads of a round's booking on a meter (controller.meter.Booking, or a linked meter's)."""

    @property
    def wagers(self) -> tuple[tuple[int, int], ...]: ...


class MeterView(Protocol):
    """What resuming reads of a meter's state (controller.meter.MeterState, or a linked meter's view)."""

    @property
    def open_rounds(self) -> Mapping[str, BookingView]: ...

    @property
    def recent_rounds(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Kept:
    """What only a supervisor lifts, as the journal last recorded it: what blocks the deck (its sources: a wrong
    shuffler or stub count, decks out of alternation) and the void a wrong stub count asked for."""

    deck: frozenset[str] = frozenset()
    void_round: str | None = None
    void_reason: str | None = None


@dataclass(frozen=True)
class Resumed:
    step: Step  # the state to start from, and what to show
    open_round: str | None  # the round that was being dealt, if any


def round_no(table: str, rid: str) -> int | None:
    """The number of round `rid` of `table` (``<table>-r<n>``), or None for another table's round."""
    m = re.fullmatch(re.escape(table) + r"-r([0-9]+)", rid)
    return int(m.group(1)) if m else None


def resume(rules: TableRules, meters: Mapping[str, MeterView], kept: Kept = Kept()) -> Resumed:
    """The round after the last one the journal knows, betting; or, if a round was booked and neither closed nor
    voided, that round, dealing, its wagers restored and lit, the lamp on. Without a counting shuffler the stub
    count is due at once either way: nobody can say how many rounds ago the last one was (§ 667a.8(f)). What only
    a supervisor lifts stays: a deck block, and the void asked for in the round resumed."""
    resumed = _resume(rules, meters)
    st, effects = resumed.step.state, list(resumed.step.effects)
    for source in sorted(kept.deck):
        st = raise_block(st, Block.DECK, source)
    if kept.deck:
        effects.append(Note("deck blocked", {"sources": sorted(kept.deck)}))
    if resumed.open_round is not None and kept.void_round == resumed.open_round:
        st = replace(st, void_requested=kept.void_reason)
        effects.append(Note("void requested", {"round": resumed.open_round, "reason": kept.void_reason}))
    return Resumed(Step(st, tuple(effects)), resumed.open_round)


def _resume(rules: TableRules, meters: Mapping[str, MeterView]) -> Resumed:
    last = 0
    open_round: str | None = None
    for state in meters.values():
        for rid in (*state.recent_rounds, *state.open_rounds):
            n = round_no(rules.table, rid)
            if n is not None:
                last = max(last, n)
        for rid in state.open_rounds:
            n = round_no(rules.table, rid)
            if n is not None and (open_round is None or n > (round_no(rules.table, open_round) or 0)):
                open_round = rid
    if open_round is None:
        return Resumed(start(rules, last + 1), None)
    n = round_no(rules.table, open_round)
    assert n is not None
    accepted: dict[tuple[int, str], int] = {}
    for meter_id, state in meters.items():
        booking = state.open_rounds.get(open_round)
        if booking is None:
            continue
        for (seat, cents), spot in zip(booking.wagers, booked_spots(rules, meter_id, booking), strict=True):
            if spot is not None:
                accepted[(seat, spot)] = cents
    st = replace(TableState(round_no=n), phase=Phase.DEALING, accepted=MappingProxyType(accepted), lamp=True)
    effects: list[Effect] = [Lamp(True), *(Light(seat, spot, True) for seat, spot in sorted(accepted))]
    if not rules.counting_shuffler:
        st = raise_block(st, Block.STUB, "start-up")
        effects.append(Note("stub count due", {"rounds": None}))
    effects.append(Note("round resumed", {"round": open_round, "wagers": len(accepted)}))
    return Resumed(Step(st, tuple(effects)), open_round)


def booked_spots(rules: TableRules, meter_id: str, booking: BookingView) -> tuple[str | None, ...]:
    """The spot of each (seat, cents) pair of a booking on `meter_id`, in order: the spot of the wager on the
    player's own hand, or of the wager on the dealer's hand (§ 639a.7(d)(4)); None for a meter no spot of
    the table feeds (or a wager on the dealer's hand where the table no longer offers one).

    The booking says which pairs are wagers on the dealer's hand by their indices (`on_dealer`, as the round
    machine's Book gives them). A booking that does not say (one journaled without the field, or a meter core
    that does not record it) is read as the round machine books: a seat's own-hand wager before its wager on
    the dealer's hand, so a seat's second pair is on the dealer's hand; a seat booked once is taken as its own
    hand, as nothing tells otherwise."""
    own = next((s.spot for s in rules.spots.values() if s.meter == meter_id and not s.on_dealer), None)
    dealer = next((s.spot for s in rules.spots.values() if s.meter == meter_id and s.on_dealer), None)
    marks = frozenset(getattr(booking, "on_dealer", None) or ())
    spots: list[str | None] = []
    seen: set[int] = set()
    for i, (seat, _cents) in enumerate(booking.wagers):
        on_dealer = i in marks if marks else seat in seen
        seen.add(seat)
        spots.append(dealer if on_dealer else own)
    return tuple(spots)


__all__ = ["Kept", "Resumed", "booked_spots", "resume", "round_no"]

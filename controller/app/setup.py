"""From a validated configuration and the journal's meters to the round machine's rules and first state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from ..config.model import StandaloneMeter, TableConfig
from ..meter import Booking, MeterState
from ..round.model import Phase, SpotRule, TableRules, TableState

DEALER_SPOT_SUFFIX = "-dealer"  # the spot of a wager on the dealer's hand: "<wager id>-dealer"


def table_rules(cfg: TableConfig) -> TableRules:
    """One spot per progressive wager (named after the wager, as the register maps name their spots), and
    one more for a wager that may be placed on the dealer's hand (§ 639a.7(d)(4))."""
    spots: dict[str, SpotRule] = {}
    for w in cfg.wagers.values():
        if w.meter is None:
            continue
        sizes = cfg.meters[w.meter].wager_sizes
        spots[w.id] = SpotRule(w.id, w.id, w.meter, sizes)
        if w.wager.dealer_bets:
            spot = w.id + DEALER_SPOT_SUFFIX
            spots[spot] = SpotRule(spot, w.id, w.meter, sizes, on_dealer=True)
    cards = cfg.cards
    counting = cards is None or cards.shuffler == "counting"
    return TableRules(
        table=cfg.table,
        seats=cfg.seats,
        spots=spots,
        counting_shuffler=counting,
        two_decks=bool(cards and cards.two_decks),
        stub_count_every=(cards.stub_count_every or 5) if cards is not None and not counting else 5,
    )


def standalone_meters(cfg: TableConfig) -> list[StandaloneMeter]:
    return [m for m in cfg.meters.values() if isinstance(m, StandaloneMeter)]


def _round_no(table: str, rid: str) -> int | None:
    m = re.fullmatch(re.escape(table) + r"-r([0-9]+)", rid)
    return int(m.group(1)) if m else None


def resume(rules: TableRules, meters: Mapping[str, MeterState]) -> tuple[TableState, str | None]:
    """Where the table stands after a start: the round after the last one the journal knows, or, if a round
    was booked and neither closed nor voided (the process stopped while it was dealt), that round, dealing.
    Returns the state and the id of such an open round."""
    last = 0
    open_round: str | None = None
    for state in meters.values():
        for rid in (*state.recent_rounds, *state.open_rounds):
            n = _round_no(rules.table, rid)
            if n is not None:
                last = max(last, n)
        for rid in state.open_rounds:
            if _round_no(rules.table, rid) is not None:
                open_round = rid if open_round is None else max(open_round, rid, key=lambda r: _round_no(rules.table, r))
    if open_round is None:
        return TableState(round_no=last + 1), None
    n = _round_no(rules.table, open_round)
    assert n is not None
    accepted: dict[tuple[int, str], int] = {}
    for meter_id, state in meters.items():
        booking = state.open_rounds.get(open_round)
        if booking is None:
            continue
        for (seat, cents), spot in zip(booking.wagers, booked_spots(rules, meter_id, booking)):
            if spot is not None:
                accepted[(seat, spot)] = cents
    st = replace(TableState(round_no=n), phase=Phase.DEALING, accepted=MappingProxyType(accepted), lamp=True)
    return st, open_round


def booked_spots(rules: TableRules, meter_id: str, booking: Booking) -> tuple[str | None, ...]:
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

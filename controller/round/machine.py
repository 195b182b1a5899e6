"""The round state machine of one table: a pure function ``step(rules, state, input) -> Step``.

It decides which wagers exist. The shell feeds it device events and the ledger's answers, and carries out
its effects (lights, bookings, notes for the log and the metrics); it never touches a device or the disk.

- Betting: a chip sensed on a spot while no block is up is acknowledged (accepted light on) and is a wager;
  removed before lock-out, it is withdrawn. A chip sensed after lock-out is not recognized (§ 639a.2(c)(2),
  § 641a.2(c), § 643a.2(d), § 667a.2(c)): noted and counted, nothing else.
- Lock-out (§ 639a.8(b)): wagers frozen; their contributions go to the ledger in one booking per meter,
  with the Magic Card and Lucky Bonus seat drawn at that moment; the round moves on to dealing only when the
  booking is on disk. The accepted count per spot goes to the dealer's chip reconciliation.
- Cards: a shuffler count other than 52 or decks out of alternation blocks wagering until a supervisor
  confirms a new deck (§ 667a.5(b), § 667a.3(b)); without a counting shuffler the stub must be counted at
  least every `stub_count_every` rounds (§ 667a.8(f)) or wagering stays blocked; a wrong stub count blocks
  the deck and asks for the round to be voided (§ 667a.8(h)), which a supervisor confirms (VoidRound).
- Void (shoe jam § 667a.13(e), misdeal § 667a.13(a),(c)): every wager returned, the booking reversed.
- Blocks (device down, link down, deck, stub, table closed) stop new wagers; wagers already accepted in the
  round stay accepted and lit: turning a light off would tell the player a recognized wager was not.
- A seat's wagering device that does not answer cannot acknowledge a wager (§ 639a.2(c)(1), § 641a.2(c)(1),
  § 643a.2(d)(1), § 667a.2(c)(1)): wagering is disabled at the seats it serves, and only there; wagers it
  acknowledged before stay accepted and are booked at lock-out, as under a block.
- A chip still on a sensor when the next round opens was not collected: it is not a wager until it is
  lifted and placed again, so one chip can never be counted in two rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, TypeVar

from controller.cards import DECK_SIZE
from controller.errors import InputError, RulesError
from controller.round.model import (
    Block,
    BlockCleared,
    BlockRaised,
    Book,
    Booked,
    CardsDispensed,
    ChipRemoved,
    ChipSensed,
    Close,
    DeckReplaced,
    DeckState,
    Effect,
    Input,
    Lamp,
    Light,
    LockoutPressed,
    Note,
    Opened,
    Phase,
    Reconcile,
    Reverse,
    RoundSettled,
    SeatsDown,
    SeatsUp,
    ShuffleCounted,
    SpotKey,
    Step,
    StubCounted,
    TableRules,
    TableState,
    Voided,
    VoidRefused,
    VoidRound,
    disabled_seats,
    round_id,
)

K = TypeVar("K")
V = TypeVar("V")


def start(rules: TableRules, round_no: int = 1) -> Step:
    """The state at start-up: betting open for `round_no` (the next after the last closed in the journal).
    Without a counting shuffler the stub must be counted first: nobody can say how many rounds ago it was."""
    state = TableState(round_no=round_no)
    effects: list[Effect] = [Lamp(False)]
    if not rules.counting_shuffler:
        state = raise_block(state, Block.STUB, "start-up")
        effects.append(Note("stub count due", {"rounds": None}))
    effects.append(Opened(round_id(rules.table, round_no)))
    return Step(state, tuple(effects))


def step(rules: TableRules, state: TableState, event: Input) -> Step:
    """Apply one input. Raises InputError for malformed input (naming the field) and RulesError for an
    action the rules do not allow now; the state is then unchanged."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise InputError("input", f"unknown input {type(event).__name__}")
    return handler(rules, state, event)


# --- betting -----------------------------------------------------------------------------------


def _seat(rules: TableRules, seat: object, field: str = "seat") -> int:
    if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= rules.seats:
        raise InputError(field, f"{seat!r} is not a seat of table {rules.table} (1..{rules.seats})")
    return seat


def _spot_key(rules: TableRules, seat: object, spot: object) -> SpotKey:
    seat = _seat(rules, seat)
    if spot not in rules.spots:
        raise InputError("spot", f"{spot!r} is not a wager spot of table {rules.table}; spots: {', '.join(rules.spots)}")
    return seat, spot  # type: ignore[return-value]


def _chip_sensed(rules: TableRules, state: TableState, e: ChipSensed) -> Step:
    key = _spot_key(rules, e.seat, e.spot)
    if e.amount_cents is not None and (isinstance(e.amount_cents, bool) or not isinstance(e.amount_cents, int)):
        raise InputError("amount_cents", f"must be whole cents or None, not {e.amount_cents!r}")
    state = replace(state, sensed=_put(state.sensed, key, e.amount_cents))
    if key in state.accepted:
        return Step(state)  # the device repeating itself
    why = _not_recognized_because(rules, state, key, e.amount_cents)
    if why is not None:
        return Step(state, (Note("wager not recognized", {"seat": e.seat, "spot": e.spot, "reason": why,
                                                           "round": round_id(rules.table, state.round_no)}),))
    cents = e.amount_cents if e.amount_cents is not None else rules.spots[e.spot].sizes[0]
    state = replace(state, accepted=_put(state.accepted, key, cents))
    return Step(state, (Light(e.seat, e.spot, True),
                        Note("wager accepted", {"seat": e.seat, "spot": e.spot, "cents": cents,
                                                "round": round_id(rules.table, state.round_no)})))


def _not_recognized_because(rules: TableRules, state: TableState, key: SpotKey, amount: int | None) -> str | None:
    if state.phase is not Phase.BETTING:
        return "after lock-out"
    if key in state.stale:
        return "chip left from the previous round: lift it and place it again"
    if state.blocked:
        return "progressive wagering disabled: " + ", ".join(
            f"{b.value} ({', '.join(sorted(src))})" for b, src in sorted(state.blocks.items()) if src)
    down = seat_disabled_because(state.seats_down, key[0])
    if down is not None:
        return down
    sizes = rules.spots[key[1]].sizes
    if amount is None and len(sizes) > 1:
        return "the device cannot read the amount and the spot accepts several"
    if amount is not None and amount not in sizes:
        return f"{amount} cents is not an accepted wager ({', '.join(map(str, sizes))})"
    return None


def _chip_removed(rules: TableRules, state: TableState, e: ChipRemoved) -> Step:
    key = _spot_key(rules, e.seat, e.spot)
    state = replace(state, sensed=_drop(state.sensed, key), stale=state.stale - {key})
    if state.phase is Phase.BETTING and key in state.accepted:
        state = replace(state, accepted=_drop(state.accepted, key))
        return Step(state, (Light(e.seat, e.spot, False),
                            Note("wager withdrawn", {"seat": e.seat, "spot": e.spot,
                                                     "round": round_id(rules.table, state.round_no)})))
    return Step(state)  # after lock-out the dealer collects the chips (§ 639a.8(b))


# --- lock-out and booking ----------------------------------------------------------------------


def _lockout(rules: TableRules, state: TableState, e: LockoutPressed) -> Step:
    rid = round_id(rules.table, state.round_no)
    if state.phase is not Phase.BETTING:
        raise RulesError("lockout", f"round {rid} is already locked ({state.phase.value})")
    if e.lucky_seat is not None and not 0 <= e.lucky_seat <= rules.seats:
        raise InputError("lucky_seat", f"{e.lucky_seat} is not a position of table {rules.table}")
    by_meter: dict[str, list[tuple[int, int]]] = {}
    on_dealer: dict[str, list[int]] = {}  # meter -> indices in by_meter[meter] of the wagers on the dealer's hand
    for (seat, spot), cents in sorted(state.accepted.items()):
        rule = rules.spots[spot]
        wagers = by_meter.setdefault(rule.meter, [])
        if rule.on_dealer:
            on_dealer.setdefault(rule.meter, []).append(len(wagers))
        wagers.append((seat, cents))
    effects: list[Effect] = [Lamp(True)]
    if by_meter:
        state = replace(state, phase=Phase.LOCKING, lamp=True)
        effects.append(Book(rid, MappingProxyType({m: tuple(w) for m, w in by_meter.items()}),
                            e.magic_card, e.lucky_seat, MappingProxyType({m: tuple(i) for m, i in on_dealer.items()})))
    else:
        state = replace(state, phase=Phase.DEALING, lamp=True)
        effects.append(Reconcile(rid, _counts(rules, state)))
    effects.append(Note("locked", {"round": rid, "wagers": len(state.accepted)}))
    return Step(state, tuple(effects))


def _counts(rules: TableRules, state: TableState) -> MappingProxyType[str, int]:
    counts = {spot: 0 for spot in rules.spots}
    for _seat, spot in state.accepted:
        counts[spot] += 1
    return MappingProxyType(counts)


def _booked(rules: TableRules, state: TableState, e: Booked) -> Step:
    rid = _current(rules, state, e.round_id, Phase.LOCKING, "booked")
    state = replace(state, phase=Phase.DEALING)
    return Step(state, (Reconcile(rid, _counts(rules, state)),))


def _current(rules: TableRules, state: TableState, rid: str, phase: Phase, what: str) -> str:
    current = round_id(rules.table, state.round_no)
    if rid != current:
        raise RulesError("round_id", f"round {rid} is not the current round {current}: it cannot be {what}")
    if state.phase is not phase:
        raise RulesError("round_id", f"{what}: round {current} is {state.phase.value}, not {phase.value}")
    return current


# --- end of a round ----------------------------------------------------------------------------


def _void(rules: TableRules, state: TableState, e: VoidRound) -> Step:
    rid = round_id(rules.table, state.round_no)
    if state.phase is not Phase.DEALING:
        raise RulesError("void", f"round {rid} is {state.phase.value}: only a round being dealt can be voided")
    meters = tuple(sorted({rules.spots[spot].meter for _seat, spot in state.accepted}))
    note = Note("round voided", {"round": rid, "reason": e.reason, "wagers": len(state.accepted)})
    if not meters:
        nxt = _next_round(rules, state)
        return Step(nxt.state, (note, *nxt.effects))
    return Step(replace(state, phase=Phase.VOID), (Reverse(rid, e.reason, meters), note))


def _voided(rules: TableRules, state: TableState, e: Voided) -> Step:
    _current(rules, state, e.round_id, Phase.VOID, "voided")
    return _next_round(rules, state)


def _void_refused(rules: TableRules, state: TableState, e: VoidRefused) -> Step:
    """The reversal of the void was refused (the meter says an award was paid): the round is dealt again."""
    rid = _current(rules, state, e.round_id, Phase.VOID, "void refused")
    return Step(replace(state, phase=Phase.DEALING), (Note("void refused", {"round": rid, "error": e.reason}),))


def _settled(rules: TableRules, state: TableState, e: RoundSettled) -> Step:
    rid = _current(rules, state, e.round_id, Phase.DEALING, "settled")
    notes: tuple[Effect, ...] = ()
    if state.void_requested is not None:
        if e.by is None:
            raise RulesError("round_id", f"round {rid} is to be voided: {state.void_requested}; a supervisor confirms "
                                         "the void (or, where an award of it was paid, settles it)")
        notes = (Note("void request overruled", {"round": rid, "by": e.by, "reason": state.void_requested}),)
    nxt = _next_round(rules, state)
    return Step(nxt.state, (*notes, Close(rid), *nxt.effects))


def _next_round(rules: TableRules, state: TableState) -> Step:
    effects: list[Effect] = [Light(seat, spot, False) for seat, spot in sorted(state.accepted)]
    effects.append(Lamp(False))
    deck = replace(state.deck, rounds_since_count=state.deck.rounds_since_count + 1, dispensed=None)
    new = TableState(round_no=state.round_no + 1, sensed=state.sensed, stale=frozenset(state.sensed),
                     blocks=state.blocks, seats_down=state.seats_down, deck=deck)
    if not rules.counting_shuffler and deck.rounds_since_count >= rules.stub_count_every:
        new = raise_block(new, Block.STUB, "dealer")
        effects.append(Note("stub count due", {"rounds": deck.rounds_since_count}))
    if state.sensed:  # never lifted: no wager of the new round until lifted and placed again (§ 639a.2(c))
        effects.append(Note("chips left on their spots", {
            "round": round_id(rules.table, new.round_no), "spots": [f"{seat} {spot}" for seat, spot in sorted(state.sensed)],
            "hint": "not wagers of this round: the dealer lifts each, and a player places it again while betting is open"}))
    effects.append(Opened(round_id(rules.table, new.round_no)))
    return Step(new, tuple(effects))


# --- cards -------------------------------------------------------------------------------------


def _shuffle_counted(rules: TableRules, state: TableState, e: ShuffleCounted) -> Step:
    if isinstance(e.count, bool) or not isinstance(e.count, int) or e.count < 0:
        raise InputError("count", f"must be a whole number of cards, not {e.count!r}")
    if e.count != DECK_SIZE:
        return Step(raise_block(state, Block.DECK, "shuffler"),
                    (Note("deck count wrong", {"count": e.count, "deck": e.deck}),))
    if rules.two_decks:
        if e.deck is None:
            raise InputError("deck", "two decks are alternated: the shuffler must say which deck it counted")
        if e.deck == state.deck.last_deck:
            return Step(raise_block(state, Block.DECK, "alternation"),
                        (Note("deck not alternated", {"deck": e.deck}),))
    deck = replace(state.deck, rounds_since_count=0, last_deck=e.deck)
    # the deck's id only when the shuffler gives one (most do not)
    return Step(replace(state, deck=deck), (Note("deck counted", {"count": e.count,
                                                                  **({"deck": e.deck} if e.deck is not None else {})}),))


def _stub_counted(rules: TableRules, state: TableState, e: StubCounted) -> Step:
    entered = e.dealt if e.dealt is not None else state.deck.dispensed
    if entered is None:
        raise InputError("dealt", "how many cards were dealt? (no shoe reported it)")
    stub, dealt = _card_count("stub", e.stub), _card_count("dealt", entered)
    if stub + dealt == DECK_SIZE:
        state = _clear(state, Block.STUB, None)
        effects: list[Effect] = [Note("stub counted", {"stub": stub, "dealt": dealt, "by": e.by})]
        if e.by is not None and Block.DECK in state.blocks and "stub" in state.blocks[Block.DECK]:
            # a supervisor's recount finds the deck whole: the dealer's count was wrong, not the deck
            state = _clear(state, Block.DECK, "stub")
            if state.void_requested is not None:
                effects.append(Note("void withdrawn", {"round": round_id(rules.table, state.round_no),
                                                       "by": e.by, "reason": state.void_requested}))
                state = replace(state, void_requested=None)
        deck = replace(state.deck, rounds_since_count=0)
        return Step(replace(state, deck=deck), tuple(effects))
    # § 667a.8(h): wrong count: hands void, wagers returned, and (unless only misdealt) the deck removed. The
    # count blocks wagering at once; the void waits for a supervisor to confirm it (it returns every wager).
    state = raise_block(state, Block.DECK, "stub")
    note = Note("stub count wrong", {"stub": stub, "dealt": dealt, "by": e.by})
    if state.phase in (Phase.LOCKING, Phase.DEALING):  # the round's hands (to be dealt) are void
        why = f"stub count {stub} + {dealt} dealt is not {DECK_SIZE} (§ 667a.8(h))"
        state = replace(state, void_requested=why)
        return Step(state, (note, Note("void requested", {"round": round_id(rules.table, state.round_no),
                                                          "reason": why})))
    return Step(state, (note,))


def _card_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(name, f"must be a whole number of cards, not {value!r}")
    return value


def _cards_dispensed(rules: TableRules, state: TableState, e: CardsDispensed) -> Step:
    if isinstance(e.count, bool) or not isinstance(e.count, int) or not 0 <= e.count <= DECK_SIZE:
        raise InputError("count", f"must be 0..{DECK_SIZE} cards, not {e.count!r}")
    return Step(replace(state, deck=replace(state.deck, dispensed=e.count)))


def _deck_replaced(rules: TableRules, state: TableState, e: DeckReplaced) -> Step:
    state = _clear(_clear(state, Block.DECK, None), Block.STUB, None)
    state = replace(state, deck=DeckState())
    return Step(state, (Note("deck replaced", {"by": e.by}),))


# --- blocks ------------------------------------------------------------------------------------


def raise_block(state: TableState, block: Block, source: str) -> TableState:
    """`state` with `source`'s hold on `block`."""
    blocks = dict(state.blocks)
    blocks[block] = frozenset(blocks.get(block, frozenset()) | {source})
    return replace(state, blocks=MappingProxyType(blocks))


def _clear(state: TableState, block: Block, source: str | None) -> TableState:
    """Clear `source`'s hold on `block` (every source's with None)."""
    blocks = dict(state.blocks)
    left = frozenset() if source is None else blocks.get(block, frozenset()) - {source}
    if left:
        blocks[block] = left
    else:
        blocks.pop(block, None)
    return replace(state, blocks=MappingProxyType(blocks))


def _block_raised(rules: TableRules, state: TableState, e: BlockRaised) -> Step:
    was = state.blocked
    state = raise_block(state, e.block, e.source)
    effects = () if was else (Note("wagering disabled", {"block": e.block.value, "source": e.source}),)
    return Step(state, effects)


def _block_cleared(rules: TableRules, state: TableState, e: BlockCleared) -> Step:
    if e.block in (Block.DECK, Block.STUB):
        raise RulesError("block", f"the {e.block.value} block is cleared by a count or a new deck, not directly")
    was = state.blocked
    state = _clear(state, e.block, e.source)
    effects = (Note("wagering enabled", {"block": e.block.value, "source": e.source}),) if was and not state.blocked else ()
    return Step(state, effects)


# --- a seat's device down ------------------------------------------------------------------------


def seat_disabled_because(seats_down: Mapping[str, frozenset[int]], seat: int) -> str | None:
    """Why a wager at `seat` is not recognized while a device of the seat does not answer (§ 639a.2(c)(1): the
    seat's device acknowledges the wager), or None. Before the colon, the metric's label."""
    down = sorted(d for d, seats in seats_down.items() if seat in seats)
    return f"seat wagering disabled: seat {seat}'s device {', '.join(down)} does not answer" if down else None


def seats_marked(seats_down: Mapping[str, frozenset[int]], device: str, seats: frozenset[int] | None
                 ) -> tuple[Mapping[str, frozenset[int]], frozenset[int], frozenset[int]]:
    """`seats_down` with `device` down at `seats`, or answering (None); and the seats that this disables and that
    it enables (a seat that another device of it still disables is not enabled)."""
    was = disabled_seats(seats_down)
    seats_down = _drop(seats_down, device) if seats is None else _put(seats_down, device, seats)
    now = disabled_seats(seats_down)
    return seats_down, now - was, was - now


def _seats_down(rules: TableRules, state: TableState, e: SeatsDown) -> Step:
    if not isinstance(e.device, str) or not e.device:
        raise InputError("device", f"must name the device, not {e.device!r}")
    if not isinstance(e.seats, tuple) or not e.seats:
        raise InputError("seats", f"must be the seats device {e.device} serves, not {e.seats!r}")
    for i, seat in enumerate(e.seats):
        _seat(rules, seat, f"seats[{i}]")
    seats_down, disabled, _enabled = seats_marked(state.seats_down, e.device, frozenset(e.seats))
    state = replace(state, seats_down=seats_down)
    return Step(state, _seats_note(rules, state, "seat wagering disabled", e.device, disabled))


def _seats_up(rules: TableRules, state: TableState, e: SeatsUp) -> Step:
    seats_down, _disabled, enabled = seats_marked(state.seats_down, e.device, None)  # not down: nothing changes
    state = replace(state, seats_down=seats_down)
    return Step(state, _seats_note(rules, state, "seat wagering enabled", e.device, enabled))


def _seats_note(rules: TableRules, state: TableState, what: str, device: str,
                seats: frozenset[int]) -> tuple[Effect, ...]:
    if not seats:
        return ()
    return (Note(what, {"device": device, "seats": sorted(seats), "round": round_id(rules.table, state.round_no)}),)


# --- helpers -----------------------------------------------------------------------------------


def _put(m: Mapping[K, V], key: K, value: V) -> MappingProxyType[K, V]:
    d = dict(m)
    d[key] = value
    return MappingProxyType(d)


def _drop(m: Mapping[K, V], key: K) -> Mapping[K, V]:
    if key not in m:
        return m
    d = dict(m)
    del d[key]
    return MappingProxyType(d)


# Each handler takes its own input type; the table is keyed by that type, so the call is sound.
_HANDLERS: dict[type, Callable[[TableRules, TableState, Any], Step]] = {
    ChipSensed: _chip_sensed,
    ChipRemoved: _chip_removed,
    LockoutPressed: _lockout,
    Booked: _booked,
    ShuffleCounted: _shuffle_counted,
    StubCounted: _stub_counted,
    CardsDispensed: _cards_dispensed,
    DeckReplaced: _deck_replaced,
    VoidRound: _void,
    Voided: _voided,
    VoidRefused: _void_refused,
    RoundSettled: _settled,
    BlockRaised: _block_raised,
    BlockCleared: _block_cleared,
    SeatsDown: _seats_down,
    SeatsUp: _seats_up,
}


__all__ = ["raise_block", "seat_disabled_because", "seats_marked", "start", "step"]

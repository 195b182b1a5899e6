"""The round state machine: which wagers exist, lock-out, booking, voids, deck and stub counts, blocks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import InputError, RulesError
from controller.meter import BookContributions
from controller.round import machine
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
    SpotRule,
    StubCounted,
    TableRules,
    Voided,
    VoidRefused,
    VoidRound,
)
from controller.round.resume import booked_spots, resume

# Whether the meter core records which booked wagers are on the dealer's hand (an optional field of the booking).

SPOTS = {
    "progressive": SpotRule("progressive", "progressive", "cs-main", (100,)),
    "fchb": SpotRule("fchb", "five-card-hand-bonus", "fchb", (100, 500)),
}
RULES = TableRules("t1", 7, SPOTS)
NO_SHUFFLER = TableRules("t1", 7, SPOTS, counting_shuffler=False, stub_count_every=3)


def run(rules, events, state=None):
    s = state if state is not None else machine.start(rules).state
    effects = []
    for e in events:
        out = machine.step(rules, s, e)
        s = out.state
        effects.extend(out.effects)
    return s, effects


def notes(effects, what):
    return [e for e in effects if isinstance(e, Note) and e.what == what]


def test_sensed_wager_is_acknowledged_and_booked_at_lockout():
    s, eff = run(RULES, [ChipSensed(3, "progressive"), ChipSensed(5, "fchb", 500), ChipSensed(1, "progressive")])
    assert [e for e in eff if isinstance(e, Light)] == [Light(3, "progressive", True), Light(5, "fchb", True),
                                                        Light(1, "progressive", True)]
    s, eff = run(RULES, [LockoutPressed(magic_card=7, lucky_seat=2)], s)
    assert s.phase is Phase.LOCKING and s.lamp
    (book,) = [e for e in eff if isinstance(e, Book)]
    assert book.round_id == "t1-r1"
    assert dict(book.wagers) == {"cs-main": ((1, 100), (3, 100)), "fchb": ((5, 500),)}
    assert (book.magic_card, book.lucky_seat) == (7, 2)
    s, eff = run(RULES, [Booked("t1-r1")], s)
    assert s.phase is Phase.DEALING
    assert eff == [Reconcile("t1-r1", {"progressive": 2, "fchb": 1})]


def test_wager_after_lockout_is_not_recognized():
    """§ 639a.2(c)(2): no wager is recognized after "no more bets", before or after the booking is on disk."""
    s, _ = run(RULES, [ChipSensed(3, "progressive"), LockoutPressed()])
    s, eff = run(RULES, [ChipSensed(4, "progressive")], s)
    assert not [e for e in eff if isinstance(e, Light)]
    assert notes(eff, "wager not recognized")[0].detail["reason"] == "after lock-out"
    s, eff = run(RULES, [Booked("t1-r1"), ChipSensed(6, "progressive")], s)
    assert len(notes(eff, "wager not recognized")) == 1
    assert set(s.accepted) == {(3, "progressive")}


def test_withdrawn_before_lockout_is_not_booked():
    s, eff = run(RULES, [ChipSensed(3, "progressive"), ChipRemoved(3, "progressive"), LockoutPressed()])
    assert Light(3, "progressive", False) in eff
    assert not [e for e in eff if isinstance(e, Book)]
    assert s.phase is Phase.DEALING  # nothing to book: straight to dealing
    assert [e for e in eff if isinstance(e, Reconcile)][0].counts["progressive"] == 0


def test_removal_after_lockout_keeps_the_wager():
    s, _ = run(RULES, [ChipSensed(3, "progressive"), LockoutPressed(), ChipRemoved(3, "progressive")])
    assert dict(s.accepted) == {(3, "progressive"): 100}


def test_amounts_checked_against_the_spot():
    s, eff = run(RULES, [ChipSensed(1, "fchb", 250), ChipSensed(2, "fchb"), ChipSensed(3, "fchb", 100)])
    reasons = [n.detail["reason"] for n in notes(eff, "wager not recognized")]
    assert "250 cents is not an accepted wager (100, 500)" in reasons
    assert "the device cannot read the amount and the spot accepts several" in reasons
    assert dict(s.accepted) == {(3, "fchb"): 100}


def test_bad_input_names_the_field_and_changes_nothing():
    s = machine.start(RULES).state
    with pytest.raises(InputError, match="^seat: 8 is not a seat of table t1"):
        machine.step(RULES, s, ChipSensed(8, "progressive"))
    with pytest.raises(InputError, match="^spot: 'ante' is not a wager spot"):
        machine.step(RULES, s, ChipSensed(1, "ante"))
    with pytest.raises(RulesError, match="not the current round"):
        machine.step(RULES, s, Booked("t1-r9"))


def test_settled_round_closes_and_next_opens_with_lights_off():
    s, eff = run(RULES, [ChipSensed(3, "progressive"), LockoutPressed(), Booked("t1-r1"), ChipRemoved(3, "progressive"),
                         RoundSettled("t1-r1")])
    assert Close("t1-r1") in eff and Opened("t1-r2") in eff
    assert Light(3, "progressive", False) in eff and Lamp(False) in eff
    assert s.round_no == 2 and s.phase is Phase.BETTING and not s.accepted
    assert not notes(eff, "chips left on their spots")  # the chip was collected


def test_chip_left_on_the_sensor_is_not_counted_twice():
    s, eff = run(RULES, [ChipSensed(3, "progressive"), LockoutPressed(), Booked("t1-r1"), RoundSettled("t1-r1")])
    (left,) = notes(eff, "chips left on their spots")  # said when the next round opens, not found out later
    assert left.detail["round"] == "t1-r2" and left.detail["spots"] == ["3 progressive"]
    assert "not wagers of this round" in left.detail["hint"]
    s, eff = run(RULES, [ChipSensed(3, "progressive")], s)  # the device repeats: the chip never left
    assert not s.accepted
    assert "previous round" in notes(eff, "wager not recognized")[0].detail["reason"]
    s, eff = run(RULES, [ChipRemoved(3, "progressive"), ChipSensed(3, "progressive")], s)
    assert dict(s.accepted) == {(3, "progressive"): 100}


def test_void_reverses_the_booking_and_opens_the_next_round():
    s, _ = run(RULES, [ChipSensed(3, "progressive"), ChipSensed(4, "fchb", 100), LockoutPressed(), Booked("t1-r1")])
    s, eff = run(RULES, [VoidRound("shoe jam")], s)
    assert Reverse("t1-r1", "shoe jam", ("cs-main", "fchb")) in eff
    assert s.phase is Phase.VOID
    with pytest.raises(RulesError):
        machine.step(RULES, s, RoundSettled("t1-r1"))
    s, eff = run(RULES, [Voided("t1-r1")], s)
    assert s.round_no == 2 and Opened("t1-r2") in eff


def test_void_only_while_dealing():
    s, _ = run(RULES, [ChipSensed(3, "progressive"), LockoutPressed()])
    with pytest.raises(RulesError, match="only a round being dealt"):
        machine.step(RULES, s, VoidRound("misdeal"))


def test_wrong_shuffler_count_blocks_until_new_deck():
    """§ 667a.5(b): a count other than 52 removes the deck; no wagers until a new one is confirmed."""
    s, eff = run(RULES, [ShuffleCounted(51)])
    assert notes(eff, "deck count wrong")
    s, eff = run(RULES, [ChipSensed(1, "progressive")], s)
    assert not s.accepted and "deck (shuffler)" in notes(eff, "wager not recognized")[0].detail["reason"]
    s, _ = run(RULES, [ShuffleCounted(52)], s)  # a good count of the same deck does not undo the removal
    assert s.blocked
    with pytest.raises(RulesError):
        machine.step(RULES, s, BlockCleared(Block.DECK, "shuffler"))
    s, _ = run(RULES, [DeckReplaced("floor-1"), ChipSensed(1, "progressive")], s)
    assert dict(s.accepted) == {(1, "progressive"): 100}


def test_two_decks_must_alternate():
    rules = TableRules("t1", 7, SPOTS, two_decks=True)
    s, eff = run(rules, [ShuffleCounted(52, "red"), ShuffleCounted(52, "blue"), ShuffleCounted(52, "red")])
    assert not s.blocked
    s, eff = run(rules, [ShuffleCounted(52, "red")], s)
    assert s.blocked and notes(eff, "deck not alternated")
    with pytest.raises(InputError, match="^deck:"):
        machine.step(rules, s, ShuffleCounted(52))


def test_stub_count_due_every_n_rounds_without_shuffler():
    """§ 667a.8(f): without a counting shuffler the stub is counted at least every 5 rounds (3 here)."""
    start = machine.start(NO_SHUFFLER)
    assert start.state.blocks.get(Block.STUB)
    s, _ = run(NO_SHUFFLER, [StubCounted(52 - 0, 0)], start.state)
    assert not s.blocked

    def one_round(s):
        rid = f"t1-r{s.round_no}"
        return run(NO_SHUFFLER, [ChipSensed(2, "progressive"), LockoutPressed(), Booked(rid),
                                 ChipRemoved(2, "progressive"), RoundSettled(rid)], s)

    for _ in range(2):
        s, eff = one_round(s)
        assert not s.blocked
    s, eff = one_round(s)
    assert s.blocks.get(Block.STUB) and notes(eff, "stub count due")
    s, _ = run(NO_SHUFFLER, [CardsDispensed(17), StubCounted(35)], s)
    assert not s.blocked


def test_wrong_stub_count_blocks_and_asks_a_supervisor_to_void_the_round():
    """§ 667a.8(h): hands void, wagers returned, deck removed. The count blocks wagering at once; the void (which
    returns every wager) waits for a supervisor's VoidRound, and the round cannot be settled meanwhile."""
    s, _ = run(NO_SHUFFLER, [StubCounted(52, 0), ChipSensed(2, "progressive"), LockoutPressed(), Booked("t1-r1")])
    s, eff = run(NO_SHUFFLER, [StubCounted(30, 17)], s)
    assert notes(eff, "stub count wrong") and notes(eff, "void requested")
    assert not [e for e in eff if isinstance(e, Reverse)]  # nothing returned on the dealer's word alone
    assert s.blocks.get(Block.DECK) and s.phase is Phase.DEALING and "30 + 17" in s.void_requested
    with pytest.raises(RulesError, match="to be voided"):
        machine.step(NO_SHUFFLER, s, RoundSettled("t1-r1"))
    s, eff = run(NO_SHUFFLER, [VoidRound("stub count (by floor-1)")], s)
    assert [e for e in eff if isinstance(e, Reverse)][0].round_id == "t1-r1"
    s, _ = run(NO_SHUFFLER, [Voided("t1-r1")], s)
    assert s.void_requested is None and s.round_no == 2 and s.blocks.get(Block.DECK)


def test_a_supervisors_recount_withdraws_the_void_a_wrong_count_asked_for():
    s, _ = run(NO_SHUFFLER, [StubCounted(52, 0), ChipSensed(2, "progressive"), LockoutPressed(), Booked("t1-r1"),
                             StubCounted(30, 17)])
    s, eff = run(NO_SHUFFLER, [StubCounted(35, 17)], s)  # the dealer again: not enough to clear the deck
    assert s.void_requested is not None and s.blocks.get(Block.DECK)
    s, eff = run(NO_SHUFFLER, [StubCounted(35, 17, by="floor-1")], s)
    assert notes(eff, "void withdrawn") and s.void_requested is None and not s.blocks.get(Block.DECK)
    s, eff = run(NO_SHUFFLER, [RoundSettled("t1-r1")], s)
    assert s.round_no == 2


def test_a_refused_reversal_deals_the_round_again():
    s, _ = run(RULES, [ChipSensed(2, "progressive"), LockoutPressed(), Booked("t1-r1"), VoidRound("misdeal")])
    assert s.phase is Phase.VOID
    s, eff = run(RULES, [VoidRefused("t1-r1", "an award has been paid in round t1-r1")], s)
    assert s.phase is Phase.DEALING and notes(eff, "void refused") and set(s.accepted) == {(2, "progressive")}
    with pytest.raises(RulesError):
        machine.step(RULES, s, VoidRefused("t1-r1", "again"))


def test_blocks_stop_new_wagers_and_keep_accepted_ones():
    s, _ = run(RULES, [ChipSensed(1, "progressive"), BlockRaised(Block.DEVICE, "seat-4"), ChipSensed(4, "progressive")])
    assert set(s.accepted) == {(1, "progressive")}
    s, eff = run(RULES, [BlockRaised(Block.LINK, "link"), BlockCleared(Block.DEVICE, "seat-4")], s)
    assert not notes(eff, "wagering enabled")  # the link is still down
    s, eff = run(RULES, [BlockCleared(Block.LINK, "link"), ChipRemoved(4, "progressive"), ChipSensed(4, "progressive")], s)
    assert notes(eff, "wagering enabled")
    assert set(s.accepted) == {(1, "progressive"), (4, "progressive")}


# --- a seat's wagering device down -------------------------------------------------------------


def test_a_seat_device_down_disables_its_seat_and_no_other():
    """§ 639a.2(c)(1): a wagering device at each betting position acknowledges the wager; one that does not
    answer cannot, so its seat takes no new wager while every other seat goes on. What it acknowledged before
    stays accepted and is booked at lock-out, as under a block."""
    s, _ = run(RULES, [ChipSensed(4, "progressive")])
    s, eff = run(RULES, [SeatsDown("seat-4", (4,))], s)
    assert [n.detail for n in notes(eff, "seat wagering disabled")] == [{"device": "seat-4", "seats": [4],
                                                                         "round": "t1-r1"}]
    assert not s.blocked and s.disabled_seats == {4} and not [e for e in eff if isinstance(e, Light)]
    s, eff = run(RULES, [ChipSensed(4, "fchb", 100), ChipSensed(2, "progressive")], s)
    (refused,) = notes(eff, "wager not recognized")
    assert (refused.detail["seat"], refused.detail["spot"]) == (4, "fchb")
    assert refused.detail["reason"] == "seat wagering disabled: seat 4's device seat-4 does not answer"
    assert Light(2, "progressive", True) in eff and Light(4, "fchb", True) not in eff
    s, eff = run(RULES, [LockoutPressed()], s)
    (book,) = [e for e in eff if isinstance(e, Book)]
    assert dict(book.wagers) == {"cs-main": ((2, 100), (4, 100))}


def test_a_seat_is_enabled_when_every_device_of_it_answers_again():
    """Kept by device: a device serving several seats, and a seat with two devices, both down."""
    s, eff = run(RULES, [SeatsDown("seats-3-4", (3, 4)), SeatsDown("seat-3b", (3,))])
    assert [n.detail["seats"] for n in notes(eff, "seat wagering disabled")] == [[3, 4]]  # 3 was disabled already
    s, eff = run(RULES, [SeatsUp("seats-3-4"), ChipSensed(4, "progressive"), ChipSensed(3, "progressive")], s)
    assert [n.detail["seats"] for n in notes(eff, "seat wagering enabled")] == [[4]]  # seat-3b still down
    assert set(s.accepted) == {(4, "progressive")}
    s, eff = run(RULES, [SeatsUp("seat-3b"), SeatsUp("seat-3b"), SeatsUp("never-down")], s)
    assert [n.detail for n in notes(eff, "seat wagering enabled")] == [{"device": "seat-3b", "seats": [3],
                                                                        "round": "t1-r1"}]
    assert len(eff) == 1 and not s.seats_down
    s, _ = run(RULES, [ChipRemoved(3, "progressive"), ChipSensed(3, "progressive")], s)  # lifted and placed again
    assert set(s.accepted) == {(3, "progressive"), (4, "progressive")}


def test_a_seat_stays_disabled_into_the_next_round_and_a_block_names_the_table_first():
    s, _ = run(RULES, [SeatsDown("seat-5", (5,)), LockoutPressed(), RoundSettled("t1-r1")])
    assert s.round_no == 2 and s.disabled_seats == {5}
    s, eff = run(RULES, [BlockRaised(Block.DEVICE, "lockout"), ChipSensed(5, "progressive"),
                         ChipSensed(1, "progressive")], s)
    assert [n.detail["reason"] for n in notes(eff, "wager not recognized")] == [
        "progressive wagering disabled: device (lockout)"] * 2


@pytest.mark.parametrize("event, field", [
    (SeatsDown("seat-9", (9,)), "seats[0]"),
    (SeatsDown("seats", (1, True)), "seats[1]"),
    (SeatsDown("seat-1", ()), "seats"),
    (SeatsDown("", (1,)), "device"),
])
def test_a_seat_device_down_names_what_is_wrong_and_changes_nothing(event, field):
    s = machine.start(RULES).state
    with pytest.raises(InputError) as err:
        machine.step(RULES, s, event)
    assert err.value.field == field


# --- properties --------------------------------------------------------------------------------

seat = st.integers(1, 7)
spot = st.sampled_from(["progressive", "fchb"])
inputs = st.one_of(
    st.builds(ChipSensed, seat, spot, st.sampled_from([None, 100, 500, 250])),
    st.builds(ChipRemoved, seat, spot),
    st.builds(LockoutPressed),
    st.just("booked"), st.just("settled"), st.just("void"), st.just("voided"),
    st.builds(ShuffleCounted, st.sampled_from([52, 52, 51])),
    st.builds(DeckReplaced, st.just("floor")),
    st.builds(BlockRaised, st.sampled_from([Block.DEVICE, Block.LINK]), st.sampled_from(["a", "b"])),
    st.builds(BlockCleared, st.sampled_from([Block.DEVICE, Block.LINK]), st.sampled_from(["a", "b"])),
    # seat devices as a table might have them: one per seat, one serving two seats, a second device of seat 2
    st.sampled_from([SeatsDown("seat-1", (1,)), SeatsDown("seat-2", (2,)), SeatsDown("seats-6-7", (6, 7)),
                     SeatsDown("seat-2b", (2,))]),
    st.builds(SeatsUp, st.sampled_from(["seat-1", "seat-2", "seats-6-7", "seat-2b"])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(inputs, max_size=60))
def test_lights_bookings_and_rounds_stay_consistent(seq):
    """Over any sequence: a lit light is exactly an accepted wager; wagers are accepted only while betting
    and unblocked, only for chips sensed now, never at a seat whose device is down; a seat's device down or
    back changes nothing at the other seats, nor any wager already accepted; each booking holds exactly the
    accepted wagers; a chip that never left its sensor is booked in one round at most."""
    s = machine.start(RULES).state
    lights: dict = {}
    booked_rounds: dict = {}  # key -> rounds it was booked in
    lifted: set = set()  # keys removed since their last booking
    for item in seq:
        rid = f"t1-r{s.round_no}"
        e = {"booked": Booked(rid), "settled": RoundSettled(rid), "void": VoidRound("misdeal"),
             "voided": Voided(rid)}.get(item, item) if isinstance(item, str) else item
        before = s
        try:
            out = machine.step(RULES, s, e)
        except (InputError, RulesError):
            continue
        s = out.state
        for eff in out.effects:
            if isinstance(eff, Light):
                lights[(eff.seat, eff.spot)] = eff.on
            if isinstance(eff, Book):
                got = sorted((seat_, meter) for meter, ws in eff.wagers.items() for seat_, _c in ws)
                assert got == sorted((k[0], RULES.spots[k[1]].meter) for k in before.accepted)
                for k in before.accepted:
                    if booked_rounds.get(k) and k not in lifted:
                        pytest.fail(f"chip {k} booked again without leaving its sensor")
                    booked_rounds.setdefault(k, []).append(before.round_no)
                    lifted.discard(k)
        if isinstance(e, ChipRemoved):
            lifted.add((e.seat, e.spot))
        on = {k for k, v in lights.items() if v}
        assert on == set(s.accepted)
        assert set(s.accepted) <= set(s.sensed) or s.phase is not Phase.BETTING
        new = set(s.accepted) - set(before.accepted)
        if new:
            assert before.phase is Phase.BETTING and not before.blocked
            assert not {seat_ for seat_, _spot in new} & before.disabled_seats, f"accepted at a down seat: {new}"
        if isinstance(e, (SeatsDown, SeatsUp)):
            assert s.accepted == before.accepted and not [x for x in out.effects if not isinstance(x, Note)]
        elif before.seats_down and not (isinstance(e, (ChipSensed, ChipRemoved)) and e.seat in before.disabled_seats):
            # the same input with no seat down: the same answer, and the same state but for the seats down
            alike = machine.step(RULES, replace(before, seats_down={}), e)
            assert alike.effects == out.effects and replace(alike.state, seats_down=s.seats_down) == s


# --- wagers on the dealer's hand: booked apart, resumed on their spot ------------------------------------

BONUS_SPOTS = {
    "progressive": SpotRule("progressive", "progressive", "main", (100,)),
    "five-card-hand-bonus": SpotRule("five-card-hand-bonus", "five-card-hand-bonus", "bonus", (100,)),
    "five-card-hand-bonus-dealer": SpotRule("five-card-hand-bonus-dealer", "five-card-hand-bonus", "bonus", (100,),
                                            on_dealer=True),
}
BONUS_RULES = TableRules("CS-07", 7, BONUS_SPOTS)
OWN, ON_DEALER = "five-card-hand-bonus", "five-card-hand-bonus-dealer"
# seat 5 on its own hand and on the dealer's, seat 2 on the dealer's hand only, seat 3 on its own only
LOCKED = {(5, OWN): 100, (5, ON_DEALER): 100, (2, ON_DEALER): 100, (3, OWN): 100, (6, "progressive"): 100}


def _locked_book():
    s, _ = run(BONUS_RULES, [ChipSensed(seat, spot, cents) for (seat, spot), cents in LOCKED.items()])
    assert dict(s.accepted) == LOCKED
    s, eff = run(BONUS_RULES, [LockoutPressed(magic_card=7, lucky_seat=0)], s)
    (book,) = [e for e in eff if isinstance(e, Book)]
    return book


def test_book_marks_the_wagers_on_the_dealers_hand():
    """§ 639a.7(d)(4): a seat may wager on its own hand and on the dealer's; both feed the same meter, and the
    booking says which of its pairs are on the dealer's hand."""
    book = _locked_book()
    assert dict(book.wagers) == {"main": ((6, 100),), "bonus": ((2, 100), (3, 100), (5, 100), (5, 100))}
    assert dict(book.on_dealer) == {"bonus": (0, 3)}  # seat 2's pair, and seat 5's second


@dataclass(frozen=True)
class _Booking:  # what resume reads of a meter's booking (controller.meter.Booking, or a linked meter's view)
    wagers: tuple[tuple[int, int], ...]
    on_dealer: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Meter:
    open_rounds: dict
    recent_rounds: tuple[str, ...] = ()


def test_resume_restores_each_wager_on_its_spot():
    """After a restart in the middle of a round, a wager on the dealer's hand is one again: the dealer's-hand
    claim pays it (and not an own-hand claim of the seat)."""
    book = _locked_book()
    meters = {m: _Meter({"CS-07-r1": _Booking(w, book.on_dealer.get(m, ()))}, ("CS-07-r0",))
              for m, w in book.wagers.items()}
    resumed = resume(BONUS_RULES, meters)
    state = resumed.step.state
    assert resumed.open_round == "CS-07-r1" and state.phase is Phase.DEALING and state.round_no == 1
    assert dict(state.accepted) == LOCKED
    # the accepted lights come back on with the lamp: turning one off would tell the player a wager was not
    lights = {(e.seat, e.spot) for e in resumed.step.effects if isinstance(e, Light) and e.on}
    assert lights == set(LOCKED) and Lamp(True) in resumed.step.effects


def test_resume_of_a_booking_that_does_not_mark_them_reads_the_booking_order():
    """A booking journaled without the marks: the round machine books a seat's own-hand wager before its wager on
    the dealer's hand, so a seat's second pair is on the dealer's hand; a seat booked once is taken as its own hand
    (seat 2's wager on the dealer's hand cannot be told from one on its own hand)."""
    book = _locked_book()
    meters = {m: _Meter({"CS-07-r1": _Booking(w)}) for m, w in book.wagers.items()}
    state = resume(BONUS_RULES, meters).step.state
    assert dict(state.accepted) == {(5, OWN): 100, (5, ON_DEALER): 100, (2, OWN): 100, (3, OWN): 100,
                                    (6, "progressive"): 100}
    assert booked_spots(BONUS_RULES, "elsewhere", _Booking(((1, 100),))) == (None,)  # a meter no spot feeds


def test_a_journaled_booking_resumes_wagers_on_the_dealers_hand():
    """Lock-out to the meter core's booking and back: what a restarted daemon reads from the journal."""
    from datetime import datetime

    from controller.meter import MeterParams, apply, initial_state

    book = _locked_book()
    at = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    meters = {}
    for m, wagers in book.wagers.items():
        marks = {"on_dealer": book.on_dealer[m]} if m in book.on_dealer else {}
        params = MeterParams(meter_id=m, reset_cents=1_000_000, rate=Fraction(1, 5), wager_sizes=(100,))
        meters[m], _ = apply(initial_state(params), BookContributions(book.round_id, "CS-07", wagers, at, **marks))
    state = resume(BONUS_RULES, meters).step.state
    assert dict(state.accepted) == LOCKED

"""The claim lifecycle as a pure machine (controller/round/claim_machine.py) and the sign's owner
(controller/app/sign.py) on a clock of the test's own."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controller.app.sign import SEAT_EVERY_S, SEAT_SHOWN_S, WIN_DISPLAY_S, Sign
from controller.errors import RulesError
from controller.round import claim_machine as cm
from controller.round.claims import Claim, RoundClaims, claim_from_json, claim_to_json, payout_key
from controller.round.settlement import Payout
from drivers import events as ev

RID = "CS-07-r1"


def payout(seat: int, award: str, cents: int, *, shared: int = 1, paid_by: str = "attendant", kind="paytable",
           hand="straight-flush", hand_of="dealer") -> Payout:
    return Payout(seat, 100, kind, hand_of, hand, (), award, cents, paid_by, paid_by == "attendant",
                  shared_by=shared)


def dealer_claim(n: int = 1, shares: int = 3) -> Claim:
    """The dealer's hand: 10% of the meter shared by `shares` seats, each with a Magic Card payout."""
    payouts = []
    for seat in range(shares, 0, -1):
        payouts.append(payout(seat, "10% of meter", 33_333, shared=shares))
        payouts.append(payout(seat, "20 for 1", 2_000, paid_by="table", kind="magic-card", hand="magic card 8D"))
    return Claim(f"{RID}-c{n}", RID, 0, "five-card-hand-bonus-dealer", "bonus", 0, (), tuple(payouts), turn=shares)


def run(rc: RoundClaims, *inputs: cm.Input) -> tuple[RoundClaims, list[cm.Effect]]:
    effects: list[cm.Effect] = []
    for e in inputs:
        out = cm.step(rc, e)
        rc = out.claims
        effects += out.effects
    return rc, effects


def of(effects, kind):
    return [e for e in effects if isinstance(e, kind)]


def test_a_shared_award_on_a_linked_meter_is_locked_once_and_every_share_paid():
    c = dealer_claim(shares=3)
    assert cm.lock_indices(c.payouts) == (0,)  # the first share only: the lock takes the whole award
    rc, eff = run(RoundClaims(RID), cm.NewClaim(c, linked=True))
    assert [type(e) for e in eff[:2]] == [cm.Record, cm.Lock] and rc.get(c.id).status == "locking"
    assert {e.seat for e in of(eff, cm.WinLight) if e.on} == {1, 2, 3}  # lit at the claim
    rc, eff = run(rc, cm.Locked(c.id, 0, 40_001))  # the authority's amount, each share
    c2 = rc.get(c.id)
    assert c2.status == "pending" and [p.amount for p in c2.payouts if p.shared_by == 3] == [40_001] * 3
    assert [p.amount for p in c2.payouts if p.kind == "magic-card"] == [2_000] * 3  # fixed payouts unchanged
    rc, eff = run(rc, cm.Approve(c.id, "floor-1"))
    assert of(eff, cm.Record)[0].event == "approved" and [e.index for e in of(eff, cm.Pay)] == list(range(6))
    for i in range(5):
        rc, eff = run(rc, cm.Paid(c.id, i))
        assert rc.get(c.id).status == "paying" and not of(eff, cm.Won)
    rc, eff = run(rc, cm.Paid(c.id, 5))
    assert rc.get(c.id).status == "paid" and of(eff, cm.Won) and of(eff, cm.Record)[0].event == "paid"


def test_a_payment_the_link_authority_refuses_ends_the_claim_and_gives_its_lock_back():
    """Its approval did not verify at the authority: nothing of the claim is paid, so it ends refused, the lock goes
    back to the meter, the lights go off and the hand may be claimed again. With a share already paid it stays being
    paid (a note for the log): nothing paid is ever taken back here."""
    c = dealer_claim(shares=2)
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c, linked=True), cm.Locked(c.id, 0, 40_001),
                cm.Approve(c.id, "floor-1", ((0, "floor-1", "ab" * 32),)))
    assert rc.get(c.id).status == "paying"
    out, eff = run(rc, cm.PayRefused(c.id, 0, "the approval by 'floor-1' does not verify"))
    done = out.get(c.id)
    assert done.status == "refused" and "refused payout 0: the approval" in done.reason
    assert of(eff, cm.Record)[0].event == "refused"
    assert of(eff, cm.Release) == [cm.Release(c.id, 0, "controller", "its payment was refused")]
    assert not out.lit and out.open is None and cm.settle_refusal(out) is None
    assert cm.step(out, cm.PayRefused(c.id, 0, "again")).claims == out  # decided once
    assert cm.step(out, cm.NewClaim(dealer_claim(2), linked=True)).claims.get(f"{RID}-c2").status == "locking"
    partly, _ = run(rc, cm.Paid(c.id, 0))
    kept, eff = run(partly, cm.PayRefused(c.id, 1, "no"))
    assert kept.get(c.id).status == "paying" and of(eff, cm.Note) and not of(eff, cm.Release)


def test_decisions_are_taken_once():
    c = replace(dealer_claim(), payouts=(payout(4, "100% of meter", 1_000_000, hand_of="player"),), seat=4)
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c))
    rc, _ = run(rc, cm.Approve(c.id, "floor-1"))
    for late in (cm.Approve(c.id, "floor-2"), cm.Reject(c.id, "floor-2", "no")):
        with pytest.raises(RulesError, match="is being paid"):
            cm.step(rc, late)
    assert cm.void_refusal(rc) and "being paid" in cm.void_refusal(rc)
    with pytest.raises(RulesError, match="can no longer be voided"):
        cm.step(rc, cm.VoidClaims("misdeal"))
    rc2, eff = run(RoundClaims(RID), cm.NewClaim(c), cm.Reject(c.id, "floor-1", "cards switched"))
    assert rc2.get(c.id).status == "rejected" and of(eff, cm.WinLight)[-1] == cm.WinLight(4, False)
    with pytest.raises(RulesError, match="was rejected by floor-1"):
        cm.step(rc2, cm.Approve(c.id, "floor-2"))


def test_one_claim_at_a_time_and_a_void_ends_the_pending_one():
    c = dealer_claim()
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c, linked=True), cm.Locked(c.id, 0, 40_001))
    with pytest.raises(RulesError, match="one at a time"):
        cm.step(rc, cm.NewClaim(dealer_claim(2)))
    assert cm.settle_refusal(rc) and "approve or reject" in cm.settle_refusal(rc)
    rc, eff = run(rc, cm.VoidClaims("misdeal"))
    assert rc.get(c.id).status == "voided" and of(eff, cm.Release) == [cm.Release(c.id, 0, "controller",
                                                                                    "round voided: misdeal")]
    assert not rc.lit and cm.settle_refusal(rc) is None


def test_restore_finishes_what_the_journal_says_was_under_way():
    c = dealer_claim()
    paying = replace(c, status="paying", by="floor-1", paid=(0, 1))
    locking = replace(dealer_claim(2), status="locking", locks=(0,))
    rejected = replace(dealer_claim(3), status="rejected", locks=(0,), locked=(0,), by="floor-1")
    out = cm.restore(RID, 4, [paying, locking, rejected])
    assert [e.index for e in of(out.effects, cm.Pay)] == [2, 3, 4, 5]  # what was not paid yet
    assert of(out.effects, cm.Lock) == [cm.Lock(locking.id, 0)]
    assert [e.claim_id for e in of(out.effects, cm.Release)] == [rejected.id]
    assert out.claims.next_number == 4
    assert {e.seat for e in of(out.effects, cm.WinLight)} == {1, 2, 3}


def test_a_claim_reads_back_as_it_was_journaled():
    c = replace(dealer_claim(), status="paying", by="floor-1", claimed_by="shoe", locks=(0,), locked=(0,), paid=(1,))
    assert claim_from_json(claim_to_json(c)) == c


# --- the sign ---------------------------------------------------------------------------------------------------


class Out:
    def __init__(self) -> None:
        self.shown = None

    def want(self, key, command) -> None:
        self.shown = command


def test_the_sign_shows_the_newest_message_in_force_then_the_meters():
    now = [100.0]
    out = Out()
    sign = Sign("CS-07", [out], clock=lambda: now[0])
    sign.meters((("main", 1_000_045),))
    assert out.shown == ev.ShowAmounts((("main", 1_000_045),))
    sign.offline(True)
    assert out.shown.message is ev.SignMessage.OFFLINE
    sign.pending(6, 1_000_045)
    pending = out.shown
    assert (pending.message, pending.seat, pending.amount_cents) == (ev.SignMessage.PENDING, 6, 1_000_045)
    for _ in range(3):  # meters and refreshes come and go: PENDING stays
        now[0] += 7
        sign.meters((("main", 1_000_000),))
        assert out.shown == pending
    sign.win("CS-08", 2, 500_000)  # another table of the link: newer, shown for its time, then PENDING again
    assert out.shown.message is ev.SignMessage.WIN
    now[0] += WIN_DISPLAY_S - 0.01
    sign.show()
    assert out.shown.message is ev.SignMessage.WIN
    now[0] += 0.02
    sign.show()
    assert out.shown == pending
    sign.pending(None)
    sign.win("CS-07", 6, 1_000_045)
    now[0] += WIN_DISPLAY_S + 0.01
    sign.offline(False)
    assert out.shown == ev.ShowAmounts((("main", 1_000_000),))


def test_a_claim_that_waits_outranks_the_win_of_the_claim_before_it_whenever_that_win_came():
    """Claim, approve, next claim at the speed the card-reading shoe makes them: the next claim's PENDING may be given
    a moment before the WIN of the claim before it (the win is shown once its payment is journaled). The sign shows
    the claim that waits, not that win; a win at another table of the link still comes first for its time."""
    now = [100.0]
    out = Out()
    sign = Sign("CS-07", [out], clock=lambda: now[0])
    sign.meters((("main", 1_000_045),))
    sign.pending(6, 1_000_045)
    now[0] += 0.5
    sign.pending(None)
    sign.pending(5, 1_000_000)  # the next detected hit claimed at once
    sign.win("CS-07", 6, 1_000_045)  # the win of seat 6, shown a moment later
    waiting = (ev.SignMessage.PENDING, 5, 1_000_000)
    assert (out.shown.message, out.shown.seat, out.shown.amount_cents) == waiting, out.shown
    sign.win("CS-08", 2, 500_000)  # another table of the link: shown for its time
    assert (out.shown.message, out.shown.table) == (ev.SignMessage.WIN, "CS-08")
    now[0] += WIN_DISPLAY_S + 0.01
    sign.show()
    assert (out.shown.message, out.shown.seat, out.shown.amount_cents) == waiting
    sign.pending(None)  # approved: its own win, then the meters
    sign.win("CS-07", 5, 1_000_000)
    assert (out.shown.message, out.shown.seat) == (ev.SignMessage.WIN, 5)


def test_the_sign_names_a_disabled_seat_now_and_then_and_shows_the_meters_between():
    """A seat whose device does not answer is named (OFFLINE with the seat) at once and then for SEAT_SHOWN_S of
    every SEAT_EVERY_S, each such seat in turn: the meters the rest of the time, the table's OFFLINE and the
    messages over it."""
    now = [100.0]
    out = Out()
    sign = Sign("CS-07", [out], clock=lambda: now[0])
    meters = ev.ShowAmounts((("main", 1_000_045),))
    sign.meters(meters.amounts)

    def seat_named() -> int | None:
        sign.show()
        shown = out.shown
        assert shown == meters or (shown.message, shown.table, shown.amount_cents) == (ev.SignMessage.OFFLINE,
                                                                                         "CS-07", None), shown
        return None if shown == meters else shown.seat

    sign.seats_disabled([4])
    assert seat_named() == 4
    now[0] += SEAT_SHOWN_S - 0.01
    assert seat_named() == 4
    now[0] += 0.02
    assert seat_named() is None  # the meters, until the next turn
    now[0] += SEAT_EVERY_S - SEAT_SHOWN_S - 0.02
    assert seat_named() is None
    now[0] += 0.02
    assert seat_named() == 4
    sign.seats_disabled([4, 2])  # seat 2 just disabled: named at once, then seat 4 at the next turn
    assert seat_named() == 2
    now[0] += SEAT_EVERY_S
    assert seat_named() == 4
    now[0] += SEAT_EVERY_S
    assert seat_named() == 2
    sign.offline(True)  # the whole table: OFFLINE without a seat
    assert (out.shown.message, out.shown.seat) == (ev.SignMessage.OFFLINE, None)
    sign.offline(False)
    sign.pending(6, 1_000_045)
    assert out.shown.message is ev.SignMessage.PENDING
    sign.pending(None)
    sign.seats_disabled([2])  # seat 4 answers again; seat 2's turns go on
    now[0] += SEAT_EVERY_S
    assert seat_named() == 2
    sign.seats_disabled([])
    assert out.shown == meters


async def test_the_sign_names_a_disabled_seat_again_at_its_next_turn(monkeypatch):
    import controller.app.sign as sign_mod
    monkeypatch.setattr(sign_mod, "SEAT_SHOWN_S", 0.05)
    monkeypatch.setattr(sign_mod, "SEAT_EVERY_S", 0.15)
    meters = ev.ShowAmounts((("main", 1),))
    seen: list = []  # the faces sent, each change once
    changed = asyncio.Event()

    class Faces(Out):
        def want(self, key, command) -> None:
            face = "meters" if command == meters else command.seat
            if not seen or seen[-1] != face:
                seen.append(face)
                changed.set()

    sign = Sign("CS-07", [Faces()])
    task = asyncio.create_task(sign.run())
    try:
        sign.meters(meters.amounts)
        sign.seats_disabled([3])
        async with asyncio.timeout(3):
            while len(seen) < 5:  # the meters; seat 3 named, the meters, named again, the meters: by run alone
                changed.clear()
                await changed.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen == ["meters", 3, "meters", 3, "meters"]


async def test_the_sign_is_shown_again_when_a_win_is_over():
    out = Out()
    sign = Sign("CS-07", [out])
    import controller.app.sign as sign_mod
    task = asyncio.create_task(sign.run())
    try:
        sign.meters((("main", 1),))
        old, sign_mod.WIN_DISPLAY_S = sign_mod.WIN_DISPLAY_S, 0.1
        try:
            sign.win("CS-07", 1, 5)
        finally:
            sign_mod.WIN_DISPLAY_S = old
        assert out.shown.message is ev.SignMessage.WIN
        async with asyncio.timeout(2):
            while out.shown != ev.ShowAmounts((("main", 1),)):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- one step says everything the shell needs ---------------------------------------------------------------

AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
STAMP = cm.Stamp("CS-07", AT)


def shared_claim() -> Claim:
    """The dealer's hand: 10% of the meter shared by seats 2 and 1 (the first share locked on a linked meter)."""
    payouts = (payout(2, "10% of meter", 33_333, shared=2), payout(1, "10% of meter", 33_333, shared=2))
    return Claim(f"{RID}-c1", RID, 0, "five-card-hand-bonus-dealer", "bonus", 0, (), payouts, turn=2)


def test_an_approval_is_one_step_that_says_how_each_payout_is_paid():
    c = shared_claim()
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c, linked=True), cm.Locked(c.id, 0, 40_001, 7, "nonce-7"))
    asked: list[cm.ToSign] = []

    def sign(t: cm.ToSign) -> tuple[str, str] | None:
        asked.append(t)
        return "floor-1", f"mac-{t.index}"

    out = cm.step(rc, cm.Approve(c.id, "floor-1", stamp=STAMP, sign=sign))
    assert [(t.index, t.op.kind, t.number, t.nonce, t.amount_cents) for t in asked] == [
        (0, "pay-locked-award", 7, "nonce-7", 40_001), (1, "pay-percent-award", 0, "", 40_001)]
    assert asked[0].lock is not None and asked[0].lock.claim == f"{c.id}:0" and asked[1].lock is None
    record = of(out.effects, cm.Record)[0]
    assert record.key == f"{c.id}:approved" and record.claim.approvals == ((0, "floor-1", "mac-0"),
                                                                           (1, "floor-1", "mac-1"))
    pays = of(out.effects, cm.Pay)
    assert [(p.index, p.key, p.signed, p.meter) for p in pays] == [
        (0, payout_key(RID, 0, c.spot, 0), ("floor-1", "mac-0"), "bonus"),
        (1, payout_key(RID, 0, c.spot, 1), ("floor-1", "mac-1"), "bonus")]
    assert all(p.op is not None and p.op.at == AT for p in pays) and pays[1].payout.seat == 1
    assert "1 of 2 shares" in out.description
    assert out.face == cm.Face(0, 80_002, False)  # PENDING until it is paid; none awaits a supervisor
    done = cm.step(out.claims, cm.PaymentsMade(c.id, (0, 1)))  # reported at once
    assert done.claims.get(c.id).status == "paid" and of(done.effects, cm.Won) == [cm.Won(c.id, 0, 80_002,
                                                                                           "floor-1")]


def test_an_approval_the_round_or_the_authority_would_refuse_moves_nothing():
    c = shared_claim()
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c, linked=True), cm.Locked(c.id, 0, 40_001, 7, "n"))
    with pytest.raises(RulesError, match="is to be voided"):
        cm.step(rc, cm.Approve(c.id, "floor-1", stamp=STAMP, void_requested="wrong stub count"))
    with pytest.raises(RulesError, match="floor-2 is not an approver of the link authority"):
        cm.step(rc, cm.Approve(c.id, "floor-2", stamp=STAMP, sign=lambda t: ("floor-2", "mac"), approver=False))
    assert rc.get(c.id).status == "pending"


def test_a_refusal_after_payments_not_reported_yet_keeps_what_was_paid():
    c = shared_claim()
    rc, _ = run(RoundClaims(RID), cm.NewClaim(c, linked=True), cm.Locked(c.id, 0, 40_001),
                cm.Approve(c.id, "floor-1", stamp=STAMP))
    out = cm.step(rc, cm.PayRefused(c.id, 1, "does not verify", paid=(0,)))
    kept = out.claims.get(c.id)
    assert (kept.status, kept.paid, kept.refused) == ("paying", (0,), (1,))
    assert of(out.effects, cm.Record)[0].event == "share-refused"


def test_the_face_and_the_answer_of_a_claim_that_waits():
    c = replace(shared_claim(), seat=0)
    out = cm.step(RoundClaims(RID), cm.NewClaim(c, stamp=STAMP))
    assert out.face == cm.Face(0, 66_666, True) and out.description.startswith(f"claim {c.id}: the dealer's hand")
    waiting = out.claims.get(c.id)
    assert cm.claim_answer(waiting, 5.0) == (f"{out.description}: awaiting a supervisor's approval "
                                             f"(progressivectl approve {c.id})", "pending")
    rejected = cm.step(out.claims, cm.Reject(c.id, "floor-1", "misread"))
    assert rejected.ended == ("rejected",) and rejected.face == cm.Face()
    with pytest.raises(RulesError, match="was rejected by floor-1"):
        cm.claim_answer(rejected.claims.get(c.id), 5.0)

"""What the link authority decides of one table's operation (controller/authority/rules.py), as pure functions of
the operation and the linked meters, the meters from a real journal of the authority's."""

from __future__ import annotations

from fractions import Fraction

from controller.authority import rules
from controller.ledger.reader import Found
from controller.linkproto import approval, schema
from controller.meter import ops
from controller.meter.journal import LINK_REFUSED, Meters

from authority_journal import apply, booking, journal, lock, op
from linkrig import AT, METER


async def booked(led) -> Meters:
    """cs-01's round 1 booked and seat 1's royal flush locked; fcp-02's round 1 booked, seats 2 and 5 on the
    dealer's hand (an award shared by both)."""
    await apply(led, op("cs-01", 1, booking("cs-01", 1)))
    await apply(led, op("cs-01", 2, lock("cs-01", 1)))
    await apply(led, op("fcp-02", 1, ops.BookContributions("fcp-02-r1", "fcp-02", ((2, 100), (5, 100)), AT,
                                                           on_dealer=(0, 1))))
    return led.state


async def test_a_table_pays_or_releases_only_its_own_lock(tmp_path):
    with journal(tmp_path) as led:
        meters = await booked(led)
        pay = ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT)
        assert rules.foreign(op("cs-01", 3, pay), meters) is None
        field, why = rules.foreign(op("fcp-02", 2, pay), meters)
        assert field == "body.claim" and why == "'cs-01-r1-c1:0' is a lock of table cs-01, not of table fcp-02"
        release = ops.ReleaseLockedAward("cs-01-r1-c1:0", "floor-1", "not a royal", AT)
        assert rules.foreign(op("fcp-02", 2, release), meters)[0] == "body.claim"
        assert rules.foreign(op("fcp-02", 2, booking("cs-01", 2)), meters)[0] == "body.table"


async def test_a_percentage_is_taken_without_a_lock_only_as_a_later_share_on_the_dealers_hand(tmp_path):
    with journal(tmp_path) as led:
        meters = await booked(led)
        def share(table: str, seat: int, shares: int) -> schema.Op:
            return op(table, 2, ops.PayPercentAward(f"{table}-r1", table, seat, "royal-flush (dealer's hand)",
                                                    "100% of meter", Fraction(100), AT, "floor-1", shares=shares))

        assert rules.not_a_later_share(share("fcp-02", 2, 2), meters)[0] == "kind"  # no first share locked and paid
        assert rules.not_a_later_share(share("cs-01", 1, 1), meters)[0] == "kind"  # not shared: it takes a lock
        assert rules.not_a_later_share(op("cs-01", 3, booking("cs-01", 2)), meters) is None  # not a percentage


async def test_an_approval_of_a_locked_award_names_the_lock_as_held(tmp_path):
    with journal(tmp_path) as led:
        meters = await booked(led)
        pay = op("cs-01", 3, ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT))
        held = meters[METER].locked["cs-01-r1-c1:0"]
        terms = rules.approved_terms(pay, meters)
        assert terms is not None and terms["lock"] == held.number and terms["amount"] and terms["seat"] == 1
        assert terms == {**pay.body, **approval.lock_terms(held, held.number, held.nonce, held.amount_cents)}
        gone = op("cs-01", 3, ops.PayLockedAward("cs-01-r1-c9:0", "floor-1", AT))
        assert rules.approved_terms(gone, meters) is None  # nothing to pay: the meter says why
        later = op("cs-01", 3, ops.PayPercentAward("cs-01-r1", "cs-01", 1, "royal-flush", "100% of meter",
                                                   Fraction(100), AT, "floor-1"))
        assert rules.approved_terms(later, meters) is later.body


def test_a_refused_award_or_another_tables_round_is_an_alarm_a_missing_approval_is_not():
    award, book = op("cs-01", 3, lock("cs-01", 1)), op("cs-01", 3, booking("cs-01", 1))
    assert rules.is_alarm(award, "body.percent") and not rules.is_alarm(award, "approval")
    assert rules.is_alarm(book, "body.round_id") and not rules.is_alarm(book, "body.wagers")


def test_an_operation_sent_again_is_the_same_and_is_answered_as_first():
    sent = op("cs-01", 4, booking("cs-01", 2))
    digest = schema.op_digest(sent)
    done = Found(17, sent.kind, {"meter": METER, **sent.body}, {"meter_after": "10000.90"})
    assert rules.same_operation(sent, done, digest)
    assert rules.answer(sent, done, digest) == schema.Ack(4, 17, {"meter_after": "10000.90"}, digest)
    other = op("cs-01", 4, booking("cs-01", 3))
    assert not rules.same_operation(other, done, schema.op_digest(other))
    approved = schema.Op(sent.table, sent.seq, sent.kind, sent.meter, sent.body, {"by": "floor-1", "mac": "00"})
    assert not rules.same_operation(approved, done, schema.op_digest(approved))  # the approval is part of it


def test_a_refusal_sent_again_is_answered_as_refused_and_only_for_the_same_operation():
    sent = op("cs-01", 4, booking("cs-01", 2))
    digest = schema.op_digest(sent)
    journaled = {"table": "cs-01", "seq": 4, "field": "body.wagers", "message": "no", "op": digest}
    refused = Found(18, LINK_REFUSED, journaled, None)
    assert rules.same_operation(sent, refused, digest)
    assert rules.answer(sent, refused, digest) == schema.Refused(4, "body.wagers", "no", digest)
    assert not rules.same_operation(sent, refused, "another digest")
    older = Found(18, LINK_REFUSED, {"field": "kind", "message": "no", "operation": rules.digest(sent)}, None)
    assert rules.same_operation(sent, older, digest)  # journaled before the whole digest: kind, meter and body
    assert not rules.same_operation(op("cs-01", 4, booking("cs-01", 3)), older, digest)


async def test_a_hit_is_the_locks_or_the_bodys_seat_and_shares(tmp_path):
    with journal(tmp_path) as led:
        meters = await booked(led)
        assert rules.hit_of(op("cs-01", 3, lock("cs-01", 1, seat=4, shares=2)), meters) == (4, 2)
        assert rules.hit_of(op("cs-01", 3, ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT)), meters) == (1, 1)
        assert rules.hit_of(op("cs-01", 3, ops.PayLockedAward("cs-01-r1-c9:0", "floor-1", AT)), meters) == (0, 1)


def test_a_win_with_an_amount_the_money_cannot_read_shows_nothing_won():
    w = rules.win(op("cs-01", 2, lock("cs-01", 1, seat=3)), 9, {"amount": "lots"}, 3, 1)
    assert (w.meter, w.table, w.seat, w.cents, w.claim, w.state, w.entry) == \
        (METER, "cs-01", 3, 0, "cs-01-r1-c1:0", "locked", 9)

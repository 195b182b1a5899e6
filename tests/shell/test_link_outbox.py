"""A table's link journal: numbered operations wait until the authority's answer is journaled."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.link.outbox import LINK_ACK, LINK_REFUSED, LINK_SEND, OutboxReducer, send_body
from controller.meter import ops

AT = datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)
R = OutboxReducer()


def book(rid: str, wagers=((1, 100), (3, 500)), round_meters=()):
    return send_body("fchb", "fchb-link", ops.BookContributions(rid, "cs-01", wagers, AT, round_meters=round_meters))


def test_sequence_numbers_pending_and_answers():
    s = R.initial()
    s, r1 = R.apply(s, LINK_SEND, book("cs-01-r1"))
    s, r2 = R.apply(s, LINK_SEND, send_body("fchb", "fchb-link", ops.CloseRound("cs-01-r1", AT)))
    assert (r1, r2) == ({"seq": 1}, {"seq": 2})
    assert sorted(s.pending) == [1, 2] and s.next_seq == 3
    assert s.open_rounds == {} and s.last_round == {"fchb": "cs-01-r1"}
    s, _ = R.apply(s, LINK_ACK, {"seq": 1, "entry": 40, "result": {"contributed": "0.9"}})
    s, _ = R.apply(s, LINK_REFUSED, {"seq": 2, "field": "round_id", "message": "not open"})
    assert s.pending == {} and (s.acked, s.refused) == (1, 1)
    R.check(s)


def test_open_rounds_are_kept_for_resuming():
    s, _ = R.apply(R.initial(), LINK_SEND, book("cs-01-r4"))
    assert s.open_rounds == {"fchb": {"cs-01-r4": (((1, 100), (3, 500)), (), ())}}
    s, _ = R.apply(s, LINK_SEND, send_body("fchb", "fchb-link", ops.VoidRound("cs-01-r4", AT, "shoe jam")))
    assert s.open_rounds == {}


def test_an_open_round_keeps_the_meters_its_booking_names():
    """A round booked on several meters names them all in each booking: a start that finds the round on a
    linked meter only can tell it was not booked on the others."""
    s, _ = R.apply(R.initial(), LINK_SEND, book("cs-01-r1", round_meters=("main", "fchb")))
    s, _ = R.apply(s, LINK_SEND, book("cs-01-r2", round_meters=("main", "fchb")))
    assert s.open_rounds == {"fchb": {"cs-01-r1": (((1, 100), (3, 500)), (), ("fchb", "main")),
                                      "cs-01-r2": (((1, 100), (3, 500)), (), ("fchb", "main"))}}
    s, _ = R.apply(s, LINK_SEND, send_body("fchb", "fchb-link", ops.VoidRound("cs-01-r1", AT, "not booked on main")))
    s, _ = R.apply(s, LINK_SEND, send_body("fchb", "fchb-link", ops.CloseRound("cs-01-r2", AT)))
    assert s.open_rounds == {} and s.last_round == {"fchb": "cs-01-r2"}


def test_a_booking_journaled_before_the_outbox_kept_round_meters_replays_as_then():
    """A link journal written before names a round's meters in the operation only: replayed, its booking keeps
    none and snapshots in the form of then, so each of its checkpoints still has the digest it recorded."""
    before = book("cs-01-r1", round_meters=("main", "fchb"))
    assert before.pop("round_meters") == ["fchb", "main"] and before["body"]["round_meters"] == ["fchb", "main"]
    s, _ = R.apply(R.initial(), LINK_SEND, before)
    assert s.open_rounds == {"fchb": {"cs-01-r1": (((1, 100), (3, 500)), (), ())}}
    assert R.snapshot(s)["open_rounds"] == {"fchb": {"cs-01-r1": {"wagers": [[1, 100], [3, 500]], "on_dealer": []}}}


def test_snapshot_restores_the_same_state():
    s, _ = R.apply(R.initial(), LINK_SEND, book("cs-01-r1"))
    s, _ = R.apply(s, LINK_SEND, book("cs-01-r2"))
    s, _ = R.apply(s, LINK_ACK, {"seq": 1, "result": {}})
    assert R.snapshot(R.restore(R.snapshot(s))) == R.snapshot(s)
    assert R.restore(R.snapshot(s)) == s


def test_snapshot_keeps_the_meters_of_a_round():
    s, _ = R.apply(R.initial(), LINK_SEND, book("cs-01-r1", round_meters=("main", "fchb")))
    s, _ = R.apply(s, LINK_SEND, send_body("fchb", "fchb-link", ops.CloseRound("cs-01-r1", AT)))
    s, _ = R.apply(s, LINK_SEND, book("cs-01-r2", round_meters=("main", "fchb")))
    s, _ = R.apply(s, LINK_SEND, book("cs-01-r3"))  # a round of one meter names none
    snap = R.snapshot(s)
    assert snap["open_rounds"]["fchb"]["cs-01-r2"]["round_meters"] == ["fchb", "main"]
    assert "round_meters" not in snap["open_rounds"]["fchb"]["cs-01-r3"]  # the form of older snapshots
    restored = R.restore(snap)
    assert restored == s and restored.open_rounds["fchb"]["cs-01-r2"][2] == ("fchb", "main")
    assert R.snapshot(restored) == snap


def test_a_snapshot_made_before_round_meters_were_kept_restores():
    """A link journal's checkpoint written before the outbox kept the meters of a round: its rounds name none."""
    old = {"next_seq": 2, "acked": 0, "refused": 0,
           "pending": [{"seq": 1, "kind": "book-contributions", "meter": "fchb", "linked": "fchb-link",
                        "body": book("cs-01-r1", round_meters=("main", "fchb"))["body"]}],
           "open_rounds": {"fchb": {"cs-01-r1": {"wagers": [[1, 100], [3, 500]], "on_dealer": []}}},
           "last_round": {"fchb": "cs-01-r1"}}
    s = R.restore(old)
    assert s.open_rounds == {"fchb": {"cs-01-r1": (((1, 100), (3, 500)), (), ())}} and s.locks == {}
    R.check(s)
    assert R.snapshot(s) == {**old, "locks": {}}  # the same form again: no round_meters written


@pytest.mark.parametrize("kind, body, field", [
    (LINK_SEND, {**book("r1"), "kind": "change-params"}, "kind"),
    (LINK_SEND, {**book("r1"), "meter": ""}, "meter"),
    (LINK_SEND, {**book("r1"), "body": {"round_id": "r1"}}, "body"),
    (LINK_SEND, {**book("r1", round_meters=("a", "b")), "round_meters": ["a"]}, "round_meters"),
    (LINK_SEND, {**book("r1"), "round_meters": []}, "round_meters"),
    (LINK_SEND, {**send_body("fchb", "fchb-link", ops.CloseRound("r1", AT)), "round_meters": ["a", "b"]},
     "round_meters"),
    (LINK_ACK, {"seq": 9, "result": {}}, "seq"),
    ("adjust", {}, "kind"),
])
def test_bad_entries_are_refused_naming_the_field(kind, body, field):
    with pytest.raises(InputError) as e:
        R.apply(R.initial(), kind, body)
    assert e.value.field.startswith(field)


def test_an_answer_is_journaled_once(tmp_path):
    with Ledger.open(tmp_path, R, software_digest="test") as led:
        seq = led.submit(LINK_SEND, book("cs-01-r1"), "cs-01-r1:book:fchb").result["seq"]
        again = led.submit(LINK_SEND, book("cs-01-r1"), "cs-01-r1:book:fchb")
        assert again.result["seq"] == seq and led.state.next_seq == 2  # a retried send keeps its number
        led.submit(LINK_ACK, {"seq": seq, "result": {}}, f"answer:{seq}")
        with pytest.raises(RulesError):
            led.submit(LINK_ACK, {"seq": seq, "result": {}}, "answer:other")
    with Ledger.open(tmp_path, R, software_digest="test") as led:
        assert led.state.pending == {} and led.state.acked == 1


def test_audit_verify_reads_a_link_journal(tmp_path):
    from controller.cli.audit import cmd_meters, cmd_verify

    with Ledger.open(tmp_path, R, software_digest="test") as led:
        led.submit(LINK_SEND, book("cs-01-r1"), "cs-01-r1:book:fchb")
    assert cmd_verify(tmp_path, as_json=False) == 0
    with pytest.raises(InputError, match="link journal"):
        cmd_meters(tmp_path, as_json=False, meter_id=None)

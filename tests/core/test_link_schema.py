"""The link protocol's payloads: every message round-trips; anything else is refused naming the field."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.errors import InputError
from controller.linkproto import schema as s

T = "progressive/v1/tables/cs-01/up"

MESSAGES = [
    s.Op("cs-01", 7, "book-contributions", "fchb-link",
         {"round_id": "cs-01-r3", "table": "cs-01", "wagers": [[1, 100]], "at": "2026-11-30T01:02:03+00:00"}),
    s.Hello("cs-01", 12, "0f" * 16),
    s.Ack(7, 1042, {"contributed": "0.150000"}, "ab" * 32),
    s.Refused(8, "round_id", "round cs-01-r3 is not open", "cd" * 32),
    s.Expect(9),
    s.Expect(9, s.TABLE_OPS),
    s.Expect(9, s.ANNOUNCED, s.JournalAnchor("cs-01", 40, "ab" * 32, "2026-11-30T01:02:03Z"), frozenset({"J. Smith"}),
             "0f" * 16),
    s.Op("cs-01", 8, "pay-locked-award", "fchb-link", {"claim": "cs-01-r3-c1:0", "approved_by": "J. Smith"},
         {"by": "J. Smith", "mac": "cd" * 32}),
    s.MeterValue("fchb-link", 1_000_015, 1043, "2026-11-30T01:02:04+00:00", 1_000_000,
                 (("cs-01-r3:c1", 1_000_000),)),
    s.Win("fchb-link", "cs-01", 3, 1_000_015, "cs-01-r3:c1", "paid", 1044),
    s.Heartbeat("link-1", "2026-11-30T01:02:05+00:00", 1044, {"fchb-link": 1_000_000}),
    s.Status("link-1", "online"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(msg):
    wire = s.encode(msg)
    assert json.loads(wire)["v"] == s.VERSION
    assert s.decode(T, wire) == msg
    assert s.encode(s.decode(T, wire)) == wire


def test_an_expect_without_kinds_takes_the_base_operations():
    """`kinds` stays optional: an expect without it is read as taking BASE_OPS, and a table sends a kind added since
    (pay-percent-award) only to an authority that lists it."""
    older = s.decode(T, b'{"v": 2, "type": "expect", "next_seq": 3, "hello": ""}')
    assert older == s.Expect(3) and older.kinds is None
    newer = json.loads(s.encode(s.Expect(3, s.TABLE_OPS)))
    assert "pay-percent-award" in newer["kinds"] and set(newer["kinds"]) >= s.ADDED_OPS
    with pytest.raises(InputError, match="kinds"):
        s.decode(T, b'{"v": 2, "type": "expect", "next_seq": 3, "hello": "", "kinds": [1]}')
    assert older.approvers is None  # an authority that predates approvals: the table checks no name
    with pytest.raises(InputError, match="approvers"):
        s.decode(T, b'{"v": 2, "type": "expect", "next_seq": 3, "hello": "", "approvers": ["", 2]}')


def test_money_is_a_decimal_string():
    d = json.loads(s.encode(s.MeterValue("m", 1_234_567, 1, "t", 1_000_000)))
    assert d["amount"] == "12345.67"


def test_op_key_is_table_and_sequence():
    assert MESSAGES[0].key == "link:cs-01:7"


@pytest.mark.parametrize("payload, field", [
    (b"not json", "payload"),
    (b"[1, 2]", "payload"),
    (b'{"v": 1, "type": "hello", "table": "t", "next_seq": 1}', "v"),
    (b'{"v": 2, "type": "hello", "table": "t", "next_seq": 1, "nonce": "00"}', "nonce"),
    (b'{"v": 2, "type": "ack", "seq": 1, "entry": 1, "result": {}}', "op"),
    (b'{"v": 2, "type": "nonsense"}', "type"),
    (b'{"v": 2, "type": "hello", "next_seq": 1, "nonce": "00"}', "table"),
    (b'{"v": 2, "type": "hello", "table": "a/b", "next_seq": 1}', "table"),
    (b'{"v": 2, "type": "hello", "table": "t", "next_seq": 0}', "next_seq"),
    (b'{"v": 2, "type": "hello", "table": "t", "next_seq": true}', "next_seq"),
    (b'{"v": 2, "type": "op", "table": "t", "seq": 1, "kind": "change-params", "meter": "m", "body": {}}', "kind"),
    (b'{"v": 2, "type": "op", "table": "t", "seq": 1, "kind": "close-round", "meter": "m", "body": []}', "body"),
    (b'{"v": 2, "type": "meter", "meter": "m", "amount": "1.234", "entry": 1, "at": "x", "reset": "1.00", "locked": []}', "amount"),
    (b'{"v": 2, "type": "meter", "meter": "m", "amount": "-1.00", "entry": 1, "at": "x", "reset": "1.00", "locked": []}', "amount"),
    (b'{"v": 2, "type": "meter", "meter": "m", "amount": "1.00", "entry": 1, "at": "x", "reset": "1.00", "locked": [{}]}',
     "locked[0].claim"),
    (b'{"v": 2, "type": "win", "meter": "m", "table": "t", "seat": 1, "amount": "1.00", "claim": "c",'
     b' "state": "maybe", "entry": 1}', "state"),
    (b'{"v": 2, "type": "status", "authority": "a", "state": "sleepy"}', "state"),
])
def test_bad_payloads_name_the_field_and_the_topic(payload, field):
    with pytest.raises(s.SchemaError) as e:
        s.decode(T, payload)
    assert e.value.field == field
    assert T in str(e.value)


def test_oversized_payload_is_refused_before_parsing():
    with pytest.raises(s.SchemaError, match="more than"):
        s.decode(T, b" " * (s.MAX_PAYLOAD + 1))


def test_topics():
    t = s.Topics("casino/prog")
    assert t.up("cs-01") == "casino/prog/tables/cs-01/up"
    assert t.parse("casino/prog/tables/cs-01/up") == ("tables", "cs-01", "up")
    assert t.parse("other/tables/cs-01/up") == ()
    assert t.table_subscriptions("cs-01")[0] == t.down("cs-01")


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data):
    with contextlib.suppress(InputError):
        s.decode(T, data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10)


@given(st.sampled_from(["op", "hello", "ack", "refused", "expect", "meter", "win", "heartbeat", "status"]),
       st.dictionaries(st.sampled_from(["table", "seq", "kind", "meter", "body", "next_seq", "entry", "result",
                                        "field", "message", "amount", "at", "locked", "seat", "claim", "state",
                                        "authority", "meters", "nonce", "op", "hello"]), json_values, max_size=9))
def test_arbitrary_json_objects_never_crash(kind, fields):
    payload = json.dumps({"v": s.VERSION, "type": kind, **fields}).encode()
    try:
        msg = s.decode(T, payload)
    except InputError:
        return
    assert s.decode(T, s.encode(msg)) == msg


def test_an_answer_names_the_operation_it_answers():
    """op_digest covers everything the table sent: another body, approval or number under the same number is
    another operation."""
    op = MESSAGES[-7] if isinstance(MESSAGES[-7], s.Op) else MESSAGES[0]
    d = s.op_digest(op)
    assert len(d) == 64 and d == s.op_digest(s.decode(T, s.encode(op)))
    changed = [s.Op(op.table, op.seq + 1, op.kind, op.meter, op.body, op.approval),
               s.Op(op.table, op.seq, op.kind, op.meter, {**op.body, "seat": 5}, op.approval),
               s.Op(op.table, op.seq, op.kind, op.meter, op.body, {"by": "x", "mac": "00" * 32}),
               s.Op("cs-02", op.seq, op.kind, op.meter, op.body, op.approval)]
    assert len({d, *map(s.op_digest, changed)}) == 5

"""Only the authority's signed, well-formed messages are acted on, and an answer only for what the table asked."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.link.outbox import Sent
from controller.link.rejections import Rejections
from controller.link.verify import Verification
from controller.linkproto import schema, signing

TOPICS = schema.Topics("progressive/v1")
KEY = Ed25519PrivateKey.generate()
SIGNER = signing.Signer(KEY)
VALUE = schema.MeterValue("fchb-link", 1_000_015, 40, "2026-12-05T08:00:00Z", 1_000_000)
LOCK = Sent(7, "lock-percent-award", "fchb", "fchb-link", MappingProxyType({"claim": "c-1", "round_id": "r-1"}))


@pytest.fixture
def verification() -> Verification:
    return Verification("cs-01", (signing.format_public(KEY.public_key()),), Rejections("cs-01"))


def sealed(topic: str, msg: schema.Message, signer: signing.Signer = SIGNER) -> bytes:
    return signer.seal(topic, schema.encode(msg))


def test_a_signed_message_is_taken(verification):
    topic = TOPICS.meter("fchb-link")
    assert verification.message(topic, sealed(topic, VALUE)) == VALUE
    assert verification.rejections.counts == {}


@pytest.mark.parametrize(("payload", "reason"), [
    (schema.encode(VALUE), "not_signed"),  # as the broker or a table's password could publish it
    (sealed(TOPICS.meter("fchb-link"), VALUE, signing.Signer(Ed25519PrivateKey.generate())), "not_signed"),
    (b"{not json", "bad_schema"),
    (b" " * (schema.MAX_PAYLOAD + 1), "bad_schema"),
    (json.dumps({**json.loads(schema.encode(VALUE)), "v": schema.VERSION + 1}).encode(), "version"),
], ids=["unsigned", "another-key", "not-json", "too-large", "another-version"])
def test_what_the_authority_did_not_sign_or_cannot_be_read_is_rejected(verification, payload, reason):
    assert verification.message(TOPICS.meter("fchb-link"), payload) is None
    assert verification.rejections.counts == {reason: 1}


def test_an_answer_is_taken_only_for_the_operation_it_names(verification):
    digest = schema.op_digest(LOCK.as_op("cs-01"))
    assert verification.same_operation(schema.Ack(7, 40, {"claim": "c-1"}, digest), LOCK)
    other = schema.op_digest(Sent(7, "close-round", "fchb", "fchb-link", MappingProxyType({})).as_op("cs-01"))
    assert not verification.same_operation(schema.Refused(7, "round_id", "not open", other), LOCK)
    assert not verification.same_operation(schema.Ack(7, 40, {}, schema.op_digest(LOCK.as_op("cs-02"))), LOCK)
    assert verification.rejections.counts == {"not_our_operation": 2}


def test_an_acknowledged_lock_must_name_its_claim(verification):
    digest = schema.op_digest(LOCK.as_op("cs-01"))
    assert verification.same_claim(schema.Ack(7, 40, {"claim": "c-1"}, digest), LOCK)
    assert verification.same_claim(schema.Refused(7, "claim", "no such hit", digest), LOCK)  # names none
    assert not verification.same_claim(schema.Ack(7, 40, {"claim": "c-2"}, digest), LOCK)
    assert verification.rejections.counts == {"not_our_operation": 1}
    close = Sent(8, "close-round", "fchb", "fchb-link", MappingProxyType({"round_id": "r-1"}))
    assert verification.same_claim(schema.Ack(8, 41, {}, schema.op_digest(close.as_op("cs-01"))), close)

"""TableLink hands each message heard to the part whose job it is, and keeps the names the daemon uses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.config.model import MqttConfig
from controller.link.client import TableLink
from controller.link.mqtt import MqttSettings
from controller.linkproto import schema, signing

KEY = Ed25519PrivateKey.generate()
SIGNER = signing.Signer(KEY)
TOPICS = schema.Topics("progressive/v1")
NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


@pytest.fixture
def link(tmp_path):
    """A link whose journal is open and that never connects: messages are handed in."""
    mqtt = MqttConfig(host="127.0.0.1", port=0, tls=True, client_id="cs-01", topic_prefix="progressive/v1",
                      link_timeout=2.0, authority_keys=(signing.format_public(KEY.public_key()),))
    link = TableLink("cs-01", mqtt, {"fchb": "fchb-link"}, tmp_path / "link", clock=lambda: 5.0,
                     settings=MqttSettings(host="127.0.0.1", client_id="cs-01"))
    link.open()
    yield link
    link.close()


def hear(link: TableLink, topic: str, msg: schema.Message) -> None:
    link._on_message(topic, SIGNER.seal(topic, schema.encode(msg)))


def test_what_the_parts_keep_is_read_and_set_on_the_link(link):
    link.wall = lambda: NOW
    link.last_heard = 1.0
    link.authority_kinds = frozenset({"floor"})
    assert link.heard.wall() == NOW and link.heard.last_heard == 1.0 and link.accepts("floor")
    assert link.ledger is link.sender.ledger and link.outbox.next_seq == 1
    assert link.rejected is link.rejections.counts and link.values is link.meters.values
    assert link.settings.will is not None and link.settings.will[0] == TOPICS.up("cs-01")


def test_each_message_goes_to_its_part_on_its_own_topic_only(link):
    link.wall = lambda: NOW
    value = schema.MeterValue("fchb-link", 1_000_015, 40, "2026-12-05T08:00:00Z", 1_000_000)
    hear(link, TOPICS.meter("fchb-link"), value)
    hear(link, TOPICS.heartbeat, schema.Heartbeat("link-1", "2026-12-05T08:00:00Z", 40))
    assert link.values == {"fchb-link": value} and link.last_heard == 5.0
    hear(link, TOPICS.meter("main-link"), value)  # a meter's value on another meter's topic
    hear(link, TOPICS.down("cs-02"), schema.Ack(1, 40, {}, "ab" * 32))  # another table's answer
    link._on_message(TOPICS.meter("fchb-link"), schema.encode(value))  # not signed
    hear(link, TOPICS.status, schema.Status("link-1", "offline"))
    assert link.last_heard is None and not link.alive
    assert link.rejected == {"bad_topic": 2, "not_signed": 1}
    status = link.status()
    assert (status["up"], status["connected"], status["waiting"], status["rejected"]) == \
        (False, False, 0, {"bad_topic": 2, "not_signed": 1})


async def test_an_operation_journaled_before_the_link_runs_waits_in_the_outbox(link):
    from controller.meter import ops

    seq = await link.send(ops.CloseRound("r1", NOW), "fchb", "r1:close:fchb")
    assert seq == 1 and sorted(link.outbox.pending) == [1]  # not running: sent when the link connects
    link.send_anchor(schema.JournalAnchor("cs-01", 40, "ab" * 32, "2026-12-05T08:00:00Z"))
    assert link.anchor is not None and link.anchor.seq == 40

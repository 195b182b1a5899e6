"""The link authority's run as its three steps (controller/authority/authority.py), with no broker to reach: started
(its journal opened and anchored), serving (its socket answers; a table's operation that comes in is applied and
answered), shut down (its journal closed and anchored at its final head), and started again where it stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from controller.authority.authority import LinkAuthority
from controller.errors import InputError
from controller.link.mqtt import MqttSettings
from controller.linkproto import schema
from controller.service.control import NotAvailable

from authority_journal import TABLES, booking, op
from linkrig import authority_config


def nobody_listening() -> MqttSettings:
    """A broker's address where nothing listens: the authority's session keeps trying, and the rest serves."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return MqttSettings(host="127.0.0.1", port=port, tls=False, client_id="authority", reconnect_min=0.05)


class Answers:
    """What the authority answered the tables, caught on its one way out (`_reply`), and an event at each."""

    def __init__(self, a: LinkAuthority) -> None:
        self.sent: list[schema.Message] = []
        self.arrived = asyncio.Event()
        real = a._reply

        async def reply(table: str, msg: schema.Message) -> None:
            self.sent.append(msg)
            self.arrived.set()
            await real(table, msg)

        a._reply = reply


@contextlib.asynccontextmanager
async def running(a: LinkAuthority) -> AsyncIterator[Answers]:
    """`a` run until the end of the block, started and serving."""
    answers = Answers(a)
    task = asyncio.create_task(a.run())
    try:
        await a.ready.wait()
        yield answers
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_authority_starts_serves_and_stops_where_its_journal_says(tmp_path):
    cfg = authority_config(tmp_path / "authority", TABLES)
    a = LinkAuthority(cfg, settings=nobody_listening(), registry=CollectorRegistry())
    async with running(a) as answers:
        status = await a.call("status", {})
        assert status["role"] == "link-authority" and not status["broker_connected"]
        assert [t["table"] for t in status["tables"]] == list(TABLES)
        with pytest.raises(NotAvailable, match="^settle: not offered by the link authority"):
            await a.call("settle", {})
        sent = op("cs-01", 1, booking("cs-01", 1))
        a.inbox.on_message(a.topics.up("cs-01"), schema.encode(sent))  # as the broker hands it over
        await answers.arrived.wait()
        [ack] = answers.sent
        assert isinstance(ack, schema.Ack) and ack.op == schema.op_digest(sent)
        assert a.next_seq == {"cs-01": 2} and a.liveness.tables["cs-01"].online
        head = a.ledger.head.seq
    assert a.ledger is None  # closed
    closed = json.loads(cfg.anchor.file_for(cfg.state_dir).read_text())
    assert closed["seq"] >= head  # anchored at its final head

    again = LinkAuthority(cfg, settings=nobody_listening(), registry=CollectorRegistry())
    async with running(again):
        assert again.next_seq == {"cs-01": 2}
        state = again.liveness.tables["cs-01"]
        assert (state.online, state.ack_seq, state.ack_outcome) == (False, 1, "journaled")


def test_an_authority_without_a_signing_key_is_refused_by_name(tmp_path):
    cfg = replace(authority_config(tmp_path / "authority", TABLES), signing_key=None)
    with pytest.raises(InputError) as err:
        LinkAuthority(cfg, settings=nobody_listening(), registry=CollectorRegistry())
    assert err.value.field == "signing_key_file"

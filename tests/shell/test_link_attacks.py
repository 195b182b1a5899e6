"""The attacks on a linked jackpot that got one paid that no supervisor approved, or paid twice, run for real: a real
Mosquitto (TLS, the shipped ACL), the link authority, and the table daemon on the rig with its Five Card Hand Bonus
meter linked. Two adversaries:

- the broker: an operator client that reads and publishes every topic of the link, as whoever runs the broker can
  (it holds nothing of the authority: not its signing key);
- a table's MQTT password: a client logged in as the table, with no daemon, no cards and no supervisor.

Before, each of these ended with money moved on the forged word (docs/security.md, "The broker and a table's MQTT
password"): a royal flush for another seat paid on a straight flush's approval, a royal flush paid twice after a
forged refusal, a shared award stranded `paying` by forged answers, the linked meter shown at $10.00."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from fractions import Fraction
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_claim_desk_linked import (
    BONUS,
    FLOOR,
    ON_DEALER,
    ROYAL,
    STRAIGHT_FLUSH,
    TABLE_ID,
    answered,
    authority,
    linked_table,
)

from controller.app import claim_link
from controller.errors import RulesError
from controller.link.mqtt import MqttLink, MqttSettings
from controller.link.outbox import Sent
from controller.linkproto import schema, signing
from controller.meter import ops

from broker import running_broker
from linkrig import AT, METER, PREFIX, RESET, SIGNING_KEY, signed
from rigtable import lock_round, until

TOPICS = schema.Topics(PREFIX)
OPERATOR = "broker-operator"


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path / "mosquitto", (TABLE_ID, "authority"), operators=(OPERATOR,)) as b:
        yield b


class Client:
    """An MQTT client of the link holding only `user`'s credentials: what it reads is kept as it came (topic, raw
    payload)."""

    def __init__(self, broker, user: str, subscriptions: tuple[str, ...]) -> None:
        self.mq = MqttLink(broker.settings(user, client_id=f"{user}-x"), subscriptions)
        self.seen: list[tuple[str, bytes]] = []
        self.task: asyncio.Task | None = None

    async def __aenter__(self) -> Client:
        self.task = asyncio.create_task(self.mq.run(lambda t, p: self.seen.append((t, p))))
        await self.mq.wait_connected(10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def publish(self, topic: str, payload: bytes | dict[str, Any], retain: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload, sort_keys=True).encode()
        await self.mq.publish(topic, data, qos=1, retain=retain)

    def messages(self, topic: str) -> list[tuple[bytes, dict[str, Any]]]:
        return [(p, json.loads(p)) for t, p in self.seen if t == topic]


def digest_of(sent: Sent) -> str:
    """What an answer to the table's operation names: the operation as the table sent it."""
    return schema.op_digest(schema.Op(TABLE_ID, sent.seq, sent.kind, sent.linked, dict(sent.body),
                                      None if sent.approval is None else dict(sent.approval)))


def rejected(daemon, reason: str) -> int:
    return daemon.link.rejected.get(reason, 0)


def anomalies(link, anomaly: str) -> float:
    return link.authority.metrics.registry.get_sample_value(
        "progressive_link_anomalies_total", {"table": TABLE_ID, "anomaly": anomaly}) or 0.0


async def test_a_lock_planted_under_the_tables_number_is_never_taken_for_the_tables_own(tmp_path, broker, monkeypatch):
    """Findings 1 and 2. With the table's MQTT password, a royal flush (100%) for seat 5 is locked under the table's
    next operation number and the claim id its next claim takes; the broker keeps the authority's (true, signed)
    answer to it and plays it to the table as the answer to the table's own lock of a straight flush (10%) at seat
    3, then a forged one. Before: the table took it, the floorperson approved "straight flush 10% of meter" and the
    authority paid seat 5 a royal flush. Now the table takes neither (the signed one answers another operation, the
    forged one is not signed), the authority refuses the table's own lock (its number was taken, an alert), the
    claim ends refused, and what the planted lock took goes back to the meter."""
    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)  # the claim answers `locking` after this long
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig), \
            Client(broker, OPERATOR, (TOPICS.down(TABLE_ID), TOPICS.up(TABLE_ID))) as the_broker:
        await lock_round(daemon, rig, [(3, BONUS), (5, BONUS)])
        await answered(daemon)
        before = link.meter().current
        rid, seq = f"{TABLE_ID}-r1", daemon.link.outbox.next_seq
        claim_id = f"{rid}-c1:0"  # the id the table's first claim of the round locks under
        planted = ops.LockPercentAward(rid, TABLE_ID, 5, "royal flush", "100% of meter", Fraction(100), AT, claim_id)
        body = planted.to_dict()
        body.pop("kind")
        async with Client(broker, TABLE_ID, ()) as impostor:  # the table's password, another client id
            await impostor.publish(TOPICS.up(TABLE_ID), schema.encode(
                schema.Op(TABLE_ID, seq, planted.kind, METER, body)))
            await until(lambda: link.authority.next_seq.get(TABLE_ID) == seq + 1, "the planted lock applied")
        assert claim_id in link.meter().locked  # the amount left the meter, held under the table's claim id
        await until(lambda: any(d.get("seq") == seq and d["type"] == "ack"
                                for _p, d in the_broker.messages(TOPICS.down(TABLE_ID))), "its answer seen")
        true_answer = next(p for p, d in the_broker.messages(TOPICS.down(TABLE_ID))
                           if d.get("seq") == seq and d["type"] == "ack")
        await link.stop_authority()  # the broker holds the table's operation back: only its answers reach the table

        got = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": STRAIGHT_FLUSH})
        assert got["status"] == "locking" and got["claim_id"] == claim_id[:-2], got
        own = daemon.link.outbox.pending[seq]
        assert own.kind == "lock-percent-award" and own.body["seat"] == 3
        await the_broker.publish(TOPICS.down(TABLE_ID), true_answer)  # signed, for the planted lock
        await until(lambda: rejected(daemon, "not_our_operation") == 1, "the planted lock's answer not taken")
        forged = {"v": schema.VERSION, "type": "ack", "seq": seq, "entry": 99, "op": digest_of(own),
                  "result": {"claim": claim_id, "amount": "10000.30", "lock": 1, "nonce": "00" * 16}}
        await the_broker.publish(TOPICS.down(TABLE_ID), forged)  # the right digest, but not signed
        await until(lambda: rejected(daemon, "not_signed") >= 1, "the forged answer not taken")
        assert daemon.desk.state.get(got["claim_id"]).status == "locking"  # nothing was taken for an answer
        assert seq in daemon.link.outbox.pending

        await link.start_authority()
        await until(lambda: daemon.desk.state.get(got["claim_id"]).status == "refused", "the claim refused")
        await answered(daemon)
        claim = daemon.desk.state.get(got["claim_id"])
        assert "another operation" in claim.reason, claim.reason
        with pytest.raises(RulesError):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        m = link.meter()
        assert not m.locked and not m.history and m.current == before  # the planted lock went back
        assert anomalies(link, "sequence taken") >= 1  # once per copy of the table's operation that reached it


async def test_an_approval_pays_only_the_lock_the_supervisor_saw(tmp_path, broker):
    """Finding 1 at the authority: a supervisor's approval of a straight flush (10%) at seat 3, made with the lock's
    true number and nonce, cannot pay the royal flush (100%) for seat 5 held under the same claim id: the MAC
    covers the seat, hand, cards, award, percentage, shares and amount of the lock, and the authority checks it
    against the lock it holds."""
    from dataclasses import replace

    from test_approvals import RawTable

    async with authority(tmp_path, broker) as link, RawTable(broker, TABLE_ID) as t:
        assert isinstance(await t.send(ops.BookContributions(f"{TABLE_ID}-r1", TABLE_ID, ((3, 100), (5, 100)),
                                                             AT), ), schema.Ack)
        claim_id = f"{TABLE_ID}-r1-c1:0"
        royal = ops.LockPercentAward(f"{TABLE_ID}-r1", TABLE_ID, 5, "royal flush", "100% of meter",
                                     Fraction(100), AT, claim_id, cards="AH KH QH JH TH")
        held = await t.send(royal)
        assert isinstance(held, schema.Ack)
        straight = ops.LockPercentAward(f"{TABLE_ID}-r1", TABLE_ID, 3, "straight flush", "10% of meter",
                                        Fraction(10), AT, claim_id)
        seen = {**held.result, "amount": "1000.03"}  # what the table would show for 10%
        pay = ops.PayLockedAward(claim_id, "floor-1", AT)
        answer = await t.send(pay, signed(pay, TABLE_ID, locked=seen, lock=straight))
        assert isinstance(answer, schema.Refused) and "does not verify" in answer.message, answer
        other_cards = replace(royal, cards="AS KS QS JS TS")  # all the rest as held: the cards shown differ
        answer = await t.send(pay, signed(pay, TABLE_ID, locked=held.result, lock=other_cards))
        assert isinstance(answer, schema.Refused) and "does not verify" in answer.message, answer
        assert not link.meter().history and claim_id in link.meter().locked
        assert link.meter().locked[claim_id].cards == "AH KH QH JH TH"  # journaled with the lock
        paid = await t.send(pay, signed(pay, TABLE_ID, locked=held.result, lock=royal))  # what it is: paid
        assert isinstance(paid, schema.Ack) and [h.seat for h in link.meter().history] == [5]


async def test_a_forged_refusal_does_not_pay_a_jackpot_twice(tmp_path, broker, monkeypatch):
    """Finding 3. A royal flush approved at the table; the broker holds the authority's answer back and sends the
    table a refusal of the payment ("approval does not verify"), naming the table's payment exactly, unsigned and
    then signed with a key of its own. Before: the claim ended refused, the hand was claimed and approved again and
    the authority paid it twice. Now neither refusal is taken, the claim is paid when the true answer comes, once;
    and the meter pays one award per round, seat and hand whatever the claim id (a second lock of the hand is
    refused)."""
    from test_approvals import RawTable

    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig), \
            Client(broker, OPERATOR, ()) as the_broker:
        await lock_round(daemon, rig, [(3, BONUS), (4, BONUS)])
        await answered(daemon)
        got = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "pending", got
        await link.stop_authority()
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert done["status"] == "paying", done
        payment = next(s for s in daemon.link.outbox.pending.values() if s.kind == "pay-locked-award")
        refusal = {"v": schema.VERSION, "type": "refused", "seq": payment.seq, "field": "approval",
                   "message": "the approval by 'floor-1' does not verify", "op": digest_of(payment)}
        await the_broker.publish(TOPICS.down(TABLE_ID), refusal)
        own_key = signing.Signer(Ed25519PrivateKey.generate())  # the broker's own key: not the authority's
        await the_broker.publish(TOPICS.down(TABLE_ID), own_key.seal(TOPICS.down(TABLE_ID),
                                                                     json.dumps(refusal).encode()))
        await until(lambda: rejected(daemon, "not_signed") == 2, "both refusals not taken")
        assert daemon.desk.state.get(got["claim_id"]).status == "paying"
        with pytest.raises(RulesError):  # the hand is not claimable again while it is being paid
            await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ROYAL})
        await link.start_authority()
        await until(lambda: daemon.desk.state.get(got["claim_id"]).status == "paid", "paid on the true answer")
        await answered(daemon)
        assert [(h.seat, h.award) for h in link.meter().history] == [(3, "100% of meter")]
        async with RawTable(broker, TABLE_ID) as t:  # the table's password, a new claim id for the same hand
            again = await t.send(ops.LockPercentAward(f"{TABLE_ID}-r1", TABLE_ID, 3, link.meter().history[0].hand,
                                                      "100% of meter", Fraction(100), AT, f"{TABLE_ID}-r1-c9:0"))
        assert isinstance(again, schema.Refused) and "is paid once" in again.message, again
        assert len(link.meter().history) == 1 and not link.meter().locked


async def test_forged_answers_strand_no_shared_award_and_no_meter_under_its_reset_is_shown(tmp_path, broker,
                                                                                          monkeypatch):
    """Finding 4. A straight flush on the dealer's hand shared by two seats, approved while the authority is away:
    the broker answers the first share "paid" and the second "refused" (before: the claim stayed `paying` for ever,
    nothing could end it, the authority kept the lock), and publishes a retained meter value of $10.00 (before: the
    table showed it, under the $10,000 reset). None is taken; the claim is paid whole on the true answers; the sign
    never shows less than the reset. A value the authority itself signed under its reset, or one older than shown,
    is not shown either."""
    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig), \
            Client(broker, OPERATOR, ()) as the_broker:
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER)])
        await answered(daemon)
        got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        assert got["status"] == "pending", got
        await link.stop_authority()
        # the authority's last value taken (it publishes at most every meter_interval), its goodbye after it
        await until(lambda: not daemon.link.alive, "the authority gone")
        shown = daemon.link.values[METER]
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert done["status"] == "paying", done
        first = next(s for s in daemon.link.outbox.pending.values() if s.kind == "pay-locked-award")
        await the_broker.publish(TOPICS.down(TABLE_ID), {
            "v": schema.VERSION, "type": "ack", "seq": first.seq, "entry": 77, "op": digest_of(first),
            "result": {"paid": "500.00"}})
        await the_broker.publish(TOPICS.down(TABLE_ID), {
            "v": schema.VERSION, "type": "refused", "seq": first.seq + 1, "field": "approval",
            "message": "does not verify", "op": "ab" * 32})
        await the_broker.publish(TOPICS.meter(METER), {
            "v": schema.VERSION, "type": "meter", "meter": METER, "amount": "10.00", "reset": "10.00",
            "entry": shown.entry + 100, "at": "2099-01-01T00:00:00.000000+00:00", "locked": []}, retain=True)
        await until(lambda: rejected(daemon, "not_signed") == 3, "none taken")
        assert daemon.desk.state.get(got["claim_id"]).status == "paying"
        assert daemon.link.values[METER] == shown
        # signed by the authority's key, as a bug of the authority might publish it: still not shown under the reset
        under = schema.MeterValue(METER, 1_000, shown.entry + 1, "2099-01-01T00:00:00.000000+00:00", 1_000)
        signer = signing.Signer(SIGNING_KEY)
        daemon.link._on_message(TOPICS.meter(METER), signer.seal(TOPICS.meter(METER), schema.encode(under)))
        older = schema.MeterValue(METER, RESET + 5, shown.entry - 1, "2000-01-01T00:00:00.000000+00:00", RESET)
        daemon.link._on_message(TOPICS.meter(METER), signer.seal(TOPICS.meter(METER), schema.encode(older)))
        assert rejected(daemon, "under_reset") == 1 and rejected(daemon, "played_back") == 1
        assert daemon.link.values[METER] == shown
        await link.start_authority()
        await until(lambda: daemon.desk.state.get(got["claim_id"]).status == "paid", "paid whole")
        await answered(daemon)
        assert sorted(h.seat for h in link.meter().history) == [2, 5] and not link.meter().locked
        assert daemon.link.values[METER].cents >= RESET
        assert link.meter().owed_cents == 0


async def test_a_table_of_version_1_is_applied_nothing_and_loses_nothing(tmp_path, broker):
    """The protocol's version 2 signs the authority's answers; a table of version 1 cannot check them. Nothing it
    sends is applied or answered (a refusal would be final, and its bookings lost): its operations wait in its
    outbox, counted at the authority, until the table is upgraded and sends them again as version 2. (The table of
    version 1 drops every message of the authority naming the version, and shows the link OFFLINE.)"""
    booking = ops.BookContributions(f"{TABLE_ID}-r1", TABLE_ID, ((3, 100),), AT).to_dict()
    booking.pop("kind")
    op = {"type": "op", "table": TABLE_ID, "seq": 1, "kind": "book-contributions", "meter": METER, "body": booking}
    async with authority(tmp_path, broker) as link, Client(broker, TABLE_ID, (TOPICS.down(TABLE_ID),)) as old:
        await old.publish(TOPICS.up(TABLE_ID), {"v": 1, **op})
        nonce = os.urandom(16).hex()  # then a hello of version 2: its expect comes after anything said of the op
        await old.publish(TOPICS.up(TABLE_ID), schema.encode(schema.Hello(TABLE_ID, 1, nonce)))
        await until(lambda: any(d["type"] == "expect" for _p, d in old.messages(TOPICS.down(TABLE_ID))), "expect")
        answers = [d for _p, d in old.messages(TOPICS.down(TABLE_ID))]
        assert [d["type"] for d in answers] == ["expect"] and answers[0]["hello"] == nonce, answers
        assert not link.meter().open_rounds and TABLE_ID not in link.authority.next_seq
        assert link.authority.metrics.dropped.labels("old_version")._value.get() == 1
        await old.publish(TOPICS.up(TABLE_ID), {"v": schema.VERSION, **op})  # upgraded: sent again
        await until(lambda: any(d["type"] == "ack" for _p, d in old.messages(TOPICS.down(TABLE_ID))), "applied")
        assert f"{TABLE_ID}-r1" in link.meter().open_rounds


async def test_a_copy_of_a_payment_with_another_approval_does_not_answer_for_the_payment(tmp_path, broker):
    """The broker copies a table's approved payment with a bad MAC and gets it to the authority first, under the same
    number: the authority refuses the copy. The true payment, sent under that number after, is another operation
    (its approval differs): before, it was answered with the copy's refusal ("does not verify"), which the table took
    as its own; now it is refused as a number taken, and the table sends it again under a new number."""
    from test_approvals import RawTable

    async with authority(tmp_path, broker) as link:
        async with RawTable(broker, TABLE_ID) as t:
            await t.send(ops.BookContributions(f"{TABLE_ID}-r1", TABLE_ID, ((3, 100),), AT))
            claim_id = f"{TABLE_ID}-r1-c1:0"
            royal = ops.LockPercentAward(f"{TABLE_ID}-r1", TABLE_ID, 3, "royal flush", "100% of meter",
                                         Fraction(100), AT, claim_id)
            held = await t.send(royal)
            pay = ops.PayLockedAward(claim_id, "floor-1", AT)
            true = signed(pay, TABLE_ID, locked=held.result, lock=royal)
            copy = await t.send(pay, {"by": "floor-1", "mac": "00" * 32})
            assert isinstance(copy, schema.Refused) and copy.field == "approval"
            t.seq -= 1  # the true payment under the same number
            t.inbox.clear()
            answer = await t.send(pay, true)
            assert isinstance(answer, schema.Refused) and answer.field == "seq", answer
            again = await t.send(pay, true)  # under a new number: paid
            assert isinstance(again, schema.Ack), again
        assert [h.seat for h in link.meter().history] == [3]


async def test_a_payment_whose_number_was_taken_is_sent_again_and_paid(tmp_path, broker):
    """With the table's MQTT password, an operation sent under the number the table's payment is about to take: the
    authority refuses the table's payment as a number taken (an alert); the table sends it again under a new number
    and the claim is paid, once (before, the claim ended refused and its lock went back to the meter)."""
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(3, BONUS), (4, BONUS)])
        await answered(daemon)
        got = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "pending", got
        seq = daemon.link.outbox.next_seq
        junk = ops.PayLockedAward(f"{got['claim_id']}:0", "floor-1", AT)
        body = junk.to_dict()
        body.pop("kind")
        async with Client(broker, TABLE_ID, ()) as impostor:
            await impostor.publish(TOPICS.up(TABLE_ID), schema.encode(
                schema.Op(TABLE_ID, seq, junk.kind, METER, body, {"by": "floor-1", "mac": "00" * 32})))
            await until(lambda: link.authority.next_seq.get(TABLE_ID) == seq + 1, "the number taken")
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"], done
        await answered(daemon)
        assert [h.seat for h in link.meter().history] == [3] and not link.meter().locked
        assert anomalies(link, "sequence taken") >= 1


def test_played_back_messages_do_not_keep_the_authority_heard(tmp_path):
    """The broker plays the authority's own signed messages back after it stopped: the last meter value (as a
    retained one is, at each connection), a heartbeat heard before, or one recorded long ago. None of them is taken
    as the authority being there now, so the table's link times out and progressive wagering stops (§ 605a.8)."""
    from datetime import UTC, datetime, timedelta

    from controller.link.client import HEARTBEAT_WINDOW_S, TableLink

    from linkrig import mqtt_config

    now = [datetime(2026, 12, 5, 8, 0, tzinfo=UTC)]
    ticks = [0.0]
    link = TableLink(TABLE_ID, mqtt_config(TABLE_ID), {"fchb": METER}, tmp_path / "link", clock=lambda: ticks[0],
                     settings=MqttSettings(host="127.0.0.1", client_id=TABLE_ID))  # never connects: messages handed in
    link.wall = lambda: now[0]
    signer = signing.Signer(SIGNING_KEY)

    def hear(topic: str, msg: schema.Message) -> float | None:
        link.last_heard = None
        link._on_message(topic, signer.seal(topic, schema.encode(msg)))
        return link.last_heard

    def at(t: datetime) -> str:
        return t.isoformat().replace("+00:00", "Z")

    value = schema.MeterValue(METER, RESET + 15, 40, at(now[0]), RESET)
    assert hear(TOPICS.meter(METER), value) == 0.0  # news: heard
    assert hear(TOPICS.meter(METER), value) is None  # the same again: shown, not news
    beat = schema.Heartbeat("link-1", at(now[0]), 40)
    assert hear(TOPICS.heartbeat, beat) == 0.0
    assert hear(TOPICS.heartbeat, beat) is None  # heard before
    now[0] += timedelta(seconds=HEARTBEAT_WINDOW_S + 1)
    recorded = schema.Heartbeat("link-1", at(now[0] - timedelta(seconds=HEARTBEAT_WINDOW_S + 0.5)), 41)
    assert hear(TOPICS.heartbeat, recorded) is None  # not of now
    assert hear(TOPICS.heartbeat, schema.Heartbeat("link-1", at(now[0]), 41)) == 0.0  # a true one
    assert link.rejected["played_back"] == 2

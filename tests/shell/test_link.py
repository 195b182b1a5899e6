"""Linked progressives through a real Mosquitto (TLS, the shipped ACL): a link authority and table links in
the test process. Exactly once through duplicates, reordering, restarts of either side and of the broker;
link loss seen by every table; messages the authority must not apply are dropped and counted."""

from __future__ import annotations

import asyncio
import functools
from fractions import Fraction
from pathlib import Path

import pytest

from controller.link.mqtt import MqttLink
from controller.linkproto import schema
from controller.meter import ops
from controller.money import UNITS_PER_CENT, format_units, parse_cents

from broker import running_broker
from linkrig import AT, METER, PREFIX, RATE, RESET, LinkRig, approval_keys, signed
from rigtable import until

TABLES = ("cs-01", "fcp-02", "lir-03")
TOPICS = schema.Topics(PREFIX)


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (*TABLES, "authority", "rogue")) as b:
        yield b


def booking(table: str, n: int, wagers=((1, 100), (2, 500))):
    return ops.BookContributions(f"{table}-r{n}", table, wagers, AT)


def units(cents: int) -> int:
    return cents * UNITS_PER_CENT


def expected_contributions(wagers_cents: list[int]) -> int:
    """Meter units credited for these wagers, exactly (the rate's fraction of each wager)."""
    total = sum(Fraction(units(c)) * RATE for c in wagers_cents)
    assert total.denominator == 1
    return int(total)


async def play(link, table: str, rounds: range, meter: str = "fchb") -> list[int]:
    """Book and close `rounds` at `table`; the cents wagered."""
    wagered = []
    for n in rounds:
        op = booking(table, n)
        await link.send(op, meter, f"{op.round_id}:book:{meter}")
        await link.send(ops.CloseRound(op.round_id, AT), meter, f"{op.round_id}:close:{meter}")
        wagered += [c for _s, c in op.wagers]
    return wagered


async def test_three_tables_one_meter_exactly_once(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES)
    try:
        await rig.start_authority()
        links = [await rig.start_table(t) for t in TABLES]
        await until(lambda: all(link.alive for link in links), "every table hears the authority")
        wagered = sum(await asyncio.gather(*(play(link, t, range(1, 6)) for link, t in zip(links, TABLES, strict=True))), [])
        await rig.all_answered()
        m = rig.meter()
        assert m.contributions == expected_contributions(wagered)
        assert m.current == units(RESET) + m.contributions
        assert not m.open_rounds
        # Every table shows the authority's amount (the retained meter value).
        await until(lambda: all(link.values.get(METER) and link.values[METER].cents == m.current_cents
                                for link in links), "every table shows the meter")
        assert [link.outbox.acked for link in links] == [10, 10, 10]
        assert rig.authority.next_seq == {t: 11 for t in TABLES}
    finally:
        await rig.close()


async def test_mqtt_311_tables_exactly_once(tmp_path, broker, monkeypatch):
    # Every client of the rig connects with MQTT 3.1.1 (clean_session false, no reason codes).
    monkeypatch.setattr(broker, "settings", functools.partial(broker.settings, protocol="3.1.1"))
    tables = TABLES[:2]
    rig = LinkRig(tmp_path, broker, tables)
    try:
        a = await rig.start_authority()
        links = [await rig.start_table(t) for t in tables]
        await until(lambda: all(link.alive for link in links), "every table hears the authority")
        assert {a.mqtt.settings.protocol, *(link.mqtt.settings.protocol for link in links)} == {"3.1.1"}
        wagered = sum(await asyncio.gather(*(play(link, t, range(1, 4)) for link, t in zip(links, tables, strict=True))), [])
        await rig.all_answered()
        m = rig.meter()
        assert m.contributions == expected_contributions(wagered)
        assert not m.open_rounds
        assert [link.outbox.acked for link in links] == [6, 6]
        assert a.next_seq == {t: 7 for t in tables}
        for client in ("authority", *tables):  # Mosquitto logs the protocol of each connection: p2 is 3.1.1
            assert f" as {client} (p2, " in broker.log()
    finally:
        await rig.close()


async def raw_table(broker, table: str, inbox: list) -> tuple[MqttLink, asyncio.Task]:
    mq = MqttLink(broker.settings(table), TOPICS.table_subscriptions(table))
    task = asyncio.create_task(mq.run(lambda topic, payload: inbox.append(schema.decode(topic, payload))))
    await mq.wait_connected(10)
    return mq, task


def op_message(table: str, seq: int, op) -> bytes:
    body = op.to_dict()
    body.pop("kind")
    return schema.encode(schema.Op(table, seq, op.kind, METER, body))


async def test_duplicated_and_reordered_operations_apply_once(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES)
    inbox: list = []
    try:
        a = await rig.start_authority()
        mq, task = await raw_table(broker, "cs-01", inbox)
        first, second = booking("cs-01", 1), booking("cs-01", 2, ((3, 500),))
        await mq.publish(TOPICS.up("cs-01"), op_message("cs-01", 2, second))  # ahead of the next expected
        await until(lambda: schema.Expect(1, schema.ANNOUNCED, None, frozenset(approval_keys())) in inbox, "the authority says what it expects")
        for _ in range(3):  # delivered three times
            await mq.publish(TOPICS.up("cs-01"), op_message("cs-01", 1, first))
        await mq.publish(TOPICS.up("cs-01"), op_message("cs-01", 2, second))
        await mq.publish(TOPICS.up("cs-01"), op_message("cs-01", 2, second))
        await until(lambda: sum(isinstance(m, schema.Ack) and m.seq == 2 for m in inbox) == 2, "both answered")
        acks = [m for m in inbox if isinstance(m, schema.Ack)]
        assert [m.seq for m in acks] == [1, 1, 1, 2, 2]
        assert len({(m.seq, m.entry) for m in acks}) == 2  # a repeat is answered with the first outcome
        assert rig.meter().contributions == expected_contributions([100, 500, 500])
        samples = {s.labels["outcome"]: s.value for mf in a.metrics.registry.collect()
                   if mf.name == "progressive_link_operations" for s in mf.samples
                   if s.name.endswith("_total") and s.labels["table"] == "cs-01"}
        assert samples == {"applied": 2.0, "repeat": 3.0}
        assert dropped(a, "ahead") == 1
        task.cancel()
    finally:
        await rig.close()


def dropped(a, reason: str) -> float:
    return a.metrics.registry.get_sample_value("progressive_link_messages_dropped_total", {"reason": reason})


async def test_messages_the_authority_must_not_apply(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES)
    inbox: list = []
    try:
        a = await rig.start_authority()
        rogue, t1 = await raw_table(broker, "rogue", [])
        await rogue.publish(TOPICS.up("rogue"), op_message("rogue", 1, booking("rogue", 1)))
        await until(lambda: dropped(a, "unknown_table") == 1, "a table not in the configuration is dropped")
        mq, t2 = await raw_table(broker, "cs-01", inbox)
        await mq.publish(TOPICS.up("cs-01"), b'{"v": 2, "type": "op", "table": "cs-01"}')
        await until(lambda: dropped(a, "bad_schema") == 1, "a bad payload is dropped")
        await mq.publish(TOPICS.up("cs-01"), op_message("fcp-02", 1, booking("fcp-02", 1)))
        await until(lambda: dropped(a, "wrong_table") == 1, "a payload naming another table is dropped")
        # Well formed, from the right table, but a round of another table: refused, journaled, final.
        await mq.publish(TOPICS.up("cs-01"), op_message("cs-01", 1, ops.CloseRound("fcp-02-r1", AT)))
        await until(lambda: any(isinstance(m, schema.Refused) for m in inbox), "refused")
        refused = next(m for m in inbox if isinstance(m, schema.Refused))
        assert refused.seq == 1 and refused.field == "body.round_id"
        assert a.next_seq["cs-01"] == 2
        assert rig.meter().contributions == 0
        for t in (t1, t2):
            t.cancel()
    finally:
        await rig.close()


async def test_restarts_of_authority_table_and_broker_change_nothing(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES[:2], link_timeout=1.0)
    try:
        await rig.start_authority()
        l1, l2 = await rig.start_table("cs-01"), await rig.start_table("fcp-02")
        await until(lambda: l1.alive and l2.alive, "tables hear the authority")
        wagered = await play(l1, "cs-01", range(1, 4))
        # The authority stops: the tables stop recognizing progressive wagers; what they book waits.
        await rig.stop_authority()
        await until(lambda: not l1.alive and not l2.alive, "link loss seen by both tables", 5)
        wagered += await play(l1, "cs-01", range(4, 6)) + await play(l2, "fcp-02", range(1, 3))
        assert l1.outbox.pending and l2.outbox.pending
        await rig.start_authority()
        await rig.all_answered()
        await until(lambda: l1.alive and l2.alive, "link back by itself")
        # A table restarts (its journal is the outbox): nothing sent twice takes effect twice.
        await rig.stop_table("fcp-02")
        l2 = await rig.start_table("fcp-02")
        wagered += await play(l2, "fcp-02", range(3, 5))
        # The broker restarts while operations are in flight.
        sends = asyncio.create_task(play(l1, "cs-01", range(6, 10)))
        broker.stop()
        await until(lambda: not l1.alive, "broker loss seen", 5)
        broker.start()
        wagered += await sends
        await rig.all_answered(30)
        m = rig.meter()
        assert m.contributions == expected_contributions(wagered)
        assert m.current == units(RESET) + m.contributions and not m.open_rounds
        assert rig.authority.next_seq == {"cs-01": l1.outbox.next_seq, "fcp-02": l2.outbox.next_seq}
        assert rig.alive_changes["cs-01"][:3] == [True, False, True]
    finally:
        await rig.close()


def lock(table: str, n: int, claim: str, seat: int = 1):
    return ops.LockPercentAward(f"{table}-r{n}", table, seat, "royal-flush", "100% of meter", Fraction(100), AT, claim)


async def test_two_tables_hit_the_top_award_in_the_same_second(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES[:2])
    try:
        await rig.start_authority()
        l1, l2 = await rig.start_table("cs-01"), await rig.start_table("fcp-02")
        await until(lambda: l1.alive and l2.alive, "tables hear the authority")
        for link, t in ((l1, "cs-01"), (l2, "fcp-02")):
            await link.send(booking(t, 1), "fchb", f"{t}-r1:book:fchb")
        await rig.all_answered()
        before = rig.meter().current
        s1, s2 = await asyncio.gather(l1.send(lock("cs-01", 1, "cs-01-r1-c1:0"), "fchb", "cs-01-r1-c1:lock:0"),
                                      l2.send(lock("fcp-02", 1, "fcp-02-r1-c1:0", 2), "fchb", "fcp-02-r1-c1:lock:0"))
        r1, r2 = await asyncio.gather(l1.answer(s1, 10), l2.answer(s2, 10))
        first, second = sorted((r1, r2), key=lambda r: r["meter_before"] != format_units(before))
        assert parse_cents(first["amount"], "amount") == before // UNITS_PER_CENT
        assert parse_cents(second["amount"], "amount") == RESET  # the second is paid from the reset meter
        assert len(rig.meter().locked) == 2
        # Both approved: both paid, in the order the authority recorded the locks.
        pay1, pay2 = ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT), ops.PayLockedAward("fcp-02-r1-c1:0", "floor-2", AT)
        assert sorted((r1["lock"], r2["lock"])) == [1, 2]  # each lock's number on the meter, never given twice
        await l1.send(pay1, "fchb", "cs-01-r1-c1:pay:0",
                      signed(pay1, "cs-01", locked=r1, lock=lock("cs-01", 1, "cs-01-r1-c1:0")))
        await l2.send(pay2, "fchb", "fcp-02-r1-c1:pay:0",
                      signed(pay2, "fcp-02", locked=r2, lock=lock("fcp-02", 1, "fcp-02-r1-c1:0", 2)))
        await rig.all_answered()
        m = rig.meter()
        assert not m.locked and len(m.history) == 2
        assert sorted(h.amount_cents for h in m.history) == sorted([before // UNITS_PER_CENT, RESET])
        assert m.current == units(RESET)
    finally:
        await rig.close()


async def test_a_rejected_hit_restores_the_amount_while_others_play(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES[:2])
    try:
        await rig.start_authority()
        l1, l2 = await rig.start_table("cs-01"), await rig.start_table("fcp-02")
        await until(lambda: l1.alive and l2.alive, "tables hear the authority")
        await l1.send(booking("cs-01", 1), "fchb", "cs-01-r1:book:fchb")
        await rig.all_answered()
        before = rig.meter().current
        seq = await l1.send(lock("cs-01", 1, "cs-01-r1-c1:0"), "fchb", "cs-01-r1-c1:lock:0")
        await l1.answer(seq, 10)
        assert rig.meter().current == units(RESET)  # locked: the meter reset at once
        wagered = await play(l2, "fcp-02", range(1, 3))  # the other table keeps playing
        await l1.send(ops.ReleaseLockedAward("cs-01-r1-c1:0", "floor-1", "not a royal", AT), "fchb",
                      "cs-01-r1-c1:release:0")
        await rig.all_answered()
        m = rig.meter()
        assert m.current == before + expected_contributions(wagered)
        assert not m.locked and not m.history
    finally:
        await rig.close()


async def test_a_shared_award_is_locked_once_and_its_later_shares_paid_by_pay_percent_award(tmp_path, broker):
    """A percentage award on the dealer's hand shared by two players (§ 639a.12(e)(2)) on a linked meter: the first
    share is locked (the whole award leaves the meter at once) and paid from the lock; the second is paid with
    pay-percent-award, which the authority takes only as a later share: on its own it would take a percentage of
    the meter without a lock, and is refused."""
    rig = LinkRig(tmp_path, broker, TABLES[:1])
    try:
        await rig.start_authority()
        link = await rig.start_table("cs-01")
        await until(lambda: link.alive, "the table hears the authority")
        await link.send(booking("cs-01", 1, wagers=((2, 100), (5, 100))), "fchb", "cs-01-r1:book:fchb")
        await rig.all_answered()
        before = rig.meter().current

        def share(seat: int) -> ops.PayPercentAward:
            return ops.PayPercentAward("cs-01-r1", "cs-01", seat, "royal-flush (dealer's hand)", "100% of meter",
                                       Fraction(100), AT, "floor-1", shares=2)

        early = await link.send(share(2), "fchb", "cs-01-r1:early", signed(share(2), "cs-01"))  # no share paid yet: refused, nothing taken
        with pytest.raises(Exception, match="pays only a later share"):
            await link.answer(early, 10)
        assert rig.meter().current == before
        taken = ops.LockPercentAward("cs-01-r1", "cs-01", 5, "royal-flush (dealer's hand)", "100% of meter",
                                     Fraction(100), AT, "cs-01-r1-c1:0", shares=2)
        seq = await link.send(taken, "fchb", "cs-01-r1-c1:lock:0")
        locked = await link.answer(seq, 10)
        per_share = parse_cents(locked["amount"], "amount")
        assert per_share == before // UNITS_PER_CENT // 2
        pay = ops.PayLockedAward("cs-01-r1-c1:0", "floor-1", AT)
        await link.send(pay, "fchb", "cs-01-r1:dealer:pay:0", signed(pay, "cs-01", locked=locked, lock=taken))
        await link.send(share(2), "fchb", "cs-01-r1:dealer:pay:1", signed(share(2), "cs-01"))
        await link.send(ops.CloseRound("cs-01-r1", AT), "fchb", "cs-01-r1:close:fchb")
        await rig.all_answered()
        m = rig.meter()
        assert sorted((h.seat, h.amount_cents, h.shares) for h in m.history) == [(2, per_share, 2), (5, per_share, 2)]
        assert not m.open_rounds and not m.locked and m.owed_cents == 0
        assert m.current == units(RESET)
    finally:
        await rig.close()


def test_a_shared_win_is_shown_at_every_table_as_its_own_table_shows_it():
    from controller.authority.rules import win as _win

    op = schema.Op("cs-01", 9, "pay-locked-award", METER, {"claim": "cs-01-r1-c1:0", "approved_by": "floor-1",
                                                            "at": "2026-11-30T01:02:03+00:00"})
    shared = _win(op, 12, {"amount": "500.02"}, seat=5, shares=2)
    assert (shared.seat, shared.cents, shared.state) == (0, 100_004, "paid")  # the dealer's position, the whole award
    own = _win(op, 12, {"amount": "500.02"}, seat=5, shares=1)
    assert (own.seat, own.cents) == (5, 50_002)

"""What the authority says on the link (controller/authority/publisher.py), on a real journal of the authority's and
a broker session that records what it is given: every message sealed for its topic (a table's verifier takes it),
the answers to a table on its own topic, the meters' values coalesced to one a meter a pass with the wins before
them and at most one a meter an interval under a burst, nothing queued while the broker is gone."""

from __future__ import annotations

import asyncio
import time

from controller.authority.publisher import Publisher
from controller.link.mqtt import LinkDown
from controller.linkproto import schema, signing

from authority_journal import apply, booking, journal, op, parts, sample
from linkrig import AUTHORITY_KEY, METER, PREFIX, SIGNING_KEY

TOPICS = schema.Topics(PREFIX)
VERIFIER = signing.Verifier([AUTHORITY_KEY])


class Session:
    """The broker's session as the publisher uses it: what was published, or LinkDown while `down`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, schema.Message, int, bool]] = []
        self.down = False
        self.connected = True

    async def publish(self, topic: str, payload: bytes, *, qos: int, retain: bool, timeout: float) -> None:
        if self.down:
            raise LinkDown("no connection")
        assert VERIFIER.check(topic, payload) is None, "not sealed for its topic"
        self.sent.append((topic, schema.decode(topic, payload), qos, retain))


def publisher(led, tg: asyncio.TaskGroup, **kwargs: float) -> tuple[Publisher, Session, object]:
    metrics, _ = parts()
    p = Publisher("link-1", led, signing.Signer(SIGNING_KEY), TOPICS, metrics, tg, heartbeat=0.01, **kwargs)
    p.mqtt = session = Session()
    return p, session, metrics


async def test_an_answer_goes_to_its_table_alone_signed_for_its_topic(tmp_path):
    with journal(tmp_path) as led:
        async with asyncio.TaskGroup() as tg:
            p, session, _ = publisher(led, tg)
            await p.reply("cs-01", schema.Expect(3))
        assert [(t, m) for t, m, _q, _r in session.sent] == [(TOPICS.down("cs-01"), schema.Expect(3))]


async def test_a_pass_publishes_the_wins_then_each_changed_meter_once(tmp_path):
    with journal(tmp_path) as led:
        await apply(led, op("cs-01", 1, booking("cs-01", 1)))
        async with asyncio.TaskGroup() as tg:
            p, session, metrics = publisher(led, tg)
            win = schema.Win(METER, "cs-01", 2, 1_000_000, "cs-01-r1-c1:0", "locked", 7)
            p.changed((METER,))
            p.changed((METER, "gone-meter"), win)  # a meter the journal does not hold is not published
            await p.publish_changes()
        [(win_topic, won, _, retained_win), (meter_topic, value, _, retained)] = session.sent
        assert (win_topic, won, retained_win) == (TOPICS.win(METER), win, False)
        s = led.state[METER]
        assert meter_topic == TOPICS.meter(METER) and retained
        assert (value.cents, value.entry, value.reset_cents) == (s.current_cents, led.head.seq, s.params.reset_cents)
        assert sample(metrics, "progressive_meter_amount_cents", meter=METER) == s.current_cents
        session.sent.clear()
        await p.publish_changes()
        assert session.sent == []  # nothing changed since


async def test_under_a_burst_a_meter_s_values_are_one_an_interval_at_most_the_last_one_sent(tmp_path):
    interval = 0.1  # twice the default: the default's pace would fail the spacing below
    with journal(tmp_path) as led:
        async with asyncio.TaskGroup() as tg:
            p, session, _ = publisher(led, tg, meter_interval=interval)
            values: list[tuple[float, schema.MeterValue]] = []
            done, caught_up = asyncio.Event(), asyncio.Event()
            publish = session.publish

            async def timed(topic: str, payload: bytes, **kwargs) -> None:
                await publish(topic, payload, **kwargs)
                value = session.sent[-1][1]
                assert isinstance(value, schema.MeterValue)
                values.append((time.monotonic(), value))
                if done.is_set() and value.entry == led.head.seq:
                    caught_up.set()

            session.publish = timed

            async def book() -> None:  # a booking every 10 ms or so, each one a change of the meter
                for n in range(1, 31):
                    await apply(led, op("cs-01", n, booking("cs-01", n)))
                    p.changed((METER,))
                    await asyncio.sleep(0.01)

            meters = tg.create_task(p.run_meters())
            t0 = time.monotonic()
            await book()
            span = time.monotonic() - t0
            done.set()
            if values and values[-1][1].entry == led.head.seq:
                caught_up.set()
            async with asyncio.timeout(5):
                await caught_up.wait()  # the last change goes out, in the next pass
            meters.cancel()
        times = [at for at, _v in values]
        assert 3 <= len(values) <= span / interval + 2, (len(values), span)
        assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= interval * 0.95
        assert values[-1][1].cents == led.state[METER].current_cents


async def test_nothing_is_queued_while_the_broker_is_gone(tmp_path):
    with journal(tmp_path) as led:
        async with asyncio.TaskGroup() as tg:
            p, session, metrics = publisher(led, tg)
            metrics.connected.set(1)
            session.down = True
            assert not await p.publish(TOPICS.heartbeat, schema.Expect(1))
            assert sample(metrics, "progressive_link_broker_connected") == 0
            session.down = False
            p.mqtt = None  # not started: nothing to publish with
            assert not await p.publish(TOPICS.heartbeat, schema.Expect(1))
        assert session.sent == []


async def test_at_a_connection_the_authority_is_online_and_every_meter_published_again(tmp_path):
    with journal(tmp_path) as led:
        async with asyncio.TaskGroup() as tg:
            p, session, metrics = publisher(led, tg)
            meters = tg.create_task(p.run_meters())
            await p.connected()
            while len(session.sent) < 2:
                await asyncio.sleep(0)  # the meters' pass: a task of its own, woken by the connection
            meters.cancel()
        (status, online, _, retained), (meter_topic, _value, _, _) = session.sent
        assert (status, online, retained) == (TOPICS.status, schema.Status("link-1", "online"), True)
        assert meter_topic == TOPICS.meter(METER)
        assert sample(metrics, "progressive_link_broker_connected") == 1


async def test_the_heartbeat_names_the_journals_head_and_every_meter(tmp_path):
    with journal(tmp_path) as led:
        async with asyncio.TaskGroup() as tg:
            p, session, _ = publisher(led, tg)
            beat = tg.create_task(p.run_heartbeat())
            while len(session.sent) < 2:
                await asyncio.sleep(0.01)  # the heartbeat's own interval
            beat.cancel()
        (topic, hb, qos, _), _second = session.sent[:2]
        assert topic == TOPICS.heartbeat and qos == 0
        assert (hb.authority, hb.entry, hb.meters) == ("link-1", led.head.seq, {METER: led.state[METER].current_cents})

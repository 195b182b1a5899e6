"""The MQTT transport of the link against a real Mosquitto configured from config/mosquitto/ (tests/support/broker.py):
TLS and a password per client, the shipped per-table ACL, persistence, restarts, a hung broker, the will."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from pathlib import Path

import pytest
import structlog

from controller.config.model import MqttConfig
from controller.link.mqtt import LinkDown, MqttLink, MqttSettings, MqttSettingsError, PublishRefused

from broker import ROOT, Broker, start_broker

P = "progressive/v1"
TABLES = ("CS-07", "CS-08")
USERS = (*TABLES, "authority")
WAIT = 10.0  # the longest any single wait below may take before the test fails


def up(table: str) -> str:
    return f"{P}/tables/{table}/up"


def down(table: str) -> str:
    return f"{P}/tables/{table}/down"


def table_subscriptions(table: str) -> list[str]:
    return [down(table), f"{P}/meters/#", f"{P}/authority/#"]


@pytest.fixture
def broker(tmp_path: Path):
    b = start_broker(tmp_path / "mosquitto", USERS)
    try:
        yield b
    finally:
        b.stop()


class Inbox:
    """An on_message that keeps what arrives, and waits for it."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bytes]] = []
        self._changed = asyncio.Event()

    def __call__(self, topic: str, payload: bytes) -> None:
        self.items.append((topic, payload))
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, condition: Callable[[list[tuple[str, bytes]]], bool], timeout: float = WAIT) -> None:
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                if condition(self.items):
                    return
                await changed.wait()

    async def has(self, item: tuple[str, bytes], timeout: float = WAIT) -> None:
        await self.until(lambda items: item in items, timeout)


@contextlib.asynccontextmanager
async def running(link: MqttLink, on_message: Callable[[str, bytes], None], on_connect=None, *,
                  connected: bool = True) -> AsyncIterator[asyncio.Task]:
    task = asyncio.create_task(link.run(on_message, on_connect), name=f"test-{link.name}")
    try:
        if connected:
            await link.wait_connected(WAIT)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def authority(broker: Broker, **changes) -> MqttLink:
    return MqttLink(broker.settings("authority", **changes), [f"{P}/tables/+/up"])


def watcher(broker: Broker) -> MqttLink:
    """The authority's credentials under another client id, reading the whole tree."""
    return MqttLink(broker.settings("authority", client_id="authority-watch", session_expiry=0), [f"{P}/#"])


def table(broker: Broker, name: str = "CS-07", **changes) -> MqttLink:
    return MqttLink(broker.settings(name, **changes), table_subscriptions(name))


# --- connecting ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_tls_and_a_password_per_table_carry_messages_both_ways(broker, protocol):
    a_in, t_in = Inbox(), Inbox()
    a, t = authority(broker, protocol=protocol), table(broker, protocol=protocol)
    async with running(a, a_in), running(t, t_in):
        payload = bytes(range(256))  # bytes in, the same bytes out
        await t.publish(up("CS-07"), payload)
        await a_in.has((up("CS-07"), payload))
        await a.publish(down("CS-07"), b"ack 1")
        await a.publish(f"{P}/authority/heartbeat", b"beat", qos=0)
        await t_in.has((down("CS-07"), b"ack 1"))
        await t_in.has((f"{P}/authority/heartbeat", b"beat"))
        assert (t.connects, t.reconnects, t.failures, t.dropped) == (1, 0, 0, 0)
    assert not t.connected and not a.connected


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_wrong_password_is_refused_and_logged_once(broker, protocol):
    link = table(broker, password="not-the-password", protocol=protocol)
    with structlog.testing.capture_logs() as logs:
        async with running(link, Inbox(), connected=False):
            await link.wait_until(lambda: link.failures >= 3, WAIT)
            assert not link.connected
            with pytest.raises(LinkDown, match="not connected"):
                await link.publish(up("CS-07"), b"x")
    # Mosquitto 2.0.11 answers a wrong password with "not authorized" (MQTT 5: 0x87; 3.1.1: 5, which
    # paho-mqtt reports as 0x87 too), not with "bad user name or password"
    assert "refused the connection of CS-07 (CS-07): [code:135] Not authorized" in (link.last_error or ""), \
        link.last_error
    loud = [e for e in logs if e["event"] == "mqtt link down" and e["log_level"] == "error"]
    assert len(loud) == 1, logs  # the first failure loudly, the repeats quietly
    assert loud[0]["broker"] == f"127.0.0.1:{broker.port}"


async def test_a_user_not_in_the_password_file_is_refused(broker):
    link = MqttLink(broker.settings("CS-07", username="CS-99"), [])
    async with running(link, Inbox(), connected=False):
        await link.wait_until(lambda: link.failures >= 1, WAIT)
    assert "refused the connection of CS-99" in (link.last_error or ""), link.last_error
    assert link.connects == 0


async def test_a_plain_connection_to_the_tls_port_fails(broker):
    link = table(broker, tls=False, ca_file=None, connect_timeout=1.0)
    async with running(link, Inbox(), connected=False):
        await link.wait_until(lambda: link.failures >= 1, WAIT)
        assert link.connects == 0 and not link.connected
    assert "closed the connection before its CONNACK (tls is false: is it a TLS port?)" in (link.last_error or ""), \
        link.last_error


async def test_a_server_certificate_from_an_unknown_ca_is_refused(broker):
    link = table(broker, ca_file=None)  # the system's CAs never signed the test CA
    async with running(link, Inbox(), connected=False):
        await link.wait_until(lambda: link.failures >= 1, WAIT)
    assert "CERTIFICATE_VERIFY_FAILED" in (link.last_error or ""), link.last_error
    assert link.connects == 0


# --- the ACL -------------------------------------------------------------------------------------------

FORGED = [up("CS-08"), down("CS-08"), down("CS-07"), f"{P}/meters/m1", f"{P}/meters/m1/win",
          f"{P}/authority/status", f"{P}/authority/heartbeat", "progressive/v2/tables/CS-07/up", "elsewhere"]


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_table_publishes_only_on_its_own_up_topic(broker, protocol):
    w_in = Inbox()
    w, t = watcher(broker), table(broker, protocol=protocol)
    async with running(w, w_in), running(t, Inbox()):
        for topic in FORGED:
            if protocol == "5":
                # MQTT 5: the broker's PUBACK says so (reason code 0x87)
                with pytest.raises(PublishRefused) as refused:
                    await t.publish(topic, b"forged")
                assert refused.value.reason == "Not authorized" and refused.value.topic == topic
            else:
                await t.publish(topic, b"forged")  # MQTT 3.1.1: acknowledged, and dropped by the broker
        await t.publish(up("CS-07"), b"marker")
        await w_in.has((up("CS-07"), b"marker"))
    # the forged messages were sent before the marker, on the same connection: they would have come first
    assert w_in.items == [(up("CS-07"), b"marker")]
    assert t.refused == (len(FORGED) if protocol == "5" else 0)
    assert t.connects == 1  # a refusal does not cost the connection


async def test_a_table_hears_only_its_own_down_topic(broker):
    seven, eight = Inbox(), Inbox()
    a = authority(broker)
    t7 = table(broker, "CS-07")
    # CS-08 asks for CS-07's messages too: Mosquitto 2.0 grants the subscriptions and delivers nothing
    t8 = MqttLink(broker.settings("CS-08"), [down("CS-07"), f"{P}/tables/+/down", f"{P}/tables/#", down("CS-08")])
    async with running(a, Inbox()), running(t7, seven), running(t8, eight):
        await a.publish(down("CS-07"), b"for CS-07 only")
        await a.publish(up("CS-07"), b"echo")  # the authority could write here; only it reads it
        await a.publish(down("CS-08"), b"marker")
        await seven.has((down("CS-07"), b"for CS-07 only"))
        await eight.has((down("CS-08"), b"marker"))
    # Mosquitto may deliver the marker once per matching subscription (three overlap here): what matters is that
    # nothing but the marker came (CS-07's messages, published before it, would have come first)
    assert set(eight.items) == {(down("CS-08"), b"marker")}, eight.items
    assert seven.items == [(down("CS-07"), b"for CS-07 only")]


async def test_a_retained_meter_reaches_a_table_that_connects_later(broker):
    a = authority(broker)
    async with running(a, Inbox()):
        await a.publish(f"{P}/meters/m1", b"10000.00", retain=True)
        await a.publish(f"{P}/meters/m1", b"10012.50", retain=True)
        await a.publish(f"{P}/meters/m1/win", b"a win, not retained")
        t_in = Inbox()
        t = table(broker)
        async with running(t, t_in):
            await t_in.has((f"{P}/meters/m1", b"10012.50"))
            await a.publish(f"{P}/authority/heartbeat", b"beat", qos=0)
            await t_in.has((f"{P}/authority/heartbeat", b"beat"))
    assert t_in.items == [(f"{P}/meters/m1", b"10012.50"), (f"{P}/authority/heartbeat", b"beat")]


# --- losing the broker ------------------------------------------------------------------------------


async def test_a_broker_restart_is_survived_and_on_connect_runs_again(broker):
    a_in, t_in = Inbox(), Inbox()
    hello = 0

    async def resend_outbox() -> None:  # what a table does on connect: send what is not acknowledged yet
        nonlocal hello
        hello += 1
        await t.publish(up("CS-07"), f"hello {hello}".encode())

    a_connects = []
    a, t = authority(broker), table(broker)
    with structlog.testing.capture_logs() as logs:
        async with running(a, a_in, lambda: a_connects.append(1)), running(t, t_in, resend_outbox):
            await a_in.has((up("CS-07"), b"hello 1"))
            broker.stop()
            await t.wait_disconnected(WAIT)
            await a.wait_disconnected(WAIT)
            with pytest.raises(LinkDown, match="not connected"):
                await t.publish(up("CS-07"), b"while the broker is down")
            await t.wait_until(lambda: t.failures >= 2, WAIT)  # it keeps trying
            broker.start()
            await t.wait_connected(WAIT)
            await a.wait_connected(WAIT)
            # whichever reconnected first: the authority's session (kept across the restart) has the message
            await a_in.has((up("CS-07"), b"hello 2"))
            await t.publish(up("CS-07"), b"after")
            await a_in.has((up("CS-07"), b"after"))
    assert (t.connects, t.reconnects, hello, len(a_connects), a.reconnects) == (2, 1, 2, 2, 1)
    down_logs = [e for e in logs if e["event"] == "mqtt link down" and e.get("link") == "CS-07"]
    assert [e["log_level"] for e in down_logs][:1] == ["error"]
    assert all(e["log_level"] == "debug" for e in down_logs[1:])
    assert any(e["event"] == "mqtt link recovered" and e["link"] == "CS-07" for e in logs)


async def test_a_message_for_an_absent_table_survives_a_broker_restart(broker):
    t_in = Inbox()
    t = table(broker)
    async with running(t, t_in):
        pass  # the table's session now exists on the broker, with its subscriptions
    a = authority(broker)
    async with running(a, Inbox()):
        await a.publish(down("CS-07"), b"while you were away")
    broker.stop()  # saves its persistence
    broker.start()
    t2 = table(broker)
    async with running(t2, t_in):
        await t_in.has((down("CS-07"), b"while you were away"))


async def test_a_hung_broker_is_noticed_by_the_keepalive(broker):
    keepalive = 2
    t = table(broker, keepalive=keepalive, connect_timeout=1.0, timeout=1.0)
    async with running(t, Inbox()):
        broker.pause()
        started = time.monotonic()
        with pytest.raises(LinkDown, match="no acknowledgement within 0.5 s"):
            await t.publish(up("CS-07"), b"into the void", timeout=0.5)
        # paho-mqtt: PINGREQ after `keepalive` s of silence, the connection dropped after `keepalive` more
        bound = 2 * keepalive + 2 + 1.0
        await t.wait_disconnected(bound)
        took = time.monotonic() - started
        assert keepalive <= took <= bound, took
        with pytest.raises(LinkDown, match="not connected"):
            await t.publish(up("CS-07"), b"x")
        broker.resume()
        await t.wait_connected(WAIT)
    assert t.reconnects == 1


# --- the application's callbacks -----------------------------------------------------------------------


async def test_an_exception_in_on_message_drops_that_message_only(broker):
    got: list[bytes] = []
    arrived = asyncio.Event()

    def on_message(topic: str, payload: bytes) -> None:
        if payload.startswith(b"bad"):
            raise ValueError("cannot parse")
        got.append(payload)
        if payload == b"good":
            arrived.set()

    a, t = authority(broker), table(broker)
    with structlog.testing.capture_logs() as logs:
        async with running(a, Inbox()), running(t, on_message):
            for p in (b"bad 1", b"bad 2", b"good"):
                await a.publish(down("CS-07"), p)
            async with asyncio.timeout(WAIT):
                await arrived.wait()
            assert t.connected and t.dropped == 2 and got == [b"good"]
    dropped = [e for e in logs if e["event"] == "mqtt message dropped"]
    assert [e["log_level"] for e in dropped][:1] == ["error"]
    assert all(e["log_level"] == "debug" for e in dropped[1:])


async def test_on_message_must_be_a_plain_function():
    async def on_message(topic: str, payload: bytes) -> None:
        pass

    link = MqttLink(MqttSettings(host="127.0.0.1", client_id="CS-07"), [])
    with pytest.raises(TypeError, match="plain function"):
        await link.run(on_message)


async def test_publish_without_a_connection_raises_link_down_at_once():
    link = MqttLink(MqttSettings(host="127.0.0.1", client_id="CS-07"), [])
    with pytest.raises(LinkDown, match="not connected to the MQTT broker 127.0.0.1:8883"):
        await link.publish(up("CS-07"), b"x")


# --- stopping ----------------------------------------------------------------------------------------


async def test_cancelling_run_disconnects_and_leaves_no_task(broker):
    t = table(broker)
    async with running(t, Inbox()) as task:
        pass
    assert task.cancelled() and not t.connected
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_run_while_connecting_to_a_hung_broker_leaves_no_task(broker):
    broker.pause()  # TCP connects (the kernel accepts), the TLS handshake hangs
    t = table(broker, connect_timeout=1.0)
    task = asyncio.create_task(t.run(Inbox()))
    await asyncio.sleep(0.3)  # not a wait for an event: somewhere inside the first connect attempt
    started = time.monotonic()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert time.monotonic() - started <= 3 * 1.0 + 1.0
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert t.connects == 0 and not t.connected
    broker.resume()


async def test_a_server_that_never_sends_its_connack_costs_connect_timeout_and_leaks_nothing(broker):
    # TLS completes, then silence: aiomqtt gives up waiting for the CONNACK, with the connection still open
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(broker.directory / "pki" / "server.crt", broker.directory / "pki" / "server.key")
    held: list[asyncio.Event] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ended = asyncio.Event()
        held.append(ended)
        try:
            await reader.read()  # until the client closes its end
        finally:
            writer.close()
            ended.set()

    server = await asyncio.start_server(hold, "127.0.0.1", 0, ssl=ctx)
    try:
        port = server.sockets[0].getsockname()[1]
        link = table(broker, port=port, connect_timeout=0.5)
        async with running(link, Inbox(), connected=False):
            await link.wait_until(lambda: link.failures >= 2, WAIT)
        assert link.last_error == "LinkDown: no CONNACK from the broker within 0.5 s", link.last_error
        async with asyncio.timeout(WAIT):  # every connection it opened, it closed
            for ended in held:
                await ended.wait()
        assert len(held) >= 2 and link.connects == 0
    finally:
        server.close()
        await server.wait_closed()


CHILD = """
import asyncio, json, sys
from pathlib import Path
from controller.link.mqtt import MqttLink, MqttSettings
s = json.loads(sys.argv[1])
s["ca_file"] = Path(s["ca_file"])
s["will"] = (s["will"][0], s["will"][1].encode(), s["will"][2])
async def main():
    link = MqttLink(MqttSettings(**s), [])
    task = asyncio.create_task(link.run(lambda t, p: None))
    await link.wait_connected(10)
    await link.publish(s["will"][0], b"online", retain=True)
    print("up", flush=True)
    await task
asyncio.run(main())
"""


async def test_the_authoritys_will_says_offline_when_it_dies(broker):
    status = f"{P}/authority/status"
    settings = asdict(broker.settings("authority", will=(status, b"offline", True)))
    settings["ca_file"] = str(settings["ca_file"])
    settings["will"] = [status, "offline", True]
    t_in = Inbox()
    t = table(broker)
    async with running(t, t_in):
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, json.dumps(settings), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            async with asyncio.timeout(WAIT):
                while (line := await child.stdout.readline()) != b"up\n":  # after its log lines
                    assert line, "the child ended"
            await t_in.has((status, b"online"))
        finally:
            child.kill()  # no DISCONNECT: the broker publishes the will
            await child.wait()
        await t_in.has((status, b"offline"))
    late = Inbox()
    async with running(table(broker, "CS-08"), late):
        await late.has((status, b"offline"))  # retained


# --- settings from the configuration -------------------------------------------------------------


def mqtt_config(tmp_path: Path, **changes) -> MqttConfig:
    base = dict(host="link.example", port=8883, tls=True, client_id="CS-07", topic_prefix=P, link_timeout=10.0,
                ca_file=tmp_path / "ca.crt", username="CS-07", password_file=tmp_path / "mqtt-password")
    base.update(changes)
    return MqttConfig(**base)


def test_settings_from_the_configuration_read_the_password_file(tmp_path):
    (tmp_path / "mqtt-password").write_text("s3cret with spaces \n")
    s = MqttSettings.from_config(mqtt_config(tmp_path))
    assert (s.host, s.port, s.tls, s.username, s.client_id) == ("link.example", 8883, True, "CS-07", "CS-07")
    assert s.password == "s3cret with spaces "
    assert s.ca_file == tmp_path / "ca.crt" and s.protocol == "5" and s.keepalive == 15
    assert "s3cret" not in repr(s)
    assert MqttSettings.from_config(mqtt_config(tmp_path, username=None, password_file=None)).password is None


def test_an_unreadable_password_file_is_named(tmp_path):
    missing = tmp_path / "mqtt-password"
    with pytest.raises(MqttSettingsError, match=f"password_file: cannot read {missing}"):
        MqttSettings.from_config(mqtt_config(tmp_path))
    missing.write_text("\n")
    with pytest.raises(MqttSettingsError, match=f"password_file: {missing} is empty"):
        MqttSettings.from_config(mqtt_config(tmp_path))


def test_settings_refuse_what_cannot_work():
    with pytest.raises(MqttSettingsError, match="protocol"):
        MqttSettings(host="h", client_id="c", protocol="3.1")  # type: ignore[arg-type]
    with pytest.raises(MqttSettingsError, match="tls is false"):
        MqttSettings(host="h", client_id="c", tls=False, ca_file=Path("ca.crt"))
    with pytest.raises(MqttSettingsError, match="cert_file and key_file"):
        MqttSettings(host="h", client_id="c", cert_file=Path("c.crt"))


# --- publishing from many tasks at once ----------------------------------------------------------------


def hook_acks(link: MqttLink, on_ack: Callable[[int, asyncio.Task | None], None]) -> None:
    """Call ``on_ack(mid, task)`` right after each acknowledgement the link gets (QoS 0: the message
    written), in the same callback: `task` is the task that published packet `mid`."""
    inner = link._client._client  # paho-mqtt's client inside aiomqtt's
    publish, on_publish = inner.publish, inner.on_publish
    publishers: dict[int, asyncio.Task | None] = {}

    def noted(*args, **kwargs):
        info = publish(*args, **kwargs)
        publishers[info.mid] = asyncio.current_task()
        return info

    def acked(client, userdata, mid, reason_code, properties):
        on_publish(client, userdata, mid, reason_code, properties)
        on_ack(mid, publishers.pop(mid, None))

    inner.publish, inner.on_publish = noted, acked


@pytest.mark.parametrize("qos", [0, 1])
async def test_a_cancellation_that_comes_with_the_acknowledgement_takes_effect(broker, qos):
    # Python 3.11's asyncio.wait_for returns the result of what it waits for, and drops the cancellation,
    # when both come in the same iteration of the loop: a task cancelled at that moment went on as if it
    # had not been, like the authority's heartbeat, which then kept its TaskGroup from ever ending.
    t = table(broker)
    async with running(t, Inbox()):
        beats = 0

        async def heartbeat() -> None:
            nonlocal beats
            while True:
                await t.publish(up("CS-07"), b"beat", qos=qos)
                beats += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(heartbeat())
        hook_acks(t, lambda mid, publisher: publisher is task and task.cancel())
        done, _ = await asyncio.wait({task}, timeout=2.0)
        assert task in done and task.cancelled(), f"still running after {beats} more publishes"
        assert beats == 0
        assert t.connected and t._publisher is not None and t._publisher.in_flight == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_many_tasks_publish_at_once_and_cancellations_take_effect(broker):
    """Publishers in parallel on one link, QoS 0 and 1, some refused by the ACL, some cancelled at random
    moments (before the message is sent, while it is in flight, in the callback of its acknowledgement):
    each publish ends within its timeout; each cancellation takes effect; each acknowledgement goes to its
    own publish (a refusal to the refused message only); every acknowledged QoS 1 message is delivered."""
    rng = random.Random(20261130)
    bound = 3.0  # each publish's timeout
    w_in = Inbox()
    w, t = watcher(broker), table(broker)
    outcomes: dict[int, str] = {}
    took: dict[int, float] = {}
    cancel_at_ack: dict[asyncio.Task, int] = {}  # publish task -> its number
    cancels: list[tuple[int, asyncio.Task]] = []  # publishes whose cancel() was accepted

    def on_ack(mid: int, publisher: asyncio.Task | None) -> None:
        if publisher in cancel_at_ack and publisher.cancel():
            cancels.append((cancel_at_ack[publisher], publisher))

    async def one(n: int, topic: str, qos: int) -> None:
        started = time.monotonic()
        try:
            await t.publish(topic, f"m{n}".encode(), qos=qos, retain=n % 7 == 0, timeout=bound)
            outcomes[n] = "sent"
        except PublishRefused:
            outcomes[n] = "refused"
        except LinkDown as e:
            outcomes[n] = f"down: {e}"
        finally:
            took[n] = time.monotonic() - started

    def cancel(n: int, task: asyncio.Task) -> None:
        if task.cancel():
            cancels.append((n, task))

    async def publisher(first: int, count: int) -> None:
        for n in range(first, first + count):
            forged = n % 5 == 0
            qos = 1 if n % 3 else 0
            task = asyncio.create_task(one(n, up("CS-08") if forged else up("CS-07"), qos), name=f"publish-{n}")
            how = rng.random()
            if how < 0.1:
                cancel(n, task)  # before it starts
            elif how < 0.25:
                asyncio.get_running_loop().call_later(rng.uniform(0, 0.01), cancel, n, task)
            elif how < 0.4:
                cancel_at_ack[task] = n
            done, _ = await asyncio.wait({task}, timeout=bound + 2.0)
            assert task in done, f"publish {n} still running after {bound + 2.0:g} s"
            if rng.random() < 0.5:
                await asyncio.sleep(0)

    async with running(w, w_in), running(t, Inbox()):
        hook_acks(t, on_ack)
        await asyncio.gather(*(publisher(i * 100, 60) for i in range(8)))
        assert t.connected and t._publisher is not None and t._publisher.in_flight == 0

        cancelled = {n for n, _ in cancels}
        assert all(task.cancelled() for _, task in cancels), \
            [n for n, task in cancels if not task.cancelled()]  # each accepted cancel() took effect
        assert cancelled and len(cancels) == len(cancelled)
        assert not cancelled & set(outcomes)  # a cancelled publish neither returned nor raised
        assert len(outcomes) + len(cancelled) == 8 * 60
        assert max(took.values()) <= bound + 1.0, max(took.values())
        assert all(o in ("sent", "refused") for o in outcomes.values()), outcomes
        # a refusal answers exactly the forged QoS 1 publishes that ran to their end
        assert {n for n, o in outcomes.items() if o == "refused"} == \
            {n for n in outcomes if n % 5 == 0 and n % 3}
        # every acknowledged QoS 1 message reached the watcher, and nothing refused did
        sent_qos1 = {(up("CS-07"), f"m{n}".encode()) for n, o in outcomes.items() if o == "sent" and n % 3}
        await w_in.until(lambda items: sent_qos1 <= set(items))
        assert not [item for item in w_in.items if item[0] != up("CS-07")]
        assert t.refused == sum(o == "refused" for o in outcomes.values())
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_publish_waiting_when_the_connection_ends_fails_at_once(broker):
    t = table(broker, timeout=1.0)
    async with running(t, Inbox()) as run:
        broker.pause()  # no PUBACK from now on
        publish = asyncio.create_task(t.publish(up("CS-07"), b"into the void", timeout=30.0))
        await asyncio.sleep(0.2)
        assert not publish.done()
        started = time.monotonic()
        run.cancel()  # the link stops: its connection ends
        with pytest.raises(LinkDown, match="the connection was lost"):
            async with asyncio.timeout(1.0):
                await publish
        assert time.monotonic() - started < 1.0
    broker.resume()
    assert asyncio.all_tasks() == {asyncio.current_task()}


# --- attacks from a table's credentials, or from the broker (docs/security.md) ----------------------------------


async def test_a_tables_user_cannot_take_over_another_clients_session(broker):
    """With the authority's client id, a table's user used to knock the authority off the broker (a client id
    is one session): the broker now names each client after its user (use_username_as_clientid)."""
    a_in = Inbox()
    a = authority(broker)
    rogue = MqttLink(broker.settings("CS-07", client_id="authority"), [])
    async with running(a, a_in), running(rogue, Inbox()):
        await rogue.publish(up("CS-07"), b"still me")
        await a_in.has((up("CS-07"), b"still me"))
        assert (a.connects, a.reconnects, a.failures) == (1, 0, 0) and a.connected


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_packet_over_the_size_limit_never_reaches_the_authority(broker, protocol):
    """One table used to push 250 MB messages that the authority buffered whole: the broker now refuses a packet
    over 70,000 bytes and disconnects its sender; the authority goes on."""
    from controller.link.mqtt import MAX_PACKET

    a_in = Inbox()
    a, t = authority(broker), table(broker, protocol=protocol)
    async with running(a, a_in), running(t, Inbox()):
        with pytest.raises(LinkDown):
            await t.publish(up("CS-07"), b"x" * (MAX_PACKET + 1), timeout=5)
        await t.wait_until(lambda: t.failures >= 1 or t.reconnects >= 1, WAIT)
        await t.wait_connected(WAIT)  # it may come back; its next message goes through
        await t.publish(up("CS-07"), b"small")
        await a_in.has((up("CS-07"), b"small"))
        assert all(len(p) < MAX_PACKET for _t, p in a_in.items) and a.reconnects == 0


async def test_a_retained_message_on_an_up_topic_is_ignored(broker):
    """A table could plant a retained message on its own up topic that every authority restart took in again
    (a false ERROR each time): the authority takes no retained message there."""
    rogue = MqttLink(broker.settings("CS-07"), [])
    async with running(rogue, Inbox()):
        await rogue.publish(up("CS-07"), b"planted", retain=True)
    for _start in range(2):
        a_in = Inbox()
        a = MqttLink(broker.settings("authority"), [f"{P}/tables/+/up"], ignore_retained=True)
        with structlog.testing.capture_logs() as logs:
            async with running(a, a_in):
                await a.wait_until(lambda a=a: a.retained_dropped >= 1, WAIT)
        assert a_in.items == [] and any(e["event"].startswith("retained message ignored") for e in logs)


async def test_a_broker_announcing_a_packet_too_large_is_dropped_before_it_is_read():
    """A broker (or whoever answers on its port) that announces a 100 MB packet: the client drops the connection
    after its header, having read none of it (paho-mqtt would read it whole into memory). Also proves this
    module's hook into paho-mqtt (`_sock_recv`, `_in_packet`) still works: it fails when they change."""
    from controller.link.mqtt import MqttLink as Link

    sent = 0
    closed = asyncio.Event()

    async def fake_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK (3.1.1): accepted
        size = 100 * 1024 * 1024
        length = bytearray()
        while True:  # the remaining length, as MQTT encodes it
            byte, size = size % 128, size // 128
            length.append(byte | (0x80 if size else 0))
            if not size:
                break
        writer.write(b"\x30" + bytes(length))  # PUBLISH of 100 MB, then its body for as long as it is read
        try:
            for _ in range(1000):
                writer.write(b"\x00" * 65536)
                await writer.drain()
                sent += 65536
        except (ConnectionError, OSError):
            pass
        finally:
            closed.set()
            writer.close()

    server = await asyncio.start_server(fake_broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    link = Link(MqttSettings(host="127.0.0.1", port=port, tls=False, client_id="CS-07", protocol="3.1.1",
                             connect_timeout=2.0, reconnect_min=5.0, reconnect_max=5.0), [])
    try:
        async with running(link, Inbox(), connected=False):
            await link.wait_until(lambda: link.failures >= 1, WAIT)
            async with asyncio.timeout(WAIT):
                await closed.wait()
    finally:
        server.close()
        await server.wait_closed()
    assert sent < 16 * 1024 * 1024, f"{sent} bytes of the packet went to the client before it hung up"


def test_the_shipped_broker_listens_on_its_one_listener_only(broker):
    """A listener's option placed before any `listener` line makes Mosquitto open a default plain listener on
    port 1883 for it: the shipped configuration must not (the broker listens on its TLS port only)."""
    opened = [line for line in broker.log().splitlines() if "listen socket on port" in line]
    assert opened and all(line.endswith(f"port {broker.port}.") for line in opened), opened

"""The MQTT transport of the link: one connection to the broker, owned by the application.

`MqttLink.run` connects (TLS, a username and password per client), subscribes, tells the application that
it is connected, hands it every message, and when the connection is lost connects again by itself, after a
capped exponential backoff with jitter (`drivers.health.Backoff`). The first failure of an outage is logged
at ERROR, the repeats at DEBUG, the recovery at INFO. `MqttLink.publish` sends one message and returns when
the broker has it (QoS 1: its acknowledgement); when there is no connection it raises `LinkDown` at once.
This transport never queues: the application keeps what it still has to send (its outbox) and sends it
again from ``on_connect``.

Sessions: by default a client keeps its session (MQTT 5 session expiry `MqttSettings.session_expiry`;
MQTT 3.1.1 ``clean_session = false``), so QoS 1 messages published to it while it is away, even across a
restart of a broker with persistence, are delivered when it is back. Duplicates are possible (QoS 1): the
payloads carry idempotency keys.

Liveness: a broker that stops answering is noticed by the keepalive: after `keepalive` seconds without a
byte from it the client sends a PINGREQ and, if nothing comes back within another `keepalive` seconds,
drops the connection (paho-mqtt's rule: at most about 2 x keepalive + 2 s of silence). The broker drops a
silent client after 1.5 x keepalive and then publishes its will.

Size: no packet larger than MAX_PACKET is taken from the broker. MQTT 5 clients ask the broker for it
(the CONNECT's maximum packet size: the broker drops a larger message for this client), and every client
drops the connection when a packet's announced length is larger, before reading it (a broker that does not
keep to it cannot fill this process's memory). The shipped broker configuration refuses larger packets from
clients too (`max_packet_size`).

Retained messages: a link that takes none (`ignore_retained`: the authority, on the tables' up topics, where
nothing is published retained) drops any it is handed, counted in `retained_dropped` and logged once a topic.

Refusals: the broker's ACL refuses a publish silently in MQTT 3.1.1. In MQTT 5 it says so in the
acknowledgement of a QoS 1 publish, and `publish` raises `PublishRefused` (a `LinkDown`: the message was
not delivered). A refused subscription makes the connection count as failed (a link that cannot hear what
it subscribes to is not up); Mosquitto 2.0 never refuses one, it grants it and delivers only what the ACL
lets the client read.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar

import aiomqtt
import paho.mqtt.client as paho
import structlog
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.config.model import MQTT_PROTOCOLS, MqttConfig
from controller.link import aiomqtt_internals as internals
from drivers.health import Backoff

log = structlog.get_logger("controller.link.mqtt")


class _AtDebug(logging.Filter):
    """paho-mqtt and aiomqtt log each socket error themselves, at ERROR: once per attempt during an
    outage. This link logs the outage (loudly once); their own lines are kept, at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return _client_log.isEnabledFor(logging.DEBUG)


_client_log = logging.getLogger("controller.link.mqtt.client")
_client_log.addFilter(_AtDebug())

Protocol = Literal["5", "3.1.1"]
PROTOCOLS: tuple[str, ...] = MQTT_PROTOCOLS  # defined once, with the configuration that names them

OnMessage = Callable[[str, bytes], None]
OnConnect = Callable[[], Awaitable[None] | None]


class LinkError(Exception):
    """A problem of the link to the broker."""


class LinkDown(LinkError):
    """The message was not delivered: there is no connection to the broker, it was lost, or the broker did
    not acknowledge in time. Keep the message and send it again when connected (``on_connect``)."""


class PublishRefused(LinkDown):
    """The broker refused the message (MQTT 5 only: its acknowledgement carries the reason, usually "Not
    authorized": the ACL does not let this client publish on that topic)."""

    def __init__(self, topic: str, reason: str) -> None:
        super().__init__(f"the broker refused the message on {topic}: {reason}")
        self.topic = topic
        self.reason = reason


class SubscribeRefused(LinkError):
    """The broker refused one or more subscriptions (its ACL does not let this client read them)."""


class MqttSettingsError(ValueError):
    """Settings that cannot work; the message names the setting or the file at fault."""


@dataclass(frozen=True, kw_only=True)
class MqttSettings:
    """How to reach the broker and who to be there. `will` is (topic, payload, retain), sent with QoS 1
    by the broker when this client vanishes without saying goodbye. Times are in seconds."""

    host: str
    port: int = 8883
    tls: bool = True
    ca_file: Path | None = None  # None: the system's trusted CAs
    cert_file: Path | None = None  # a client certificate, when the broker asks for one
    key_file: Path | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    client_id: str
    keepalive: int = 15
    connect_timeout: float = 5.0  # TCP connect, TLS handshake, and CONNACK: each
    timeout: float = 5.0  # once connected: SUBACK, a publish's acknowledgement (default), DISCONNECT
    will: tuple[str, bytes, bool] | None = None
    protocol: Protocol = "5"
    session_expiry: int = 3600  # how long the broker keeps this client's session while it is away; 0: none
    reconnect_min: float = 0.5  # the first wait after a failure, doubled after each, up to reconnect_max
    reconnect_max: float = 10.0

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise MqttSettingsError(f"mqtt protocol: {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if not self.host:
            raise MqttSettingsError("mqtt host: empty")
        if not 0 < self.port < 65536:
            raise MqttSettingsError(f"mqtt port: {self.port} is not a TCP port")
        if not self.client_id:
            raise MqttSettingsError("mqtt client_id: empty")
        if not 0 < self.keepalive <= 65535:
            raise MqttSettingsError(f"mqtt keepalive: {self.keepalive} s is not between 1 and 65535")
        for name in ("connect_timeout", "timeout", "reconnect_min", "reconnect_max"):
            if not getattr(self, name) > 0:
                raise MqttSettingsError(f"mqtt {name}: must be more than 0 s")
        if self.reconnect_min > self.reconnect_max:
            raise MqttSettingsError("mqtt reconnect_min: more than reconnect_max")
        if self.session_expiry < 0:
            raise MqttSettingsError("mqtt session_expiry: negative")
        if (self.cert_file is None) != (self.key_file is None):
            raise MqttSettingsError("mqtt cert_file and key_file: give both or neither")
        if not self.tls and any(p is not None for p in (self.ca_file, self.cert_file, self.key_file)):
            raise MqttSettingsError("mqtt ca_file, cert_file, key_file: TLS settings, but tls is false")
        if self.password is not None and self.username is None:
            raise MqttSettingsError("mqtt password: given without a username")

    @classmethod
    def from_config(cls, cfg: MqttConfig, *, will: tuple[str, bytes, bool] | None = None) -> MqttSettings:
        """From the ``[mqtt]`` section of a configuration. The password is the content of ``password_file``
        without its trailing newline."""
        password = None if cfg.password_file is None else read_password(Path(cfg.password_file))
        return cls(host=cfg.host, port=cfg.port, tls=cfg.tls, ca_file=cfg.ca_file, cert_file=cfg.cert_file,
                   key_file=cfg.key_file, username=cfg.username, password=password, client_id=cfg.client_id,
                   protocol=cfg.protocol, will=will)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def read_password(path: Path) -> str:
    """The password kept in `path`, without the newline that ends the file. The message of an error names
    the file, never its content."""
    from controller.tomlfile.files import MAX_SECRET_BYTES, FileRefused, read_file

    try:
        data = read_file(path, limit=MAX_SECRET_BYTES).data  # one line: never a FIFO, never /dev/zero
    except FileRefused as e:
        raise MqttSettingsError(f"mqtt password_file: cannot read {path}: {e.reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MqttSettingsError(f"mqtt password_file: {path} is not UTF-8 text") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise MqttSettingsError(f"mqtt password_file: {path} is empty")
    if "\n" in text:
        raise MqttSettingsError(f"mqtt password_file: {path} has more than one line")
    return text


# --- aiomqtt's own state ---------------------------------------------------------------------------------
# aiomqtt (2.x) does not give the reason code of a publish's acknowledgement, its waits can lose a
# cancellation (below), and its connect runs in a thread that cancellation does not stop. Every reach into
# its private state is in controller.link.aiomqtt_internals (tested against the installed versions), each
# optional: without them, publishes go through aiomqtt (in a task of their own), refusals are not reported,
# and the paho-mqtt connect timeout is its default (5 s).
#
# Cancellation: aiomqtt waits for an acknowledgement (SUBACK, PUBACK, a QoS 0 message written, the end of
# a DISCONNECT) with asyncio.wait_for, which in Python 3.11 loses a cancellation that arrives in the loop
# iteration in which what it waits for completes: the call returns normally and the cancelled task goes on
# as if it had not been cancelled, to block at its next wait for good (and a TaskGroup that waits for it
# never ends). So this module never awaits such a call in the caller's task: a publish waits on a future
# of its own (`_Publisher`), the other calls run in tasks of their own (`_apart`).

T = TypeVar("T")
PUBLISH_TIMEOUT = 5.0  # seconds a publish waits for the broker's acknowledgement
MAX_PACKET = 70_000  # bytes of an MQTT packet: a payload of schema.MAX_PAYLOAD (64 KiB) and its topic and headers


class PacketTooLarge(OSError):
    """The broker announced a packet larger than MAX_PACKET: the connection is dropped before it is read."""


def _paho(client: aiomqtt.Client) -> paho.Client | None:
    return internals.paho_of(client)


def _limit_packets(inner: paho.Client, limit: int = MAX_PACKET) -> None:
    internals.limit_packets(inner, limit, PacketTooLarge)


class _NoAck(Exception):
    """No acknowledgement within the publish's timeout."""


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(_NoAck())


class _Publisher:
    """The publishes of one connection, straight through paho-mqtt. Each waits on a future of its own,
    resolved by paho-mqtt's ``on_publish`` (with the acknowledgement's reason code; QoS 0: once written),
    failed by its timer, or by the end of the connection. Any number of tasks may publish at once: a
    publish is found by its packet id, which paho-mqtt does not reuse while the message is in flight."""

    def __init__(self, inner: paho.Client) -> None:
        self._inner = inner
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._waiting: dict[int, asyncio.Future[ReasonCode]] = {}
        self._early: dict[int, ReasonCode] | None = None  # acknowledgements made within a call to paho's publish
        self._closed: str | None = None
        # aiomqtt's own: harmless, and kept for its own publishes. paho-mqtt types it for either version of its
        # callback API; aiomqtt's client is made with version 2.
        chained: paho.CallbackOnPublish_v2 | None = inner.on_publish  # type: ignore[assignment]

        def on_publish(c: paho.Client, userdata: Any, mid: int, reason_code: ReasonCode,
                       properties: Properties) -> None:
            try:
                if threading.get_ident() == self._thread:
                    self._acknowledged(mid, reason_code)
                else:  # never seen: paho-mqtt calls it from the socket callbacks, in the loop's thread
                    self._loop.call_soon_threadsafe(self._acknowledged, mid, reason_code)
            finally:
                if chained is not None:
                    chained(c, userdata, mid, reason_code, properties)

        inner.on_publish = on_publish

    def _acknowledged(self, mid: int, reason_code: ReasonCode) -> None:
        fut = self._waiting.pop(mid, None)
        if fut is not None:
            if not fut.done():  # else cancelled, or expired, in this same iteration of the loop
                fut.set_result(reason_code)
        elif self._early is not None:
            self._early[mid] = reason_code
        # else: the publish that waited for it gave up (timeout, cancellation)

    async def publish(self, topic: str, payload: bytes, qos: int, retain: bool, wait: float) -> ReasonCode | None:
        """Send; return the reason code of the acknowledgement. Raises `_NoAck` after `wait` seconds and
        `LinkDown` when the connection ends first; a cancellation of the caller always takes effect."""
        if self._closed is not None:
            raise LinkDown(self._closed)
        self._early = {}
        try:
            info = self._inner.publish(topic, payload, qos, retain)
        finally:
            early, self._early = self._early, None
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise LinkDown(paho.error_string(info.rc))
        if info.mid in early:
            return early[info.mid]
        if info.is_published():
            return None
        fut: asyncio.Future[ReasonCode] = self._loop.create_future()
        self._waiting[info.mid] = fut
        timer = self._loop.call_later(wait, _expire, fut)
        try:
            return await fut  # a plain future: a cancellation cancels it, or comes right after its result
        finally:
            timer.cancel()
            if self._waiting.get(info.mid) is fut:
                del self._waiting[info.mid]

    def close(self, why: str) -> None:
        """The connection has ended: fail every publish still waiting, and those to come."""
        self._closed = why
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(LinkDown(why))

    @property
    def in_flight(self) -> int:
        return len(self._waiting)


async def _apart(aw: Awaitable[T], bound: float) -> T:
    """The result of `aw` (an aiomqtt call), awaited in a task of its own for at most `bound` seconds
    (then TimeoutError). The caller waits with asyncio.wait, which never loses a cancellation; on one, or
    on the timeout, the call's task is cancelled and given a moment to end."""
    task = asyncio.ensure_future(aw)
    task.add_done_callback(_consume)
    try:
        done, _ = await asyncio.wait({task}, timeout=bound)
    except BaseException:
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
        raise TimeoutError
    return task.result()


def _consume(task: asyncio.Future[Any]) -> None:
    """Mark the outcome of a task as seen (it is, or it was given up on)."""
    if not task.cancelled():
        task.exception()


class _ClosingSSLSocket(ssl.SSLSocket):
    """A TLS socket that closes itself when its handshake fails (paho-mqtt leaves it to the garbage
    collector: one open descriptor per failed attempt until then)."""

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


def _failed(code: Any) -> bool:
    is_failure = getattr(code, "is_failure", None)
    if isinstance(is_failure, bool):
        return is_failure
    try:
        return int(code) >= 0x80
    except (TypeError, ValueError):
        return False


class MqttLink:
    """One client connection, kept up by `run`. `subscriptions` are topic filters (QoS 1) or (filter, QoS)
    pairs, subscribed again on every connection.

    ``on_message(topic, payload)`` is a plain function, called in order for each message in the task of
    `run`: it must not block (hand slow work to a queue or a task). An exception from it is logged and the
    message dropped (counted in `dropped`). ``on_connect()`` is called after each connection, once the
    subscriptions are in place; it may be a plain function or return an awaitable (a coroutine function),
    which then runs as a task beside the delivery of messages and is cancelled if the connection is lost.
    """

    def __init__(self, settings: MqttSettings, subscriptions: Iterable[str | tuple[str, int]] = (), *,
                 name: str | None = None, ignore_retained: bool = False) -> None:
        self.settings = settings
        subs: list[tuple[str, int]] = []
        for s in subscriptions:
            topic, qos = (s, 1) if isinstance(s, str) else (s[0], int(s[1]))
            if not topic or qos not in (0, 1, 2):
                raise ValueError(f"mqtt subscription: {s!r}")
            subs.append((topic, qos))
        self.subscriptions: tuple[tuple[str, int], ...] = tuple(subs)
        self.name = name or settings.client_id
        self.ignore_retained = ignore_retained
        self.retained_dropped = 0
        self._retained_topics: set[str] = set()
        self.connects = 0  # connections made
        self.reconnects = 0  # ... after the first
        self.failures = 0  # connection attempts failed and connections lost
        self.dropped = 0  # messages on_message failed on
        self.refused = 0  # publishes the broker refused
        self.last_error: str | None = None
        self._client: aiomqtt.Client | None = None
        self._publisher: _Publisher | None = None  # the publishes of the connection, while it is up
        self._changed = asyncio.Event()  # set, and replaced, at every change of the state above
        self._running = False
        self._outage_logged = False
        self._down_since: float | None = None
        self._handler_error_logged = False

    # --- state ---------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def wait_connected(self, timeout: float) -> None:
        """Return once connected (at once if connected now); TimeoutError after `timeout` seconds."""
        await self.wait_until(lambda: self.connected, timeout)

    async def wait_disconnected(self, timeout: float) -> None:
        """Return once not connected (at once if not connected now); TimeoutError after `timeout`."""
        await self.wait_until(lambda: not self.connected, timeout)

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Return once `condition()` holds, tested at each change of the link's state and counters
        (connected, connects, failures, dropped, refused); TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                if condition():
                    return
                await changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _set_up(self, client: aiomqtt.Client, publisher: _Publisher | None) -> None:
        self._client = client
        self._publisher = publisher
        self._notify()

    def _set_down(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            publisher.close("the connection was lost")
        if self._client is not None:
            self._client = None
            self._notify()

    # --- publishing ----------------------------------------------------------------------------------

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False,
                      timeout: float | None = None) -> None:
        """Send one message; return when the broker has it (QoS 1 and 2: acknowledged; QoS 0: written).
        Raises `LinkDown` when not connected, when the connection is lost, or after `timeout` seconds
        (default `MqttSettings.timeout`) without an acknowledgement; `PublishRefused` (a LinkDown) when
        the broker says it refused the message. Any number of tasks may publish at once; a cancellation of
        the publishing task always takes effect (the message may or may not have been sent)."""
        client = self._client
        if client is None:
            raise LinkDown(f"not connected to the MQTT broker {self.settings.address}: {topic} not sent")
        wait = self.settings.timeout if timeout is None else timeout
        publisher = self._publisher
        try:
            if publisher is not None:
                code = await publisher.publish(topic, payload, qos, retain, wait)
            else:  # aiomqtt without the paho-mqtt client this module knows: no reason codes
                code = None
                await _apart(client.publish(topic, payload, qos=qos, retain=retain, timeout=wait), wait + 1.0)
        except (_NoAck, TimeoutError):
            raise LinkDown(f"{topic} not sent to the MQTT broker {self.settings.address}: "
                           f"no acknowledgement within {wait:g} s") from None
        except LinkDown as e:
            raise LinkDown(f"{topic} not sent to the MQTT broker {self.settings.address}: {e}") from None
        except aiomqtt.MqttError as e:
            raise LinkDown(f"{topic} not sent to the MQTT broker {self.settings.address}: "
                           f"{_no_ack(e, wait)}") from e
        if code is not None and _failed(code):
            self.refused += 1
            self._notify()
            log.error("mqtt publish refused", link=self.name, topic=topic, reason=str(code))
            raise PublishRefused(topic, str(code))

    # --- the connection loop -------------------------------------------------------------------------

    async def run(self, on_message: OnMessage, on_connect: OnConnect | None = None) -> NoReturn:
        """Keep the connection up, forever; cancel the task to stop (it disconnects cleanly)."""
        if inspect.iscoroutinefunction(on_message):
            raise TypeError("on_message must be a plain function, not a coroutine function")
        if self._running:
            raise RuntimeError(f"mqtt link {self.name}: already running")
        self._running = True
        backoff = Backoff(initial=self.settings.reconnect_min, cap=self.settings.reconnect_max)
        try:
            while True:
                try:
                    await self._session(on_message, on_connect, backoff)
                except Exception as e:  # noqa: BLE001 - every failure means: wait, then connect again
                    self._lost(e)
                await asyncio.sleep(backoff.delay())
        finally:
            self._set_down()
            self._running = False

    def _lost(self, e: BaseException) -> None:
        self.failures += 1
        if isinstance(e, MqttConnectError):
            who = self.settings.username or "an anonymous client"
            self.last_error = (f"the broker refused the connection of {who} ({self.settings.client_id}): {e}; "
                               "check the username and password_file")
        else:
            self.last_error = _describe(e)
        self._notify()
        if self._down_since is None:
            self._down_since = time.monotonic()
        if self._outage_logged:
            log.debug("mqtt link down", link=self.name, broker=self.settings.address, error=self.last_error,
                      failures=self.failures)
        else:
            self._outage_logged = True
            log.error("mqtt link down", link=self.name, broker=self.settings.address, error=self.last_error)

    def _came_up(self) -> None:
        self.connects += 1
        if self.connects > 1:
            self.reconnects += 1
        if self._outage_logged and self._down_since is not None:
            log.info("mqtt link recovered", link=self.name, broker=self.settings.address,
                     down_s=round(time.monotonic() - self._down_since, 1))
        elif self.connects == 1:
            log.info("mqtt link up", link=self.name, broker=self.settings.address,
                     protocol=self.settings.protocol)
        else:
            log.info("mqtt link reconnected", link=self.name, broker=self.settings.address)
        self._outage_logged = False
        self._down_since = None

    async def _session(self, on_message: OnMessage, on_connect: OnConnect | None,
                       backoff: Backoff) -> None:
        """One connection, from connect to its loss (always raises)."""
        client = self._new_client()
        inner = _paho(client)
        publisher = None if inner is None else _Publisher(inner)
        await self._connect(client)
        if inner is not None and inner.socket() is None:
            # lost as it was made (a broker that hangs up right after its CONNACK): aiomqtt forgets such a
            # loss when its connect completes, and would wait on a dead connection
            raise LinkDown("the connection was lost as soon as it was made")
        _no_delay(inner)
        task: asyncio.Task[None] | None = None
        try:
            if self.subscriptions:
                subscribe = client.subscribe(list(self.subscriptions), timeout=self.settings.timeout)
                try:
                    codes = await _apart(subscribe, self.settings.timeout + 1.0)
                except TimeoutError:
                    raise LinkDown(f"no SUBACK from the broker within {self.settings.timeout:g} s") from None
                refused = [t for (t, _), c in zip(self.subscriptions, codes, strict=False) if _failed(c)]
                if refused:
                    raise SubscribeRefused(f"the broker refused the subscription to {', '.join(refused)}")
            backoff.reset()
            self._came_up()
            self._set_up(client, publisher)
            if on_connect is not None:
                task = self._call_on_connect(on_connect)
            async for message in client.messages:
                self._deliver(on_message, message)
            raise LinkDown("the message stream ended")  # aiomqtt raises instead; for safety
        finally:
            self._set_down()
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=self.settings.timeout)
            await self._disconnect(client)

    def _new_client(self) -> aiomqtt.Client:
        s = self.settings
        v5 = s.protocol == "5"
        tls_context = None
        if s.tls:
            tls_context = ssl.create_default_context(cafile=None if s.ca_file is None else str(s.ca_file))
            tls_context.minimum_version = ssl.TLSVersion.TLSv1_2
            tls_context.sslsocket_class = _ClosingSSLSocket
            if s.cert_file is not None:
                tls_context.load_cert_chain(str(s.cert_file), None if s.key_file is None else str(s.key_file))
        properties = None
        if v5:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = s.session_expiry
            properties.MaximumPacketSize = MAX_PACKET
        will = None if s.will is None else aiomqtt.Will(s.will[0], s.will[1], qos=1, retain=s.will[2])
        client = aiomqtt.Client(
            s.host, s.port, username=s.username, password=s.password, identifier=s.client_id,
            protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
            will=will, clean_session=None if v5 else s.session_expiry == 0,
            clean_start=s.session_expiry == 0 if v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
            properties=properties, timeout=s.connect_timeout, keepalive=s.keepalive, tls_context=tls_context,
            logger=_client_log,
        )
        inner = _paho(client)
        if inner is not None:
            inner.connect_timeout = s.connect_timeout
            _limit_packets(inner)
        return client

    async def _connect(self, client: aiomqtt.Client) -> None:
        # aiomqtt connects in a thread (bounded by connect_timeout for the TCP connect and again for the TLS
        # handshake), then waits for the CONNACK (connect_timeout). Cancelling the wait does not stop the
        # thread: on cancellation wait for the attempt to end, and close the connection if it was made.
        bound = 3 * self.settings.connect_timeout + 1.0
        attempt = asyncio.ensure_future(client.__aenter__())
        try:
            async with asyncio.timeout(bound):
                await asyncio.shield(attempt)
        except BaseException as e:
            inner = _paho(client)
            closed = inner is not None and inner.socket() is None
            again: BaseException | None = None  # a cancellation while cleaning up: let through at the end
            try:
                if not attempt.done():
                    await asyncio.wait({attempt}, timeout=bound)
            except BaseException as e2:  # noqa: BLE001
                again = e2
            if not attempt.done():
                attempt.cancel()
                await asyncio.wait({attempt}, timeout=1.0)
            elif not attempt.cancelled() and attempt.exception() is None:
                await self._disconnect(client)
            else:
                await self._reap(client)
            if again is not None and not isinstance(e, asyncio.CancelledError):
                raise again from e
            if internals.timed_out(e):
                if not closed:
                    raise LinkDown(f"no CONNACK from the broker within {self.settings.connect_timeout:g} s") from e
                hint = "" if self.settings.tls else " (tls is false: is it a TLS port?)"
                raise LinkDown(f"the broker closed the connection before its CONNACK{hint}") from e
            if isinstance(e, TimeoutError):
                raise LinkDown(f"connecting took more than {bound:g} s") from e
            raise

    async def _disconnect(self, client: aiomqtt.Client) -> None:
        try:
            await _apart(client.__aexit__(None, None, None), self.settings.timeout + 1.0)
        except Exception as e:  # noqa: BLE001 - the connection is being dropped anyway
            log.debug("mqtt disconnect", link=self.name, error=_describe(e))
        finally:
            await self._reap(client)

    async def _reap(self, client: aiomqtt.Client) -> None:
        """Close what aiomqtt may have left open: the socket and its housekeeping task."""
        inner = _paho(client)
        if inner is not None:
            internals.close_socket(inner)
        misc = internals.misc_task(client)
        if misc is not None and not misc.done():
            misc.cancel()
            await asyncio.wait({misc}, timeout=1.0)

    def _call_on_connect(self, on_connect: OnConnect) -> asyncio.Task[None] | None:
        try:
            result = on_connect()
        except Exception:
            log.error("mqtt on_connect failed", link=self.name, exc_info=True)
            return None
        if not inspect.isawaitable(result):
            return None

        async def await_it() -> None:
            try:
                await result
            except LinkDown as e:
                log.debug("mqtt on_connect interrupted", link=self.name, error=str(e))
            except Exception:
                log.error("mqtt on_connect failed", link=self.name, exc_info=True)

        return asyncio.create_task(await_it(), name=f"mqtt-{self.name}-on-connect")

    def _deliver(self, on_message: OnMessage, message: aiomqtt.Message) -> None:
        topic = message.topic.value
        if self.ignore_retained and message.retain:
            self.retained_dropped += 1
            self._notify()
            if topic not in self._retained_topics:
                self._retained_topics.add(topic)
                log.warning("retained message ignored: nothing here is published retained", link=self.name,
                            topic=topic)
            return
        payload = message.payload
        if not isinstance(payload, bytes):
            payload = b"" if payload is None else str(payload).encode()
        try:
            # typed to return None; a caller that is not type-checked may hand a coroutine function
            result = on_message(topic, payload)  # type: ignore[func-returns-value]
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()
                raise TypeError("on_message returned an awaitable: it must be a plain function")
        except Exception as e:
            self.dropped += 1
            self._notify()
            if self._handler_error_logged:
                log.debug("mqtt message dropped", link=self.name, topic=topic, error=_describe(e),
                          dropped=self.dropped)
            else:
                self._handler_error_logged = True
                log.error("mqtt message dropped", link=self.name, topic=topic, exc_info=True)
            return
        self._handler_error_logged = False


def _describe(e: BaseException) -> str:
    text = str(e)
    cause = e.__cause__ or e.__context__
    if isinstance(e, aiomqtt.MqttError) and cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _no_ack(e: aiomqtt.MqttError, wait: float) -> str:
    return f"no acknowledgement within {wait:g} s" if internals.timed_out(e) else _describe(e)


def _no_delay(inner: Any) -> None:
    """TCP_NODELAY on the connection: an operation and its acknowledgement are small packets that Nagle's
    algorithm would hold back for the peer's delayed ACK (tens of ms each way)."""
    sock = inner.socket() if inner is not None else None
    if sock is None:
        return
    with contextlib.suppress(OSError, AttributeError):  # not a TCP socket (a test double): nothing to tune
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

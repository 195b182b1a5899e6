"""The link's topics and payloads, version 1 (docs/link-protocol.md): pure encoding and checking.

Every payload is one JSON object with ``"v": 1``. Money is a decimal string of dollars, as everywhere in
the project. A payload that does not parse raises SchemaError naming the topic and the field, so the
authority can drop it and count it without guessing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..money import format_cents, parse_cents

LINK_KEY_PREFIX = "link:"  # the authority journals table T's operation N under "link:T:N"

VERSION = 1
DEFAULT_PREFIX = "progressive/v1"
MAX_PAYLOAD = 65_536  # bytes; a contribution batch of a 7-seat table is about 400

# The meter operations a table may ask of the authority (controller.meter.ops kinds). Parameters and
# adjustments of a linked meter are the authority's own business, never a table's. A percentage of a linked
# meter is locked first (lock-percent-award, then pay-locked-award or release-locked-award).
BASE_OPS = frozenset({
    "book-contributions", "void-round", "close-round", "pay-fixed-award",
    "lock-percent-award", "pay-locked-award", "release-locked-award",
})
# Kinds added to version 1 since: an authority that takes them says so in its `expect` (`kinds`), and a table
# sends one only to an authority that said so (an older authority would drop it, and the table's sequence with
# it). pay-percent-award pays a later share of a shared award whose first share a lock paid (the authority
# checks that it is one).
ADDED_OPS = frozenset({"pay-percent-award"})
TABLE_OPS = BASE_OPS | ADDED_OPS


class SchemaError(InputError):
    """A payload that is not version 1 of the link protocol; the problem starts with the topic."""


def _bad(topic: str, field_name: str, message: str) -> SchemaError:
    return SchemaError(field_name, f"{topic}: {message}")


# --- topics --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topics:
    prefix: str = DEFAULT_PREFIX

    def up(self, table: str) -> str:
        return f"{self.prefix}/tables/{table}/up"

    def down(self, table: str) -> str:
        return f"{self.prefix}/tables/{table}/down"

    def meter(self, meter: str) -> str:
        return f"{self.prefix}/meters/{meter}"

    def win(self, meter: str) -> str:
        return f"{self.prefix}/meters/{meter}/win"

    @property
    def heartbeat(self) -> str:
        return f"{self.prefix}/authority/heartbeat"

    @property
    def status(self) -> str:
        return f"{self.prefix}/authority/status"

    @property
    def all_up(self) -> str:
        return f"{self.prefix}/tables/+/up"

    def table_subscriptions(self, table: str) -> tuple[str, ...]:
        return (self.down(table), f"{self.prefix}/meters/#", f"{self.prefix}/authority/#")

    def parse(self, topic: str) -> tuple[str, ...]:
        """The parts of `topic` after the prefix, or () when it is not one of ours."""
        head = self.prefix + "/"
        return tuple(topic[len(head):].split("/")) if topic.startswith(head) else ()


# --- messages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """Table -> authority: one meter operation, number `seq` of that table's outbox."""

    table: str
    seq: int
    kind: str
    meter: str  # the authority's meter id
    body: dict[str, Any]  # the operation's fields (controller.meter.ops to_dict, without "kind")

    @property
    def key(self) -> str:
        """The idempotency key in the authority's journal: a retried operation applies once."""
        return f"{LINK_KEY_PREFIX}{self.table}:{self.seq}"


@dataclass(frozen=True)
class Hello:
    """Table -> authority on every (re)connection: what the table has sent so far."""

    table: str
    next_seq: int  # the sequence number the table will give its next operation


@dataclass(frozen=True)
class Ack:
    """Authority -> table: operation `seq` is committed in the authority's journal at `entry`."""

    seq: int
    entry: int
    result: dict[str, Any]


@dataclass(frozen=True)
class Refused:
    """Authority -> table: operation `seq` was refused by the rules (final: a retry is refused again)."""

    seq: int
    field: str
    message: str


@dataclass(frozen=True)
class Expect:
    """Authority -> table: the next sequence number the authority will apply for this table, and the operation
    kinds it takes (None from an authority that predates the field: BASE_OPS)."""

    next_seq: int
    kinds: frozenset[str] | None = None


@dataclass(frozen=True)
class MeterValue:
    """Authority -> everyone, retained: a linked meter's amount after journal entry `entry`."""

    meter: str
    cents: int
    entry: int
    at: str
    reset_cents: int  # the reset amount: a table's claim computes what a percentage award takes with it
    locked: tuple[tuple[str, int], ...] = ()  # (claim, cents) awaiting approval


@dataclass(frozen=True)
class Win:
    """Authority -> everyone: a hit locked, paid or released on a linked meter."""

    meter: str
    table: str
    seat: int
    cents: int
    claim: str
    state: str  # "locked", "paid", "released"
    entry: int


@dataclass(frozen=True)
class Heartbeat:
    authority: str
    at: str
    entry: int
    meters: dict[str, int] = field(default_factory=dict)  # meter -> cents


@dataclass(frozen=True)
class Status:
    authority: str
    state: str  # "online" or "offline" (the authority's MQTT will)


WIN_STATES = ("locked", "paid", "released")


def encode(msg: Any) -> bytes:
    """The wire form of a message (compact JSON, keys sorted so equal messages are equal bytes)."""
    match msg:
        case Op():
            d = {"type": "op", "table": msg.table, "seq": msg.seq, "kind": msg.kind, "meter": msg.meter,
                 "body": msg.body}
        case Hello():
            d = {"type": "hello", "table": msg.table, "next_seq": msg.next_seq}
        case Ack():
            d = {"type": "ack", "seq": msg.seq, "entry": msg.entry, "result": msg.result}
        case Refused():
            d = {"type": "refused", "seq": msg.seq, "field": msg.field, "message": msg.message}
        case Expect():
            d = {"type": "expect", "next_seq": msg.next_seq}
            if msg.kinds is not None:
                d["kinds"] = sorted(msg.kinds)
        case MeterValue():
            d = {"type": "meter", "meter": msg.meter, "amount": format_cents(msg.cents), "entry": msg.entry,
                 "at": msg.at, "reset": format_cents(msg.reset_cents), "locked": [{"claim": c, "amount": format_cents(a)} for c, a in msg.locked]}
        case Win():
            d = {"type": "win", "meter": msg.meter, "table": msg.table, "seat": msg.seat,
                 "amount": format_cents(msg.cents), "claim": msg.claim, "state": msg.state, "entry": msg.entry}
        case Heartbeat():
            d = {"type": "heartbeat", "authority": msg.authority, "at": msg.at, "entry": msg.entry,
                 "meters": {m: format_cents(c) for m, c in sorted(msg.meters.items())}}
        case Status():
            d = {"type": "status", "authority": msg.authority, "state": msg.state}
        case _:
            raise TypeError(f"not a link message: {msg!r}")
    return json.dumps({"v": VERSION, **d}, separators=(",", ":"), sort_keys=True).encode()


def decode(topic: str, payload: bytes) -> Any:
    """The message in `payload`; SchemaError names the topic and the field at fault."""
    if len(payload) > MAX_PAYLOAD:
        raise _bad(topic, "payload", f"{len(payload)} bytes, more than {MAX_PAYLOAD}")
    try:
        d = json.loads(payload)
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(topic, "payload", f"not JSON: {e}") from None
    if not isinstance(d, dict):
        raise _bad(topic, "payload", "must be a JSON object")
    if d.get("v") != VERSION:
        raise _bad(topic, "v", f"version {d.get('v')!r}; this side speaks version {VERSION}")
    r = _Reader(topic, d)
    match d.get("type"):
        case "op":
            kind = r.text("kind")
            if kind not in TABLE_OPS:
                raise _bad(topic, "kind", f"{kind!r} is not an operation a table may send; "
                                  f"one of {', '.join(sorted(TABLE_OPS))}")
            return Op(r.name("table"), r.count("seq", 1), kind, r.name("meter"), r.obj("body"))
        case "hello":
            return Hello(r.name("table"), r.count("next_seq", 1))
        case "ack":
            return Ack(r.count("seq", 1), r.count("entry", 1), r.obj("result"))
        case "refused":
            return Refused(r.count("seq", 1), r.text("field"), r.text("message"))
        case "expect":
            kinds = None
            if "kinds" in d:
                listed = r.list("kinds")
                if not all(isinstance(k, str) for k in listed):
                    raise _bad(topic, "kinds", "must be a list of operation kinds")
                kinds = frozenset(listed)
            return Expect(r.count("next_seq", 1), kinds)
        case "meter":
            locked = tuple((r.sub("locked", i).text("claim"), r.sub("locked", i).money("amount"))
                           for i in range(len(r.list("locked"))))
            return MeterValue(r.name("meter"), r.money("amount"), r.count("entry", 0), r.text("at"), r.money("reset"),
                              locked)
        case "win":
            state = r.text("state")
            if state not in WIN_STATES:
                raise _bad(topic, "state", f"{state!r}; one of {', '.join(WIN_STATES)}")
            return Win(r.name("meter"), r.name("table"), r.count("seat", 0), r.money("amount"), r.text("claim"),
                       state, r.count("entry", 1))
        case "heartbeat":
            meters = r.obj("meters")
            return Heartbeat(r.name("authority"), r.text("at"), r.count("entry", 0),
                             {str(m): _money(topic, f"meters.{m}", a) for m, a in meters.items()})
        case "status":
            state = r.text("state")
            if state not in ("online", "offline"):
                raise _bad(topic, "state", f"{state!r}; online or offline")
            return Status(r.name("authority"), state)
        case other:
            raise _bad(topic, "type", f"unknown message type {other!r}")


def _money(topic: str, name: str, value: object) -> int:
    try:
        cents = parse_cents(value, name)
    except InputError as e:
        raise _bad(topic, name, e.problem) from None
    if cents < 0:
        raise _bad(topic, name, "must not be negative")
    return cents


class _Reader:
    def __init__(self, topic: str, d: dict[str, Any], at: str = "") -> None:
        self.topic, self.d, self.at = topic, d, at

    def _get(self, name: str) -> Any:
        if name not in self.d:
            raise _bad(self.topic, self.at + name, "is missing")
        return self.d[name]

    def text(self, name: str) -> str:
        v = self._get(name)
        if not isinstance(v, str):
            raise _bad(self.topic, self.at + name, f"must be text, not {v!r}")
        return v

    def name(self, name: str) -> str:
        v = self.text(name)
        if not v or len(v) > 64 or not all(c.isalnum() or c in "-_." for c in v):
            raise _bad(self.topic, self.at + name, f"{v!r} is not an id (letters, digits, '-', '_', '.')")
        return v

    def count(self, name: str, minimum: int) -> int:
        v = self._get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _bad(self.topic, self.at + name, f"must be a whole number >= {minimum}, not {v!r}")
        return v

    def obj(self, name: str) -> dict[str, Any]:
        v = self._get(name)
        if not isinstance(v, dict):
            raise _bad(self.topic, self.at + name, "must be an object")
        return v

    def list(self, name: str) -> list[Any]:
        v = self._get(name)
        if not isinstance(v, list):
            raise _bad(self.topic, self.at + name, "must be a list")
        return v

    def sub(self, name: str, i: int) -> _Reader:
        v = self.list(name)[i]
        if not isinstance(v, dict):
            raise _bad(self.topic, f"{self.at}{name}[{i}]", "must be an object")
        return _Reader(self.topic, v, f"{self.at}{name}[{i}].")

    def money(self, name: str) -> int:
        return _money(self.topic, self.at + name, self._get(name))

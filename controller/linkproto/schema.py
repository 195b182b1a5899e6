"""The link's topics and payloads, version 1 (docs/link-protocol.md): pure encoding and checking.

Every payload is one JSON object with ``"v": 1``. Money is a decimal string of dollars, as everywhere in
the project. A payload that does not parse raises SchemaError naming the topic and the field, so the
authority can drop it and count it without guessing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from controller.errors import InputError
from controller.money import format_cents, parse_cents

LINK_KEY_PREFIX = "link:"  # the authority journals table T's operation N under "link:T:N"

VERSION = 2  # 2: the authority signs what it says and answers name the operation they answer (signing.py)
DEFAULT_PREFIX = "progressive/v1"
MAX_PAYLOAD = 65_536  # bytes; a contribution batch of a 7-seat table is about 400
MAX_COUNT = 2**63  # sequence numbers, entries and counts: below it (a journal's integers are 64-bit)

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
# Messages added to version 1 since, announced the same way: `anchor`, a table's journal head (docs/security.md).
# `offline`, a table saying it leaves the broker (its clean stop; its MQTT will when its connection drops).
# `floor`, what the floor view shows of a table (its round, blocks and pending claims): display only, never money.
ADDED_MESSAGES = frozenset({"anchor", "offline", "floor"})
ANNOUNCED = TABLE_OPS | ADDED_MESSAGES  # what an authority of this version lists in its `expect`


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
    approval: dict[str, Any] | None = None  # a payment's supervisor approval (controller.linkproto.approval)

    @property
    def key(self) -> str:
        """The idempotency key in the authority's journal: a retried operation applies once."""
        return f"{LINK_KEY_PREFIX}{self.table}:{self.seq}"


@dataclass(frozen=True)
class Hello:
    """Table -> authority on every (re)connection: what the table has sent so far."""

    table: str
    next_seq: int  # the sequence number the table will give its next operation
    nonce: str  # random, new at each hello: the authority's `expect` names it, so an old one cannot be played back


@dataclass(frozen=True)
class Ack:
    """Authority -> table: operation `seq` is committed in the authority's journal at `entry`."""

    seq: int
    entry: int
    result: dict[str, Any]
    op: str  # op_digest of the operation answered: a table takes the answer only for the operation it sent


@dataclass(frozen=True)
class Refused:
    """Authority -> table: operation `seq` was refused by the rules (final: a retry is refused again). A message
    on the wire, answering one operation by its number and digest; the control socket's failed answers are
    `controller.service.control.ControlError`, of any kind, and carry no operation."""

    seq: int
    field: str
    message: str
    op: str  # op_digest of the operation answered


@dataclass(frozen=True)
class Expect:
    """Authority -> table: the next sequence number the authority will apply for this table, the operation kinds
    and messages it takes (None from an authority that predates the field: BASE_OPS), and the last anchor of the
    table's own journal it was sent (`JournalAnchor`, or None)."""

    next_seq: int
    kinds: frozenset[str] | None = None
    anchor: JournalAnchor | None = None
    # The names of the supervisors whose approvals of payments the authority verifies (None: an authority that
    # predates approvals): a table refuses an approval by anyone else before it moves any state.
    approvers: frozenset[str] | None = None
    hello: str = ""  # the nonce of the table's last hello the authority heard ("" before any)


@dataclass(frozen=True)
class JournalAnchor:
    """Table -> authority: the head of the table's own journal (controller.ledger.anchor), kept off the table's box;
    the authority sends the last one back in its `expect`, for the table to check its journal against."""

    table: str
    seq: int
    hash: str
    at: str
    mac: str | None = None


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


@dataclass(frozen=True)
class TableOffline:
    """Table -> authority: the table's link is gone: `stopped` (its clean stop, sent before it disconnects) or
    `lost` (its MQTT will: the broker sends it when the table's connection drops without a goodbye)."""

    table: str
    reason: str  # one of OFFLINE_REASONS


@dataclass(frozen=True)
class FloorClaim:
    """A claim awaiting a supervisor at its table, as its floor line says it (display only)."""

    claim: str
    seat: int  # 0: the dealer's hand
    spot: str
    hand: str
    award: str
    cents: int  # the total its approval pays (Envy Bonuses included)


@dataclass(frozen=True)
class FloorLine:
    """Table -> authority: what the floor view shows of the table, on its own `up` topic (so only its own password
    can say it). Display only: the authority moves no money on it, and the amounts of linked meters and their locks
    it shows are its own journal's."""

    table: str
    at: str  # the table's time of it
    round_id: str  # "" before the first round
    phase: str  # betting, locking, dealing, void
    blocks: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (block, its sources: devices, "supervisor", ...)
    seats_disabled: tuple[int, ...] = ()
    claims: tuple[FloorClaim, ...] = ()  # pending: awaiting a supervisor
    meters: tuple[str, ...] = ()  # the authority's meters the table is linked to


FLOOR_MAX_PAYLOAD = 8_192  # bytes of a floor line: a 7-seat table with every claim pending is about 1,500
FLOOR_MAX_ITEMS = 16  # blocks, sources of a block, disabled seats, claims, meters
FLOOR_TEXT = 64  # characters of a hand's or an award's name
FLOOR_PHASES = ("betting", "locking", "dealing", "void")

WIN_STATES = ("locked", "paid", "released")
OFFLINE_REASONS = ("stopped", "lost")

# Every message of the protocol, either way.
Message = (Op | Hello | Ack | Refused | Expect | JournalAnchor | MeterValue | Win | Heartbeat | Status | TableOffline
           | FloorLine)


def op_digest(op: Op) -> str:
    """What an answer names: SHA-256 of the operation exactly as the table sent it (number, kind, meter, body and
    approval), so that an answer to another operation under the same number is never taken for its own."""
    d: dict[str, Any] = {"table": op.table, "seq": op.seq, "kind": op.kind, "meter": op.meter, "body": op.body}
    if op.approval is not None:
        d["approval"] = op.approval
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _op_dict(msg: Op) -> dict[str, Any]:
    d = {"type": "op", "table": msg.table, "seq": msg.seq, "kind": msg.kind, "meter": msg.meter, "body": msg.body}
    if msg.approval is not None:
        d["approval"] = msg.approval
    return d


def _expect_dict(msg: Expect) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "expect", "next_seq": msg.next_seq, "hello": msg.hello}
    if msg.kinds is not None:
        d["kinds"] = sorted(msg.kinds)
    if msg.anchor is not None:
        d["anchor"] = _anchor_dict(msg.anchor)
    if msg.approvers is not None:
        d["approvers"] = sorted(msg.approvers)
    return d


def encode(msg: Message) -> bytes:
    """The wire form of a message (compact JSON, keys sorted so equal messages are equal bytes)."""
    match msg:
        case Op():
            d = _op_dict(msg)
        case Hello():
            d = {"type": "hello", "table": msg.table, "next_seq": msg.next_seq, "nonce": msg.nonce}
        case Ack():
            d = {"type": "ack", "seq": msg.seq, "entry": msg.entry, "result": msg.result, "op": msg.op}
        case Refused():
            d = {"type": "refused", "seq": msg.seq, "field": msg.field, "message": msg.message, "op": msg.op}
        case Expect():
            d = _expect_dict(msg)
        case JournalAnchor():
            d = {"type": "anchor", **_anchor_dict(msg)}
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
        case TableOffline():
            d = {"type": "offline", "table": msg.table, "reason": msg.reason}
        case FloorLine():
            d = {"type": "floor", "table": msg.table, "at": msg.at, "round": {"id": msg.round_id, "phase": msg.phase},
                 "blocks": [{"block": b, "sources": list(src)} for b, src in msg.blocks],
                 "seats_disabled": list(msg.seats_disabled),
                 "claims": [{"claim": c.claim, "seat": c.seat, "spot": c.spot, "hand": c.hand, "award": c.award,
                             "amount": format_cents(c.cents)} for c in msg.claims],
                 "meters": list(msg.meters)}
        case _:
            raise TypeError(f"not a link message: {msg!r}")
    return json.dumps({"v": VERSION, **d}, separators=(",", ":"), sort_keys=True).encode()


def _json_object(topic: str, payload: bytes) -> dict[str, Any]:
    """The JSON object of a payload of our version."""
    if len(payload) > MAX_PAYLOAD:
        raise _bad(topic, "payload", f"{len(payload)} bytes, more than {MAX_PAYLOAD}")
    try:
        d = json.loads(payload)
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(topic, "payload", f"not JSON: {e}") from None
    except RecursionError:  # [[[[...]]]] deeper than the parser goes: malformed, like any other
        raise _bad(topic, "payload", "nested too deep") from None
    if not isinstance(d, dict):
        raise _bad(topic, "payload", "must be a JSON object")
    if d.get("v") != VERSION:
        raise _bad(topic, "v", f"version {d.get('v')!r}; this side speaks version {VERSION}")
    return d


def _op(topic: str, r: _Reader, d: dict[str, Any]) -> Op:
    kind = r.text("kind")
    if kind not in TABLE_OPS:
        raise _bad(topic, "kind", f"{kind!r} is not an operation a table may send; "
                          f"one of {', '.join(sorted(TABLE_OPS))}")
    return Op(r.name("table"), r.count("seq", 1), kind, r.name("meter"), r.obj("body"),
              r.obj("approval") if "approval" in d else None)


def _expect(topic: str, r: _Reader, d: dict[str, Any]) -> Expect:
    kinds = None
    if "kinds" in d:
        listed = r.list("kinds")
        if not all(isinstance(k, str) for k in listed):
            raise _bad(topic, "kinds", "must be a list of operation kinds")
        kinds = frozenset(listed)
    anchor = _anchor(topic, r.obj("anchor"), "anchor.") if "anchor" in d else None
    approvers = None
    if "approvers" in d:
        names = r.list("approvers")
        if not all(isinstance(n, str) and 0 < len(n) <= 64 for n in names):
            raise _bad(topic, "approvers", "must be a list of supervisors' names")
        approvers = frozenset(names)
    return Expect(r.count("next_seq", 1), kinds, anchor, approvers, r.hex("hello", 32, empty=True))


def _choice(topic: str, r: _Reader, field: str, allowed: Collection[str], listed: str) -> str:
    """The text at `field`, one of `allowed` (`listed` says which, in the refusal)."""
    value = r.text(field)
    if value not in allowed:
        raise _bad(topic, field, f"{value!r}; {listed}")
    return value


def decode(topic: str, payload: bytes) -> Message:
    """The message in `payload`; SchemaError names the topic and the field at fault."""
    d = _json_object(topic, payload)
    r = _Reader(topic, d)
    match d.get("type"):
        case "op":
            return _op(topic, r, d)
        case "hello":
            return Hello(r.name("table"), r.count("next_seq", 1), r.hex("nonce", 32))
        case "ack":
            return Ack(r.count("seq", 1), r.count("entry", 1), r.obj("result"), r.hex("op", 64))
        case "refused":
            return Refused(r.count("seq", 1), r.text("field"), r.text("message"), r.hex("op", 64))
        case "expect":
            return _expect(topic, r, d)
        case "anchor":
            return _anchor(topic, d, "")
        case "meter":
            locked = tuple((r.sub("locked", i).text("claim"), r.sub("locked", i).money("amount"))
                           for i in range(len(r.list("locked"))))
            return MeterValue(r.name("meter"), r.money("amount"), r.count("entry", 0), r.text("at"), r.money("reset"),
                              locked)
        case "win":
            state = _choice(topic, r, "state", WIN_STATES, f"one of {', '.join(WIN_STATES)}")
            return Win(r.name("meter"), r.name("table"), r.count("seat", 0), r.money("amount"), r.text("claim"),
                       state, r.count("entry", 1))
        case "heartbeat":
            meters = r.obj("meters")
            return Heartbeat(r.name("authority"), r.text("at"), r.count("entry", 0),
                             {str(m): _money(topic, f"meters.{m}", a) for m, a in meters.items()})
        case "status":
            state = _choice(topic, r, "state", ("online", "offline"), "online or offline")
            return Status(r.name("authority"), state)
        case "offline":
            reason = _choice(topic, r, "reason", OFFLINE_REASONS, f"one of {', '.join(OFFLINE_REASONS)}")
            return TableOffline(r.name("table"), reason)
        case "floor":
            return _floor(topic, r, len(payload))
        case other:
            raise _bad(topic, "type", f"unknown message type {other!r}")


def _floor(topic: str, r: _Reader, size: int) -> FloorLine:
    """A table's floor line, bounded: every list at most FLOOR_MAX_ITEMS long, every text short."""
    if size > FLOOR_MAX_PAYLOAD:
        raise _bad(topic, "payload", f"{size} bytes, more than {FLOOR_MAX_PAYLOAD} for a floor line")
    for name in ("blocks", "seats_disabled", "claims", "meters"):
        if len(r.list(name)) > FLOOR_MAX_ITEMS:
            raise _bad(topic, name, f"more than {FLOOR_MAX_ITEMS} entries")
    rnd = _Reader(topic, r.obj("round"), "round.")
    round_id = rnd.text("id")
    if round_id:
        round_id = rnd.name("id")
    phase = rnd.text("phase")
    if phase not in FLOOR_PHASES:
        raise _bad(topic, "round.phase", f"{phase!r}; one of {', '.join(FLOOR_PHASES)}")
    blocks = []
    for i in range(len(r.list("blocks"))):
        b = r.sub("blocks", i)
        sources = b.list("sources")
        if len(sources) > FLOOR_MAX_ITEMS:
            raise _bad(topic, f"blocks[{i}].sources", f"more than {FLOOR_MAX_ITEMS} entries")
        blocks.append((b.name("block"), tuple(_item(topic, f"blocks[{i}].sources", j, v).name(f"[{j}]")
                                              for j, v in enumerate(sources))))
    seats = tuple(_item(topic, "seats_disabled", j, v).count(f"[{j}]", 1)
                  for j, v in enumerate(r.list("seats_disabled")))
    claims = []
    for i in range(len(r.list("claims"))):
        c = r.sub("claims", i)
        hand, award = c.short("hand", FLOOR_TEXT), c.short("award", FLOOR_TEXT)
        claims.append(FloorClaim(c.name("claim"), c.count("seat", 0), c.name("spot"), hand, award, c.money("amount")))
    meters = tuple(_item(topic, "meters", j, v).name(f"[{j}]") for j, v in enumerate(r.list("meters")))
    return FloorLine(r.name("table"), r.short("at", 40), round_id, phase, tuple(blocks), seats, tuple(claims), meters)


def _item(topic: str, name: str, j: int, value: object) -> _Reader:
    """A reader of entry `j` of list `name`, whose errors name it as `name[j]`."""
    return _Reader(topic, {f"[{j}]": value}, name)


def _anchor_dict(a: JournalAnchor) -> dict[str, Any]:
    return {"table": a.table, "seq": a.seq, "hash": a.hash, "at": a.at, **({"mac": a.mac} if a.mac else {})}


def _anchor(topic: str, d: dict[str, Any], at: str) -> JournalAnchor:
    r = _Reader(topic, d, at)
    digest = r.text("hash")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise _bad(topic, at + "hash", "must be 64 hex digits")
    mac = d.get("mac")
    if mac is not None and not (isinstance(mac, str) and len(mac) == 64 and all(c in "0123456789abcdef" for c in mac)):
        raise _bad(topic, at + "mac", "must be 64 hex digits")
    return JournalAnchor(r.name("table"), r.count("seq", 1), digest, r.text("at")[:40], mac)


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

    def _get(self, name: str) -> object:
        if name not in self.d:
            raise _bad(self.topic, self.at + name, "is missing")
        return self.d[name]

    def text(self, name: str) -> str:
        v = self._get(name)
        if not isinstance(v, str):
            raise _bad(self.topic, self.at + name, f"must be text, not {v!r}")
        return v

    def short(self, name: str, most: int) -> str:
        """Text for people: at most `most` printable characters."""
        v = self.text(name)
        if len(v) > most or not v.isprintable():
            raise _bad(self.topic, self.at + name, f"must be at most {most} printable characters")
        return v

    def name(self, name: str) -> str:
        v = self.text(name)
        if not v or len(v) > 64 or not all(c.isalnum() or c in "-_." for c in v):
            raise _bad(self.topic, self.at + name, f"{v!r} is not an id (letters, digits, '-', '_', '.')")
        return v

    def count(self, name: str, minimum: int) -> int:
        v = self._get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v < MAX_COUNT:
            shown = v if not isinstance(v, int) or abs(v) < 10**20 else f"a number of {len(str(v))} digits"
            raise _bad(self.topic, self.at + name, f"must be a whole number from {minimum} to {MAX_COUNT - 1}, "
                                                   f"not {shown!r}")
        return v

    def hex(self, name: str, digits: int, *, empty: bool = False) -> str:
        v = self.text(name)
        if not (empty and v == "") and (len(v) != digits or any(c not in "0123456789abcdef" for c in v)):
            raise _bad(self.topic, self.at + name, f"must be {digits} hex digits")
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


__all__ = ["ADDED_MESSAGES", "ADDED_OPS", "ANNOUNCED", "BASE_OPS", "DEFAULT_PREFIX", "FLOOR_MAX_ITEMS",
           "FLOOR_MAX_PAYLOAD", "FLOOR_PHASES", "FLOOR_TEXT", "LINK_KEY_PREFIX", "MAX_COUNT", "MAX_PAYLOAD",
           "OFFLINE_REASONS", "TABLE_OPS", "VERSION", "WIN_STATES", "Ack", "Expect", "FloorClaim", "FloorLine",
           "Heartbeat", "Hello", "JournalAnchor", "Message", "MeterValue", "Op", "Refused", "SchemaError", "Status",
           "TableOffline", "Topics", "Win", "decode", "encode", "op_digest"]

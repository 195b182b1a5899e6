"""Device faults and wagering blocks as the journal keeps them: which transitions a table journals (`FaultWatch`),
the form of their entries, and the outages a reader rebuilds from them (`FaultBook`). Pure: times are arguments.

Three kinds of entry (docs/meters.md, "The meters in the journal"), none of which moves a meter:

- ``device-fault``: a device stopped answering (``down``) or answers again (``up``): the device, its kind, its
  model (entries written before models were recorded have none), the seats whose wagering it disables (none: the whole table), the reason, the flaps folded in, and `at`, the moment;
- ``wagering-block``: progressive wagering at the table disabled (``blocked``) or enabled again (``unblocked``) for
  one cause (deck, stub, device, link, closed), with who raised it (`sources`), the flaps folded in, and `at`;
- ``fault-watch``: the table's watch of its devices and blocks starts (at every start) or stops (a clean stop):
  whatever is open before it ends at its `at` (after a crash, at the restart: nobody saw when it ended).

Only transitions are journaled, never a poll, and a flapping device does not flood the journal: an end is journaled
once the device (or the table) has stayed back for `hold` (a minute); going down again before that folds the
return into the open fault (`flaps`), which then runs from the first drop to the last return. So a device, or a
block, makes at most one down and one up entry a `hold`; its `at` times say when each happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from controller.errors import InputError, InvariantViolation
from controller.meter.parse import parse_moment

DEVICE_FAULT = "device-fault"
WAGERING_BLOCK = "wagering-block"
FAULT_WATCH = "fault-watch"
KINDS = frozenset({DEVICE_FAULT, WAGERING_BLOCK, FAULT_WATCH})
HOLD = timedelta(seconds=60)  # an end is journaled after this long back; a new drop before it is a flap

_EVENTS = {DEVICE_FAULT: ("down", "up"), WAGERING_BLOCK: ("blocked", "unblocked"), FAULT_WATCH: ("start", "stop")}
_FIELDS = {DEVICE_FAULT: {"event", "device", "device_kind", "seats", "reason", "flaps", "at"},
           WAGERING_BLOCK: {"event", "block", "sources", "flaps", "at"},
           FAULT_WATCH: {"event", "at"}}
# Fields an entry may have: a device's model (journals written before it was recorded have none).
_OPTIONAL = {DEVICE_FAULT: {"model"}, WAGERING_BLOCK: set(), FAULT_WATCH: set()}

Entry = tuple[str, dict[str, Any]]  # (kind, body) to journal


def check_body(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The reducer's check of a fault entry's form (InputError naming the field); its result is {}."""
    if not _FIELDS[kind] <= set(body) <= _FIELDS[kind] | _OPTIONAL[kind]:
        optional = f" and may have {', '.join(sorted(_OPTIONAL[kind]))}" if _OPTIONAL[kind] else ""
        raise InputError("body", f"a {kind} entry has {', '.join(sorted(_FIELDS[kind]))}{optional}")
    if body["event"] not in _EVENTS[kind]:
        raise InputError("event", f"{body['event']!r} is not one of {', '.join(_EVENTS[kind])}")
    parse_moment(body["at"], "at")
    for name in ("device", "device_kind", "model", "reason", "block"):
        if name in body and not isinstance(body[name], str):
            raise InputError(name, "must be text")
    if "flaps" in body and not (type(body["flaps"]) is int and body["flaps"] >= 0):
        raise InputError("flaps", "must be a count")
    if "seats" in body and not (isinstance(body["seats"], list) and all(type(s) is int for s in body["seats"])):
        raise InputError("seats", "must be a list of seats")
    if "sources" in body and not (isinstance(body["sources"], list) and all(isinstance(s, str) for s in body["sources"])):
        raise InputError("sources", "must be a list of names")
    return {}


def _at(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


@dataclass
class _Open:
    start: datetime
    detail: dict[str, Any]  # what the entries repeat: a device's kind, seats and reason; a block's sources
    back_at: datetime | None = None  # back (its end held), or None: down now
    flaps: int = 0


class FaultWatch:
    """What a table journals of its devices and blocks. Each call returns the entries to journal now, in order."""

    def __init__(self, hold: timedelta = HOLD) -> None:
        self.hold = hold
        self._open: dict[tuple[str, str], _Open] = {}  # (kind, device or block) -> its open fault

    def start(self, at: datetime) -> list[Entry]:
        return [(FAULT_WATCH, {"event": "start", "at": _at(at)})]

    def device(self, name: str, up: bool, at: datetime, *, kind: str, seats: Iterable[int] = (),
               reason: str = "", model: str = "") -> list[Entry]:
        detail: dict[str, Any] = {"device": name, "device_kind": kind, "seats": sorted(seats), "reason": reason}
        if model:
            detail["model"] = model
        return self._change((DEVICE_FAULT, name), not up, at, detail)

    def blocks(self, blocks: Mapping[str, Iterable[str]], at: datetime) -> list[Entry]:
        """The table's blocks now (cause -> who raised it; empty: not blocked)."""
        out: list[Entry] = []
        raised = {b: sorted(s) for b, s in blocks.items() if s}
        for block in sorted(set(raised) | {b for k, b in self._open if k == WAGERING_BLOCK}):
            out += self._change((WAGERING_BLOCK, block), block in raised, at,
                                {"block": block, "sources": raised.get(block, [])})
        return out

    def due(self, now: datetime) -> list[Entry]:
        """The ends held for `hold` by `now`, journaled with the moment each came back."""
        out: list[Entry] = []
        for key, o in sorted(self._open.items()):
            if o.back_at is not None and o.back_at + self.hold <= now:
                out.append(self._end(key))
        return out

    def next_due(self) -> datetime | None:
        return min((o.back_at + self.hold for o in self._open.values() if o.back_at is not None), default=None)

    def stop(self, at: datetime) -> list[Entry]:
        """A clean stop: the ends held are journaled with their own moments; then whatever is open ends here."""
        out = [self._end(key) for key, o in sorted(self._open.items()) if o.back_at is not None]
        self._open.clear()
        return out + [(FAULT_WATCH, {"event": "stop", "at": _at(at)})]

    def _change(self, key: tuple[str, str], down: bool, at: datetime, detail: dict[str, Any]) -> list[Entry]:
        kind, _ = key
        o = self._open.get(key)
        if down:
            if o is None:
                self._open[key] = _Open(at, detail)
                return [(kind, {"event": _EVENTS[kind][0], **detail, "flaps": 0, "at": _at(at)})]
            if o.back_at is not None:  # down again before the end was journaled: a flap of the same fault
                o.back_at, o.flaps = None, o.flaps + 1
            if kind == WAGERING_BLOCK:  # who raised it, all of them
                o.detail["sources"] = sorted(set(o.detail["sources"]) | set(detail["sources"]))
            return []
        if o is not None and o.back_at is None:
            o.back_at = at
            if self.hold <= timedelta(0):
                return [self._end(key)]
        return []

    def _end(self, key: tuple[str, str]) -> Entry:
        kind, _ = key
        o = self._open.pop(key)
        assert o.back_at is not None
        return kind, {"event": _EVENTS[kind][1], **o.detail, "flaps": o.flaps, "at": _at(o.back_at)}


# --- reading them back -------------------------------------------------------------------------------


class FaultRecord(Protocol):
    """A journal entry as a reader gives it (controller.ledger.reader.Record is one)."""

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def body(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Outage:
    """A device fault or a block as the journal holds it: from `start` to `end` (None: still open)."""

    kind: str  # DEVICE_FAULT or WAGERING_BLOCK
    name: str  # the device, or the block's cause
    start: datetime
    end: datetime | None
    start_seq: int
    end_seq: int | None
    detail: Mapping[str, Any]  # the starting entry's body
    flaps: int = 0
    ended_by: str = ""  # "up" / "unblocked", or "start" / "stop" (the watch's entry that ended it)

    def within(self, start: datetime, end: datetime) -> timedelta:
        """How long of [start, end) it covers (open: up to `end`)."""
        lo, hi = max(self.start, start), min(self.end or end, end)
        return max(hi - lo, timedelta(0))


@dataclass
class FaultBook:
    """Rebuilds the outages from the journal's fault entries, fed in journal order. Raises InvariantViolation at an
    entry that does not follow from those before it (an end with nothing open, a second start)."""

    open: dict[tuple[str, str], Outage] = field(default_factory=dict)
    ended: list[Outage] = field(default_factory=list)

    def feed(self, r: FaultRecord) -> None:
        b = r.body
        at = parse_moment(b.get("at"), "at")
        if r.kind == FAULT_WATCH:
            for key in sorted(self.open):
                self._close(key, r.seq, at, b["event"])
            return
        name = b["device"] if r.kind == DEVICE_FAULT else b["block"]
        key = (r.kind, name)
        if b["event"] == _EVENTS[r.kind][0]:
            if key in self.open:
                raise InvariantViolation(f"entry {r.seq}: {r.kind} {name} {b['event']}, but it is already since "
                                         f"entry {self.open[key].start_seq}")
            self.open[key] = Outage(r.kind, name, at, None, r.seq, None, dict(b))
            return
        if key not in self.open:
            raise InvariantViolation(f"entry {r.seq}: {r.kind} {name} {b['event']}, but no such fault is open")
        self._close(key, r.seq, at, b["event"], b["flaps"], b.get("sources"))

    def _close(self, key: tuple[str, str], seq: int, at: datetime, by: str, flaps: int = 0,
               sources: list[str] | None = None) -> None:
        o = self.open.pop(key)
        detail = o.detail if sources is None else {**o.detail, "sources": sources}
        self.ended.append(Outage(o.kind, o.name, o.start, max(at, o.start), o.start_seq, seq, detail, flaps, by))

    def forget_ended(self) -> None:
        """Keep only what is open (the day's opening)."""
        self.ended.clear()

    def outages(self, start: datetime, end: datetime) -> list[Outage]:
        """Every outage of [start, end), those open at `end` included, by when each began."""
        found = [o for o in [*self.ended, *self.open.values()]
                 if o.start < end and (o.end is None or o.end > start or start <= o.start)]
        return sorted(found, key=lambda o: (o.start, o.start_seq))


def covered(outages: Iterable[Outage], start: datetime, end: datetime) -> timedelta:
    """How long of [start, end) at least one of `outages` covers (overlaps counted once)."""
    spans = sorted((max(o.start, start), min(o.end or end, end)) for o in outages)
    total, reach = timedelta(0), start
    for lo, hi in spans:
        lo = max(lo, reach)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


__all__ = ["DEVICE_FAULT", "FAULT_WATCH", "HOLD", "KINDS", "WAGERING_BLOCK", "FaultBook", "FaultRecord", "FaultWatch",
           "Outage",
           "check_body", "covered"]

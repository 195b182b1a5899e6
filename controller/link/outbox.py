"""A table's durable outbox for its linked meters: the ledger reducer of the table's link journal.

Every operation on a linked meter is first journaled here (``link-send``), which gives it the next
sequence number of the table; then it is sent to the link authority until the authority's
acknowledgement (``link-ack``) or refusal (``link-refused``) is journaled too. The pair (table, seq) is the
operation's idempotency key at the authority, so a resend after any restart or outage applies once.
Pure: state in, state out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from controller.errors import InputError, RulesError
from controller.linkproto.schema import TABLE_OPS
from controller.linkproto.schema import Op as WireOp
from controller.meter import (
    BookContributions,
    CloseRound,
    LockPercentAward,
    Op,
    PayLockedAward,
    ReleaseLockedAward,
    VoidRound,
    op_from_dict,
)
from controller.meter.journal import LINK_REFUSED

LINK_SEND = "link-send"
LINK_ACK = "link-ack"
# LINK_REFUSED (meter_ledger): the same kind of entry at a table and at the authority, defined once

# A round booked on a linked meter: its (seat, cents) pairs, the positions of those on the dealer's hand, and
# every meter the round books when more than one (the booking's round_meters; () for a round of one meter, and
# for a booking journaled before the outbox kept them: see send_body).
OpenBooking = tuple[tuple[tuple[int, int], ...], tuple[int, ...], tuple[str, ...]]


@dataclass(frozen=True)
class Sent:
    """An operation journaled in the outbox and not answered yet: what is sent to the authority under `seq`."""

    seq: int
    kind: str
    meter: str  # the table's meter id
    linked: str  # the authority's meter id
    body: Mapping[str, Any]
    approval: Mapping[str, str] | None = None  # a payment's supervisor approval (controller.linkproto.approval)

    def to_dict(self) -> dict[str, Any]:
        """Its form in a snapshot of the outbox."""
        d: dict[str, Any] = {"seq": self.seq, "kind": self.kind, "meter": self.meter, "linked": self.linked,
                             "body": dict(self.body)}
        if self.approval is not None:  # only when there is one: older snapshots keep their exact form
            d["approval"] = dict(self.approval)
        return d

    def as_op(self, table: str) -> WireOp:
        """The message that sends it: the same at every resend, so the authority's answer names its digest."""
        return WireOp(table, self.seq, self.kind, self.linked, dict(self.body),
                      None if self.approval is None else dict(self.approval))


@dataclass(frozen=True)
class Outbox:
    """A table's link journal replayed: the next sequence number, what waits for the authority, and what a
    restarted daemon resumes from (open rounds, the last round, pending locks)."""

    next_seq: int = 1
    pending: Mapping[int, Sent] = field(default_factory=lambda: MappingProxyType({}))
    # Rounds booked on a linked meter and not yet closed or voided (table meter id -> round id -> its
    # booking: the booked (seat, cents) pairs, the positions of those on the dealer's hand, and the round's
    # meters when more than one), and the last round booked on each: a restarted daemon resumes from them
    # whether or not the authority has applied them yet, and reverses a round booked on only some of its meters.
    open_rounds: Mapping[str, Mapping[str, OpenBooking]] = field(default_factory=lambda: MappingProxyType({}))
    last_round: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Awards locked at the authority and neither paid nor released yet: lock claim id -> (meter, round id).
    # A round is not closed or voided with one of them pending (the daemon releases it first).
    locks: Mapping[str, tuple[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    acked: int = 0
    refused: int = 0


class OutboxReducer:
    """`controller.ledger.Reducer` of a table's link journal."""

    def initial(self) -> Outbox:
        """An empty outbox: the first operation gets sequence number 1."""
        return Outbox()

    def apply(self, state: Outbox, kind: str, body: dict[str, Any]) -> tuple[Outbox, dict[str, Any]]:
        """`state` after the entry `kind` with `body`: a ``link-send`` numbered (its result names its ``seq``), or
        an answer taking its operation off the pending; InputError or RulesError name the field at fault."""
        if not isinstance(body, dict):
            raise InputError("body", "must be an object")
        if kind == LINK_SEND:
            return _send(state, body)
        if kind in (LINK_ACK, LINK_REFUSED):
            seq = body.get("seq")
            if not isinstance(seq, int) or seq not in state.pending:
                raise RulesError("seq", f"operation {seq!r} is not waiting for the authority")
            pending = dict(state.pending)
            del pending[seq]
            if kind == LINK_ACK:
                if not isinstance(body.get("result"), dict):
                    raise InputError("result", "must be an object")
                return replace(state, pending=MappingProxyType(pending), acked=state.acked + 1), {}
            for k in ("field", "message"):
                if not isinstance(body.get(k), str):
                    raise InputError(k, "must be text")
            return replace(state, pending=MappingProxyType(pending), refused=state.refused + 1), {}
        raise InputError("kind", f"{kind!r} is not an entry of a link journal")

    def check(self, state: Outbox) -> None:
        """The outbox's invariant: no pending operation is numbered at or beyond the next sequence number."""
        if any(s >= state.next_seq for s in state.pending):
            raise AssertionError("a pending operation has a sequence number not yet given")

    def snapshot(self, state: Outbox) -> dict[str, Any]:
        """`state` as JSON for a checkpoint: sorted, so equal states give equal digests."""
        return {"next_seq": state.next_seq, "acked": state.acked, "refused": state.refused,
                "pending": [state.pending[s].to_dict() for s in sorted(state.pending)],
                "open_rounds": {m: {r: _booking_dict(b) for r, b in sorted(rs.items())}
                                for m, rs in sorted(state.open_rounds.items())},
                "last_round": dict(sorted(state.last_round.items())),
                "locks": {c: list(v) for c, v in sorted(state.locks.items())}}

    def restore(self, data: dict[str, Any]) -> Outbox:
        """The outbox of a snapshot (`snapshot`'s form, or an older one without ``locks`` or ``round_meters``)."""
        pending = {p["seq"]: Sent(p["seq"], p["kind"], p["meter"], p["linked"], MappingProxyType(p["body"]),
                                  MappingProxyType(p["approval"]) if "approval" in p else None)
                   for p in data["pending"]}
        rounds = {m: MappingProxyType({r: (tuple((w[0], w[1]) for w in b["wagers"]), tuple(b["on_dealer"]),
                                           tuple(b.get("round_meters", ())))  # none: one meter, or an older snapshot
                                       for r, b in rs.items()})
                  for m, rs in data["open_rounds"].items()}
        return Outbox(data["next_seq"], MappingProxyType(pending), MappingProxyType(rounds),
                      MappingProxyType(dict(data["last_round"])),
                      MappingProxyType({c: (v[0], v[1]) for c, v in data.get("locks", {}).items()}),
                      data["acked"], data["refused"])


def _booking_dict(booking: OpenBooking) -> dict[str, Any]:
    wagers, on_dealer, round_meters = booking
    d: dict[str, Any] = {"wagers": [list(w) for w in wagers], "on_dealer": list(on_dealer)}
    if round_meters:  # only when there are: older snapshots keep their exact form (checkpoint digests)
        d["round_meters"] = list(round_meters)
    return d


def send_body(meter: str, linked: str, op: Op, approval: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``link-send`` body of meter operation `op` (controller.meter.ops) on a linked meter. A booking of a
    round of several meters names them beside the operation too (``round_meters``): the outbox keeps them
    with the open round (a booking journaled before it did names them in the operation only, and is kept
    without them, as it was then: the checkpoints of older journals keep their digests)."""
    fields = op.to_dict()
    fields.pop("kind", None)
    body: dict[str, Any] = {"meter": meter, "linked": linked, "kind": op.kind, "body": fields}
    if isinstance(op, BookContributions) and op.round_meters:
        body["round_meters"] = list(op.round_meters)
    if approval is not None:
        body["approval"] = dict(approval)
    return body


def _send(state: Outbox, body: dict[str, Any]) -> tuple[Outbox, dict[str, Any]]:
    kind, fields = body.get("kind"), body.get("body")
    if not isinstance(kind, str) or kind not in TABLE_OPS:
        raise InputError("kind", f"{kind!r} is not an operation a table sends to the authority")
    meter, linked = _meter_id(body, "meter"), _meter_id(body, "linked")
    if not isinstance(fields, dict):
        raise InputError("body", "must be an object")
    op = op_from_dict({"kind": kind, **fields}, "body")  # well formed, or nothing is journaled
    approval = body.get("approval")
    if approval is not None and not (isinstance(approval, dict) and set(approval) == {"by", "mac"}
                                     and all(isinstance(v, str) for v in approval.values())):
        raise InputError("approval", "must be {by, mac}")
    seq = state.next_seq
    rounds = dict(state.open_rounds)
    open_ = dict(rounds.get(meter, {}))
    last = state.last_round
    if "round_meters" in body and (not isinstance(op, BookContributions)
                                   or body["round_meters"] != list(op.round_meters) or not op.round_meters):
        raise InputError("round_meters", "must be the round_meters of the booking, when it has any")
    if isinstance(op, BookContributions):
        kept = tuple(op.round_meters) if "round_meters" in body else ()  # see send_body
        open_[op.round_id] = (tuple(op.wagers), tuple(op.on_dealer), kept)
        last = MappingProxyType({**last, meter: op.round_id})
    elif isinstance(op, VoidRound | CloseRound):
        open_.pop(op.round_id, None)
    locks = state.locks
    if isinstance(op, LockPercentAward):
        locks = MappingProxyType({**locks, op.claim: (meter, op.round_id)})
    elif isinstance(op, PayLockedAward | ReleaseLockedAward):
        locks = MappingProxyType({c: v for c, v in locks.items() if c != op.claim})
    rounds[meter] = MappingProxyType(open_)
    pending = {**state.pending, seq: Sent(seq, kind, meter, linked, MappingProxyType(fields),
                                          None if approval is None else MappingProxyType(approval))}
    new = replace(state, next_seq=seq + 1, pending=MappingProxyType(pending), last_round=last, locks=locks,
                  open_rounds=MappingProxyType({m: r for m, r in rounds.items() if r}))
    return new, {"seq": seq}


def _meter_id(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise InputError(name, "must be a meter id")
    return value


__all__ = ["LINK_ACK", "LINK_SEND", "OpenBooking", "Outbox", "OutboxReducer", "Sent", "send_body"]

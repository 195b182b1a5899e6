"""What the authority decides of one table's operation, as pure functions of the operation and the linked meters:
whether the table may ask it (its own rounds and claims; a percentage only by a lock), what a payment's approval
must name, whether a journaled entry is this operation sent again and the answer it gets, and the win it shows on
every sign."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from controller.errors import InputError
from controller.ledger.reader import Found
from controller.linkproto import approval, schema
from controller.meter.journal import LINK_REFUSED, Meters
from controller.money import parse_cents

WIN_KINDS = {"lock-percent-award": "locked", "pay-locked-award": "paid", "release-locked-award": "released"}
AWARD_KINDS = frozenset({"pay-fixed-award", "lock-percent-award", "pay-locked-award", "pay-percent-award"})
FOREIGN_FIELDS = ("body.table", "body.round_id", "body.claim")  # a refusal naming one: another table's round or claim

Problem = tuple[str, str]  # (field, why): an InputError's arguments


def foreign(op: schema.Op, meters: Meters) -> Problem | None:
    """A table may only move its own rounds and its own claims: the round ids it books are its own
    (``<table>-r<n>``), a claim it locks is of that round (``<round>-c<k>...``), and a lock it pays or releases is
    one it took (claim ids are no secret: every table hears them on the win topic)."""
    if "table" in op.body and op.body["table"] != op.table:
        return "body.table", f"is {op.body['table']!r}: table {op.table} may only send its own operations"
    rid = op.body.get("round_id")
    if isinstance(rid, str) and not re.fullmatch(re.escape(op.table) + r"-r[0-9]+", rid):  # not a mere prefix:
        return "body.round_id", f"{rid!r} is not a round of table {op.table}"  # table "cs" is not "cs-rail"'s
    claim = op.body.get("claim")
    if op.kind == "lock-percent-award" and isinstance(claim, str) and isinstance(rid, str) \
            and not re.fullmatch(re.escape(rid) + r"-c[0-9]+:[0-9]+", claim):
        return "body.claim", f"{claim!r} is not a claim of round {rid}"
    if op.kind in ("pay-locked-award", "release-locked-award") and isinstance(claim, str):
        meter = meters.get(op.meter)
        lock = meter.locked.get(claim) if meter is not None else None
        if lock is not None and lock.table != op.table:
            return "body.claim", f"{claim!r} is a lock of table {lock.table}, not of table {op.table}"
    return None


def not_a_later_share(op: schema.Op, meters: Meters) -> Problem | None:
    """A table takes a percentage of a linked meter only by locking it (§ 605a.8: the amount is fixed at the
    authority at the hit). `pay-percent-award` is accepted for a later share of an award on the dealer's hand
    only (§ 639a.12(e)(2)): one whose first share a lock took from the meter and paid, so that nothing more is
    taken from the meter."""
    if op.kind != "pay-percent-award":
        return None
    b = op.body
    rid, seat, shares = b.get("round_id"), b.get("seat"), b.get("shares")
    meter = meters.get(op.meter)
    booking = meter.open_rounds.get(rid) if meter is not None and isinstance(rid, str) else None
    if booking is not None and isinstance(seat, int) and isinstance(shares, int) and shares > 1:
        on_dealer = {booking.wagers[i][0] for i in booking.on_dealer if i < len(booking.wagers)}
        if (seat in on_dealer or not booking.on_dealer) and any(
                (sh.hand, sh.award, sh.shares) == (b.get("hand"), b.get("award"), shares) for sh in booking.shared):
            return None
    return "kind", ("a table takes a percentage of a linked meter by locking it (lock-percent-award, then "
                    "pay-locked-award); pay-percent-award pays only a later share of a shared award whose first "
                    "share was paid, to a seat that wagered on the dealer's hand")


def approved_terms(op: schema.Op, meters: Meters) -> dict[str, Any] | None:
    """What a payment's approval must name: its body, and for `pay-locked-award` the lock it pays as held now (its
    number, nonce and amount: an approval of another lock does not verify). None: no such lock, nothing to pay
    (the meter refuses it, naming why)."""
    if op.kind != "pay-locked-award":
        return op.body
    meter = meters.get(op.meter)
    claim = op.body.get("claim")
    lock = meter.locked.get(claim) if meter is not None and isinstance(claim, str) else None
    if lock is None:
        return None
    return {**op.body, **approval.lock_terms(lock, lock.number, lock.nonce, lock.amount_cents)}


def is_alarm(op: schema.Op, field: str) -> bool:
    """Whether a refusal is of what an honest table never sends: an award the authority refuses (other than for its
    approval), or another table's round or claim."""
    return (op.kind in AWARD_KINDS and field != "approval") or field in FOREIGN_FIELDS


def digest(op: schema.Op) -> str:
    """What a table's operation was (kind, meter and body), for a refusal journaled without them."""
    text = json.dumps([op.kind, op.meter, op.body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def same_operation(op: schema.Op, done: Found, op_digest: str) -> bool:
    """Whether the journal's entry under the operation's key is this operation (a table resending it), and not
    another one sent first under the same number."""
    if done.kind == LINK_REFUSED:
        body = done.body if isinstance(done.body, dict) else {}
        if "op" in body:  # the whole operation as sent, approval included: a copy with another approval is another
            return bool(body["op"] == op_digest)
        older = body.get("operation")  # journaled before: kind, meter and body only
        return older is None or older == digest(op)  # refusals journaled before the digest: taken as the same
    if done.kind != op.kind or not isinstance(done.body, dict):
        return False
    if done.body.get("approval") != op.approval:  # a payment's approval is part of what was applied
        return False
    added = ("approval", "nonce")  # what the authority journals beside the table's body
    return {k: v for k, v in done.body.items() if k not in added} == \
        {k: v for k, v in {"meter": op.meter, **op.body}.items() if k not in added}


def answer(op: schema.Op, done: Found, op_digest: str) -> schema.Ack | schema.Refused:
    """The answer to an operation sent again: the journaled outcome, as first answered."""
    if done.kind == LINK_REFUSED:
        return schema.Refused(op.seq, str(done.body.get("field", "")), str(done.body.get("message", "")), op_digest)
    return schema.Ack(op.seq, done.seq, done.result if isinstance(done.result, dict) else {}, op_digest)


def hit_of(op: schema.Op, meters: Meters) -> tuple[int, int]:
    """(seat, shares) of a hit: in a lock's body, or in the lock that a payment or release settles."""
    if isinstance(op.body.get("seat"), int):
        shares = op.body.get("shares", 1)
        return op.body["seat"], shares if isinstance(shares, int) else 1
    meter = meters.get(op.meter)
    claim = op.body.get("claim")
    lock = meter.locked.get(claim) if meter is not None and isinstance(claim, str) else None
    return (lock.seat, lock.shares) if lock is not None else (0, 1)


def win(op: schema.Op, entry: int, result: dict[str, Any], seat: int, shares: int) -> schema.Win:
    """A hit for every sign of the link; an award shared on the dealer's hand (§ 639a.12(e)(2)) as the signs of
    its own table show it: the dealer's position (seat 0) and the whole award."""
    try:
        cents = parse_cents(result.get("amount", "0"), "amount")
    except InputError:
        cents = 0
    if shares > 1:
        seat, cents = 0, cents * shares
    return schema.Win(op.meter, op.table, seat, cents, str(op.body.get("claim", "")), WIN_KINDS[op.kind], entry)


__all__ = ["AWARD_KINDS", "FOREIGN_FIELDS", "WIN_KINDS", "Problem", "answer", "approved_terms", "digest", "foreign",
           "hit_of", "is_alarm", "not_a_later_share", "same_operation", "win"]

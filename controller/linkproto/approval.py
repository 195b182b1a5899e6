"""Approvals the link authority can verify itself: a supervisor's approval of a payment from a linked meter,
signed at the table with a key only the supervisor's secret gives.

A table's MQTT credentials let it send operations; they must not let it pay a jackpot. So a payment from a
linked meter (`pay-locked-award`, and `pay-percent-award` for a later share) carries an approval: who approved it
and an HMAC-SHA256 over what it pays, under the supervisor's approval key. The key is derived from the
supervisor's secret with scrypt (a salt of the supervisor's name, fixed parameters), at the table, in the moment
the supervisor types the secret, and never kept there; the authority holds the key (its configuration's
`[[approvers]]`, made with `progressivectl approval-key`) and checks the MAC before it applies the payment.

What it stops: whoever holds a table's MQTT password, or runs the broker, cannot make an approval (no secret,
no key), cannot reuse one, and cannot change what it pays. A payment of a locked award names the lock by its
number on the meter, which the meter never gives twice (controller.meter: LockedAward.number), and by the random
nonce the authority gave it, so an approval replayed for a lock taken again under the same claim id does not
verify, even on an authority whose journal was wiped or put back from a copy (its numbers start again); a later share names its round, seat,
hand and award, and exists only after the first share of that award was paid with an approval of its own, and
a seat's share is paid once. What it does not: someone in control of a table box while a supervisor types a secret there can capture it
(docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from controller.meter.ops import LockPercentAward
from controller.meter.state import LockedAward
from controller.money import format_cents

# The approval key: scrypt at a fixed cost, so that the table (which derives it from the typed secret) and the
# authority's configuration (made once) agree; about a tenth of a second.
KDF_N, KDF_R, KDF_P = 2**14, 8, 1
KEY_BYTES = 32
APPROVED_KINDS = frozenset({"pay-locked-award", "pay-percent-award"})
_WHAT = {  # the fields of each payment an approval is bound to (with the table and the linked meter)
    # lock, nonce: the number the meter gave the lock and the random value the authority gave it; the rest is what
    # the lock is for (lock_terms): the authority pays only a lock that holds what the supervisor saw
    "pay-locked-award": ("claim", "lock", "nonce", "approved_by", "round_id", "seat", "hand", "award", "percent",
                         "shares", "amount", "cards"),
    "pay-percent-award": ("round_id", "seat", "hand", "award", "percent", "shares", "approved_by"),
}


def approval_key(name: str, secret: str) -> bytes:
    """The approval key of supervisor `name` with `secret` (slow: a tenth of a second; not on an event loop)."""
    salt = f"progressive-approval/1/{name}".encode()
    return hashlib.scrypt(secret.encode(), salt=salt, n=KDF_N, r=KDF_R, p=KDF_P, dklen=KEY_BYTES,
                          maxmem=64 * 1024 * 1024)


def encode_key(key: bytes) -> str:
    return "approval-key$" + key.hex()


def decode_key(text: object) -> bytes:
    """A key as `encode_key` wrote it; ValueError otherwise (the message never repeats the text)."""
    if not isinstance(text, str) or not text.startswith("approval-key$"):
        raise ValueError("must be the line `progressivectl approval-key` prints (approval-key$...)")
    try:
        key = bytes.fromhex(text.removeprefix("approval-key$"))
    except ValueError:
        raise ValueError("is not an approval key: its hex digits are damaged") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"is not an approval key: {len(key)} bytes, not {KEY_BYTES}")
    return key


def lock_terms(lock: LockPercentAward | LockedAward, number: int, nonce: str, amount_cents: int) -> dict[str, Any]:
    """What a locked award is for, as a supervisor's approval of its payment names it: the lock (its number and
    nonce), the round, seat, hand, its cards, award, percentage and shares, and the amount of one share. The table takes them
    from its own lock and the authority's answer to it; the authority from the lock it holds (LockedAward)."""
    return {"lock": number, "nonce": nonce, "round_id": lock.round_id, "seat": lock.seat, "hand": lock.hand,
            "award": lock.award, "percent": f"{lock.percent.numerator}/{lock.percent.denominator}",
            "shares": lock.shares, "amount": format_cents(amount_cents), "cards": lock.cards}


def _message(kind: str, table: str, linked: str, body: Mapping[str, Any]) -> bytes:
    fields = {k: body.get(k) for k in _WHAT[kind]}
    return json.dumps(["progressive-approval/2", kind, table, linked, fields], sort_keys=True,
                      separators=(",", ":")).encode()


def sign(key: bytes, kind: str, table: str, linked: str, body: Mapping[str, Any]) -> dict[str, str]:
    """The approval of payment `body` (an operation's fields) of `kind`, by `body["approved_by"]`."""
    mac = hmac.new(key, _message(kind, table, linked, body), "sha256").hexdigest()
    return {"by": str(body.get("approved_by")), "mac": mac}


def check(keys: Mapping[str, bytes], kind: str, table: str, linked: str, body: Mapping[str, Any],
          approval: object) -> str | None:
    """Why the payment is not approved (a problem to refuse it with), or None when it is."""
    if kind not in APPROVED_KINDS:
        return None
    if not isinstance(approval, Mapping) or not isinstance(approval.get("by"), str) \
            or not isinstance(approval.get("mac"), str):
        return "carries no approval the authority can verify (a table of an older version, or none was given)"
    by = approval["by"]
    if by != body.get("approved_by"):
        return f"its approval is by {by!r}, the payment says {body.get('approved_by')!r}"
    key = keys.get(by)
    if key is None:
        return f"{by!r} is not an approver of this authority"
    mac = approval["mac"]
    if len(mac) != 64 or not all(ch in "0123456789abcdef" for ch in mac):
        return f"the approval by {by!r} is not an HMAC-SHA256 in hex"
    want = hmac.new(key, _message(kind, table, linked, body), "sha256").hexdigest()
    if not hmac.compare_digest(want, mac):
        return f"the approval by {by!r} does not verify (not made with their secret, or for another payment)"
    return None


__all__ = ["APPROVED_KINDS", "approval_key", "check", "decode_key", "encode_key", "lock_terms", "sign"]

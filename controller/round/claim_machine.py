"""The lifecycle of a round's jackpot claims: a pure function ``step(claims, input) -> ClaimStep``, as the round
machine is for wagers.

A verified claim (controller.round.claims) enters as `NewClaim`; the machine decides what happens to it and
says so in effects that the shell carries out in order, feeding each outcome back as the next input:

    locking  (a linked meter's percentage award: Lock each, the amounts are the authority's)  -> pending
    pending  (awaits a supervisor: § 639a.11(c)(5)(iii), (6)(ii))  -> Approve -> paying, or Reject -> rejected
             (a claim still locking may be rejected too)
    paying   (Pay each payout; paid by the table at once when no supervisor is needed)        -> paid
    voided   (the round is voided while the claim is locking or pending)
    refused  (the link authority refused the lock)

Every change of status is journaled first (`Record`, under the key ``<claim id>:<event>``) and only then
carried out, so a restart finds each claim as it was (`restore`): a pending claim waits again, a claim being
paid is paid to the end (each payout has its own key, so none is paid twice), a lock being taken is waited for,
and a lock of a claim that ended unpaid goes back to the meter. Every share of a shared award is paid, or none.

The win lights follow the claims: a seat's light is on while a claim that pays it is neither rejected, voided
nor refused (`WinLight` when that changes). A refusal raises RulesError (or InputError for a malformed
request) and changes nothing.

A step says everything the shell needs, so that an approval is decided here once: each `Pay` carries the
payout's meter operation, journal key and signed approval; `Won` what the sign shows; the step the claims'
`Face` (what the sign shows while a claim waits), the statuses that ended and the claim's description. The
shell reports a batch of payments back at once (`PaymentsMade`, or `PayRefused` with the payouts paid before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from controller.awards import PercentOfMeter, parse_award
from controller.errors import RulesError
from controller.meter import ops as meter_ops
from controller.round.claims import (
    OPEN,
    Claim,
    RoundClaims,
    claim_refusal,
    lock_op,
    payout_key,
    payout_op,
    status_text,
)
from controller.round.model import Note
from controller.round.settlement import Payout

EVENTS = ("claimed", "locked", "approved", "paid", "rejected", "voided", "refused", "share-refused",
          "reapproved")
REPEATED = frozenset({"share-refused", "reapproved"})  # events a claim may go through more than once


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    """The table that pays and the time its payments carry: the shell reads its clock once for a step (a step
    given none says which payouts to pay, not with which operation)."""

    table: str
    at: datetime


@dataclass(frozen=True)
class ToSign:
    """A payment as the supervisor approves it: its operation, and for a locked award the lock as it was sent, its
    number and nonce at the authority and the amount the supervisor saw (controller.linkproto.approval)."""

    index: int
    op: meter_ops.Op
    lock: meter_ops.LockPercentAward | None
    number: int
    nonce: str
    amount_cents: int


# The approver's signature of a payment a link authority verifies, (by, mac), or None for one it does not: an HMAC
# with the approver's key, a pure function.
Signer = Callable[[ToSign], tuple[str, str] | None]


@dataclass(frozen=True)
class NewClaim:
    """A claim verified by controller.round.claims.verify or verify_dealer. `linked`: its meter is a linked
    meter, whose percentage awards are locked at the link authority first (§ 605a.8). `by`: who claimed it,
    "dealer" or "shoe" (a hit the shoe detected always waits for a person)."""

    claim: Claim
    linked: bool = False
    by: str = "dealer"
    stamp: Stamp | None = None


@dataclass(frozen=True)
class Locked:
    """The link authority locked payout `index` of the claim for `amount_cents` (each share, when shared), as its
    lock `number` on the meter (0: an authority that does not number its locks)."""

    claim_id: str
    index: int
    amount_cents: int
    number: int = 0
    nonce: str = ""


@dataclass(frozen=True)
class LockRefused:
    claim_id: str
    index: int
    problem: str
    # The authority holds another operation under the lock's number (someone sent it first in the table's name):
    # whatever that took under the claim's id goes back to the meter too.
    number_taken: bool = False


@dataclass(frozen=True)
class Approve:
    """A supervisor approved the claim; `approvals`: the signed approvals of its payouts that a link authority
    verifies, (payout, by, mac) each (none for a table's own meter), or `sign` makes them here, with the locks as
    they were sent (`sent_locks`, by payout) where the journal holds them; `approver`: the authority verifies
    approvals by `by`. `void_requested`: the round is to be voided (§ 667a.8(h)), why."""

    claim_id: str
    by: str
    approvals: tuple[tuple[int, str, str], ...] = ()
    stamp: Stamp | None = None
    sign: Signer | None = None
    sent_locks: Mapping[int, meter_ops.LockPercentAward] = field(default_factory=dict)
    approver: bool = True
    void_requested: str | None = None


@dataclass(frozen=True)
class Paid:
    """Payout `index` of the claim is journaled (or was, before a restart)."""

    claim_id: str
    index: int


@dataclass(frozen=True)
class PaymentsMade:
    """Payouts `indices` of the claim are journaled: the shell's report of the `Pay` it carried out, at once."""

    claim_id: str
    indices: tuple[int, ...]


@dataclass(frozen=True)
class PayRefused:
    """The link authority refused payout `index` (its approval did not verify); `paid`: the claim's payouts paid
    before it that the shell has not reported yet."""

    claim_id: str
    index: int
    problem: str
    paid: tuple[int, ...] = ()


@dataclass(frozen=True)
class Reject:
    claim_id: str
    by: str
    reason: str


@dataclass(frozen=True)
class VoidClaims:
    """The round is voided: every claim still locking or pending ends with it (its wagers are returned)."""

    reason: str


Input = NewClaim | Locked | LockRefused | Approve | Paid | PaymentsMade | PayRefused | Reject | VoidClaims


# --- effects -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """Journal the claim as it is now, under the key ``<claim id>:<event>`` (`key`), before the effects after it."""

    claim: Claim
    event: str
    key: str = field(init=False)

    def __post_init__(self) -> None:
        c = self.claim
        key = f"{c.id}:{self.event}"
        if self.event in REPEATED:  # may come more than once: the approvals and refusals so far tell them apart
            key = f"{c.id}:{self.event}-{len(c.approvals)}" + "".join(f"-{i}" for i in c.refused)
        object.__setattr__(self, "key", key)


@dataclass(frozen=True)
class Lock:
    """Lock payout `index` at the link authority (a percentage of a linked meter; the first share of a shared
    one); answer with Locked or LockRefused."""

    claim_id: str
    index: int


@dataclass(frozen=True)
class Pay:
    """Journal payout `index` of the claim on `meter`: the operation `op` under the key `key`, with its signed
    approval (by, mac) where the link authority verifies one; answer with PaymentsMade (or Paid)."""

    claim_id: str
    index: int
    meter: str
    op: meter_ops.Op | None
    key: str
    signed: tuple[str, str] | None
    payout: Payout


@dataclass(frozen=True)
class Release:
    """Give the lock of payout `index` back to the meter, if it was taken (nothing of the claim is paid)."""

    claim_id: str
    index: int
    by: str
    reason: str


@dataclass(frozen=True)
class WinLight:
    seat: int
    on: bool


@dataclass(frozen=True)
class Won:
    """Every payout of the claim is journaled: the sign shows the win of `seat` (0: the dealer's hand)."""

    claim_id: str
    seat: int
    amount_cents: int
    by: str


Effect = Record | Lock | Pay | Release | WinLight | Won | Note


@dataclass(frozen=True)
class Face:
    """What the table shows of a round's claims: the seat and amount the sign shows PENDING for (a claim that
    waits for a supervisor or its lock, or is being paid after one), and whether a claim awaits approval."""

    seat: int | None = None
    amount_cents: int | None = None
    pending: bool = False


@dataclass(frozen=True)
class ClaimStep:
    """The claims after a step, the effects to carry out in order, what the table shows (`face`), the statuses
    claims ended in at this step (`ended`: rejected, voided, refused), and the description of the claim a
    NewClaim or an Approve given a Stamp was about (`description`)."""

    claims: RoundClaims
    effects: tuple[Effect, ...] = ()
    face: Face = Face()
    ended: tuple[str, ...] = ()
    description: str = ""


# --- the machine -------------------------------------------------------------------------------


def step(rc: RoundClaims, e: Input) -> ClaimStep:
    out = _step(rc, e)
    before = {x.id: x.status for x in rc.claims}
    ended = tuple(x.status for x in out.claims.claims if x.status != before.get(x.id) and x.status in ENDED)
    described = ""
    if isinstance(e, NewClaim | Approve) and e.stamp is not None:  # the shell's: its answer names the claim
        cid = e.claim.id if isinstance(e, NewClaim) else e.claim_id
        described = out.claims.get(cid).describe()
    return replace(out, face=face(out.claims), ended=ended, description=described)


def _step(rc: RoundClaims, e: Input) -> ClaimStep:
    match e:
        case NewClaim():
            return _new(rc, e)
        case Locked():
            return _locked(rc, e)
        case LockRefused():
            return _lock_refused(rc, e)
        case Approve():
            return _approve(rc, e)
        case Paid():
            return _paid(rc, PaymentsMade(e.claim_id, (e.index,)))
        case PaymentsMade():
            return _paid(rc, e)
        case PayRefused():
            return _pay_refused(rc, e)
        case Reject():
            return _reject(rc, e)
        case VoidClaims():
            return _void(rc, e)
    raise TypeError(f"not an input of the claim machine: {e!r}")


ENDED = ("rejected", "voided", "refused")


def face(rc: RoundClaims) -> Face:
    """What the sign shows of the round's claims (PENDING with the seat and amount), and whether one awaits."""
    c = rc.open
    waiting = c is not None and (c.status != "paying" or c.needs_approval or c.claimed_by == "shoe")
    pending = rc.pending is not None
    return Face(c.seat, c.amount_cents, pending) if waiting and c is not None else Face(pending=pending)


def _pays(rc: RoundClaims, c: Claim, stamp: Stamp | None) -> list[Effect]:
    """Pay each payout of `c` not paid yet: its operation, its key and its latest signed approval."""
    return [Pay(c.id, i, c.meter, None if stamp is None else payout_op(c, i, stamp.table, stamp.at),
                _payout_key(rc, c, i), c.approval_of(i), c.payouts[i]) for i in c.unpaid]


def _payout_key(rc: RoundClaims, c: Claim, i: int) -> str:
    """The key of payout `i` of the claim: the hand's (payout_key), or, for a hand claimed again after a claim of
    it ended refused, the hand's and the new claim's (the refused payment keeps its key, and its outcome)."""
    key = payout_key(c.round_id, c.seat, c.spot, i)
    again = any(x.status == "refused" and x.seat == c.seat and x.spot == c.spot and x.id != c.id for x in rc.claims)
    key = f"{key}:{c.id}" if again else key
    n = c.approvals_of(i)  # approved again after a refusal: a payment of its own, under a key of its own
    return f"{key}:approval-{n}" if n > 1 else key


def _signed(c: Claim, e: Approve) -> tuple[tuple[int, str, str], ...]:
    """The approvals `e.sign` makes of the claim's payouts (approved by `c.by`), each bound to its one payment."""
    assert e.sign is not None and e.stamp is not None, "a signed approval names its table and time"
    out = []
    for i, p in enumerate(c.payouts):
        op = payout_op(c, i, e.stamp.table, e.stamp.at)
        lock = None
        if i in c.locks:  # the one lock it pays, as it was sent, and what the supervisor saw it is for
            lock = e.sent_locks.get(i) or lock_op(c, i, e.stamp.table, e.stamp.at)
        number, nonce = next(((n, nonce) for j, n, nonce in c.lock_numbers if j == i), (0, ""))
        signed = e.sign(ToSign(i, op, lock, number, nonce, p.amount))
        if signed is not None:
            out.append((i, *signed))
    return tuple(out)


def lock_indices(payouts: Iterable[Payout]) -> tuple[int, ...]:
    """The payouts a linked meter locks: each percentage of the meter, and of a shared one (the dealer's hand,
    § 639a.12(e)(2)) only the first share, which takes the whole award from the meter at once; the later shares
    are paid from what it took."""
    out: list[int] = []
    seen: set[tuple[str, str, int]] = set()
    for i, p in enumerate(payouts):
        if not isinstance(parse_award(p.award, "award"), PercentOfMeter):
            continue
        group = (p.award, p.hand, p.shared_by)
        if p.shared_by > 1 and group in seen:
            continue
        seen.add(group)
        out.append(i)
    return tuple(out)


def _share_group(p: Payout) -> tuple[str, str, int]:
    return (p.award, p.hand, p.shared_by)


def _new(rc: RoundClaims, e: NewClaim) -> ClaimStep:
    c = e.claim
    if c.round_id != rc.round_id:
        raise RulesError("claim", f"{c.id} is a claim of round {c.round_id}, not of round {rc.round_id}")
    why = claim_refusal(rc)
    if why is not None:
        raise RulesError("claim", why)
    if any(x.id == c.id for x in rc.claims):
        raise RulesError("claim", f"{c.id} was claimed already")
    locks = lock_indices(c.payouts) if e.linked else ()
    if locks:
        c = replace(c, status="locking", claimed_by=e.by, locks=locks, locked=(), paid=(), by="")
        effects: list[Effect] = [Record(c, "claimed"), *(Lock(c.id, i) for i in locks)]
    elif c.needs_approval or e.by == "shoe":
        c = replace(c, status="pending", claimed_by=e.by, locks=(), locked=(), paid=(), by="")
        effects = [Record(c, "claimed")]
    else:  # paid by the table at once (§ 639a.11(c)(6)(i)): the claimer's word is the approval
        c = replace(c, status="paying", claimed_by=e.by, locks=(), locked=(), paid=(), by=e.by)
        effects = [Record(c, "claimed"), *_pays(rc, c, e.stamp)]
    return _with(rc, c, effects)


def _locked(rc: RoundClaims, e: Locked) -> ClaimStep:
    c = rc.get(e.claim_id)
    if e.index not in c.locks:
        raise RulesError("index", f"payout {e.index} of {c.id} is not locked at the link authority")
    if e.index in c.locked:
        return ClaimStep(rc)  # an answer heard twice
    if c.status != "locking":  # voided meanwhile: its Release went out with the void, after the lock
        return ClaimStep(rc.with_claim(replace(c, locked=(*c.locked, e.index))))
    group = _share_group(c.payouts[e.index])
    shared = c.payouts[e.index].shared_by > 1
    payouts = tuple(replace(p, amount=e.amount_cents) if i == e.index or (shared and _share_group(p) == group
                                                                         and i not in c.locks) else p
                    for i, p in enumerate(c.payouts))
    numbers = (*c.lock_numbers, (e.index, e.number, e.nonce)) if e.number else c.lock_numbers
    c = replace(c, payouts=payouts, locked=(*c.locked, e.index), lock_numbers=numbers)
    if set(c.locked) < set(c.locks):
        return ClaimStep(rc.with_claim(c))
    c = replace(c, status="pending")  # a percentage of the meter always waits for a supervisor
    return _with(rc, c, [Record(c, "locked")])


def _lock_refused(rc: RoundClaims, e: LockRefused) -> ClaimStep:
    c = rc.get(e.claim_id)
    if c.status != "locking":
        return ClaimStep(rc)
    c = replace(c, status="refused", reason=f"the link authority refused the lock of payout {e.index}: {e.problem}")
    releases = [Release(c.id, i, "controller", "another lock of the claim was refused") for i in c.locks
                if i != e.index or e.number_taken]
    return _with(rc, c, [Record(c, "refused"), *releases, Note("claim refused", {"claim": c.id, "error": c.reason})])


def _approve(rc: RoundClaims, e: Approve) -> ClaimStep:
    c = rc.get(e.claim_id)
    again = c.status == "paying" and bool(c.refused)  # a later share the authority refused: approved again
    if e.void_requested is not None and c.status == "pending":
        raise RulesError("claim_id", f"round {rc.round_id} is to be voided ({e.void_requested}): its hands are void "
                                     "(§ 667a.8(h)); reject the claim, or a supervisor voids the round")
    if c.status != "pending" and not again:
        raise RulesError("claim_id", f"{c.id} {status_text(c)}")
    if e.sign is not None and not e.approver:  # refused here, before anything moves
        raise RulesError("supervisor", f"{e.by} is not an approver of the link authority: its payments from the "
                                       "linked meter would be refused; another supervisor approves, or the "
                                       "authority's approvers_file lists them (progressivectl approval-key)")
    approvals = e.approvals if e.sign is None else _signed(replace(c, by=e.by), e)
    if again:
        # The way out of a claim whose later share the authority refused after the first was paid: a supervisor it
        # verifies approves every payout not paid yet again (the refused ones and those waiting behind them, whose
        # approvals were the same supervisor's); each approval is a payment of its own (its key names it).
        fresh = tuple(a for a in approvals if a[0] not in c.paid)
        c = replace(c, by=e.by, approvals=(*c.approvals, *fresh), refused=())
        return _with(rc, c, [Record(c, "reapproved"), *_pays(rc, c, e.stamp)])
    c = replace(c, status="paying", by=e.by, approvals=approvals)
    return _with(rc, c, [Record(c, "approved"), *_pays(rc, c, e.stamp)])


def _paid(rc: RoundClaims, e: PaymentsMade) -> ClaimStep:
    c = rc.get(e.claim_id)
    if c.status != "paying":
        raise RulesError("claim_id", f"{c.id} {status_text(c)}: nothing of it is being paid")
    bad = [i for i in e.indices if not 0 <= i < len(c.payouts)]
    if bad:
        raise RulesError("index", f"{c.id} has no payout {bad[0]}")
    if set(e.indices) <= set(c.paid):
        return ClaimStep(rc)
    c = replace(c, paid=tuple(sorted({*c.paid, *e.indices})))
    if c.unpaid:
        return ClaimStep(rc.with_claim(c))
    c = replace(c, status="paid")
    return _with(rc, c, [Record(c, "paid"), Won(c.id, c.seat, c.amount_cents, c.by)])


def _pay_refused(rc: RoundClaims, e: PayRefused) -> ClaimStep:
    """A payment the link authority refused (final): with nothing of the claim paid, the claim ends refused and its
    locks go back to the meter (the hand may be claimed again, and approved by a supervisor the authority verifies);
    with a share already paid it stays being paid, the payout marked refused, until a supervisor the authority
    verifies approves it again (_approve)."""
    c = rc.get(e.claim_id)
    if c.status != "paying" or e.index in c.paid or e.index in c.refused:
        return ClaimStep(rc)
    c = replace(c, paid=tuple(sorted({*c.paid, *(i for i in e.paid if 0 <= i < len(c.payouts))})))
    if c.paid:  # the claim stays being paid until a supervisor the authority verifies approves the payout again
        c = replace(c, refused=tuple(sorted((*c.refused, e.index))))
        return _with(rc, c, [Record(c, "share-refused"),
                             Note("payout refused", {"claim": c.id, "payout": e.index, "error": e.problem})])
    c = replace(c, status="refused", reason=f"the link authority refused payout {e.index}: {e.problem}")
    releases = [Release(c.id, i, "controller", "its payment was refused") for i in c.locks]
    return _with(rc, c, [Record(c, "refused"), *releases, Note("claim refused", {"claim": c.id, "error": c.reason})])


def _reject(rc: RoundClaims, e: Reject) -> ClaimStep:
    """A supervisor rejects a claim that waits for them, or for its lock (its lock is given back once taken)."""
    c = rc.get(e.claim_id)
    if c.status not in ("pending", "locking"):
        raise RulesError("claim_id", f"{c.id} {status_text(c)}")
    c = replace(c, status="rejected", by=e.by, reason=e.reason)
    return _with(rc, c, [Record(c, "rejected"), *(Release(c.id, i, e.by, e.reason) for i in c.locks)])


def claim_answer(c: Claim, wait_s: float) -> tuple[str, str] | None:
    """The answer to a claim once its step's effects are carried out, (message, status); RulesError for a claim
    that ended unpaid meanwhile; None for any other. `wait_s`: how long the answer waited for the link authority's lock."""
    match c.status:
        case "paid":
            return f"{c.describe()}: paid by the table", "paid"
        case "pending":
            return f"{c.describe()}: awaiting a supervisor's approval (progressivectl approve {c.id})", "pending"
        case "locking":
            return (f"{c.describe()}: the link authority has not answered the lock within {wait_s:.0f} s; it waits in "
                    f"the outbox and the claim waits for it (progressivectl approve {c.id} once it is pending)",
                    "locking")
        case "paying":  # approved meanwhile: the approval answers for it
            return f"{c.describe()}: approved by {c.by}, being paid", "paying"
        case "refused":
            raise RulesError("claim", f"{c.id}: {c.reason}")
        case "rejected" | "voided":  # decided meanwhile by a supervisor
            raise RulesError("claim", f"{c.id} {status_text(c)}")
    return None


def void_refusal(rc: RoundClaims) -> str | None:
    """Why the round cannot be voided because of its claims, or None: a round in which an award was paid (or is
    being paid) can no longer be voided (docs/rounds.md; the meter refuses the reversal)."""
    for c in rc.claims:
        if c.status in ("paying", "paid") or c.paid:
            what = "is being paid" if c.status == "paying" else "was paid"
            return f"{c.id} {what} in round {rc.round_id}: the round can no longer be voided; settle it"
    return None


def settle_refusal(rc: RoundClaims) -> str | None:
    """Why the round cannot be settled because of its claims, or None."""
    c = rc.open
    if c is None:
        return None
    then = "approve or reject it before the round is settled" if c.status == "pending" else "settle the round after it"
    return f"{c.id} {status_text(c)}: {then}"


def _void(rc: RoundClaims, e: VoidClaims) -> ClaimStep:
    why = void_refusal(rc)
    if why is not None:
        raise RulesError("round_id", why)
    effects: list[Effect] = []
    out = rc
    for c in rc.claims:
        if c.status not in OPEN:
            continue
        c = replace(c, status="voided", reason=e.reason)
        effects += [Record(c, "voided"), *(Release(c.id, i, "controller", f"round voided: {e.reason}")
                                           for i in c.locks)]
        out = out.with_claim(c)
    return ClaimStep(out, tuple(effects) + _lights(rc, out))


def restore(round_id: str, first: int, journaled: Iterable[Claim], stamp: Stamp | None = None) -> ClaimStep:
    """The claims of round `round_id` as their last journal records left them, and what finishing them takes:
    a lock being taken is waited for (sent again: the same key applies once), a claim being paid is paid to
    the end, a lock of a claim that ended unpaid goes back to the meter (if it was taken), lights as the claims
    say."""
    rc = RoundClaims(round_id, first=first)
    effects: list[Effect] = []
    for c in journaled:
        rc = rc.with_claim(c)
        if c.status == "locking":
            effects += [Lock(c.id, i) for i in c.locks if i not in c.locked]
        elif c.status == "paying":
            effects += _pays(rc, c, stamp)
        elif c.status in ("rejected", "voided", "refused"):
            effects += [Release(c.id, i, "controller", f"claim {c.status} before the controller stopped")
                        for i in c.locks]
    return ClaimStep(rc, tuple(effects) + _lights(RoundClaims(round_id, first=first), rc), face(rc))


def _with(rc: RoundClaims, c: Claim, effects: list[Effect]) -> ClaimStep:
    out = rc.with_claim(c)
    return ClaimStep(out, tuple(effects) + _lights(rc, out))


def _lights(before: RoundClaims, after: RoundClaims) -> tuple[Effect, ...]:
    was, now = before.lit, after.lit
    return tuple(WinLight(s, True) for s in sorted(now - was)) + tuple(WinLight(s, False) for s in sorted(was - now))


__all__ = ["EVENTS", "Approve", "ClaimStep", "Effect", "Face", "Input", "Lock", "LockRefused", "Locked", "NewClaim",
           "Note", "Paid", "Pay", "PayRefused", "PaymentsMade", "Record", "Reject", "Release", "Signer", "Stamp", "ToSign",
           "VoidClaims", "WinLight", "Won", "claim_answer", "face", "lock_indices", "restore", "settle_refusal", "step", "void_refusal"]

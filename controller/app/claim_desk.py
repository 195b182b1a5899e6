"""The claim desk: the one owner of a round's jackpot claims at a card table.

It verifies a claim (controller.round.claims), moves it through its lifecycle with the pure claim machine
(controller.round.claim_machine) and carries out what the machine says, in order: records in the table's
journal, locks at the link authority, payouts and releases, each through the meter's port (meter_port.py), so
that every award kind, shared ones included, is paid the same way on a local and on a linked meter.

Every decision is taken synchronously, before any await: a claim's status moves in the machine (a second
approval, or a rejection after an approval, is refused at once), and only then are its effects carried out,
one claim's effects one after another under that claim's own lock. A refusal is an answer to the caller; an
effect that fails unexpectedly is logged with its traceback and leaves the claim where the journal says it is,
for a restart (or `restore`) to finish. A restart finds the round's claims in the journal (`restore`): a
pending claim waits again, a payment cut short is finished, a lock being taken is waited for.

The desk also tells the sign (PENDING while a claim waits, WIN when one is paid) and the win lights.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import structlog

from controller.app.meter_port import Meters, booking_key
from controller.app.metrics import Metrics
from controller.app.sign import Sign
from controller.cards import cards_str
from controller.config.model import TableConfig
from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.ledger.chain import utc_now
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import JournalReader
from controller.link.client import LinkRefused
from controller.linkproto import approval
from controller.meter import ops as meter_ops
from controller.meter.journal import Meters as MeterStates
from controller.money import format_cents, parse_cents
from controller.positions import DEALER, DEALER_POSITION
from controller.round import claim_machine as cm
from controller.round.claims import (
    Claim,
    Draws,
    RoundClaims,
    claim_from_json,
    claim_refusal,
    claim_spot,
    lock_op,
    payout_key,
    payout_op,
    release_op,
    status_text,
    verify,
    verify_dealer,
)
from controller.round.journal import CLAIM, claim_body
from controller.round.model import TableRules
from controller.service.views import payout_json

log = structlog.get_logger("table")

T = TypeVar("T")
RENUMBER_TRIES = 3  # a payment whose number someone else took is sent again under a new one this many times
LINK_ANSWER_S = 5.0  # how long a claim's answer waits for the link authority to lock its award (the command
# line waits 10 s for an answer; the authority answers in milliseconds when it is up)


class PayoutFailed(Exception):
    """A payout of an approved claim could not be journaled (the claim stays approved, unpaid: its log says why)."""


@dataclass(frozen=True)
class RoundView:
    """What the desk needs to know of the round: its id, whether it is being dealt, its accepted wagers, and the
    void a wrong stub count asked for (§ 667a.8(h): its hands are void, so none is claimed or paid)."""

    round_id: str
    dealing: bool
    phase: str
    accepted: Mapping[tuple[int, str], int]
    void_requested: str | None = None


class ClaimDesk:
    def __init__(self, cfg: TableConfig, rules: TableRules, meters: Meters, ledger: Ledger[MeterStates], *,
                 round_now: Callable[[], RoundView], win_light: Callable[[int, bool], None], sign: Sign,
                 metrics: Metrics, spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]],
                 on_change: Callable[[], None] = lambda: None, on_paid: Callable[[], None] = lambda: None) -> None:
        self.cfg = cfg
        self.rules = rules
        self.meters = meters
        self.ledger = ledger
        self._round_now = round_now
        self._win_light = win_light
        self._sign = sign
        self._metrics = metrics
        self._spawn = spawn
        self._on_change = on_change
        self._on_paid = on_paid
        self.state = RoundClaims("")
        self._verifying = False  # a claim is between its first check and its verdict (awaits in between)
        self._locks: dict[str, asyncio.Lock] = {}
        self._paying: set[tuple[str, int]] = set()  # linked payments sent whose answer is awaited
        self._refused: set[tuple[str, int]] = set()  # linked payments the authority refused: not sent again here
        self._awaiting = 0  # answers of the link authority awaited in the background (locks and payments)
        self._running = 0
        self._idle = asyncio.Condition()
        self._changed = asyncio.Event()  # set and replaced at every step of the machine

    # --- the round ---------------------------------------------------------------------------------

    def open(self, round_id: str) -> None:
        """A new round opened for betting: no claims yet; the last round's win lights go off."""
        for seat in sorted(self.state.lit):
            self._win_light(seat, False)
        self.state = RoundClaims(round_id)
        self._locks.clear()
        self._show()

    async def restore(self, round_id: str) -> None:
        """The claims of round `round_id` (resumed after a restart) as the journal left them; what finishing
        them takes runs in the background (a payment cut short is finished, a lock is waited for)."""
        claims, first = await asyncio.to_thread(self._journaled_claims, round_id)
        out = cm.restore(round_id, first, claims)
        self.state = out.claims
        effects = self._dispatch(out.effects)
        for c in claims:
            log.warning("claim found in the journal", claim=c.id, status=c.status, seat=c.seat, spot=c.spot,
                        amount=format_cents(c.amount_cents))
        self._show()
        if effects:
            self._background(self._run(effects), f"claims-restored:{round_id}")

    def _journaled_claims(self, round_id: str) -> tuple[list[Claim], int]:
        """The last record of each claim of the round in the table's journal, in the order they were claimed,
        and the number the round's next claim takes (after any claim number either journal holds)."""
        prefix = f"{round_id}-c"
        last: dict[str, Claim] = {}
        order: list[str] = []
        number = 0
        for port in self.meters.ports():
            with JournalReader(port.db_path) as r:
                for key in r.keys(prefix):
                    n = key[len(prefix):].split(":", 1)[0]
                    number = max(number, int(n)) if n.isdigit() else number
                if port is self.meters.local:
                    for _key, found in r.entries(prefix):
                        if found.kind != CLAIM:
                            continue
                        c = claim_from_json(found.body["claim"])
                        if c.id not in last:
                            order.append(c.id)
                        last[c.id] = c
        return [last[i] for i in order], number + 1

    @property
    def busy(self) -> str | None:
        """What the desk is in the middle of (a claim being verified, a claim's records or payouts being
        journaled), or None: the round's end waits for it."""
        if self._verifying:
            return "a claim is being verified"
        if self._running:
            return "a claim's records or payouts are being journaled"
        return None

    def refusal_to_settle(self) -> str | None:
        busy = self.busy
        return f"{busy}: the round is settled after it" if busy else cm.settle_refusal(self.state)

    def refusal_to_void(self) -> str | None:
        """Why the round cannot be voided now because of its claims: something paid (for good), or busy (for
        a moment: `busy` says so)."""
        why = cm.void_refusal(self.state)
        if why is not None:
            return why
        busy = self.busy
        return f"{busy}: the round is voided after it" if busy else None

    def void(self, reason: str) -> None:
        """The round is voided: every claim still locking or pending ends with it (journaled, its locks given
        back), in the background; RulesError if an award of the round was paid. `idle` waits for it."""
        out = self._step(cm.VoidClaims(reason))
        if out:
            self._background(self._run(out), f"claims-voided:{self.state.round_id}")

    async def idle(self) -> None:
        """Wait until no effect of any claim is being carried out (before the round's end is journaled)."""
        async with self._idle:
            await self._idle.wait_for(lambda: self._running == 0)

    # --- the control socket's operations -----------------------------------------------------------

    async def claim(self, args: Mapping[str, Any], by: str = "dealer") -> dict[str, Any]:
        """A hit claimed with the cards (§ 639a.11(c)(5)-(6), § 667a.11(d)(2)): a seat's own hand (`seat` a
        number, optionally `spot`), or the dealer's hand for every seat that wagered on it (`seat` "dealer",
        § 639a.12(e)(2)). `by`: "dealer", or "shoe" for a hit detected from the card-reading shoe."""
        view = self._round_now()
        rid = view.round_id
        if not view.dealing:
            raise RulesError("claim", f"round {rid} is {view.phase}: hits are claimed while it is dealt")
        if self._verifying:
            raise RulesError("claim", "another claim is being verified: claims are settled one at a time")
        if self.state.round_id != rid:
            raise RulesError("claim", f"round {rid} is not ready for claims yet: try again")
        if view.void_requested is not None:
            raise RulesError("claim", f"round {rid} is to be voided ({view.void_requested}): its hands are void "
                                      "(§ 667a.8(h)); a supervisor voids it")
        seat = args.get("seat")
        if isinstance(seat, int) and not isinstance(seat, bool) and seat > self.rules.seats:
            raise InputError("seat", f"{seat} is not a seat of table {self.rules.table} (1..{self.rules.seats})")
        why = claim_refusal(self.state)
        if why is not None:
            raise RulesError("claim", why)
        self._verifying = True
        try:
            spot = claim_spot(self.rules, view.accepted, seat, args.get("spot"))
            rule = self.rules.spots[spot]
            if not self.meters.keeps(rule.meter):
                raise RulesError("spot", f"meter {rule.meter} is not kept at this table: its hits are not claimed here")
            port = self.meters.port(rule.meter)
            position = seat if isinstance(seat, int) else DEALER_POSITION  # claim_spot took a number or DEALER
            known = any(c.spot == spot and c.seat == position for c in self.state.claims)
            if not known and await port.journaled(rule.meter, payout_key(rid, position, spot, 0)):
                who = "the dealer" if seat == DEALER else f"seat {seat}"
                raise RulesError("seat", f"the {spot} hand of {who} in round {rid} is paid already")
            wcfg = self.cfg.wagers[rule.wager]
            draws = await self._draws(rid, rule.meter) if wcfg.wager.magic_and_lucky else Draws()
            view = self._round_now()
            if view.round_id != rid or not view.dealing or self.state.round_id != rid:
                raise RulesError("claim", f"round {rid} ended while the claim was being verified")
            if view.void_requested is not None:
                raise RulesError("claim", f"round {rid} is to be voided ({view.void_requested})")
            meter_units, reset_units = port.amounts(rule.meter)  # as it stands now, after any wait
            common: dict[str, Any] = dict(
                game=self.cfg.game, wager=wcfg.wager, paytable=wcfg.paytable, meter_units=meter_units,
                reset_units=reset_units, spot=spot, meter=rule.meter, cards=args.get("cards"), draws=draws)
            on_spot = {st: c for (st, sp), c in view.accepted.items() if sp == spot}
            if seat == DEALER:
                claim = verify_dealer(self.state, wagers=on_spot, **common)
            else:
                claim = verify(self.state, seat=seat, wager_cents=view.accepted.get((position, spot)),
                               others=on_spot, **common)
            if port.linked and not port.pays_later_shares() and any(
                    p.shared_by > 1 for i, p in enumerate(claim.payouts) if i in cm.lock_indices(claim.payouts)):
                raise RulesError("claim", "the link authority pays no later share of an award shared on the "
                                          "dealer's hand (it speaks an older version of the link protocol): "
                                          "upgrade it, or settle the hand by hand")
            effects = self._step(cm.NewClaim(claim, port.linked, by))
        finally:
            self._verifying = False
            self._on_change()
        c = self.state.get(claim.id)
        log.info("claim verified", claim=c.id, seat=c.seat, spot=spot, amount=format_cents(c.amount_cents),
                 approval=c.needs_approval, by=by, status=c.status)
        await self._run(effects)
        if (current := self._get(claim.id)) is not None and current.status == "locking":
            await self._until(lambda: (self._get(claim.id) or claim).status != "locking", LINK_ANSWER_S)
        c = self._get(claim.id) or claim
        shown = {"claim_id": c.id, **({"draws": draws.to_json()} if wcfg.wager.magic_and_lucky else {})}
        match c.status:
            case "paid":
                return {"message": f"{c.describe()}: paid by the table", **shown, "status": "paid"}
            case "pending":
                return {"message": f"{c.describe()}: awaiting a supervisor's approval (progressivectl approve "
                                   f"{c.id})", **shown, "status": "pending"}
            case "locking":
                return {"message": f"{c.describe()}: the link authority has not answered the lock within "
                                   f"{LINK_ANSWER_S:.0f} s; it waits in the outbox and the claim waits for it "
                                   f"(progressivectl approve {c.id} once it is pending)", **shown, "status": "locking"}
            case "paying":  # approved meanwhile: the approval answers for it
                return {"message": f"{c.describe()}: approved by {c.by}, being paid", **shown, "status": "paying"}
            case "refused":
                raise RulesError("claim", f"{c.id}: {c.reason}")
            case "rejected" | "voided":  # decided meanwhile by a supervisor
                raise RulesError("claim", f"{c.id} {status_text(c)}")
        raise PayoutFailed(f"{c.id} is {c.status}: its payouts did not all go through; the log says why")

    def needs_approval_key(self, claim_id: object) -> bool:
        """Whether approving the claim takes the supervisor's approval key (its meter is linked: the authority
        verifies the approval, controller.linkproto.approval)."""
        c = next((x for x in self.state.claims if x.id == claim_id), None)
        return c is not None and self.meters.is_linked(c.meter)

    async def approve(self, claim_id: object, who: str, approver_key: bytes | None = None) -> dict[str, Any]:
        c = self.state.get(claim_id)
        view = self._round_now()
        if view.void_requested is not None and c.status == "pending":
            raise RulesError("claim_id", f"round {view.round_id} is to be voided ({view.void_requested}): its hands "
                                         "are void (§ 667a.8(h)); reject the claim, or a supervisor voids the round")
        approvals: tuple[tuple[int, str, str], ...] = ()
        port = self.meters.port(c.meter)
        again = c.status == "paying" and bool(c.refused)  # a later share the authority refused: approved again
        if port.linked and (c.status == "pending" or again) and approver_key is not None:
            assert self.meters.linked is not None
            if not self.meters.linked.is_approver(who):  # refused here, before anything moves
                raise RulesError("supervisor", f"{who} is not an approver of the link authority: its payments from "
                                               "the linked meter would be refused; another supervisor approves, or "
                                               "the authority's approvers_file lists them (progressivectl "
                                               "approval-key)")
            approvals = await self.meters.linked.approvals(replace(c, by=who), self.cfg.table, approver_key)
        effects = self._step(cm.Approve(c.id, who, approvals))
        if again:
            self._refused -= {(c.id, i) for i in c.refused}
        log.info("claim approved" if not again else "claim's refused payouts approved again", claim=c.id, by=who,
                 **({"payouts": list(c.refused)} if again else {}))
        await self._run(effects)
        if port.linked:  # paid when the link authority has verified the approval
            await self._until(lambda: (self._get(c.id) or c).status != "paying", LINK_ANSWER_S)
        c = self._get(c.id) or c
        if c.status == "refused":
            raise RulesError("claim_id", f"{c.id}: {c.reason}; nothing is paid and its lock went back to the meter: "
                                         "claim the hand again, approved by a supervisor the authority verifies")
        if c.status == "paying" and port.linked:
            return {"message": f"{c.describe()}: approved by {who}; the link authority has not confirmed the payment "
                               f"within {LINK_ANSWER_S:.0f} s: it waits in the outbox, and the claim is paid when it "
                               "answers (progressivectl status)", "claim_id": c.id, "status": "paying"}
        if c.status != "paid":
            raise PayoutFailed(f"{c.id} was approved by {who} but not all of it is paid yet; the log says why")
        return {"message": f"{c.describe()}: approved by {who} and paid", "claim_id": c.id}

    async def reject(self, claim_id: object, who: str, reason: str) -> dict[str, Any]:
        c = self.state.get(claim_id)
        effects = self._step(cm.Reject(c.id, who, reason))
        log.warning("claim rejected", claim=c.id, seat=c.seat, by=who, reason=reason)
        await self._run(effects)
        return {"message": f"{c.id} rejected by {who}: nothing paid", "claim_id": c.id}

    def _get(self, claim_id: str) -> Claim | None:
        """The claim of the current round, or None (the round has ended since)."""
        return next((c for c in self.state.claims if c.id == claim_id), None)

    async def _until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait until `predicate` holds (looked at after every step of the machine), at most `timeout` s."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not predicate():
                    await self._changed.wait()

    def claims_json(self) -> list[dict[str, Any]]:
        return [{"claim_id": c.id, "seat": DEALER if c.on_dealer else c.seat, "spot": c.spot, "status": c.status,
                 "amount": format_cents(c.amount_cents), "by": c.by, "claimed_by": c.claimed_by,
                 "description": c.describe(), "cards": cards_str(c.cards), "payouts": [payout_json(p) for p in c.payouts],
                 "total": format_cents(sum(p.amount for p in c.payouts))} for c in self.state.claims]

    # --- the machine and its effects ----------------------------------------------------------------

    def _step(self, event: cm.Input) -> list[cm.Effect]:
        """Run one input through the claim machine (a refusal raises and changes nothing), show what it changed
        at once (lights, sign) and return the effects still to carry out."""
        out = cm.step(self.state, event)
        before = {c.id: c.status for c in self.state.claims}
        self.state = out.claims
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for c in out.claims.claims:
            if c.status != before.get(c.id) and c.status in ("rejected", "voided", "refused"):
                self._metrics.claims.labels(c.status).inc()
        return self._dispatch(out.effects)

    def _dispatch(self, effects: tuple[cm.Effect, ...]) -> list[cm.Effect]:
        later: list[cm.Effect] = []
        for e in effects:
            match e:
                case cm.WinLight(seat=seat, on=on):
                    self._win_light(seat, on)  # § 639a.11(c)(5)(ii): the light the dealer verifies
                case cm.Note(what=what, detail=detail):
                    log.warning(what, **dict(detail))
                case _:
                    later.append(e)
        self._show()
        return later

    def _show(self) -> None:
        c = self.state.open
        waiting = c is not None and (c.status != "paying" or c.needs_approval or c.claimed_by == "shoe")
        self._sign.pending(c.seat if waiting and c else None, c.amount_cents if waiting and c else None)
        self._metrics.claims_pending.set(1 if self.state.pending is not None else 0)
        self._on_change()

    def _background(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._spawn(coro, name)

    async def _run(self, effects: list[cm.Effect]) -> None:
        """Carry out effects in order, each claim's under its own lock, feeding each outcome back into the
        machine; what that gives is carried out next."""
        if not effects:
            return
        self._running += 1
        try:
            queue = deque(effects)
            while queue:
                e = queue.popleft()
                async with self._lock_of(_claim_of(e)):
                    queue.extend(await self._execute(e))
        finally:
            self._running -= 1
            async with self._idle:
                self._idle.notify_all()
            self._on_change()

    def _lock_of(self, claim_id: str) -> asyncio.Lock:
        lock = self._locks.get(claim_id)
        if lock is None:
            lock = self._locks[claim_id] = asyncio.Lock()
        return lock

    async def _execute(self, e: cm.Effect) -> list[cm.Effect]:
        match e:
            case cm.Record(claim=c, event=event):
                await self._record(c, event, e.key)
                return []
            case cm.Lock(claim_id=cid, index=i):
                return await self._lock(cid, i)
            case cm.Pay(claim_id=cid, index=i):
                return await self._pay(cid, i)
            case cm.Release(claim_id=cid, index=i, by=by, reason=reason):
                c = self.state.get(cid)
                port = self.meters.port(c.meter)
                held = c.status == "refused" and i in c.locked and i not in c.paid  # its payment refused
                if await port.release(release_op(c, i, by, reason, utc_now()), c.meter, f"{cid}:release:{i}", held):
                    log.warning("locked award released", claim=cid, payout=i, by=by, reason=reason)
                return []
            case cm.Won(claim_id=cid):
                self._won(self.state.get(cid))
                return []
        raise TypeError(f"not an effect of the claim machine: {e!r}")

    async def _record(self, c: Claim, event: str, key: str) -> None:
        try:
            await self.ledger.submit_async(CLAIM, claim_body(c, event), key)
        except KeyConflict:
            log.warning("claim record journaled before", claim=c.id, event=event)

    async def _lock(self, cid: str, i: int) -> list[cm.Effect]:
        """Send the lock of payout `i` (durable in the outbox, in order with the claim's other operations); its
        answer is awaited in the background, without holding the claim's lock: a rejection or a void meanwhile
        sends its release after it."""
        c = self.state.get(cid)
        if c.status != "locking" or i in c.locked:
            return []  # decided meanwhile: its releases went out with the decision
        port = self.meters.port(c.meter)
        await port.submit(lock_op(c, i, self.cfg.table, utc_now()), c.meter, f"{cid}:lock:{i}")
        self._background(self._await_lock(cid, i), f"lock:{cid}:{i}")
        return []

    @property
    def waiting_on_link(self) -> bool:
        """An answer of the link authority awaited in the background (a lock's, a payment's), or being acted on."""
        return self._awaiting > 0

    async def _await_lock(self, cid: str, i: int) -> None:
        """The authority's answer to a lock, as long as the claim waits for it (the lock applies once, whatever
        the retries: it is asked for under its key)."""
        self._awaiting += 1
        try:
            await self._answer_of_lock(cid, i)
        finally:
            self._awaiting -= 1

    async def _ask_link(self, cid: str, i: int, status: str, what: str,
                        ask: Callable[[Claim], Awaitable[T]]) -> tuple[Claim, T] | None:
        """Ask the link authority for its answer to payout `i`'s lock or payment (`ask`, under the operation's key:
        it applies once, whatever the retries) until it answers, as long as the claim is `status` in its round and
        payout `i` not settled: the claim and the answer, or None once the claim has moved on. A refusal raises
        LinkRefused."""
        rid = cid.rsplit("-c", 1)[0]
        warned = False
        while True:
            c = self._get(cid) if self.state.round_id == rid else None
            if c is None or c.status != status or i in (c.locked if status == "locking" else c.paid):
                return None
            try:
                return c, await ask(c)
            except TimeoutError:
                if not warned:
                    log.warning(f"the link authority has not answered {what} yet: it waits in the outbox", claim=cid,
                                payout=i, seconds=LINK_ANSWER_S)
                    warned = True

    async def _answer_of_lock(self, cid: str, i: int) -> None:
        def ask(c: Claim) -> Awaitable[tuple[int, int, str]]:
            return self.meters.port(c.meter).lock(lock_op(c, i, self.cfg.table, utc_now()), c.meter,
                                                  f"{cid}:lock:{i}", LINK_ANSWER_S)

        event: cm.Input
        try:
            got = await self._ask_link(cid, i, "locking", "a lock", ask)
        except LinkRefused as err:
            event = cm.LockRefused(cid, i, err.problem, number_taken=err.field == "seq")
        else:
            if got is None:
                return
            amount, number, nonce = got[1]
            log.info("award locked at the link authority", claim=cid, payout=i, amount=format_cents(amount),
                     lock=number)
            event = cm.Locked(cid, i, amount, number, nonce)
        if self._get(cid) is None:  # the round ended meanwhile
            return
        await self._run(self._step(event))

    async def _pay(self, cid: str, i: int) -> list[cm.Effect]:
        c = self.state.get(cid)
        if c.status != "paying" or i in c.paid or i in c.refused:
            return []  # decided meanwhile (a payment of the claim refused): nothing more of it is sent
        p = c.payouts[i]
        port = self.meters.port(c.meter)
        op = payout_op(c, i, self.cfg.table, utc_now())
        latest = c.approval_of(i)
        signed = None if latest is None else {"by": latest[0], "mac": latest[1]}
        if port.linked:
            # On a linked meter the authority may refuse an approved payment. So the claim's approved payments go one
            # at a time, each after the one before is confirmed, and its other payouts (an Envy Bonus) only after
            # all of them: a refusal then always comes before anything of the claim is paid, and the claim ends
            # refused whole. _await_payment sends the next one.
            waiting = [j for j in self._approved_unpaid(c) if j != i]
            if waiting and (op.kind not in approval.APPROVED_KINDS or min(waiting) < i):
                return []
        if port.linked and op.kind in approval.APPROVED_KINDS:
            # Paid when the authority says so (it verifies the approval): awaited in the background, the claim
            # being paid meanwhile, as a lock is.
            if (cid, i) in self._paying or (cid, i) in self._refused:
                return []  # sent, and its answer awaited already; or refused, which is final for its key
            await port.submit(op, c.meter, self._payout_key(c, i), signed)  # durable in the outbox, sent
            self._paying.add((cid, i))
            self._background(self._await_payment(cid, i, op, signed), f"pay:{cid}:{i}")
            return []
        try:
            result = await port.submit(op, c.meter, self._payout_key(c, i), signed)
        except KeyConflict:  # paid before a restart (a payment cut short): never twice
            log.warning("payout journaled before: not paid again", claim=cid, seat=p.seat, payout=i)
        except InputError as err:  # the meter refused it (a RulesError too): the claim stays approved, unpaid
            log.error("payout refused by the meter: the claim stays approved and unpaid", claim=cid, seat=p.seat,
                      payout=i, error=str(err))
            raise PayoutFailed(f"{cid}: payout {i} refused by the meter: {err}") from None
        else:
            self._count_payout(c, i, result)
        return self._step(cm.Paid(cid, i))

    def _approved_unpaid(self, c: Claim) -> list[int]:
        """The claim's payouts not paid yet that the link authority verifies an approval of, in order."""
        return [j for j in c.unpaid if payout_op(c, j, self.cfg.table, utc_now()).kind in approval.APPROVED_KINDS]

    async def _await_payment(self, cid: str, i: int, op: meter_ops.Op, signed: dict[str, str] | None) -> None:
        """The authority's answer to a payment from a linked meter, as long as the claim is being paid (asked
        under the payment's key: it applies once, whatever the retries); then the claim's next payouts."""
        self._awaiting += 1
        try:
            try:
                await self._answer_of_payment(cid, i, op, signed)
            finally:
                self._paying.discard((cid, i))
            c = self._get(cid)
            if c is not None and c.status == "paying" and c.unpaid and (cid, i) not in self._refused:
                await self._run([cm.Pay(cid, j) for j in c.unpaid])  # each sent when its turn has come (_pay)
        finally:
            self._awaiting -= 1

    async def _answer_of_payment(self, cid: str, i: int, op: meter_ops.Op, signed: dict[str, str] | None) -> None:
        linked = self.meters.linked
        assert linked is not None

        async def ask(c: Claim) -> dict[str, Any]:
            key = self._payout_key(c, i)
            for n in range(RENUMBER_TRIES + 1):  # the same keys after a restart: each try's answer is journaled
                try:
                    return await linked.pay(op, c.meter, f"{key}:renumbered-{n}" if n else key, signed, LINK_ANSWER_S)
                except LinkRefused as err:
                    if err.field != "seq" or n == RENUMBER_TRIES:
                        raise
                    # Someone sent another operation under this payment's number first (the table's MQTT
                    # password): it was not applied, so it goes again under a new number (the authority alerts).
                    log.error("a payment's operation number was taken by another operation: sent again under a "
                              "new number", claim=cid, payout=i, tries=n + 1)
            raise AssertionError("unreachable")

        event: cm.Input
        try:
            got = await self._ask_link(cid, i, "paying", "a payment", ask)
        except LinkRefused as err:
            self._refused.add((cid, i))
            c = self._get(cid)
            log.error("the link authority refused a payment", claim=cid, payout=i, field=err.field,
                      error=err.problem, paid_before=list(c.paid) if c is not None else [])
            event = cm.PayRefused(cid, i, err.problem)
        else:
            if got is None:
                return
            self._count_payout(got[0], i, got[1])
            event = cm.Paid(cid, i)
        now = self._get(cid)
        if now is None or now.status != "paying":
            log.error("a payment's answer came for a claim no longer being paid", claim=cid, payout=i,
                      answer=type(event).__name__, status=None if now is None else now.status)
            return
        async with self._lock_of(cid):  # stepped between the claim's other effects, never during one
            effects = self._step(event)
        await self._run(effects)

    def _payout_key(self, c: Claim, i: int) -> str:
        """The key of payout `i` of the claim: the hand's (payout_key), or, for a hand claimed again after a claim of
        it ended refused, the hand's and the new claim's (the refused payment keeps its key, and its outcome)."""
        key = payout_key(c.round_id, c.seat, c.spot, i)
        again = any(x.status == "refused" and x.seat == c.seat and x.spot == c.spot and x.id != c.id
                    for x in self.state.claims)
        key = f"{key}:{c.id}" if again else key
        n = c.approvals_of(i)  # approved again after a refusal: a payment of its own, under a key of its own
        return f"{key}:approval-{n}" if n > 1 else key

    def _count_payout(self, c: Claim, i: int, result: Mapping[str, Any]) -> None:
        p = c.payouts[i]
        paid = result.get("paid")
        if paid is not None and parse_cents(paid, "paid") != p.amount:
            log.error("meter paid another amount than the claim showed", claim=c.id, shown=p.amount, paid=paid)
        label = p.award if p.kind == "paytable" else p.kind
        self._metrics.hits.labels(c.meter, label).inc()
        self._metrics.payouts.labels(c.meter, label, p.paid_by).inc(p.amount)

    def _won(self, c: Claim) -> None:
        self._metrics.claims.labels("paid").inc()
        log.info("claim paid", claim=c.id, seat=c.seat, amount=format_cents(c.amount_cents), by=c.by)
        self._sign.win(self.cfg.table, c.seat, c.amount_cents)
        self._on_paid()

    async def _draws(self, rid: str, meter: str) -> Draws:
        """The Magic Card and Lucky Bonus position of round `rid` as its booking on `meter` recorded them in the
        journal at lock-out (§ 639a.1): a claim pays on what was recorded, also after a restart."""
        if self.state.draws is not None:
            return self.state.draws
        port = self.meters.port(meter)
        body = await port.booking(meter, rid)
        if body is None:
            if rid in self._open_rounds(meter):
                raise RulesError("claim", f"the booking of round {rid} on meter {meter} is not in the journal under "
                                          f"{booking_key(rid, meter)!r}: its Magic Card and Lucky Bonus cannot be "
                                          "read; settle by hand")
            return Draws()  # nothing booked on the meter: no wager to pay
        draws = Draws.from_booking(body, booking_key(rid, meter))
        if self.state.round_id == rid:
            self.state = self.state.with_draws(draws)
        return draws

    def _open_rounds(self, meter: str) -> Mapping[str, Any]:
        if self.meters.is_linked(meter):
            assert self.meters.linked is not None
            return self.meters.linked.link.outbox.open_rounds.get(meter, {})
        return self.ledger.state[meter].open_rounds


def _claim_of(e: cm.Effect) -> str:
    if isinstance(e, cm.Record):
        return e.claim.id
    return getattr(e, "claim_id", "")


__all__ = ["LINK_ANSWER_S", "ClaimDesk", "PayoutFailed", "RoundView"]

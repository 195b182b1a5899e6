"""The claim desk: the one owner of a round's jackpot claims at a card table.

It verifies a claim (controller.round.claims) and moves it through its lifecycle with the pure claim machine
(controller.round.claim_machine), which decides everything in one step. What the step says is carried out in
order, each claim's effects one after another under that claim's own lock (claim_effects.py): the claim's records
in the table's journal (here); its payouts through the meters' ports (claim_payer.py); its awards' locks at the
link authority (claim_locks.py); the lights and the sign (claim_display.py). A restart's claims, and the round's
draws, are read from the journals by claim_records.py.

Every decision is taken synchronously, before any await: a claim's status moves in the machine (a second
approval, or a rejection after an approval, is refused at once), and only then are its effects carried out. A
refusal is an answer to the caller; an effect that fails unexpectedly is logged with its traceback and leaves the
claim where the journal says it is, for a restart (or `restore`) to finish. A restart finds the round's claims in
the journal (`restore`): a pending claim waits again, a payment cut short is finished, a lock being taken is
waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from controller.app import claim_link
from controller.app.claim_display import ClaimDisplay
from controller.app.claim_effects import ClaimEffects
from controller.app.claim_locks import AwardLocks
from controller.app.claim_payer import ClaimPayer, PayoutFailed
from controller.app.claim_records import ClaimRecords
from controller.app.meter_port import Meters
from controller.app.metrics import Metrics
from controller.app.sign import Sign
from controller.cards import cards_str
from controller.config.model import TableConfig
from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.ledger.chain import utc_now
from controller.ledger.errors import KeyConflict
from controller.meter.journal import Meters as MeterStates
from controller.money import format_cents
from controller.positions import DEALER, DEALER_POSITION
from controller.round import claim_machine as cm
from controller.round.claims import (
    Claim,
    Draws,
    RoundClaims,
    claim_refusal,
    claim_spot,
    payout_key,
    verify,
    verify_dealer,
)
from controller.round.journal import CLAIM, claim_body
from controller.round.model import TableRules
from controller.service.views import payout_json

log = structlog.get_logger("table")


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
    """A round's jackpot claims: verified, stepped through the claim machine, their effects carried out in order
    (the records journaled here; payouts, locks, lights and sign by the desk's parts), restored at a restart."""

    def __init__(self, cfg: TableConfig, rules: TableRules, meters: Meters, ledger: Ledger[MeterStates], *,
                 round_now: Callable[[], RoundView], win_light: Callable[[int, bool], None], sign: Sign,
                 metrics: Metrics, spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]],
                 on_change: Callable[[], None] = lambda: None, on_paid: Callable[[], None] = lambda: None) -> None:
        self.cfg = cfg
        self.rules = rules
        self.meters = meters
        self.ledger = ledger
        self._round_now = round_now
        self._spawn = spawn
        self._on_change = on_change
        self._display = ClaimDisplay(cfg.table, sign, metrics, win_light, on_paid)
        self._records = ClaimRecords(meters, ledger)
        awards = AwardLocks(meters, cfg.table, spawn=spawn, claim_now=self._get, feed=self._feed)
        self._awards = awards
        self._payer = payer = ClaimPayer(meters, metrics, cfg.table, spawn=spawn, claim_now=self._get,
                                         feed=self._feed)
        # `_record` looked up at each call: a record may be held on its way to the journal by wrapping the method
        self._effects = ClaimEffects(step=lambda e: self._step(e)[0], record=lambda c, e, k: self._record(c, e, k),
                                     payer=payer, awards=awards, display=self._display, on_change=on_change)
        self.state = RoundClaims("")
        self._verifying = False  # a claim is between its first check and its verdict (awaits in between)
        self._changed = asyncio.Event()  # set and replaced at every step of the machine

    # --- the round ---------------------------------------------------------------------------------

    def open(self, round_id: str) -> None:
        """A new round opened for betting: no claims yet; the last round's win lights go off."""
        self._display.lights_off(self.state.lit)
        self.state = RoundClaims(round_id)
        self._effects.forget()
        self._show(cm.Face())

    async def restore(self, round_id: str) -> None:
        """The claims of round `round_id` (resumed after a restart) as the journal left them; what finishing
        them takes runs in the background (a payment cut short is finished, a lock is waited for)."""
        claims, first = await asyncio.to_thread(self._records.claims, round_id)
        out = cm.restore(round_id, first, claims, cm.Stamp(self.cfg.table, utc_now()))
        self.state = out.claims
        effects = self._dispatch(out.effects)
        for c in claims:
            log.warning("claim found in the journal", claim=c.id, status=c.status, seat=c.seat, spot=c.spot,
                        amount=format_cents(c.amount_cents))
        self._show(out.face)
        if effects:
            self._spawn(self._effects.run(effects), f"claims-restored:{round_id}")

    @property
    def busy(self) -> str | None:
        """What the desk is in the middle of (a claim being verified, a claim's records or payouts being
        journaled), or None: the round's end waits for it."""
        if self._verifying:
            return "a claim is being verified"
        if self._effects.running:
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
        out, _ = self._step(cm.VoidClaims(reason))
        if out:
            self._spawn(self._effects.run(out), f"claims-voided:{self.state.round_id}")

    async def idle(self) -> None:
        """Wait until no effect of any claim is being carried out (before the round's end is journaled)."""
        await self._effects.idle()

    @property
    def _running(self) -> int:
        """How many runs of effects are under way (claim_effects.py)."""
        return self._effects.running

    @property
    def waiting_on_link(self) -> bool:
        """An answer of the link authority awaited in the background (a lock's, a payment's), or being acted on."""
        return self._awards.awaiting > 0 or self._payer.awaiting > 0

    # --- the control socket's operations -----------------------------------------------------------

    async def claim(self, args: Mapping[str, Any], by: str = "dealer") -> dict[str, Any]:
        """A hit claimed with the cards (§ 639a.11(c)(5)-(6), § 667a.11(d)(2)): a seat's own hand (`seat` a
        number, optionally `spot`), or the dealer's hand for every seat that wagered on it (`seat` "dealer",
        § 639a.12(e)(2)). `by`: "dealer", or "shoe" for a hit detected from the card-reading shoe."""
        view = self._round_now()
        self._claimable(view, args.get("seat"))
        self._verifying = True
        try:
            claim, draws = await self._verify(view, args)
            linked = self.meters.is_linked(claim.meter)
            effects, _ = self._step(cm.NewClaim(claim, linked, by, cm.Stamp(self.cfg.table, utc_now())))
        finally:
            self._verifying = False
            self._on_change()
        log.info("claim verified", claim=claim.id, seat=claim.seat, spot=claim.spot,
                 amount=format_cents(claim.amount_cents), approval=claim.needs_approval, by=by,
                 status=(self._get(claim.id) or claim).status)
        await self._effects.run(effects)
        if (current := self._get(claim.id)) is not None and current.status == "locking":
            await self._until(lambda: (self._get(claim.id) or claim).status != "locking", claim_link.LINK_ANSWER_S)
        c = self._get(claim.id) or claim
        answer = cm.claim_answer(c, claim_link.LINK_ANSWER_S)
        if answer is None:
            raise PayoutFailed(f"{c.id} is {c.status}: its payouts did not all go through; the log says why")
        shown = {"claim_id": c.id, **({"draws": draws.to_json()} if draws is not None else {})}
        return {"message": answer[0], **shown, "status": answer[1]}

    def _claimable(self, view: RoundView, seat: object) -> None:
        """Refuse a claim the round or the desk cannot take now, before anything is read."""
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
        if isinstance(seat, int) and not isinstance(seat, bool) and seat > self.rules.seats:
            raise InputError("seat", f"{seat} is not a seat of table {self.rules.table} (1..{self.rules.seats})")
        why = claim_refusal(self.state)
        if why is not None:
            raise RulesError("claim", why)

    async def _verify(self, view: RoundView, args: Mapping[str, Any]) -> tuple[Claim, Draws | None]:
        """The claim verified (controller.round.claims) on the meter as it stands after the journal's answers, and
        the round's draws where its wager pays them."""
        rid, seat = view.round_id, args.get("seat")
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
        draws = await self._draws(rid, rule.meter) if wcfg.wager.magic_and_lucky else None
        view = self._round_now()
        if view.round_id != rid or not view.dealing or self.state.round_id != rid:
            raise RulesError("claim", f"round {rid} ended while the claim was being verified")
        if view.void_requested is not None:
            raise RulesError("claim", f"round {rid} is to be voided ({view.void_requested})")
        meter_units, reset_units = port.amounts(rule.meter)  # as it stands now, after any wait
        common: dict[str, Any] = dict(
            game=self.cfg.game, wager=wcfg.wager, paytable=wcfg.paytable, meter_units=meter_units,
            reset_units=reset_units, spot=spot, meter=rule.meter, cards=args.get("cards"), draws=draws or Draws())
        on_spot = {st: c for (st, sp), c in view.accepted.items() if sp == spot}
        if seat == DEALER:
            claim = verify_dealer(self.state, wagers=on_spot, **common)
        else:
            claim = verify(self.state, seat=seat, wager_cents=view.accepted.get((position, spot)), others=on_spot,
                           **common)
        if port.linked and not port.pays_later_shares() and any(
                p.shared_by > 1 for i, p in enumerate(claim.payouts) if i in cm.lock_indices(claim.payouts)):
            raise RulesError("claim", "the link authority pays no later share of an award shared on the dealer's "
                                      "hand (it speaks an older version of the link protocol): upgrade it, or "
                                      "settle the hand by hand")
        return claim, draws

    def needs_approval_key(self, claim_id: object) -> bool:
        """Whether approving the claim takes the supervisor's approval key (its meter is linked: the authority
        verifies the approval, controller.linkproto.approval)."""
        c = self._get(claim_id)
        return c is not None and self.meters.is_linked(c.meter)

    async def approve(self, claim_id: object, who: str, approver_key: bytes | None = None) -> dict[str, Any]:
        """A supervisor approves the claim: one step of the machine decides it and says how each payout is paid
        (on a linked meter, each payment signed with the supervisor's approval key); the claim is paid after it."""
        found = self._get(claim_id)
        c = found if found is not None else self.state.get(claim_id)  # no such claim: its refusal
        linked = self.meters.is_linked(c.meter)
        again = c.status == "paying" and bool(c.refused)  # a later share the authority refused: approved again
        sign, sent, approver = None, {}, True
        if linked and approver_key is not None and c.status in ("pending", "paying"):
            assert self.meters.linked is not None
            sent = await self._awards.sent(c.id, c.meter, c.locks)
            sign, approver = self._payer.signer(c.meter, approver_key), self.meters.linked.is_approver(who)
        effects, described = self._step(cm.Approve(c.id, who, (), cm.Stamp(self.cfg.table, utc_now()), sign, sent,
                                                   approver, self._round_now().void_requested))
        log.info("claim approved" if not again else "claim's refused payouts approved again", claim=c.id, by=who,
                 **({"payouts": list(c.refused)} if again else {}))
        await self._effects.run(effects)
        if linked:  # paid when the link authority has verified the approval
            await self._until(lambda: (self._get(c.id) or c).status != "paying", claim_link.LINK_ANSWER_S)
        c = self._get(c.id) or c
        if c.status == "refused":
            raise RulesError("claim_id", f"{c.id}: {c.reason}; nothing is paid and its lock went back to the meter: "
                                         "claim the hand again, approved by a supervisor the authority verifies")
        if c.status == "paying" and linked:
            return {"message": f"{described}: approved by {who}; the link authority has not confirmed the payment "
                               f"within {claim_link.LINK_ANSWER_S:.0f} s: it waits in the outbox, and the claim is "
                               "paid when it answers (progressivectl status)", "claim_id": c.id, "status": "paying"}
        if c.status != "paid":
            raise PayoutFailed(f"{c.id} was approved by {who} but not all of it is paid yet; the log says why")
        return {"message": f"{described}: approved by {who} and paid", "claim_id": c.id}

    async def reject(self, claim_id: object, who: str, reason: str) -> dict[str, Any]:
        c = self.state.get(claim_id)
        effects, _ = self._step(cm.Reject(c.id, who, reason))
        log.warning("claim rejected", claim=c.id, seat=c.seat, by=who, reason=reason)
        await self._effects.run(effects)
        return {"message": f"{c.id} rejected by {who}: nothing paid", "claim_id": c.id}

    def _get(self, claim_id: object) -> Claim | None:
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

    def _step(self, event: cm.Input) -> tuple[list[cm.Effect], str]:
        """Run one input through the claim machine (a refusal raises and changes nothing), show what it changed
        at once (lights, sign) and return the effects still to carry out, and the claim's description."""
        out = cm.step(self.state, event)
        self.state = out.claims
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        self._display.ended(out.ended)
        later = self._dispatch(out.effects)
        self._show(out.face)
        return later, out.description

    def _dispatch(self, effects: tuple[cm.Effect, ...]) -> list[cm.Effect]:
        later: list[cm.Effect] = []
        for e in effects:
            match e:
                case cm.WinLight(seat=seat, on=on):
                    self._display.light(seat, on)
                case cm.Note(what=what, detail=detail):
                    log.warning(what, **dict(detail))
                case _:
                    later.append(e)
        return later

    def _show(self, face: cm.Face) -> None:
        self._display.show(face)
        self._on_change()

    async def _feed(self, event: cm.Input) -> None:
        """An answer from the link authority into the machine, stepped between the claim's other effects (never
        during one); what it gives is carried out next."""
        async with self._effects.lock_of(getattr(event, "claim_id", "")):
            effects, _ = self._step(event)
        await self._effects.run(effects)

    async def _record(self, c: Claim, event: str, key: str) -> None:
        try:
            await self.ledger.submit_async(CLAIM, claim_body(c, event), key)
        except KeyConflict:
            log.warning("claim record journaled before", claim=c.id, event=event)

    async def _draws(self, rid: str, meter: str) -> Draws:
        """The round's draws as its booking recorded them (claim_records.py), kept for the round's next claims."""
        if self.state.draws is not None:
            return self.state.draws
        draws = await self._records.draws(rid, meter)
        if self.state.round_id == rid and draws != Draws():
            self.state = self.state.with_draws(draws)
        return draws


__all__ = ["ClaimDesk", "PayoutFailed", "RoundView"]

"""The payment of a claim's payouts through the meters' ports (meter_port.py), as the claim machine's `Pay`
effects say (each payout's operation, its key, its signed approval), so that every award kind, shared ones
included, is paid the same way on a local and on a linked meter; a restart's `Pay` finishes a payment cut
short (the same keys: nothing is paid twice). The payments of one batch are reported to the machine at once.

On the table's own meter the payouts are journaled at once, in order. On a linked meter the authority may
refuse an approved payment: the claim's approved payments go one at a time, each after the one before is
confirmed, and its other payouts (an Envy Bonus) only after all of them, in the background; a refusal then
always comes before anything of the claim is paid, and the claim ends refused whole."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import structlog

from controller.app import claim_link
from controller.app.claim_locks import Feed, Spawn
from controller.app.meter_port import Meters
from controller.app.metrics import Metrics
from controller.errors import InputError
from controller.ledger.errors import KeyConflict
from controller.link.client import LinkRefused
from controller.linkproto import approval
from controller.money import parse_cents
from controller.round import claim_machine as cm
from controller.round.claims import Claim

log = structlog.get_logger("table")

RENUMBER_TRIES = 3  # a payment whose number someone else took is sent again under a new one this many times


class PayoutFailed(Exception):
    """A payout of an approved claim could not be journaled (the claim stays approved, unpaid: its log says why)."""


class ClaimPayer:
    """The claims' payouts paid through the meters' ports, and the signed approvals of a linked meter's payments."""

    def __init__(self, meters: Meters, metrics: Metrics, table: str, *, spawn: Spawn,
                 claim_now: claim_link.ClaimNow, feed: Feed) -> None:
        self._meters = meters
        self._metrics = metrics
        self._table = table
        self._spawn = spawn
        self._claim_now = claim_now
        self._feed = feed
        self._sequences: set[str] = set()  # claims whose linked payments are under way in the background
        self.awaiting = 0  # answers of the link authority awaited in the background

    def signer(self, meter: str, approver_key: bytes) -> cm.Signer:
        """The approver's signature of the payments of `meter` that the link authority verifies
        (controller.linkproto.approval): each bound to the one payment, and a locked award to its one lock."""
        assert self._meters.linked is not None
        linked = self._meters.linked.link.linked[meter]

        def sign(t: cm.ToSign) -> tuple[str, str] | None:
            if t.op.kind not in approval.APPROVED_KINDS:
                return None
            body = t.op.to_dict()
            body.pop("kind")
            if t.lock is not None:  # the one lock it pays, and what the supervisor saw it is for
                body.update(approval.lock_terms(t.lock, t.number, t.nonce, t.amount_cents))
            signed = approval.sign(approver_key, t.op.kind, self._table, linked, body)
            return signed["by"], signed["mac"]

        return sign

    async def pay(self, pays: list[cm.Pay]) -> tuple[cm.PaymentsMade | None, Exception | None]:
        """Pay a batch of one claim's payouts. On the table's own meter: what was paid, and why the rest was not
        (the meter refused it: PayoutFailed; or what failed unexpectedly, raised by the caller once what was paid
        before it is reported). On a linked meter, payouts the authority verifies no approval of: what was paid,
        once each is durable in the outbox; with an approved one: the first payment durable in the outbox before
        this returns (an error raises to the approver), and (None, None): the rest under way in the background,
        which reports to the machine itself."""
        cid = pays[0].claim_id
        if self._meters.is_linked(pays[0].meter):
            if not any(p.op is not None and p.op.kind in approval.APPROVED_KINDS for p in pays):
                # nothing the authority verifies an approval of (a fixed award): each paid once durable in the
                # outbox, and answered paid, as before any approval
                made = await self._linked_payments(pays)
                assert not isinstance(made, cm.PayRefused)  # the authority refuses only an approved payment
                return made, None
            if cid not in self._sequences:  # a batch under way pays what it was given: not sent twice
                first = self._next_linked(cid, pays)
                port = self._meters.linked
                assert port is not None
                if first is not None:
                    assert first.op is not None
                    await port.submit(first.op, first.meter, first.key, _signed(first))  # durable in the outbox, sent
                self._spawn(self._pay_linked(pays, frozenset(() if first is None else (first.index,))), f"pay:{cid}")
                self._sequences.add(cid)  # once spawned: a spawn refused (stopping) leaves the claim to a restart
            return None, None
        paid: list[int] = []
        failed: Exception | None = None
        for p in pays:
            c = self._claim_now(cid)
            if c is None or c.status != "paying" or p.index in c.paid or p.index in c.refused:
                continue  # decided meanwhile
            assert p.op is not None
            try:
                result = await self._meters.local.submit(p.op, p.meter, p.key, _signed(p))
            except KeyConflict:  # paid before a restart (a payment cut short): never twice
                log.warning("payout journaled before: not paid again", claim=cid, seat=p.payout.seat, payout=p.index)
            except InputError as err:  # the meter refused it (a RulesError too): the claim stays approved, unpaid
                log.error("payout refused by the meter: the claim stays approved and unpaid", claim=cid,
                          seat=p.payout.seat, payout=p.index, error=str(err))
                failed = PayoutFailed(f"{cid}: payout {p.index} refused by the meter: {err}")
                break
            except Exception as err:  # noqa: BLE001 (raised by the caller, after the payouts before it are reported)
                failed = err
                break
            else:
                self._count(cid, p, result)
            paid.append(p.index)
        return (cm.PaymentsMade(cid, tuple(paid)) if paid else None), failed

    def _linked_order(self, pays: list[cm.Pay]) -> list[cm.Pay]:
        """The approved payments first, in order, then the others (an Envy Bonus)."""
        return sorted(pays, key=lambda p: (p.op is None or p.op.kind not in approval.APPROVED_KINDS, p.index))

    def _next_linked(self, cid: str, pays: list[cm.Pay]) -> cm.Pay | None:
        """The claim's next payment on a linked meter to send, if it is still being paid."""
        c = self._claim_now(cid)
        if c is None or c.status != "paying":
            return None
        return next((p for p in self._linked_order(pays) if p.index not in c.paid and p.index not in c.refused), None)

    async def _pay_linked(self, pays: list[cm.Pay], sent: frozenset[int]) -> None:
        cid = pays[0].claim_id
        self.awaiting += 1
        try:
            event = await self._linked_payments(pays, sent)
            self._sequences.discard(cid)  # before the machine hears of it: an approval again sends anew
            if event is None:
                return
            now = self._claim_now(cid)
            if now is None or now.status != "paying":
                log.error("a payment's answer came for a claim no longer being paid", claim=cid,
                          answer=type(event).__name__, status=None if now is None else now.status)
                return
            await self._feed(event)
        finally:
            self._sequences.discard(cid)
            self.awaiting -= 1

    async def _linked_payments(self, pays: list[cm.Pay],
                               sent: frozenset[int] = frozenset()) -> cm.PaymentsMade | cm.PayRefused | None:
        """The claim's payments on a linked meter one after another, the approved ones first (those in `sent` are in
        the outbox already): what was paid, or the refusal with what was paid before it; None when nothing was, or
        the claim moved on."""
        cid = pays[0].claim_id
        port = self._meters.linked
        assert port is not None
        paid: list[int] = []
        for p in self._linked_order(pays):
            c = self._claim_now(cid)
            if c is None or c.status != "paying":
                break
            if p.index in c.paid or p.index in c.refused:
                continue
            assert p.op is not None
            if p.index not in sent:
                await port.submit(p.op, p.meter, p.key, _signed(p))  # durable in the outbox, sent
            if p.op.kind not in approval.APPROVED_KINDS:
                self._count(cid, p, {})
                paid.append(p.index)
                continue
            try:  # paid when the authority says so (it verifies the approval)
                got = await claim_link.ask_link(self._claim_now, cid, p.index, "paying", "a payment",
                                                functools.partial(self._ask_payment, p))
            except LinkRefused as err:
                log.error("the link authority refused a payment", claim=cid, payout=p.index, field=err.field,
                          error=err.problem, paid_before=sorted({*c.paid, *paid}))
                return cm.PayRefused(cid, p.index, err.problem, tuple(paid))
            if got is None:
                break
            self._count(cid, p, got[1])
            paid.append(p.index)
        return cm.PaymentsMade(cid, tuple(paid)) if paid else None

    async def _ask_payment(self, p: cm.Pay, c: Claim) -> dict[str, Any]:
        linked = self._meters.linked
        assert linked is not None and p.op is not None
        for n in range(RENUMBER_TRIES + 1):  # the same keys after a restart: each try's answer is journaled
            try:
                return await linked.pay(p.op, p.meter, f"{p.key}:renumbered-{n}" if n else p.key, _signed(p),
                                        claim_link.LINK_ANSWER_S)
            except LinkRefused as err:
                if err.field != "seq" or n == RENUMBER_TRIES:
                    raise
                # Someone sent another operation under this payment's number first (the table's MQTT password):
                # it was not applied, so it goes again under a new number (the authority alerts).
                log.error("a payment's operation number was taken by another operation: sent again under a new "
                          "number", claim=c.id, payout=p.index, tries=n + 1)
        raise AssertionError("unreachable")

    def _count(self, cid: str, p: cm.Pay, result: Mapping[str, Any]) -> None:
        paid = result.get("paid")
        if paid is not None and parse_cents(paid, "paid") != p.payout.amount:
            log.error("meter paid another amount than the claim showed", claim=cid, shown=p.payout.amount, paid=paid)
        label = p.payout.award if p.payout.kind == "paytable" else p.payout.kind
        self._metrics.hits.labels(p.meter, label).inc()
        self._metrics.payouts.labels(p.meter, label, p.payout.paid_by).inc(p.payout.amount)


def _signed(p: cm.Pay) -> dict[str, str] | None:
    return None if p.signed is None else {"by": p.signed[0], "mac": p.signed[1]}


__all__ = ["RENUMBER_TRIES", "ClaimPayer", "PayoutFailed"]

"""A linked meter's percentage awards locked at the link authority for a claim (§ 605a.8): each lock sent, durable
in the table's outbox and in order with the claim's other operations; its answer awaited in the background and
fed to the claim machine; a lock given back when the claim ends unpaid; the locks as they were sent, which an
approval names."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from controller.app import claim_link
from controller.app.meter_port import Meters
from controller.ledger.chain import utc_now
from controller.ledger.reader import JournalReader
from controller.link.client import LinkRefused
from controller.meter.ops import LockPercentAward
from controller.money import format_cents
from controller.round import claim_machine as cm
from controller.round.claims import lock_op, release_op

log = structlog.get_logger("table")

Spawn = Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]]
Feed = Callable[[cm.Input], Awaitable[None]]  # an answer into the claim machine, its effects carried out


class AwardLocks:
    """The locks of claims' awards at the link authority: sent, answered (fed to the machine), given back."""

    def __init__(self, meters: Meters, table: str, *, spawn: Spawn, claim_now: claim_link.ClaimNow,
                 feed: Feed) -> None:
        self._meters = meters
        self._table = table
        self._spawn = spawn
        self._claim_now = claim_now
        self._feed = feed
        self.awaiting = 0  # answers of the link authority awaited in the background

    async def send(self, cid: str, i: int) -> None:
        """Send the lock of payout `i`; its answer is awaited in the background, without holding the claim's lock:
        a rejection or a void meanwhile sends its release after it."""
        c = self._claim_now(cid)
        if c is None or c.status != "locking" or i in c.locked:
            return  # decided meanwhile: its releases went out with the decision
        port = self._meters.port(c.meter)
        await port.submit(lock_op(c, i, self._table, utc_now()), c.meter, f"{cid}:lock:{i}")
        self._spawn(self._await(cid, i), f"lock:{cid}:{i}")

    async def _await(self, cid: str, i: int) -> None:
        """The authority's answer to a lock, as long as the claim waits for it."""
        self.awaiting += 1
        try:
            await self._answer(cid, i)
        finally:
            self.awaiting -= 1

    async def _answer(self, cid: str, i: int) -> None:
        def ask(c: Any) -> Awaitable[tuple[int, int, str]]:
            return self._meters.port(c.meter).lock(lock_op(c, i, self._table, utc_now()), c.meter,
                                                   f"{cid}:lock:{i}", claim_link.LINK_ANSWER_S)

        event: cm.Input
        try:
            got = await claim_link.ask_link(self._claim_now, cid, i, "locking", "a lock", ask)
        except LinkRefused as err:
            event = cm.LockRefused(cid, i, err.problem, number_taken=err.field == "seq")
        else:
            if got is None:
                return
            amount, number, nonce = got[1]
            log.info("award locked at the link authority", claim=cid, payout=i, amount=format_cents(amount),
                     lock=number)
            event = cm.Locked(cid, i, amount, number, nonce)
        if self._claim_now(cid) is None:  # the round ended meanwhile
            return
        await self._feed(event)

    async def release(self, e: cm.Release) -> None:
        """Give the lock of payout `e.index` back to the meter, if it was taken."""
        c = self._claim_now(e.claim_id)
        if c is None:
            return
        port = self._meters.port(c.meter)
        i = e.index
        held = c.status == "refused" and i in c.locked and i not in c.paid  # its payment refused
        if await port.release(release_op(c, i, e.by, e.reason, utc_now()), c.meter, f"{c.id}:release:{i}", held):
            log.warning("locked award released", claim=c.id, payout=i, by=e.by, reason=e.reason)

    async def sent(self, cid: str, meter: str, locks: tuple[int, ...]) -> dict[int, LockPercentAward]:
        """The locks of the claim's payouts `locks` exactly as the link journal sent them (a lock sent by an older
        version carries no cards, and the authority holds it so), by payout; a lock not journaled is left out."""
        if not locks or not self._meters.is_linked(meter):
            return {}
        db = self._meters.port(meter).db_path

        def read() -> dict[int, LockPercentAward]:
            out = {}
            with JournalReader(db) as r:
                for i in locks:
                    found = r.lookup(f"{cid}:lock:{i}")
                    if found is not None and isinstance(found.body, dict) and \
                            found.body.get("kind") == LockPercentAward.kind:
                        out[i] = LockPercentAward.from_dict({"kind": LockPercentAward.kind, **found.body["body"]})
            return out

        return await asyncio.to_thread(read)


__all__ = ["AwardLocks", "Feed", "Spawn"]

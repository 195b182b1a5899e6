"""A claim's question to the link authority: its answer to a lock or a payment, asked until it comes, for as long
as the claim waits for it (each is asked under its operation's key: it applies once, whatever the retries)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from controller.round.claims import Claim

log = structlog.get_logger("table")

T = TypeVar("T")
LINK_ANSWER_S = 5.0  # how long a claim's answer waits for the link authority to lock its award (the command
# line waits 10 s for an answer; the authority answers in milliseconds when it is up)

ClaimNow = Callable[[str], Claim | None]  # the claim of the current round, or None (the round has ended since)


async def ask_link(claim_now: ClaimNow, cid: str, i: int, status: str, what: str,
                   ask: Callable[[Claim], Awaitable[T]]) -> tuple[Claim, T] | None:
    """Ask the link authority for its answer to payout `i`'s lock or payment (`ask`) until it answers, as long as
    the claim is `status` and payout `i` not settled: the claim and the answer, or None once the claim has moved
    on. A refusal raises LinkRefused."""
    warned = False
    while True:
        c = claim_now(cid)
        if c is None or c.status != status or i in (c.locked if status == "locking" else c.paid):
            return None
        try:
            return c, await ask(c)
        except TimeoutError:
            if not warned:
                log.warning(f"the link authority has not answered {what} yet: it waits in the outbox", claim=cid,
                            payout=i, seconds=LINK_ANSWER_S)
                warned = True


__all__ = ["LINK_ANSWER_S", "ClaimNow", "ask_link"]

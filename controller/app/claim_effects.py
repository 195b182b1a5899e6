"""The claim machine's effects carried out in order (controller.round.claim_machine), each claim's one after
another under that claim's own lock, its payouts in one batch: the records journaled (`record`), the locks sent
and given back (claim_locks.py), the payouts paid (claim_payer.py), the wins shown (claim_display.py). Each
outcome goes back into the machine (`step`) and what that gives is carried out next. An effect that fails
unexpectedly raises to the caller and leaves the claim where the journal says it is."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from controller.app.claim_display import ClaimDisplay
from controller.app.claim_locks import AwardLocks
from controller.app.claim_payer import ClaimPayer
from controller.round import claim_machine as cm
from controller.round.claims import Claim

Record = Callable[[Claim, str, str], Awaitable[None]]  # journal the claim after `event` under `key`
Step = Callable[[cm.Input], list[cm.Effect]]  # an outcome into the machine: the effects still to carry out


class ClaimEffects:
    """The effects of the claim machine's steps carried out in order, each claim's under its own lock; `running`
    counts the runs under way and `idle` waits until there are none."""

    def __init__(self, *, step: Step, record: Record, payer: ClaimPayer, awards: AwardLocks, display: ClaimDisplay,
                 on_change: Callable[[], None]) -> None:
        self._step = step
        self._record = record
        self._payer = payer
        self._awards = awards
        self._display = display
        self._on_change = on_change
        self._locks: dict[str, asyncio.Lock] = {}
        self._idle = asyncio.Condition()
        self.running = 0

    def lock_of(self, claim_id: str) -> asyncio.Lock:
        """The claim's own lock: its effects, and the answers stepped between them, one at a time."""
        lock = self._locks.get(claim_id)
        if lock is None:
            lock = self._locks[claim_id] = asyncio.Lock()
        return lock

    def forget(self) -> None:
        """A new round: the last round's claims' locks are let go."""
        self._locks.clear()

    async def idle(self) -> None:
        async with self._idle:
            await self._idle.wait_for(lambda: self.running == 0)

    async def run(self, effects: list[cm.Effect]) -> None:
        """Carry out effects in order, feeding each outcome back into the machine; what that gives is carried out
        next."""
        if not effects:
            return
        self.running += 1
        try:
            queue = deque(effects)
            while queue:
                e = queue.popleft()
                if isinstance(e, cm.Pay):
                    batch = [e]
                    while queue and isinstance(queue[0], cm.Pay) and queue[0].claim_id == e.claim_id:
                        batch.append(queue.popleft())  # type: ignore[arg-type]
                    async with self.lock_of(e.claim_id):
                        queue.extend(await self._pay(batch))
                    continue
                async with self.lock_of(e.claim.id if isinstance(e, cm.Record) else getattr(e, "claim_id", "")):
                    await self._execute(e)
        finally:
            self.running -= 1
            async with self._idle:
                self._idle.notify_all()
            self._on_change()

    async def _execute(self, e: cm.Effect) -> None:
        match e:
            case cm.Record(claim=c, event=event):
                await self._record(c, event, e.key)
            case cm.Lock(claim_id=cid, index=i):
                await self._awards.send(cid, i)
            case cm.Release():
                await self._awards.release(e)
            case cm.Won():
                self._display.won(e)
            case _:
                raise TypeError(f"not an effect of the claim machine: {e!r}")

    async def _pay(self, batch: list[cm.Pay]) -> list[cm.Effect]:
        made, failed = await self._payer.pay(batch)
        effects = self._step(made) if made is not None else []
        if failed is not None:
            raise failed
        return effects


__all__ = ["ClaimEffects"]

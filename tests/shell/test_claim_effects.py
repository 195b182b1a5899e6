"""The claim machine's effects carried out (controller/app/claim_effects.py) with a real payer on a real journal,
a real display and sign: in order, a claim's payouts in one batch whose outcome goes back into the machine, each
claim's effects under its own lock, and a run that fails leaves nothing running."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_claim_display import Out
from test_claim_payer import RID, Table

from controller.app.claim_display import ClaimDisplay
from controller.app.claim_effects import ClaimEffects
from controller.app.claim_locks import AwardLocks
from controller.app.claim_payer import PayoutFailed
from controller.app.sign import Sign
from controller.round import claim_machine as cm
from controller.round.claims import Claim
from controller.round.journal import CLAIM, claim_body
from drivers import events as ev


class Run:
    """ClaimEffects over the table of test_claim_payer.py: the machine's steps and the records it journals."""

    def __init__(self, table: Table) -> None:
        self.table, self.out, self.records, self.changes = table, Out(), [], 0
        self.recorded = asyncio.Event()
        display = ClaimDisplay("CS-07", Sign("CS-07", [self.out]), table.metrics, lambda seat, on: None)
        awards = AwardLocks(table.meters, "CS-07", spawn=table._no_spawn, claim_now=table.claim, feed=table._no_feed)
        self.effects = ClaimEffects(step=self.step, record=self.record, payer=table.payer, awards=awards,
                                    display=display, on_change=self.changed)

    def step(self, event: cm.Input) -> list[cm.Effect]:
        return list(self.table.step(event).effects)

    async def record(self, c: Claim, event: str, key: str) -> None:
        self.records.append((event, c.status, c.paid))
        self.recorded.set()
        await self.table.ledger.submit_async(CLAIM, claim_body(c, event), key)

    def changed(self) -> None:
        self.changes += 1


@pytest.fixture
def table(tmp_path: Path):
    t = Table(tmp_path)
    try:
        yield t
    finally:
        t.ledger.close()


async def test_an_approvals_effects_run_in_order_and_its_payouts_are_reported_at_once(table: Table) -> None:
    await table.book((5, 100), (3, 100))
    pays = table.approved_royal(5, {3: 100})  # the Approve step's Pay effects, and its record:
    run = Run(table)
    await run.effects.run([cm.Record(table.claims.get(f"{RID}-c1"), "approved"), *pays])
    assert run.records == [("approved", "paying", ()), ("paid", "paid", (0, 1))]  # one report of both payouts
    assert [seat for seat, _, _ in table.history()] == [5, 3]
    assert isinstance(run.out.shown, ev.ShowMessage) and run.out.shown.message is ev.SignMessage.WIN
    assert run.effects.running == 0 and run.changes == 1
    await asyncio.wait_for(run.effects.idle(), 1)


async def test_a_claims_effects_wait_for_its_lock(table: Table) -> None:
    await table.book((5, 100))
    table.approved_royal(5, {})
    run = Run(table)
    c = table.claims.get(f"{RID}-c1")
    async with run.effects.lock_of(c.id):  # an answer being stepped for the claim
        task = asyncio.create_task(run.effects.run([cm.Record(c, "approved")]))
        for _ in range(10):
            await asyncio.sleep(0)  # the run has every chance to go on: it waits for the lock
        assert not run.recorded.is_set() and run.effects.running == 1
    await asyncio.wait_for(run.recorded.wait(), 5)
    await task
    assert run.records == [("approved", "paying", ())] and run.effects.running == 0


async def test_a_run_that_fails_leaves_nothing_running(table: Table) -> None:
    pays = table.approved_royal(5, {})  # never booked: the meter refuses the payout
    run = Run(table)
    with pytest.raises(PayoutFailed, match="payout 0 refused by the meter"):
        await run.effects.run(list(pays))
    assert run.effects.running == 0 and run.records == []
    await asyncio.wait_for(run.effects.idle(), 1)

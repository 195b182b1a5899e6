"""The claim payer (controller/app/claim_payer.py) on a real journal of the table's own meters: a claim's payouts
paid as the claim machine's `Pay` effects say and reported at once; a restart's `Pay` of a payment cut short
pays nothing twice; a payout the meter refuses is an answer naming it, with what was paid before it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.app.claim_payer import ClaimPayer
from controller.app.journal import open_ledger
from controller.app.meter_port import LocalMeters, Meters
from controller.app.metrics import Metrics
from controller.config import load_config
from controller.ledger.chain import utc_now
from controller.meter import ops as meter_ops
from controller.round import claim_machine as cm
from controller.round.claims import Claim, RoundClaims, verify

ROOT = Path(__file__).resolve().parents[2]
RID = "CS-07-r1"
ROYAL = ["AS", "KS", "QS", "JS", "TS"]


class Table:
    """The table's journal and meters, the claims of round RID as the machine has them, and a payer."""

    def __init__(self, tmp_path: Path) -> None:
        self.cfg = replace(load_config(ROOT / "config" / "tables" / "caribbean-stud.toml"), state_dir=tmp_path)
        self.ledger = open_ledger(self.cfg)
        self.meters = Meters(LocalMeters(self.ledger), None)
        self.metrics = Metrics("CS-07")
        self.claims = RoundClaims(RID)
        self.payer = ClaimPayer(self.meters, self.metrics, "CS-07", spawn=self._no_spawn, claim_now=self.claim,
                                feed=self._no_feed)

    def _no_spawn(self, coro: Any, name: str) -> Any:
        coro.close()
        raise AssertionError(f"nothing of a table's own meter runs in the background ({name})")

    async def _no_feed(self, event: cm.Input) -> None:
        raise AssertionError(f"a table's own meter reports its payments at once, not {event}")

    def claim(self, cid: str) -> Claim | None:
        return next((c for c in self.claims.claims if c.id == cid), None)

    async def book(self, *wagers: tuple[int, int]) -> None:
        op = meter_ops.BookContributions(RID, "CS-07", wagers, utc_now())
        await self.meters.local.submit(op, "main", f"{RID}:book:main")

    def step(self, event: cm.Input) -> cm.ClaimStep:
        out = cm.step(self.claims, event)
        self.claims = out.claims
        return out

    def approved_royal(self, seat: int, others: dict[int, int]) -> list[cm.Pay]:
        """A royal flush at `seat` on the Progressive Payout Wager, verified, claimed and approved: its Pay."""
        units, reset = self.meters.port("main").amounts("main")
        wcfg = self.cfg.wagers["progressive"]
        c = verify(self.claims, game=self.cfg.game, wager=wcfg.wager, paytable=wcfg.paytable, meter_units=units,
                   reset_units=reset, seat=seat, spot="progressive", meter="main", wager_cents=100, cards=ROYAL,
                   others=others)
        stamp = cm.Stamp("CS-07", utc_now())
        self.step(cm.NewClaim(c, stamp=stamp))
        return [e for e in self.step(cm.Approve(c.id, "floor-1", stamp=stamp)).effects if isinstance(e, cm.Pay)]

    def history(self) -> list[tuple[int, str, int]]:
        return [(h.seat, h.award, h.amount_cents) for h in self.ledger.state["main"].history if h.round_id == RID]


@pytest.fixture
def table(tmp_path: Path):
    t = Table(tmp_path)
    try:
        yield t
    finally:
        t.ledger.close()


async def test_a_claims_payouts_are_paid_in_order_and_reported_at_once(table: Table) -> None:
    await table.book((5, 100), (3, 100))
    pays = table.approved_royal(5, {3: 100})
    assert [p.index for p in pays] == [0, 1] and [p.payout.kind for p in pays] == ["paytable", "envy"]
    made, failed = await table.payer.pay(pays)
    assert failed is None and made == cm.PaymentsMade(f"{RID}-c1", (0, 1))
    assert table.history() == [(5, "100% of meter", pays[0].payout.amount), (3, pays[1].payout.award,
                                                                              pays[1].payout.amount)]
    hits = table.metrics.registry.get_sample_value("progressive_hits_total", {"meter": "main", "award": "envy"})
    assert hits == 1
    done = table.step(made)
    assert done.claims.get(f"{RID}-c1").status == "paid" and any(isinstance(e, cm.Won) for e in done.effects)


async def test_a_payment_cut_short_is_finished_and_nothing_is_paid_twice(table: Table) -> None:
    await table.book((5, 100), (3, 100))
    pays = table.approved_royal(5, {3: 100})
    made, _ = await table.payer.pay(pays[:1])  # the process stops after the first payout
    assert made == cm.PaymentsMade(f"{RID}-c1", (0,)) and len(table.history()) == 1
    again = cm.restore(RID, 2, table.claims.claims, cm.Stamp("CS-07", utc_now()))  # as the journal left it
    table.claims = again.claims
    resent = [e for e in again.effects if isinstance(e, cm.Pay)]
    assert [(p.index, p.key) for p in resent] == [(p.index, p.key) for p in pays]  # the same keys
    made, failed = await table.payer.pay(resent)
    assert failed is None and made == cm.PaymentsMade(f"{RID}-c1", (0, 1))  # the first was journaled before
    assert [seat for seat, _, _ in table.history()] == [5, 3]


async def test_a_payout_the_meter_refuses_is_an_answer_naming_it(table: Table) -> None:
    pays = table.approved_royal(5, {})  # the round was never booked on the meter: it refuses to pay it
    made, failed = await table.payer.pay(pays)
    assert made is None and failed is not None and "payout 0 refused by the meter" in str(failed)
    assert table.history() == [] and table.claims.get(f"{RID}-c1").status == "paying"


async def test_an_unexpected_failure_is_raised_after_the_payouts_before_it_are_reported(table: Table) -> None:
    """A payout whose journal write fails unexpectedly (not a refusal of the meter): what was paid before it is
    still reported to the machine, and the failure is the caller's to raise."""
    await table.book((5, 100), (3, 100))
    pays = table.approved_royal(5, {3: 100})
    assert len(pays) == 2  # the royal flush, and the Envy Bonus it earns seat 3
    submit, calls = table.meters.local.submit, []

    async def fails_second(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise OSError("disk I/O error")
        return await submit(*args, **kw)

    table.meters.local.submit = fails_second  # type: ignore[method-assign]
    made, failed = await table.payer.pay(pays)
    assert made == cm.PaymentsMade(pays[0].claim_id, (pays[0].index,))
    assert isinstance(failed, OSError) and str(failed) == "disk I/O error"


class _LinkedOutbox:
    """A linked meter whose outbox cannot take the payment (a journal write fails)."""

    def keeps(self, meter: str) -> bool:
        return meter == "main"

    async def submit(self, *args: Any, **kw: Any) -> Any:
        raise OSError("disk I/O error")


async def test_a_linked_payment_is_durable_in_the_outbox_before_the_approval_goes_on(table: Table) -> None:
    """On a linked meter the first approved payment is written to the outbox before `pay` returns (the rest waits
    for the authority in the background): an outbox that cannot take it is an error to the approver, not an
    answer that the payment waits in the outbox."""
    await table.book((5, 100))
    pays = table.approved_royal(5, {})
    spawned: list[str] = []

    def spawn(coro: Any, name: str) -> Any:
        coro.close()
        spawned.append(name)

    payer = ClaimPayer(Meters(table.meters.local, _LinkedOutbox()), table.metrics, "CS-07",  # type: ignore[arg-type]
                       spawn=spawn, claim_now=table.claim, feed=table._no_feed)
    with pytest.raises(OSError, match="disk I/O error"):
        await payer.pay(pays)
    assert spawned == []  # nothing waits for an answer to a payment never sent

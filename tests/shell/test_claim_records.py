"""The claim records (controller/app/claim_records.py) on a real journal: the last record of each claim of a round
in the order they were claimed and the number the next claim takes, as a restart reads them; the round's draws
as its booking recorded them at lock-out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from test_claim_payer import RID, Table

from controller.app.claim_records import ClaimRecords
from controller.cards import parse_card
from controller.ledger.chain import utc_now
from controller.meter import ops as meter_ops
from controller.round import claim_machine as cm
from controller.round.claims import Draws
from controller.round.journal import CLAIM, claim_body


@pytest.fixture
def table(tmp_path: Path):
    t = Table(tmp_path)
    try:
        yield t
    finally:
        t.ledger.close()


async def test_a_restart_finds_each_claims_last_record_in_claim_order_and_the_next_number(table: Table) -> None:
    await table.book((5, 100), (3, 100))
    table.approved_royal(5, {})
    first = table.claims.get(f"{RID}-c1")
    third = replace(first, id=f"{RID}-c3", seat=3, status="pending", by="")
    for c, event in ((first, "claimed"), (third, "claimed"), (first, "approved")):
        await table.ledger.submit_async(CLAIM, claim_body(c, event), cm.Record(c, event).key)
    claims, number = ClaimRecords(table.meters, table.ledger).claims(RID)
    assert [(c.id, c.status) for c in claims] == [(f"{RID}-c1", "paying"), (f"{RID}-c3", "pending")]
    assert claims[0] == first and number == 4
    assert ClaimRecords(table.meters, table.ledger).claims("CS-07-r2") == ([], 1)


async def test_a_claim_pays_on_the_draws_its_booking_recorded(table: Table) -> None:
    op = meter_ops.BookContributions(RID, "CS-07", ((5, 100),), utc_now(), magic_card=parse_card("7H"), lucky_seat=0)
    await table.meters.local.submit(op, "bonus", f"{RID}:book:bonus")
    records = ClaimRecords(table.meters, table.ledger)
    assert await records.draws(RID, "bonus") == Draws(parse_card("7H"), 0)
    assert await records.draws("CS-07-r2", "bonus") == Draws()  # nothing booked: no wager to pay

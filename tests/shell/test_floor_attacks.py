"""Attacks on the link authority's floor view (docs/security.md, "The `floor` message"), with a real authority and
Mosquitto: what a table's MQTT password can make the authority's `status`, which its console asks twice a second,
hold and cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.meter import ops

from broker import require_mosquitto, start_broker
from linkrig import AT, LinkRig

TABLES = ("cs-01", "fcp-02")
SHOWN = 16  # a table's open rounds in the authority's status: its latest


@pytest.fixture
def broker(tmp_path: Path):
    require_mosquitto()
    b = start_broker(tmp_path / "mosquitto", (*TABLES, "authority"))
    try:
        yield b
    finally:
        b.stop()


async def test_rounds_a_table_books_and_never_closes_do_not_grow_the_authoritys_status(tmp_path, broker):
    """A table's password books round after round and closes none: each stays open in the authority's journal. The
    status shows the table's latest few, in the order of their numbers, not every one: the console asks for it every
    0.5 s, and before, each answer listed them all, at 0.26 s of the authority's loop for 100,000 open rounds."""
    rig = LinkRig(tmp_path, broker, TABLES)
    try:
        a = await rig.start_authority()
        cs = await rig.start_table("cs-01")
        rounds = SHOWN * 3
        for n in range(1, rounds + 1):
            await cs.send(ops.BookContributions(f"cs-01-r{n}", "cs-01", ((1, 100),), AT), "fchb", f"cs-01-r{n}:book")
        await rig.all_answered(60)
        (meter,) = a.ledger.state.values()
        assert len(meter.open_rounds) == rounds  # the journal keeps them all: they hold the table's wagers
        (cs_01,) = [t for t in a.status()["tables"] if t["table"] == "cs-01"]
        shown = [r["round_id"] for r in cs_01["open_rounds"]]
        assert shown == [f"cs-01-r{n}" for n in range(rounds - SHOWN + 1, rounds + 1)]
    finally:
        await rig.close()


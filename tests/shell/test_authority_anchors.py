"""The tables' journal anchors at the authority (controller/authority/table_anchors.py), on a real journal of the
authority's and clocks the test moves: each report journaled with its verdict, an anchor gone back the new
reference, one planted far ahead kept aside until a supervisor clears it, reports at most one a second a table and
budget, and all of it as the journal left it at the next start."""

from __future__ import annotations

import pytest

from controller.authority.table_anchors import ANCHOR_EVERY_S, ANCHOR_PREFIX, AnchorKeeper
from controller.errors import InputError
from controller.ledger.reader import JournalReader
from controller.linkproto import anchors, schema
from controller.meter.journal import TABLE_ANCHOR

from authority_journal import TABLES, journal, parts, sample


def anchor(seq: int, table: str = "cs-01") -> schema.JournalAnchor:
    return schema.JournalAnchor(table, seq, f"{seq:064x}", "2026-11-30T01:02:03Z")


class Clocks:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def keeper(self, led) -> tuple[AnchorKeeper, object]:
        metrics, notes = parts()
        return AnchorKeeper(led, TABLES, metrics, notes, clock=lambda: self.now, tick=lambda: self.now), metrics

    def later(self, seconds: float = ANCHOR_EVERY_S) -> None:
        self.now += seconds


async def test_an_anchor_gone_back_is_an_alert_and_the_new_reference(tmp_path):
    c = Clocks()
    with journal(tmp_path) as led:
        k, metrics = c.keeper(led)
        await k.keep(anchor(100))
        assert k.reference["cs-01"] == anchor(100)
        head = led.head.seq
        c.later()
        await k.keep(anchor(100))  # sent again at a connection: nothing journaled
        assert led.head.seq == head
        await k.keep(anchor(60))
        assert k.reference["cs-01"] == anchor(60) and led.head.seq == head + 1
        assert sample(metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="anchor went back") == 1


async def test_an_anchor_planted_far_ahead_is_kept_aside_until_a_supervisor_clears_it(tmp_path):
    c = Clocks()
    with journal(tmp_path) as led:
        k, metrics = c.keeper(led)
        await k.keep(anchor(100))
        c.later()
        reference = anchors.Report(anchor(100), c.now - ANCHOR_EVERY_S)
        planted = anchor(anchors.furthest(reference, c.now) + 1)  # one past where the journal could have grown
        await k.keep(planted)
        assert k.reference["cs-01"] == anchor(100) and k.held["cs-01"].suspect.anchor == planted
        assert sample(metrics, "progressive_link_table_anchor_suspect", table="cs-01") == 1
        assert sample(metrics, "progressive_link_anomalies_total", table="cs-01", anomaly="anchor far ahead") == 1
        await k.keep(anchor(150))  # the table's true report, in the other budget: the new reference
        assert k.reference["cs-01"] == anchor(150)
        with pytest.raises(InputError) as wrong:
            await k.clear("cs-01", 150, "floor-1")
        assert wrong.value.field == "seq" and f"is at entry {planted.seq}, not 150" in wrong.value.problem
        done = await k.clear("cs-01", planted.seq, "floor-1")
        assert done == {"table": "cs-01", "cleared": planted.seq, "suspects": 1, "cleared_by": "floor-1",
                        "entry": led.head.seq}
        assert k.held["cs-01"].suspect is None and sample(metrics, "progressive_link_table_anchor_suspect",
                                                          table="cs-01") == 0
        with pytest.raises(InputError, match="no anchor of table cs-01 is kept aside: nothing to clear"):
            await k.clear("cs-01", planted.seq, "floor-1")


async def test_reports_come_at_most_one_a_second_a_table_and_budget(tmp_path):
    c = Clocks()
    with journal(tmp_path) as led:
        k, metrics = c.keeper(led)
        await k.keep(anchor(100))
        await k.keep(anchor(101))  # within the second: dropped
        await k.keep(anchor(7, "fcp-02"))  # another table: its own budget
        assert k.reference == {"cs-01": anchor(100), "fcp-02": anchor(7, "fcp-02")}
        assert sample(metrics, "progressive_link_messages_dropped_total", reason="anchor_too_often") == 1
        c.later()
        await k.keep(anchor(101))
        assert k.reference["cs-01"] == anchor(101)


async def test_what_is_held_comes_back_from_the_journal_at_the_next_start(tmp_path):
    c = Clocks()
    with journal(tmp_path) as led:
        k, _ = c.keeper(led)
        await k.keep(anchor(100))
        c.later()
        far = anchor(10**12)
        await k.keep(far)
        await k.keep(anchor(120))
        keys = JournalReader(led.db_path)
        try:
            again, metrics = c.keeper(led)
            again.replay(keys.entries(ANCHOR_PREFIX))
        finally:
            keys.close()
        assert again.held == k.held and again.reference == {"cs-01": anchor(120)}
        assert sample(metrics, "progressive_link_table_anchor_suspect", table="cs-01") == 1
        assert sample(metrics, "progressive_link_table_anchor_suspect", table="fcp-02") == 0


async def test_a_report_journaled_before_verdicts_is_the_reference_when_higher(tmp_path):
    c = Clocks()
    with journal(tmp_path) as led:
        for seq in (50, 40):  # as an authority of before journaled them: the highest kept
            await led.submit_async(TABLE_ANCHOR, {"table": "cs-01", "seq": seq, "hash": f"{seq:064x}",
                                                  "at": "2026-11-30T01:02:03Z"}, f"{ANCHOR_PREFIX}cs-01:{seq}")
        keys = JournalReader(led.db_path)
        try:
            k, _ = c.keeper(led)
            k.replay(keys.entries(ANCHOR_PREFIX))
        finally:
            keys.close()
        assert k.reference == {"cs-01": anchor(50)} and k.held["cs-01"].reference.received == c.now

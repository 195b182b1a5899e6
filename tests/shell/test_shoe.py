"""The dealing shoe of a card table (controller/app/shoe.py): a jam voids the round being dealt unless an award of
it was paid, and waits for a claim in the middle of a step; the claims of a deal's detected hits say which hits
still hold the settle. The shoe's detection through the rig is in tests/shell/test_table_daemon.py."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.app.claim_desk import ClaimDesk, RoundView
from controller.app.journal import open_ledger
from controller.app.meter_port import LocalMeters, Meters
from controller.app.metrics import Metrics
from controller.app.setup import table_rules
from controller.app.shoe import SHOE_JAM, Detected, Shoe
from controller.app.sign import Sign
from controller.config import load_config
from controller.round import detect
from controller.round import model as rm

ROOT = Path(__file__).resolve().parents[2]
HIT = detect.Hit(3, "progressive", (0, 1, 2, 3, 4), "royal-flush", "100% of meter", 3)
HIT2 = replace(HIT, seat=5, turn=5)


class _Table:
    """A shoe on a real journal and claim desk; the round machine's state is `state`; `voided` what it voided."""

    def __init__(self, tmp_path: Path, tg: asyncio.TaskGroup, *, paid: str | None = None) -> None:
        cfg = replace(load_config(ROOT / "config" / "tables" / "caribbean-stud.toml"), state_dir=tmp_path)
        self.tg, self.changed = tg, asyncio.Event()
        self.state: rm.TableState | None = rm.TableState(1, phase=rm.Phase.DEALING)
        self.voided: list[str] = []
        self.ledger = open_ledger(cfg)
        rules = table_rules(cfg)
        self.desk = ClaimDesk(cfg, rules, Meters(LocalMeters(self.ledger), None), self.ledger,
                              round_now=lambda: RoundView("CS-07-r1", True, "dealing", {}, None),
                              win_light=lambda _s, _on: None, sign=Sign(cfg.table, []), metrics=Metrics(cfg.table),
                              spawn=self.spawn)
        self.shoe = Shoe(cfg, rules, self.ledger, self.desk, round_now=lambda: self.state, spawn=self.spawn,
                         until=self.until, settled_s=0.0, void=self.voided.append, paid_refusal=lambda: paid)

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        return self.tg.create_task(coro, name=name)

    async def until(self, predicate: Any, recheck: float | None) -> None:
        while not predicate():
            self.changed.clear()
            await self.changed.wait()

    def close(self) -> None:
        self.ledger.close()


@pytest.mark.parametrize("phase", [rm.Phase.BETTING, rm.Phase.LOCKING])
async def test_a_jam_outside_a_deal_voids_nothing(tmp_path, phase):
    async with asyncio.TaskGroup() as tg:
        t = _Table(tmp_path, tg)
        t.state = rm.TableState(1, phase=phase)
        t.shoe.jammed("shoe")
        assert t.voided == []
        t.close()


async def test_a_jam_voids_the_round_being_dealt(tmp_path):
    async with asyncio.TaskGroup() as tg:
        t = _Table(tmp_path, tg)
        t.shoe.jammed("shoe")
        assert t.voided == [SHOE_JAM]
        t.close()


async def test_a_jam_after_an_award_was_paid_voids_nothing(tmp_path):
    async with asyncio.TaskGroup() as tg:
        t = _Table(tmp_path, tg, paid="an award was paid in round CS-07-r1 on meter main")
        t.shoe.jammed("shoe")
        assert t.voided == []
        t.close()


def test_the_hits_left_hold_the_settle_until_claimed_or_dropped():
    det = Detected("CS-07-r1", 15, (HIT, HIT2))
    assert det.left == (HIT, HIT2) and not det.over
    det.step(to=1)
    assert det.left == (HIT2,) and det.moved.is_set()
    det.step(end="failed")  # an error: the hit left still holds the settle
    assert det.over and det.left == (HIT2,)
    det.step(end="claimed")  # the first end stays
    assert det.end == "failed"
    for end, left in (("claimed", ()), ("dropped", ())):
        d = Detected("CS-07-r1", 15, (HIT, HIT2))
        d.step(end=end)
        assert d.left == left


async def test_a_settle_with_no_hit_detected_in_its_round_finds_none_unclaimed(tmp_path):
    async with asyncio.TaskGroup() as tg:
        t = _Table(tmp_path, tg)
        assert await t.shoe.unclaimed("CS-07-r1") == ()
        t.shoe.detected = Detected("CS-07-r0", 15, (HIT,))  # another round's
        assert await t.shoe.unclaimed("CS-07-r1") == ()
        t.close()

"""The round's journal of a card table (controller/app/journal.py), on a real journal in a temporary directory:
the journal opened with the table's meters, a booking that answers the round machine only once it is on disk, a
close that waits for nothing of the desk, and what only a supervisor lifts kept across a reopen."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.app.claim_desk import ClaimDesk, RoundView
from controller.app.journal import RoundJournal, open_ledger
from controller.app.meter_port import LocalMeters, Meters
from controller.app.metrics import Metrics
from controller.app.setup import table_rules
from controller.app.sign import Sign
from controller.config import load_config
from controller.ledger.reader import JournalReader, lookup
from controller.round import model as rm
from controller.round.resume import Kept

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path):
    return replace(load_config(ROOT / "config" / "tables" / "caribbean-stud.toml"), state_dir=tmp_path)


class _Journal:
    """A RoundJournal on its own ledger and TaskGroup; `applied` holds what it answered the round machine."""

    def __init__(self, cfg: Any, tg: asyncio.TaskGroup) -> None:
        self.cfg, self.tg = cfg, tg
        self.ledger = open_ledger(cfg)
        self.applied: list[rm.Input] = []
        self.shown = 0
        metrics = Metrics(cfg.table)
        meters = Meters(LocalMeters(self.ledger), None)
        rules = table_rules(cfg)
        desk = ClaimDesk(cfg, rules, meters, self.ledger, round_now=lambda: RoundView("CS-07-r1", True, "dealing",
                                                                                       {}, None),
                         win_light=lambda _s, _on: None, sign=Sign(cfg.table, []), metrics=metrics, spawn=self.spawn)
        self.journal = RoundJournal(cfg, metrics, self.ledger, meters, desk, None, spawn=self.spawn,
                                    apply=self.applied.append, show_meters=self.show)

    def spawn(self, coro: Any, name: str, *, fatal: bool = False) -> asyncio.Task[Any]:
        return self.tg.create_task(coro, name=name)

    def show(self) -> None:
        self.shown += 1


def test_the_journal_opens_with_the_tables_meters_defined_once(tmp_path):
    cfg = _config(tmp_path)
    for _ in range(2):  # opened again: nothing defined, nothing changed
        led = open_ledger(cfg)
        try:
            assert set(led.state) == {"main", "bonus"}
            assert led.state["main"].params == cfg.meters["main"].params
            with JournalReader(led.db_path) as r:
                assert sorted(k for k, _ in r.entries("define:")) == ["define:CS-07:bonus", "define:CS-07:main"]
                assert r.entries("params:") == []
        finally:
            led.close()


async def test_a_booking_answers_booked_once_on_disk_and_a_close_ends_it(tmp_path):
    async with asyncio.TaskGroup() as tg:
        j = _Journal(_config(tmp_path), tg)
        try:
            before = j.ledger.state["main"].current_cents
            j.journal.write(rm.Book("CS-07-r1", {"main": ((3, 100), (5, 100))}, None, None))
            while not j.applied:
                await asyncio.sleep(0.01)
            assert j.applied == [rm.Booked("CS-07-r1")] and j.shown == 1
            assert j.journal.booked == {"CS-07-r1": ("main",)}
            assert lookup(j.ledger.db_path, "CS-07-r1:book:main") is not None
            assert j.ledger.state["main"].current_cents > before
            assert "CS-07-r1" in j.ledger.state["main"].open_rounds

            j.journal.write(rm.Close("CS-07-r1"))
            await j.journal.durable("CS-07-r1")
            assert j.journal.booked == {} and j.journal.writes == {}
            assert "CS-07-r1" not in j.ledger.state["main"].open_rounds
        finally:
            await asyncio.to_thread(j.ledger.close)


async def test_a_booking_on_two_meters_is_one_commit(tmp_path):
    """Both meters' bookings of a round are queued before either is awaited: the writer commits them in one
    transaction, so the press waits for one fsync, not one a meter (docs/benchmarks.md, "Lock-out latency")."""
    async with asyncio.TaskGroup() as tg:
        j = _Journal(_config(tmp_path), tg)
        try:
            for n in (1, 2, 3):
                rid, applied = f"CS-07-r{n}", len(j.applied)
                before = j.ledger.transactions
                j.journal.write(rm.Book(rid, {"main": ((3, 100), (5, 500)), "bonus": ((5, 100),)}, None, None))
                while len(j.applied) == applied:
                    await asyncio.sleep(0.005)
                assert j.applied[-1] == rm.Booked(rid)
                assert j.ledger.transactions - before == 1
                main, bonus = (lookup(j.ledger.db_path, f"{rid}:book:{m}") for m in ("main", "bonus"))
                assert main is not None and bonus is not None and abs(main.seq - bonus.seq) == 1
                assert sorted(main.body["round_meters"]) == sorted(bonus.body["round_meters"]) == ["bonus", "main"]
                assert {rid} <= set(j.ledger.state["main"].open_rounds) & set(j.ledger.state["bonus"].open_rounds)
                j.journal.write(rm.Close(rid))
                await j.journal.durable(rid)
        finally:
            await asyncio.to_thread(j.ledger.close)


async def test_what_only_a_supervisor_lifts_is_read_again_after_a_reopen(tmp_path):
    cfg = _config(tmp_path)
    state = rm.TableState(4, phase=rm.Phase.DEALING, blocks={rm.Block.DECK: frozenset({"stub count"})},
                          void_requested="stub count wrong")
    async with asyncio.TaskGroup() as tg:
        j = _Journal(cfg, tg)
        try:
            assert await asyncio.to_thread(j.journal.read_kept) == Kept()
            j.journal.keep(state, "CS-07-r4")
            await j.journal.kept_durable()
            j.journal.keep(state, "CS-07-r4")  # unchanged: not journaled again
            await j.journal.kept_durable()
            assert lookup(j.ledger.db_path, "table-state:2") is None
        finally:
            await asyncio.to_thread(j.ledger.close)
        j = _Journal(cfg, tg)
        try:
            kept = await asyncio.to_thread(j.journal.read_kept)
            assert kept == Kept(frozenset({"stub count"}), "CS-07-r4", "stub count wrong")
            j.journal.keep(replace(state, blocks={}, void_requested=None), "CS-07-r4")  # lifted: the next record
            await j.journal.kept_durable()
            assert lookup(j.ledger.db_path, "table-state:2") is not None
        finally:
            await asyncio.to_thread(j.ledger.close)

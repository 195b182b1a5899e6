"""The ledger: receipts, idempotency, refusals, group commit, fatal storage errors, start-up, locking."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from controller.errors import InputError, RulesError
from controller.ledger import (
    EXIT_STORAGE,
    FatalStorageError,
    InvariantViolation,
    KeyConflict,
    Ledger,
    LedgerBusy,
    LedgerClosed,
    LedgerError,
    Receipt,
    chain,
    journal,
    verify_state_dir,
)

from ledger_child import Accounts
from postgres import postgres  # noqa: F401 - the module's PostgreSQL, for the `where` fixture

TESTS = Path(__file__).resolve().parents[1] / "support"
WAIT = 20  # seconds: generous bound for anything that should take milliseconds


def keep_running(err: BaseException) -> None:
    """Fatal hook for tests: the default one would end the test run; callers still get the error."""


@dataclass(frozen=True)
class Where:
    """A state directory and the journal's engine: its SQLite file in the directory (url None), or PostgreSQL."""

    dir: Path
    url: str | None

    def __truediv__(self, name: str) -> Where:
        return Where(self.dir / name, self.url)

    @property
    def journal(self) -> Path | str:
        return self.url or self.dir


# the PostgreSQL runs on one worker of the suite (--dist loadgroup): one PostgreSQL for the module
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres-test_ledger"))])
def where(request, tmp_path) -> Where:
    """The engine-neutral tests run on both engines: SQLite, and a fresh database of the module's PostgreSQL."""
    if request.param == "sqlite":
        return Where(tmp_path, None)
    return Where(tmp_path, request.getfixturevalue("postgres").new_database())


def open_ledger(path, reducer=None, **kw) -> Ledger:
    kw.setdefault("software_digest", "test-software")
    kw.setdefault("fatal", keep_running)
    if isinstance(path, Where):
        path, kw["journal_url"] = path.dir, path.url
    return Ledger.open(path, reducer or Accounts(), **kw)


def entry_rows(path) -> list[tuple[int, str, str]]:
    if isinstance(path, Where) and path.url is not None:
        with psycopg.connect(path.url) as pg:
            return pg.execute("SELECT seq, key, entry FROM entries ORDER BY seq").fetchall()
    if isinstance(path, Where):
        path = path.dir
    conn = sqlite3.connect(f"file:{path / journal.DB_NAME}?mode=ro", uri=True)
    try:
        return [(seq, key, entry) for seq, key, entry in conn.execute("SELECT seq, key, entry FROM entries ORDER BY seq")]
    finally:
        conn.close()


def snapshot_seqs(where: Where) -> list[int]:
    if where.url is not None:
        with psycopg.connect(where.url) as pg:
            return [s for (s,) in pg.execute("SELECT seq FROM checkpoints ORDER BY seq")]
    conn = sqlite3.connect(where.dir / journal.DB_NAME)
    try:
        return [s for (s,) in conn.execute("SELECT seq FROM checkpoints ORDER BY seq")]
    finally:
        conn.close()


def user_keys(path) -> list[str]:
    return [k for _s, k, _e in entry_rows(path) if not k.startswith("ledger:")]


def commits(conn: sqlite3.Connection, sql: str) -> bool:
    """Whether running `sql` commits: a COMMIT, or a write outside an explicit transaction (the writer writes
    a batch with one INSERT, which SQLite then runs as a transaction of its own and commits before it returns)."""
    return sql == "COMMIT" or (sql.startswith("INSERT") and not conn.in_transaction)


def begins_a_write(conn: sqlite3.Connection, sql: str) -> bool:
    return sql == "BEGIN IMMEDIATE" or (sql.startswith("INSERT") and not conn.in_transaction)


class Gated(sqlite3.Connection):
    """A connection whose COMMITs can be held at a gate, and counted."""

    hold = False
    gate: threading.Event
    entered: threading.Event
    commits = 0

    def execute(self, sql, *args):
        if commits(self, sql):
            cls = type(self)
            cls.commits += 1
            if cls.hold:
                cls.entered.set()
                cls.gate.wait(WAIT)
        return super().execute(sql, *args)


def gated_factory():
    return type("GatedHere", (Gated,), {"gate": threading.Event(), "entered": threading.Event(), "commits": 0})


# --- basics -------------------------------------------------------------------------------------


def test_fresh_ledger_has_genesis_and_self_check(where):
    d = where / "state"
    with open_ledger(d) as led:
        assert led.startup.created
        assert led.head.seq == 2
        assert led.state == ({}, 0, 0)
        sc = led.startup.self_check
        assert (sc.seq, sc.kind) == (2, "self-check")
    rows = entry_rows(d)
    # a clean close adds a checkpoint
    assert [chain.Entry(e).kind for _s, _k, e in rows] == ["genesis", "self-check", "checkpoint"]
    body = chain.Entry(rows[1][2]).body
    assert body["software_sha256"] == "test-software"
    assert body["verified"]["entries"] == 1
    # every power-up adds one self-check entry
    with open_ledger(d, software_digest="v2") as led:
        assert not led.startup.created
        assert led.head.seq == 4
    assert chain.Entry(entry_rows(d)[3][2]).body["software_sha256"] == "v2"


def test_receipt_and_state(where):
    with open_ledger(where) as led:
        r = led.submit("deposit", {"account": "a", "cents": 500}, "dep-1")
        assert isinstance(r, Receipt)
        assert (r.seq, r.key, r.kind, r.result, r.repeat) == (3, "dep-1", "deposit", {"balance": 500}, False)
        assert led.head.seq == 3 and led.head.hash == r.hash
        assert led.state == ({"a": 500}, 500, 0)
        r2 = led.submit("transfer", {"from": "a", "to": "b", "cents": 200}, "tr-1")
        assert r2.result == {"from": 300, "to": 200}
        # the receipt's hash is the hash of the entry as stored, and the next entry chains to it
        rows = entry_rows(where)
        assert chain.entry_hash(rows[2][2]) == r.hash
        assert chain.Entry(rows[3][2]).prev_hash == r.hash


def test_state_survives_restart(where):
    with open_ledger(where) as led:
        for i in range(10):
            led.submit("deposit", {"account": f"a{i % 3}", "cents": 100 + i}, f"d{i}")
        led.submit("withdraw", {"account": "a0", "cents": 50}, "w")
        before = led.state
    with open_ledger(where) as led:
        assert led.state == before


# --- idempotency --------------------------------------------------------------------------------


def test_idempotent_retry_returns_original_receipt(where):
    with open_ledger(where) as led:
        r1 = led.submit("deposit", {"account": "a", "cents": 500}, "op-1")
        head = led.head
        r2 = led.submit("deposit", {"cents": 500, "account": "a"}, "op-1")  # same body, other key order
        assert r2 == r1 and r2.repeat and not r1.repeat
        assert led.head == head
        assert led.state == ({"a": 500}, 500, 0)  # applied once
    # and after a restart, from the journal
    with open_ledger(where) as led:
        r3 = led.submit("deposit", {"account": "a", "cents": 500}, "op-1")
        assert r3 == r1 and r3.repeat
        assert led.state == ({"a": 500}, 500, 0)
    assert user_keys(where) == ["op-1"]


def test_same_key_with_other_body_is_a_conflict(where):
    with open_ledger(where) as led:
        r1 = led.submit("deposit", {"account": "a", "cents": 500}, "op-1")
        with pytest.raises(KeyConflict) as e:
            led.submit("deposit", {"account": "a", "cents": 501}, "op-1")
        assert e.value.seq == r1.seq and e.value.field == "key"
        with pytest.raises(KeyConflict):
            led.submit("withdraw", {"account": "a", "cents": 500}, "op-1")
        assert led.state == ({"a": 500}, 500, 0)


def test_duplicate_key_within_one_batch_applies_once(tmp_path):
    g = gated_factory()
    with open_ledger(tmp_path, connection_factory=g) as led:
        g.hold = True
        first = led.submit_future("deposit", {"account": "z", "cents": 1}, "z")
        assert g.entered.wait(WAIT)
        a = led.submit_future("deposit", {"account": "a", "cents": 7}, "dup")
        b = led.submit_future("deposit", {"account": "a", "cents": 7}, "dup")
        c = led.submit_future("deposit", {"account": "a", "cents": 8}, "dup")
        g.hold = False
        g.gate.set()
        first.result(WAIT)
        ra, rb = a.result(WAIT), b.result(WAIT)
        assert ra == rb and not ra.repeat and rb.repeat
        with pytest.raises(KeyConflict):
            c.result(WAIT)
        assert led.state == ({"z": 1, "a": 7}, 8, 0)
    assert user_keys(tmp_path) == ["z", "dup"]


def test_retry_that_would_now_be_refused_gets_the_original_receipt(where):
    """A retry is answered from the journal even when the operation, applied again, would be refused."""
    with open_ledger(where) as led:
        led.submit("deposit", {"account": "a", "cents": 100}, "d")
        w = led.submit("withdraw", {"account": "a", "cents": 100}, "w")
        again = led.submit("withdraw", {"account": "a", "cents": 100}, "w")  # a is empty now
        assert again == w and again.repeat
        with pytest.raises(KeyConflict):
            led.submit("withdraw", {"account": "a", "cents": 1}, "w")
        with pytest.raises(RulesError):  # a new key: refused as it should be
            led.submit("withdraw", {"account": "a", "cents": 100}, "w2")
        assert led.state == ({"a": 0}, 100, 100)


def test_batch_with_journaled_keys_among_new_ones(tmp_path, caplog):
    """Retries (of journaled operations) and conflicts mixed with new operations in one batch: every one
    gets the answer it would get alone, new entries are numbered without gaps, and what is logged for a
    refused operation is logged once."""
    g = gated_factory()
    with Ledger.open(tmp_path, BrokenReducer(), software_digest="t", connection_factory=g) as led:
        r1 = led.submit("deposit", {"account": "a", "cents": 5}, "old-1")
        r2 = led.submit("withdraw", {"account": "a", "cents": 5}, "old-2")
        g.hold = True
        first = led.submit_future("deposit", {"account": "z", "cents": 1}, "first")
        assert g.entered.wait(WAIT)
        futs = [
            led.submit_future("deposit", {"account": "b", "cents": 1}, "new-1"),
            led.submit_future("withdraw", {"account": "a", "cents": 5}, "old-2"),   # retry: would be refused
            led.submit_future("deposit", {"account": "b", "cents": 2}, "new-2"),
            led.submit_future("deposit", {"account": "a", "cents": 5}, "old-1"),    # retry: would apply
            led.submit_future("deposit", {"account": "a", "cents": 6}, "old-1"),    # conflict
            led.submit_future("leak", {}, "leak-1"),                                # invariant: refused
            led.submit_future("deposit", {"account": "b", "cents": 3}, "new-3"),
        ]
        with caplog.at_level("ERROR", logger="controller.ledger"):
            g.hold = False
            g.gate.set()
            first.result(WAIT)
            outcomes = []
            for f in futs:
                try:
                    outcomes.append(f.result(WAIT))
                except Exception as e:
                    outcomes.append(e)
        n1, o2, n2, o1, conflict, leak, n3 = outcomes
        assert o1 == r1 and o1.repeat and o2 == r2 and o2.repeat
        assert isinstance(conflict, KeyConflict) and conflict.seq == r1.seq
        assert isinstance(leak, InvariantViolation)
        assert [n1.seq, n2.seq, n3.seq] == [r2.seq + 2, r2.seq + 3, r2.seq + 4]  # "first" took r2.seq + 1
        assert not (n1.repeat or n2.repeat or n3.repeat)
        assert led.state == ({"a": 0, "b": 6, "z": 1}, 12, 5)
        assert sum("leak-1" in r.getMessage() for r in caplog.records) == 1
        # a batch whose only journaled key belongs to an operation that applies: found by the insert
        g.entered.clear()
        g.gate.clear()
        g.hold = True
        second = led.submit_future("deposit", {"account": "z", "cents": 1}, "second")
        assert g.entered.wait(WAIT)
        futs = [led.submit_future("deposit", {"account": "c", "cents": 1}, "new-4"),
                led.submit_future("deposit", {"account": "b", "cents": 2}, "new-2"),
                led.submit_future("deposit", {"account": "c", "cents": 2}, "new-5")]
        g.hold = False
        g.gate.set()
        s = second.result(WAIT)
        n4, again, n5 = (f.result(WAIT) for f in futs)
        assert again == n2 and again.repeat
        assert (n4.seq, n5.seq) == (s.seq + 1, s.seq + 2) and led.head.seq == n5.seq
        assert led.state == ({"a": 0, "b": 6, "c": 3, "z": 2}, 16, 5)
    assert user_keys(tmp_path) == ["old-1", "old-2", "first", "new-1", "new-2", "new-3", "second", "new-4", "new-5"]
    assert verify_state_dir(tmp_path, BrokenReducer()).ok


# --- refusals -----------------------------------------------------------------------------------


def test_refused_operation_writes_nothing(where):
    with open_ledger(where) as led:
        led.submit("deposit", {"account": "a", "cents": 100}, "d")
        head, state, tx = led.head, led.state, led.transactions
        with pytest.raises(RulesError):
            led.submit("withdraw", {"account": "a", "cents": 101}, "w")
        with pytest.raises(InputError):
            led.submit("deposit", {"account": "a", "cents": -5}, "neg")
        with pytest.raises(InputError):
            led.submit("nonsense", {}, "n")
        assert (led.head, led.state, led.transactions) == (head, state, tx)
        # a refused key is not used up: the same key may carry a valid operation later
        r = led.submit("withdraw", {"account": "a", "cents": 100}, "w")
        assert r.seq == head.seq + 1
    assert user_keys(where) == ["d", "w"]


def test_refused_and_accepted_in_one_batch(tmp_path):
    g = gated_factory()
    with open_ledger(tmp_path, connection_factory=g) as led:
        g.hold = True
        first = led.submit_future("deposit", {"account": "a", "cents": 10}, "d1")
        assert g.entered.wait(WAIT)
        ok1 = led.submit_future("withdraw", {"account": "a", "cents": 10}, "w1")
        bad = led.submit_future("withdraw", {"account": "a", "cents": 1}, "w2")  # a is empty after w1
        ok2 = led.submit_future("deposit", {"account": "b", "cents": 3}, "d2")
        g.hold = False
        g.gate.set()
        assert first.result(WAIT).seq == 3
        assert ok1.result(WAIT).seq == 4
        with pytest.raises(RulesError):
            bad.result(WAIT)
        assert ok2.result(WAIT).seq == 5  # no gap where the refused one was
        assert led.state == ({"a": 0, "b": 3}, 13, 10)
    assert user_keys(tmp_path) == ["d1", "w1", "d2"]


def test_bad_input_is_refused_before_queueing(where):
    with open_ledger(where) as led:
        for kind, body, key in [
            ("deposit", {"account": "a", "cents": 1.5}, "k"),     # float: not exact
            ("deposit", ["not", "a", "dict"], "k"),
            ("deposit", {"account": "a", "cents": 1}, ""),
            ("deposit", {"account": "a", "cents": 1}, "has space"),
            ("deposit", {"account": "a", "cents": 1}, "ledger:mine"),  # reserved prefix
            ("self-check", {}, "k"),                                   # reserved kind
            ("checkpoint", {}, "k"),
        ]:
            with pytest.raises(InputError):
                led.submit(kind, body, key)
        assert led.head.seq == 2


class BrokenReducer(Accounts):
    """Breaks the invariant on kind 'leak'; crashes (a bug) on kind 'crash'."""

    def apply(self, state, kind, body):
        if kind == "leak":
            balances, dep, wd = state
            return ({**balances, "x": 1}, dep, wd), None
        if kind == "crash":
            raise KeyError("bug")
        return super().apply(state, kind, body)


def test_operation_breaking_the_invariant_is_refused(where):
    with open_ledger(where, BrokenReducer(), software_digest="t") as led:
        led.submit("deposit", {"account": "a", "cents": 5}, "d")
        head = led.head
        with pytest.raises(InvariantViolation):
            led.submit("leak", {}, "leak-1")
        with pytest.raises(KeyError):
            led.submit("crash", {}, "crash-1")
        assert led.head == head and led.state == ({"a": 5}, 5, 0)
        assert led.submit("deposit", {"account": "a", "cents": 5}, "d2").seq == head.seq + 1


# --- group commit -------------------------------------------------------------------------------


def test_acknowledged_only_after_commit_and_batched(tmp_path):
    g = gated_factory()
    with open_ledger(tmp_path, connection_factory=g, max_batch=1024) as led:
        before = led.transactions
        g.hold = True
        first = led.submit_future("deposit", {"account": "a", "cents": 1}, "first")
        try:
            assert g.entered.wait(WAIT)  # the writer is inside COMMIT
            rest = [led.submit_future("deposit", {"account": f"a{i % 7}", "cents": 1}, f"k{i}")
                    for i in range(300)]
            # while COMMIT has not returned, nobody is told anything
            assert not first.done() and not any(f.done() for f in rest)
            assert led.state == ({}, 0, 0)
        finally:
            g.hold = False
            g.gate.set()
        receipts = [first.result(WAIT)] + [f.result(WAIT) for f in rest]
        assert [r.seq for r in receipts] == list(range(3, 304))
        # the 300 that queued up during the first COMMIT shared the next transactions: the first few
        # may have been prepared while it was held (one batch is prepared ahead), the rest form one batch
        assert led.transactions - before <= 3
        assert led.state[1] == 301


def test_retry_of_an_operation_in_flight(tmp_path):
    """A retry that arrives while the original is prepared but not yet committed gets the original receipt,
    and only after that COMMIT; another operation under the same key is a conflict."""
    g = gated_factory()
    with open_ledger(tmp_path, connection_factory=g, max_batch=1024) as led:
        g.hold = True
        first = led.submit_future("deposit", {"account": "a", "cents": 1}, "held")
        try:
            assert g.entered.wait(WAIT)  # "held" is inside COMMIT
            retry = led.submit_future("deposit", {"account": "a", "cents": 1}, "held")
            other = led.submit_future("deposit", {"account": "a", "cents": 2}, "held")
            assert not retry.done() and not other.done()
        finally:
            g.hold = False
            g.gate.set()
        original = first.result(WAIT)
        again = retry.result(WAIT)
        assert again == original and again.repeat
        with pytest.raises(KeyConflict):
            other.result(WAIT)
        assert led.state == ({"a": 1}, 1, 0)
    assert user_keys(tmp_path) == ["held"]


def test_concurrent_submitters_share_transactions(where):
    n_threads, per_thread = 32, 25
    with open_ledger(where) as led:
        before = led.transactions
        barrier = threading.Barrier(n_threads)
        receipts: list[Receipt] = []
        lock = threading.Lock()

        def work(t: int) -> None:
            barrier.wait(WAIT)
            for i in range(per_thread):
                r = led.submit("deposit", {"account": f"t{t}", "cents": 1}, f"t{t}-{i}")
                with lock:
                    receipts.append(r)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 3)
        ops = n_threads * per_thread
        assert sorted(r.seq for r in receipts) == list(range(3, 3 + ops))
        tx = led.transactions - before
        assert tx < ops / 3, f"{ops} operations took {tx} transactions"
        assert led.state[1] == ops


def test_one_commit_per_operation_when_batching_is_off(where):
    with open_ledger(where, max_batch=1) as led:
        before = led.transactions
        futs = [led.submit_future("deposit", {"account": "a", "cents": 1}, f"k{i}") for i in range(50)]
        for f in futs:
            f.result(WAIT)
        assert led.transactions - before == 50


def test_submit_async(where):
    async def main(led):
        rs = await asyncio.gather(*(led.submit_async("deposit", {"account": "a", "cents": 2}, f"k{i}")
                                    for i in range(200)))
        with pytest.raises(RulesError):
            await led.submit_async("withdraw", {"account": "a", "cents": 401}, "w")
        return rs

    with open_ledger(where) as led:
        rs = asyncio.run(main(led))
        assert sorted(r.seq for r in rs) == list(range(3, 203))
        assert led.state == ({"a": 400}, 400, 0)


def test_submit_async_from_several_event_loops_and_threads(tmp_path):
    """One batch may hold operations of several event loops and of plain threads: each is resolved where
    its caller waits."""
    g = gated_factory()
    with open_ledger(tmp_path, connection_factory=g) as led:
        g.hold = True
        first = led.submit_future("deposit", {"account": "z", "cents": 1}, "first")
        assert g.entered.wait(WAIT)
        started = threading.Barrier(3)
        results: dict[str, list] = {}

        def run_loop(name: str) -> None:
            async def main():
                futs = [asyncio.ensure_future(led.submit_async("deposit", {"account": name, "cents": 1}, f"{name}-{i}"))
                        for i in range(20)]
                await asyncio.sleep(0)  # every submission is queued
                started.wait(WAIT)
                return [(asyncio.get_running_loop(), await f) for f in futs]

            results[name] = asyncio.run(main())

        threads = [threading.Thread(target=run_loop, args=(n,)) for n in ("p", "q")]
        for t in threads:
            t.start()
        plain = [led.submit_future("deposit", {"account": "r", "cents": 1}, f"r-{i}") for i in range(20)]
        started.wait(WAIT)
        g.hold = False
        g.gate.set()
        for t in threads:
            t.join(WAIT)
        assert first.result(WAIT).seq == 3
        seqs = [f.result(WAIT).seq for f in plain]
        for name in ("p", "q"):
            loops = {id(loop) for loop, _r in results[name]}
            assert len(loops) == 1
            seqs += [r.seq for _loop, r in results[name]]
        assert sorted(seqs) == list(range(4, 64))
        assert led.state == ({"z": 1, "p": 20, "q": 20, "r": 20}, 61, 0)


# --- fatal storage errors -----------------------------------------------------------------------


def outcome(led: Ledger, kind, body, key):
    """The receipt or the error of one submission: once the writer has stopped, submitting raises at once;
    before that, the error comes through the future."""
    try:
        return led.submit_future(kind, body, key).result(WAIT)
    except Exception as e:
        return e


class FailingCommit(sqlite3.Connection):
    """A connection whose COMMITs (or, with `fails` changed, other statements) fail as a disk would."""

    fail = False

    def fails(self, sql: str) -> bool:
        return commits(self, sql)

    def execute(self, sql, *args):
        if type(self).fail and self.fails(sql):
            raise sqlite3.OperationalError("disk I/O error")
        return super().execute(sql, *args)


def failing_ledger(path, failing: type[FailingCommit]) -> tuple[Ledger, list[BaseException]]:
    """A ledger holding $1 whose connection fails from now on: the fatal hook's calls are listed."""
    factory = type("FailingHere", (failing,), {"fail": False})
    hooked: list[BaseException] = []
    led = open_ledger(path, connection_factory=factory, fatal=hooked.append)
    led.submit("deposit", {"account": "a", "cents": 100}, "ok")
    factory.fail = True
    return led, hooked


def test_commit_error_is_fatal_and_never_acknowledged(tmp_path):
    led, hooked = failing_ledger(tmp_path, FailingCommit)
    try:
        futs, refused_at_once = [], 0
        for i in range(50):  # queued together: every one waiting on the failed batch is told
            try:
                futs.append(led.submit_future("deposit", {"account": "a", "cents": 1}, f"lost{i}"))
            except FatalStorageError:  # the writer had already stopped
                refused_at_once += 1
        assert futs and len(futs) + refused_at_once == 50
        for f in futs:
            with pytest.raises(FatalStorageError):
                f.result(WAIT)
        assert len(hooked) == 1
        assert isinstance(hooked[0], FatalStorageError)
        assert isinstance(hooked[0].__cause__, sqlite3.OperationalError)
        assert led.failed is hooked[0]
        with pytest.raises(FatalStorageError):  # the writer is gone: nothing more is taken
            led.submit("deposit", {"account": "a", "cents": 1}, "after")
        assert led.state == ({"a": 100}, 100, 0)  # the state never saw the failed batch
    finally:
        led.close()
    with open_ledger(tmp_path) as again:
        assert again.state == ({"a": 100}, 100, 0)
    assert user_keys(tmp_path) == ["ok"]


class SmallDisk(sqlite3.Connection):
    """Simulates a full disk: caps the file at its current size at the next transaction."""

    cap = False

    def execute(self, sql, *args):
        if type(self).cap and begins_a_write(self, sql):
            pages = super().execute("PRAGMA page_count").fetchone()[0]
            super().execute(f"PRAGMA max_page_count={pages}")
        return super().execute(sql, *args)


def test_disk_full_is_fatal(tmp_path):
    factory = type("SmallDiskHere", (SmallDisk,), {"cap": False})
    hooked: list[BaseException] = []
    led = open_ledger(tmp_path, connection_factory=factory, fatal=hooked.append)
    try:
        led.submit("deposit", {"account": "a", "cents": 1}, "ok")
        factory.cap = True
        big = "x" * 20_000  # needs new pages
        for i in range(20):
            body = {"account": "a", "cents": 1, "memo": big}
            assert isinstance(outcome(led, "deposit", body, f"big{i}"), FatalStorageError)
        assert len(hooked) == 1 and "full" in str(hooked[0].__cause__)
    finally:
        led.close()
    with open_ledger(tmp_path) as again:
        assert again.state == ({"a": 1}, 1, 0)


def test_default_fatal_hook_exits_the_process(tmp_path):
    code = textwrap.dedent(f"""
        import sqlite3, sys
        sys.path.insert(0, {str(TESTS)!r})
        from ledger_child import Accounts
        from controller.ledger import Ledger
        class Failing(sqlite3.Connection):
            fail = False
            def execute(self, sql, *a):
                # a COMMIT, or the INSERT that writes a batch outside a transaction (and commits it)
                if Failing.fail and (sql == "COMMIT" or (sql.startswith("INSERT") and not self.in_transaction)):
                    raise sqlite3.OperationalError("disk I/O error")
                return super().execute(sql, *a)
        led = Ledger.open({str(tmp_path)!r}, Accounts(), software_digest="t", connection_factory=Failing)
        Failing.fail = True
        try:
            led.submit("deposit", {{"account": "a", "cents": 1}}, "k", timeout=20)
        except BaseException as e:
            print("caller saw", type(e).__name__, flush=True)
        import threading
        threading.Event().wait(20)  # the hook exits the process before this returns
        print("still alive", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=TESTS.parents[1])
    assert proc.returncode == EXIT_STORAGE, proc.stderr
    assert "still alive" not in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "fatal storage error" in lines[0] and "disk I/O error" in lines[0]


# --- lifecycle ----------------------------------------------------------------------------------


def test_one_writer_per_state_directory(tmp_path):
    with open_ledger(tmp_path), pytest.raises(LedgerBusy):
        open_ledger(tmp_path)
    with open_ledger(tmp_path):  # released on close
        pass


def test_closed_ledger_refuses(where):
    led = open_ledger(where)
    fut = led.submit_future("deposit", {"account": "a", "cents": 1}, "k")
    led.close()
    assert fut.result(WAIT).seq == 3  # submitted before close: finished
    with pytest.raises(LedgerClosed):
        led.submit("deposit", {"account": "a", "cents": 1}, "k2")
    led.close()


# --- folding the WAL into the file (Ledger.wal_checkpoint) ----------------------------------------


class FailingCheckpoint(FailingCommit):
    def fails(self, sql: str) -> bool:
        return sql.startswith("PRAGMA wal_checkpoint")


def wal_frames(path) -> int:
    """The frames the WAL holds now, from its size (32-byte header, then a 24-byte header and a page each)."""
    wal = path / (journal.DB_NAME + "-wal")
    page = sqlite3.connect(f"file:{path / journal.DB_NAME}?mode=ro", uri=True).execute("PRAGMA page_size").fetchone()[0]
    return max(0, (wal.stat().st_size - 32)) // (page + 24) if wal.exists() else 0


def test_wal_checkpoint_folds_the_wal_between_batches_and_the_next_commit_starts_it_over(tmp_path):
    with open_ledger(tmp_path) as led:
        for i in range(40):
            led.submit("deposit", {"account": "a", "cents": 1}, f"d{i}")
        frames, copied, seconds = led.wal_checkpoint().result(WAIT)
        assert frames >= 40 and copied == frames and seconds >= 0  # every commit's pages: all copied
        grown = wal_frames(tmp_path)
        assert grown >= frames  # a PASSIVE checkpoint leaves the file's size; the next write starts it over
        led.submit("deposit", {"account": "a", "cents": 1}, "after")
        frames_after, copied_after, _ = led.wal_checkpoint().result(WAIT)
        assert 0 < frames_after < 10 and copied_after == frames_after
        assert wal_frames(tmp_path) == grown  # written over from the start, not appended
        assert led.state == ({"a": 41}, 41, 0)
    with open_ledger(tmp_path) as again:
        assert again.state == ({"a": 41}, 41, 0)


def test_wal_checkpoint_asked_among_operations_waits_for_their_batch(tmp_path):
    factory = gated_factory()
    led = open_ledger(tmp_path, connection_factory=factory)
    try:
        factory.hold = True
        first = led.submit_future("deposit", {"account": "a", "cents": 1}, "first")
        assert factory.entered.wait(WAIT)  # the writer is in the first COMMIT
        queued = [led.submit_future("deposit", {"account": "a", "cents": 1}, f"q{i}") for i in range(3)]
        fold = led.wal_checkpoint()
        last = led.submit_future("deposit", {"account": "a", "cents": 1}, "last")
        factory.hold = False
        factory.gate.set()
        frames, copied, _ = fold.result(WAIT)
        assert copied == frames > 0
        for f in (first, *queued, last):
            assert f.result(WAIT).seq > 2
        assert fold.done() and led.state == ({"a": 5}, 5, 0)
    finally:
        led.close()


def test_wal_checkpoint_failing_is_fatal_as_a_commit_is(tmp_path):
    led, hooked = failing_ledger(tmp_path, FailingCheckpoint)
    try:
        with pytest.raises(FatalStorageError):
            led.wal_checkpoint().result(WAIT)
        assert len(hooked) == 1 and isinstance(hooked[0].__cause__, sqlite3.OperationalError)
        with pytest.raises(FatalStorageError):  # the writer stopped: nothing more is taken
            led.submit("deposit", {"account": "a", "cents": 1}, "after")
        with pytest.raises(FatalStorageError):
            led.wal_checkpoint().result(WAIT)
    finally:
        led.close()
    with open_ledger(tmp_path) as again:
        assert again.state == ({"a": 100}, 100, 0)


def test_wal_checkpoint_on_a_closed_ledger_is_refused_in_its_future(tmp_path):
    led = open_ledger(tmp_path)
    led.close()
    with pytest.raises(LedgerClosed):
        led.wal_checkpoint().result(WAIT)


def test_existing_empty_directory_is_used(tmp_path):
    d = tmp_path / "state"
    d.mkdir()  # as systemd's StateDirectory= leaves it
    with open_ledger(d) as led:
        assert led.startup.created


def test_checkpoints_snapshots_and_replay(where):
    led = open_ledger(where, checkpoint_every=10, keep_snapshots=2)
    for i in range(95):
        led.submit("deposit", {"account": f"a{i % 4}", "cents": i + 1}, f"d{i}")
    state = led.state
    led.close(checkpoint=False)
    kinds = [chain.Entry(e).kind for _s, _k, e in entry_rows(where)]
    snaps = snapshot_seqs(where)
    cps = [i + 1 for i, k in enumerate(kinds) if k == "checkpoint"]
    assert cps == list(range(11, len(kinds) + 1, 10))  # a checkpoint closes every 10 entries
    assert snaps == cps[-2:]  # only the latest snapshots are kept
    with open_ledger(where, checkpoint_every=10) as led:
        assert led.state == state
        assert led.startup.segments == len(cps)        # every old segment checked in bulk
        assert led.startup.replayed_from == cps[-1] + 1  # only the tail replayed
        assert led.startup.tail == led.startup.entries - cps[-1] + 1
    report = verify_state_dir(where.journal, Accounts())
    assert report.ok, report.summary()
    # one more checkpoint: the clean close of the second open
    assert report.state == state and report.snapshots_checked == 2 and report.checkpoints == len(cps) + 1


def test_leftover_of_an_interrupted_creation_is_discarded(tmp_path):
    """A kill while creating leaves only the temporary file: nothing was acknowledged from it."""
    d = tmp_path / "state"
    d.mkdir()
    (d / (journal.DB_NAME + ".new")).write_bytes(b"half a database")
    with open_ledger(d) as led:
        assert led.startup.created and led.head.seq == 2
    assert not (d / (journal.DB_NAME + ".new")).exists()


@pytest.mark.parametrize("single_max", [journal._SINGLE_MAX, 5])  # 5: batches above it take BEGIN..COMMIT
def test_append_new_writes_all_rows_or_none(tmp_path, monkeypatch, single_max):
    monkeypatch.setattr(journal, "_SINGLE_MAX", single_max)
    with open_ledger(tmp_path):
        pass
    conn = journal.connect(tmp_path / journal.DB_NAME)
    journal.set_pragmas(conn)
    seq0 = journal.seq_range(conn)[1]

    def rows(first: int, keys: list[str]) -> list[tuple[int, str, str, str]]:
        return [(first + i, k, f"[{first + i}]", chain.entry_hash(f"[{first + i}]")) for i, k in enumerate(keys)]

    try:
        written = []
        for n in (1, 2, 5, 7, 13, 40):  # sizes that fit a statement exactly and ones that are padded
            batch = rows(seq0 + 1 + len(written), [f"n{n}-{i}" for i in range(n)])
            assert journal.append_new(conn, batch) is True
            written += batch
            assert not conn.in_transaction
        got = conn.execute("SELECT seq, key, entry, hash FROM entries WHERE seq > ? ORDER BY seq", (seq0,)).fetchall()
        assert got == written
        # a journaled key anywhere in a batch: nothing of the batch is written
        for at in (0, 3, 6):
            keys = [f"x{at}-{i}" for i in range(7)]
            keys[at] = written[at][1]
            assert journal.append_new(conn, rows(seq0 + 1 + len(written), keys)) is False
            assert not conn.in_transaction
        assert journal.seq_range(conn)[1] == seq0 + len(written)
        # anything else is an error, as in append()
        with pytest.raises(sqlite3.IntegrityError):
            journal.append_new(conn, rows(seq0 + len(written), ["fresh-1", "fresh-2"]))  # seq taken
        assert not conn.in_transaction and journal.seq_range(conn)[1] == seq0 + len(written)
        conn.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerError):  # inside a transaction the INSERT would not commit
            journal.append_new(conn, rows(seq0 + 1 + len(written), ["fresh-3"]))
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_every_connection_is_wal_and_synchronous_full(tmp_path):
    seen = []

    class Recording(sqlite3.Connection):
        def execute(self, sql, *args):
            cur = super().execute(sql, *args)
            if sql.startswith("PRAGMA journal_mode") or sql == "PRAGMA synchronous":
                seen.append((sql, super().execute(sql.split("=")[0]).fetchone()[0]))
            return cur

    with open_ledger(tmp_path, connection_factory=Recording):
        pass
    assert ("PRAGMA journal_mode=WAL", "wal") in seen and ("PRAGMA synchronous", 2) in seen
    conn = sqlite3.connect(tmp_path / journal.DB_NAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_set_pragmas_refuses_a_mode_that_did_not_take(tmp_path):
    class NoWal(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql == "PRAGMA journal_mode=WAL":
                return super().execute("PRAGMA journal_mode")
            return super().execute(sql, *args)

    conn = sqlite3.connect(tmp_path / "x.db", factory=NoWal)
    with pytest.raises(LedgerError, match="WAL did not take"):
        journal.set_pragmas(conn)
    conn.close()


def test_clean_close_leaves_a_checkpoint(where):
    with open_ledger(where) as led:
        for i in range(5):
            led.submit("deposit", {"account": "a", "cents": 1}, f"d{i}")
        head = led.head
    last = entry_rows(where)[-1]
    assert last[0] == head.seq + 1 and chain.Entry(last[2]).kind == "checkpoint"
    with open_ledger(where) as led:
        assert led.startup.replayed_from == head.seq + 2  # nothing left to replay
        assert led.state == ({"a": 5}, 5, 0)
    with open_ledger(where) as led:  # a close right after a checkpoint-only tail adds one more
        pass
    assert verify_state_dir(where.journal, Accounts()).ok

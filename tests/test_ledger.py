"""The ledger: receipts, idempotency, refusals, group commit, fatal storage errors, start-up, locking."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from ledger_child import Accounts

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

TESTS = Path(__file__).resolve().parent
WAIT = 20  # seconds: generous bound for anything that should take milliseconds


def keep_running(err: BaseException) -> None:
    """Fatal hook for tests: the default one would end the test run; callers still get the error."""


def open_ledger(path, **kw) -> Ledger:
    kw.setdefault("software_digest", "test-software")
    kw.setdefault("fatal", keep_running)
    return Ledger.open(path, Accounts(), **kw)


def entry_rows(path) -> list[tuple[int, str, str]]:
    conn = sqlite3.connect(f"file:{path / journal.DB_NAME}?mode=ro", uri=True)
    try:
        return [(seq, key, entry) for seq, key, entry in conn.execute("SELECT seq, key, entry FROM entries ORDER BY seq")]
    finally:
        conn.close()


def user_keys(path) -> list[str]:
    return [k for _s, k, _e in entry_rows(path) if not k.startswith("ledger:")]


class Gated(sqlite3.Connection):
    """A connection whose COMMITs can be held at a gate, and counted."""

    hold = False
    gate: threading.Event
    entered: threading.Event
    commits = 0

    def execute(self, sql, *args):
        if sql == "COMMIT":
            cls = type(self)
            cls.commits += 1
            if cls.hold:
                cls.entered.set()
                cls.gate.wait(WAIT)
        return super().execute(sql, *args)


def gated_factory():
    return type("GatedHere", (Gated,), {"gate": threading.Event(), "entered": threading.Event(), "commits": 0})


# --- basics -------------------------------------------------------------------------------------


def test_fresh_ledger_has_genesis_and_self_check(tmp_path):
    d = tmp_path / "state"
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


def test_receipt_and_state(tmp_path):
    with open_ledger(tmp_path) as led:
        r = led.submit("deposit", {"account": "a", "cents": 500}, "dep-1")
        assert isinstance(r, Receipt)
        assert (r.seq, r.key, r.kind, r.result, r.repeat) == (3, "dep-1", "deposit", {"balance": 500}, False)
        assert led.head.seq == 3 and led.head.hash == r.hash
        assert led.state == ({"a": 500}, 500, 0)
        r2 = led.submit("transfer", {"from": "a", "to": "b", "cents": 200}, "tr-1")
        assert r2.result == {"from": 300, "to": 200}
        # the receipt's hash is the hash of the entry as stored, and the next entry chains to it
        rows = entry_rows(tmp_path)
        assert chain.entry_hash(rows[2][2]) == r.hash
        assert chain.Entry(rows[3][2]).prev_hash == r.hash


def test_state_survives_restart(tmp_path):
    with open_ledger(tmp_path) as led:
        for i in range(10):
            led.submit("deposit", {"account": f"a{i % 3}", "cents": 100 + i}, f"d{i}")
        led.submit("withdraw", {"account": "a0", "cents": 50}, "w")
        before = led.state
    with open_ledger(tmp_path) as led:
        assert led.state == before


# --- idempotency --------------------------------------------------------------------------------


def test_idempotent_retry_returns_original_receipt(tmp_path):
    with open_ledger(tmp_path) as led:
        r1 = led.submit("deposit", {"account": "a", "cents": 500}, "op-1")
        head = led.head
        r2 = led.submit("deposit", {"cents": 500, "account": "a"}, "op-1")  # same body, other key order
        assert r2 == r1 and r2.repeat and not r1.repeat
        assert led.head == head
        assert led.state == ({"a": 500}, 500, 0)  # applied once
    # and after a restart, from the journal
    with open_ledger(tmp_path) as led:
        r3 = led.submit("deposit", {"account": "a", "cents": 500}, "op-1")
        assert r3 == r1 and r3.repeat
        assert led.state == ({"a": 500}, 500, 0)
    assert user_keys(tmp_path) == ["op-1"]


def test_same_key_with_other_body_is_a_conflict(tmp_path):
    with open_ledger(tmp_path) as led:
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


# --- refusals -----------------------------------------------------------------------------------


def test_refused_operation_writes_nothing(tmp_path):
    with open_ledger(tmp_path) as led:
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
    assert user_keys(tmp_path) == ["d", "w"]


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


def test_bad_input_is_refused_before_queueing(tmp_path):
    with open_ledger(tmp_path) as led:
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


def test_operation_breaking_the_invariant_is_refused(tmp_path):
    with Ledger.open(tmp_path, BrokenReducer(), software_digest="t") as led:
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


def test_concurrent_submitters_share_transactions(tmp_path):
    n_threads, per_thread = 32, 25
    with open_ledger(tmp_path) as led:
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


def test_one_commit_per_operation_when_batching_is_off(tmp_path):
    with open_ledger(tmp_path, max_batch=1) as led:
        before = led.transactions
        futs = [led.submit_future("deposit", {"account": "a", "cents": 1}, f"k{i}") for i in range(50)]
        for f in futs:
            f.result(WAIT)
        assert led.transactions - before == 50


def test_submit_async(tmp_path):
    async def main(led):
        rs = await asyncio.gather(*(led.submit_async("deposit", {"account": "a", "cents": 2}, f"k{i}")
                                    for i in range(200)))
        with pytest.raises(RulesError):
            await led.submit_async("withdraw", {"account": "a", "cents": 401}, "w")
        return rs

    with open_ledger(tmp_path) as led:
        rs = asyncio.run(main(led))
        assert sorted(r.seq for r in rs) == list(range(3, 203))
        assert led.state == ({"a": 400}, 400, 0)


# --- fatal storage errors -----------------------------------------------------------------------


def outcome(led: Ledger, kind, body, key):
    """The receipt or the error of one submission: once the writer has stopped, submitting raises at once;
    before that, the error comes through the future."""
    try:
        return led.submit_future(kind, body, key).result(WAIT)
    except Exception as e:  # noqa: BLE001 - returned for the test to look at
        return e


class FailingCommit(sqlite3.Connection):
    fail = False

    def execute(self, sql, *args):
        if sql == "COMMIT" and type(self).fail:
            raise sqlite3.OperationalError("disk I/O error")
        return super().execute(sql, *args)


def test_commit_error_is_fatal_and_never_acknowledged(tmp_path):
    factory = type("FailingHere", (FailingCommit,), {"fail": False})
    hooked: list[BaseException] = []
    led = open_ledger(tmp_path, connection_factory=factory, fatal=hooked.append)
    try:
        led.submit("deposit", {"account": "a", "cents": 100}, "ok")
        factory.fail = True
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
        if sql == "BEGIN IMMEDIATE" and type(self).cap:
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
                if sql == "COMMIT" and Failing.fail:
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
                          cwd=TESTS.parent)
    assert proc.returncode == EXIT_STORAGE, proc.stderr
    assert "still alive" not in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "fatal storage error" in lines[0] and "disk I/O error" in lines[0]


# --- lifecycle ----------------------------------------------------------------------------------


def test_one_writer_per_state_directory(tmp_path):
    with open_ledger(tmp_path):
        with pytest.raises(LedgerBusy):
            open_ledger(tmp_path)
    with open_ledger(tmp_path):  # released on close
        pass


def test_closed_ledger_refuses(tmp_path):
    led = open_ledger(tmp_path)
    fut = led.submit_future("deposit", {"account": "a", "cents": 1}, "k")
    led.close()
    assert fut.result(WAIT).seq == 3  # submitted before close: finished
    with pytest.raises(LedgerClosed):
        led.submit("deposit", {"account": "a", "cents": 1}, "k2")
    led.close()


def test_existing_empty_directory_is_used(tmp_path):
    d = tmp_path / "state"
    d.mkdir()  # as systemd's StateDirectory= leaves it
    with open_ledger(d) as led:
        assert led.startup.created


def test_checkpoints_snapshots_and_replay(tmp_path):
    led = open_ledger(tmp_path, checkpoint_every=10, keep_snapshots=2)
    for i in range(95):
        led.submit("deposit", {"account": f"a{i % 4}", "cents": i + 1}, f"d{i}")
    state = led.state
    led.close(checkpoint=False)
    conn = sqlite3.connect(tmp_path / journal.DB_NAME)
    kinds = [chain.Entry(e).kind for (e,) in conn.execute("SELECT entry FROM entries ORDER BY seq")]
    snaps = [s for (s,) in conn.execute("SELECT seq FROM checkpoints ORDER BY seq")]
    conn.close()
    cps = [i + 1 for i, k in enumerate(kinds) if k == "checkpoint"]
    assert cps == list(range(11, len(kinds) + 1, 10))  # a checkpoint closes every 10 entries
    assert snaps == cps[-2:]  # only the latest snapshots are kept
    with open_ledger(tmp_path, checkpoint_every=10) as led:
        assert led.state == state
        assert led.startup.segments == len(cps)        # every old segment checked in bulk
        assert led.startup.replayed_from == cps[-1] + 1  # only the tail replayed
        assert led.startup.tail == led.startup.entries - cps[-1] + 1
    report = verify_state_dir(tmp_path, Accounts())
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


def test_clean_close_leaves_a_checkpoint(tmp_path):
    with open_ledger(tmp_path) as led:
        for i in range(5):
            led.submit("deposit", {"account": "a", "cents": 1}, f"d{i}")
        head = led.head
    last = entry_rows(tmp_path)[-1]
    assert last[0] == head.seq + 1 and chain.Entry(last[2]).kind == "checkpoint"
    with open_ledger(tmp_path) as led:
        assert led.startup.replayed_from == head.seq + 2  # nothing left to replay
        assert led.state == ({"a": 5}, 5, 0)
    with open_ledger(tmp_path) as led:  # a close right after a checkpoint-only tail adds one more
        pass
    assert verify_state_dir(tmp_path, Accounts()).ok

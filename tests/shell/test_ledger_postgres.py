"""The ledger's journal on PostgreSQL: one writer at a time fenced by the server's advisory lock, a batch in one
transaction, nothing acknowledged that was not committed, a standby that waits for the journal and takes over.
The engine-neutral behaviour (receipts, idempotency, refusals, checkpoints) runs on both engines in test_ledger.py."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

import psycopg
import pytest

from controller.ledger import (
    FatalStorageError,
    KeyConflict,
    Ledger,
    LedgerClosed,
    LedgerDamaged,
    pgjournal,
    verify_state_dir,
)
from controller.ledger.reader import JournalReader

from ledger_child import Accounts
from postgres import Postgres, postgres  # noqa: F401 - the module's PostgreSQL

pytestmark = pytest.mark.xdist_group("postgres-test_ledger_postgres")  # one worker: one PostgreSQL for the module
WAIT = 20  # seconds: a bound for what takes milliseconds


class Fatal:
    """A fatal hook that records the error instead of ending the test run."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.called = threading.Event()

    def __call__(self, err: BaseException) -> None:
        self.errors.append(err)
        self.called.set()


def open_ledger(tmp: Path, url: str, **kw) -> Ledger:
    kw.setdefault("software_digest", "test-software")
    kw.setdefault("fatal", Fatal())
    return Ledger.open(tmp, Accounts(), journal_url=url, **kw)


def deposit(led: Ledger, key: str, cents: int = 1, account: str = "a"):
    return led.submit_future("deposit", {"account": account, "cents": cents}, key)


def writer_pid(led: Ledger) -> int:
    return int(led._store.conn.info.backend_pid)


class TableLock:
    """Another session holding the entries table locked: the writer's INSERT waits on it (its COMMIT not reached)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url)
        self.conn.execute("LOCK TABLE entries IN EXCLUSIVE MODE")

    def waiting(self, pid: int) -> bool:
        row = self.conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        return row is not None and row[0] == "Lock"

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def wait_for(cond, what: str) -> None:
    done = threading.Event()
    for _ in range(WAIT * 100):
        if cond():
            return
        done.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def url(postgres: Postgres) -> str:  # noqa: F811 - the fixture imported above
    return postgres.new_database()


def test_a_batch_is_one_transaction_acknowledged_after_its_commit(tmp_path, url):
    with open_ledger(tmp_path, url, max_batch=1024) as led:
        before = led.transactions
        lock = TableLock(url)
        try:
            first = deposit(led, "first")
            wait_for(lambda: lock.waiting(writer_pid(led)), "the writer's INSERT to wait on the lock")
            rest = [deposit(led, f"k{i}") for i in range(300)]
            assert not first.done() and not any(f.done() for f in rest)  # nothing told before COMMIT
            assert led.state == ({}, 0, 0)
        finally:
            lock.release()
        receipts = [first.result(WAIT)] + [f.result(WAIT) for f in rest]
        assert [r.seq for r in receipts] == list(range(3, 304))
        assert led.transactions - before == 2  # "first", then the 300 that queued behind it
        with psycopg.connect(url) as pg:  # xmin: the transaction that wrote the row
            xids = pg.execute("SELECT count(DISTINCT xmin::text) FROM entries WHERE key LIKE 'k%%'").fetchone()[0]
        assert xids == 1


def test_a_retry_among_new_operations_gets_its_receipt_and_a_conflict_writes_nothing(tmp_path, url):
    """A journaled key in a batch makes the server refuse the INSERT (the key's UNIQUE constraint): nothing of it
    is written, and the batch is prepared again knowing the key."""
    with open_ledger(tmp_path, url) as led:
        old = deposit(led, "old", 5).result(WAIT)
        lock = TableLock(url)
        try:
            first = deposit(led, "first")
            wait_for(lambda: lock.waiting(writer_pid(led)), "the writer's INSERT to wait on the lock")
            futs = [deposit(led, "new-1"), deposit(led, "old", 5), deposit(led, "old", 6), deposit(led, "new-2")]
        finally:
            lock.release()
        f = first.result(WAIT)
        n1, again, conflict, n2 = futs
        assert again.result(WAIT) == old and again.result(WAIT).repeat
        with pytest.raises(KeyConflict):
            conflict.result(WAIT)
        assert (n1.result(WAIT).seq, n2.result(WAIT).seq) == (f.seq + 1, f.seq + 2)
        assert led.state == ({"a": 8}, 8, 0)
    assert verify_state_dir(url, Accounts()).ok


def test_a_second_open_waits_as_a_standby_until_the_first_closes(tmp_path, url, caplog):
    first = open_ledger(tmp_path / "one", url)
    deposit(first, "d1", 7).result(WAIT)
    standby = threading.Event()
    why: list[str] = []

    def on_standby(reason: str) -> None:
        why.append(reason)
        standby.set()

    opened: list[Ledger] = []
    t = threading.Thread(target=lambda: opened.append(
        open_ledger(tmp_path / "two", url, on_standby=on_standby)))
    with caplog.at_level(logging.WARNING, logger="controller.ledger"):
        t.start()
        assert standby.wait(WAIT)
        deposit(first, "d2", 3).result(WAIT)  # the first still writes, the second waits
        assert not opened
        head = first.head
        first.close()
        t.join(WAIT)
    assert opened, "the standby did not take the journal after the first closed"
    second = opened[0]
    try:
        assert why == ["standby: the journal is held by another authority"]
        assert sum("standby: the journal is held by another authority" in r.getMessage()
                   for r in caplog.records) == 1
        assert second.state == ({"a": 10}, 10, 0)
        assert second.startup.entries == head.seq + 1  # and the first's closing checkpoint
        assert deposit(second, "d1", 7).result(WAIT).repeat  # the first's keys are the second's
    finally:
        second.close()


def test_the_standby_wait_is_interruptible(tmp_path, url):
    with open_ledger(tmp_path / "one", url):
        stop = threading.Event()
        standby = threading.Event()
        raised: list[BaseException] = []

        def run() -> None:
            try:
                open_ledger(tmp_path / "two", url, stop=stop, on_standby=lambda _why: standby.set())
            except BaseException as e:
                raised.append(e)

        t = threading.Thread(target=run)
        t.start()
        assert standby.wait(WAIT)
        stop.set()
        t.join(WAIT)
        assert not t.is_alive() and len(raised) == 1 and isinstance(raised[0], LedgerClosed)


def test_a_writer_whose_session_is_terminated_exits_and_acknowledges_nothing_in_flight(tmp_path, url):
    fatal = Fatal()
    led = open_ledger(tmp_path, url, fatal=fatal)
    done = deposit(led, "done", 2).result(WAIT)
    lock = TableLock(url)
    try:
        in_flight = deposit(led, "in-flight")
        pid = writer_pid(led)
        wait_for(lambda: lock.waiting(pid), "the writer's INSERT to wait on the lock")
        assert lock.conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
    finally:
        lock.release()
    with pytest.raises(FatalStorageError):
        in_flight.result(WAIT)
    assert fatal.called.wait(WAIT) and isinstance(fatal.errors[0], FatalStorageError)
    with pytest.raises(FatalStorageError):  # the writer is dead: it never takes another operation
        deposit(led, "after").result(WAIT)
    led.close()
    with open_ledger(tmp_path, url) as again:  # the lock went with the session: no wait
        assert again.state == ({"a": 2}, 2, 0)
        assert again.submit("deposit", {"account": "a", "cents": 2}, "done") == done
        with JournalReader(url) as r:
            assert r.lookup("in-flight") is None and r.lookup("after") is None


def test_a_writer_that_lost_its_session_to_another_cannot_write_after_it(tmp_path, url):
    """The first writer's session is terminated while idle; a second takes the journal; the first's next write
    fails (fatal) and nothing of it is in the journal after the second's entries."""
    fatal = Fatal()
    first = open_ledger(tmp_path / "one", url, fatal=fatal)
    deposit(first, "a1").result(WAIT)
    with psycopg.connect(url, autocommit=True) as pg:
        assert pg.execute("SELECT pg_terminate_backend(%s)", (writer_pid(first),)).fetchone()[0]
    with open_ledger(tmp_path / "two", url) as second:
        late = deposit(first, "late", 50)
        with pytest.raises(FatalStorageError):
            late.result(WAIT)
        assert fatal.called.wait(WAIT)
        assert deposit(second, "b1").result(WAIT).seq == second.head.seq
        assert second.state == ({"a": 2}, 2, 0)
    first.close()
    with JournalReader(url) as r:
        assert r.lookup("late") is None
    assert verify_state_dir(url, Accounts()).ok


def test_a_seq_already_written_is_refused_by_the_server(tmp_path, url):
    """Belt and braces: seq is the PRIMARY KEY, so a second writer's entry at a written seq fails (not False:
    only a journaled key is an answer, anything else stops the writer)."""
    with open_ledger(tmp_path, url):
        pass
    store = pgjournal.PgStore(pgjournal.connect(url), url)
    try:
        head = store.seq_range()[1]
        with pytest.raises(psycopg.errors.UniqueViolation):
            store.append_new([(head, "someone-else", "[]", "0" * 64)])
        with pytest.raises(psycopg.errors.UniqueViolation):
            store.append([(head, "someone-else", "[]", "0" * 64)])
        assert store.append_new([(head + 1, "ledger:genesis", "[]", "0" * 64)]) is False  # a journaled key
        assert store.seq_range() == (1, head)
    finally:
        store.close()


def test_a_restart_reloads_the_same_state_and_head(tmp_path, url):
    led = open_ledger(tmp_path, url, checkpoint_every=10)
    for i in range(25):
        deposit(led, f"d{i}", i + 1, f"a{i % 3}").result(WAIT)  # one batch each: a checkpoint every 10
    last = deposit(led, "last", 1).result(WAIT)
    led.close(checkpoint=False)
    state, head = led.state, led.head  # a checkpoint may have followed the last batch
    assert head.seq >= last.seq
    with open_ledger(tmp_path, url, checkpoint_every=10) as again:
        assert again.state == state
        assert again.startup.entries == head.seq
        with JournalReader(url) as r:
            assert [x.hash for x in r.records() if x.seq == head.seq] == [head.hash]
        assert again.startup.segments >= 2  # old segments checked against their checkpoints, the tail replayed
        assert again.startup.replayed_from > 20
        assert again.submit("deposit", {"account": "a", "cents": 1}, "last") == last


def test_the_reader_on_postgresql(tmp_path, url):
    """Keys in byte order as in SQLite (uppercase before lowercase), prefixes, kinds, times, the verified chain."""
    with open_ledger(tmp_path, url) as led:
        for key in ("t:b", "t:B", "t:a", "u:a"):
            deposit(led, key).result(WAIT)
        with JournalReader(led.journal) as r:
            assert r.keys("t:") == ["t:B", "t:a", "t:b"]
            assert [k for k, _f in r.entries("t:")] == ["t:b", "t:B", "t:a"]
            assert r.lookup("u:a").body == {"account": "a", "cents": 1} and r.lookup("nope") is None
            assert r.has_kind("deposit") and not r.has_kind("withdraw")
            first, last = r.span()
            assert [x.key for x in r.records(since=last)] == ["u:a"]
            assert [x.seq for x in r.verified()] == list(range(1, led.head.seq + 1))
            assert r.where == url  # no password to hide


def test_a_journal_of_another_format_is_refused(tmp_path, url):
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        pg.execute("CREATE TABLE entries (seq BIGINT PRIMARY KEY)")
        pg.execute("CREATE TABLE checkpoints (seq BIGINT PRIMARY KEY)")
        pg.execute("INSERT INTO meta VALUES ('format', 'something-else')")
    with pytest.raises(LedgerDamaged, match="meta.format"):
        open_ledger(tmp_path, url)
    with psycopg.connect(url) as pg:  # refused before anything was written, and the lock given back
        assert pg.execute("SELECT pg_try_advisory_lock(%s)", (pgjournal.LOCK_KEY,)).fetchone()[0]


def test_urls_keep_passwords_out():
    with pytest.raises(ValueError, match="passfile"):
        pgjournal.check_url("postgresql://u:secret@db1,db2/j?target_session_attrs=read-write")
    with pytest.raises(ValueError, match="passfile"):
        pgjournal.check_url("postgresql://u@db1/j?password=secret")
    with pytest.raises(ValueError, match="libpq"):
        pgjournal.check_url("postgresql://u@db1/j?nonsense=1")
    url = "postgresql://u@db1:5432,db2:5432/j?target_session_attrs=read-write"
    assert pgjournal.check_url(url) == url
    assert pgjournal.redact("postgresql://u:secret@db1,db2/j?password=x&sslmode=require") == \
        "postgresql://u@db1,db2/j?password=***&sslmode=require"


def test_a_server_that_turns_read_only_stops_the_writer(tmp_path, url, postgres):  # noqa: F811
    """As a demoted primary does: every write refused, so the writer stops (fatal) and acknowledges nothing."""
    fatal = Fatal()
    led = open_ledger(tmp_path, url, fatal=fatal)
    deposit(led, "before").result(WAIT)
    try:
        postgres.sql("ALTER SYSTEM SET default_transaction_read_only = on")
        postgres.sql("SELECT pg_reload_conf()")
        # the reload reaches the writer's session in its own time: write until a write is refused
        acknowledged = 0
        for i in range(200):
            try:
                deposit(led, f"w{i}").result(WAIT)
                acknowledged += 1
            except FatalStorageError as e:
                refused = f"w{i}"
                assert "read-only" in repr(e.__cause__)
                break
            threading.Event().wait(0.01)
        else:
            raise AssertionError("no write was refused")
        assert fatal.called.is_set()
    finally:
        postgres.sql("ALTER SYSTEM RESET default_transaction_read_only")
        postgres.sql("SELECT pg_reload_conf()")
        led.close()
        wait_for(lambda: postgres.sql("SHOW default_transaction_read_only") == [("off",)], "the server to write again")
    with open_ledger(tmp_path, url) as again:
        assert again.state == ({"a": 1 + acknowledged}, 1 + acknowledged, 0)
        with JournalReader(url) as r:
            assert r.lookup(refused) is None


def test_a_session_lost_while_idle_is_found_by_a_session_check(tmp_path, url):
    fatal = Fatal()
    led = open_ledger(tmp_path, url, fatal=fatal)
    try:
        assert led.check_session().result(WAIT)[:2] == (0, 0)
        deposit(led, "d1").result(WAIT)
        with psycopg.connect(url, autocommit=True) as pg:
            assert pg.execute("SELECT pg_terminate_backend(%s)", (writer_pid(led),)).fetchone()[0]
        with pytest.raises(FatalStorageError):
            led.check_session().result(WAIT)
        assert fatal.called.is_set()
        with pytest.raises(FatalStorageError):  # nothing more is taken
            deposit(led, "d2").result(WAIT)
    finally:
        led.close()


def test_a_multi_host_url_finds_the_server_that_takes_writes(tmp_path, url):
    """libpq tries the hosts in turn: the first one down, the journal is found on the next without a change."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = s.getsockname()[1]  # nothing listens there once closed
    host_port, _, database = url.removeprefix("postgresql://postgres@").partition("/")
    multi = f"postgresql://postgres@127.0.0.1:{down},{host_port}/{database}?target_session_attrs=read-write"
    with open_ledger(tmp_path, multi) as led:
        assert deposit(led, "d1").result(WAIT).seq == 3
        assert led.url == multi and f",{host_port}/" in led._store.where


class NoStandby:
    """The server told to wait, at each COMMIT, for a synchronous standby that never comes: as a primary whose
    standby follows another primary now. Undone at the end (the module's other tests share the server)."""

    def __init__(self, postgres: Postgres) -> None:  # noqa: F811
        self.postgres = postgres

    def __enter__(self) -> NoStandby:
        self.postgres.sql("CREATE TABLE IF NOT EXISTS probe (n int)")
        try:
            self._set("ALTER SYSTEM SET synchronous_standby_names = 'nobody'", waits=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._set("ALTER SYSTEM RESET synchronous_standby_names", waits=False)

    def _set(self, statement: str, *, waits: bool) -> None:
        """`statement`, the configuration reloaded, and a probe's COMMIT until it `waits` for the standby or not:
        the server takes the setting a moment after the reload (its checkpointer marks standbys as wanted or not)."""
        self.postgres.sql(statement)
        self.postgres.sql("SELECT pg_reload_conf()")
        for _ in range(WAIT * 10):
            probe = psycopg.connect(self.postgres.url(), autocommit=True)
            pid = probe.info.backend_pid
            # a COMMIT that wrote WAL: only such a one waits for a standby
            commit = threading.Thread(target=lambda probe=probe: probe.execute("INSERT INTO probe VALUES (1)"),
                                      daemon=True)
            commit.start()
            commit.join(0.1)
            waited = commit.is_alive()
            if waited:  # let go (committed here alone, as the test's own COMMIT will be)
                wait_for(lambda pid=pid: self.waiting(pid), "the probe's COMMIT to wait for the standby")
                self.postgres.sql("SELECT pg_cancel_backend(%s)", (pid,))
                commit.join(WAIT)
            probe.close()
            if waited == waits:
                return
        raise AssertionError(f"the server did not take {statement!r}")

    def waiting(self, pid: int) -> bool:
        row = self.postgres.sql("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,))
        return row == [("SyncRep",)]


def test_a_commit_let_go_of_its_standby_wait_is_not_acknowledged(tmp_path, postgres, url):  # noqa: F811
    """A cancel while a COMMIT waits for the synchronous standby leaves the transaction committed on this server
    alone, with only a WARNING: a failover may undo it. The writer takes the warning as a failed write: its caller
    is never told the operation succeeded, and the writer stops (fatal)."""
    fatal = Fatal()
    led = open_ledger(tmp_path, url, fatal=fatal)
    try:
        deposit(led, "before").result(WAIT)
        with NoStandby(postgres) as no_standby:
            waits = deposit(led, "waits", 5)
            pid = writer_pid(led)
            wait_for(lambda: no_standby.waiting(pid), "the writer's COMMIT to wait for the standby")
            assert not waits.done()
            assert postgres.sql("SELECT pg_cancel_backend(%s)", (pid,)) == [(True,)]
            with pytest.raises(FatalStorageError, match="warning"):
                waits.result(WAIT)
        assert fatal.called.wait(WAIT) and isinstance(fatal.errors[0], FatalStorageError)
        with pytest.raises(FatalStorageError):
            deposit(led, "after").result(WAIT)
    finally:
        led.close()
    # committed on this server all the same (the case a failover undoes): a retry finds it, as of any unanswered
    # operation of a writer that died
    with open_ledger(tmp_path, url) as again, JournalReader(url) as r:
        assert r.lookup("waits") is not None and again.state[0] == {"a": 6}


def test_a_writer_given_up_while_its_commit_waits_tells_no_caller(tmp_path, postgres, url):  # noqa: F811
    """give_up from another thread while the writer's COMMIT waits for a standby: the fatal hook runs at once, and
    when the COMMIT returns after all (the standby wait ended), its caller is still not told it succeeded."""
    fatal = Fatal()
    led = open_ledger(tmp_path, url, fatal=fatal)
    try:
        with NoStandby(postgres) as no_standby:
            waits = deposit(led, "waits")
            wait_for(lambda: no_standby.waiting(writer_pid(led)), "the writer's COMMIT to wait for the standby")
            led.give_up("a test")
            assert fatal.called.is_set() and "a test" in str(fatal.errors[0])
        # the standby wait ends (the setting reset): the COMMIT returns, and its caller gets the failure
        with pytest.raises(FatalStorageError):
            waits.result(WAIT)
        assert led.state[0] == {}  # nor does the state the authority publishes move
    finally:
        led.close()

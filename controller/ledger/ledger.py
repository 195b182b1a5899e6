"""The ledger: an append-only, hash-chained journal from which state is derived: in a SQLite file in its state
directory, or (the link authority's, when configured) on PostgreSQL."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import platform
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from controller.ledger import chain, journal
from controller.ledger.chain import GENESIS, GENESIS_PREV, INTERNAL_KEY_PREFIX, SELF_CHECK
from controller.ledger.errors import FatalStorageError, LedgerBusy, LedgerClosed, LedgerDamaged, LedgerError
from controller.ledger.reducer import Reducer
from controller.ledger.store import SqliteStore, Store
from controller.ledger.verify import (
    Bad,
    ChainHead,
    derive_state,
    is_db_error,
    run_integrity_check,
    verify_chain_fast,
)
from controller.ledger.writer import Op, Receipt, SessionCheck, Waiter, WalCheckpoint, Writer, exit_process

if TYPE_CHECKING:
    import asyncio  # loaded on first use (_running_loop)

S = TypeVar("S")


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


@dataclass(frozen=True)
class Startup:
    """What start-up found and did; the same figures are recorded in the self-check entry."""

    created: bool
    seconds: float
    entries: int          # head sequence number before the self-check entry
    segments: int         # old segments verified in bulk against their checkpoint digests
    tail: int             # entries verified one by one
    replayed_from: int    # first entry replayed through the reducer
    self_check: Receipt


class Ledger(Generic[S]):
    """Open with `Ledger.open(...)`; one per state directory and process.

    - `submit(kind, body, key)` blocks until the operation is durable and returns its Receipt, or raises
      the reducer's InputError/RulesError (nothing journaled), KeyConflict (the key was used for a
      different operation), InvariantViolation, FatalStorageError or LedgerClosed.
    - `submit_async` is the same for asyncio code; `submit_future` returns a concurrent Future.
      Cancelling a submission that the writer has already taken does not withdraw it: retry with the
      same key to learn its outcome.
    - `state` is the derived state as of the last COMMIT (treat it as read-only); `head` the last entry.
    """

    def __init__(self, path: Path, db: Path, lock_fd: int | None, store: Store, writer: Writer[S],
                 startup: Startup, url: str | None = None) -> None:
        self.path = path
        self.db_path = db  # the SQLite file (with a journal on PostgreSQL: where it would be, unused)
        self.url = url     # the PostgreSQL journal's URL, or None
        self._lock_fd = lock_fd
        self._store = store
        self._writer = writer
        self._open = True
        self.startup = startup

    @property
    def journal(self) -> Path | str:
        """Where the journal is, for a JournalReader or check_anchor: its SQLite file, or its PostgreSQL URL."""
        return self.url if self.url is not None else self.db_path

    @property
    def engine(self) -> str:
        return "sqlite" if self.url is None else "postgresql"

    @classmethod
    def open(cls, state_dir: str | os.PathLike[str], reducer: Reducer[S], *, software_digest: str,
             clock: Callable[[], Any] = chain.utc_now, checkpoint_every: int = 10_000, keep_snapshots: int = 2,
             max_batch: int = 1024, integrity: str = "full",
             fatal: Callable[[BaseException], None] = exit_process,
             connection_factory: type[sqlite3.Connection] | None = None, journal_url: str | None = None,
             stop: threading.Event | None = None, on_standby: Callable[[str], None] | None = None) -> Ledger[S]:
        """Open (or, only when there is none, create) the ledger in `state_dir`, verify it, derive the
        state, record a power-up self-check entry and start the writer.

        Raises LedgerDamaged naming the first bad entry when anything is wrong; a damaged ledger is never
        replaced by a new one. `integrity` is "full" (PRAGMA integrity_check: also proves the key index
        matches the table) or "quick" (quick_check). `fatal` is called (from the writer thread) after a
        failed write or COMMIT; the default exits the process. `connection_factory` is for fault injection.

        With `journal_url` (a libpq URL), the journal is on PostgreSQL instead (controller.ledger.pgjournal): the
        writer's session first takes the journal's lock, waiting as a standby while another holds it (`on_standby`
        is told why, once each time it changes; `stop` set ends the wait with LedgerClosed); only then is the
        journal created, verified and loaded. `integrity` is then the server's business.
        """
        journal.check_sqlite_version()
        if integrity not in ("full", "quick"):
            raise ValueError("integrity must be 'full' or 'quick'")
        if not isinstance(software_digest, str) or not software_digest:
            raise ValueError("software_digest must be a non-empty string")
        if max_batch < 1 or keep_snapshots < 1 or checkpoint_every < 0 or checkpoint_every == 1:
            raise ValueError("max_batch >= 1, keep_snapshots >= 1, checkpoint_every 0 (off) or >= 2")
        chain.format_time(clock())  # fail now on a clock that returns naive datetimes
        t0 = time.perf_counter()
        path = Path(state_dir)
        if path.exists() and not path.is_dir():
            raise LedgerError(f"{path} is not a directory")
        path.mkdir(parents=True, exist_ok=True, mode=0o700)  # the daemon's user only
        writer_args = {"clock": clock, "checkpoint_every": checkpoint_every, "keep_snapshots": keep_snapshots,
                       "max_batch": max_batch, "fatal": fatal}
        if journal_url is not None:
            return cls._open_database(path, journal_url, reducer, software_digest, t0, writer_args, stop, on_standby)
        lock_fd = _lock(path / journal.LOCK_NAME)
        try:
            db = path / journal.DB_NAME
            created = False
            if not db.exists():
                _create(db, software_digest, clock)
                created = True
            conn = journal.connect(db, "rw", connection_factory)
            store = SqliteStore(conn, db)
            try:
                writer, head, replayed_from = _verify_and_load(conn, db, reducer, integrity=integrity, **writer_args)
                body = {
                    "software_sha256": software_digest,
                    "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version,
                    "verified": {"entries": head.seq, "segments": head.segments, "tail": head.tail,
                                 "replayed_from": replayed_from, "integrity": integrity},
                    "startup_ms": int((time.perf_counter() - t0) * 1000),
                }
                receipt = writer.append_internal(SELF_CHECK, f"{INTERNAL_KEY_PREFIX}self-check:{head.seq + 1}", body)
                writer._maybe_checkpoint()
                writer.start()
            except BaseException:
                conn.close()
                raise
        except BaseException as e:
            os.close(lock_fd)
            if (storage := _storage_failure(e, path / journal.DB_NAME)) is not None:
                raise storage from e  # a full disk is not a damaged journal
            raise
        startup = Startup(created=created, seconds=time.perf_counter() - t0, entries=head.seq,
                          segments=head.segments, tail=head.tail, replayed_from=replayed_from,
                          self_check=receipt)
        return cls(path, db, lock_fd, store, writer, startup)

    @classmethod
    def _open_database(cls, path: Path, url: str, reducer: Reducer[S], software_digest: str, t0: float,
                       writer_args: dict[str, Any], stop: threading.Event | None,
                       on_standby: Callable[[str], None] | None) -> Ledger[S]:
        """Ledger.open for a journal on PostgreSQL: the lock first (a standby until then), then as for a file."""
        from controller.ledger import pgjournal  # psycopg is loaded only for a journal on PostgreSQL

        conn = pgjournal.connect_holding_lock(url, stop=stop, on_standby=on_standby)
        store = pgjournal.PgStore(conn, url)
        try:
            created = False
            if not pgjournal.exists(conn):
                genesis, now = _genesis(software_digest, writer_args["clock"])
                pgjournal.create(conn, genesis, now)
                created = True
            pgjournal.check_header(conn, store.where)
            try:
                head = verify_chain_fast(store)
                state, replayed_from = derive_state(store, reducer, head)
            except Bad as b:
                raise LedgerDamaged(store.where, b.seq, b.text) from None
            writer = Writer(store, reducer, state, head, **writer_args)
            body = {
                "software_sha256": software_digest,
                "python": platform.python_version(),
                "postgresql": pgjournal.server_version(conn),
                "verified": {"entries": head.seq, "segments": head.segments, "tail": head.tail,
                             "replayed_from": replayed_from, "integrity": "server"},
                "startup_ms": int((time.perf_counter() - t0) * 1000),
            }
            receipt = writer.append_internal(SELF_CHECK, f"{INTERNAL_KEY_PREFIX}self-check:{head.seq + 1}", body)
            writer._maybe_checkpoint()
            writer.start()
        except BaseException as e:
            store.close()  # the lock goes with the session
            if is_db_error(e):  # the server lost or refusing: not a damaged journal
                raise FatalStorageError(f"{store.where}: the journal cannot be opened: {str(e).strip()}") from e
            raise
        startup = Startup(created=created, seconds=time.perf_counter() - t0, entries=head.seq,
                          segments=head.segments, tail=head.tail, replayed_from=replayed_from,
                          self_check=receipt)
        return cls(path, path / journal.DB_NAME, None, store, writer, startup, url)

    # --- operations ---

    def submit_future(self, kind: str, body: dict[str, Any], key: str) -> Future[Receipt]:
        future: Future[Receipt] = Future()
        self._writer.enqueue(_op(kind, body, key, future))
        return future

    def submit(self, kind: str, body: dict[str, Any], key: str, *, timeout: float | None = None) -> Receipt:
        return self.submit_future(kind, body, key).result(timeout)

    async def submit_async(self, kind: str, body: dict[str, Any], key: str) -> Receipt:
        # An asyncio future, resolved in this loop's thread with one wake-up per batch, not per operation.
        loop = _running_loop()
        future: asyncio.Future[Receipt] = loop.create_future()
        self._writer.enqueue(_op(kind, body, key, future, loop))
        return await future

    def wal_checkpoint(self) -> Future[tuple[int, int, float]]:
        """Fold the WAL into the database file now, in the writer's thread between two batches, instead of in
        the COMMIT that SQLite's automatic checkpoint (at 1,000 pages of WAL) would pick: a caller asks when
        no write is waiting on the time, the table after a round's booking. The future gets (frames in the WAL,
        frames copied, seconds), or the error that stopped the writer (LedgerClosed on a closed ledger)."""
        return self._between_batches(WalCheckpoint())

    def check_session(self) -> Future[tuple[int, int, float]]:
        """Prove, in the writer's thread between two batches, that its session still holds the journal: on PostgreSQL
        a writer that lost its session (and the journal's lock with it) while idle learns it now, not at its next
        operation, and stops (the fatal hook: the process exits). On SQLite it proves nothing and costs nothing.
        The future gets (0, 0, seconds), or the error that stopped the writer."""
        return self._between_batches(SessionCheck())

    def _between_batches(self, request: WalCheckpoint | SessionCheck) -> Future[tuple[int, int, float]]:
        """`request` done by the writer between two batches; its future gets the error that stopped the writer."""
        try:
            self._writer.enqueue(request)
        except LedgerError as e:
            request.future.set_exception(e)
        return request.future

    def give_up(self, why: str) -> None:
        """The writer is stuck (a COMMIT that a server will not acknowledge: its session answers, but its
        synchronous standby follows another primary now): stop as a failed write does, through the fatal hook
        (the process exits), nothing waiting acknowledged. Called from another thread than the writer's."""
        self._writer.give_up(FatalStorageError(f"the journal's writer gave up: {why}; nothing waiting was "
                                               "acknowledged"))

    # --- reading ---

    @property
    def state(self) -> S:
        return self._writer.state

    @property
    def head(self) -> Head:
        w = self._writer
        return Head(w.seq, w.hash)

    @property
    def transactions(self) -> int:
        """Transactions committed since open (including the self-check entry's and checkpoints')."""
        return self._writer.transactions

    @property
    def failed(self) -> LedgerError | None:
        """The fatal storage error that stopped the writer, if one did."""
        return self._writer.dead

    def close(self, *, checkpoint: bool = True) -> None:
        """Finish what was submitted before, write a checkpoint (unless told not to: the next start then
        restores the final state from its snapshot and replays nothing), and close. Idempotent."""
        if not self._open:
            return
        self._open = False
        self._writer.stop(checkpoint)
        try:
            self._store.close()  # on PostgreSQL, the journal's lock goes with the session
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> Ledger[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort, and writes nothing
        if getattr(self, "_open", False):
            with contextlib.suppress(Exception):
                self.close(checkpoint=False)


# SQLite's errors for a write that found no room or failed on the device (a full disk: SQLITE_FULL, or
# SQLITE_IOERR_SHMSIZE when not even the shared-memory index can grow); reading errors are not among them.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _storage_failure(e: BaseException, db: Path) -> FatalStorageError | None:
    """What start-up raised, as the storage error it is (looking at what it was raised from), or None."""
    seen = 0
    cause: BaseException | None = e
    while cause is not None and seen < 4:
        seen += 1
        if isinstance(cause, sqlite3.Error):
            name = getattr(cause, "sqlite_errorname", "")
            if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and "READ" not in name):
                return FatalStorageError(f"{db}: the journal cannot be written at start-up: {cause} ({name})")
        elif isinstance(cause, OSError) and cause.errno in _STORAGE_ERRNOS:
            return FatalStorageError(f"{db}: the journal cannot be written at start-up: "
                                     f"{cause.strerror or cause}")
        elif not isinstance(cause, (LedgerError, OSError)):
            return None
        cause = cause.__cause__ or cause.__context__
    return None


def _running_loop() -> asyncio.AbstractEventLoop:
    """asyncio.get_running_loop(); asyncio is imported on first use, not at the top: the daemon has it
    loaded, tools and child processes need not. Then this name is bound to that function itself."""
    global _running_loop
    from asyncio import get_running_loop

    _running_loop = get_running_loop
    return get_running_loop()


def _op(kind: str, body: dict[str, Any], key: str, future: Waiter,
        loop: asyncio.AbstractEventLoop | None = None) -> Op:
    chain.check_kind(kind)
    chain.check_key(key)
    body_text, decoded = chain.canonical_body(body)
    return Op(kind, key, body_text, decoded, future, loop)


def _lock(lock_path: Path) -> int:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LedgerBusy(f"{lock_path.parent}: the ledger is already open (by another process or in this one)") from None
    return fd


def _create(db: Path, software_digest: str, clock: Callable[[], Any]) -> None:
    for suffix in ("-wal", "-journal"):
        stray = Path(str(db) + suffix)
        if stray.exists():
            raise LedgerDamaged(db, None, f"{db.name} is missing but {stray.name} exists: refusing to create a "
                                          "new ledger over what may be the remains of one")
    genesis, now = _genesis(software_digest, clock)
    journal.create(db, genesis, now)


def _genesis(software_digest: str, clock: Callable[[], Any]) -> tuple[tuple[int, str, str, str], str]:
    """The genesis entry's row, and its time."""
    now = chain.format_time(clock())
    body = {"format": journal.FORMAT, "software_sha256": software_digest}
    key = f"{INTERNAL_KEY_PREFIX}genesis"
    text = chain.entry_text(GENESIS_PREV, 1, key, now, GENESIS, chain.canonical(body), "null")
    return (1, key, text, chain.entry_hash(text)), now


def _verify_and_load(conn: sqlite3.Connection, db: Path, reducer: Reducer[S], *, integrity: str,
                     **writer_args: Any) -> tuple[Writer[S], ChainHead, int]:
    journal.check_header(conn, db)
    try:
        journal.set_pragmas(conn)
    except sqlite3.DatabaseError as e:
        raise LedgerDamaged(db, None, f"the database file cannot be opened for writing ({e})") from None
    problems: list[str] = []
    checker = run_integrity_check(db, integrity, problems)
    bad: Bad | None = None
    store = SqliteStore(conn, db)
    try:
        head = verify_chain_fast(store, db)
        state, replayed_from = derive_state(store, reducer, head)
    except Bad as b:
        bad = b
    except sqlite3.DatabaseError as e:
        bad = Bad(None, f"the database file cannot be read ({e})")
    finally:
        checker.join()
    if problems:
        found = f"{'quick' if integrity == 'quick' else 'integrity'} check: " + "; ".join(problems[:3])
        if bad is not None:
            raise LedgerDamaged(db, bad.seq, f"{bad.text} ({found})")
        raise LedgerDamaged(db, None, found)
    if bad is not None:
        raise LedgerDamaged(db, bad.seq, bad.text)
    writer = Writer(store, reducer, state, head, **writer_args)
    return writer, head, replayed_from


__all__ = ["Head", "Ledger", "LedgerClosed", "Receipt", "Startup"]

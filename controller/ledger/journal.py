"""The journal's SQLite file: schema, connections, and the few statements the ledger runs.

Every connection sets ``journal_mode=WAL`` and ``synchronous=FULL`` itself and checks that both took:
with them, COMMIT returns only after the transaction's WAL frames are on stable storage (fsync).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from controller.ledger.errors import LedgerDamaged, LedgerError

DB_NAME = "ledger.sqlite3"
LOCK_NAME = "ledger.lock"
FORMAT = "progressive-ledger/1"
APPLICATION_ID = 0x504A4C47  # "PJLG": marks the file as a ledger
SCHEMA_VERSION = 1
MIN_SQLITE = (3, 37, 0)  # STRICT tables

SCHEMA = (
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    # entry: the canonical JSON text [prev_hash, seq, key, time, kind, body, result] (see chain.py);
    # key repeats entry's key for the UNIQUE index; hash = sha256(entry). Append-only.
    """CREATE TABLE entries (
        seq   INTEGER PRIMARY KEY,
        key   TEXT NOT NULL UNIQUE,
        entry TEXT NOT NULL,
        hash  TEXT NOT NULL
    ) STRICT""",
    # The derived state as of checkpoint entry `seq` (reducer.snapshot, canonical JSON). The checkpoint
    # entry itself records the state's SHA-256, so a snapshot is part of the chain.
    "CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY, state TEXT NOT NULL) STRICT",
    # For people reading the file with the sqlite3 shell.
    """CREATE VIEW journal AS SELECT seq, key,
        json_extract(entry, '$[3]') AS time, json_extract(entry, '$[4]') AS kind,
        json_extract(entry, '$[5]') AS body, json_extract(entry, '$[6]') AS result,
        json_extract(entry, '$[0]') AS prev_hash, hash
        FROM entries""",
)


def check_sqlite_version() -> None:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise LedgerError(f"SQLite {sqlite3.sqlite_version} is too old; the ledger needs "
                          f"{'.'.join(map(str, MIN_SQLITE))} or newer")


def _uri(path: Path, mode: str) -> str:
    return f"file:{quote(str(path))}?mode={mode}"


def connect(path: Path, mode: str = "rw", factory: type[sqlite3.Connection] | None = None) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit). `mode` is SQLite's URI mode: "rw" never
    creates a file, "ro" never writes, "rwc" only for creating a new ledger."""
    return sqlite3.connect(_uri(path, mode), uri=True, isolation_level=None, check_same_thread=False,
                           timeout=5.0, factory=factory or sqlite3.Connection)  # sqlite3's default factory


def set_pragmas(conn: sqlite3.Connection) -> None:
    """WAL and synchronous=FULL, set explicitly and checked; raises LedgerError if either did not take."""
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise LedgerError(f"journal_mode=WAL did not take (the file is in {mode!r} mode)")
    conn.execute("PRAGMA synchronous=FULL")
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    if sync != 2:
        raise LedgerError(f"synchronous=FULL did not take (synchronous={sync})")
    conn.execute("PRAGMA cell_size_check=ON")
    conn.execute("PRAGMA trusted_schema=OFF")


def wal_checkpoint(conn: sqlite3.Connection) -> tuple[int, int]:
    """Copy the WAL's committed pages into the database file (PASSIVE: never waits for a reader) and sync it.
    Returns (frames in the WAL, frames copied): equal when all were, and the next write starts the WAL over."""
    _busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(frames), int(copied)


def check_header(conn: sqlite3.Connection, path: Path) -> None:
    """Read-only checks before anything is written: this is a ledger of a format we know.
    Raises LedgerDamaged. Must run before set_pragmas (which may write to the file)."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as e:
        raise LedgerDamaged(path, None, f"the database file cannot be read ({e})") from None
    if app_id != APPLICATION_ID:
        size = path.stat().st_size if path.exists() else 0
        what = "the file is empty" if size == 0 else f"application_id is {app_id:#x}, not {APPLICATION_ID:#x}"
        raise LedgerDamaged(path, None, f"not a ledger database ({what})")
    if version != SCHEMA_VERSION:
        raise LedgerDamaged(path, None, f"unknown schema version {version} (this software knows {SCHEMA_VERSION})")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        fmt = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone() if "meta" in tables else None
    except sqlite3.DatabaseError as e:
        raise LedgerDamaged(path, None, f"the schema cannot be read ({e})") from None
    missing = {"meta", "entries", "checkpoints"} - tables
    if missing:
        raise LedgerDamaged(path, None, f"table(s) {', '.join(sorted(missing))} missing")
    if fmt is None or fmt[0] != FORMAT:
        raise LedgerDamaged(path, None, f"meta.format is {fmt and fmt[0]!r}, not {FORMAT!r}")


def create(path: Path, genesis_row: tuple[int, str, str, str], created: str) -> None:
    """Write a new ledger at `path` atomically: built under a temporary name, synced, then renamed, so a
    crash while creating leaves no half-made file under the real name."""
    tmp = path.with_name(path.name + ".new")
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(tmp) + suffix)
    conn = connect(tmp, "rwc")
    try:
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        set_pragmas(conn)
        conn.execute("BEGIN IMMEDIATE")
        for stmt in SCHEMA:
            conn.execute(stmt)
        conn.executemany("INSERT INTO meta(name, value) VALUES (?, ?)",
                         [("format", FORMAT), ("created", created)])
        conn.execute("INSERT INTO entries(seq, key, entry, hash) VALUES (?, ?, ?, ?)", genesis_row)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    # Closing the last connection has checkpointed the WAL into the file and removed it; an empty WAL or
    # a shared-memory file left behind holds nothing. A WAL with frames in it would: stop.
    for suffix in ("-wal", "-shm"):
        leftover = Path(str(tmp) + suffix)
        if leftover.exists():
            if suffix == "-wal" and leftover.stat().st_size > 0:
                raise LedgerError(f"{leftover} was not checkpointed")
            leftover.unlink()
    fsync_path(tmp)
    os.replace(tmp, path)
    fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- statements ---------------------------------------------------------------------------------

INSERT_INTO = "INSERT INTO entries(seq, key, entry, hash) VALUES "
INSERT_ENTRY = INSERT_INTO + "(?, ?, ?, ?)"


_CHUNK = 256  # rows per INSERT statement (4 parameters each: well under SQLite's limit of 32766)


def insert_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]], suffix: str = "") -> None:
    """Insert rows with one multi-row INSERT per chunk. Each statement step releases Python's GIL and must
    win it back; one step per chunk instead of one per row keeps the writer from queueing behind the event
    loop's thread once per row."""
    for i in range(0, len(rows), _CHUNK):
        chunk = rows[i:i + _CHUNK]
        if len(chunk) == 1:
            conn.execute(INSERT_ENTRY + suffix, chunk[0])
            continue
        sql = INSERT_INTO + ",".join(["(?, ?, ?, ?)"] * len(chunk)) + suffix
        conn.execute(sql, [v for row in chunk for v in row])


def append(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]],
           checkpoint: tuple[int, str, int] | None = None) -> None:
    """Write `rows` (seq, key, entry, hash) in one transaction and COMMIT. With `checkpoint` =
    (seq, state_text, keep_from_seq), also store the snapshot and drop snapshots older than keep_from_seq.
    Raises whatever SQLite raises; the transaction is then rolled back (if SQLite still can)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        insert_rows(conn, rows)
        if checkpoint is not None:
            seq, state_text, keep_from = checkpoint
            conn.execute("INSERT INTO checkpoints(seq, state) VALUES (?, ?)", (seq, state_text))
            conn.execute("DELETE FROM checkpoints WHERE seq < ?", (keep_from,))
        conn.execute("COMMIT")
    except BaseException:
        _roll_back(conn)
        raise


def _roll_back(conn: sqlite3.Connection) -> None:
    """After a failed write: roll back what is open, if SQLite still can (the failure being raised is the one
    to report, not a second one here)."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except Exception:  # noqa: BLE001
        pass


INSERT_NEW_SUFFIX = " ON CONFLICT(key) DO NOTHING"
_SINGLE_MAX = 4096  # rows written by one statement at most (4 parameters each)
_batch_sql: dict[int, str] = {}


def _bucket(n: int) -> int:
    """The number of rows of the statement that writes `n` rows: n itself up to 4, then the next of
    6, 8, 12, 16, 24, 32, 48, ... (powers of two and one and a half times them). Few statements, each
    prepared once and kept in the connection's statement cache; at most a third of the rows are padding."""
    if n <= 4:
        return n
    p = 1 << (n - 1).bit_length()
    return p * 3 // 4 if n <= p * 3 // 4 else p


def _batch_statement(size: int) -> str:
    sql = _batch_sql.get(size)
    if sql is None:
        # padding rows are (0, 0, 0, 0) and left out by the WHERE: entries are numbered from 1
        sql = (INSERT_INTO.replace(" VALUES ", " SELECT * FROM (VALUES ") + ",".join(["(?, ?, ?, ?)"] * size)
               + ") WHERE column1 > 0")
        _batch_sql[size] = sql
    return sql


def _is_key_conflict(e: sqlite3.IntegrityError) -> bool:
    return getattr(e, "sqlite_errorname", "") == "SQLITE_CONSTRAINT_UNIQUE" and "entries.key" in str(e)


def append_new(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]]) -> bool:
    """Write `rows` (seq, key, entry, hash) in one transaction, durably, as append() does, if none of their
    keys is in the journal yet; if one is, write nothing and return False.

    The UNIQUE index on `key` answers the question as part of the insert, so the writer need not look its
    keys up before every batch (keys are new but for retries). Only a key conflict is answered with False;
    anything else raises, as in append().

    Up to _SINGLE_MAX rows are written by one INSERT statement outside any explicit transaction: SQLite runs
    it as a transaction of its own and commits it (WAL synced: synchronous=FULL) before the statement
    returns, or writes none of the rows. One statement instead of BEGIN, INSERT, COMMIT also means one
    release of Python's GIL instead of three: each release lets the event loop's thread in, and the writer
    then waits for it to give the GIL back before it can go on to the COMMIT."""
    if conn.in_transaction:  # the statement would not commit: the caller would acknowledge too early
        raise LedgerError("append_new called inside a transaction")
    n = len(rows)
    if n == 0:
        return True
    if n > min(_SINGLE_MAX, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 4):
        return _append_new_chunked(conn, rows)
    params: Sequence[int | str]
    if n == 1:
        sql, params = INSERT_ENTRY, rows[0]
    else:
        size = _bucket(n)
        sql = _batch_statement(size)
        flat = [v for row in rows for v in row]
        if size > n:
            flat += [0] * (4 * (size - n))
        params = flat
    try:
        conn.execute(sql, params)
    except sqlite3.IntegrityError as e:
        if conn.in_transaction:  # not expected: a failed statement on its own rolls back its transaction
            conn.execute("ROLLBACK")
        if _is_key_conflict(e):
            return False
        raise
    return True


def _append_new_chunked(conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]]) -> bool:
    """append_new() for more rows than one statement takes: BEGIN, INSERTs, COMMIT (or ROLLBACK)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        before = conn.total_changes
        insert_rows(conn, rows, INSERT_NEW_SUFFIX)
        if conn.total_changes - before != len(rows):
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
    except BaseException:
        _roll_back(conn)
        raise
    return True


def find_keys(conn: sqlite3.Connection, keys: list[str]) -> dict[str, tuple[int, str, str]]:
    """key -> (seq, entry, hash) for those of `keys` already journaled."""
    found: dict[str, tuple[int, str, str]] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for key, seq, entry, h in conn.execute(
                f"SELECT key, seq, entry, hash FROM entries WHERE key IN ({marks})", chunk):
            found[key] = (seq, entry, h)
    return found


def seq_range(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """(min seq, max seq) of the entries, None when there are none. Cheap: two lookups, no scan."""
    lo = conn.execute("SELECT seq FROM entries ORDER BY seq LIMIT 1").fetchone()
    hi = conn.execute("SELECT seq FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    return None if lo is None or hi is None else (lo[0], hi[0])


def rows(conn: sqlite3.Connection, first: int, last: int | None = None) -> Iterator[tuple[int, str, str, str]]:
    """(seq, key, entry, hash) from seq `first` (to `last`) in order."""
    if last is None:
        cur = conn.execute("SELECT seq, key, entry, hash FROM entries WHERE seq >= ? ORDER BY seq", (first,))
    else:
        cur = conn.execute("SELECT seq, key, entry, hash FROM entries WHERE seq BETWEEN ? AND ? ORDER BY seq",
                           (first, last))
    while True:
        batch = cur.fetchmany(2000)
        if not batch:
            return
        yield from batch


def entry_at(conn: sqlite3.Connection, seq: int) -> tuple[int, str, str, str] | None:
    row: tuple[int, str, str, str] | None = conn.execute(
        "SELECT seq, key, entry, hash FROM entries WHERE seq = ?", (seq,)).fetchone()
    return row


def segment_parts(conn: sqlite3.Connection, first: int, last: int) -> tuple[bytes, bytes, bytes, int]:
    """The hashes concatenated, the keys and the texts joined by LF, of entries first..last, built inside
    SQLite (see chain.SegmentDigest), and how many entries there are. The rows come in the order of the
    range scan on the primary key, which is seq order; should SQLite ever order them otherwise, the
    digest would not match and start-up would fall back to checking entry by entry."""
    row = conn.execute(
        "SELECT CAST(group_concat(hash, '') AS BLOB), CAST(group_concat(key, char(10)) AS BLOB), "
        "CAST(group_concat(entry, char(10)) AS BLOB), count(*) FROM entries WHERE seq BETWEEN ? AND ?",
        (first, last)).fetchone()
    return row[0] or b"", row[1] or b"", row[2] or b"", row[3]


def checkpoint_seqs(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT seq FROM checkpoints ORDER BY seq DESC")]


def snapshot_at(conn: sqlite3.Connection, seq: int) -> str | None:
    row = conn.execute("SELECT state FROM checkpoints WHERE seq = ?", (seq,)).fetchone()
    return row[0] if row else None


def integrity_check(conn: sqlite3.Connection, how: str = "full") -> list[str]:
    """Problems found by PRAGMA integrity_check ("full") or quick_check ("quick"); [] when the file is sound."""
    pragma = "integrity_check" if how == "full" else "quick_check"
    try:
        out = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}(20)")]
    except sqlite3.DatabaseError as e:
        return [str(e)]
    return [] if out == ["ok"] else out


__all__ = ["APPLICATION_ID", "DB_NAME", "FORMAT", "INSERT_ENTRY", "INSERT_INTO", "INSERT_NEW_SUFFIX", "LOCK_NAME",
           "MIN_SQLITE", "SCHEMA", "SCHEMA_VERSION", "append", "append_new", "check_header", "check_sqlite_version",
           "checkpoint_seqs", "connect", "create", "entry_at", "find_keys", "fsync_path", "insert_rows",
           "integrity_check", "rows", "segment_parts", "seq_range", "set_pragmas", "snapshot_at", "wal_checkpoint"]

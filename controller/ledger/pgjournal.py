"""The journal on PostgreSQL (psycopg 3): the same rows as the SQLite file, on a replicated server.

The writer's own session holds an advisory lock on the journal (`pg_try_advisory_lock`) for as long as it lives:
exactly one writer at a time, fenced by the server itself. A writer whose session is gone (terminated, its server
demoted or lost) has lost the lock with it, and its next write fails: the writer then stops (fatal, the process
exits) and never writes again on another session. As belt and braces, seq is the PRIMARY KEY: a second writer's
entry at a seq already written is refused by the server.

Connect with a libpq multi-host URL and target_session_attrs=read-write
(postgresql://progressive@db1,db2/progressive?target_session_attrs=read-write): after a failover the next
connection finds the new primary without a change of configuration. synchronous_commit stays on: with Patroni's
synchronous mode a COMMIT returns only once the synchronous standby has the transaction's WAL. Passwords are
never in the URL: libpq reads them from its passfile (~/.pgpass, or PGPASSFILE).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from controller.ledger.errors import LedgerClosed, LedgerDamaged, LedgerError
from controller.ledger.journal import APPLICATION_ID, FORMAT, SCHEMA_VERSION
from controller.ledger.reads import Row, SqlReads

log = logging.getLogger("controller.ledger")

LOCK_KEY = APPLICATION_ID  # the advisory lock of the journal, per database
CONNECT_TIMEOUT = 5  # seconds for each attempt to connect (libpq's connect_timeout, unless the URL sets one)
# A server gone silent (its box lost, the network cut) is found within about half a minute, instead of a COMMIT
# waiting on it for ever: the writer then stops, and the process starts again as a standby. Each unless the URL sets it.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
ROWS_CHUNK = 2000

SCHEMA = (
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # As in the SQLite file (journal.py). The key is compared byte by byte ("C"): the order of the keys, and the
    # range scans on a prefix, are SQLite's.
    """CREATE TABLE entries (
        seq   BIGINT NOT NULL CONSTRAINT entries_seq PRIMARY KEY,
        key   TEXT COLLATE "C" NOT NULL CONSTRAINT entries_key UNIQUE,
        entry TEXT NOT NULL,
        hash  TEXT NOT NULL
    )""",
    "CREATE TABLE checkpoints (seq BIGINT PRIMARY KEY, state TEXT NOT NULL)",
    """CREATE VIEW journal AS SELECT seq, key,
        (entry::json)->>3 AS time, (entry::json)->>4 AS kind, (entry::json)->5 AS body, (entry::json)->6 AS result,
        (entry::json)->>0 AS prev_hash, hash
        FROM entries""",
)


SECRETS = ("password", "sslpassword")  # libpq's parameters that hold a secret: never in a URL, never in a log


def redact(url: str) -> str:
    """The URL without a password (for messages and logs)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, hosts = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{hosts}"
    query = urlencode([(k, "***" if k in SECRETS else v) for k, v in parse_qsl(parts.query)], safe="*,")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def check_url(url: str) -> str:
    """`url` if libpq can read it and it carries no password; else ValueError saying what is wrong."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        # libpq's own message quotes the part it could not read, which may be a password: not repeated
        raise ValueError("is not a PostgreSQL URL libpq can read (postgresql://USER@HOST1,HOST2/DATABASE?...)") from None
    if any(params.get(k) for k in SECRETS):
        raise ValueError("carries a password: keep it in libpq's passfile (~/.pgpass or PGPASSFILE), not in the "
                         "configuration")
    return url


def connect(url: str, *, read_only: bool = False) -> psycopg.Connection[Any]:
    """A session in autocommit mode (transactions are explicit). A read-only one cannot write."""
    params = conninfo_to_dict(url)
    extra: dict[str, Any] = {}
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT
    extra.update({k: v for k, v in KEEPALIVES.items() if k not in params})
    if "application_name" not in params:
        extra["application_name"] = "progressive-journal-reader" if read_only else "progressive-journal"
    conn = psycopg.connect(url, autocommit=True, **extra)
    try:
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        conn.execute("SET synchronous_commit = on")  # whatever the server's default: a COMMIT waits for the WAL
    except BaseException:
        conn.close()
        raise
    return conn


def in_recovery(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


def try_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
    return bool(row and row[0])


def connect_holding_lock(url: str, *, stop: threading.Event | None = None,
                         on_standby: Callable[[str], None] | None = None,
                         first_delay: float = 0.1, max_delay: float = 5.0) -> psycopg.Connection[Any]:
    """The writer's session, holding the journal's advisory lock. While another session holds it (or no server
    can be reached), wait as a standby: say so once, try again with a backoff capped at `max_delay`, each attempt
    bounded by its connect timeout, until the lock is taken or `stop` is set (LedgerClosed)."""
    delay = first_delay
    told: str | None = None
    waiting = stop if stop is not None else threading.Event()
    while True:
        why: str
        try:
            conn = connect(url)
        except psycopg.OperationalError as e:
            why = f"standby: the journal's server cannot be reached ({str(e).strip().splitlines()[0]})"
        else:
            try:
                # A hot standby grants advisory locks too: a server in recovery is no journal to write on, whatever
                # the URL asked (target_session_attrs=read-write makes libpq skip it; without it, this does).
                if in_recovery(conn):
                    why = "standby: the journal's server is a standby (read-only)"
                elif try_lock(conn):
                    if told is not None:
                        log.warning("active: the journal is ours now (%s)", redact(url))
                    return conn
                else:
                    why = "standby: the journal is held by another authority"
            except BaseException:
                conn.close()
                raise
            conn.close()
        if why != told:
            log.warning("standby: %s (%s)", why.removeprefix("standby: "), redact(url))
            if on_standby is not None:
                on_standby(why)
            told = why
        if waiting.wait(delay):
            raise LedgerClosed("stopped while waiting for the journal")
        delay = min(delay * 2, max_delay)


def exists(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass('entries') IS NOT NULL").fetchone()
    return bool(row and row[0])


def create(conn: psycopg.Connection[Any], genesis_row: Row, created: str) -> None:
    """The tables and the genesis entry, in one transaction (under the journal's lock)."""
    with conn.transaction():
        for stmt in SCHEMA:
            conn.execute(stmt)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO meta(name, value) VALUES (%s, %s)",
                            [("format", FORMAT), ("created", created), ("schema_version", str(SCHEMA_VERSION))])
        conn.execute("INSERT INTO entries(seq, key, entry, hash) VALUES (%s, %s, %s, %s)", genesis_row)


def check_header(conn: psycopg.Connection[Any], where: str) -> None:
    """This database holds a journal of a format we know; LedgerDamaged otherwise."""
    tables = {r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid) "
        "AND c.relname IN ('meta', 'entries', 'checkpoints')")}
    missing = {"meta", "entries", "checkpoints"} - tables
    if missing:
        raise LedgerDamaged(where, None, f"table(s) {', '.join(sorted(missing))} missing")
    meta = dict(conn.execute("SELECT name, value FROM meta WHERE name IN ('format', 'schema_version')").fetchall())
    if meta.get("format") != FORMAT:
        raise LedgerDamaged(where, None, f"meta.format is {meta.get('format')!r}, not {FORMAT!r}")
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise LedgerDamaged(where, None, f"unknown schema version {meta.get('schema_version')} (this software "
                                         f"knows {SCHEMA_VERSION})")


def server_version(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


_INSERT = ("INSERT INTO entries(seq, key, entry, hash) "
           "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])")


def _columns(rows: list[Row]) -> tuple[list[int], list[str], list[str], list[str]]:
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]


class WarnedCommit(LedgerError):
    """A write's COMMIT came back with a warning: above all PostgreSQL's "canceling wait for synchronous replication"
    (a cancel of the session's query while its COMMIT waited for the standby), after which the transaction is
    committed on this server alone and may be undone by a failover. Never acknowledged: the writer stops."""


class PgStore(SqlReads):
    """The journal on a PostgreSQL session (store.Store). Any warning the server sends while a write runs stops the
    writer (WarnedCommit): the only warning a write can get is a commit that did not wait for the synchronous
    standby (checked on the severity, not on a message the server may translate)."""

    MARK: ClassVar[str] = "%s"
    FIELD: ClassVar[str] = '((entry::json)->>{}) COLLATE "C"'
    conn: psycopg.Connection[Any]

    def __init__(self, conn: psycopg.Connection[Any], url: str) -> None:
        self.conn = conn
        self.url = url
        self.where = redact(url)
        self._warnings: list[str] = []
        conn.add_notice_handler(self._notice)

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING":
            self._warnings.append(f"{diag.sqlstate}: {diag.message_primary}")

    def _unwarned(self) -> None:
        """Raise if the write just made came back with a warning (see WarnedCommit)."""
        if self._warnings:
            warned, self._warnings = self._warnings, []
            raise WarnedCommit(f"a write on the journal came back with a warning, not acknowledged: {'; '.join(warned)}")

    # --- writing ---

    def append(self, rows: list[Row], checkpoint: tuple[int, str, int] | None = None) -> None:
        """`rows` (and a checkpoint's snapshot, dropping those before keep_from) in one transaction, committed."""
        conn = self.conn
        self._warnings.clear()
        with conn.transaction():
            if rows:
                conn.execute(_INSERT, _columns(rows))
            if checkpoint is not None:
                seq, state_text, keep_from = checkpoint
                conn.execute("INSERT INTO checkpoints(seq, state) VALUES (%s, %s)", (seq, state_text))
                conn.execute("DELETE FROM checkpoints WHERE seq < %s", (keep_from,))
        self._unwarned()

    def append_new(self, rows: list[Row]) -> bool:
        """`rows` in one statement, its own transaction committed before it returns, if none of their keys is
        journaled; if one is, nothing is written (the statement failed whole) and False. Any other failure raises
        (a seq already written included: another writer's)."""
        if not rows:
            return True
        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise LedgerError("append_new called inside a transaction")
        self._warnings.clear()
        try:
            self.conn.execute(_INSERT, _columns(rows))
        except pg_errors.UniqueViolation as e:
            if e.diag.constraint_name == "entries_key":
                return False
            raise
        self._unwarned()
        return True

    def wal_checkpoint(self) -> tuple[int, int]:
        return 0, 0  # the server checkpoints its own WAL

    def ping(self) -> None:
        """A round trip on the session: while it answers, the session (and so the journal's lock) is alive; raises
        when it is gone (terminated, its server demoted or lost)."""
        self.conn.execute("SELECT 1")

    # --- reading ---

    def find_keys(self, keys: list[str]) -> dict[str, tuple[int, str, str]]:
        found: dict[str, tuple[int, str, str]] = {}
        for key, seq, entry, h in self.conn.execute(
                "SELECT key, seq, entry, hash FROM entries WHERE key = ANY(%s::text[])", (keys,)):
            found[key] = (seq, entry, h)
        return found

    def seq_range(self) -> tuple[int, int] | None:
        row = self.conn.execute("SELECT min(seq), max(seq) FROM entries").fetchone()
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]))

    def rows(self, first: int, last: int | None = None) -> Iterator[Row]:
        after = first - 1
        while True:
            chunk = self.rows_after(after, ROWS_CHUNK)
            for row in chunk:
                if last is not None and row[0] > last:
                    return
                yield row
            if len(chunk) < ROWS_CHUNK:
                return
            after = chunk[-1][0]

    def entry_at(self, seq: int) -> Row | None:
        return self.conn.execute("SELECT seq, key, entry, hash FROM entries WHERE seq = %s", (seq,)).fetchone()

    def segment_parts(self, first: int, last: int) -> tuple[bytes, bytes, bytes, int]:
        """As journal.segment_parts, built in the server in seq order."""
        row = self.conn.execute(
            "SELECT string_agg(hash, '' ORDER BY seq), string_agg(key, E'\\n' ORDER BY seq), "
            "string_agg(entry, E'\\n' ORDER BY seq), count(*) FROM entries WHERE seq BETWEEN %s AND %s",
            (first, last)).fetchone()
        assert row is not None
        return ((row[0] or "").encode(), (row[1] or "").encode(), (row[2] or "").encode(), int(row[3]))

    def checkpoint_seqs(self) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT seq FROM checkpoints ORDER BY seq DESC")]

    def snapshot_at(self, seq: int) -> str | None:
        row = self.conn.execute("SELECT state FROM checkpoints WHERE seq = %s", (seq,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self.conn.close()


__all__ = ["LOCK_KEY", "SECRETS", "PgStore", "WarnedCommit", "in_recovery", "check_header", "check_url", "connect", "connect_holding_lock", "create", "exists",
           "redact", "server_version", "try_lock"]

"""The journal's storage seam: the few reads and writes the writer, verification and readers make, over one
connection, with two engines behind it: SQLite (journal.py, one box: the default) and PostgreSQL (pgjournal.py,
the link authority's journal on a replicated server when configured). Both keep the same rows (seq, key, entry,
hash), so the entries' texts, their hashes and everything checked on them are the same on either."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Protocol

from controller.ledger import journal
from controller.ledger.reads import KEY_END, Row, SqlReads


def is_url(where: object) -> bool:
    """Whether `where` names a PostgreSQL journal (a libpq URL) rather than a SQLite file."""
    return isinstance(where, str) and where.startswith(("postgresql://", "postgres://"))


class Store(Protocol):
    """One connection to a journal. Every write is one transaction that has committed durably when the call
    returns, or raises (the writer then stops: nothing is retried or reconnected here)."""

    where: str  # what the journal is called in messages (its file, or its URL without a password)

    # --- writing ---
    def append(self, rows: list[Row], checkpoint: tuple[int, str, int] | None = None) -> None: ...
    def append_new(self, rows: list[Row]) -> bool: ...
    def wal_checkpoint(self) -> tuple[int, int]: ...
    def ping(self) -> None: ...

    # --- reading by seq ---
    def find_keys(self, keys: list[str]) -> dict[str, tuple[int, str, str]]: ...
    def seq_range(self) -> tuple[int, int] | None: ...
    def rows(self, first: int, last: int | None = None) -> Iterator[Row]: ...
    def rows_after(self, after: int, limit: int) -> list[Row]: ...
    def entry_at(self, seq: int) -> Row | None: ...
    def segment_parts(self, first: int, last: int) -> tuple[bytes, bytes, bytes, int]: ...
    def checkpoint_seqs(self) -> list[int]: ...
    def snapshot_at(self, seq: int) -> str | None: ...

    # --- reading by key and time (JournalReader) ---
    def entry_of(self, key: str) -> str | None: ...
    def keys(self, prefix: str) -> list[str]: ...
    def key_entries(self, prefix: str) -> list[tuple[str, str]]: ...
    def has_kind(self, kind: str) -> bool: ...
    def end_entries(self) -> tuple[str, str] | None: ...
    def first_seq_since(self, time: str) -> int | None: ...

    def close(self) -> None: ...




class SqliteStore(SqlReads):
    """The journal in a SQLite file (journal.py's statements)."""

    MARK: ClassVar[str] = "?"
    FIELD: ClassVar[str] = "json_extract(entry, '$[{}]')"
    conn: sqlite3.Connection

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.where = str(path)

    def append(self, rows: list[Row], checkpoint: tuple[int, str, int] | None = None) -> None:
        journal.append(self.conn, rows, checkpoint)

    def append_new(self, rows: list[Row]) -> bool:
        return journal.append_new(self.conn, rows)

    def wal_checkpoint(self) -> tuple[int, int]:
        return journal.wal_checkpoint(self.conn)

    def ping(self) -> None:
        """Nothing to prove: the file's lock is the process's for as long as it lives."""

    def find_keys(self, keys: list[str]) -> dict[str, tuple[int, str, str]]:
        return journal.find_keys(self.conn, keys)

    def seq_range(self) -> tuple[int, int] | None:
        return journal.seq_range(self.conn)

    def rows(self, first: int, last: int | None = None) -> Iterator[Row]:
        return journal.rows(self.conn, first, last)

    def entry_at(self, seq: int) -> Row | None:
        return journal.entry_at(self.conn, seq)

    def segment_parts(self, first: int, last: int) -> tuple[bytes, bytes, bytes, int]:
        return journal.segment_parts(self.conn, first, last)

    def checkpoint_seqs(self) -> list[int]:
        return journal.checkpoint_seqs(self.conn)

    def snapshot_at(self, seq: int) -> str | None:
        return journal.snapshot_at(self.conn, seq)

    def close(self) -> None:
        self.conn.close()


def open_reading(where: Path | str) -> Store:
    """A read-only connection to the journal at `where`: a SQLite file, or a PostgreSQL URL."""
    if is_url(where):
        from controller.ledger import pgjournal  # psycopg is loaded only for a journal on PostgreSQL

        return pgjournal.PgStore(pgjournal.connect(str(where), read_only=True), str(where))
    path = Path(where)
    return SqliteStore(journal.connect(path, "ro"), path)


__all__ = ["KEY_END", "Row", "SqliteStore", "Store", "is_url", "open_reading"]

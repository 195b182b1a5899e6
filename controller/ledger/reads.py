"""The journal's reads by key and time, one SQL for both engines (store.SqliteStore, pgjournal.PgStore): they
differ only in the parameter mark and in how a field of an entry's JSON text is read."""

from __future__ import annotations

from typing import Any, ClassVar

Row = tuple[int, str, str, str]  # (seq, key, entry, hash)
KEY_END = "\U0010ffff"  # after every key that starts with a prefix: prefix <= key < prefix + KEY_END


class SqlReads:
    """`conn.execute(sql, params)` with `?` marks written as the engine's `MARK`; `FIELD` reads the entry's JSON
    field at an index (`{}`) as text compared byte by byte, as the keys are."""

    MARK: ClassVar[str]
    FIELD: ClassVar[str]
    conn: Any

    def _sql(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql.replace("?", self.MARK), params)

    def rows_after(self, after: int, limit: int) -> list[Row]:
        return list(self._sql("SELECT seq, key, entry, hash FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                              (after, limit)).fetchall())

    def entry_of(self, key: str) -> str | None:
        row = self._sql("SELECT entry FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def keys(self, prefix: str) -> list[str]:
        rows = self._sql("SELECT key FROM entries WHERE key >= ? AND key < ? ORDER BY key",
                         (prefix, prefix + KEY_END)).fetchall()
        return [k for (k,) in rows]

    def key_entries(self, prefix: str) -> list[tuple[str, str]]:
        return list(self._sql("SELECT key, entry FROM entries WHERE key >= ? AND key < ? ORDER BY seq",
                              (prefix, prefix + KEY_END)).fetchall())

    def has_kind(self, kind: str) -> bool:
        return self._sql(f"SELECT 1 FROM entries WHERE {self.FIELD.format(4)} = ? LIMIT 1",
                         (kind,)).fetchone() is not None

    def end_entries(self) -> tuple[str, str] | None:
        rows = [self._sql(f"SELECT entry FROM entries ORDER BY seq {order} LIMIT 1").fetchone()
                for order in ("ASC", "DESC")]
        if rows[0] is None or rows[1] is None:
            return None
        return rows[0][0], rows[1][0]

    def first_seq_since(self, time: str) -> int | None:
        row = self._sql(f"SELECT min(seq) FROM entries WHERE {self.FIELD.format(3)} >= ?", (time,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])


__all__ = ["KEY_END", "Row", "SqlReads"]

"""Reading a ledger's journal by idempotency key, on a read-only connection of its own.

The link authority learns from its journal which operation of each table it applied last, and answers a
repeated operation with the outcome it journaled the first time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..ledger import journal
from ..ledger.chain import Entry

PREFIX = "link:"


class KeyIndex:
    def __init__(self, db: Path) -> None:
        self._conn = journal.connect(db, "ro")
        self._lock = threading.Lock()  # used from worker threads

    def last_link_seqs(self) -> dict[str, int]:
        """table -> the highest sequence number of its operations in the journal."""
        last: dict[str, int] = {}
        for key in self.with_prefix(PREFIX):
            table, _, seq = key[len(PREFIX):].rpartition(":")
            if table and seq.isdigit():
                last[table] = max(last.get(table, 0), int(seq))
        return last

    def with_prefix(self, prefix: str) -> list[str]:
        """Every key that starts with `prefix` (a range scan of the key index)."""
        with self._lock:
            rows = self._conn.execute("SELECT key FROM entries WHERE key >= ? AND key < ?",
                                      (prefix, prefix + "\U0010ffff")).fetchall()
        return [k for (k,) in rows]

    def outcome(self, key: str) -> tuple[int, str, dict[str, Any], Any] | None:
        """(entry seq, kind, body, result) of the entry journaled under `key`, or None."""
        with self._lock:
            row = self._conn.execute("SELECT entry FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        e = Entry(row[0])
        return e.seq, e.kind, e.body, e.result

    def close(self) -> None:
        with self._lock:
            self._conn.close()

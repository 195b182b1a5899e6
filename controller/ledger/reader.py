"""Reading a journal by idempotency key, on a read-only connection of its own: the one place outside the
ledger's writer that knows the journal's tables.

    reader = JournalReader(ledger.db_path)
    reader.lookup("CS-07-r3:book:main")      # Found(seq, kind, body, result), or None
    reader.keys("CS-07-r3-c")                # every key with that prefix, in key order
    await reader.alookup(...)                # the same off the event loop (a worker thread)
    reader.close()

A reader may be used from several threads (one lock around its connection). What it reads is what was
committed when the read began: a reader next to a running writer never sees half a batch.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import journal
from .chain import Entry


@dataclass(frozen=True)
class Found:
    """One journaled entry: its sequence number, kind, body and the reducer's result."""

    seq: int
    kind: str
    body: dict[str, Any]
    result: Any


class JournalReader:
    def __init__(self, db: Path) -> None:
        self._conn = journal.connect(Path(db), "ro")
        self._lock = threading.Lock()

    def __enter__(self) -> JournalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, key: str) -> Found | None:
        """The entry journaled under `key`, or None."""
        with self._lock:
            row = self._conn.execute("SELECT entry FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        e = Entry(row[0])
        return Found(e.seq, e.kind, e.body, e.result)

    def keys(self, prefix: str) -> list[str]:
        """Every key that starts with `prefix`, in key order (a range scan of the key index)."""
        with self._lock:
            rows = self._conn.execute("SELECT key FROM entries WHERE key >= ? AND key < ? ORDER BY key",
                                      (prefix, prefix + "\U0010ffff")).fetchall()
        return [k for (k,) in rows]

    def entries(self, prefix: str) -> list[tuple[str, Found]]:
        """(key, entry) of every key that starts with `prefix`, in journal order."""
        with self._lock:
            rows = self._conn.execute("SELECT key, entry FROM entries WHERE key >= ? AND key < ? ORDER BY seq",
                                      (prefix, prefix + "\U0010ffff")).fetchall()
        out = []
        for key, text in rows:
            e = Entry(text)
            out.append((key, Found(e.seq, e.kind, e.body, e.result)))
        return out

    def has_kind(self, kind: str) -> bool:
        """Whether any entry is of `kind` (a scan: for telling journals apart, not for a hot path)."""
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM entries WHERE json_extract(entry, '$[4]') = ? LIMIT 1",
                                     (kind,)).fetchone()
        return row is not None

    async def alookup(self, key: str) -> Found | None:
        return await asyncio.to_thread(self.lookup, key)

    async def akeys(self, prefix: str) -> list[str]:
        return await asyncio.to_thread(self.keys, prefix)

    async def aentries(self, prefix: str) -> list[tuple[str, Found]]:
        return await asyncio.to_thread(self.entries, prefix)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def lookup(db: Path, key: str) -> Found | None:
    """One lookup on a connection opened and closed for it (blocking: from a thread)."""
    with JournalReader(db) as r:
        return r.lookup(key)


__all__ = ["Found", "JournalReader", "lookup"]

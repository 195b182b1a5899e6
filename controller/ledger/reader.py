"""Reading a journal by idempotency key, on a read-only connection of its own (store.py: a SQLite file, or a
journal on PostgreSQL given by its URL).

    reader = JournalReader(ledger.journal)
    reader.lookup("CS-07-r3:book:main")      # Found(seq, kind, body, result), or None
    reader.keys("CS-07-r3-c")                # every key with that prefix, in key order
    for r in reader.records(since, until):   # Record(seq, time, key, kind, body, result, hash), in seq order
    for r in reader.verified(until):         # the same from entry 1, the hash chain checked as it goes
    await reader.alookup(...)                # the same off the event loop (a worker thread)
    reader.close()

A reader may be used from several threads (one lock around its connection). What it reads is what was
committed when the read began: a reader next to a running writer never sees half a batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.errors import InvariantViolation
from controller.ledger.chain import GENESIS_PREV, Entry, format_time
from controller.ledger.errors import LedgerDamaged
from controller.ledger.store import is_url, open_reading
from controller.ledger.verify import Bad, ChainScan, is_db_error


@dataclass(frozen=True)
class Found:
    """One journaled entry: its sequence number, kind, body and the reducer's result."""

    seq: int
    kind: str
    body: dict[str, Any]
    result: Any


@dataclass(frozen=True)
class Record:
    """One journaled entry whole: its sequence number, time (UTC, as the writer stamped it), key, kind, body, the
    reducer's result and the entry's hash."""

    seq: int
    time: datetime
    key: str
    kind: str
    body: dict[str, Any]
    result: Any
    hash: str


RECORDS_CHUNK = 2000  # entries read at a time: the lock is not held across a long scan


class JournalReader:
    def __init__(self, db: Path | str) -> None:
        self._store = open_reading(db)
        self.path: Path | str = db if is_url(db) else Path(db)
        self.where = self._store.where  # for messages: no password
        self._lock = threading.Lock()

    def __enter__(self) -> JournalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, key: str) -> Found | None:
        """The entry journaled under `key`, or None."""
        with self._lock:
            text = self._store.entry_of(key)
        if text is None:
            return None
        e = Entry(text)
        return Found(e.seq, e.kind, e.body, e.result)

    def keys(self, prefix: str) -> list[str]:
        """Every key that starts with `prefix`, in key order (a range scan of the key index)."""
        with self._lock:
            return self._store.keys(prefix)

    def entries(self, prefix: str) -> list[tuple[str, Found]]:
        """(key, entry) of every key that starts with `prefix`, in journal order."""
        with self._lock:
            rows = self._store.key_entries(prefix)
        out = []
        for key, text in rows:
            e = Entry(text)
            out.append((key, Found(e.seq, e.kind, e.body, e.result)))
        return out

    def has_kind(self, kind: str) -> bool:
        """Whether any entry is of `kind` (a scan: for telling journals apart, not for a hot path)."""
        with self._lock:
            return self._store.has_kind(kind)

    def span(self) -> tuple[datetime, datetime] | None:
        """When the first and the last entry were stamped (None: no entry)."""
        with self._lock:
            ends = self._store.end_entries()
        if ends is None:
            return None
        first, last = (datetime.fromisoformat(Entry(text).time) for text in ends)
        return first, last

    def records(self, since: datetime | None = None, until: datetime | None = None) -> Iterator[Record]:
        """The entries in seq order, from the first stamped at or after `since` (aware; None: from entry 1), up to
        the first stamped at or after `until` (None: to the head), read a chunk at a time. The ledger's own
        entries (genesis, self-check, checkpoint) are among them."""
        after = 0
        if since is not None:
            with self._lock:  # the entries' times rise with seq but for a clock stepped back: the first at or after
                first = self._store.first_seq_since(format_time(since))
            if first is None:
                return
            after = first - 1
        end = None if until is None else format_time(until)
        for _seq, _key, text, digest in self._rows(after):
            e = Entry(text)
            if end is not None and e.time >= end:
                return
            yield Record(e.seq, datetime.fromisoformat(e.time), e.key, e.kind, e.body, e.result, digest)

    def _rows(self, after: int) -> Iterator[tuple[int, str, str, str]]:
        """(seq, key, entry, hash) of the entries after `after` in seq order, read a chunk at a time (the lock is
        not held while the caller works on a chunk)."""
        while True:
            with self._lock:
                rows = self._store.rows_after(after, RECORDS_CHUNK)
            if not rows:
                return
            yield from rows
            after = rows[-1][0]

    def verified(self, until: datetime | None = None) -> Iterator[Record]:
        """The entries from entry 1 in seq order up to the first stamped at or after `until` (None: to the head), as
        records() gives them, each checked as it is read as start-up checks the chain (controller/ledger/verify.py):
        its hash, its link to the entry before, its number, its key, a checkpoint's digest of its segment. Raises
        LedgerDamaged naming the first bad entry before giving it: nothing after a break in the chain is read.
        The chain is checked on to the head, the entries from `until` on not given: an entry moved past `until`
        with only its own hash made again breaks its successor's link. InvariantViolation naming the entry when
        one stamped before `until` follows one stamped at or after it (the times went back across `until`: the
        entries before it cannot be told)."""
        scan = ChainScan(1, GENESIS_PREV, 1)
        end = None if until is None else format_time(until)
        past: Entry | None = None  # the first entry stamped at or after `end`
        try:
            for seq, key, text, digest in self._rows(0):
                e = scan.feed(seq, key, text, digest)
                if end is not None and e.time < end and past is not None:
                    raise InvariantViolation(
                        f"entry {seq}: stamped {e.time}, before {end}, after entry {past.seq} stamped "
                        f"{past.time}: the journal's times go back across {end}")
                if end is not None and e.time >= end:
                    past = past or e
                    continue
                yield Record(e.seq, datetime.fromisoformat(e.time), e.key, e.kind, e.body, e.result, digest)
            if scan.expected == 1:
                raise Bad(1, "missing (the journal has no entries)")
        except Bad as b:
            raise LedgerDamaged(self.where, b.seq, b.text) from None
        except Exception as e:
            if not is_db_error(e):
                raise
            raise LedgerDamaged(self.where, None, f"the database file cannot be read ({e})") from None

    async def alookup(self, key: str) -> Found | None:
        return await asyncio.to_thread(self.lookup, key)

    async def akeys(self, prefix: str) -> list[str]:
        return await asyncio.to_thread(self.keys, prefix)

    async def aentries(self, prefix: str) -> list[tuple[str, Found]]:
        return await asyncio.to_thread(self.entries, prefix)

    def close(self) -> None:
        with self._lock:
            self._store.close()


def lookup(db: Path | str, key: str) -> Found | None:
    """One lookup on a connection opened and closed for it (blocking: from a thread)."""
    with JournalReader(db) as r:
        return r.lookup(key)


__all__ = ["Found", "JournalReader", "Record", "lookup"]

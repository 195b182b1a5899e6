"""Verification of a journal: at start-up (fast) and offline (complete).

Start-up, within a second or two for a million entries:

1. the file's own integrity (PRAGMA integrity_check, in parallel with the rest);
2. every old segment against the digest its checkpoint entry recorded, in bulk inside SQLite: this
   covers every byte of every entry, hash and key from entry 1 to the latest checkpoint;
3. entry by entry from the latest checkpoint to the end: each entry's hash, its link to the previous
   entry, its sequence number, its key;
4. the latest snapshot against the state digest in its checkpoint entry; the tail replayed through the
   reducer, each result compared with the recorded one; the invariant.

If step 2 finds a mismatch, the whole journal is checked entry by entry to name the first bad entry.

Offline (`verify_state_dir`, for `progressivectl audit verify` on a copy of a state directory):
everything above, entry by entry from entry 1, replaying the whole journal from the reducer's initial
state with the invariant checked after every entry and every snapshot compared with the replayed state.
Nothing is written to the copy.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from controller.ledger import chain, journal
from controller.ledger.chain import CHECKPOINT, GENESIS, GENESIS_PREV, INTERNAL_KINDS, Entry
from controller.ledger.errors import LedgerDamaged, LedgerError
from controller.ledger.reducer import Reducer
from controller.ledger.store import SqliteStore, Store, is_url

S = TypeVar("S")


class Bad(Exception):
    """A problem at entry `seq` (None: not tied to an entry)."""

    def __init__(self, seq: int | None, text: str) -> None:
        super().__init__(text)
        self.seq = seq
        self.text = text


@dataclass(frozen=True)
class Problem:
    seq: int | None
    text: str

    def __str__(self) -> str:
        return f"entry {self.seq}: {self.text}" if self.seq is not None else self.text


def checkpoint_fields(e: Entry) -> tuple[int, int, str, str]:
    """(first, last, segment sha256, state sha256) of a checkpoint entry; raises ValueError."""
    try:
        seg = e.body["segment"]
        first, last, digest, state = seg["first"], seg["last"], seg["sha256"], e.body["state_sha256"]
    except (KeyError, TypeError):
        raise ValueError("checkpoint body lacks segment.first/last/sha256 or state_sha256") from None
    if not (type(first) is int and type(last) is int and isinstance(digest, str) and isinstance(state, str)):
        raise ValueError("checkpoint body has fields of the wrong type")
    return first, last, digest, state


class ChainScan:
    """Checks entries one by one, in order, from `first` whose predecessor has hash `prev`.

    `seg_first` is where the current segment began (so the next checkpoint's digest can be checked), or
    None when the scan starts inside a segment."""

    def __init__(self, first: int, prev: str, seg_first: int | None) -> None:
        self.expected = first
        self.prev = prev
        self.seg_first = seg_first
        self.segment = chain.SegmentDigest()
        self.state_shas: dict[int, str] = {}  # checkpoint seq -> state digest it records

    def feed(self, seq: int, key: str, text: str, h: str) -> Entry:
        if seq < self.expected:
            raise Bad(seq, "no entry may have this number (entries are numbered from 1)")
        if seq != self.expected:
            if self.expected == 1:
                raise Bad(1, f"missing (the journal begins at entry {seq})")
            raise Bad(self.expected, f"missing (the journal goes from entry {self.expected - 1} to entry {seq})")
        try:
            computed = chain.entry_hash(text)
        except UnicodeEncodeError:
            raise Bad(seq, "its text is not canonical (not ASCII): it was changed after it was written") from None
        if computed != h:
            raise Bad(seq, "its contents do not match its hash: the entry or its stored hash was changed")
        try:
            e = Entry(text)
        except ValueError as err:
            raise Bad(seq, f"malformed entry: {err}") from None
        if e.seq != seq:
            raise Bad(seq, f"it says it is entry {e.seq}: entries were reordered or renumbered")
        if e.prev_hash != self.prev:
            raise Bad(seq, f"its prev_hash does not match the hash of entry {seq - 1}: the chain is broken "
                           f"between entries {seq - 1} and {seq} (one of them was changed, or entries were "
                           "removed or reordered)")
        if e.key != key:
            raise Bad(seq, f"its key column {key!r} differs from the key in the entry {e.key!r}")
        if (seq == 1) != (e.kind == GENESIS):
            raise Bad(seq, "entry 1 must be the genesis entry" if seq == 1 else "a second genesis entry")
        if e.kind == CHECKPOINT:
            self._checkpoint(seq, e)
        self.segment.add(h, key, text)
        self.prev = h
        self.expected = seq + 1
        return e

    def _checkpoint(self, seq: int, e: Entry) -> None:
        """A checkpoint closes the segment since the last one: its bounds and digest checked, a new one begun."""
        try:
            first, last, digest, state_sha = checkpoint_fields(e)
        except ValueError as err:
            raise Bad(seq, str(err)) from None
        if last != seq - 1:
            raise Bad(seq, f"its segment ends at entry {last}, not at the entry before it")
        if self.seg_first is not None:
            if first != self.seg_first:
                raise Bad(seq, f"its segment begins at entry {first}, but the previous checkpoint "
                               f"is entry {self.seg_first}" if self.seg_first > 1 else
                          f"its segment begins at entry {first}, not at entry 1")
            if self.segment.hexdigest() != digest:
                raise Bad(seq, f"the digest it records for entries {first}..{last} does not match them")
        self.seg_first = seq
        self.segment = chain.SegmentDigest()
        self.state_shas[seq] = state_sha


def scan_all(conn: Store, on_entry: Callable[[int, Entry], object] | None = None) -> ChainScan:
    """Entry by entry from entry 1; raises Bad at the first problem."""
    scan = ChainScan(1, GENESIS_PREV, 1)
    for seq, key, text, h in conn.rows(-(2**63)):
        e = scan.feed(seq, key, text, h)
        if on_entry is not None:
            on_entry(seq, e)
    if scan.expected == 1:
        raise Bad(1, "missing (the journal has no entries)")
    return scan


def _load_entry(conn: Store, seq: int) -> Entry:
    row = conn.entry_at(seq)
    if row is None:
        raise Bad(seq, "missing")
    try:
        return Entry(row[2])
    except ValueError as err:
        raise Bad(seq, f"malformed entry: {err}") from None


@dataclass
class ChainHead:
    """What start-up verification hands to the writer."""

    seq: int
    hash: str
    seg_first: int          # where the running segment began (latest checkpoint, or 1)
    segment: Any            # chain.SegmentDigest of the running segment so far
    checkpoint: int | None  # the checkpoint whose snapshot start-up restores
    checkpoint_state_sha: str | None
    segments: int           # old segments checked in bulk
    tail: int               # entries checked one by one


def verify_chain_fast(conn: Store, db: Path | None = None) -> ChainHead:
    """Start-up chain verification. Raises Bad naming the first bad entry.

    With `db`, half of the old segments are checked on a second (read-only) connection in a thread."""
    try:
        return _fast(conn, db)
    except Bad:
        # Something is wrong (or the bulk method was fooled): check everything entry by entry, which
        # names the first bad entry, or finds that all is well after all.
        return _full(conn)


def _full(conn: Store) -> ChainHead:
    cps = conn.checkpoint_seqs()
    scan = scan_all(conn)
    c = cps[0] if cps else None
    if c is not None and c not in scan.state_shas:
        raise Bad(c, "the checkpoints table points at it but it is not a checkpoint entry")
    head = scan.expected - 1
    return ChainHead(seq=head, hash=scan.prev, seg_first=scan.seg_first or 1, segment=scan.segment,
                     checkpoint=c, checkpoint_state_sha=scan.state_shas.get(c) if c else None,
                     segments=0, tail=head)


def _walk_checkpoints(conn: Store, c: int) -> list[tuple[int, int, int, str]]:
    """From checkpoint entry `c` back to entry 1: (checkpoint seq, first, last, digest) of every segment."""
    out = []
    k, ek = c, _load_entry(conn, c)
    if ek.kind != CHECKPOINT:
        raise Bad(c, "the checkpoints table points at it but it is not a checkpoint entry")
    while True:
        try:
            first, last, digest, _ = checkpoint_fields(ek)
        except ValueError as err:
            raise Bad(k, str(err)) from None
        if last != k - 1 or not (1 <= first <= last):
            raise Bad(k, f"its segment {first}..{last} does not end just before it")
        out.append((k, first, last, digest))
        if first == 1:
            return out
        k, ek = first, _load_entry(conn, first)
        if ek.kind != CHECKPOINT:
            raise Bad(k, "a checkpoint's segment begins here, but it is not a checkpoint entry")


def check_segments(conn: Store, segments: list[tuple[int, int, int, str]]) -> None:
    for k, first, last, digest in segments:
        hashes, keys, texts, n = conn.segment_parts(first, last)
        if n != last - first + 1:
            raise Bad(k, f"entries {first}..{last} of its segment are not all there ({n} of {last - first + 1})")
        if chain.digest_of_parts(hashes, keys, texts) != digest:
            raise Bad(k, f"the digest it records for entries {first}..{last} does not match them")


def _check_segments_in_thread(db: Path, segments: list[tuple[int, int, int, str]], out: list[Bad]) -> threading.Thread:
    def work() -> None:
        try:
            conn = journal.connect(db, "ro")
            try:
                journal.set_pragmas(conn)
                check_segments(SqliteStore(conn, db), segments)
            finally:
                conn.close()
        except Bad as b:
            out.append(b)
        except (sqlite3.Error, LedgerError) as e:
            out.append(Bad(None, f"the database file cannot be read ({e})"))

    t = threading.Thread(target=work, name="ledger-segments", daemon=True)
    t.start()
    return t


def _fast(conn: Store, db: Path | None) -> ChainHead:
    rng = conn.seq_range()
    if rng is None:
        raise Bad(1, "missing (the journal has no entries)")
    lo, hi = rng
    if lo < 1:
        raise Bad(lo, "no entry may have this number (entries are numbered from 1)")
    if lo > 1:
        raise Bad(1, f"missing (the journal begins at entry {lo})")
    cps = conn.checkpoint_seqs()
    segments: list[tuple[int, int, int, str]] = []
    if cps:
        c = cps[0]
        segments = _walk_checkpoints(conn, c)
        prev_row = conn.entry_at(c - 1)
        if prev_row is None:
            raise Bad(c - 1, "missing")
        scan = ChainScan(c, prev_row[3], None)  # that hash is covered by the last segment's digest
        start = c
    else:
        c = None
        scan = ChainScan(1, GENESIS_PREV, 1)
        start = 1
    problems: list[Bad] = []
    helper = None
    mine = segments
    if db is not None and len(segments) >= 4:
        half = len(segments) // 2
        helper = _check_segments_in_thread(db, segments[half:], problems)
        mine = segments[:half]
    try:
        check_segments(conn, mine)
        for seq, key, text, h in conn.rows(start):
            scan.feed(seq, key, text, h)
    finally:
        if helper is not None:
            helper.join()
    if problems:
        raise problems[0]
    if scan.expected - 1 != hi:
        raise Bad(scan.expected, "missing")
    return ChainHead(seq=hi, hash=scan.prev, seg_first=scan.seg_first or 1, segment=scan.segment,
                     checkpoint=c, checkpoint_state_sha=scan.state_shas.get(c) if c else None,
                     segments=len(segments), tail=hi - start + 1)


# --- replay ----------------------------------------------------------------------------------------


def state_digest(state_text: str) -> str:
    return hashlib.sha256(state_text.encode("ascii")).hexdigest()


def restore_snapshot(reducer: Reducer[S], seq: int, state_text: str, recorded_sha: str | None) -> S:
    if recorded_sha is None or state_digest(state_text) != recorded_sha:
        raise Bad(seq, "the snapshot stored for this checkpoint does not match the state digest the "
                       "checkpoint entry records (the snapshot was changed)")
    try:
        state = reducer.restore(json.loads(state_text))
    except Exception as err:  # noqa: BLE001 - any failure of restore is damage to report
        raise Bad(seq, f"the snapshot stored for this checkpoint cannot be restored: {err}") from None
    try:
        reducer.check(state)
    except Exception as err:  # noqa: BLE001
        raise Bad(seq, f"the invariant does not hold on the snapshot stored for this checkpoint: {err}") from None
    return state


def apply_entry(reducer: Reducer[S], state: S, seq: int, e: Entry) -> S:
    """The state after replaying entry `e` (internal entries change nothing)."""
    if e.kind in INTERNAL_KINDS:
        return state
    try:
        new_state, result = reducer.apply(state, e.kind, e.body)
    except Exception as err:  # noqa: BLE001
        raise Bad(seq, f"the reducer refuses it on replay: {err}") from None
    try:
        got = chain.encode(result)
    except (TypeError, ValueError) as err:
        raise Bad(seq, f"replaying it gives a result that is not JSON: {err}") from None
    recorded = chain.encode(e.result)
    if got != recorded:
        raise Bad(seq, f"replaying it gives the result {got}, but the journal records {recorded}")
    return new_state


def replay(conn: Store, reducer: Reducer[S], state: S, first: int, *, check_each: bool) -> S:
    for seq, _key, text, _h in conn.rows(first):
        state = apply_entry(reducer, state, seq, Entry(text))
        if check_each:
            _check(reducer, state, seq)
    return state


def _check(reducer: Reducer[S], state: S, seq: int) -> None:
    try:
        reducer.check(state)
    except Exception as err:  # noqa: BLE001
        raise Bad(seq, f"the invariant does not hold after this entry: {err}") from None


def derive_state(conn: Store, reducer: Reducer[S], head: ChainHead) -> tuple[S, int]:
    """The state at the head: from the latest snapshot, replaying the tail. Returns (state, replayed from)."""
    if head.checkpoint is not None:
        c = head.checkpoint
        text = conn.snapshot_at(c)
        if text is None:
            raise Bad(c, "the snapshot of this checkpoint is missing")
        state = restore_snapshot(reducer, c, text, head.checkpoint_state_sha)
        first = c + 1
    else:
        state = reducer.initial()
        first = 1
    start_state = state
    state = replay(conn, reducer, state, first, check_each=False)
    try:
        reducer.check(state)
    except Exception as err:  # noqa: BLE001
        replay(conn, reducer, start_state, first, check_each=True)  # raises Bad at the first entry
        raise Bad(head.seq, f"the invariant does not hold at the end of the journal: {err}") from None
    return state, first


# --- offline audit ---------------------------------------------------------------------------------


@dataclass
class Report:
    """The result of an offline audit. `ok` is True only when nothing is wrong."""

    path: str
    ok: bool = False
    problems: list[Problem] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    entries: int = 0
    head_seq: int = 0
    head_hash: str = ""
    checkpoints: int = 0
    snapshots_checked: int = 0
    self_checks: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None

    @property
    def first_bad_seq(self) -> int | None:
        for p in self.problems:
            if p.seq is not None:
                return p.seq
        return None

    def summary(self) -> str:
        if self.ok:
            return (f"{self.path}: ok: {self.entries} entries, head {self.head_seq} {self.head_hash}, "
                    f"{self.checkpoints} checkpoints, {self.snapshots_checked} snapshots checked")
        return f"{self.path}: DAMAGED: " + "; ".join(str(p) for p in self.problems)


def verify_state_dir(path: str | Path, reducer: Reducer[Any], *, check_each: bool = True) -> Report:
    """Audit a copy of a state directory (or a ledger file), or a journal on PostgreSQL (its URL), without a running
    writer. Read-only."""
    if is_url(path):
        return _verify_database(str(path), reducer, check_each)
    p = Path(path)
    db = p / journal.DB_NAME if p.is_dir() else p
    report = Report(path=str(db))
    if not db.exists():
        report.problems.append(Problem(None, f"{db} does not exist"))
        return report
    try:
        conn = journal.connect(db, "ro")
    except sqlite3.Error as e:
        report.problems.append(Problem(None, f"cannot open: {e}"))
        return report
    try:
        _audit(conn, db, reducer, report, check_each)
    finally:
        conn.close()
    report.ok = not report.problems
    return report


def _verify_database(url: str, reducer: Reducer[Any], check_each: bool) -> Report:
    from controller.ledger import pgjournal  # psycopg is loaded only for a journal on PostgreSQL

    report = Report(path=pgjournal.redact(url))
    try:
        store = pgjournal.PgStore(pgjournal.connect(url, read_only=True), url)
    except Exception as e:  # noqa: BLE001 - psycopg's error, said in one line
        report.problems.append(Problem(None, f"cannot open: {str(e).strip()}"))
        return report
    try:
        pgjournal.check_header(store.conn, store.where)
        _audit_chain(store, reducer, report, check_each)
    except LedgerDamaged as e:
        report.problems.append(Problem(None, e.problem))
    finally:
        store.close()
    report.ok = not report.problems
    return report


def is_db_error(e: BaseException) -> bool:
    """Whether `e` is an error of the journal's database (SQLite's or PostgreSQL's), not of this code."""
    return isinstance(e, sqlite3.Error) or type(e).__module__.startswith("psycopg")


def _audit(conn: sqlite3.Connection, db: Path, reducer: Reducer[Any], report: Report, check_each: bool) -> None:
    try:
        journal.check_header(conn, db)
        journal.set_pragmas(conn)
    except LedgerDamaged as e:
        report.problems.append(Problem(None, e.problem))
        return
    except (LedgerError, sqlite3.Error) as e:
        report.problems.append(Problem(None, str(e)))
        return
    report.integrity = journal.integrity_check(conn, "full")
    if report.integrity:
        report.problems.append(Problem(None, "integrity check: " + "; ".join(report.integrity[:5])))
    _audit_chain(SqliteStore(conn, db), reducer, report, check_each)


def _audit_chain(store: Store, reducer: Reducer[Any], report: Report, check_each: bool) -> None:
    """Every entry from entry 1, replayed, every checkpoint and snapshot checked; what is wrong goes to `report`."""
    try:
        snapshots = {seq: text for seq in store.checkpoint_seqs() if (text := store.snapshot_at(seq)) is not None}
    except Exception as e:
        if not is_db_error(e):
            raise
        report.problems.append(Problem(None, f"checkpoints table cannot be read: {e}"))
        snapshots = {}
    box = {"state": reducer.initial()}

    def on_entry(seq: int, e: Entry) -> None:
        state = apply_entry(reducer, box["state"], seq, e)
        if check_each and e.kind not in INTERNAL_KINDS:
            _check(reducer, state, seq)
        box["state"] = state
        report.entries += 1
        if e.kind == CHECKPOINT:
            report.checkpoints += 1
            recorded = checkpoint_fields(e)[3]
            if state_digest(chain.canonical(reducer.snapshot(state))) != recorded:
                raise Bad(seq, "the state digest this checkpoint records differs from the state replayed "
                               "from entry 1")
            if seq in snapshots:
                restore_snapshot(reducer, seq, snapshots.pop(seq), recorded)
                report.snapshots_checked += 1
        elif e.kind in (GENESIS, chain.SELF_CHECK):
            report.self_checks.append({"seq": seq, "time": e.time, "kind": e.kind,
                                       "software_sha256": e.body.get("software_sha256")})

    try:
        scan = scan_all(store, on_entry)
        report.head_seq, report.head_hash = scan.expected - 1, scan.prev
        try:
            reducer.check(box["state"])
        except Exception as err:  # noqa: BLE001
            raise Bad(report.head_seq, f"the invariant does not hold at the end of the journal: {err}") from None
        for seq in sorted(snapshots):
            raise Bad(seq, "a snapshot is stored for it, but it is not a checkpoint entry")
        report.state = box["state"]
    except Bad as b:
        report.problems.append(Problem(b.seq, b.text))
    except Exception as e:
        if not is_db_error(e):
            raise
        report.problems.append(Problem(None, f"the journal cannot be read: {e}"))


def run_integrity_check(path: Path, how: str, out: list[str],
                        factory: type[sqlite3.Connection] | None = None) -> threading.Thread:
    """Run the integrity check on its own read-only connection in a thread; problems go to `out`."""

    def work() -> None:
        try:
            conn = journal.connect(path, "ro", factory)
            try:
                journal.set_pragmas(conn)
                out.extend(journal.integrity_check(conn, how))
            finally:
                conn.close()
        except (sqlite3.Error, LedgerError) as e:
            out.append(str(e))

    t = threading.Thread(target=work, name="ledger-integrity", daemon=True)
    t.start()
    return t


__all__ = ["Bad", "ChainHead", "ChainScan", "Problem", "Report", "apply_entry", "check_segments", "checkpoint_fields",
           "derive_state", "is_db_error", "replay", "restore_snapshot", "run_integrity_check", "scan_all", "state_digest",
           "verify_chain_fast", "verify_state_dir"]

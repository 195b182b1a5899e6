"""The single writer: one thread drains a queue of operations and group-commits them.

For each batch (everything queued while the previous COMMIT was in progress, up to `max_batch`):

1. each operation is checked against the journal for its idempotency key (a retry gets the original
   receipt, a different operation under a used key gets KeyConflict), then applied to the in-memory
   state through the reducer; a refused operation (InputError/RulesError, or a state on which the
   invariant check fails) is left out. Keys are new but for retries, so the batch is prepared first as
   if none of its keys were journaled, and the UNIQUE index on key checks that as part of the write
   (the keys of refused operations are looked up); if one was, nothing is written and the batch is
   prepared again with the journaled keys looked up first;
2. all accepted operations are written in one transaction, which commits (SQLite's synchronous=FULL: the
   WAL is synced; PostgreSQL's synchronous_commit: the synchronous standby has the WAL too) before the write
   returns;
3. only then is the new state published and every caller's future resolved (the callers of a batch are
   told just before the next batch is written, or at once when nothing else is queued).

If the write or COMMIT fails, no caller of the batch is told its operation succeeded: every waiting
caller gets FatalStorageError and the fatal hook runs; the default hook exits the process so that
systemd restarts it from the journal. Nothing is retried or swallowed here.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar

from controller.errors import InputError, InvariantViolation
from controller.exits import EXIT_STORAGE
from controller.ledger import chain
from controller.ledger.chain import CHECKPOINT, Entry
from controller.ledger.errors import FatalStorageError, KeyConflict, LedgerClosed
from controller.ledger.reducer import Reducer
from controller.ledger.store import Store
from controller.ledger.verify import ChainHead, state_digest

S = TypeVar("S")

if TYPE_CHECKING:
    import asyncio  # the writer never loads it: an asyncio caller has

log = logging.getLogger("controller.ledger")



_UNSET = object()


class Receipt:
    """Proof that an operation is in the journal, durably: its entry's seq, key, kind, time and hash, and
    the reducer's result (as journaled: decoded from JSON). `repeat` is True when the operation had already
    been journaled under this key (a retry): the receipt is then the original one, and equal to it
    (`repeat` is not compared)."""

    __slots__ = ("seq", "key", "kind", "time", "hash", "result_json", "repeat", "_result")

    def __init__(self, seq: int, key: str, kind: str, time: str, hash: str, result_json: str,
                 repeat: bool = False) -> None:
        self.seq = seq
        self.key = key
        self.kind = kind
        self.time = time
        self.hash = hash
        self.result_json = result_json  # canonical JSON text of the result
        self.repeat = repeat
        self._result: Any = _UNSET

    @property
    def result(self) -> Any:
        if self._result is _UNSET:
            self._result = json.loads(self.result_json)
        return self._result

    def _fields(self) -> tuple[int, str, str, str, str, str]:
        return (self.seq, self.key, self.kind, self.time, self.hash, self.result_json)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Receipt):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.seq, self.hash))

    def __repr__(self) -> str:
        return (f"Receipt(seq={self.seq}, key={self.key!r}, kind={self.kind!r}, time={self.time!r}, "
                f"hash={self.hash!r}, result={self.result!r}, repeat={self.repeat})")

    def again(self) -> Receipt:
        """The same receipt, marked as a repeat."""
        return Receipt(self.seq, self.key, self.kind, self.time, self.hash, self.result_json, True)


def exit_process(err: BaseException) -> None:
    """The default fatal hook: one line on stderr, then exit at once with status 74, without running
    anything else of the process (no cleanup that could write)."""
    try:
        sys.stderr.write(f"ledger: fatal storage error, exiting to restart from the journal: {err}\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_STORAGE)


Waiter: TypeAlias = "Future[Receipt] | asyncio.Future[Receipt]"  # where an operation's caller waits for its outcome


class Op:
    """An operation on its way to the writer. `future` is a concurrent Future (`loop` None), or an
    asyncio future of the event loop `loop`, which is resolved in that loop's thread."""

    __slots__ = ("kind", "key", "body_text", "body", "future", "loop")

    def __init__(self, kind: str, key: str, body_text: str, body: dict[str, Any], future: Waiter,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.kind = kind
        self.key = key
        self.body_text = body_text
        self.body = body
        self.future = future
        self.loop = loop

    def take(self) -> bool:
        """False if the caller cancelled before the writer took the operation (it is then dropped)."""
        if isinstance(self.future, Future):  # `loop` is None
            return self.future.set_running_or_notify_cancel()
        return not self.future.cancelled()


class WalCheckpoint:
    """A request to fold the WAL into the database file between batches (Ledger.wal_checkpoint). Its future gets
    (frames in the WAL, frames copied, seconds taken), or the storage error."""

    __slots__ = ("future", "loop")

    def __init__(self) -> None:
        self.future: Future[tuple[int, int, float]] = Future()
        self.loop = None  # resolved like a concurrent Op's future (deliver)


class SessionCheck(WalCheckpoint):
    """A request to prove, between batches, that the writer's session still holds the journal (Ledger.check_session):
    on PostgreSQL a round trip on it, on SQLite nothing. Its future gets (0, 0, seconds), or the storage error, which
    is fatal as a failed COMMIT is."""

    __slots__ = ()


class _Stop(enum.Enum):
    STOP = 0


_STOP: Final = _Stop.STOP  # an enum member, so that `item is _STOP` narrows the queue's items
_NOTHING_FOUND: dict[str, tuple[int, str, str]] = {}


def _resolve(fut: Future[Any] | asyncio.Future[Any], outcome: Any) -> None:
    try:
        if fut.done():
            return
        if isinstance(outcome, BaseException):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
    except InvalidStateError:
        pass


def _resolve_in_loop(outcomes: Sequence[tuple[Op | WalCheckpoint, Any]], loop: asyncio.AbstractEventLoop) -> None:
    """Resolve the futures of `loop`'s operations among `outcomes`; runs in that loop's thread. The list is
    not split by loop beforehand: the writer thread, which decides how fast batches go, only passes it on."""
    for op, outcome in outcomes:
        if op.loop is loop:
            _resolve(op.future, outcome)


def deliver(outcomes: Sequence[tuple[Op | WalCheckpoint, Any]]) -> None:
    """Resolve every operation's future: concurrent ones here, asyncio ones with one call per event loop."""
    loops: set[asyncio.AbstractEventLoop] = set()
    for op, outcome in outcomes:
        if op.loop is None:
            _resolve(op.future, outcome)
        else:
            loops.add(op.loop)
    for loop in loops:
        with contextlib.suppress(RuntimeError):  # the loop was closed: nobody is waiting
            loop.call_soon_threadsafe(_resolve_in_loop, outcomes, loop)


class _Prepared:
    """A batch prepared by Writer._prepare: the rows to write (seq, key, entry, hash) and their texts as
    ASCII bytes; each operation's outcome; the state, seq and hash after the rows; the keys of refused
    operations; what to log, as (level, message, args, exception) once the batch is settled."""

    __slots__ = ("rows", "texts", "outcomes", "state", "seq", "hash", "refused_keys", "notes")

    def __init__(self, rows: list[tuple[int, str, str, str]], texts: list[bytes], outcomes: list[tuple[Op, Any]],
                 state: Any, seq: int, hash: str, refused_keys: list[str],
                 notes: list[tuple[int, str, tuple[object, ...], BaseException | None]]) -> None:
        self.rows, self.texts, self.outcomes = rows, texts, outcomes
        self.state, self.seq, self.hash = state, seq, hash
        self.refused_keys, self.notes = refused_keys, notes


class Writer(Generic[S]):
    def __init__(self, store: Store, reducer: Reducer[S], state: S, head: ChainHead, *,
                 clock: Callable[[], Any],
                 checkpoint_every: int, keep_snapshots: int, max_batch: int,
                 fatal: Callable[[BaseException], None]) -> None:
        self._store = store
        self._reducer = reducer
        self._clock = clock
        self._checkpoint_every = checkpoint_every
        self._keep = keep_snapshots
        self._max_batch = max_batch
        self._fatal = fatal
        self.state = state          # the state as of the last COMMIT: what readers see
        self.seq = head.seq
        self.hash = head.hash
        self._seg_first = head.seg_first
        self._segment = head.segment
        self._recent_checkpoints = sorted(store.checkpoint_seqs())[-keep_snapshots:]
        self._checkpoints_ok = True
        self.transactions = 0       # COMMITs, for tests and metrics
        self._q: queue.SimpleQueue[Op | WalCheckpoint | _Stop] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._checkpoint_at_stop = False
        self.dead: FatalStorageError | None = None
        self._pending: list[tuple[Op, Any]] | None = None  # outcomes of the last batch, not yet delivered
        self._folds: list[WalCheckpoint] = []  # WAL checkpoints asked for during the batch being written
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)

    # --- called from other threads ---

    def start(self) -> None:
        self._thread.start()

    def enqueue(self, op: Op | WalCheckpoint) -> None:
        with self._lock:
            if self.dead is not None:
                raise self.dead
            if self._closed:
                raise LedgerClosed("the ledger is closed")
            self._q.put(op)

    def give_up(self, err: FatalStorageError) -> None:
        """From another thread, while this writer is stuck in a write: no caller is ever told its operation succeeded
        (the writer is marked dead first), then the fatal hook (the default exits the process)."""
        with self._lock:
            if self.dead is not None:
                return
            self.dead = err
            self._closed = True
        self._fatal(err)

    def stop(self, checkpoint: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._checkpoint_at_stop = checkpoint
            self._q.put(_STOP)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    # --- the writer thread ---

    def _run(self) -> None:
        batch: list[Op] = []
        try:
            while True:
                if self._q.empty():
                    self._deliver_pending()  # nothing to prepare meanwhile: tell the callers now
                item = self._q.get()
                if item is _STOP:
                    break
                if isinstance(item, WalCheckpoint):
                    self._wal_checkpoint(item)
                    continue
                batch = [item]
                folds = self._folds = []
                stop = False
                while len(batch) < self._max_batch:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                        break
                    if isinstance(item, WalCheckpoint):
                        folds.append(item)
                    else:
                        batch.append(item)
                self._process(batch)
                batch = []
                self._maybe_checkpoint()
                while folds:
                    self._wal_checkpoint(folds.pop(0))
                if stop:
                    break
            self._deliver_pending()
            if self._checkpoint_at_stop and self.seq > self._seg_first:
                # a clean stop leaves a snapshot of the final state: the next start replays nothing
                self._maybe_checkpoint(force=True)
        except BaseException as e:  # noqa: BLE001 - storage failure (or a bug): never swallowed
            self._die(e, batch)

    def _wal_checkpoint(self, request: WalCheckpoint) -> None:
        """Fold the WAL into the file now, the callers of the last batch told first. A storage error here is
        fatal, as a failed COMMIT is (_run/_die)."""
        if not request.future.set_running_or_notify_cancel():
            return
        self._deliver_pending()
        t0 = time.perf_counter()
        try:
            if isinstance(request, SessionCheck):
                self._store.ping()
                frames = copied = 0
            else:
                frames, copied = self._store.wal_checkpoint()
        except BaseException:
            self._folds.append(request)  # told of the failure with the others (_die)
            raise
        request.future.set_result((frames, copied, time.perf_counter() - t0))

    def _deliver_pending(self) -> None:
        """Tell the callers of the last committed batch their outcomes (see _process)."""
        pending, self._pending = self._pending, None
        if pending:
            deliver(pending)

    def _die(self, exc: BaseException, batch: list[Op]) -> None:
        err = FatalStorageError(f"writing the journal failed; nothing of the batch was acknowledged: {exc!r}")
        err.__cause__ = exc
        with self._lock:
            self.dead = err
            self._closed = True
        try:
            self._deliver_pending()  # committed before the failure: their receipts stand
        except Exception:  # the failure being handled is the one to report
            log.exception("telling the callers of the last committed batch failed")
        try:
            self._fatal(err)  # the default never returns: the process exits
        finally:
            waiting: list[tuple[Op | WalCheckpoint, Any]] = [(op, err) for op in batch]
            waiting += [(fold, err) for fold in self._folds]
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    waiting.append((item, err))
            deliver(waiting)

    def _process(self, batch: list[Op]) -> None:
        taken = [op for op in batch if op.take()]
        if not taken:
            return
        store = self._store
        t = chain.format_time(self._clock())  # one time for the batch: it is one transaction
        # Keys are new but for retries, so the batch is first prepared as if none of its keys were in the
        # journal, and written only if that holds: the keys of refused operations are looked up (a retry
        # of a journaled operation gets its receipt, even if the operation would now be refused), and the
        # UNIQUE index on key checks the others as part of the insert. If it does not hold, nothing was
        # written, and the batch is prepared again knowing which of its keys the journal holds.
        p = self._prepare(taken, t, _NOTHING_FOUND)
        # The previous batch's callers are told only now, just before this batch goes to the disk: their
        # event loop wakes while this thread waits for the write, instead of competing with it for the
        # GIL while it prepares. (With nothing queued, _run tells them at once.)
        self._deliver_pending()
        if ((p.refused_keys and store.find_keys(p.refused_keys))
                or (p.rows and not store.append_new(p.rows))):  # raises on any failure: see _run/_die
            p = self._prepare(taken, t, store.find_keys(list({op.key for op in taken})))
            if p.rows:
                store.append(p.rows)  # raises on any failure: see _run/_die
        if self.dead is not None:  # given up while this write waited (give_up): its callers are never told
            raise self.dead
        rows = p.rows
        if rows:
            self.transactions += 1
            self._segment.add_many([r[3] for r in rows], [r[1] for r in rows], p.texts)
            self.state, self.seq, self.hash = p.state, p.seq, p.hash
        for level, msg, args, exc in p.notes:
            log.log(level, msg, *args, exc_info=exc)
        self._pending = p.outcomes  # committed: delivered before the next write or wait (_deliver_pending)

    def _prepare(self, taken: list[Op], t: str, existing: dict[str, tuple[int, str, str]]) -> _Prepared:
        """Apply the operations in order to the state as of the last COMMIT, as if the journal held the keys
        in `existing` (key -> (seq, entry, hash)) and no others. Writes and logs nothing."""
        reducer = self._reducer
        apply, check = reducer.apply, reducer.check
        state, seq, prev = self.state, self.seq, self.hash
        in_batch: dict[str, tuple[Op, Receipt]] = {}
        rows: list[tuple[int, str, str, str]] = []
        texts: list[bytes] = []
        outcomes: list[tuple[Op, Any]] = []
        doubtful: list[str] = []
        notes: list[tuple[int, str, tuple[object, ...], BaseException | None]] = []
        canonical_checked, entry_text, sha256 = chain.canonical_checked, chain.entry_text, hashlib.sha256
        for op in taken:
            key = op.key
            prior = in_batch.get(key)
            if prior is not None:
                p_op, p_receipt = prior
                if p_op.kind == op.kind and p_op.body_text == op.body_text:
                    outcomes.append((op, p_receipt.again()))
                else:
                    outcomes.append((op, KeyConflict(key, p_receipt.seq)))
                continue
            if existing:
                found = existing.get(key)
                if found is not None:
                    outcomes.append((op, self._repeat(op, *found)))
                    continue
            try:
                new_state, result = apply(state, op.kind, op.body)
                result_text = canonical_checked(result)
            except InputError as e:
                outcomes.append((op, e))
                doubtful.append(key)
                continue
            except Exception as e:  # noqa: BLE001 - a bug in the reducer refuses this one operation
                notes.append((logging.ERROR, "reducer failed on %s %r", (op.kind, key), e))
                outcomes.append((op, e))
                doubtful.append(key)
                continue
            try:
                check(new_state)
            except Exception as e:  # noqa: BLE001
                notes.append((logging.ERROR, "operation %s %r would break the invariant: %s", (op.kind, key, e), None))
                err = InvariantViolation(f"refused: the operation would break the invariant: {e}")
                err.__cause__ = e
                outcomes.append((op, err))
                doubtful.append(key)
                continue
            seq += 1
            text = entry_text(prev, seq, key, t, op.kind, op.body_text, result_text)
            data = text.encode("ascii")
            h = sha256(data).hexdigest()  # chain.entry_hash(text)
            rows.append((seq, key, text, h))
            texts.append(data)
            receipt = Receipt(seq, key, op.kind, t, h, result_text)
            in_batch[key] = (op, receipt)
            outcomes.append((op, receipt))
            state, prev = new_state, h
        return _Prepared(rows, texts, outcomes, state, seq, prev, doubtful, notes)

    def _repeat(self, op: Op, seq: int, text: str, h: str) -> Receipt | KeyConflict:
        e = Entry(text)
        if e.kind == op.kind and chain.canonical(e.body) == op.body_text:
            return Receipt(seq, op.key, e.kind, e.time, h, chain.encode(e.result), repeat=True)
        return KeyConflict(op.key, seq)

    # --- entries the ledger writes itself ---

    def append_internal(self, kind: str, key: str, body: dict[str, Any],
                        checkpoint_state: str | None = None) -> Receipt:
        seq = self.seq + 1
        t = chain.format_time(self._clock())
        text = chain.entry_text(self.hash, seq, key, t, kind, chain.canonical(body), "null")
        h = chain.entry_hash(text)
        ckpt = None
        if checkpoint_state is not None:
            recent = (self._recent_checkpoints + [seq])[-self._keep:]
            ckpt = (seq, checkpoint_state, recent[0])
        self._store.append([(seq, key, text, h)], ckpt)
        self.transactions += 1
        if checkpoint_state is not None:
            self._recent_checkpoints = recent
            self._seg_first = seq
            self._segment = chain.SegmentDigest()
        self._segment.add(h, key, text)
        self.seq, self.hash = seq, h
        return Receipt(seq, key, kind, t, h, "null")

    def _maybe_checkpoint(self, force: bool = False) -> None:
        if not self._checkpoints_ok or self._checkpoint_every <= 0:
            return
        if not force and self.seq - self._seg_first + 1 < self._checkpoint_every:
            return
        try:
            state_text = chain.canonical(self._reducer.snapshot(self.state))
            again = chain.canonical(self._reducer.snapshot(self._reducer.restore(json.loads(state_text))))
        except Exception:
            log.exception("reducer snapshot failed; checkpoints are off until restart")
            self._checkpoints_ok = False
            return
        if again != state_text:
            log.error("reducer snapshot does not survive restore(); checkpoints are off until restart")
            self._checkpoints_ok = False
            return
        self._deliver_pending()
        body = {"segment": {"first": self._seg_first, "last": self.seq, "sha256": self._segment.hexdigest()},
                "state_sha256": state_digest(state_text)}
        seq = self.seq + 1
        self.append_internal(CHECKPOINT, f"{chain.INTERNAL_KEY_PREFIX}checkpoint:{seq}", body, state_text)


__all__ = ["Op", "Receipt", "SessionCheck", "Waiter", "WalCheckpoint", "Writer", "deliver", "exit_process"]

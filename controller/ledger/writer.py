"""The single writer: one thread drains a queue of operations and group-commits them.

For each batch (everything queued while the previous COMMIT was in progress, up to `max_batch`):

1. each operation is checked against the journal for its idempotency key (a retry gets the original
   receipt, a different operation under a used key gets KeyConflict), then applied to the in-memory
   state through the reducer; a refused operation (InputError/RulesError, or a state on which the
   invariant check fails) is left out;
2. all accepted operations are written in one transaction and COMMIT runs (synchronous=FULL: it returns
   after fsync);
3. only then is the new state published and every caller's future resolved.

If the write or COMMIT fails, no caller of the batch is told its operation succeeded: every waiting
caller gets FatalStorageError and the fatal hook runs; the default hook exits the process so that
systemd restarts it from the journal. Nothing is retried or swallowed here.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from ..errors import InputError
from . import chain, journal
from .chain import CHECKPOINT, Entry
from .errors import FatalStorageError, InvariantViolation, KeyConflict, LedgerClosed
from .reducer import Reducer
from .verify import ChainHead, state_digest

log = logging.getLogger("controller.ledger")

EXIT_STORAGE = 74  # EX_IOERR


_UNSET = object()


class Receipt:
    """Proof that an operation is in the journal, durably: its entry's seq, key, kind, time and hash, and
    the reducer's result (as journaled: decoded from JSON). `repeat` is True when the operation had already
    been journaled under this key (a retry): the receipt is then the original one, and equal to it
    (`repeat` is not compared)."""

    __slots__ = ("seq", "key", "kind", "time", "hash", "result_json", "repeat", "_result")

    def __init__(self, seq: int, key: str, kind: str, time: str, hash: str, result_json: str,  # noqa: A002
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

    def _fields(self) -> tuple:
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

    def again(self) -> "Receipt":
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


class Op:
    """An operation on its way to the writer. `future` is a concurrent Future (`loop` None), or an
    asyncio future of the event loop `loop`, which is resolved in that loop's thread."""

    __slots__ = ("kind", "key", "body_text", "body", "future", "loop")

    def __init__(self, kind: str, key: str, body_text: str, body: dict[str, Any], loop: Any = None) -> None:
        self.kind = kind
        self.key = key
        self.body_text = body_text
        self.body = body
        self.loop = loop
        self.future: Any = Future() if loop is None else loop.create_future()

    def take(self) -> bool:
        """False if the caller cancelled before the writer took the operation (it is then dropped)."""
        if self.loop is None:
            return self.future.set_running_or_notify_cancel()
        return not self.future.cancelled()


_STOP = object()


def _resolve(fut: Any, outcome: Any) -> None:
    try:
        if fut.done():
            return
        if isinstance(outcome, BaseException):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
    except InvalidStateError:
        pass


def _resolve_all(pairs: list[tuple[Any, Any]]) -> None:
    for fut, outcome in pairs:
        _resolve(fut, outcome)


def deliver(outcomes: list[tuple[Op, Any]]) -> None:
    """Resolve every operation's future: concurrent ones here, asyncio ones with one call per event loop."""
    by_loop: dict[Any, list[tuple[Any, Any]]] = {}
    for op, outcome in outcomes:
        if op.loop is None:
            _resolve(op.future, outcome)
        else:
            by_loop.setdefault(op.loop, []).append((op.future, outcome))
    for loop, pairs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve_all, pairs)
        except RuntimeError:  # the loop was closed: nobody is waiting
            pass


class Writer:
    def __init__(self, conn, reducer: Reducer, state: Any, head: ChainHead, *, clock: Callable[[], Any],
                 checkpoint_every: int, keep_snapshots: int, max_batch: int,
                 fatal: Callable[[BaseException], None]) -> None:
        self._conn = conn
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
        self._recent_checkpoints = sorted(journal.checkpoint_seqs(conn))[-keep_snapshots:]
        self._checkpoints_ok = True
        self.transactions = 0       # COMMITs, for tests and metrics
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._checkpoint_at_stop = False
        self.dead: FatalStorageError | None = None
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)

    # --- called from other threads ---

    def start(self) -> None:
        self._thread.start()

    def enqueue(self, op: Op) -> Future[Receipt]:
        with self._lock:
            if self.dead is not None:
                raise self.dead
            if self._closed:
                raise LedgerClosed("the ledger is closed")
            self._q.put(op)
        return op.future

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
                item = self._q.get()
                if item is _STOP:
                    break
                batch = [item]
                stop = False
                while len(batch) < self._max_batch:
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                self._process(batch)
                batch = []
                self._maybe_checkpoint()
                if stop:
                    break
            if self._checkpoint_at_stop and self.seq > self._seg_first:
                # a clean stop leaves a snapshot of the final state: the next start replays nothing
                self._maybe_checkpoint(force=True)
        except BaseException as e:  # noqa: BLE001 - storage failure (or a bug): never swallowed
            self._die(e, batch)

    def _die(self, exc: BaseException, batch: list[Op]) -> None:
        err = FatalStorageError(f"writing the journal failed; nothing of the batch was acknowledged: {exc!r}")
        err.__cause__ = exc
        with self._lock:
            self.dead = err
            self._closed = True
        try:
            self._fatal(err)  # the default never returns: the process exits
        finally:
            waiting = [(op, err) for op in batch]
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
        reducer = self._reducer
        state, seq, prev = self.state, self.seq, self.hash
        existing = journal.find_keys(self._conn, list({op.key for op in taken}))
        in_batch: dict[str, tuple[Op, Receipt]] = {}
        rows: list[tuple[int, str, str, str]] = []
        outcomes: list[tuple[Op, Any]] = []
        t = chain.format_time(self._clock())  # one time for the batch: it is one transaction
        for op in taken:
            prior = in_batch.get(op.key)
            if prior is not None:
                p_op, p_receipt = prior
                if p_op.kind == op.kind and p_op.body_text == op.body_text:
                    outcomes.append((op, p_receipt.again()))
                else:
                    outcomes.append((op, KeyConflict(op.key, p_receipt.seq)))
                continue
            found = existing.get(op.key)
            if found is not None:
                outcomes.append((op, self._repeat(op, *found)))
                continue
            try:
                new_state, result = reducer.apply(state, op.kind, op.body)
                result_text = chain.canonical_checked(result)
            except InputError as e:
                outcomes.append((op, e))
                continue
            except Exception as e:  # noqa: BLE001 - a bug in the reducer refuses this one operation
                log.exception("reducer failed on %s %r", op.kind, op.key)
                outcomes.append((op, e))
                continue
            try:
                reducer.check(new_state)
            except Exception as e:  # noqa: BLE001
                log.error("operation %s %r would break the invariant: %s", op.kind, op.key, e)
                err = InvariantViolation(f"refused: the operation would break the invariant: {e}")
                err.__cause__ = e
                outcomes.append((op, err))
                continue
            seq += 1
            text = chain.entry_text(prev, seq, op.key, t, op.kind, op.body_text, result_text)
            h = chain.entry_hash(text)
            rows.append((seq, op.key, text, h))
            receipt = Receipt(seq, op.key, op.kind, t, h, result_text)
            in_batch[op.key] = (op, receipt)
            outcomes.append((op, receipt))
            state, prev = new_state, h
        if rows:
            journal.append(self._conn, rows)  # raises on any failure: see _run/_die
            self.transactions += 1
            seg = self._segment
            for _seq, key, text, h in rows:
                seg.add(h, key, text)
            self.state, self.seq, self.hash = state, seq, prev
        deliver(outcomes)

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
        journal.append(self._conn, [(seq, key, text, h)], ckpt)
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
        except Exception:  # noqa: BLE001 - a reducer bug: run on without checkpoints, loudly
            log.exception("reducer snapshot failed; checkpoints are off until restart")
            self._checkpoints_ok = False
            return
        if again != state_text:
            log.error("reducer snapshot does not survive restore(); checkpoints are off until restart")
            self._checkpoints_ok = False
            return
        body = {"segment": {"first": self._seg_first, "last": self.seq, "sha256": self._segment.hexdigest()},
                "state_sha256": state_digest(state_text)}
        seq = self.seq + 1
        self.append_internal(CHECKPOINT, f"{chain.INTERNAL_KEY_PREFIX}checkpoint:{seq}", body, state_text)

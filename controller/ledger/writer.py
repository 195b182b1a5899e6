"""The single writer: a pipeline of two threads that group-commits operations.

The preparing thread takes a batch (everything queued meanwhile, up to `max_batch`):

1. each operation is checked for its idempotency key, against the batches still in flight and then the
   journal (a retry gets the original receipt, a different operation under a used key gets KeyConflict),
   then applied to the in-memory state through the reducer; a refused operation (InputError/RulesError, or
   a state on which the invariant check fails) is left out;
2. the accepted ones become chained rows and the batch goes to the committing thread, which writes it in
   one transaction and runs COMMIT (synchronous=FULL: it returns after fsync);
3. only then is the new state published and every caller's future resolved, in batch order.

One prepared batch waits at most while another commits: the Python work of the next batch overlaps the
fsync of this one. If the write or COMMIT fails, no caller of the batch (or of any batch behind it) is
told its operation succeeded: every waiting caller gets FatalStorageError and the fatal hook runs; the
default hook exits the process so that systemd restarts it from the journal. Nothing is retried or
swallowed here.
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
from pathlib import Path
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


class _Prepared:
    """A batch made ready by the preparing thread: rows to write in one transaction, the state and chain head
    after them, an optional checkpoint, and every caller's outcome, told only after the COMMIT."""

    __slots__ = ("rows", "outcomes", "state", "seq", "hash", "ckpt", "keys")

    def __init__(self, rows, outcomes, state, seq, h, ckpt=None, keys=()) -> None:
        self.rows = rows
        self.outcomes = outcomes
        self.state = state
        self.seq = seq
        self.hash = h
        self.ckpt = ckpt
        self.keys = keys


def _merge(batch: _Prepared | None, ckpt: _Prepared) -> _Prepared:
    """A batch with the checkpoint entry that follows it, written in one transaction."""
    if batch is None:
        return ckpt
    return _Prepared(batch.rows + ckpt.rows, batch.outcomes, ckpt.state, ckpt.seq, ckpt.hash, ckpt.ckpt, batch.keys)


class Writer:
    """Two threads, one pipeline: the preparing thread checks keys, applies operations to the state and
    builds the chained rows of batch n+1 while the committing thread writes batch n and waits for its
    fsync. Only the committing thread writes; the state readers see is the committed one; a caller is
    told only after the COMMIT of its batch (and of every batch before it) returned."""

    def __init__(self, conn, reducer: Reducer, state: Any, head: ChainHead, *, clock: Callable[[], Any],
                 checkpoint_every: int, keep_snapshots: int, max_batch: int,
                 fatal: Callable[[BaseException], None]) -> None:
        self._conn = conn
        self._reader = None  # the preparing thread's own connection, for key lookups
        self._reducer = reducer
        self._clock = clock
        self._checkpoint_every = checkpoint_every
        self._keep = keep_snapshots
        self._max_batch = max_batch
        self._fatal = fatal
        self.state = state          # the state as of the last COMMIT: what readers see
        self.seq = head.seq
        self.hash = head.hash
        # the preparing thread's view: ahead of the committed one by the batches in flight
        self._p_state, self._p_seq, self._p_hash = state, head.seq, head.hash
        self._seg_first = head.seg_first
        self._segment = head.segment
        self._recent_checkpoints = sorted(journal.checkpoint_seqs(conn))[-keep_snapshots:]
        self._checkpoints_ok = True
        self.transactions = 0       # COMMITs, for tests and metrics
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._cq: queue.SimpleQueue = queue.SimpleQueue()  # prepared batches waiting for their COMMIT
        # One prepared batch may wait while another commits; operations arriving meanwhile queue up in
        # _q and form the next batch, so batches stay as large as the COMMIT time makes them.
        self._slot = threading.Semaphore(1)
        self._inflight: dict[str, tuple[str, str, Receipt]] = {}  # key -> (kind, body_text, receipt)
        self._inflight_lock = threading.Lock()
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        self._checkpoint_at_stop = False
        self.dead: FatalStorageError | None = None
        self._thread = threading.Thread(target=self._prepare_loop, name="ledger-prepare", daemon=True)
        self._committer = threading.Thread(target=self._commit_loop, name="ledger-writer", daemon=True)

    # --- called from other threads ---

    def start(self) -> None:
        path = self._conn.execute("PRAGMA database_list").fetchone()[2]
        self._reader = journal.connect(Path(path), "rw", type(self._conn))
        journal.set_pragmas(self._reader)
        self._started = True
        self._committer.start()
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
        me = threading.current_thread()
        for t in (self._thread, self._committer):
            if t.is_alive() and t is not me:
                t.join()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # --- the preparing thread ---

    def _prepare_loop(self) -> None:
        batch: list[Op] = []
        try:
            while True:
                if not self._take_slot():
                    return
                item = self._q.get()
                if item is _STOP:
                    self._slot.release()
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
                prepared = self._prepare(batch)
                batch = []
                ckpt = self._checkpoint_item()
                if ckpt is not None:  # the checkpoint rides in the same transaction
                    prepared = _merge(prepared, ckpt)
                if prepared is None:
                    self._slot.release()
                elif not self._handoff(prepared):
                    return
                if stop:
                    break
            if self._checkpoint_at_stop and self._p_seq > self._seg_first:
                # a clean stop leaves a snapshot of the final state: the next start replays nothing
                ckpt = self._checkpoint_item(force=True)
                if ckpt is not None and (not self._take_slot() or not self._handoff(ckpt)):
                    return
        except BaseException as e:  # noqa: BLE001 - a bug here: never swallowed
            self._die(e, [(op, None) for op in batch])
            return
        finally:
            self._handoff(_STOP)

    def _take_slot(self) -> bool:
        """Wait until the committing thread has taken the previous batch; False if it died."""
        while not self._slot.acquire(timeout=0.1):
            if self.dead is not None:
                return False
        return self.dead is None

    def _handoff(self, item: Any) -> bool:
        """Pass a prepared batch to the committing thread; False (and its callers told) if that one died."""
        if self.dead is not None:
            if item is not _STOP:
                deliver([(op, self.dead) for op, _o in item.outcomes])
            return False
        self._cq.put(item)
        return True

    def _prepare(self, batch: list[Op]) -> _Prepared | None:
        taken = [op for op in batch if op.take()]
        if not taken:
            return None
        reducer = self._reducer
        state, seq, prev = self._p_state, self._p_seq, self._p_hash
        keys = list({op.key for op in taken})
        # In flight first, then the journal: a batch that commits between the two looks is in the journal
        # by the time it leaves the in-flight table, so no key is missed.
        with self._inflight_lock:
            flying = {k: self._inflight[k] for k in keys if k in self._inflight}
        existing = journal.find_keys(self._reader, [k for k in keys if k not in flying])
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
            fly = flying.get(op.key)
            if fly is not None:
                kind, body_text, receipt = fly
                same = kind == op.kind and body_text == op.body_text
                outcomes.append((op, receipt.again() if same else KeyConflict(op.key, receipt.seq)))
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
        seg = self._segment
        for _seq, key, text, h in rows:
            seg.add(h, key, text)
        if rows:
            with self._inflight_lock:
                for key, (op, receipt) in in_batch.items():
                    self._inflight[key] = (op.kind, op.body_text, receipt)
        self._p_state, self._p_seq, self._p_hash = state, seq, prev
        return _Prepared(rows, outcomes, state, seq, prev, keys=tuple(in_batch))

    def _repeat(self, op: Op, seq: int, text: str, h: str) -> Receipt | KeyConflict:
        e = Entry(text)
        if e.kind == op.kind and chain.canonical(e.body) == op.body_text:
            return Receipt(seq, op.key, e.kind, e.time, h, chain.encode(e.result), repeat=True)
        return KeyConflict(op.key, seq)

    # --- the committing thread ---

    def _commit_loop(self) -> None:
        item: Any = None
        try:
            while True:
                item = self._cq.get()
                if item is _STOP:
                    break
                self._slot.release()
                self._commit(item)
                item = None
        except BaseException as e:  # noqa: BLE001 - storage failure (or a bug): never swallowed
            self._die(e, item.outcomes if isinstance(item, _Prepared) else [])

    def _commit(self, item: _Prepared) -> None:
        if item.rows:
            journal.append(self._conn, item.rows, item.ckpt)  # raises on any failure: see _commit_loop/_die
            self.transactions += 1
        self.state, self.seq, self.hash = item.state, item.seq, item.hash
        if item.keys:
            with self._inflight_lock:
                for key in item.keys:
                    self._inflight.pop(key, None)
        deliver(item.outcomes)

    def _die(self, exc: BaseException, outcomes: list[tuple[Op, Any]]) -> None:
        err = FatalStorageError(f"writing the journal failed; nothing of the batch was acknowledged: {exc!r}")
        err.__cause__ = exc
        with self._lock:
            first = self.dead is None
            if first:
                self.dead = err
            self._closed = True
            err = self.dead
        try:
            if first:
                self._fatal(err)  # the default never returns: the process exits
        finally:
            waiting = [(op, err) for op, _o in outcomes]
            while True:  # everything prepared or queued behind the failed batch
                try:
                    item = self._cq.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _Prepared):
                    waiting.extend((op, err) for op, _o in item.outcomes)
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    waiting.append((item, err))
            self._q.put(_STOP)  # wake the preparing thread if it waits for work: there is none
            deliver(waiting)

    # --- entries the ledger writes itself ---

    def append_internal(self, kind: str, key: str, body: dict[str, Any],
                        checkpoint_state: str | None = None) -> Receipt:
        """Write one entry of the ledger's own now (before start(): start-up's self-check entry)."""
        item, receipt = self._internal_item(kind, key, body, checkpoint_state)
        self._commit(item)
        return receipt

    def _internal_item(self, kind: str, key: str, body: dict[str, Any],
                       checkpoint_state: str | None) -> tuple[_Prepared, Receipt]:
        seq = self._p_seq + 1
        t = chain.format_time(self._clock())
        text = chain.entry_text(self._p_hash, seq, key, t, kind, chain.canonical(body), "null")
        h = chain.entry_hash(text)
        ckpt = None
        if checkpoint_state is not None:
            recent = (self._recent_checkpoints + [seq])[-self._keep:]
            ckpt = (seq, checkpoint_state, recent[0])
            self._recent_checkpoints = recent
            self._seg_first = seq
            self._segment = chain.SegmentDigest()
        self._segment.add(h, key, text)
        self._p_seq, self._p_hash = seq, h
        item = _Prepared([(seq, key, text, h)], [], self._p_state, seq, h, ckpt)
        return item, Receipt(seq, key, kind, t, h, "null")

    def _maybe_checkpoint(self, force: bool = False) -> None:
        """Write a checkpoint now if one is due (before start())."""
        item = self._checkpoint_item(force)
        if item is not None:
            self._commit(item)

    def _checkpoint_item(self, force: bool = False) -> _Prepared | None:
        if not self._checkpoints_ok or self._checkpoint_every <= 0:
            return None
        if not force and self._p_seq - self._seg_first + 1 < self._checkpoint_every:
            return None
        try:
            state_text = chain.canonical(self._reducer.snapshot(self._p_state))
            again = chain.canonical(self._reducer.snapshot(self._reducer.restore(json.loads(state_text))))
        except Exception:  # noqa: BLE001 - a reducer bug: run on without checkpoints, loudly
            log.exception("reducer snapshot failed; checkpoints are off until restart")
            self._checkpoints_ok = False
            return None
        if again != state_text:
            log.error("reducer snapshot does not survive restore(); checkpoints are off until restart")
            self._checkpoints_ok = False
            return None
        body = {"segment": {"first": self._seg_first, "last": self._p_seq, "sha256": self._segment.hexdigest()},
                "state_sha256": state_digest(state_text)}
        seq = self._p_seq + 1
        item, _receipt = self._internal_item(CHECKPOINT, f"{chain.INTERNAL_KEY_PREFIX}checkpoint:{seq}", body,
                                             state_text)
        return item

"""Crash test with the real meters: a child process (meter_child.py) runs two progressives on a ledger
with `JournalReducer`, submitting random meter operations for rounds at two tables, and is killed with
SIGKILL at random moments, then restarted; it carries on from the state it finds. After every cycle:

- every acknowledged operation is in the journal exactly once, with the seq and hash of its receipt;
  every refused one is not; every entry is a whole operation that was submitted, with its key;
- a retry (of an acknowledged operation, or of one whose outcome the kill hid) is applied at most once;
- the state the restarted ledger derives equals the state replayed independently from the journal's
  rows through a fresh `JournalReducer`, each entry's recorded result equals the replayed one;
- every meter satisfies `check_invariant`, and money is conserved on every meter:
  current + reserve + overflow == seed + wagers x (rate + reserve rate) + adjustments - meter awards;
- periodically and at the end, the full offline audit (`verify_state_dir`) passes.

Soak: PROGRESSIVE_SOAK=1 ./test -m soak (3,000 cycles here), or METER_CRASH_CYCLES=N ./test tests/system/test_meter_crash.py -q
Repeat a run: METER_CRASH_SEED=<seed printed by a failing run>.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from controller.ledger import Ledger, journal, verify_state_dir
from controller.ledger.chain import canonical
from controller.meter import check_invariant
from controller.meter.journal import DEFINE_METER
from controller.round.journal import JournalReducer

import soak
from crash_pipe import Moments, kill_cycle

CHILD = Path(__file__).resolve().parents[1] / "support" / "meter_child.py"
CYCLES = soak.cycles("METER_CRASH_CYCLES", default=40, soak=3000)
pytestmark = soak.mark
SEED = int(os.environ.get("METER_CRASH_SEED", str(random.SystemRandom().randrange(2**32))))
LANES = 2            # independent state directories run side by side
AUDIT_EVERY = 20     # full offline audit every this many cycles of a lane
HANG = 60.0          # seconds after which a child counts as hung (a failure, not a wait)
METER_IDS = ("main", "side")


def conservation_failure(s) -> str | None:
    """Money on a meter: what is on it (visible, hidden, above the ceiling) is what came in less what went out."""
    p = s.params
    held = s.current + s.reserve + s.overflow
    came = s.seed + s.wagers_cents * (p.rate_units + p.reserve_units) + s.adjustments - s.meter_awards
    if held != came:
        return (f"meter {p.meter_id}: current {s.current} + reserve {s.reserve} + overflow {s.overflow} = {held}, "
                f"but seed {s.seed} + wagers {s.wagers_cents} x {p.rate_units + p.reserve_units} + adjustments "
                f"{s.adjustments} - meter awards {s.meter_awards} = {came}")
    return None


class Lane:
    def __init__(self, state_dir: Path, seed: int) -> None:
        self.dir = state_dir
        self.rng = random.Random(seed)
        self.seed = seed
        self.reducer = JournalReducer()
        self.model = self.reducer.initial()   # replayed independently from the journal's rows
        self.model_states: dict[int, object] = {}
        self.through = 0                      # rows of the journal consumed by the model
        self.prev_hash = "0" * 64
        self.journal: dict[str, tuple[int, str]] = {}   # key -> (seq, hash) of every journaled operation
        self.ops: dict[str, tuple[str, str]] = {}       # key -> (kind, canonical body) of every submission
        self.acked: dict[str, tuple[int, str]] = {}
        self.in_doubt: set[str] = set()                 # submitted, outcome hidden by a kill, not journaled
        self.kills = 0
        self.acks = 0
        self.refusals = 0
        self.kinds: dict[str, int] = {}

    # --- one cycle ---

    def run_cycle(self, index: int) -> None:
        retry = sorted(self.in_doubt)[:10]
        journaled = sorted(k for k in self.journal if not k.startswith("ledger:"))
        retry += self.rng.sample(journaled, min(2, len(journaled)))
        spec = {"retry": [[k, self.ops[k][0], json.loads(self.ops[k][1])] for k in retry],
                "checkpoint_every": self.rng.choice([0, 5, 16, 64]),
                # a child killed early journals one operator's operation at most: the kind the lane lacks goes first
                "operator_first": "top-up" if self.kinds.get("top-up", 0) < self.kinds.get("adjust", 0) else "adjust"}
        count = self.rng.randint(5, 40)
        proc = subprocess.Popen([sys.executable, str(CHILD), str(self.dir), str(self.seed), str(count)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=CHILD.parents[2])
        where = f"lane seed {self.seed} cycle {index}"
        moments = Moments(opening=0.1, opening_s=0.05, anytime_s=0.4, counted=count + len(retry))
        lines, killed = kill_cycle(proc, json.dumps(spec).encode(), self.rng, moments, counted=("SUBMIT ",),
                                   where=where, hang=HANG)
        self.kills += killed
        self.check(lines, where)

    # --- checks ---

    def check(self, lines: list[str], where: str) -> None:
        before = dict(self.journal)
        # the submissions first: the journal may hold an operation whose outcome line the kill cut off
        pending: dict[str, str] = {}   # key -> the SUBMIT line without an outcome yet
        for ln in lines:
            if ln.startswith("SUBMIT "):
                _, key, kind, body = ln.split(" ", 3)
                if key in self.ops:
                    assert self.ops[key] == (kind, body), f"{where}: {key} resubmitted as a different operation"
                self.ops[key] = (kind, body)
        self.consume_new_rows(where)
        ready = [ln for ln in lines if ln.startswith("READY ")]
        if ready:
            _, head, state = ready[0].split(" ", 2)
            assert int(head) in self.model_states, f"{where}: READY at {head}, but no such new entry"
            # the restarted ledger derived (from its snapshot and tail) what an independent replay gives
            assert json.loads(state) == json.loads(canonical(self.reducer.snapshot(self.model_states[int(head)]))), \
                f"{where}: derived state differs from the independent replay"
        for ln in lines:
            parts = ln.split(" ")
            if parts[0] == "SUBMIT":
                key = parts[1]
                assert key not in pending, f"{where}: {key} submitted twice at once"
                pending[key] = ln
            elif parts[0] == "ACK":
                key, seq, h, repeat = parts[1], int(parts[2]), parts[3], parts[4] == "1"
                assert pending.pop(key, None), f"{where}: ACK of {key}, never submitted: {ln}"
                assert self.journal.get(key) == (seq, h), \
                    f"{where}: acknowledged {key} is not in the journal as {seq} {h} (journal: {self.journal.get(key)})"
                if key in before:
                    assert repeat and before[key] == (seq, h), f"{where}: retry of {key} applied again"
                if key in self.acked:
                    assert self.acked[key] == (seq, h), f"{where}: {key} acknowledged twice differently"
                self.acked[key] = (seq, h)
                self.acks += 1
            elif parts[0] == "REFUSED":
                key = parts[1]
                assert pending.pop(key, None), f"{where}: REFUSED {key}, never submitted: {ln}"
                assert key not in self.journal, f"{where}: refused {key} is in the journal"
                self.refusals += 1
            elif parts[0] not in ("OPENING", "READY", "DONE"):
                raise AssertionError(f"{where}: unexpected line {ln!r}")
        # outcomes hidden by the kill and not journaled: retried in later cycles
        self.in_doubt = {k for k in (self.in_doubt - set(self.acked)) | set(pending) if k not in self.journal}
        self.check_meters(self.model, where)

    def check_meters(self, state, where: str) -> None:
        for mid in state:
            check_invariant(state[mid])
            bad = conservation_failure(state[mid])
            assert bad is None, f"{where}: money not conserved: {bad}"

    def consume_new_rows(self, where: str) -> None:
        self.model_states = {}
        path = self.dir / journal.DB_NAME
        if not path.exists():
            return
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT seq, key, entry, hash FROM entries WHERE seq > ? ORDER BY seq",
                                (self.through,)).fetchall()
        finally:
            conn.close()
        for seq, key, text, h in rows:
            assert seq == self.through + 1, f"{where}: entry {self.through + 1} missing"
            assert hashlib.sha256(text.encode()).hexdigest() == h, f"{where}: entry {seq} hash"
            e = json.loads(text)
            assert e[0] == self.prev_hash and e[1] == seq and e[2] == key, f"{where}: entry {seq} link"
            kind, body = e[4], e[5]
            if key.startswith("ledger:"):
                assert kind in ("genesis", "self-check", "checkpoint"), f"{where}: entry {seq}"
            else:
                assert self.ops.get(key) == (kind, canonical(body)), f"{where}: entry {seq} ({key}) was never submitted"
                assert key not in self.journal, f"{where}: {key} journaled twice"
                self.model, result = self.reducer.apply(self.model, kind, body)
                assert canonical(result) == canonical(e[6]), f"{where}: entry {seq} result differs on replay"
                self.reducer.check(self.model)
                self.check_meters(self.model, f"{where}: entry {seq}")
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
            self.journal[key] = (seq, h)
            self.model_states[seq] = self.model
            self.prev_hash, self.through = h, seq

    def audit(self, where: str) -> None:
        report = verify_state_dir(self.dir, self.reducer)
        assert report.ok, f"{where}: {report.summary()}"
        assert report.head_seq == self.through, where
        assert self.reducer.snapshot(report.state) == self.reducer.snapshot(self.model), where


def run_lane(lane: Lane, cycles: int, errors: list) -> None:
    try:
        for i in range(cycles):
            lane.run_cycle(i)
            if (i + 1) % AUDIT_EVERY == 0:
                lane.audit(f"lane seed {lane.seed} cycle {i}")
        lane.audit(f"lane seed {lane.seed} end")
        with Ledger.open(lane.dir, lane.reducer, software_digest="meter-crash-test") as led:
            assert lane.reducer.snapshot(led.state) == lane.reducer.snapshot(lane.model)
    except BaseException as e:
        errors.append(e)


def test_meters_survive_sigkill_at_random_moments(tmp_path):
    print(f"METER_CRASH_SEED={SEED} METER_CRASH_CYCLES={CYCLES}")
    rng = random.Random(SEED)
    lanes = [Lane(tmp_path / f"lane{i}", rng.randrange(2**32)) for i in range(LANES)]
    errors: list[BaseException] = []
    per_lane = -(-CYCLES // LANES)
    threads = [threading.Thread(target=run_lane, args=(lane, per_lane, errors)) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    kills = sum(lane.kills for lane in lanes)
    acks = sum(lane.acks for lane in lanes)
    kinds: dict[str, int] = {}
    for lane in lanes:
        for k, n in lane.kinds.items():
            kinds[k] = kinds.get(k, 0) + n
    print(f"{per_lane * LANES} cycles, {kills} kills, {acks} acknowledged, "
          f"{sum(lane.refusals for lane in lanes)} refused, {sum(lane.through for lane in lanes)} entries, {kinds}")
    assert kills >= per_lane * LANES // 2
    assert all(set(lane.model) == set(METER_IDS) for lane in lanes)
    # the run exercised every kind of operation it is meant to
    for kind in (DEFINE_METER, "book-contributions", "pay-fixed-award", "pay-percent-award", "void-round",
                 "close-round", "adjust", "top-up"):
        assert kinds.get(kind, 0) > 0, f"no {kind} was journaled: {kinds}"

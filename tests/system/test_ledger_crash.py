"""Crash test: the ledger runs in a child process under random operations and is killed with SIGKILL at
random moments, then restarted, hundreds of times. After every cycle:

- every acknowledged operation is in the journal exactly once, with the seq and hash of its receipt;
- every refused operation is not in the journal; every entry is a whole operation that was submitted;
- a retry (of an acknowledged operation, or of one whose outcome the kill hid) is applied at most once;
- the state the restarted ledger derives (snapshot + replay) equals the state replayed independently
  from the journal's rows, the invariant holds, and the chain links;
- periodically and at the end, the full offline audit passes.

Soak: PROGRESSIVE_SOAK=1 ./test -m soak (5,000 cycles here), or LEDGER_CRASH_CYCLES=N ./test tests/system/test_ledger_crash.py -q
Repeat a run: LEDGER_CRASH_SEED=<seed printed by a failing run>.
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

import soak
from crash_pipe import Moments, kill_cycle
from ledger_child import Accounts

CHILD = Path(__file__).resolve().parents[1] / "support" / "ledger_child.py"
CYCLES = soak.cycles("LEDGER_CRASH_CYCLES", default=60, soak=5000)
pytestmark = soak.mark
SEED = int(os.environ.get("LEDGER_CRASH_SEED", str(random.SystemRandom().randrange(2**32))))
LANES = 2            # independent state directories run side by side (two cores)
AUDIT_EVERY = 50     # full offline audit every this many cycles of a lane
HANG = 60.0          # seconds after which a child counts as hung (a failure, not a wait)
ACCOUNTS = [f"acct{i}" for i in range(5)]


class Lane:
    def __init__(self, state_dir: Path, seed: int) -> None:
        self.dir = state_dir
        self.rng = random.Random(seed)
        self.seed = seed
        self.reducer = Accounts()
        self.model = self.reducer.initial()   # replayed independently from the journal's rows
        self.through = 0                      # rows of the journal consumed by the model
        self.prev_hash = "0" * 64
        self.journal: dict[str, tuple[int, str]] = {}   # key -> (seq, hash) of every journaled operation
        self.ops: dict[str, tuple[str, dict]] = {}      # key -> (kind, body) of every operation generated
        self.acked: dict[str, tuple[int, str]] = {}
        self.in_doubt: set[str] = set()                 # submitted, outcome unknown (killed)
        self.n = 0
        self.kills = 0
        self.acks = 0

    # --- operations ---

    def new_op(self) -> tuple[str, str, dict]:
        self.n += 1
        key = f"op-{self.n}"
        r = self.rng.random()
        cents = self.rng.randint(1, 400)
        if r < 0.5:
            kind, body = "deposit", {"account": self.rng.choice(ACCOUNTS), "cents": cents}
        elif r < 0.8:
            src, dst = self.rng.sample(ACCOUNTS, 2)
            kind, body = "transfer", {"from": src, "to": dst, "cents": cents}
        else:
            kind, body = "withdraw", {"account": self.rng.choice(ACCOUNTS), "cents": cents}
        self.ops[key] = (kind, body)
        return key, kind, body

    def cycle_ops(self) -> list[list]:
        ops = [list(self.new_op()) for _ in range(self.rng.randint(5, 30))]
        retry = sorted(self.in_doubt) + self.rng.sample(sorted(self.acked), min(3, len(self.acked)))
        for key in retry[:10]:
            kind, body = self.ops[key]
            ops.insert(self.rng.randrange(len(ops) + 1), [key, kind, body])
        return ops

    # --- one cycle ---

    def run_cycle(self, index: int) -> None:
        ops = self.cycle_ops()
        spec = {"ops": ops, "threads": self.rng.choice([1, 4, 8]), "checkpoint_every": self.rng.choice([4, 16, 64])}
        proc = subprocess.Popen([sys.executable, str(CHILD), str(self.dir)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=CHILD.parents[2])
        where = f"lane seed {self.seed} cycle {index}"
        moments = Moments(opening=0.15, opening_s=0.03, anytime_s=0.25, counted=len(ops))
        lines, killed = kill_cycle(proc, json.dumps(spec).encode(), self.rng, moments,
                                   counted=("ACK", "REFUSED"), where=where, hang=HANG)
        self.kills += killed
        self.check(lines, ops, where)

    # --- checks ---

    def check(self, lines: list[str], ops: list[list], where: str) -> None:
        ready = [ln for ln in lines if ln.startswith("READY ")]
        before = dict(self.journal)
        self.consume_new_rows(where)
        if ready:
            _, head, state = ready[0].split(" ", 2)
            # the restarted ledger derived (from its snapshot and tail) what an independent replay gives
            assert json.loads(state) == json.loads(canonical(self.reducer.snapshot(self._model_at(int(head))))), \
                f"{where}: derived state differs"
        cycle_keys = {op[0] for op in ops}
        seen: set[str] = set()
        for ln in lines:
            parts = ln.split(" ")
            if parts[0] == "ACK":
                key, seq, h, repeat = parts[1], int(parts[2]), parts[3], parts[4] == "1"
                assert key in cycle_keys and key not in seen, f"{where}: unexpected ACK {ln}"
                seen.add(key)
                assert self.journal.get(key) == (seq, h), f"{where}: acknowledged {key} is not in the journal as {seq} {h}"
                if key in before:
                    assert repeat and before[key] == (seq, h), f"{where}: retry of {key} applied again"
                if key in self.acked:
                    assert self.acked[key] == (seq, h), f"{where}: {key} acknowledged twice differently"
                self.acked[key] = (seq, h)
                self.acks += 1
            elif parts[0] == "REFUSED":
                key = parts[1]
                assert key in cycle_keys and key not in seen, f"{where}: unexpected REFUSED {ln}"
                seen.add(key)
                assert key not in self.journal, f"{where}: refused {key} is in the journal"
            elif parts[0] not in ("OPENING", "READY", "DONE"):
                raise AssertionError(f"{where}: unexpected line {ln!r}")
        # outcomes hidden by the kill: retried in later cycles
        self.in_doubt = {k for k in (self.in_doubt | cycle_keys) - seen if k not in self.journal}

    def _model_at(self, head: int):
        # The child printed READY after writing its self-check entry (and perhaps a checkpoint): the
        # state it derived is the model's state over every operation up to that entry.
        assert head in self.model_states, f"READY at {head}, but no such new entry"
        return self.model_states[head]

    def consume_new_rows(self, where: str) -> None:
        self.model_states: dict[int, object] = {}
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
                assert key in self.ops and self.ops[key] == (kind, body), f"{where}: entry {seq} was never submitted"
                assert key not in self.journal, f"{where}: {key} journaled twice"
                self.model, result = self.reducer.apply(self.model, kind, body)
                assert canonical(result) == canonical(e[6]), f"{where}: entry {seq} result"
                self.reducer.check(self.model)
            self.journal[key] = (seq, h)
            self.model_states[seq] = self.model
            self.prev_hash, self.through = h, seq

    def audit(self, where: str) -> None:
        report = verify_state_dir(self.dir, self.reducer)
        assert report.ok, f"{where}: {report.summary()}"
        assert report.state == self.model and report.head_seq == self.through, where


def run_lane(lane: Lane, cycles: int, errors: list) -> None:
    try:
        for i in range(cycles):
            lane.run_cycle(i)
            if (i + 1) % AUDIT_EVERY == 0:
                lane.audit(f"lane seed {lane.seed} cycle {i}")
        lane.audit(f"lane seed {lane.seed} end")
        with Ledger.open(lane.dir, lane.reducer, software_digest="crash-test") as led:
            assert led.state == lane.model
    except BaseException as e:
        errors.append(e)


def test_sigkill_at_random_moments(tmp_path):
    print(f"LEDGER_CRASH_SEED={SEED} LEDGER_CRASH_CYCLES={CYCLES}")
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
    print(f"{per_lane * LANES} cycles, {kills} kills, {acks} acknowledged operations, "
          f"{sum(lane.through for lane in lanes)} entries")
    assert kills >= per_lane * LANES // 2
    assert acks > 0 and all(lane.through > 0 for lane in lanes)

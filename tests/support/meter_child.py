"""The child process of the meter crash test: real progressive meters on a ledger, killed at random moments.

``python meter_child.py STATE_DIR SEED COUNT`` reads one JSON document from stdin
({"retry": [[key, kind, body], ...], "checkpoint_every": N}), prints ``OPENING``, opens the ledger
with `JournalReducer`, prints ``READY <head seq> <state as canonical JSON>``, defines the two meters
if the journal does not hold them yet, resubmits the operations to retry (outcomes a kill hid), and
then submits COUNT random meter operations, each chosen from the state the ledger holds at that
moment (the open rounds of each table), so that a restarted child continues where the killed one
stopped. A line is printed only after `submit` returns (acknowledged = durable), each with a single
write() so that a kill cannot cut a line:

    SUBMIT <key> <kind> <body as canonical JSON>      (before submitting: the parent learns the op)
    ACK <key> <seq> <hash> <0|1 repeat>
    REFUSED <key> <error class>
    DONE

Keys and round ids carry the head seq found at start-up: every start appends a self-check entry, so
they never repeat across restarts.
"""

from __future__ import annotations

import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.errors import InputError
from controller.meter import (
    Adjust,
    BookContributions,
    CloseRound,
    PayFixedAward,
    PayPercentAward,
    TopUp,
    VoidRound,
    params_from_dict,
)
from controller.meter.journal import (
    DEFINE_METER,
    define_meter_body,
    op_body,
)
from controller.round.journal import JournalReducer

MAIN = {"meter_id": "main", "reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00", "5.00", "25.00"]}
SIDE = {"meter_id": "side", "reset": "10000.00", "rate": "0.2", "reserve_rate": "0.05", "ceiling": "10100.00",
        "wager_sizes": ["5.00", "25.00"]}
METERS = {"main": MAIN, "side": SIDE}
TABLES = ("t1", "t2")
PERCENT_AWARDS = (("100% of meter", 100), ("10% of meter", 10), ("2.5% of meter", "5/2"))
FIXED_AWARDS = ("500 for 1", "$1,000", "Envy Bonus")
BASE_TIME = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


class Driver:
    """Chooses the next operation from the ledger's current state."""

    def __init__(self, ledger: Any, rng: random.Random, epoch: int, operator_first: str = "adjust") -> None:
        self.ledger = ledger
        self.rng = rng
        self.epoch = epoch
        self.n = 0
        self.rounds = 0
        # the operator's operations alternate: adjust, top-up, ... (or top-up first)
        self.operator_turns = 0 if operator_first == "adjust" else 1
        self.at = BASE_TIME + timedelta(seconds=epoch)

    def key(self) -> str:
        self.n += 1
        return f"m{self.epoch}-{self.n}"

    def now(self) -> datetime:
        self.at += timedelta(milliseconds=self.rng.randint(1, 5000))
        return self.at

    def next_op(self) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        state = self.ledger.state
        r = rng.random()
        if r < 0.04:
            return self._operator(state)
        if r < 0.06:  # refused: a meter that is not defined
            op = CloseRound("r-nowhere", self.now())
            return op.kind, op_body("nowhere", op)
        table = rng.choice(TABLES)
        open_here = [(mid, rid, b) for mid in sorted(state) for rid, b in sorted(state[mid].open_rounds.items())
                     if b.table == table]
        if not open_here or (len(open_here) < 2 and rng.random() < 0.15):
            return self._book(state, table)
        mid, rid, b = rng.choice(open_here)
        owed = [sh for sh in b.shared if sh.owed_cents]
        if owed and rng.random() < 0.8:
            sh = owed[0]
            unpaid = sorted(b.seats - set(sh.paid_seats))
            op = PayPercentAward(rid, table, unpaid[0], sh.hand, sh.award, sh.percent, self.now(), "sup-7", sh.shares)
            return op.kind, op_body(mid, op)
        a = rng.random()
        seats = sorted(b.seats)
        if a < 0.25:
            seat = rng.choice(seats) if rng.random() < 0.95 else 9  # seat 9 never wagers: refused
            op = PayFixedAward(rid, table, seat, rng.choice(("", "dealer", "player")), rng.choice(FIXED_AWARDS),
                               rng.choice((500, 2500, 100_000)), rng.choice(("table", "attendant")), self.now(), "sup-3")
        elif a < 0.4:
            award, pct = rng.choice(PERCENT_AWARDS)
            shares = 1 if len(seats) == 1 or rng.random() < 0.7 else rng.randint(2, len(seats) + 1)  # +1: refused
            op = PayPercentAward(rid, table, rng.choice(seats), "royal flush", award, pct, self.now(), "sup-7",
                                 shares)
        elif a < 0.55:
            op = VoidRound(rid, self.now(), "misdeal")  # refused once an award was paid
        else:
            op = CloseRound(rid, self.now())  # refused while shares are owed
        return op.kind, op_body(mid, op)

    def _book(self, state: Any, table: str) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        mid = rng.choice(sorted(state))
        if rng.random() < 0.05 and state[mid].recent_rounds:
            rid = rng.choice(state[mid].recent_rounds)  # refused: booked before
        else:
            self.rounds += 1
            rid = f"{table}-{self.epoch}-{self.rounds}"
        sizes = state[mid].params.wager_sizes
        seats = rng.sample(range(1, 8), rng.randint(1, 4))
        wagers = [(s, rng.choice(sizes)) for s in seats]
        if rng.random() < 0.05:
            wagers[0] = (wagers[0][0], 300)  # refused: not an accepted wager size
        op = BookContributions(rid, table, tuple(wagers), self.now())
        return op.kind, op_body(mid, op)

    def _operator(self, state: Any) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        mid = rng.choice(sorted(state))
        self.operator_turns += 1
        if self.operator_turns % 2:  # in turn, not by chance: a short run journals both kinds (seen: no top-up)
            units = rng.choice((-1, 1)) * rng.randint(1, 5_000_000)  # below reset or above ceiling: refused
            op = Adjust(units, "meter repair", "badge-4411/approval-93", self.now())
        else:
            op = TopUp(rng.choice((100, 5000, 20000)), self.now(), "mgr-2", "promotion")
        return op.kind, op_body(mid, op)


def child_main(state_dir: str, seed: int, count: int) -> int:
    from controller.ledger import Ledger
    from controller.ledger.chain import canonical

    spec = json.loads(sys.stdin.read() or "{}")
    reducer = JournalReducer()

    def emit(line: str) -> None:
        os.write(1, (line + "\n").encode())

    emit("OPENING")
    ledger = Ledger.open(state_dir, reducer, software_digest="meter-crash-test",
                         checkpoint_every=spec.get("checkpoint_every", 10_000))
    epoch = ledger.head.seq
    emit(f"READY {epoch} {canonical(reducer.snapshot(ledger.state))}")

    def submit(key: str, kind: str, body: dict[str, Any]) -> bool:
        emit(f"SUBMIT {key} {kind} {canonical(body)}")
        try:
            r = ledger.submit(kind, body, key)
        except InputError as e:  # RulesError and KeyConflict are InputErrors
            emit(f"REFUSED {key} {type(e).__name__}")
            return False
        emit(f"ACK {key} {r.seq} {r.hash} {int(r.repeat)}")
        return True

    for mid in sorted(METERS):
        if mid not in ledger.state:
            # the same key and body in every run: a define hidden by a kill is found again as a repeat
            submit(f"define-{mid}", DEFINE_METER, define_meter_body(params_from_dict(METERS[mid]), "mgr-1", BASE_TIME))
    for key, kind, body in spec.get("retry", []):
        submit(key, kind, body)
    driver = Driver(ledger, random.Random(f"{seed}-{epoch}"), epoch, spec.get("operator_first", "adjust"))
    acked: list[tuple[str, str, dict]] = []
    for _ in range(count):
        if acked and driver.rng.random() < 0.03:
            submit(*driver.rng.choice(acked))  # a retry of an acknowledged operation: a repeat
            continue
        kind, body = driver.next_op()
        key = driver.key()
        if submit(key, kind, body):
            acked.append((key, kind, body))
    ledger.close()
    emit("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))

"""A toy reducer for the ledger tests, and the child process of the crash test.

Toy state: account balances in cents. The invariant: no balance is negative and the balances sum to
what was deposited less what was withdrawn. A transfer moves money between two accounts in one
entry, so a half-applied transfer (or any change of one amount) breaks the invariant.

As a child process (`python ledger_child.py STATE_DIR`): reads one JSON document from stdin
({"ops": [[key, kind, body], ...], "threads": N, "checkpoint_every": N}), prints ``OPENING``, opens
the ledger, prints ``READY <head seq> <state as canonical JSON>``, submits the operations from N
threads and prints one line per outcome, each written with a single write() so that a kill cannot
cut a line:

    ACK <key> <seq> <hash> <0|1 repeat>
    REFUSED <key> <error class>
    DONE
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from controller.errors import InputError, RulesError


class Accounts:
    """state = (balances: dict[str, int], deposited: int, withdrawn: int); never mutated."""

    def initial(self):
        return ({}, 0, 0)

    def apply(self, state, kind: str, body: dict[str, Any]):
        balances, deposited, withdrawn = state
        if kind == "deposit":
            acct, cents = _account(body, "account"), _cents(body)
            new = dict(balances)
            new[acct] = new.get(acct, 0) + cents
            return (new, deposited + cents, withdrawn), {"balance": new[acct]}
        if kind == "withdraw":
            acct, cents = _account(body, "account"), _cents(body)
            have = balances.get(acct, 0)
            if have < cents:
                raise RulesError("cents", f"{acct} holds {have}, cannot withdraw {cents}")
            new = dict(balances)
            new[acct] = have - cents
            return (new, deposited, withdrawn + cents), {"balance": new[acct]}
        if kind == "transfer":
            src, dst, cents = _account(body, "from"), _account(body, "to"), _cents(body)
            if src == dst:
                raise InputError("to", "same account as from")
            have = balances.get(src, 0)
            if have < cents:
                raise RulesError("cents", f"{src} holds {have}, cannot transfer {cents}")
            new = dict(balances)
            new[src] = have - cents
            new[dst] = new.get(dst, 0) + cents
            return (new, deposited, withdrawn), {"from": new[src], "to": new[dst]}
        raise InputError("kind", f"unknown operation {kind!r}")

    def check(self, state) -> None:
        balances, deposited, withdrawn = state
        negative = sorted(a for a, b in balances.items() if b < 0)
        if negative:
            raise AssertionError(f"negative balance: {', '.join(negative)}")
        total = sum(balances.values())
        if total != deposited - withdrawn:
            raise AssertionError(f"balances sum to {total}, deposited - withdrawn is {deposited - withdrawn}")

    def snapshot(self, state) -> dict:
        balances, deposited, withdrawn = state
        return {"balances": dict(balances), "deposited": deposited, "withdrawn": withdrawn}

    def restore(self, data: dict):
        return (dict(data["balances"]), int(data["deposited"]), int(data["withdrawn"]))


def _account(body: dict, field: str) -> str:
    v = body.get(field)
    if not isinstance(v, str) or not v:
        raise InputError(field, "must be an account name")
    return v


def _cents(body: dict) -> int:
    v = body.get("cents")
    if type(v) is not int or v <= 0:
        raise InputError("cents", "must be a positive integer")
    return v


def child_main(state_dir: str) -> int:
    from controller.ledger import Ledger
    from controller.ledger.chain import canonical

    spec = json.loads(sys.stdin.read())
    reducer = Accounts()
    out_lock = threading.Lock()

    def emit(line: str) -> None:
        with out_lock:
            os.write(1, (line + "\n").encode())

    emit("OPENING")
    ledger = Ledger.open(state_dir, reducer, software_digest="crash-test",
                         checkpoint_every=spec.get("checkpoint_every", 10_000))
    emit(f"READY {ledger.head.seq} {canonical(reducer.snapshot(ledger.state))}")
    ops = iter(spec["ops"])
    ops_lock = threading.Lock()

    def worker() -> None:
        while True:
            with ops_lock:
                op = next(ops, None)
            if op is None:
                return
            key, kind, body = op
            try:
                r = ledger.submit(kind, body, key)
            except InputError as e:
                emit(f"REFUSED {key} {type(e).__name__}")
            else:
                emit(f"ACK {key} {r.seq} {r.hash} {int(r.repeat)}")

    threads = [threading.Thread(target=worker) for _ in range(spec.get("threads", 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger.close()
    emit("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))

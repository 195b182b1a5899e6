"""The meter's cost per operation as the rounds open on it grow: a booking and a close, in turn, on a meter that
holds N open rounds (a linked meter of a floor has one per table being dealt), at N = 10, 1,000 and 10,000, as a
ratio to N = 10 measured in the same run. Flat is the goal (docs/benchmarks.md, "Meter operations"). And a replay
of a journal that books 4,000 and 16,000 rounds left open, through the ledger's reducer: linear is the goal.

    .venv/bin/python bench/bench_meter.py            # print the results
    .venv/bin/python bench/bench_meter.py --quick    # a smoke run: small sizes, nothing written
    .venv/bin/python bench/bench_meter.py --write    # and put them in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.meter import MeterParams, apply, initial_state
from controller.meter.journal import DEFINE_METER, MetersReducer, define_meter_body, op_body
from controller.meter.ops import BookContributions, CloseRound

from benchdoc import write_section

SECTION = "## Meter operations"
COMMAND = ".venv/bin/python bench/bench_meter.py --write"
AT = datetime(2026, 1, 1, tzinfo=UTC)
PARAMS = MeterParams("link-main", 1_000_000, Fraction("0.15"), (100, 500, 2500), Fraction("0.05"))
REPEATS = 5  # the fastest of so many runs: other people's tests share the machine
# Before the open rounds kept running totals and were shared between states (commit cfdd6e3, 2026-12-05, this
# machine): every operation copied the map of open rounds and summed every round for the invariant.
BEFORE_US = {10: 37, 1_000: 299, 10_000: 3_769}
BEFORE_REPLAY_S = {4_000: 1.91, 16_000: 73.07}


def _book(i: int) -> BookContributions:
    return BookContributions(f"t{i}-r{i}", f"t{i}", ((1, 500), (3, 100)), AT + timedelta(milliseconds=i))


def per_operation_us(open_rounds: int, ops: int) -> float:
    """Microseconds per operation on a meter with `open_rounds` open: `ops` operations, a booking of a new round
    and the close of the oldest open one in turn, so that as many stay open; the fastest of REPEATS runs."""
    state = initial_state(PARAMS, "bench", AT)
    for i in range(open_rounds):
        state, _ = apply(state, _book(i))
    best, k = float("inf"), 0
    for _ in range(REPEATS):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for _ in range(ops // 2):
                state, _ = apply(state, _book(open_rounds + k))
                state, _ = apply(state, CloseRound(f"t{k}-r{k}", AT + timedelta(seconds=1)))
                k += 1
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best / (ops // 2 * 2) * 1e6


def replay_seconds(bookings: int) -> float:
    """Seconds to replay a journal of `bookings` entries, each booking a round left open, through the ledger's
    reducer: each entry applied and the invariant checked after it, as the ledger's writer and `audit verify` do;
    the fastest of 2 runs."""
    bodies = [op_body(PARAMS.meter_id, _book(i)) for i in range(bookings)]
    best = float("inf")
    for _ in range(2):
        r = MetersReducer()
        meters, _ = r.apply(r.initial(), DEFINE_METER, define_meter_body(PARAMS, "bench", AT))
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for body in bodies:
                meters, _ = r.apply(meters, "book-contributions", dict(body))
                r.check(meters)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def render(sizes: list[int], us: list[float], ops: int, replays: list[int], seconds: list[float]) -> str:
    b = BEFORE_US
    rows = "\n".join(
        f"| {n:,} | {u:,.0f} | {u / us[0]:,.1f}x | "
        + (f"{b[n]:,} | {b[n] / b[sizes[0]]:,.1f}x |" if n in b and sizes[0] in b else " | |")
        for n, u in zip(sizes, us, strict=True))
    per = [s / n * 1e6 for n, s in zip(replays, seconds, strict=True)]
    r = BEFORE_REPLAY_S
    replay_rows = "\n".join(
        f"| {n:,} | {s:,.2f} | {p:,.0f} | {p / per[0]:,.1f}x | "
        + (f"{r[n]:,.2f} | {r[n] / n / (r[replays[0]] / replays[0]):,.1f}x |" if n in r and replays[0] in r else " | |")
        for n, s, p in zip(replays, seconds, per, strict=True))
    return (f"{SECTION}\n\nThe meter's cost per operation with N rounds open on it (`{COMMAND}`): {ops} operations, a "
            "booking and a close in turn, as many rounds left open, the fastest of "
            f"{REPEATS} runs; the ratio is to N = {sizes[0]:,} in the same run. Before: the figures measured "
            "2026-12-05 at commit cfdd6e3, when every operation copied the map of open rounds and summed every round "
            "for the invariant; now the open rounds are a mapping shared between states that keeps the sums the "
            "invariant checks, and an operation checks what it touched (docs/meters.md, \"The invariant\").\n\n"
            "| open rounds | µs per operation | ratio | before: µs | before: ratio |\n|---:|---:|---:|---:|---:|\n"
            f"{rows}\n\nA replay of a journal whose entries each book a round left open, through the ledger's reducer "
            "(each entry applied and the invariant checked after it, as the ledger's writer and `audit verify` do), "
            "the fastest of 2 runs; the ratio is of the cost per entry, to the shorter journal (1.0x: linear). "
            "Before: the same replay (one run) at commit cfdd6e3, 2026-12-05.\n\n"
            "| entries | seconds | µs per entry | ratio | before: seconds | before: ratio |\n"
            f"|---:|---:|---:|---:|---:|---:|\n{replay_rows}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: small sizes, nothing written")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()
    if args.quick and args.write:
        ap.error("--quick is a smoke run: its numbers are not written")
    sizes, ops = ([10, 100, 300], 100) if args.quick else ([10, 1_000, 10_000], 400)
    replays = [200, 800] if args.quick else [4_000, 16_000]
    us = [per_operation_us(n, ops) for n in sizes]
    seconds = [replay_seconds(n) for n in replays]
    text = render(sizes, us, ops, replays, seconds)
    print(text)
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

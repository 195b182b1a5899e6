"""The meter's cost per operation as the rounds open on it grow: a booking and a close, in turn, on a meter that
holds N open rounds (a linked meter of a floor has one per table being dealt), at N = 10, 1,000 and 10,000, as a
ratio to N = 10 measured in the same run. Flat is the goal (docs/benchmarks.md, "Meter operations").

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
from controller.meter.ops import BookContributions, CloseRound

from benchdoc import write_section

SECTION = "## Meter operations"
COMMAND = ".venv/bin/python bench/bench_meter.py --write"
AT = datetime(2026, 1, 1, tzinfo=UTC)
PARAMS = MeterParams("link-main", 1_000_000, Fraction("0.15"), (100, 500, 2500), Fraction("0.05"))


def _book(i: int) -> BookContributions:
    return BookContributions(f"t{i}-r{i}", f"t{i}", ((1, 500), (3, 100)), AT + timedelta(milliseconds=i))


def per_operation_us(open_rounds: int, ops: int) -> float:
    """Microseconds per operation on a meter with `open_rounds` open: `ops` operations, a booking of a new round
    and the close of the oldest open one in turn, so that as many stay open."""
    state = initial_state(PARAMS, "bench", AT)
    for i in range(open_rounds):
        state, _ = apply(state, _book(i))
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for k in range(ops // 2):
            state, _ = apply(state, _book(open_rounds + k))
            state, _ = apply(state, CloseRound(f"t{k}-r{k}", AT + timedelta(seconds=1)))
        took = time.perf_counter() - t0
    finally:
        gc.enable()
    return took / (ops // 2 * 2) * 1e6


def render(sizes: list[int], us: list[float], ops: int) -> str:
    rows = "\n".join(f"| {n:,} | {u:,.0f} | {u / us[0]:,.1f}x |" for n, u in zip(sizes, us, strict=True))
    return (f"{SECTION}\n\nThe meter's cost per operation with N rounds open on it (`{COMMAND}`): {ops} operations, a "
            "booking and a close in turn, as many rounds left open; the ratio is to N = "
            f"{sizes[0]:,} in the same run.\n\n| open rounds | µs per operation | ratio |\n|---:|---:|---:|\n{rows}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: small sizes, nothing written")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()
    if args.quick and args.write:
        ap.error("--quick is a smoke run: its numbers are not written")
    sizes, ops = ([10, 100, 300], 100) if args.quick else ([10, 1_000, 10_000], 400)
    us = [per_operation_us(n, ops) for n in sizes]
    text = render(sizes, us, ops)
    print(text)
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

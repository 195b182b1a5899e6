"""Hand-evaluation throughput: controller.hands against the `treys` evaluator, same hands, same run.

    .venv/bin/python bench/bench_hands.py            # print the results
    .venv/bin/python bench/bench_hands.py --write    # and put them in docs/benchmarks.md

Needs the `bench` extra (`pip install -e ".[bench]"`) for treys. Before timing, the two
evaluators must order every sampled hand the same way (treys: lower is better), or nothing is
reported.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.cards import card_str
from controller.hands import four, poker5, three

from benchdoc import write_section

SECTION = "## Hand evaluation"
COMMAND = ".venv/bin/python bench/bench_hands.py --write"


def best_times(runs: dict[str, tuple[Callable[[], None], int]], repeat: int) -> dict[str, float]:
    """Hands per second of each run, the fastest of `repeat` rounds. The runs take turns within a
    round, so that a change in the machine's load falls on all of them alike; garbage collection
    is off while timing."""
    fastest = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, (fn, _n) in runs.items():
            gc.disable()
            try:
                t0 = time.perf_counter_ns()
                fn()
                fastest[name] = min(fastest[name], (time.perf_counter_ns() - t0) / 1e9)
            finally:
                gc.enable()
    return {name: n / fastest[name] for name, (_fn, n) in runs.items()}


def loop(fn: Callable[[Sequence[int]], object], hands: list) -> Callable[[], None]:
    def run() -> None:
        for h in hands:
            fn(h)

    return run


def loop2(fn: Callable[[list[int], list[int]], object], pairs: list) -> Callable[[], None]:
    def run() -> None:
        for a, b in pairs:
            fn(a, b)

    return run


def import_seconds(module: str, setup: str = "") -> float:
    """Seconds to import `module` (and run `setup`) in a fresh interpreter; the best of three."""
    code = f"import time\nt = time.perf_counter()\nimport {module}\n{setup}\nprint(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    return min(runs)


def check_same_order(ours: list[int], theirs: list[int]) -> None:
    """Our values rise exactly where treys's ranks fall, and tie exactly where they tie."""
    pairs = sorted(set(zip(ours, theirs, strict=True)))
    for (v1, t1), (v2, t2) in pairwise(pairs):
        if not (v1 < v2 and t1 > t2):
            raise SystemExit(f"evaluators disagree: ours {v1:#x}/{v2:#x}, treys {t1}/{t2}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hands", type=int, default=200_000, help="random hands per evaluator (default 200,000)")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds; the fastest counts (default 5)")
    ap.add_argument("--seed", type=int, default=2014)
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()

    from treys import Card, Evaluator  # the bench extra

    rnd = random.Random(args.seed)
    deck = list(range(52))
    fives = [tuple(rnd.sample(deck, 5)) for _ in range(args.hands)]
    sevens = [tuple(rnd.sample(deck, 7)) for _ in range(args.hands // 4)]
    threes = [tuple(h[:3]) for h in fives]
    fours = [tuple(h[:4]) for h in fives]
    to_treys = [Card.new(card_str(c)[0] + card_str(c)[1].lower()) for c in deck]
    t_fives = [[to_treys[c] for c in h] for h in fives]
    t_split = [(h[:2], h[2:]) for h in t_fives]
    t_sevens = [([to_treys[c] for c in h[:2]], [to_treys[c] for c in h[2:]]) for h in sevens]
    evaluator = Evaluator()

    check_same_order([poker5.evaluate(h) for h in fives], [evaluator._five(h) for h in t_fives])
    check_same_order([poker5.best(h)[0] for h in sevens], [evaluator.evaluate(a, b) for a, b in t_sevens])

    r = args.repeat
    rates = best_times(
        {
            "ours5": (loop(poker5.evaluate, fives), len(fives)),
            "treys5": (loop2(evaluator.evaluate, t_split), len(fives)),
            "treys5_core": (loop(evaluator._five, t_fives), len(fives)),
            "ours7": (loop(poker5.best, sevens), len(sevens)),
            "treys7": (loop2(evaluator.evaluate, t_sevens), len(sevens)),
            "ours3": (loop(three.evaluate, threes), len(threes)),
            "ours4": (loop(four.evaluate, fours), len(fours)),
            "ours4of5": (loop(four.best, fives), len(fives)),
        },
        r,
    )
    ours5, treys5, treys5_core = rates["ours5"], rates["treys5"], rates["treys5_core"]
    ours7, treys7 = rates["ours7"], rates["treys7"]
    ours3, ours4, ours4of5 = rates["ours3"], rates["ours4"], rates["ours4of5"]
    import_ours = import_seconds("controller.hands.select")
    import_treys = import_seconds("treys", "treys.Evaluator()")

    def rate(x: float) -> str:
        return f"{x:,.0f}"

    rows = [
        ("5 cards: `poker5.evaluate`", rate(ours5),
         f"{ours5 / treys5:.2f}x treys, {ours5 / treys5_core:.2f}x its core"),
        ("5 cards: treys `Evaluator.evaluate(hand, board)`", rate(treys5), "1.00x"),
        ("5 cards: treys `Evaluator._five(cards)` (no dispatch)", rate(treys5_core), ""),
        ("best 5 of 7: `poker5.best`", rate(ours7), f"{ours7 / treys7:.2f}x treys"),
        ("best 5 of 7: treys `Evaluator.evaluate(hand, board)`", rate(treys7), "1.00x"),
        ("3 cards: `three.evaluate`", rate(ours3), ""),
        ("4 cards: `four.evaluate`", rate(ours4), ""),
        ("best 4 of 5: `four.best`", rate(ours4of5), ""),
    ]
    cpu = platform.machine() or "unknown machine"
    lines = [
        SECTION,
        "",
        f"Measured {datetime.date.today().isoformat()} with Python {platform.python_version()} "
        f"({platform.python_implementation()}, {cpu}, {os.cpu_count()} CPUs), treys "
        f"{_version('treys')}: {len(fives):,} random five-card hands and {len(sevens):,} random "
        f"seven-card hands (seed {args.seed}), the same hands for both evaluators, the fastest of "
        f"{r} rounds in which the evaluators take turns. Both evaluators were first checked to order "
        f"every sampled hand the same way. Rates vary with the machine's load; the ratios are the "
        f"figures to compare.",
        "",
        "| what | hands/second | ratio |",
        "|---|---:|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
        f"Import, with every lookup table built: `controller.hands.select` (all three kinds of hand) "
        f"{import_ours * 1000:.0f} ms; `treys` with an `Evaluator` {import_treys * 1000:.0f} ms.",
        "",
        f"Reproduce: `{COMMAND}` (needs the `bench` extra: `.venv/bin/pip install -e \".[bench]\"`).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    main()

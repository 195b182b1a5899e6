"""Exact odds: time each card wager's odds report from a cold start, against a baseline loop.

    .venv/bin/python bench/bench_odds.py            # print the results
    .venv/bin/python bench/bench_odds.py --write    # and put them in docs/benchmarks.md

Every timing starts cold: the caches of controller.odds (counts and lookup tables) are cleared
first, so each figure is what the first report for that wager costs in a fresh process. The
baseline is a plain Python loop over all 2,598,960 five-card combinations that does nothing
(`for _ in itertools.combinations(range(52), 5): pass`), timed in the same rounds, so the ratios
can be compared across machines and loads.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.games import GAMES
from controller.money import UNITS_PER_DOLLAR
from controller.odds import odds_report
from controller.odds.counts import clear_caches
from controller.paytables import find_paytable

from benchdoc import write_section

SECTION = "## Exact odds"
COMMAND = ".venv/bin/python bench/bench_odds.py --write"
CONFIG = ROOT / "config" / "paytables"
METER = 10_000 * UNITS_PER_DOLLAR

# (game, wager, paytable id or file under config/paytables, what is enumerated)
CASES: list[tuple[str, str, str, str]] = [
    ("caribbean-stud", "progressive", "caribbean-stud-progressive-d", "C(52,5) five-card hands"),
    ("caribbean-stud", "five-card-hand-bonus", "five-card-hand-bonus", "C(52,5) five-card hands"),
    ("four-card-poker", "five-card-progressive", "four-card-poker-five-card-progressive-example.toml", "C(52,5) five-card hands"),
    ("four-card-poker", "four-card-progressive", "four-card-poker-four-card-progressive-example.toml", "best four of C(52,5)"),
    ("let-it-ride", "five-card-progressive", "let-it-ride-five-card-progressive-example.toml", "C(52,5) five-card hands"),
    ("let-it-ride", "three-card-progressive", "let-it-ride-three-card-progressive-example.toml", "C(52,3) three-card hands"),
    ("flop-poker", "three-card-bonus", "flop-poker-three-card-bonus", "C(52,3) three-card hands"),
    ("flop-poker", "progressive-flop", "flop-poker-progressive-a", "C(52,3) x C(49,3) Flop Poker deals"),
    ("flop-poker", "flop", "flop-poker-flop-wager", "C(52,3) x C(49,3) Flop Poker deals"),
]
BAD_BEAT = ("four-card-poker", "bad-beat", "four-card-poker-bad-beat-a", "C(52,5) x C(47,6) deals")


def baseline() -> None:
    for _ in combinations(range(52), 5):
        pass


def paytable(ref: str) -> object:
    return find_paytable(CONFIG / ref if ref.endswith(".toml") else ref)


def cold(game: str, wager: str, ref: str) -> Callable[[], None]:
    pt = paytable(ref)

    def run() -> None:
        clear_caches()
        odds_report(game, wager, pt, meter_units=METER)  # type: ignore[arg-type]

    return run


def timed(fn: Callable[[], None]) -> float:
    gc.collect()
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the fastest of each is kept (default 3)")
    ap.add_argument("--bad-beat-repeat", type=int, default=1, help="rounds for the Bad Beat Bonus (default 1)")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()

    runs = {(g, w, p, what): cold(g, w, p) for g, w, p, what in CASES}
    best = dict.fromkeys(runs, float("inf"))
    base = float("inf")
    for _ in range(args.repeat):  # the cases take turns, so a change of load falls on all alike
        base = min(base, timed(baseline))
        for key, fn in runs.items():
            best[key] = min(best[key], timed(fn))
            base = min(base, timed(baseline))
    bad_beat = float("inf")
    for _ in range(args.bad_beat_repeat):
        bad_beat = min(bad_beat, timed(cold(*BAD_BEAT[:3])))
        base = min(base, timed(baseline))
    best[BAD_BEAT] = bad_beat

    rows = [
        f"| {GAMES[g].title}: {GAMES[g].wagers[w].title} | `{Path(p).stem}` | {what} | {t:.2f} | {t / base:,.1f}x |"
        for (g, w, p, what), t in best.items()
    ]
    cpu = platform.machine()
    lines = [
        SECTION,
        "",
        f"Measured {datetime.date.today().isoformat()} with Python {platform.python_version()} "
        f"({platform.python_implementation()}, {cpu}, {os.cpu_count()} CPUs, one process). Each figure is a "
        f"whole `odds_report` from a cold start (every count and lookup table of `controller.odds` "
        f"cleared first), the fastest of {args.repeat} rounds ({args.bad_beat_repeat} for the Bad Beat "
        f"Bonus). The baseline is a plain Python loop over all 2,598,960 five-card combinations that "
        f"does nothing (`for _ in itertools.combinations(range(52), 5): pass`), timed in the same "
        f"rounds: {base:.3f} s. Ratios are against it; other people's tests ran on the machine at the "
        f"same time, so absolute seconds are noisy and the ratios are the figures to compare.",
        "",
        "| wager | paytable | enumerated | seconds | x baseline |",
        "|---|---|---|---:|---:|",
        *rows,
        "",
        "Within a process the counts are cached: a second report for the same wager (another meter, "
        "another paytable of the same kind) costs milliseconds. Method and results: docs/odds.md.",
        "",
        f"Reproduce: `{COMMAND}`.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

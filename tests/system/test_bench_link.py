"""The link benchmark (bench/bench_link.py) runs, at the smallest size: two tables, a few operations, one latency
run. It went unrun for a while and stalled for good ("raw tables: no progress for 60 s"): its observer shared a
table's username, and the broker, which takes the username as the client id, made them take each other's session.
Its floor run (a session per table, in child processes, hits approved with a supervisor's signed approval) runs
too, with four tables for a second, and again with the meter values published at most every 0.25 s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "bench_link.py"), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_the_link_benchmark_runs_at_the_smallest_size() -> None:
    out = bench("--tables", "2", "--ops", "4", "--rounds", "1", "--samples", "5", "--latency-tables", "2", "--modes",
                "raw", "--tablelink-rounds", "0", "--floor-tables", "0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Reproduce: `.venv/bin/python bench/bench_link.py --write`" in out.stdout
    assert "mqtt link down" not in out.stderr, out.stderr[-3000:]
    assert "at the floor's rate" not in out.stdout


def test_the_floor_run_books_and_pays_hits_at_the_smallest_size() -> None:
    out = bench("--rounds", "0", "--latency-tables", "", "--floor-tables", "4", "--floor-rate", "20",
                "--floor-seconds", "1", "--sweep", "", "--sweep-seconds", "0.5", "--hit-s", "0.5", "--children", "1")
    assert out.returncode == 0, out.stderr[-3000:]  # every operation answered, verified, applied once
    assert "### 4 tables at the floor's rate" in out.stdout
    floor = re.search(r"^floor: 20 ops/s for 1 s: (\d+) operations .* (\d+) hits", out.stdout, re.M)
    assert floor is not None, out.stdout[-3000:]
    assert int(floor.group(1)) >= 10 and int(floor.group(2)) >= 1, floor.group(0)
    assert re.search(r"^floor: 20 ops/s: meter to every table p50 [\d.]+ p99 [\d.]+ ms over [1-9]", out.stdout, re.M)
    assert re.search(r"^floor: 20 ops/s for 0.5 s: .* meter values to the tables False", out.stdout, re.M)
    # then a fresh authority with meter_interval = 0.25: its rows in the same table, and the values fewer
    runs = re.findall(r"^floor: 4 tables connected in [\d.]+ s \(1 processes\), meter values at most every (\d+) ms",
                      out.stdout, re.M)
    assert runs == ["50", "250"], out.stdout[-3000:]
    values = [int(v) for v in re.findall(r"^floor: 20 ops/s: meter to every table .* over (\d+) values", out.stdout, re.M)]
    assert len(values) == 2 and 1 <= values[1] < values[0], values
    assert re.search(r"^\| 250 \| 20 \| \d+ ", out.stdout, re.M), out.stdout[-3000:]
    assert "`meter_interval = 0.25` in its file" in out.stdout
    assert "mqtt link down" not in out.stderr, out.stderr[-3000:]

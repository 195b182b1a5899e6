"""The link benchmark (bench/bench_link.py) runs, at the smallest size: two tables, a few operations, one latency
run. It went unrun for a while and stalled for good ("raw tables: no progress for 60 s"): its observer shared a
table's username, and the broker, which takes the username as the client id, made them take each other's session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_link_benchmark_runs_at_the_smallest_size() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_link.py"), "--tables", "2", "--ops", "4",
                          "--rounds", "1", "--samples", "5", "--latency-tables", "2", "--modes", "raw",
                          "--tablelink-rounds", "0"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Reproduce: `.venv/bin/python bench/bench_link.py --write`" in out.stdout
    assert "mqtt link down" not in out.stderr, out.stderr[-3000:]

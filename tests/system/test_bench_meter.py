"""The meter benchmark (bench/bench_meter.py) runs in its smoke size, operations and a replay, and a smoke run is
never written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_meter.py"


def test_the_meter_benchmark_runs_and_its_smoke_run_is_never_written() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [r.split("|")[1].strip() for r in rows] == ["10", "100", "300", "200", "800"], out.stdout
    assert rows[0].split("|")[3].strip() == "1.0x" and rows[3].split("|")[4].strip() == "1.0x", out.stdout
    assert rows[0].endswith("| 37 | 1.0x |") and rows[1].endswith("|  | |"), out.stdout  # before: its own sizes only
    before = (ROOT / "docs" / "benchmarks.md").read_bytes()
    out = subprocess.run([sys.executable, str(BENCH), "--quick", "--write"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--quick is a smoke run" in out.stderr
    assert (ROOT / "docs" / "benchmarks.md").read_bytes() == before

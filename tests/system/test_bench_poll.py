"""The poll benchmark (bench/bench_poll.py) runs in its smoke size, the serial poll cycle and the rate cap on TCP
against its uncapped baseline, and a smoke run is never written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_poll.py"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_poll_benchmark_measures_the_tcp_cap_and_its_smoke_run_is_never_written() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    (serial,) = [_cells(x) for x in lines if x.startswith("| 115,200 |")]
    assert float(serial[1]) > 0, out.stdout
    uncapped, capped = [_cells(x) for x in lines if x.startswith(("| uncapped", "| max_rate"))]
    assert uncapped[2] == "**1.00x**" and capped[0] == "max_rate = 100 (the default)", out.stdout
    # the figures themselves are the benchmark's to report, not a test's to time (the cap is held by
    # tests/drivers/test_modbus_tcp.py and the schedule's property tests): here they are only measured
    assert float(capped[1]) > 0 and float(uncapped[1]) > 0 and float(capped[3]) > 0, out.stdout
    assert capped[-1] == uncapped[-1] == "0", out.stdout  # no faults
    before = (ROOT / "docs" / "benchmarks.md").read_bytes()
    out = subprocess.run([sys.executable, str(BENCH), "--quick", "--write"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--quick is a smoke run" in out.stderr
    assert (ROOT / "docs" / "benchmarks.md").read_bytes() == before

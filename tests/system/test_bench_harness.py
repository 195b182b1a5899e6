"""The harness the table benchmarks share (bench/harness.py): its daemon on the rig, with real components, and the
command line of each benchmark that uses it. The benchmarks' own `--quick` runs take a minute or more each and are
run by hand (bench/bench_table.py --quick, bench/bench_retries.py --quick)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import harness  # noqa: E402 - bench/ is put on the path just above

BENCHMARKS = ("bench_table.py", "bench_retries.py")


@pytest.mark.parametrize("script", BENCHMARKS)
def test_a_smoke_run_is_never_written(script: str) -> None:
    before = harness.BENCHMARKS.read_bytes()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--write"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--quick is a smoke run: its numbers are not written" in out.stderr
    assert harness.BENCHMARKS.read_bytes() == before


def test_the_harness_runs_a_daemon_on_the_rig_and_reads_its_log(tmp_path: Path) -> None:
    async def run() -> None:
        async with harness.table_on(115200, tmp_path / "t") as (rig, t):
            assert await harness.sign_matches(rig, t)
            log = harness.Log(t.log_path)
            t0 = time.time()
            rig.mute("seat-3", True)  # the device stops answering: the daemon says so in its log
            await harness.until_true(lambda: _down(t), 15, lambda: "seat-3 not marked down")
            rig.mute("seat-3", False)
            await harness.wait_device_up(t, "seat-3", 15)
            lines = log.between(t0, time.time() + 1)
            events = [(e.get("event"), e.get("device")) for e in lines]
            assert ("device down", "seat-3") in events and ("device recovered", "seat-3") in events
            assert all(t0 <= harness.timestamp(e) for e in lines)

    async def _down(t) -> bool:
        return not await harness.device_up(t, "seat-3")

    asyncio.run(run())
    with pytest.raises(RuntimeError, match=r"^never within 0.1 s$"):
        asyncio.run(harness.until_true(_false, 0.1, lambda: "never"))


async def _false() -> bool:
    return False

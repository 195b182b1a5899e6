"""The suite's own runner of async tests: a test that swallows its deadline's cancellation and then waits for ever
fails, with the stacks of what it waited on, instead of hanging the suite (a run hung so at 99% once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # tests/, where conftest.py is

SWALLOWS = '''
import asyncio, contextlib

async def test_swallows_its_cancellation_and_waits_for_ever():
    forever = asyncio.Event()
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await forever.wait()
'''


def test_a_test_that_swallows_its_deadline_fails_instead_of_hanging(tmp_path):
    (tmp_path / "test_swallow.py").write_text(SWALLOWS, encoding="utf-8")
    (tmp_path / "conftest.py").write_text((HERE / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           str(tmp_path / "test_swallow.py")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "PROGRESSIVE_ASYNC_DEADLINE_S": "1"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the test did not end 1.25 s after it started" in proc.stdout, proc.stdout
    assert "in test_swallows_its_cancellation_and_waits_for_ever" in proc.stdout and "in wait" in proc.stdout  # where

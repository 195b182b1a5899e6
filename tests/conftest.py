"""Test-suite plumbing: `async def` tests run in a fresh event loop with a deadline, and must leave no task
behind (pytest alone would skip them with a warning, which would let them pass without running). Hypothesis
has no per-example deadline: on a loaded machine one example may take longer than its 200 ms default, which
is no fault of the code (a test that wants one sets its own); a failure prints how to reproduce it."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from hypothesis import settings

ASYNC_TEST_DEADLINE_S = 120.0

settings.register_profile("suite", deadline=None, print_blob=True)
settings.load_profile("suite")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    fn = pyfuncitem.obj
    if not inspect.iscoroutinefunction(fn):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    async def main() -> None:
        async with asyncio.timeout(ASYNC_TEST_DEADLINE_S):
            await fn(**kwargs)
        leftover = asyncio.all_tasks() - {asyncio.current_task()}
        assert not leftover, f"tasks left running: {leftover}"

    asyncio.run(main())
    return True


# Tests of 10 s and more on a loaded two-core machine that are neither soaks nor grouped (measured with
# --durations): started with the first, for the same reason.
LONG = ("tests/test_lint.py::test_the_code_type_checks", "tests/test_console_browser.py",
        "tests/test_meter_series.py::test_a_long_journal", "tests/test_demo.py::test_demo_plays_rounds",
        "tests/test_anchor.py::test_an_older_copy", "tests/test_meter.py::test_random_operations")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The soaks and the groups that must share a worker (the README's commands on one fresh checkout, ~100 s)
    first, then the other long tests: each worker starts on a long test and ends on short ones, so that no worker
    is left alone with a long test at the end of the run."""
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("soak") or item.get_closest_marker("xdist_group"):
            return 0
        return 1 if item.nodeid.startswith(LONG) else 2

    items.sort(key=rank)

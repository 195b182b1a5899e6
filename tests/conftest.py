"""Test-suite plumbing: `async def` tests run in a fresh event loop with a deadline, and must leave no task
behind (pytest alone would skip them with a warning, which would let them pass without running). Hypothesis
has no per-example deadline: on a loaded machine one example may take longer than its 200 ms default, which
is no fault of the code (a test that wants one sets its own); a failure prints how to reproduce it.

The tests are grouped by the layer they test (docs/architecture.md, "The plan"): core/ (the pure core), drivers/
(the drivers and the rig), shell/ (the shell's packages, each with its own components), system/ (whole processes,
the release, the lint and the plan itself); support/ holds what they share. Each folder is importable by module
name from every test, as the flat folder was."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

_HERE = Path(__file__).resolve().parent
for _folder in ("support", "core", "drivers", "shell", "system"):
    if (_HERE / _folder).is_dir() and str(_HERE / _folder) not in sys.path:
        sys.path.insert(0, str(_HERE / _folder))

ASYNC_TEST_DEADLINE_S = float(os.environ.get("PROGRESSIVE_ASYNC_DEADLINE_S", "120"))
GRACE_S = min(30.0, ASYNC_TEST_DEADLINE_S / 4)  # after the deadline, for a test's teardown to end

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

    # A watch over the test, a timer and not a task (tests count the tasks): a test that swallows its deadline's
    # cancellation (a teardown's `suppress(CancelledError)` around an await takes the test's own cancel too) and then
    # waits for ever fails after a grace, naming where each task waits, instead of hanging the suite.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    test = loop.create_task(main())
    stuck: list[str] = []

    def watch() -> None:
        if test.done():
            return
        stuck.extend(f"{t.get_name()}:\n  " + "\n  ".join(_awaiting(t)) for t in asyncio.all_tasks(loop))
        for t in asyncio.all_tasks(loop):
            t.cancel()
        loop.call_later(GRACE_S, loop.stop)  # what ignores even this is left behind: the failure says what it was

    loop.call_later(ASYNC_TEST_DEADLINE_S + GRACE_S, watch)
    try:
        loop.run_until_complete(test)
        loop.run_until_complete(loop.shutdown_default_executor())
    except (RuntimeError, asyncio.CancelledError):
        if not stuck:
            raise
        raise AssertionError(f"the test did not end {ASYNC_TEST_DEADLINE_S + GRACE_S:g} s after it started, its "
                             "deadline's cancellation swallowed; where each task waited:\n" + "\n".join(stuck)) from None
    finally:
        for t in asyncio.all_tasks(loop):
            t.cancel()
        with contextlib.suppress(RuntimeError):
            loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()
    return True


def _awaiting(task: asyncio.Task) -> list[str]:
    """Where a task waits: each coroutine of its await chain (a task's own stack shows only the outermost)."""
    where, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


# Tests of 10 s and more on a loaded two-core machine that are neither soaks nor grouped (measured with
# --durations): started with the first, for the same reason.
LONG = ("tests/system/test_lint.py::test_the_code_type_checks", "tests/system/test_console_browser.py",
        "tests/shell/test_meter_series.py::test_a_long_journal", "tests/system/test_demo.py::test_demo_plays_rounds",
        "tests/shell/test_anchor.py::test_an_older_copy", "tests/core/test_meter.py::test_random_operations",
        "tests/shell/test_claim_desk_model.py", "tests/shell/test_table_daemon.py::test_a_seat_device_down",
        "tests/shell/test_anchor.py::test_with_nothing_off_the_box")
# Then the folders whose tests run whole processes and the rig, the many short tests of the core last.
FOLDERS = {"system": 0, "shell": 1, "drivers": 2, "core": 3}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The soaks and the groups that must share a worker (the README's commands on one fresh checkout, ~100 s)
    first, then the other long tests: each worker starts on a long test and ends on short ones, so that no worker
    is left alone with a long test at the end of the run."""
    def rank(item: pytest.Item) -> tuple[int, int]:
        folder = FOLDERS.get(item.path.parent.name, len(FOLDERS))
        if item.get_closest_marker("soak") or item.get_closest_marker("xdist_group"):
            return 0, folder
        return (1 if item.nodeid.startswith(LONG) else 2), folder

    items.sort(key=rank)  # stable: each file's own order kept


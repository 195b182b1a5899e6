"""The daemon's tasks (controller/app/shell.py, TableShell.spawn): a coroutine handed to spawn always ends closed,
run or not, so nothing is left "never awaited" and nothing raises into a callback that spawns."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from controller.app.shell import TableShell


def shell() -> TableShell:
    s = object.__new__(TableShell)  # spawn needs only its TaskGroup
    s._tasks = None
    return s


async def work(ran: list[str]) -> None:
    ran.append("ran")


async def test_spawn_before_the_tasks_run_is_refused_and_closes_the_coroutine():
    s, ran = shell(), []
    coro = work(ran)
    with pytest.raises(RuntimeError, match="not running"):
        s.spawn(coro, "early")
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED and not ran


async def test_a_task_cancelled_before_it_started_closes_its_coroutine():
    s, ran = shell(), []
    coro = work(ran)
    async with asyncio.TaskGroup() as tg:
        s._tasks = tg
        task = s.spawn(coro, "cancelled")
        task.cancel()
    assert task.cancelled() and not ran
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


async def test_a_task_that_ran_is_unchanged():
    s, ran = shell(), []
    async with asyncio.TaskGroup() as tg:
        s._tasks = tg
        task = s.spawn(work(ran), "ran")
    assert task.done() and not task.cancelled() and ran == ["ran"]

"""Logging: JSON lines with table, round and seat from the context; the standard library's records too."""

from __future__ import annotations

import ast
import io
import json
import logging
import re
from pathlib import Path

import pytest
import structlog

from controller.service import logs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def out():
    logs._table_context.clear()  # other tests (a daemon) leave their table and round behind
    buf = io.StringIO()
    logs.configure("json", "debug", buf)
    yield buf
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()
    logging.getLogger().handlers[:] = []


def lines(buf):
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_json_lines_carry_the_context(out):
    logs.bind(table="t1", round="t1-r7")
    structlog.get_logger("round").info("wager accepted", seat=3, cents=100)
    logs.unbind("round")
    structlog.get_logger("round").warning("idle")
    first, second = lines(out)
    assert first["event"] == "wager accepted" and first["table"] == "t1" and first["round"] == "t1-r7"
    assert first["seat"] == 3 and first["level"] == "info" and first["timestamp"].endswith("Z")
    assert "round" not in second and second["table"] == "t1"


def test_table_context_reaches_every_task_and_thread(out):
    import threading

    logs.set_table_context(table="t9", round="t9-r3")
    try:
        t = threading.Thread(target=lambda: structlog.get_logger().info("from a thread"))
        t.start()
        t.join()
        structlog.get_logger().info("here", round="explicit")
        first, second = lines(out)
        assert (first["table"], first["round"]) == ("t9", "t9-r3")
        assert second["round"] == "explicit"  # what a line says itself wins
    finally:
        logs._table_context.clear()


def test_stdlib_records_are_rendered_the_same_way(out):
    logs.bind(table="t1")
    logging.getLogger("controller.ledger").error("commit failed: %s", "disk full")
    (line,) = lines(out)
    assert line["event"] == "commit failed: disk full" and line["table"] == "t1"
    assert line["logger"] == "controller.ledger" and line["level"] == "error"


def test_a_pymodbus_error_is_one_line_without_its_frame_dump(out):
    from pymodbus.logging import Log

    Log.error("ERROR: request ask for id={} but got id={}, Skipping.", 30, 20)  # pymodbus adds its last frames
    logging.getLogger("pymodbus.logging").error("no reply\n>>>>> send: 0x1e 0x3\n>>>>> recv: 0x14 0x4")
    assert [(x["event"], x["level"]) for x in lines(out)] == [
        ("ERROR: request ask for id=30 but got id=20, Skipping.", "error"), ("no reply", "error")]
    assert len(out.getvalue().splitlines()) == 2


def test_level_filters(out):
    logs.configure("json", "warning", out)
    structlog.get_logger().info("quiet")
    structlog.get_logger().error("loud")
    assert [x["event"] for x in lines(out)] == ["loud"]


def test_unknown_level_is_refused():
    with pytest.raises(ValueError, match="unknown level 'chatty'"):
        logs.configure("json", "chatty", io.StringIO())


# --- event names ---------------------------------------------------------------------------------------------

LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}
KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")  # "wager-accepted": a second spelling beside "wager accepted"


def event_names() -> list[tuple[str, int, str]]:
    """Every literal event name in the tree: the first argument of a structlog call (log.info("...")) and of a
    round or claim machine's Note("...")."""
    found = []
    for root in ("controller", "drivers", "hil"):
        for path in sorted((ROOT / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                f = node.func
                is_log = isinstance(f, ast.Attribute) and f.attr in LEVELS and isinstance(f.value, ast.Name) \
                    and f.value.id in ("log", "logger")
                is_note = (isinstance(f, ast.Name) and f.id == "Note") or (isinstance(f, ast.Attribute) and f.attr == "Note")
                if is_log or is_note:
                    found += [(str(path.relative_to(ROOT)), node.lineno, name) for name in _literals(node.args[0])]
    return found


def test_a_log_budget_forgets_passed_windows_and_caps_its_keys():
    """Keys from a flood (one per source address) neither grow the budget without end nor flood the log: past
    max_keys new keys share one budget, and keys whose window has passed are forgotten."""
    now = [0.0]
    budget = logs.LogBudget(1, 10.0, clock=lambda: now[0], max_keys=100)
    told = [budget.take(f"2001:db8::{i:x}") for i in range(100_000)]
    assert len(budget._spent) == 101 and told.count(None) == 100_000 - 101  # 100 keys and the others' one line
    assert budget.take("2001:db8::5") is None  # a key kept keeps its own budget
    now[0] = 10.0  # every window has passed: the flood's keys are forgotten, a new key has a budget of its own
    assert budget.take("10.0.0.1") == 0 and budget.take("10.0.0.1") is None
    assert len(budget._spent) == 3  # the new key, and the two with a count not yet told:
    assert budget.owed("2001:db8::5") == 1 and budget.take(logs.LogBudget.OTHERS) == 100_000 - 101


def _literals(arg: ast.expr) -> list[str]:
    """The strings an event-name argument may be: a literal, either side of `a if c else b`."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.IfExp):
        return _literals(arg.body) + _literals(arg.orelse)
    return []


def test_event_names_are_lower_case_phrases():
    """One way to name a log event: a short lower-case phrase (the words the docs use), never a kebab-case
    identifier beside it; what varies goes in the fields."""
    names = event_names()
    assert len(names) > 100  # the scan finds the tree's events
    bad = [f"{path}:{line}: {name!r}" for path, line, name in names
           if KEBAB.fullmatch(name) or not name[:1].islower()]
    assert not bad, "\n".join(bad)

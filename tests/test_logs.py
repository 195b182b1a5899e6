"""Logging: JSON lines with table, round and seat from the context; the standard library's records too."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from controller.app import logs


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
    structlog.get_logger("round").info("wager-accepted", seat=3, cents=100)
    logs.unbind("round")
    structlog.get_logger("round").warning("idle")
    first, second = lines(out)
    assert first["event"] == "wager-accepted" and first["table"] == "t1" and first["round"] == "t1-r7"
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


def test_level_filters(out):
    logs.configure("json", "warning", out)
    structlog.get_logger().info("quiet")
    structlog.get_logger().error("loud")
    assert [x["event"] for x in lines(out)] == ["loud"]


def test_unknown_level_is_refused():
    with pytest.raises(ValueError, match="unknown level 'chatty'"):
        logs.configure("json", "chatty", io.StringIO())

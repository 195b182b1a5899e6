"""Logging set-up: structlog, JSON lines on stdout for journald, readable lines on a terminal.

The table and its current round are process-wide facts: `set_table_context` puts them on every line, from
every task and thread. Per-task facts (a seat, a request) travel in context variables
(``structlog.contextvars``, `bind`). The standard library's logging (used by the ledger and by pymodbus)
goes through the same renderer.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Hashable
from typing import IO, Literal

import structlog
from structlog.typing import EventDict, Processor

Format = Literal["auto", "json", "console"]

_table_context: dict[str, object] = {}


def set_table_context(**context: object) -> None:
    """Table and round for every following line, whichever task or thread logs it."""
    _table_context.update(context)


def _add_table_context(_logger: object, _name: str, event: EventDict) -> EventDict:
    for k, v in _table_context.items():
        event.setdefault(k, v)
    return event


def configure(fmt: Format = "auto", level: str = "info", stream: IO[str] | None = None) -> None:
    stream = stream if stream is not None else sys.stdout
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    lvl = logging.getLevelNamesMapping().get(level.upper())
    if lvl is None:
        raise ValueError(f"logging level: unknown level {level!r}")
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_table_context,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = (structlog.processors.JSONRenderer(sort_keys=True) if fmt == "json"
                else structlog.dev.ConsoleRenderer(colors=stream.isatty()))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder(),
                           _pymodbus_first_line],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    logging.getLogger("pymodbus").setLevel(max(lvl, logging.WARNING))  # its INFO is per request


def _pymodbus_first_line(_logger: object, _name: str, event: EventDict) -> EventDict:
    """pymodbus appends its last frames to an error (a dozen lines: a stale reply, a wrong unit): the line keeps
    its first, which names what happened; the bus reports the frame that went wrong as a device fault. (In the
    formatter: the record itself, which other handlers may see, stays as it is.)"""
    record = event.get("_record")
    text = event.get("event")
    if isinstance(record, logging.LogRecord) and record.name.startswith("pymodbus") and isinstance(text, str):
        event["event"] = text.split("\n", 1)[0].rstrip()
    return event


def bind(**context: object) -> None:
    """Put table/round/seat (or anything) into the context of every following line of this task."""
    structlog.contextvars.bind_contextvars(**context)


def unbind(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)


class LogBudget:
    """At most `burst` log lines per key (a user, a table and kind of message) in `window` seconds; what is not
    logged is counted, and the count goes with the next line logged: nobody on the other end of a socket or a topic
    can flood the log (the metrics count every one). At most `max_keys` keys are kept: beyond them, new keys share
    one budget (OTHERS) until the keys whose window has passed are forgotten."""

    OTHERS = "(others)"  # the one key for every key beyond max_keys

    def __init__(self, burst: int, window: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 4096) -> None:
        self.burst, self.window, self._clock, self.max_keys = burst, window, clock, max_keys
        self._spent: dict[Hashable, tuple[float, int, int]] = {}  # key -> (window start, logged, not logged)
        self._next_prune = 0.0

    def _prune(self, now: float) -> None:
        """Forget the keys whose window has passed with nothing left untold (at most once a window: amortized)."""
        self._spent = {k: v for k, v in self._spent.items() if now - v[0] < self.window or v[2]}
        self._next_prune = now + self.window

    def take(self, key: Hashable) -> int | None:
        """None: do not log this one; else how many before it were not logged (and are now told)."""
        now = self._clock()
        if key not in self._spent and len(self._spent) >= self.max_keys:
            if now >= self._next_prune:
                self._prune(now)
            if len(self._spent) >= self.max_keys:
                key = self.OTHERS  # a flood of new keys shares one budget instead of growing the dict
        start, logged, skipped = self._spent.get(key, (now, 0, 0))
        if now - start >= self.window:
            start, logged = now, 0
        if logged >= self.burst:
            self._spent[key] = (start, logged, skipped + 1)
            return None
        self._spent[key] = (start, logged + 1, 0)
        return skipped

    def owed(self, key: Hashable) -> int:
        """Lines not logged yet and not told (cleared)."""
        start, logged, skipped = self._spent.get(key, (0.0, 0, 0))
        if skipped:
            self._spent[key] = (start, logged, 0)
        return skipped


class KeyedBudget(LogBudget):
    """A LogBudget per key (a client's address) and at most `overall` lines in the same window across all keys: a
    flood from many keys does not flood the log either."""

    def __init__(self, burst: int, window: float, *, overall: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(burst, window, clock)
        self.overall = LogBudget(overall, window, clock)

    def take(self, key: Hashable) -> int | None:
        held = super().take(key)
        return held if held is not None and self.overall.take(None) is not None else None


__all__ = ["Format", "KeyedBudget", "LogBudget", "bind", "configure", "set_table_context", "unbind"]

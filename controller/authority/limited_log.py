"""What the tables send that is dropped, refused or alarming, told in the log at most once per LOG_EVERY_S for each
kind and table: a table's credentials must not be a way to fill the log. The metrics count every one."""

from __future__ import annotations

from typing import Any

import structlog
from prometheus_client import Counter
from structlog.typing import FilteringBoundLogger

from controller.service.logs import LogBudget

log = structlog.get_logger("controller.authority")

LOG_EVERY_S = 10.0  # a kind of refusal or drop of one table is logged at most this often (all are counted)
LOG_TEXT = 200  # characters of a table's own text (an error message quoting it) in a log line


class LimitedLog:
    """The authority's log lines about the tables, each key (a kind and a table) at most once per LOG_EVERY_S, with
    how many were not logged since; a table's own text cut to LOG_TEXT characters. A drop is counted by its reason
    in `dropped` (progressive_link_messages_dropped_total) before it is told."""

    def __init__(self, dropped: Counter, *, budget: LogBudget | None = None,
                 logger: FilteringBoundLogger | None = None) -> None:
        self.dropped = dropped
        self.budget = budget if budget is not None else LogBudget(1, LOG_EVERY_S)
        self.log: FilteringBoundLogger = logger if logger is not None else log

    def say(self, key: str, event: str, *, level: str = "error", **detail: Any) -> None:
        """`event` logged at `level` unless `key` was told within LOG_EVERY_S."""
        held = self.budget.take(key)
        if held is None:
            return
        cut = {k: (v[:LOG_TEXT] + "...") if isinstance(v, str) and len(v) > LOG_TEXT else v for k, v in detail.items()}
        getattr(self.log, level)(event, **cut, **({"not_logged_before": held} if held else {}))

    def drop(self, reason: str, **detail: Any) -> None:
        """A table's message dropped: counted by its reason, told once per reason and table (or topic)."""
        self.dropped.labels(reason).inc()
        self.say(f"drop:{reason}:{detail.get('table', detail.get('topic'))}", "link message dropped",
                 level="warning", reason=reason, **detail)

    def exception(self, key: str, event: str, **detail: Any) -> None:
        """The exception being handled, with its traceback, once per `key` within LOG_EVERY_S."""
        held = self.budget.take(key)
        if held is not None:
            self.log.exception(event, **detail, **({"not_logged_before": held} if held else {}))


__all__ = ["LOG_EVERY_S", "LOG_TEXT", "LimitedLog"]

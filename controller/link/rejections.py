"""The messages a table's link hears and does not act on: counted by reason, logged within a budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from controller.service.logs import LogBudget

log = structlog.get_logger("controller.link.rejections")

REJECT_LOG_EVERY_S = 10.0  # one line per kind of message not acted on in this time (every one is counted)


class Rejections:
    """Every message not acted on, counted by its reason (for `status` and the metrics) and logged once per reason
    and REJECT_LOG_EVERY_S: whoever publishes on the table's topics must not be able to fill its log."""

    def __init__(self, table: str, on_rejected: Callable[[str], None] = lambda reason: None) -> None:
        self.table = table
        self.on_rejected = on_rejected
        self.counts: dict[str, int] = {}  # reason -> messages not acted on
        self._budget = LogBudget(1, REJECT_LOG_EVERY_S)

    def reject(self, reason: str, event: str, **detail: Any) -> None:
        """Count a message not acted on under `reason`, tell `on_rejected`, and log `event` with `detail` unless
        this reason was logged within REJECT_LOG_EVERY_S (the next line says how many were not)."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.on_rejected(reason)
        held = self._budget.take(reason)
        if held is not None:
            log.error(event, reason=reason, table=self.table, **detail,
                      **({"not_logged_before": held} if held else {}))


__all__ = ["REJECT_LOG_EVERY_S", "Rejections"]

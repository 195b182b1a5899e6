"""Hits far beyond the odds, per table: what a table's credentials could claim that the cards do not deal."""

from __future__ import annotations

from structlog.typing import FilteringBoundLogger

from controller.authority.metrics import AuthorityMetrics
from controller.linkproto import schema

HIT_WINDOW = 10_000  # wagers
HIT_LIMIT = 3  # percentage-of-meter hits of one table within its last HIT_WINDOW wagers before an alert


class HitRate:
    """A percentage of the meter (a royal flush, a straight flush) comes about 0.15 times in 10,000 wagers at the
    games of a Five Card Hand Bonus or a Progressive Payout Wager; more than HIT_LIMIT locks within a table's last
    HIT_WINDOW wagers (a chance of about 1 in 50,000) is an alert. Counted from the applied operations since the
    authority's start."""

    def __init__(self) -> None:
        self._wagers: dict[str, int] = {}
        self._locks: dict[str, list[int]] = {}

    def saw(self, op: schema.Op, metrics: AuthorityMetrics, logger: FilteringBoundLogger) -> None:
        """One applied operation: a booking's wagers counted, a lock counted against them."""
        if op.kind == "book-contributions":
            wagers = op.body.get("wagers")
            self._wagers[op.table] = self._wagers.get(op.table, 0) + (len(wagers) if isinstance(wagers, list) else 0)
        elif op.kind == "lock-percent-award":
            now = self._wagers.get(op.table, 0)
            locks = [w for w in self._locks.get(op.table, []) if now - w < HIT_WINDOW] + [now]
            self._locks[op.table] = locks
            metrics.hits.labels(op.table).inc()
            if len(locks) > HIT_LIMIT:
                metrics.anomalies.labels(op.table, "hits beyond the odds").inc()
                logger.error("hits far beyond the odds", table=op.table, locks=len(locks), within_wagers=HIT_WINDOW,
                             limit=HIT_LIMIT)


__all__ = ["HIT_LIMIT", "HIT_WINDOW", "HitRate"]

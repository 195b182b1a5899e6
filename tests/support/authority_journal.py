"""A link authority's journal in a test's directory, its linked meter defined as the authority's configuration
defines it, and the tables' operations as the authority receives them: for the tests of the authority's parts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from controller.authority.limited_log import LimitedLog
from controller.authority.metrics import AuthorityMetrics
from controller.ledger import Ledger, software_digest
from controller.ledger.chain import utc_now
from controller.linkproto import schema
from controller.meter import ops
from controller.meter.journal import Meters, configure_meter
from controller.meter.params import MeterParams
from controller.round.journal import JournalReducer

from linkrig import AT, METER, RATE, RESET

TABLES = ("cs-01", "fcp-02")


@contextlib.contextmanager
def journal(directory: Path) -> Iterator[Ledger[Meters]]:
    """The authority's journal, its linked meter defined; closed at the end."""
    led: Ledger[Meters] = Ledger.open(directory, JournalReducer(), software_digest=software_digest())
    try:
        configure_meter(led, MeterParams(METER, RESET, RATE, (100, 500)), "link-1", "configuration test", utc_now())
        yield led
    finally:
        led.close()


def parts() -> tuple[AuthorityMetrics, LimitedLog]:
    """The authority's metrics in a registry of their own, and its log of what tables do wrong."""
    metrics = AuthorityMetrics(CollectorRegistry())
    return metrics, LimitedLog(metrics.dropped)


def sample(metrics: AuthorityMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def op(table: str, seq: int, meter_op: ops.Operation, approval: dict[str, Any] | None = None) -> schema.Op:
    """`meter_op` as table `table` sends it, its number `seq`."""
    body = meter_op.to_dict()
    body.pop("kind")
    return schema.Op(table, seq, meter_op.kind, METER, body, approval)


def booking(table: str, n: int, wagers: tuple[tuple[int, int], ...] = ((1, 100), (2, 500))) -> ops.BookContributions:
    return ops.BookContributions(f"{table}-r{n}", table, wagers, AT)


def lock(table: str, n: int, seat: int = 1, shares: int = 1) -> ops.LockPercentAward:
    """A royal flush at `seat` in round `n`, 100% of the meter locked."""
    return ops.LockPercentAward(f"{table}-r{n}", table, seat, "royal-flush", "100% of meter", Fraction(100), AT,
                                f"{table}-r{n}-c1:0", shares=shares)


async def apply(led: Ledger[Meters], sent: schema.Op) -> Any:
    """`sent` journaled as the authority journals an operation it applies; its result."""
    return (await led.submit_async(sent.kind, {"meter": sent.meter, **sent.body}, sent.key)).result

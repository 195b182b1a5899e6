"""The rounds of a gaming day that the report's tests build their journals from (tests/test_report.py,
tests/test_report_cli.py)."""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction

from controller.meter import ops as meter_ops


def rounds(table: str, at: datetime) -> list[meter_ops.Op]:
    """Round r0 (booked the day before) closed; r1: $7 on three seats, a fixed award the table pays and 100% of the
    meter, both approved by "floor 1207"; r2: $10 on two seats, voided (a misdeal)."""
    return [
        meter_ops.CloseRound("r0", at),
        meter_ops.BookContributions("r1", table, ((7, 500), (4, 100), (1, 100)), at),
        meter_ops.PayFixedAward("r1", table, 4, "four-of-a-kind", "300 for 1", 30_000, "table", at, "floor 1207"),
        meter_ops.PayPercentAward("r1", table, 7, "royal-flush", "100% of meter", Fraction(100), at, "floor 1207"),
        meter_ops.CloseRound("r1", at),
        meter_ops.BookContributions("r2", table, ((2, 500), (3, 500)), at),
        meter_ops.VoidRound("r2", at, "misdeal"),
    ]

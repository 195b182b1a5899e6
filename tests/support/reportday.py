"""The rounds of a gaming day that the report's tests build their journals from (tests/core/test_report.py,
tests/shell/test_report_cli.py), and a journal of records as the ledger would give them (tests/core/test_report.py,
tests/core/test_faults.py)."""

from __future__ import annotations

import json
from datetime import datetime
from fractions import Fraction
from typing import Any

from controller.errors import InputError
from controller.ledger.reader import Record as Rec
from controller.meter import ops as meter_ops
from controller.meter.journal import op_body
from controller.round.journal import JournalReducer


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


class Journal:
    """Entries as the ledger journals them: each applied through the meters' reducer, its result recorded; a
    refused operation is not journaled."""

    def __init__(self) -> None:
        self.reducer = JournalReducer()
        self.state = self.reducer.initial()
        self.records: list[Rec] = []

    def add(self, kind: str, body: dict[str, Any], at: datetime) -> bool:
        body = json.loads(json.dumps(body))  # as decoded from the journal
        try:
            self.state, result = self.reducer.apply(self.state, kind, body)
        except InputError:
            return False
        seq = len(self.records) + 1
        self.records.append(Rec(seq, at, f"k{seq}", kind, body, json.loads(json.dumps(result)), f"{seq:064x}"))
        return True

    def op(self, op: meter_ops.Op, at: datetime, meter: str = "main") -> bool:
        return self.add(op.kind, op_body(meter, op), at)

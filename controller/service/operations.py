"""The control socket's operations, declared once: the arguments each takes, and whether it needs a
supervisor's credential (docs/operations.md). Both daemons check a request against this table before they act,
so that an argument they would not read (a misspelt `Reason`, a `secret` where none is taken) is refused,
never silently ignored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.errors import InputError


@dataclass(frozen=True)
class Operation:
    takes: tuple[str, ...] = ()  # the arguments the operation reads (its own checks say which are required)
    supervisor: str = "no"  # "no", "required", or "optional" (a supervisor may ask for more: a recount, ...)

    @property
    def arguments(self) -> frozenset[str]:
        return frozenset(self.takes) | (frozenset({"supervisor", "secret"}) if self.supervisor != "no" else frozenset())


OPERATIONS: Mapping[str, Operation] = {
    "status": Operation(),
    "round": Operation(),
    "meters": Operation(),
    "history": Operation(("kinds",)),  # kinds: true adds what each payout is (the console's), beside the journal's form
    "meter_series": Operation(("span", "meter")),  # read from the journal, kept a minute a span (service/reports.py)
    "settle": Operation(("round_id",), supervisor="optional"),
    "void": Operation(("reason", "round_id"), supervisor="required"),  # round_id: the round the void is for
    "deck_replaced": Operation(supervisor="required"),
    "stub_count": Operation(("stub", "dealt"), supervisor="optional"),
    "close_table": Operation(supervisor="required"),
    "open_table": Operation(supervisor="required"),
    "claim": Operation(("seat", "cards", "spot")),
    "approve": Operation(("claim_id",), supervisor="required"),
    "reject": Operation(("claim_id", "reason"), supervisor="required"),
    # only checks the credential (the pit console's login), through the same throttled check as approve
    "authenticate": Operation(supervisor="required"),
}
# The link authority's socket: reads, checks a secret for its console's login, and clears a planted anchor with one.
# Nothing on it moves a meter (docs/security.md).
AUTHORITY_OPERATIONS: Mapping[str, Operation] = {
    **{op: OPERATIONS[op] for op in ("status", "meters", "meter_series", "authenticate")},
    # The one change it takes: a supervisor clears the anchor of a table kept aside as planted (journaled, with their
    # name). It moves no meter.
    "clear_anchor": Operation(("table", "seq"), supervisor="required"),
}


def check_arguments(op: str, args: Mapping[str, Any], operations: Mapping[str, Operation] = OPERATIONS) -> None:
    """InputError naming the first argument `op` does not take (LookupError for an unknown `op`)."""
    spec = operations.get(op)
    if spec is None:
        raise LookupError(op)
    for name in args:
        if name not in spec.arguments:
            takes = ", ".join(sorted(spec.arguments)) or "no arguments"
            raise InputError(name, f"{op} does not take {name!r} (it takes {takes})")


__all__ = ["AUTHORITY_OPERATIONS", "OPERATIONS", "Operation", "check_arguments"]

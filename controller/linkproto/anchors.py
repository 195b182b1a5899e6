"""How the link authority judges the anchors a table reports (pure: docs/link-protocol.md, "Anchors").

Each report is judged against the table's *reference*: the last report it accepted, in the order they came.

- `accepted`: the first report of the table, or one ahead of the reference by no more than the table's journal
  could have grown since the reference came (MAX_ENTRIES_PER_S since then, and SLACK entries). It becomes the
  reference.
- `repeat`: the reference itself again (the table sends its anchor again at each connection): nothing new.
- `behind`: below the reference, or at its entry with another hash: the table's journal went back (a rollback or
  a rewrite), or someone with the table's credentials sent an older or made-up anchor. An alert; it becomes the
  reference, because that is where the table's journal now is: the next report is judged from it, so a rollback
  after a planted anchor is an alert of its own, and a planted anchor costs one alert, never a stream of them.
- `suspect`: further ahead than the table's journal could have grown (an anchor planted far ahead with the table's
  MQTT credentials, to mask the rollbacks after it). An alert; kept aside until a supervisor clears it, and never
  the reference: the table's true reports go on being judged against the last accepted one.

The bound is the table's ledger's own ceiling, not its usual pace: the ledger commits about 14,000 entries a
second at most through its own code (docs/benchmarks.md, "Ledger"), a table journals a few entries a round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from controller.linkproto.schema import JournalAnchor

MAX_ENTRIES_PER_S = 20_000  # more than a table's ledger can commit in a second (measured: 13,945)
SLACK = 20_000  # entries allowed on top: clocks a second apart, a reference taken just before a burst

Verdict = Literal["accepted", "repeat", "behind", "suspect"]
VERDICTS: tuple[Verdict, ...] = ("accepted", "repeat", "behind", "suspect")


@dataclass(frozen=True)
class Report:
    """A report as the authority keeps it: the anchor and when it came (the authority's clock, seconds)."""

    anchor: JournalAnchor
    received: float


@dataclass(frozen=True)
class TableAnchors:
    """What the authority holds of one table's anchors."""

    reference: Report | None = None  # the last report accepted: what the next is judged against, sent back in expect
    suspect: Report | None = None  # the last planted one kept aside, until a supervisor clears it
    suspects: int = 0  # reports judged suspect since the last clearing


def furthest(reference: Report, now: float) -> int:
    """The highest entry the table's journal could have reached at `now`, its head at `reference` when it came."""
    return reference.anchor.seq + SLACK + MAX_ENTRIES_PER_S * max(0, int(now - reference.received) + 1)


def judge(held: TableAnchors, anchor: JournalAnchor, now: float) -> Verdict:
    """The verdict on `anchor`, reported at `now`."""
    ref = held.reference
    if ref is None:
        return "accepted"
    if anchor.seq == ref.anchor.seq and anchor.hash == ref.anchor.hash:
        return "repeat"
    if anchor.seq <= ref.anchor.seq:
        return "behind"
    return "suspect" if anchor.seq > furthest(ref, now) else "accepted"


def after(held: TableAnchors, verdict: Verdict, report: Report) -> TableAnchors:
    """What is held once `report` was judged `verdict`."""
    if verdict == "suspect":
        return replace(held, suspect=report, suspects=held.suspects + 1)
    if verdict == "repeat":
        return held
    return replace(held, reference=report)


def cleared(held: TableAnchors) -> TableAnchors:
    """A supervisor cleared the anchors kept aside."""
    return replace(held, suspect=None, suspects=0)


__all__ = ["MAX_ENTRIES_PER_S", "SLACK", "VERDICTS", "Report", "TableAnchors", "Verdict", "after", "cleared",
           "furthest", "judge"]

"""The tables' journal anchors the authority keeps off their boxes (docs/security.md): every report journaled with
its verdict (controller.linkproto.anchors), the reference sent back at each connection, a planted one kept aside
until a supervisor clears it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.authority.limited_log import LimitedLog, log
from controller.authority.metrics import AuthorityMetrics
from controller.errors import InputError
from controller.ledger import Ledger
from controller.ledger.chain import format_time, utc_now
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import Found
from controller.linkproto import anchors, schema
from controller.meter.journal import TABLE_ANCHOR, TABLE_ANCHOR_CLEARED, Meters

ANCHOR_EVERY_S = 1.0  # a table's anchors journaled at most this often (a table anchors every minute, and at events)
ANCHOR_PREFIX = "anchor:"  # the authority journals table T's anchor of entry N under "anchor:T:N"


class AnchorKeeper:
    """Each table's anchors as judged and journaled: `held` (its reference and what is kept aside) and `reference`
    (the anchor sent back in `expect`), with the alerts of an anchor gone back or planted far ahead. `clock` is the
    wall's (when a report came), `tick` a monotonic one (the reports' rate)."""

    def __init__(self, ledger: Ledger[Meters], tables: tuple[str, ...], metrics: AuthorityMetrics, notes: LimitedLog,
                 *, clock: Callable[[], float] = time.time, tick: Callable[[], float] = time.monotonic) -> None:
        self.ledger, self.tables, self.metrics, self.notes = ledger, tables, metrics, notes
        self.clock, self.tick = clock, tick
        self.held: dict[str, anchors.TableAnchors] = {}  # table -> its reference and the anchor kept aside
        self.reference: dict[str, schema.JournalAnchor] = {}  # table -> the reference anchor of its journal
        self._anchored_at: dict[str, float] = {}  # table and budget -> when its last report was journaled (tick())

    def replay(self, entries: list[tuple[str, Found]]) -> None:
        """What the journal's reports and clearings left (at start, in a thread)."""
        now = self.clock()
        for _key, found in entries:
            t = found.body.get("table") if isinstance(found.body, dict) else None
            if isinstance(t, str):
                self.held[t] = replayed(self.held.get(t, anchors.TableAnchors()), found, now)
        for t in self.held:
            self._changed(t)
        for t in self.tables:
            self.metrics.anchor_suspect.labels(t).set(1 if t in self.held and self.held[t].suspect else 0)

    async def keep(self, a: schema.JournalAnchor) -> None:
        """A table's journal head, journaled with its verdict. Behind the reference is an alert (`anchor went back`)
        and the new reference; further ahead than the table's journal could have grown is an alert (`anchor far
        ahead`), kept aside and never the reference."""
        now = self.clock()
        held = self.held.get(a.table, anchors.TableAnchors())
        verdict = anchors.judge(held, a, now)
        if verdict == "repeat":
            return  # sent again at a connection: journaled when it came first
        # One report a second per table and budget: a flood of planted anchors spends the alerts' budget, not the
        # one true reports are accepted under.
        budget = f"{a.table}:{'accepted' if verdict == 'accepted' else 'alert'}"
        tick = self.tick()
        if tick - self._anchored_at.get(budget, -ANCHOR_EVERY_S) < ANCHOR_EVERY_S:
            self.notes.drop("anchor_too_often", table=a.table)
            return
        self._anchored_at[budget] = tick
        body = {"table": a.table, "seq": a.seq, "hash": a.hash, "at": a.at, **({"mac": a.mac} if a.mac else {}),
                "verdict": verdict, "received": format_time(datetime.fromtimestamp(now, UTC))}
        try:
            await self.ledger.submit_async(TABLE_ANCHOR, body, f"{ANCHOR_PREFIX}{a.table}:{a.seq}:{time.time_ns()}")
        except KeyConflict:
            return  # two reports within the clock's tick: cannot happen with one worker a table
        ref = held.reference.anchor.seq if held.reference is not None else None
        self.held[a.table] = anchors.after(self.held.get(a.table, anchors.TableAnchors()), verdict,
                                           anchors.Report(a, now))
        self._changed(a.table)
        if verdict == "behind":
            self.metrics.anomalies.labels(a.table, "anchor went back").inc()
            self.notes.say("anchor-back:" + a.table, "a table's anchor went back: its journal rolled back or was "
                           "rewritten, or an anchor was sent with its credentials (judged from it now)",
                           table=a.table, seq=a.seq, hash=a.hash, reference=ref)
        elif verdict == "suspect":
            self.metrics.anomalies.labels(a.table, "anchor far ahead").inc()
            assert held.reference is not None
            self.notes.say("anchor-ahead:" + a.table, "a table's anchor is further ahead than its journal could "
                           "have grown: kept aside as planted, not taken as the reference (a supervisor clears it: "
                           "progressivectl clear-anchor)", table=a.table, seq=a.seq, reference=ref,
                           furthest=anchors.furthest(held.reference, now))

    async def clear(self, table: str, seq: int, who: str) -> dict[str, Any]:
        """A supervisor (`who`) clears the anchor kept aside for `table` at entry `seq`, journaled with their name;
        InputError if none is kept aside there."""
        held = self.held.get(table, anchors.TableAnchors())
        if held.suspect is None:
            raise InputError("table", f"no anchor of table {table} is kept aside: nothing to clear")
        if held.suspect.anchor.seq != seq:
            raise InputError("seq", f"the anchor kept aside for table {table} is at entry {held.suspect.anchor.seq}, "
                             f"not {seq}")
        body = {"table": table, "seq": seq, "hash": held.suspect.anchor.hash, "suspects": held.suspects,
                "cleared_by": who, "at": format_time(utc_now())}
        receipt = await self.ledger.submit_async(TABLE_ANCHOR_CLEARED, body,
                                                 f"{ANCHOR_PREFIX}{table}:cleared:{time.time_ns()}")
        self.held[table] = anchors.cleared(self.held.get(table, held))
        self._changed(table)
        log.warning("a table's anchor kept aside cleared", table=table, seq=seq, suspects=held.suspects,
                    cleared_by=who, entry=receipt.seq)
        return {"table": table, "cleared": seq, "suspects": held.suspects, "cleared_by": who, "entry": receipt.seq}

    def _changed(self, table: str) -> None:
        held = self.held[table]
        if held.reference is not None:
            self.reference[table] = held.reference.anchor
        self.metrics.anchor_suspect.labels(table).set(0 if held.suspect is None else 1)


def journaled_anchor(body: dict[str, Any]) -> schema.JournalAnchor:
    """The anchor a journaled report names."""
    return schema.JournalAnchor(body["table"], body["seq"], body["hash"], body["at"], body.get("mac"))


def replayed(held: anchors.TableAnchors, found: Found, now: float) -> anchors.TableAnchors:
    """`held` after one journaled report or clearing. A report journaled before verdicts (the highest was kept)
    is taken as the reference when higher, as then, received at this start."""
    if found.kind == TABLE_ANCHOR_CLEARED:
        return anchors.cleared(held)
    if found.kind != TABLE_ANCHOR:
        return held
    a = journaled_anchor(found.body)
    verdict, received = found.body.get("verdict"), found.body.get("received")
    if verdict not in anchors.VERDICTS:
        if held.reference is None or a.seq > held.reference.anchor.seq:
            return anchors.after(held, "accepted", anchors.Report(a, now))
        return held
    try:
        when = datetime.fromisoformat(received).timestamp() if isinstance(received, str) else now
    except ValueError:
        when = now
    return anchors.after(held, verdict, anchors.Report(a, when))


__all__ = ["ANCHOR_EVERY_S", "ANCHOR_PREFIX", "AnchorKeeper", "journaled_anchor", "replayed"]

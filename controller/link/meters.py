"""The linked meters as the authority sends them to a table: their amounts for the signs, and the wins to show."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controller.link.rejections import Rejections
from controller.linkproto import schema
from controller.meter.award import RESET_FLOOR_CENTS


class LinkedMeterValues:
    """The newest value of each linked meter (by the authority's meter id) and the newest win taken of each. A
    value under its reset amount or the $10,000 floor, one older than the value shown and a win heard before are
    rejected: the broker keeps retained messages and may play old ones back. News is the authority heard (`heard`);
    `on_meter` is told the table's meter id of each new value, `on_win` each new win."""

    def __init__(self, linked: Mapping[str, str], rejections: Rejections, *, heard: Callable[[], None],
                 on_meter: Callable[[str], None] = lambda meter: None,
                 on_win: Callable[[schema.Win], None] = lambda win: None) -> None:
        self.linked = linked  # table meter id -> the authority's meter id
        self.rejections, self.heard, self.on_meter, self.on_win = rejections, heard, on_meter, on_win
        self.values: dict[str, schema.MeterValue] = {}  # by the authority's meter id
        self._wins_seen: dict[str, int] = {}  # authority meter -> the entry of the newest win taken

    def value(self, msg: schema.MeterValue) -> None:
        """A linked meter's amount for the signs: never one under its reset, nor under the $10,000 floor, and
        never one older than shown (a value played back): newer in the journal, or sent later by an authority whose
        journal starts again (a restore)."""
        if msg.cents < max(msg.reset_cents, RESET_FLOOR_CENTS):
            self.rejections.reject("under_reset", "a linked meter's value under its reset amount: not shown",
                                   meter=msg.meter, amount=msg.cents, reset=msg.reset_cents)
            return
        last = self.values.get(msg.meter)
        if last is not None and (msg.entry, msg.at) == (last.entry, last.at):
            return  # the value shown, again (the broker's retained copy at a new connection): not news of the authority
        if last is not None and msg.entry <= last.entry and msg.at <= last.at:
            self.rejections.reject("played_back", "a linked meter's value older than the one shown: not shown",
                                   meter=msg.meter, entry=msg.entry, shown=last.entry)
            return
        if last is not None and msg.entry < last.entry:
            self._wins_seen.pop(msg.meter, None)  # the authority's journal started again: so do its entries
        self.heard()
        self.values[msg.meter] = msg
        for local, linked in self.linked.items():
            if linked == msg.meter:
                self.on_meter(local)

    def win(self, msg: schema.Win) -> None:
        """A win on a linked meter, shown once: one of an entry no newer than the last taken is played back."""
        if msg.entry <= self._wins_seen.get(msg.meter, 0):
            self.rejections.reject("played_back", "a win heard before: not shown again", meter=msg.meter,
                                   entry=msg.entry)
            return
        self._wins_seen[msg.meter] = msg.entry
        self.heard()
        self.on_win(msg)


__all__ = ["LinkedMeterValues"]

"""A linked meter's value for the signs is never under its reset, never older than shown; a win is shown once."""

from __future__ import annotations

from controller.link.meters import LinkedMeterValues
from controller.link.rejections import Rejections
from controller.linkproto import schema

RESET = 1_000_000


class Table:
    def __init__(self) -> None:
        self.heard = 0
        self.meters: list[str] = []
        self.wins: list[schema.Win] = []

        def heard() -> None:
            self.heard += 1

        self.values = LinkedMeterValues({"fchb": "fchb-link", "main": "main-link", "also": "fchb-link"},
                                        Rejections("cs-01"), heard=heard, on_meter=self.meters.append,
                                        on_win=self.wins.append)


def value(cents: int, entry: int, at: str, reset: int = RESET) -> schema.MeterValue:
    return schema.MeterValue("fchb-link", cents, entry, at, reset)


def test_a_newer_value_is_shown_on_every_table_meter_linked_to_it():
    t = Table()
    t.values.value(value(RESET + 15, 40, "2026-12-05T08:00:00Z"))
    t.values.value(value(RESET + 30, 41, "2026-12-05T08:00:01Z"))
    assert t.values.values["fchb-link"].cents == RESET + 30 and t.heard == 2
    assert t.meters == ["fchb", "also"] * 2


def test_values_under_the_reset_or_older_than_shown_are_not_shown():
    t = Table()
    t.values.value(value(RESET + 15, 40, "2026-12-05T08:00:01Z"))
    t.values.value(value(RESET + 15, 40, "2026-12-05T08:00:01Z"))  # the retained copy again: not news
    assert t.heard == 1 and t.values.rejections.counts == {}
    t.values.value(value(RESET + 5, 39, "2026-12-05T08:00:00Z"))  # played back
    t.values.value(value(RESET - 1, 50, "2026-12-05T08:00:02Z"))  # under its reset
    t.values.value(value(999_999, 50, "2026-12-05T08:00:02Z", reset=900_000))  # under the $10,000 floor
    assert t.values.values["fchb-link"].entry == 40 and t.heard == 1
    assert t.values.rejections.counts == {"played_back": 1, "under_reset": 2}


def test_a_win_is_shown_once_and_again_after_the_authoritys_journal_starts_again():
    t = Table()
    win = schema.Win("fchb-link", "cs-02", 3, 250_000, "c-1", "paid", 42)
    t.values.win(win)
    t.values.win(win)
    assert t.wins == [win] and t.values.rejections.counts == {"played_back": 1}
    t.values.value(value(RESET + 15, 50, "2026-12-05T08:00:00Z"))
    t.values.value(value(RESET, 3, "2026-12-05T09:00:00Z"))  # a restored authority: entries start again, time goes on
    assert t.values.values["fchb-link"].entry == 3
    restored = schema.Win("fchb-link", "cs-02", 3, 250_000, "c-9", "locked", 2)
    t.values.win(restored)
    assert t.wins == [win, restored]

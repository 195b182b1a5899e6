"""Exact odds by enumeration: counts of hands, return at a meter, break-even meter (docs/odds.md)."""

from controller.odds.badbeat import BadBeatCounts, bad_beat_counts
from controller.odds.counts import HandCounts, clear_caches, hand_counts
from controller.odds.render import render_text, to_json
from controller.odds.report import (
    LOSING,
    Bonus,
    OddsReport,
    Outcome,
    break_even_meter,
    odds_report,
    percent_of_meter_chance,
)

__all__ = [
    "LOSING",
    "BadBeatCounts",
    "Bonus",
    "HandCounts",
    "OddsReport",
    "Outcome",
    "bad_beat_counts",
    "break_even_meter",
    "clear_caches",
    "hand_counts",
    "odds_report",
    "percent_of_meter_chance",
    "render_text",
    "to_json",
]

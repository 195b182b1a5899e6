"""Exact odds by enumeration: counts of hands, return at a meter, break-even meter (docs/odds.md)."""

from .counts import HandCounts, hand_counts
from .render import render_text, to_json
from .report import LOSING, Bonus, OddsReport, Outcome, break_even_meter, odds_report

__all__ = [
    "LOSING",
    "Bonus",
    "HandCounts",
    "OddsReport",
    "Outcome",
    "break_even_meter",
    "hand_counts",
    "odds_report",
    "render_text",
    "to_json",
]

"""The gaming day's report of a journal of meters (docs/meters.md, "The gaming day's report").

The pure core: `day.py` (the gaming day's bounds), `build.py` (the figures, the reconciliation, `meter_series` for
plots), `render.py` (text, JSON, CSV, HTML). The shell: `files.py` reads the journal (through
controller.ledger.reader) and writes the report's files."""

from .build import DayReport, Holdings, MeterDay, build_report, day_report, meter_series, reconcile, replay
from .day import GamingDay, day_of, gaming_day, last_ended, parse_day, parse_day_starts

__all__ = [
    "DayReport", "GamingDay", "Holdings", "MeterDay", "build_report", "day_of", "day_report", "gaming_day",
    "last_ended", "meter_series", "parse_day", "parse_day_starts", "reconcile", "replay",
]

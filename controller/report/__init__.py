"""The gaming day's report of a journal of meters (docs/meters.md, "The gaming day's report").

The pure core: `day.py` (the gaming day's bounds), `build.py` (the figures, the reconciliation, `meter_series`,
`span_series` and `downsample` for plots), `render.py` (text, JSON, CSV, HTML). The shell: `files.py` reads the journal (through
controller.ledger.reader) and writes the report's files."""

from controller.report.build import (
    DayReport,
    Holdings,
    MeterDay,
    build_report,
    day_report,
    downsample,
    meter_series,
    reconcile,
    replay,
    span_series,
)
from controller.report.day import (
    SPANS,
    GamingDay,
    day_of,
    gaming_day,
    last_ended,
    parse_day,
    parse_day_starts,
    parse_span,
    span_edges,
)

__all__ = [
    "SPANS", "DayReport", "GamingDay", "Holdings", "MeterDay", "build_report", "day_of", "day_report", "downsample",
    "gaming_day", "last_ended", "meter_series", "parse_day", "parse_day_starts", "parse_span", "reconcile", "replay",
    "span_edges", "span_series",
]

"""[report]: when the gaming day starts, and where the daemon writes each day's report."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.config import schema
from controller.config.check import Checker
from controller.config.model import ReportConfig
from controller.errors import InputError
from controller.report.day import parse_day_starts


def zone_problem(name: str) -> str | None:
    """Why `name` is not an IANA time zone this box knows, or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not a time zone this system knows (an IANA name such as \"America/New_York\")"
    return None


class ReportChecks(Checker):
    """[report]: `report` (the defaults when left out)."""

    def _report(self, raw: object) -> None:
        m = self.section(raw, "report", '[report] day_starts = "06:00"', schema.ReportModel)
        if m is None:
            return
        ok = True
        try:
            starts = parse_day_starts(m.day_starts, "report.day_starts")
        except InputError as e:
            ok = False
            self.add("report.day_starts", e.problem, 'day_starts = "06:00" (24-hour local time, in time_zone)')
        if (problem := zone_problem(m.time_zone)) is not None:
            ok = False
            self.add("report.time_zone", problem, 'time_zone = "America/New_York"')
        directory = None
        if m.dir is not None:
            directory = self.usable_path(m.dir, "report.dir")
            ok = ok and directory is not None
        if ok:
            self.report = ReportConfig(starts, m.time_zone, directory)


__all__ = ["ReportChecks", "zone_problem"]

"""The gaming day: from a configured local time on one date to the same local time on the next (a day of 23 or 25
hours where daylight saving time begins or ends), in the casino's time zone. Pure: the zone is an argument."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from controller.errors import InputError

DEFAULT_DAY_STARTS = time(6, 0)
DEFAULT_TIME_ZONE = "America/New_York"  # the regulations are Pennsylvania's
_HH_MM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class GamingDay:
    """One gaming day: its date (the date it starts on, in the casino's zone) and its bounds in UTC."""

    day: date
    start: datetime  # UTC, inclusive
    end: datetime  # UTC, exclusive
    starts_at: time  # the configured local start
    zone: str  # the zone's name, as configured
    tz: tzinfo | None = field(default=None, compare=False)  # the zone itself (None: looked up by its name)

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    @property
    def tzinfo(self) -> tzinfo:
        """The casino's zone: as given, else by its name; UTC when the name is not a zone this machine knows."""
        if self.tz is not None:
            return self.tz
        from zoneinfo import ZoneInfo

        try:
            return ZoneInfo(self.zone)
        except (ValueError, KeyError, OSError):  # named as configured, checked then: a copy read elsewhere
            return UTC

    def local(self, t: datetime) -> datetime:
        return t.astimezone(self.tzinfo)


def local_time(t: datetime, zone: tzinfo, *, date_too: bool = True) -> str:
    """`t` as the casino's clock showed it, to the second, with the zone's abbreviation: "2026-11-30 06:00:00 EST"
    (time only: "06:00:00 EST")."""
    lt = t.astimezone(zone)
    return lt.strftime("%Y-%m-%d %H:%M:%S %Z" if date_too else "%H:%M:%S %Z")


def parse_day_starts(text: object, field: str) -> time:
    """"HH:MM" (24-hour) as a time of day."""
    if not isinstance(text, str) or not _HH_MM.fullmatch(text):
        raise InputError(field, f"must be a time of day HH:MM such as \"06:00\", not {text!r}")
    return time(int(text[:2]), int(text[3:]))


def parse_day(text: object, field: str) -> date:
    """"YYYY-MM-DD" as a date."""
    if not isinstance(text, str) or not _DAY.fullmatch(text):
        raise InputError(field, f"must be a date YYYY-MM-DD such as \"2026-12-01\", not {text!r}")
    try:
        return date.fromisoformat(text)
    except ValueError as e:
        raise InputError(field, f"{text!r} is not a date: {e}") from None


def gaming_day(day: date, starts_at: time, zone: tzinfo, zone_name: str = "") -> GamingDay:
    """The gaming day that starts on `day` at `starts_at` local time in `zone`. A start that does not exist
    that night (skipped by daylight saving time) is taken as the same wall time before the change (PEP 495
    fold=0), so the day is never empty."""
    start = _utc(datetime.combine(day, starts_at, zone))
    end = _utc(datetime.combine(day + timedelta(days=1), starts_at, zone))
    return GamingDay(day, start, end, starts_at, zone_name or str(zone), zone)


def day_of(moment: datetime, starts_at: time, zone: tzinfo, zone_name: str = "") -> GamingDay:
    """The gaming day `moment` (aware) falls in."""
    local = moment.astimezone(zone)
    d = local.date()
    for candidate in (d - timedelta(days=1), d):
        g = gaming_day(candidate, starts_at, zone, zone_name)
        if g.start <= moment < g.end:
            return g
    return gaming_day(d + timedelta(days=1), starts_at, zone, zone_name)  # not reached: a day is 23-25 hours


def last_ended(now: datetime, starts_at: time, zone: tzinfo, zone_name: str = "") -> GamingDay:
    """The latest gaming day that ended at or before `now`."""
    current = day_of(now, starts_at, zone, zone_name)
    return gaming_day(current.day - timedelta(days=1), starts_at, zone, zone_name)


SPANS = {"day": 1, "30d": 30}  # a plot's span -> gaming days: the current one so far, or it and the 29 before


def parse_span(text: object, field: str) -> str:
    """A plot's span: "day" (the current gaming day so far) or "30d" (the last 30 gaming days, this one too)."""
    if text not in SPANS:
        raise InputError(field, f"must be \"day\" (the gaming day so far) or \"30d\" (the last 30 gaming days), "
                                f"not {text!r}")
    return str(text)


def span_edges(span: str, now: datetime, starts_at: time, zone: tzinfo, intervals: int,
               zone_name: str = "") -> list[datetime]:
    """The edges of a plot's intervals over `span` up to `now` (aware), in UTC: the first is the span's start, the
    last `now`. "30d": one interval a gaming day (30; a day of 23 or 25 hours stays one day). "day": the gaming
    day so far cut into `intervals` of equal length (to the microsecond: no float)."""
    current = day_of(now, starts_at, zone, zone_name)
    if span == "30d":
        days = [gaming_day(current.day - timedelta(days=n), starts_at, zone, zone_name)
                for n in range(SPANS[span] - 1, -1, -1)]
        return [d.start for d in days] + [_utc(now)]
    length = _utc(now) - current.start
    return [current.start + length * i // intervals for i in range(intervals + 1)]


def _utc(t: datetime) -> datetime:
    return t.astimezone(UTC)


__all__ = ["DEFAULT_DAY_STARTS", "DEFAULT_TIME_ZONE", "SPANS", "GamingDay", "day_of", "gaming_day", "last_ended",
           "local_time", "parse_day", "parse_day_starts", "parse_span", "span_edges"]

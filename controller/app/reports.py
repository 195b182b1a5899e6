"""The gaming day's report, written by the daemon when a day ends (docs/operations.md, "Gaming day reports").

A task of the daemon's TaskGroup: it sleeps until the current gaming day ends (plus a few seconds, so that the
day's last batch is committed), reads the journal and writes every form of the report in a worker thread, and
logs "gaming day report written" with the path. At start it writes the report of the last ended day if that file
is missing (a daemon stopped over a day's end misses none). It never raises into the TaskGroup: a failure is
logged with its traceback, and the next day is tried again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import structlog

from ..config.model import ReportConfig
from ..ledger.chain import utc_now
from ..report.day import GamingDay, day_of, last_ended
from ..report.files import first_entry_time, read_report, report_paths, write_report

log = structlog.get_logger("table")

SETTLE_S = 5.0  # after the day's end, before reading: a batch stamped before the end is committed by then
NAP_S = 60.0  # the clock is read again at least this often while waiting (a clock set, a suspend)
WRITE_TIMEOUT_S = 600.0  # a replay of a long journal takes a while; a report not written by then is a failure


class DayReports:
    def __init__(self, state_dir: Path, cfg: ReportConfig, *, clock: Callable[[], datetime] = utc_now,
                 settle_s: float | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.directory = cfg.dir_for(self.state_dir)
        self.starts_at, self.zone, self.zone_name = cfg.day_starts, cfg.zone, cfg.time_zone
        self.clock = clock
        self.settle = timedelta(seconds=SETTLE_S if settle_s is None else settle_s)

    async def run(self) -> None:
        await self._write(last_ended(self.clock() - self.settle, self.starts_at, self.zone, self.zone_name),
                          missing_only=True)
        while True:
            day = day_of(self.clock() - self.settle, self.starts_at, self.zone, self.zone_name)
            await self._until(day.end + self.settle)
            await self._write(day)

    async def _until(self, when: datetime) -> None:
        while (left := (when - self.clock()).total_seconds()) > 0:
            await asyncio.sleep(min(left, NAP_S))

    async def _write(self, day: GamingDay, missing_only: bool = False) -> None:
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                path = await asyncio.to_thread(self._write_day, day, missing_only)
        except Exception as e:  # logged with its traceback; the next day is tried again
            log.exception("gaming day report not written", day=day.day.isoformat(), error=f"{type(e).__name__}: {e}")
            return
        if path is not None:
            log.info("gaming day report written", day=day.day.isoformat(), path=str(path))

    def _write_day(self, day: GamingDay, missing_only: bool) -> Path | None:
        if missing_only:
            if all(p.exists() for p in report_paths(self.directory, day).values()):
                return None
            began = first_entry_time(self.state_dir)
            if began is None or began >= day.end:  # the journal did not exist yet that day
                return None
        return write_report(self.directory, read_report(self.state_dir, day))

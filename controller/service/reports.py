"""The gaming day's report, written by the daemon when a day ends (docs/operations.md, "Gaming day reports"); and
the meters' series over a span for plots (the `meter_series` operation), read from the same journal.

A task of the daemon's TaskGroup: it sleeps until the current gaming day ends (plus a few seconds, so that the
day's last batch is committed), reads the journal and writes every form of the report in a worker thread, and
logs "gaming day report written" with the path. At start it writes the report of the last ended day if that file
is missing (a daemon stopped over a day's end misses none). It never raises into the TaskGroup: a failure is
logged with its traceback, and the next day is tried again."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from controller.config.model import ReportConfig
from controller.errors import InputError
from controller.ledger.chain import utc_now
from controller.ledger.store import is_url
from controller.report.build import POINTS_PER_INTERVAL, Source
from controller.report.day import GamingDay, day_of, last_ended, parse_span, span_edges
from controller.report.render import series_json
from controller.service.control import NotAvailable
from controller.service.report_files import Opening, first_entry_time, read_report, read_series, write_report, written

log = structlog.get_logger("table")

SETTLE_S = 5.0  # after the day's end, before reading: a batch stamped before the end is committed by then
NAP_S = 60.0  # the clock is read again at least this often while waiting (a clock set, a suspend)
WRITE_TIMEOUT_S = 600.0  # a replay of a long journal takes a while; a report not written by then is a failure
MAX_POINTS = 400  # a meter_series answer's points a meter, at most: a plot's width in pixels, about
SERIES_EVERY_S = 60.0  # the journal is read for a span at most this often; an answer is kept (and given) till then
SERIES_TIMEOUT_S = 120.0  # a request waits this long for the span's read, then is refused (the read goes on)


class DayReports:
    def __init__(self, state_dir: Path, cfg: ReportConfig, *, clock: Callable[[], datetime] = utc_now,
                 settle_s: float | None = None, source: Source | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.source = source  # whose reports (the table's id, its meters' titles); None: as the journal says
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
            if written(self.directory, day):
                return None
            began = first_entry_time(self.state_dir)
            if began is None or began >= day.end:  # the journal did not exist yet that day
                return None
        return write_report(self.directory, read_report(self.state_dir, day, self.source))


class MeterSeries:
    """The `meter_series` operation: each meter's amounts over a span, read from the journal in a worker thread
    and kept for `every` seconds a span, so that no client (the pit console's pages) makes the daemon read 30 days
    of journal more often than that. One read a span at a time: a request made while the span's read runs waits
    for that read, and one that waits longer than `timeout` is refused while the read goes on and fills the kept
    answer (a client asking again and again cannot pile up reads, each a thread). Used by a table's daemon and
    by the link authority over its own journal."""

    def __init__(self, state_dir: Path | str, cfg: ReportConfig, *, clock: Callable[[], datetime] = utc_now,
                 every: float = SERIES_EVERY_S, max_points: int = MAX_POINTS, timeout: float = SERIES_TIMEOUT_S,
                 reader: Callable[..., tuple[dict[str, Any], Opening | None]] = read_series) -> None:
        self.state_dir = state_dir if is_url(state_dir) else Path(state_dir)  # or the journal's PostgreSQL URL
        self.starts_at, self.zone, self.zone_name = cfg.day_starts, cfg.zone, cfg.time_zone
        self.clock, self.every, self.timeout, self.reader = clock, every, timeout, reader
        self.intervals = max_points // POINTS_PER_INTERVAL
        self.reads = 0  # journal reads made (the tests count them)
        self._kept: dict[str, tuple[float, list[dict[str, Any]]]] = {}
        self._openings: dict[str, Opening | None] = {}  # span -> its opening meters: the next read starts there
        self._reading: dict[str, asyncio.Task[list[dict[str, Any]]]] = {}  # span -> its read under way

    async def answer(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The operation's answer to `args` (span, and meter or none), each checked (InputError naming it)."""
        meter = args.get("meter")
        if meter is not None and not isinstance(meter, str):
            raise InputError("meter", f"must be a meter's id (a string), not {meter!r}")
        return await self.get(parse_span(args.get("span"), "span"), meter)

    async def get(self, span: str, meter: str | None = None) -> list[dict[str, Any]]:
        """The answer for `span` (checked by the caller), of every meter or only of `meter` (InputError: none
        such in the span; NotAvailable: the span's read has not ended within the timeout)."""
        kept = self._kept.get(span)
        if kept is None or time.monotonic() - kept[0] >= self.every:
            task = self._reading.get(span)
            if task is None:  # decided before any await: never two reads of a span
                task = self._reading[span] = asyncio.create_task(self._read(span), name=f"meter series {span}")
                task.add_done_callback(functools.partial(self._read_ended, span))
            try:
                async with asyncio.timeout(self.timeout):
                    answer = await asyncio.shield(task)  # a waiter given up on (or cancelled) leaves the read on
            except TimeoutError:
                raise NotAvailable(f"the journal is still being read for the {span} series (over {self.timeout:g} s):"
                                   " the answer is kept when the read ends; ask again later") from None
        else:
            answer = kept[1]
        if meter is None:
            return answer
        mine = [m for m in answer if m["meter"] == meter]
        if not mine:
            have = ", ".join(m["meter"] for m in answer) or "none"
            raise InputError("meter", f"no meter {meter!r} in the journal over {span} (meters: {have})")
        return mine

    def _read_ended(self, span: str, task: asyncio.Task[list[dict[str, Any]]]) -> None:
        if self._reading.get(span) is task:
            del self._reading[span]
        if not task.cancelled() and (e := task.exception()) is not None:  # retrieved here: waiters or none
            log.error("meter series not read", span=span, error=f"{type(e).__name__}: {e}", exc_info=e)

    async def _read(self, span: str) -> list[dict[str, Any]]:
        now = self.clock()
        edges = span_edges(span, now, self.starts_at, self.zone, self.intervals, self.zone_name)
        began = time.monotonic()
        series, self._openings[span] = await asyncio.to_thread(self.reader, self.state_dir, edges[0], edges[-1],
                                                               self._openings.get(span))
        self.reads += 1
        log.info("meter series read", span=span, meters=len(series), points=sum(len(p) for p in series.values()),
                 ms=round((time.monotonic() - began) * 1000, 1))
        answer = series_json(series, span, edges[0], edges[-1], edges)
        self._kept[span] = (began, answer)  # kept as of the read's start, whether anyone still waits for it
        return answer


__all__ = ["MAX_POINTS", "NAP_S", "SERIES_EVERY_S", "SERIES_TIMEOUT_S", "SETTLE_S", "WRITE_TIMEOUT_S", "DayReports",
           "MeterSeries"]

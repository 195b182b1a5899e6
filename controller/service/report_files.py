"""The report's I/O: the journal read off-line (read-only, through controller.ledger.reader) and the report's files
written whole (a temporary name, synced, renamed). Blocking: call from a thread."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from controller.ledger import journal
from controller.ledger.reader import JournalReader
from controller.ledger.store import is_url
from controller.meter.journal import Meters
from controller.report.build import DayReport, Source, day_report, meter_series, split_at
from controller.report.day import GamingDay
from controller.report.render import FORMS, render


def _journal(state_dir: Path | str) -> Path | str:
    """The journal of `state_dir`: its file, or the PostgreSQL URL given instead (the link authority's, when
    configured)."""
    return state_dir if is_url(state_dir) else Path(state_dir) / journal.DB_NAME


def read_report(state_dir: Path | str, day: GamingDay, source: Source | None = None) -> DayReport:
    """The report of `day` from the journal in `state_dir`, its hash chain checked as it is read: LedgerDamaged naming
    the first bad entry (no figure is made of a journal changed behind the chain's back), InvariantViolation if the
    day does not reconcile. `source`: whose journal it is (None: told from its entries; `day_report`)."""
    with JournalReader(_journal(state_dir)) as reader:
        return day_report(reader.verified(until=day.end), day, source)


def journal_span(state_dir: Path | str) -> tuple[datetime, datetime] | None:
    """When the journal in `state_dir` has entries: its first's and its last's times (None: none)."""
    with JournalReader(_journal(state_dir)) as reader:
        return reader.span()


@dataclass(frozen=True)
class Opening:
    """The meters at a span's start, kept from one read to the next (the entries before it do not change)."""

    start: datetime
    meters: Meters
    before_seq: int  # the last entry before the span's first


def read_series(state_dir: Path | str, start: datetime, end: datetime,
                opening: Opening | None = None) -> tuple[dict[str, list[tuple[datetime, int, int]]], Opening | None]:
    """Each meter's amounts over [start, end) from the journal in `state_dir` (`span_series`), and the opening to
    keep for the next read. With `opening` of the same start, only the span's entries are read, when the span's
    first entry still follows it (else, as without: every entry up to `end`, those before `start` replayed)."""
    with JournalReader(_journal(state_dir)) as reader:
        if opening is not None and opening.start == start:
            rest = reader.records(since=start, until=end)
            first = next(rest, None)
            if first is not None and first.seq == opening.before_seq + 1:
                return meter_series(opening.meters, itertools.chain([first], rest), start, end), opening
        meters, before, span = split_at(reader.records(until=end), start)
        head = next(span, None)
        kept = None if head is None else Opening(start, meters, before.seq)
        return meter_series(meters, itertools.chain([head] if head else [], span), start, end), kept


def first_entry_time(state_dir: Path | str) -> datetime | None:
    """When the journal began (its first entry), or None when it has none."""
    with JournalReader(_journal(state_dir)) as reader:
        first = next(iter(reader.records()), None)
    return None if first is None else first.time


def written(directory: Path, day: GamingDay) -> bool:
    """Whether every form of `day`'s report is in `directory` as a regular file (a link or anything else planted
    there does not count: the report is written over it)."""
    for path in report_paths(directory, day).values():
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return False
        except FileNotFoundError:
            return False
    return True


def report_paths(directory: Path, day: GamingDay) -> dict[str, Path]:
    """form -> the file the report of `day` is written to: report-YYYY-MM-DD.{txt,json,csv,html}."""
    return {form: Path(directory) / f"report-{day.day.isoformat()}.{suffix}" for form, suffix in FORMS.items()}


def write_report(directory: Path, report: DayReport) -> Path:
    """Every form of `report` into `directory` (created); returns the JSON file's path. Each file appears whole."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = report_paths(directory, report.day)
    for form, path in paths.items():
        # A fresh name made with O_EXCL (mkstemp): a link planted in the directory under a name we would use is
        # never followed, so no file elsewhere (the journal, the anchor) is written through it.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            os.fchmod(fd, 0o640)  # the daemon's group (accounting's reader) reads it, as before
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(render(report, form))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # replaces a link at `path` itself, never its target
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    journal.fsync_path(directory)  # the renames durable
    return paths["json"]


__all__ = ["Opening", "first_entry_time", "journal_span", "read_report", "read_series", "report_paths", "write_report",
           "written"]

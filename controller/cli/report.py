"""`progressivectl report --state DIR --day YYYY-MM-DD`: the gaming day's report of a state directory, read off-line
(read-only; the daemon may be running), its hash chain checked as it is read. Exit status: 0 written; 1 the journal
is damaged (the chain broken: the line names the entry) or the day does not reconcile (a journaled result that its
replay does not give, books that do not balance); 2 bad input; 3 the day has no entry (not begun, or nothing
journaled in it: the report of a day without play is written all the same, and a line names the days that have
entries)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli.common import EXIT_DAMAGED, state_or_journal
from controller.errors import InputError, InvariantViolation

EXIT_NO_ENTRIES = 3  # the day has no entry in the journal: said in a line, so that a script does not file it unread

if TYPE_CHECKING:
    from datetime import datetime

    from controller.report.build import Source
    from controller.report.day import GamingDay


def add_parsers(sub: Any) -> None:
    r = sub.add_parser("report", help="the gaming day's report of a state directory (text, --json, --csv, --html)")
    r.add_argument("--state", required=True, type=state_or_journal,
                   help="state directory (or a copy of it), or the URL of a link authority's journal on PostgreSQL")
    r.add_argument("--day", required=True, help="the gaming day, YYYY-MM-DD (the date it starts on)")
    form = r.add_mutually_exclusive_group()
    form.add_argument("--json", dest="form", action="store_const", const="json", help="exact JSON")
    form.add_argument("--csv", dest="form", action="store_const", const="csv", help="one row per meter and figure")
    form.add_argument("--html", dest="form", action="store_const", const="html",
                      help="one self-contained HTML file with a plot of each meter")
    when = r.add_mutually_exclusive_group()
    when.add_argument("--config", type=Path, help="the table's configuration (or the link authority's, with --role "
                      "link): the table's id and its [report] day_starts and time_zone")
    when.add_argument("--day-starts", metavar="HH:MM", help="when the gaming day starts (default 06:00)")
    r.add_argument("--time-zone", help="the casino's time zone, with --day-starts (default America/New_York)")
    r.add_argument("--role", choices=("table", "link"), default="table",
                   help="whose configuration --config is: a table's (default) or a link authority's")
    r.set_defaults(handler=cmd_report, form="text")


def _day(args: Any) -> tuple[GamingDay, Source | None]:
    """The gaming day asked for, and whose journal it is when a configuration says (None: told from the journal)."""
    from controller.config.check_report import zone_problem
    from controller.report.build import AUTHORITY, TABLE, Source
    from controller.report.day import DEFAULT_DAY_STARTS, DEFAULT_TIME_ZONE, gaming_day, parse_day, parse_day_starts

    day = parse_day(args.day, "--day")
    if args.config is None and args.role != "table":
        raise InputError("--role", "give the link authority's configuration with --config")
    if args.config is not None:
        if args.time_zone is not None:
            raise InputError("--time-zone", "give it in the configuration's [report] time_zone, or use --day-starts")
        from controller.config import ConfigError, load_config
        from controller.config.authority import load_authority_config
        from controller.service.views import meter_titles

        try:
            if args.role == "link":
                a = load_authority_config(args.config)
                rc, source = a.report, Source(AUTHORITY, a.authority)
            else:
                t = load_config(args.config)
                rc, source = t.report, Source(TABLE, t.table, meter_titles(t))
        except ConfigError as e:
            raise InputError("--config", f"{args.config}: {e.problems[0] if e.problems else e}") from None
        return gaming_day(day, rc.day_starts, rc.zone, rc.time_zone), source
    starts = DEFAULT_DAY_STARTS if args.day_starts is None else parse_day_starts(args.day_starts, "--day-starts")
    name = args.time_zone or DEFAULT_TIME_ZONE
    if (problem := zone_problem(name)) is not None:
        raise InputError("--time-zone", problem)
    from zoneinfo import ZoneInfo

    return gaming_day(day, starts, ZoneInfo(name), name), None


def cmd_report(args: Any) -> int:
    from controller.ledger import LedgerDamaged, journal
    from controller.report.render import render
    from controller.service.report_files import read_report

    day, source = _day(args)
    if not isinstance(args.state, str) and not (args.state / journal.DB_NAME).is_file():
        raise InputError("--state", f"{args.state} holds no journal ({journal.DB_NAME})")
    try:
        report = read_report(args.state, day, source)
    except InputError as e:
        if source is None or e.field not in ("table", "authority"):
            raise
        raise InputError("--config", f"{args.config}: {e.problem}") from None  # another table's or authority's
    except PermissionError:
        raise InputError("--state", f"{args.state}: permission denied: the journal is the daemon's user's only "
                                    "(run this as root, or as that user)") from None
    except LedgerDamaged as e:  # the chain broken: no figure of it is printed
        where = f"entry {e.seq}: " if e.seq is not None else ""
        print(f"progressivectl: no report: the journal {e.path} is damaged: {where}{e.problem}", file=sys.stderr)
        return EXIT_DAMAGED
    except InvariantViolation as e:
        print(f"progressivectl: the gaming day {day.day} does not reconcile: {e}", file=sys.stderr)
        return EXIT_DAMAGED
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    if report.entries == 0:
        if day.start > now:
            print(f"progressivectl: the gaming day {day.day} has not begun (it starts at {_local(day, day.start)}): "
                  "no report", file=sys.stderr)
            return EXIT_NO_ENTRIES
        sys.stdout.write(render(report, args.form))
        print(f"progressivectl: the gaming day {day.day} has no entry in the journal: {_entries_span(args.state, day)}",
              file=sys.stderr)
        return EXIT_NO_ENTRIES
    sys.stdout.write(render(report, args.form))
    if day.end > now:  # the figures "at the close" are the journal's as of now
        print(f"progressivectl: the gaming day {day.day} is not over (it ends at {_local(day, day.end)}): its figures "
              f"\"at the close\" are those of {_local(day, now)}, so far", file=sys.stderr)
    return 0


def _local(day: GamingDay, moment: datetime) -> str:
    """A moment on the casino's clock (the day's zone), to the minute, with the zone's abbreviation."""
    return f"{day.local(moment):%Y-%m-%d %H:%M %Z}"


def _entries_span(state: Path | str, day: GamingDay) -> str:
    """Which gaming days the journal has entries in, in words."""
    from zoneinfo import ZoneInfo

    from controller.report.day import day_of
    from controller.service.report_files import journal_span

    span = journal_span(state)
    if span is None:
        return "the journal has none"
    try:
        zone = ZoneInfo(day.zone)
    except (ValueError, KeyError, OSError):  # a zone named as configured: checked when the day was made
        return f"its entries run from {span[0]:%Y-%m-%d %H:%M} to {span[1]:%Y-%m-%d %H:%M} UTC"
    first, last = (day_of(t, day.starts_at, zone).day for t in span)
    return f"its entries are of the gaming days {first} to {last}" if first != last else \
        f"its entries are of the gaming day {first}"


__all__ = ["EXIT_NO_ENTRIES", "add_parsers", "cmd_report"]

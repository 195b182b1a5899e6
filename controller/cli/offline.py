"""`progressivectl settle`, `odds`, `check-paytable` and `paytables`: the rules engine on files and arguments,
with no daemon and no state directory. Exit status: 0 done; 2 bad input (or a paytable that may not be selected)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from controller.cli.common import dump_json
from controller.errors import InputError


def add_settle(sub: Any) -> None:
    s = sub.add_parser("settle", help="settle a round given as JSON (FILE or - for stdin)")
    s.add_argument("file", help="round JSON file, or - for standard input")
    s.add_argument("--paytable-dir", action="append", default=[], type=Path, help="also look for paytables here")
    s.add_argument("--pretty", action="store_true", help="indent the JSON output")
    s.set_defaults(handler=_cmd_settle)


def add_odds(sub: Any) -> None:
    o = sub.add_parser("odds", help="exact odds, return and break-even meter of a wager and paytable")
    o.add_argument("--game", required=True, help="the game's id, e.g. caribbean-stud (`progressivectl paytables` lists them)")
    o.add_argument("--wager", required=True, help="wager id, e.g. progressive, five-card-hand-bonus")
    o.add_argument("--paytable", required=True, help="paytable id or TOML file")
    o.add_argument("--bet", help="the Props & Hops bet, e.g. field, hop-the-top, six-eight-shake")
    o.add_argument("--meter", help="meter amount in dollars (default: the $10,000.00 reset floor)")
    o.add_argument("--amount", default="1.00", help="amount wagered in dollars (default 1.00)")
    o.add_argument("--players", type=int, default=1, help="players at the table, for Envy Bonus returns")
    o.add_argument("--lucky-positions", type=int, help="positions the Lucky Bonus draws from")
    o.add_argument("--paytable-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="also look for paytable files here (repeatable)")
    o.add_argument("--json", action="store_true", help="the exact figures as JSON, for scripts")
    o.set_defaults(handler=_cmd_odds)


def add_check_paytable(sub: Any) -> None:
    c = sub.add_parser("check-paytable", help="may this paytable be selected for this wager? (exit 0 yes, 2 no)")
    c.add_argument("--game", required=True, help="the game's id, e.g. caribbean-stud")
    c.add_argument("--wager", required=True, help="wager id, e.g. progressive, five-card-hand-bonus")
    c.add_argument("--paytable", required=True, help="paytable id or TOML file")
    c.add_argument("--linked", action="store_true", help="the meter is shared with other tables (§ 605a.8)")
    c.add_argument("--wager-sizes", default="", metavar="AMOUNTS",
                   help="comma-separated wager sizes offered, e.g. 1.00,5.00 (default: the paytable's own)")
    c.add_argument("--no-examples", action="store_true", help="refuse paytables marked as examples")
    c.add_argument("--paytable-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="also look for paytable files here (repeatable)")
    c.set_defaults(handler=_cmd_check_paytable)


def add_paytables(sub: Any) -> None:
    t = sub.add_parser("paytables", help="list every built-in and loaded paytable")
    t.add_argument("--paytable-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="also list the paytable files here (repeatable)")
    t.add_argument("--json", action="store_true", help="every paytable as JSON, for scripts")
    t.set_defaults(handler=_cmd_paytables)


def _read_json(name: str) -> Any:
    from controller.tomlfile.files import FileRefused, read_text

    try:  # a file: regular, bounded (a FIFO or /dev/zero is refused, never read)
        text = sys.stdin.read() if name == "-" else read_text(name)
    except FileRefused as e:
        raise InputError(name, f"cannot read: {e.reason}") from None
    except OSError as e:
        raise InputError(name, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(name, "is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(name if name != "-" else "stdin", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def _cmd_settle(args: argparse.Namespace) -> int:
    import re

    from controller.paytables import find_paytable
    from controller.round.form import settle_json

    if args.file != "-" and re.fullmatch(r"\S+-r[0-9]+", args.file) and not Path(args.file).exists():
        raise InputError(args.file, f"no such file (to tell the running daemon that round {args.file} is settled: "
                                    f"progressivectl settle-round {args.file})")
    doc = _read_json(args.file)
    out = settle_json(doc, lambda ref: find_paytable(ref, args.paytable_dir))
    return dump_json(out, indent=2 if args.pretty else None)


def _cmd_odds(args: argparse.Namespace) -> int:
    from controller.games import game, wager
    from controller.meter.award import RESET_FLOOR_CENTS
    from controller.money import UNITS_PER_CENT, parse_cents, parse_units
    from controller.odds import odds_report, render_text, to_json
    from controller.paytables import find_paytable

    g = game(args.game, "--game")
    w = wager(g, args.wager, "--wager")
    pt = find_paytable(args.paytable, args.paytable_dir)
    meter = parse_units(args.meter, "--meter") if args.meter else RESET_FLOOR_CENTS * UNITS_PER_CENT
    amount = parse_cents(args.amount, "--amount")
    if amount <= 0:
        raise InputError("--amount", "must be more than 0")
    if args.players < 1 or args.players > max(g.max_seats, 1):
        raise InputError("--players", f"must be 1..{g.max_seats} for {g.title}")
    report = odds_report(
        g.id, w.id, pt, meter_units=meter, wager_cents=amount, players=args.players,
        lucky_positions=args.lucky_positions, bet=args.bet,
    )
    if args.json:
        return dump_json(to_json(report))
    sys.stdout.write(render_text(report))
    return 0


def _cmd_check_paytable(args: argparse.Namespace) -> int:
    from controller.games import game, wager
    from controller.money import parse_cents
    from controller.paytables import check_paytable_for, find_paytable

    g = game(args.game, "--game")
    w = wager(g, args.wager, "--wager")
    pt = find_paytable(args.paytable, args.paytable_dir)
    sizes = [parse_cents(x.strip(), f"--wager-sizes[{i}]") for i, x in enumerate(args.wager_sizes.split(",")) if x.strip()]
    check_paytable_for(pt, g.id, w.id, linked=args.linked, wager_sizes=sizes, allow_examples=not args.no_examples)
    print(f"{pt.id}: may be selected for the {w.title} of {g.title}" + (" (linked)" if args.linked else ""))
    return 0


def _cmd_paytables(args: argparse.Namespace) -> int:
    from controller.paytables import all_paytables
    from controller.paytables.render import paytables_json, paytables_text

    tables = all_paytables(args.paytable_dir)
    if args.json:
        return dump_json(paytables_json(tables))
    sys.stdout.write(paytables_text(tables))
    return 0


__all__ = ["add_check_paytable", "add_odds", "add_paytables", "add_settle"]

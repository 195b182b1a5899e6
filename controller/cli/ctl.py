"""progressivectl: the operator's command line.

A contract that other tools script against (docs/cli.md). Bad input exits with status 2 and one
line on stderr that names the field and what is wrong; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2, as for any bad input
        raise InputError("arguments", message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="progressivectl", description="Table progressive controller: operator's command line")
    p.add_argument("--version", action="version", version=f"progressivectl {__version__}")
    p.add_argument("--debug", action="store_true", help="show a traceback for internal errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("settle", help="settle a round given as JSON (FILE or - for stdin)")
    s.add_argument("file", help="round JSON file, or - for standard input")
    s.add_argument("--paytable-dir", action="append", default=[], type=Path, help="also look for paytables here")
    s.add_argument("--pretty", action="store_true", help="indent the JSON output")

    o = sub.add_parser("odds", help="exact odds, return and break-even meter of a wager and paytable")
    o.add_argument("--game", required=True)
    o.add_argument("--wager", required=True, help="wager id, e.g. progressive, five-card-hand-bonus")
    o.add_argument("--paytable", required=True, help="paytable id or TOML file")
    o.add_argument("--bet", help="the Props & Hops bet, e.g. field, hop-the-top, six-eight-shake")
    o.add_argument("--meter", help="meter amount in dollars (default: the $10,000.00 reset floor)")
    o.add_argument("--amount", default="1.00", help="amount wagered in dollars (default 1.00)")
    o.add_argument("--players", type=int, default=1, help="players at the table, for Envy Bonus returns")
    o.add_argument("--lucky-positions", type=int, help="positions the Lucky Bonus draws from")
    o.add_argument("--paytable-dir", action="append", default=[], type=Path)
    o.add_argument("--json", action="store_true")

    c = sub.add_parser("check-paytable", help="may this paytable be selected for this wager? (exit 0 yes, 2 no)")
    c.add_argument("--game", required=True)
    c.add_argument("--wager", required=True)
    c.add_argument("--paytable", required=True, help="paytable id or TOML file")
    c.add_argument("--linked", action="store_true", help="the meter is shared with other tables (§ 605a.8)")
    c.add_argument("--wager-sizes", default="", help="comma-separated wager sizes offered, e.g. 1.00,5.00")
    c.add_argument("--no-examples", action="store_true", help="refuse paytables marked as examples")
    c.add_argument("--paytable-dir", action="append", default=[], type=Path)

    a = sub.add_parser("audit", help="audit a state directory")
    asub = a.add_subparsers(dest="audit_command", required=True, parser_class=_Parser)
    v = asub.add_parser("verify", help="verify the journal's chain, integrity and invariant (exit 1 if damaged)")
    v.add_argument("--state", required=True, type=Path, help="state directory (or a copy of it)")
    v.add_argument("--json", action="store_true")

    m = sub.add_parser("meters", help="every meter of a state directory, read from its journal")
    m.add_argument("--state", required=True, type=Path)
    m.add_argument("--meter", help="only this meter")
    m.add_argument("--json", action="store_true")

    h = sub.add_parser("history", help="the hit history of a state directory, read from its journal")
    h.add_argument("--state", required=True, type=Path)
    h.add_argument("--meter", help="only this meter")
    h.add_argument("--json", action="store_true")

    t = sub.add_parser("paytables", help="list every built-in and loaded paytable")
    t.add_argument("--paytable-dir", action="append", default=[], type=Path)
    t.add_argument("--json", action="store_true")
    return p


def _read_json(name: str) -> Any:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(name, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(name, "is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(name if name != "-" else "stdin", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def _cmd_settle(args: argparse.Namespace) -> int:
    from ..paytables import find_paytable
    from ..roundio import settle_json

    doc = _read_json(args.file)
    out = settle_json(doc, lambda ref: find_paytable(ref, args.paytable_dir))
    json.dump(out, sys.stdout, indent=2 if args.pretty else None)
    sys.stdout.write("\n")
    return 0


def _cmd_odds(args: argparse.Namespace) -> int:
    from ..games import game, wager
    from ..meter_award import RESET_FLOOR_CENTS
    from ..money import UNITS_PER_CENT, parse_cents, parse_units
    from ..odds import odds_report, render_text, to_json
    from ..paytables import find_paytable

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
        json.dump(to_json(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


def _cmd_check_paytable(args: argparse.Namespace) -> int:
    from ..games import game, wager
    from ..money import parse_cents
    from ..paytables import check_paytable_for, find_paytable

    g = game(args.game, "--game")
    w = wager(g, args.wager, "--wager")
    pt = find_paytable(args.paytable, args.paytable_dir)
    sizes = [parse_cents(x.strip(), f"--wager-sizes[{i}]") for i, x in enumerate(args.wager_sizes.split(",")) if x.strip()]
    check_paytable_for(pt, g.id, w.id, linked=args.linked, wager_sizes=sizes, allow_examples=not args.no_examples)
    print(f"{pt.id}: may be selected for the {w.title} of {g.title}" + (" (linked)" if args.linked else ""))
    return 0


def _cmd_paytables(args: argparse.Namespace) -> int:
    from ..paytables import all_paytables
    from ..paytables.render import paytables_json, paytables_text

    tables = all_paytables(args.paytable_dir)
    if args.json:
        json.dump(paytables_json(tables), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(paytables_text(tables))
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from .audit import cmd_verify

    return cmd_verify(args.state, args.json)


def _cmd_meters(args: argparse.Namespace) -> int:
    from .audit import cmd_meters

    return cmd_meters(args.state, args.json, args.meter)


def _cmd_history(args: argparse.Namespace) -> int:
    from .audit import cmd_history

    return cmd_history(args.state, args.json, args.meter)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        args = _parser().parse_args(argv)
        handler = {
            "settle": _cmd_settle, "odds": _cmd_odds, "check-paytable": _cmd_check_paytable,
            "paytables": _cmd_paytables, "audit": _cmd_audit, "meters": _cmd_meters, "history": _cmd_history,
        }[args.command]
        return handler(args)
    except InputError as e:
        print(f"progressivectl: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug, not bad input: still one line unless asked for the traceback
        if debug:
            raise
        print(f"progressivectl: internal error: {type(e).__name__}: {e} (run with --debug for details)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

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
from ..app.control import DEFAULT_SOCKET as _DEFAULT_SOCKET  # defined once (control.py imports the stdlib only)
from ..app.control import SOCKET_ENV as _SOCKET_ENV
from ..errors import InputError
from ..money import format_cents

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
    v.add_argument("--expect-head", metavar="SEQ:HASH",
                   help="an anchor of the journal (from the log, the syslog or the link authority): the journal "
                        "must hold it, else it was rolled back or rewritten (exit 1)")
    an = asub.add_parser("anchor", help="write the journal's anchor again, for its head as the audit finds it "
                                        "(the daemon stopped; after a key is set or changed, or an anchor lost)")
    an.add_argument("--state", required=True, type=Path, help="the table's state directory")
    an.add_argument("--anchor", required=True, type=Path, help="the anchor file ([anchor] file)")
    an.add_argument("--key-file", type=Path, help="the journal key ([anchor] key_file), if the table has one")
    an.add_argument("--expect-head", metavar="SEQ:HASH",
                    help="the last anchor sent off the box: the journal must hold it, else nothing is written")

    m = sub.add_parser("meters", help="every meter: of the running daemon, or of a state directory (--state)")
    m.add_argument("--state", type=Path, metavar="DIR",
                   help="read this state directory's journal instead of asking the daemon")
    m.add_argument("--meter", help="only this meter")
    m.add_argument("--json", action="store_true")
    _live_options(m)

    h = sub.add_parser("history", help="the hit history: of the running daemon, or of a state directory (--state)")
    h.add_argument("--state", type=Path, metavar="DIR",
                   help="read this state directory's journal instead of asking the daemon")
    h.add_argument("--meter", help="only this meter")
    h.add_argument("--limit", metavar="N", help="only the N most recent hits")
    h.add_argument("--json", action="store_true")
    _live_options(h)

    t = sub.add_parser("paytables", help="list every built-in and loaded paytable")
    t.add_argument("--paytable-dir", action="append", default=[], type=Path)
    t.add_argument("--json", action="store_true")

    k = sub.add_parser("check-config",
                       help="check a table's or a link authority's configuration file (exit 0 sound, 2 problems)")
    k.add_argument("file", type=Path, help="the TOML configuration of a table or of a link authority")
    k.add_argument("--json", action="store_true")

    x = sub.add_parser("hash-credential",
                       help="hash a supervisor's secret for the configuration (read from the terminal or stdin)")
    x.add_argument("--scheme", choices=["scrypt", "pbkdf2_sha256"], default="scrypt")

    y = sub.add_parser("approval-key",
                       help="a supervisor's approval key for a link authority's approvers file (the secret read "
                            "from the terminal or stdin)")
    y.add_argument("name", help="the supervisor's name, as in the tables' supervisors files")

    _live_parsers(sub)
    return p


# --- talking to the running daemon (docs/operations.md) -------------------------------------------

EXIT_UNAVAILABLE = 1

# Arguments of a request the daemon may name in a refusal, and the option the user typed them with.
_OPTION_OF = {"supervisor": "--supervisor", "reason": "--reason", "dealt": "--dealt", "meter": "--meter",
              "limit": "--limit", "round_id": "ROUND_ID", "stub": "STUB", "seat": "SEAT", "cards": "CARDS",
              "claim_id": "CLAIM_ID", "spot": "--spot"}


def _live_options(p: argparse.ArgumentParser, json_option: bool = False) -> None:
    p.add_argument("--socket", metavar="PATH",
                   help=f"the daemon's control socket (default: ${_SOCKET_ENV}, else {_DEFAULT_SOCKET})")
    p.add_argument("--timeout", default="10", metavar="SECONDS", help="how long to wait for the daemon (default 10)")
    if json_option:
        p.add_argument("--json", action="store_true", help="the daemon's answer as JSON, for scripts")


def _supervisor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--supervisor", required=True, metavar="NAME", help="the supervisor who authorizes this")
    p.add_argument("--secret-file", type=Path, metavar="FILE",
                   help="read the supervisor's secret from the first line of FILE (mode 0600); default: standard "
                        "input when it is not a terminal, else a prompt")


def _live_parsers(sub: Any) -> None:
    s = sub.add_parser("status", help="the running daemon: table, round, blocks, devices, meters, ledger, uptime")
    _live_options(s, json_option=True)

    r = sub.add_parser("round", help="the current round of the running daemon: phase, accepted wagers and claims")
    _live_options(r, json_option=True)

    v = sub.add_parser("void", help="void the round being dealt (shoe jam, misdeal): every wager is returned")
    v.add_argument("--reason", required=True, metavar="TEXT", help="why, for the journal (e.g. \"misdeal\")")
    _supervisor_options(v)
    _live_options(v, json_option=True)

    t = sub.add_parser("settle-round", help="tell the daemon the dealer finished settling round ROUND_ID")
    t.add_argument("round_id", metavar="ROUND_ID", help="the round, e.g. CS-07-r12 (see `progressivectl round`)")
    t.add_argument("--supervisor", metavar="NAME",
                   help="a supervisor settles a round a wrong stub count asked to void, where the void cannot be "
                        "(an award of the round was paid)")
    t.add_argument("--secret-file", type=Path, metavar="FILE",
                   help="with --supervisor: read the secret from the first line of FILE (mode 0600)")
    _live_options(t, json_option=True)

    d = sub.add_parser("deck-replaced", help="a supervisor confirms a new deck is in use")
    _supervisor_options(d)
    _live_options(d, json_option=True)

    k = sub.add_parser("stub-count", help="enter the count of the undealt stub (tables without a counting shuffler)")
    k.add_argument("stub", metavar="STUB", help="cards counted in the stub")
    k.add_argument("--dealt", metavar="N", help="cards dealt, when the shoe does not report them")
    k.add_argument("--supervisor", metavar="NAME",
                   help="a supervisor's recount (with the secret, as for void): a count of 52 withdraws the void a "
                        "wrong count asked for")
    k.add_argument("--secret-file", type=Path, metavar="FILE",
                   help="with --supervisor: read the secret from the first line of FILE (mode 0600)")
    _live_options(k, json_option=True)

    for name, what in (("close-table", "close the table: progressive wagering disabled until it is opened"),
                       ("open-table", "open the table again")):
        c = sub.add_parser(name, help=what)
        _supervisor_options(c)
        _live_options(c, json_option=True)

    c = sub.add_parser("claim", help="claim a jackpot hand for a seat, or the dealer's hand")
    c.add_argument("seat", metavar="SEAT",
                   help="the seat holding the hand, or \"dealer\" for the dealer's hand (every wager on it)")
    c.add_argument("cards", metavar="CARDS", nargs="+", help="the hand's cards, e.g. AS KS QS JS TS")
    c.add_argument("--spot", metavar="SPOT",
                   help="which wager spot of the seat, e.g. five-card-hand-bonus (default: the seat's first "
                        "wager on its own hand)")
    _live_options(c, json_option=True)

    a = sub.add_parser("approve", help="a supervisor approves a jackpot claim")
    a.add_argument("claim_id", metavar="CLAIM_ID")
    _supervisor_options(a)
    _live_options(a, json_option=True)

    j = sub.add_parser("reject", help="a supervisor rejects a jackpot claim")
    j.add_argument("claim_id", metavar="CLAIM_ID")
    j.add_argument("--reason", required=True, metavar="TEXT")
    _supervisor_options(j)
    _live_options(j, json_option=True)


def _read_json(name: str) -> Any:
    from ..config.files import FileRefused, read_text

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

    from ..paytables import find_paytable
    from ..roundio import settle_json

    if args.file != "-" and re.fullmatch(r"\S+-r[0-9]+", args.file) and not Path(args.file).exists():
        raise InputError(args.file, f"no such file (to tell the running daemon that round {args.file} is settled: "
                                    f"progressivectl settle-round {args.file})")
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
    from .audit import cmd_anchor, cmd_verify

    if args.audit_command == "anchor":
        return cmd_anchor(args.state, args.anchor, args.key_file, args.expect_head)
    return cmd_verify(args.state, args.json, args.expect_head)


def _offline(args: argparse.Namespace) -> bool:
    """--state: read a state directory rather than ask the daemon."""
    if args.state is None:
        return False
    if args.socket is not None:
        raise InputError("--socket", "cannot be used with --state (--state reads a state directory, not the daemon)")
    return True


def _cmd_meters(args: argparse.Namespace) -> int:
    if _offline(args):
        from .audit import cmd_meters

        return cmd_meters(args.state, args.json, args.meter)
    rows = _select_meter(_rows(args, _ask(args, "meters")), args.meter)
    if args.json:
        return _dump_json(rows)
    from .audit import print_meters

    print_meters(rows)
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    limit = _count(args.limit, "--limit", least=1) if args.limit is not None else None
    if _offline(args):
        from .audit import cmd_history

        if limit is None:
            return cmd_history(args.state, args.json, args.meter)
        from ..app.views import hit_json
        from .audit import _audit, _damaged, _select

        report = _audit(args.state)
        if not report.ok:
            return _damaged(report)
        hits = [hit_json(m, h) for m in _select(report.state, args.meter) for h in report.state[m].history]
    else:
        hits = _select_meter(_rows(args, _ask(args, "history")), args.meter, hits=True)
        if args.meter is not None and not hits:  # no hit yet, or no such meter: the meters tell which
            _select_meter(_rows(args, _ask(args, "meters")), args.meter)
    hits.sort(key=lambda h: (h["time"], h["meter"], h["number"]))
    if limit is not None:
        hits = hits[-limit:]
    if args.json:
        return _dump_json(hits)
    from .audit import print_hits

    print_hits(hits)
    return 0


def _cmd_check_config(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config
    from ..config.authority import is_authority_config, load_authority_config

    name = str(args.file)
    authority = is_authority_config(args.file)  # `authority = ...` at the top instead of `table = ...`
    try:
        cfg = load_authority_config(args.file) if authority else load_config(args.file)
    except ConfigError as e:
        if args.json:
            json.dump({"file": name, "ok": False, "problems": [p.to_dict() for p in e.problems],
                       "warnings": [w.to_dict() for w in e.warnings], "summary": None}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            for p in e.problems:
                print(p.line(name), file=sys.stderr)
            _print_warnings(name, e.warnings)
        return EXIT_BAD_INPUT
    summary = cfg.summary()
    if args.json:
        json.dump({"file": name, "ok": True, "problems": [], "warnings": [w.to_dict() for w in cfg.warnings],
                   "summary": summary}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print_warnings(name, cfg.warnings)  # sound, but not as it should stay: exit 0, a line each on stderr
    if authority:
        _print_authority_summary(name, summary)
        return 0
    wagers = ", ".join(f"{w} ({v['paytable']}" + (f", meter {v['meter']})" if v["meter"] else ")")
                       for w, v in summary["wagers"].items())
    meters = ", ".join(
        f"{m} (linked to {v['linked']})" if "linked" in v else f"{m} (reset {v['reset']}, rate {v['rate']})"
        for m, v in summary["meters"].items()
    ) or "none"
    devs = summary["devices"]
    kinds = ", ".join(f"{n} {k}" for k, n in devs["by_kind"].items())
    print(f"{name}: sound")
    places = "wager positions" if summary["dice"] else "seats"
    print(f"table {summary['table']}: {summary['game_title']} ({summary['game']}), {summary['seats']} {places}")
    print(f"wagers: {wagers}")
    print(f"meters: {meters}")
    print(f"devices: {devs['total']} ({kinds}) on {devs['buses']} bus(es)")
    return 0


def _print_warnings(name: str, warnings: Any) -> None:
    for w in warnings:
        print(w.line(name, warning=True), file=sys.stderr)


def _print_authority_summary(name: str, summary: dict[str, Any]) -> None:
    meters = ", ".join(f"{m} (reset {v['reset']}, rate {v['rate']})" for m, v in summary["meters"].items())
    q = summary["mqtt"]
    broker = (f"{q['host']}:{q['port']}, MQTT {q['protocol']}, " + ("TLS" if q["tls"] else "no TLS")
              + f", client id {q['client_id']}")
    if q["username"]:
        broker += f", user {q['username']}"
    tables = summary["tables"]
    print(f"{name}: sound")
    print(f"link authority {summary['authority']}: {len(tables)} table(s): {', '.join(tables)}")
    print(f"meters: {meters}")
    print(f"broker: {broker}")


def _cmd_hash_credential(args: argparse.Namespace) -> int:
    from ..config import CredentialError, hash_credential

    try:
        print(hash_credential(read_secret("Secret: ", confirm=True), args.scheme))
    except CredentialError as e:
        raise InputError("secret", str(e)) from None
    return 0


def _cmd_approval_key(args: argparse.Namespace) -> int:
    from ..link.approval import approval_key, encode_key

    name = args.name
    if not name.strip() or not name.isprintable() or name != name.strip() or len(name) > 64:
        raise InputError("name", "must be the supervisor's name as the tables list it: printable, at most 64 "
                                 "characters, without leading or trailing blanks")
    secret = read_secret(f"Secret of supervisor {name}: ", confirm=True)
    key = encode_key(approval_key(name, secret))
    print(f"[[approvers]]\nname = {json.dumps(name)}\napproval_key = \"{key}\"")
    return 0


class _Exit(Exception):
    """Leave with `status` after printing `line` on standard error."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


def _count(text: str, field: str, least: int = 0, most: int | None = None) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii() or int(t) < least or (most is not None and int(t) > most):
        bound = f"{least}..{most}" if most is not None else f"at least {least}"
        raise InputError(field, f"must be a whole number, {bound}, not {text!r}")
    return int(t)


def _ask(args: argparse.Namespace, op: str, **call_args: Any) -> Any:
    """Send `op` to the running daemon; its result, or _Exit with the status of docs/cli.md."""
    from ..app.control import ControlClient, ControlError, DaemonUnavailable

    if args.socket is not None and not args.socket:
        raise InputError("--socket", "is empty")
    try:
        timeout = float(args.timeout)
    except ValueError:
        timeout = 0.0
    if not 0 < timeout <= 3600:
        raise InputError("--timeout", f"must be a number of seconds more than 0 (at most 3600), not {args.timeout!r}")
    client = ControlClient(args.socket, timeout)
    try:
        return client.call_sync(op, **call_args)
    except DaemonUnavailable as e:
        raise _Exit(EXIT_UNAVAILABLE, f"progressivectl: {e.path}: {e.reason}: the daemon is not running, or the "
                                      f"socket path is wrong (give --socket PATH or set ${_SOCKET_ENV})") from None
    except ControlError as e:
        message = e.message
        if e.field == "op" and e.kind == "input":
            field = args.command
            message += " (the daemon does not offer this command: is it an older version?)"
        elif e.field:
            base, bracket, rest = e.field.partition("[")  # cards[4]: the fifth of CARDS
            field = _OPTION_OF.get(base, base) + bracket + rest
        else:
            field = args.command
        if e.kind == "internal":
            message = f"the daemon failed: {message}"
        status = EXIT_BAD_INPUT if e.kind in ("input", "rules", "auth") else EXIT_UNAVAILABLE
        raise _Exit(status, f"progressivectl: {field}: {message}") from None


def _not_understood(args: argparse.Namespace, what: str) -> _Exit:
    return _Exit(EXIT_UNAVAILABLE, f"progressivectl: {args.command}: the daemon's answer is not understood ({what})")


def _rows(args: argparse.Namespace, result: Any) -> list[dict[str, Any]]:
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise _not_understood(args, "expected a list of objects")
    return result


def _select_meter(rows: list[dict[str, Any]], meter: str | None, hits: bool = False) -> list[dict[str, Any]]:
    if meter is None:
        return rows
    chosen = [r for r in rows if r.get("meter") == meter]
    if not chosen and not hits:
        known = sorted({str(r.get("meter")) for r in rows})
        raise InputError("--meter", f"unknown meter {meter!r}; defined: {', '.join(known) or 'none'}")
    return chosen


def _dump_json(value: Any) -> int:
    json.dump(value, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _table(rows: list[list[str]], right: frozenset[int] = frozenset(), indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
                               ).rstrip() for r in rows]


def _duration(seconds: Any) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        return "?"
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return (f"{days}d " if days else "") + f"{hours:02d}:{minutes:02d}:{s:02d}"


def _text(value: Any) -> str:
    return "?" if value is None else str(value)


def _cmd_status(args: argparse.Namespace) -> int:
    st = _ask(args, "status")
    if args.json:
        return _dump_json(st)
    if not isinstance(st, dict):
        raise _not_understood(args, "expected an object")
    out = [f"table {_text(st.get('table'))}: {_text(st.get('game'))}, up {_duration(st.get('uptime_seconds'))}"
           + (f" (progressived {st['version']})" if st.get("version") else "")]
    rnd = st.get("round")
    out.append(f"round {_text(rnd.get('id'))}: {_text(rnd.get('phase'))}" if isinstance(rnd, dict) else "round: none")
    blocks = [b for b in st.get("blocks") or [] if isinstance(b, dict)]
    if blocks:
        out.append("wagering: DISABLED: " + "; ".join(
            _text(b.get("block")) + (f" ({', '.join(map(str, b['sources']))})" if b.get("sources") else "")
            for b in blocks))
    else:
        out.append("wagering: enabled")
    devices = [d for d in st.get("devices") or [] if isinstance(d, dict)]
    down = sum(1 for d in devices if not d.get("up"))
    out.append(f"devices: {len(devices) - down} up, {down} down")
    if devices:
        out += _table([["device", "kind", "state", "errors", "last error"]] + [
            [_text(d.get("id")), _text(d.get("kind")), "up" if d.get("up") else "DOWN", _text(d.get("errors")),
             _text(d.get("last_error")) if d.get("last_error") else ""] for d in devices], right=frozenset({3}))
    meters = [m for m in st.get("meters") or [] if isinstance(m, dict)]
    out.append("meters:" if meters else "meters: none")
    if meters:
        out += _table([[_text(m.get("meter")) + (f" (linked: {_text(m['linked'])})" if m.get("linked") else ""),
                        f"${_text(m.get('amount'))}" if m.get("amount") is not None else "not heard yet"]
                       for m in meters], right=frozenset({1}))
    link = st.get("link")
    if isinstance(link, dict):
        heard = link.get("heard_seconds_ago")
        out.append(f"link authority: {'up' if link.get('up') else 'NOT HEARD'}"
                   + (f", heard {_text(heard)} s ago" if heard is not None else ", never heard")
                   + f" (timeout {_text(link.get('timeout_seconds'))} s); {_text(link.get('waiting'))} operations "
                   "waiting for it")
    out.append(f"ledger: head seq {_text(st.get('ledger_head_seq'))}"
               + (f" {_text(st['ledger_head_hash'])}" if st.get("ledger_head_hash") else ""))
    anchor = st.get("anchor")
    if isinstance(anchor, dict):
        out.append(f"anchor: seq {_text(anchor.get('seq'))} at {_text(anchor.get('at'))}"
                   + (" (keyed)" if anchor.get("mac") else ""))
    print("\n".join(out))
    return 0


def _cmd_round(args: argparse.Namespace) -> int:
    from ..money import parse_cents

    rnd = _ask(args, "round")
    if args.json:
        return _dump_json(rnd)
    if not isinstance(rnd, dict):
        raise _not_understood(args, "expected an object")
    out = [f"round {_text(rnd.get('id'))}: {_text(rnd.get('phase'))}"]
    wagers = [w for w in rnd.get("wagers") or [] if isinstance(w, dict)]
    if wagers:
        out += _table([["seat", "spot", "amount"]] + [
            [_text(w.get("seat")), _text(w.get("spot")), f"${_text(w.get('amount'))}"] for w in wagers],
            right=frozenset({0, 2}))
        try:
            total = "$" + format_cents(sum(parse_cents(w.get("amount"), "amount") for w in wagers))
        except InputError:
            total = "?"
        out.append(f"{len(wagers)} wager{'s' if len(wagers) != 1 else ''} accepted, {total}")
    else:
        out.append("no wagers accepted")
    out.append(f"not recognized: {_text(rnd.get('not_recognized'))}")
    if rnd.get("void_requested"):
        out.append(f"to be voided: {_text(rnd.get('void_requested'))} (a supervisor confirms: progressivectl void)")
    claims = [c for c in rnd.get("claims") or [] if isinstance(c, dict)]
    if claims:
        out += _table([["claim", "seat", "spot", "amount", "status"]] + [
            [_text(c.get("claim_id")), _text(c.get("seat")), _text(c.get("spot")), f"${_text(c.get('amount'))}",
             _text(c.get("status")) + (f" ({_text(c.get('by'))})" if c.get("by") else "")] for c in claims],
            right=frozenset({1, 3}))
    print("\n".join(out))
    return 0


def _done(args: argparse.Namespace, result: Any) -> int:
    """What an action answered: its message for people, the whole result with --json."""
    if args.json:
        return _dump_json(result)
    if isinstance(result, dict) and isinstance(result.get("message"), str):
        print(result["message"])
    elif isinstance(result, str):
        print(result)
    elif result in (None, True, {}):
        print(f"{args.command}: done")
    else:
        print(f"{args.command}: done: {json.dumps(result)}")
    return 0


def _read_line(data: bytes, field: str) -> str:
    line = data.split(b"\n", 1)[0].removesuffix(b"\r")
    try:
        secret = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(field, "the secret is not UTF-8 text") from None
    if not secret:
        raise InputError(field, "the first line is empty: no secret")
    return secret


def read_secret(prompt: str, *, confirm: bool = False, secret_file: str | None = None) -> str:
    """The one way a secret is read, never from the command line (other users see it in the process list): from
    `secret_file` (its owner's only), else the first line of standard input when it is not a terminal, else asked
    on the terminal (twice with `confirm`, for a secret being set). Empty is refused."""
    import os
    import stat

    if secret_file is not None:
        name = "--secret-file"
        try:
            fd = os.open(secret_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise InputError(name, f"{secret_file}: cannot read: {e.strerror or e}") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise InputError(name, f"{secret_file} is a directory")
            if st.st_mode & 0o077:
                raise InputError(name, f"{secret_file} may be read by other users (mode "
                                       f"{stat.S_IMODE(st.st_mode):04o}): make it its owner's only (chmod 600)")
            return _read_line(f.read(4096), name)
    if sys.stdin is not None and not sys.stdin.isatty():
        line = sys.stdin.buffer.readline(4096)
        if not line:
            raise InputError("secret", "standard input is empty: give --secret-file FILE, or run on a terminal to be "
                                       "asked for it")
        return _read_line(line, "secret")
    import getpass

    try:
        secret = getpass.getpass(prompt)
        if secret and confirm and getpass.getpass("Again: ") != secret:
            raise InputError("secret", "the two entries differ")
    except EOFError:
        secret = ""
    if not secret:
        raise InputError("secret", "none given")
    return secret


def _secret(args: argparse.Namespace) -> str:
    """A supervisor's secret for a request to the daemon."""
    return read_secret(f"Secret of supervisor {args.supervisor}: ", secret_file=args.secret_file)


def _supervised(args: argparse.Namespace, op: str, **call_args: Any) -> int:
    if not args.supervisor.strip():
        raise InputError("--supervisor", "is empty")
    return _done(args, _ask(args, op, supervisor=args.supervisor, secret=_secret(args), **call_args))


def _cmd_void(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise InputError("--reason", "is empty: say why the round is voided")
    return _supervised(args, "void", reason=args.reason)


def _cmd_settle_round(args: argparse.Namespace) -> int:
    return _maybe_supervised(args, "settle", round_id=args.round_id)


def _maybe_supervised(args: argparse.Namespace, op: str, **call_args: Any) -> int:
    """An operation anyone in the socket group may ask for, which a supervisor may also ask for with more effect."""
    if args.supervisor is not None:
        return _supervised(args, op, **call_args)
    if args.secret_file is not None:
        raise InputError("--secret-file", "is the secret of --supervisor NAME: give both")
    return _done(args, _ask(args, op, **call_args))


def _cmd_deck_replaced(args: argparse.Namespace) -> int:
    return _supervised(args, "deck_replaced")


def _cmd_stub_count(args: argparse.Namespace) -> int:
    call_args: dict[str, Any] = {"stub": _count(args.stub, "STUB", most=52)}
    if args.dealt is not None:
        call_args["dealt"] = _count(args.dealt, "--dealt", most=52)
    return _maybe_supervised(args, "stub_count", **call_args)


def _cmd_table(args: argparse.Namespace) -> int:
    return _supervised(args, args.command.replace("-", "_"))


DEALER = "dealer"  # SEAT of a claim for the dealer's hand (the control socket's `seat` "dealer")


def _cmd_claim(args: argparse.Namespace) -> int:
    seat: int | str
    if args.seat.strip().lower() == DEALER:
        seat = DEALER
    else:
        try:
            seat = _count(args.seat, "SEAT", least=1)
        except InputError:
            raise InputError("SEAT", f"must be a seat number (1 or more) or \"dealer\", not {args.seat!r}") from None
    call_args: dict[str, Any] = {"seat": seat, "cards": list(args.cards)}
    if args.spot is not None:
        if not args.spot.strip():
            raise InputError("--spot", "is empty: name the wager spot, e.g. five-card-hand-bonus")
        call_args["spot"] = args.spot.strip()
    result = _ask(args, "claim", **call_args)
    _done(args, result)
    if not args.json and isinstance(result, dict) and isinstance(result.get("draws"), dict):
        print(_draws_line(result["draws"]))
    return 0


def _draws_line(draws: dict[str, Any]) -> str:
    """The round's Magic Card and Lucky Bonus position, as the claim's answer gives them (docs/rounds.md)."""
    magic, lucky = draws.get("magic_card"), draws.get("lucky_seat")
    where = "none" if lucky is None else "the dealer's position" if lucky == DEALER else f"seat {lucky}"
    return f"drawn at lock-out: Magic Card {'none' if magic is None else magic}, Lucky Bonus {where}"


def _cmd_approve(args: argparse.Namespace) -> int:
    return _supervised(args, "approve", claim_id=args.claim_id)


def _cmd_reject(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise InputError("--reason", "is empty: say why the claim is rejected")
    return _supervised(args, "reject", claim_id=args.claim_id, reason=args.reason)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        args = _parser().parse_args(argv)
        handler = {
            "settle": _cmd_settle, "odds": _cmd_odds, "check-paytable": _cmd_check_paytable,
            "paytables": _cmd_paytables, "audit": _cmd_audit, "meters": _cmd_meters, "history": _cmd_history,
            "check-config": _cmd_check_config, "hash-credential": _cmd_hash_credential,
            "approval-key": _cmd_approval_key,
            "status": _cmd_status, "round": _cmd_round, "void": _cmd_void, "settle-round": _cmd_settle_round,
            "deck-replaced": _cmd_deck_replaced, "stub-count": _cmd_stub_count, "close-table": _cmd_table,
            "open-table": _cmd_table, "claim": _cmd_claim, "approve": _cmd_approve, "reject": _cmd_reject,
        }[args.command]
        return handler(args)
    except _Exit as e:
        print(e.line, file=sys.stderr)
        return e.status
    except InputError as e:
        print(f"progressivectl: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # interrupted at a prompt or while waiting for the daemon
        print(file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not bad input: still one line unless asked for the traceback
        if debug:
            raise
        print(f"progressivectl: internal error: {type(e).__name__}: {e} (run with --debug for details)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

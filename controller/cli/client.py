"""The `progressivectl` commands that ask the running daemon over its control socket (docs/operations.md):
`status`, `round`, the actions (`void`, `settle-round`, `deck-replaced`, `stub-count`, `close-table`,
`open-table`, `claim`, `approve`, `reject`), and `meters` and `history` (which read a state directory instead with
`--state`). Exit status: 0 done; 2 bad input or a request the daemon refused; 1 no daemon answered, or it failed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.cli.common import EXIT_UNAVAILABLE, Exit, dump_json, no_such_meter, read_secret, show_hits, show_meters
from controller.errors import InputError
from controller.exits import EXIT_BAD_INPUT
from controller.money import format_cents, parse_cents
from controller.positions import DEALER
from controller.service.control import (
    DEFAULT_SOCKET as _DEFAULT_SOCKET,  # defined once (control.py imports the stdlib only)
)
from controller.service.control import SOCKET_ENV as _SOCKET_ENV

# Arguments of a request the daemon may name in a refusal, and the option the user typed them with.
_OPTION_OF = {"supervisor": "--supervisor", "reason": "--reason", "dealt": "--dealt", "meter": "--meter",
              "limit": "--limit", "round_id": "ROUND_ID", "stub": "STUB", "seat": "SEAT", "cards": "CARDS",
              "claim_id": "CLAIM_ID", "spot": "--spot", "table": "TABLE", "seq": "--seq"}


def _live_options(p: argparse.ArgumentParser, json_option: bool = False) -> None:
    p.add_argument("--socket", metavar="PATH",
                   help=f"the daemon's control socket (default: ${_SOCKET_ENV}, else {_DEFAULT_SOCKET})")
    p.add_argument("--timeout", default="10", metavar="SECONDS", help="how long to wait for the daemon (default 10)")
    if json_option:
        p.add_argument("--json", action="store_true", help="the daemon's answer as JSON, for scripts")


def _supervisor_options(p: argparse.ArgumentParser, optional: str | None = None) -> None:
    """--supervisor NAME and its --secret-file; with `optional` (the help of --supervisor), a supervisor may ask
    what anyone in the socket group may, with more effect."""
    if optional is None:
        p.add_argument("--supervisor", required=True, metavar="NAME", help="the supervisor who authorizes this")
        p.add_argument("--secret-file", type=Path, metavar="FILE",
                       help="read the supervisor's secret from the first line of FILE (mode 0600); default: standard "
                            "input when it is not a terminal, else a prompt")
        return
    p.add_argument("--supervisor", metavar="NAME", help=optional)
    p.add_argument("--secret-file", type=Path, metavar="FILE",
                   help="with --supervisor: read the secret from the first line of FILE (mode 0600)")


def add_meters(sub: Any) -> None:
    m = sub.add_parser("meters", help="every meter: of the running daemon, or of a state directory (--state)")
    m.add_argument("--state", type=Path, metavar="DIR",
                   help="read this state directory's journal instead of asking the daemon")
    m.add_argument("--meter", help="only this meter")
    m.add_argument("--json", action="store_true", help="the meters as JSON, for scripts")
    _live_options(m)
    m.set_defaults(handler=_cmd_meters)


def add_history(sub: Any) -> None:
    h = sub.add_parser("history", help="the hit history: of the running daemon, or of a state directory (--state)")
    h.add_argument("--state", type=Path, metavar="DIR",
                   help="read this state directory's journal instead of asking the daemon")
    h.add_argument("--meter", help="only this meter")
    h.add_argument("--limit", metavar="N", help="only the N most recent hits")
    h.add_argument("--json", action="store_true", help="the hits as JSON, for scripts")
    _live_options(h)
    h.set_defaults(handler=_cmd_history)


def add_parsers(sub: Any) -> None:
    s = sub.add_parser("status", help="the running daemon: table, round, blocks, devices, meters, ledger, uptime")
    _live_options(s, json_option=True)
    s.set_defaults(handler=lambda args: _report(args, _status_lines))

    r = sub.add_parser("round", help="the current round of the running daemon: phase, accepted wagers and claims")
    only = r.add_mutually_exclusive_group()
    only.add_argument("--id", dest="only", action="store_const", const="id",
                      help="print the round's id only (for a script: settle-round \"$(progressivectl round --id)\")")
    only.add_argument("--pending", dest="only", action="store_const", const="pending",
                      help="print the id of the claim that awaits a supervisor only (status 1 when none does)")
    _live_options(r, json_option=True)
    r.set_defaults(handler=_cmd_round)

    v = sub.add_parser("void", help="void the round being dealt (shoe jam, misdeal): every wager is returned")
    v.add_argument("--reason", required=True, metavar="TEXT", help="why, for the journal (e.g. \"misdeal\")")
    v.add_argument("--round", dest="round_id", metavar="ROUND_ID",
                   help="the round meant (`progressivectl round`): voided only if it is still the round being dealt "
                        "once the secret is checked, never the next one")
    _supervisor_options(v)
    _live_options(v, json_option=True)
    v.set_defaults(handler=_cmd_void)

    t = sub.add_parser("settle-round", help="tell the daemon the dealer finished settling round ROUND_ID")
    t.add_argument("round_id", metavar="ROUND_ID", help="the round, e.g. CS-07-r12 (see `progressivectl round`)")
    _supervisor_options(t, optional="a supervisor settles a round a wrong stub count asked to void, where the void "
                                    "cannot be (an award of the round was paid)")
    _live_options(t, json_option=True)
    t.set_defaults(handler=_cmd_settle_round)

    d = sub.add_parser("deck-replaced", help="a supervisor confirms a new deck is in use")
    _supervisor_options(d)
    _live_options(d, json_option=True)
    d.set_defaults(handler=_cmd_deck_replaced)

    k = sub.add_parser("stub-count", help="enter the count of the undealt stub (tables without a counting shuffler)")
    k.add_argument("stub", metavar="STUB", help="cards counted in the stub")
    k.add_argument("--dealt", metavar="N", help="cards dealt, when the shoe does not report them")
    _supervisor_options(k, optional="a supervisor's recount (with the secret, as for void): a count of 52 withdraws "
                                    "the void a wrong count asked for")
    _live_options(k, json_option=True)
    k.set_defaults(handler=_cmd_stub_count)

    for name, what in (("close-table", "close the table: progressive wagering disabled until it is opened"),
                       ("open-table", "open the table again")):
        c = sub.add_parser(name, help=what)
        _supervisor_options(c)
        _live_options(c, json_option=True)
        c.set_defaults(handler=_cmd_table)

    c = sub.add_parser("claim", help="claim a jackpot hand for a seat, or the dealer's hand")
    c.add_argument("seat", metavar="SEAT",
                   help="the seat holding the hand, or \"dealer\" for the dealer's hand (every wager on it)")
    c.add_argument("cards", metavar="CARDS", nargs="+", help="the hand's cards, e.g. AS KS QS JS TS")
    c.add_argument("--spot", metavar="SPOT",
                   help="which wager spot of the seat, e.g. five-card-hand-bonus (default: the seat's first "
                        "wager on its own hand)")
    _live_options(c, json_option=True)
    c.set_defaults(handler=_cmd_claim)

    a = sub.add_parser("approve", help="a supervisor approves a jackpot claim")
    a.add_argument("claim_id", metavar="CLAIM_ID")
    _supervisor_options(a)
    _live_options(a, json_option=True)
    a.set_defaults(handler=_cmd_approve)

    j = sub.add_parser("reject", help="a supervisor rejects a jackpot claim")
    j.add_argument("claim_id", metavar="CLAIM_ID")
    j.add_argument("--reason", required=True, metavar="TEXT", help="why the claim is rejected, for the journal")
    _supervisor_options(j)
    _live_options(j, json_option=True)
    j.set_defaults(handler=_cmd_reject)

    x = sub.add_parser("clear-anchor", help="at the link authority: a supervisor clears the anchor of a table kept "
                                            "aside as planted (--socket: the authority's socket)")
    x.add_argument("table", metavar="TABLE", help="the linked table whose anchor is kept aside")
    x.add_argument("--seq", required=True, metavar="N",
                   help="the entry number of the anchor kept aside, as the authority's status shows it")
    _supervisor_options(x)
    _live_options(x, json_option=True)
    x.set_defaults(handler=_cmd_clear_anchor)


def _offline(args: argparse.Namespace) -> bool:
    """--state: read a state directory rather than ask the daemon."""
    if args.state is None:
        return False
    if args.socket is not None:
        raise InputError("--socket", "cannot be used with --state (--state reads a state directory, not the daemon)")
    return True


def _cmd_meters(args: argparse.Namespace) -> int:
    if _offline(args):
        from controller.cli.audit import cmd_meters

        return cmd_meters(args.state, args.json, args.meter)
    return show_meters(_select_meter(_rows(args, _ask(args, "meters")), args.meter), args.json)


def _cmd_history(args: argparse.Namespace) -> int:
    limit = _count(args.limit, "--limit", least=1) if args.limit is not None else None
    if _offline(args):
        from controller.cli.audit import cmd_history

        return cmd_history(args.state, args.json, args.meter, limit)
    hits = _select_meter(_rows(args, _ask(args, "history")), args.meter, hits=True)
    if args.meter is not None and not hits:  # no hit yet, or no such meter: the meters tell which
        _select_meter(_rows(args, _ask(args, "meters")), args.meter)
    return show_hits(hits, args.json, limit)


def _count(text: str, field: str, least: int = 0, most: int | None = None) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii() or int(t) < least or (most is not None and int(t) > most):
        bound = f"{least}..{most}" if most is not None else f"at least {least}"
        raise InputError(field, f"must be a whole number, {bound}, not {text!r}")
    return int(t)


def _ask(args: argparse.Namespace, op: str, **call_args: Any) -> Any:
    """Send `op` to the running daemon; its result, or Exit with the status of docs/cli.md."""
    from controller.service.control import ControlClient, ControlError, DaemonUnavailable

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
        raise Exit(EXIT_UNAVAILABLE, f"progressivectl: {e.path}: {e.reason}: the daemon is not running, or the "
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
        raise Exit(status, f"progressivectl: {field}: {message}") from None


def _not_understood(args: argparse.Namespace, what: str) -> Exit:
    return Exit(EXIT_UNAVAILABLE, f"progressivectl: {args.command}: the daemon's answer is not understood ({what})")


def _rows(args: argparse.Namespace, result: Any) -> list[dict[str, Any]]:
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise _not_understood(args, "expected a list of objects")
    return result


def _select_meter(rows: list[dict[str, Any]], meter: str | None, hits: bool = False) -> list[dict[str, Any]]:
    if meter is None:
        return rows
    chosen = [r for r in rows if r.get("meter") == meter]
    if not chosen and not hits:
        raise no_such_meter(meter, {str(r.get("meter")) for r in rows})
    return chosen


def _table(rows: list[list[str]], right: frozenset[int] = frozenset(), indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
                               ).rstrip() for r in rows]


def _duration(seconds: Any) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        return "?"
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return (f"{days}d " if days else "") + f"{hours:02d}:{minutes:02d}:{s:02d}"


def _identity_word(identity: Any) -> str:
    """A device's identity check in a word: checked, not checked, or FAILED (its reason on a line of its own)."""
    if not isinstance(identity, str):
        return "?"
    if identity == "checked" or identity.startswith("not checked"):
        return identity.partition(":")[0]
    return "FAILED"


def _text(value: Any) -> str:
    return "?" if value is None else str(value)


def _report(args: argparse.Namespace, render: Callable[[dict[str, Any]], list[str]]) -> int:
    """What `status` or `round` answered: the whole of it with --json, else its lines for people."""
    answer = _ask(args, args.command)
    if args.json:
        return dump_json(answer)
    if not isinstance(answer, dict):
        raise _not_understood(args, "expected an object")
    print("\n".join(render(answer)))
    return 0


def _status_lines(st: dict[str, Any]) -> list[str]:
    if st.get("role") == "link-authority":
        return _authority_lines(st)
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
    seats = [x for x in st.get("seats_disabled") or [] if isinstance(x, dict)]
    if seats:
        out.append("seats disabled: " + "; ".join(
            f"{_text(x.get('seat'))} ({_text(x.get('device'))} down" + (f": {x['reason']})" if x.get("reason") else ")")
            for x in seats))
    devices = [d for d in st.get("devices") or [] if isinstance(d, dict)]
    down = sum(1 for d in devices if not d.get("up"))
    out.append(f"devices: {len(devices) - down} up, {down} down")
    if devices:
        out += _table([["device", "kind", "model", "identity", "state", "errors", "last error"]] + [
            [_text(d.get("id")), _text(d.get("kind")), _text(d.get("model")), _identity_word(d.get("identity")),
             "up" if d.get("up") else "DOWN", _text(d.get("errors")),
             _text(d.get("last_error")) if d.get("last_error") else ""] for d in devices], right=frozenset({5}))
        out += [f"  {_text(d.get('id'))}: {d['identity']}" for d in devices
                if _identity_word(d.get("identity")) == "FAILED"]
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
    return out


def _authority_lines(st: dict[str, Any]) -> list[str]:
    """A link authority's status: its meters and every linked table, online or OFFLINE, and its last answer."""
    out = [f"link authority {_text(st.get('authority'))}, up {_duration(st.get('uptime_seconds'))} (progressived "
           f"{_text(st.get('version'))}); broker {'connected' if st.get('broker_connected') else 'NOT CONNECTED'}; "
           f"ledger head seq {_text(st.get('ledger_head_seq'))}"]
    for m in [m for m in st.get("meters") or [] if isinstance(m, dict)]:
        out.append(f"meter {_text(m.get('meter'))}: ${_text(m.get('amount'))} (reset ${_text(m.get('reset'))})")
        out += [f"  locked {_text(lk.get('claim'))}: ${_text(lk.get('amount'))} table {_text(lk.get('table'))} seat "
                f"{_text(lk.get('seat'))}, awaiting approval" for lk in m.get("locked") or [] if isinstance(lk, dict)]
    for t in [t for t in st.get("tables") or [] if isinstance(t, dict)]:
        ack = t.get("last_ack") if isinstance(t.get("last_ack"), dict) else None
        out.append(f"{_text(t.get('table'))}: {'online' if t.get('online') else 'OFFLINE'} since {_text(t.get('since'))}"
                   f" ({_text(t.get('why'))}); last answered: "
                   + (f"#{_text(ack.get('seq'))} {_text(ack.get('outcome'))} at {_text(ack.get('at'))}" if ack else "none"))
        if isinstance(sus := t.get("anchor_suspect"), dict):
            out.append(f"  anchor kept aside as planted: seq {_text(sus.get('seq'))} ({_text(sus.get('reports'))} "
                       "report(s)); a supervisor clears it: progressivectl clear-anchor")
    return out


def _round_lines(rnd: dict[str, Any]) -> list[str]:
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
    return out


def _done(args: argparse.Namespace, result: Any) -> int:
    """What an action answered: its message for people, the whole result with --json."""
    if args.json:
        return dump_json(result)
    if isinstance(result, dict) and isinstance(result.get("message"), str):
        print(result["message"])
    elif isinstance(result, str):
        print(result)
    elif result in (None, True, {}):
        print(f"{args.command}: done")
    else:
        print(f"{args.command}: done: {json.dumps(result)}")
    return 0


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
    if args.round_id is not None:
        return _supervised(args, "void", reason=args.reason, round_id=args.round_id)
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




def _cmd_round(args: argparse.Namespace) -> int:
    if getattr(args, "only", None) is None:
        return _report(args, _round_lines)
    rnd = _ask(args, "round")
    if not isinstance(rnd, dict):
        raise _not_understood(args, "expected an object")
    if args.only == "id":
        print(_text(rnd.get("id")))
        return 0
    waiting = [c for c in rnd.get("claims") or [] if isinstance(c, dict) and c.get("status") == "pending"]
    if not waiting:
        print(f"progressivectl: no claim of round {_text(rnd.get('id'))} awaits a supervisor", file=sys.stderr)
        return 1
    print(_text(waiting[0].get("claim_id")))
    return 0


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


def _cmd_clear_anchor(args: argparse.Namespace) -> int:
    if not args.table.strip():
        raise InputError("TABLE", "is empty: name the linked table")
    if len(args.seq.strip()) > 19:  # before int(): a number of thousands of digits is refused in one line
        raise InputError("--seq", f"must be a whole number, 1..{2**63 - 1}, not {args.seq[:30]!r}...")
    seq = _count(args.seq, "--seq", least=1, most=2**63 - 1)
    return _supervised(args, "clear_anchor", table=args.table.strip(), seq=seq)


def _cmd_reject(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise InputError("--reason", "is empty: say why the claim is rejected")
    return _supervised(args, "reject", claim_id=args.claim_id, reason=args.reason)


__all__ = ["add_history", "add_meters", "add_parsers"]

"""progressive-hil: run a simulated table and drive it from the shell.

    progressive-hil run config/hil/caribbean-stud-7.toml --control /tmp/hil.sock --connections drivers.toml
    progressive-hil --control /tmp/hil.sock place 3 progressive --amount 5.00
    progressive-hil --control /tmp/hil.sock fault seat-3 corrupt 2
    progressive-hil conform --kind seat 192.0.2.10:502 --unit 1

Exit status: 0 done, 1 the rig refused (the reason on stderr), 2 bad input, 69 no rig on the socket,
70 internal error. ``--json`` prints the rig's reply as one JSON object for scripts. ``conform`` (the
conformance kit, hil/conform.py) exits 0 when every required check passes, 1 when one fails, 3 when none
failed but some could not run without ``--operator``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import threading
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn

import structlog

from controller.errors import InputError
from controller.exits import EXIT_BAD_INPUT, EXIT_INTERNAL
from controller.money import format_dollars_human, parse_cents
from hil import control

EXIT_REFUSED = 1
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE
EXIT_INCOMPLETE = 3  # conform: nothing failed, but checks that need an operator did not run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2, as for any bad input
        raise InputError("arguments", message)


def _parser() -> argparse.ArgumentParser:
    # --control and --json are accepted before or after the command.
    common = _Parser(add_help=False)
    common.add_argument("--control", metavar="SOCKET", default=argparse.SUPPRESS,
                        help="control socket (default: $PROGRESSIVE_HIL_SOCKET or progressive-hil.sock "
                             "in $XDG_RUNTIME_DIR or /tmp)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the reply as JSON")
    p = _Parser(prog="progressive-hil", parents=[common],
                description="Hardware-in-the-loop rig: simulated table devices for the progressive controller")
    p.add_argument("--debug", action="store_true", help="show a traceback for internal errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def cmd(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    r = cmd("run", "start a rig from CONFIG and serve it until Ctrl-C")
    r.add_argument("config", type=Path)
    r.add_argument("--connections", type=Path, metavar="FILE", help="also write the driver connections (TOML)")
    r.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="the least important lines logged (default info)")
    c = cmd("check", "validate a rig configuration and exit")
    c.add_argument("config", type=Path)

    cmd("status", "devices, buses, wires and the faults in force")
    cmd("connections", "how a driver reaches each device")
    x = cmd("place", "put a chip on a seat's wager spot")
    x.add_argument("seat", type=int)
    x.add_argument("spot")
    x.add_argument("--amount", metavar="DOLLARS", help="the wager read by the device, e.g. 5.00")
    x = cmd("remove", "take a chip off a seat's wager spot")
    x.add_argument("seat", type=int)
    x.add_argument("spot")
    x = cmd("lockout", "press the lock-out button")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("shuffle", "the shuffler finishes a shuffle and reports its card count")
    x.add_argument("count", type=int)
    x.add_argument("--deck", help="which of two alternating decks (e.g. A or B)")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("shuffle-fault", "the shuffler reports a fault")
    x.add_argument("reason")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("jam", "the shoe jams")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("dispense", "the shoe reports cards dispensed since the shuffle")
    x.add_argument("count", type=int)
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("deal", "the card-reading shoe reads these cards, e.g. AS KD 10H")
    x.add_argument("cards", nargs="+")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("roll", "the dice entry reports a roll")
    x.add_argument("die1", type=int)
    x.add_argument("die2", type=int)
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    x = cmd("sign", "what the meter sign shows")
    x.add_argument("--device", help="which device, when the rig has more than one of its kind")
    cmd("lights", "accepted and win lights by seat, and the lock-out lamp")
    for name, help in (("unplug", "pull the device's cable (a bus device: the whole bus)"),
                       ("replug", "put the cable back"), ("reboot", "restart the device")):
        x = cmd(name, help)
        x.add_argument("name", help="device or bus name")

    k = cmd("conform", "check a real Modbus device against the device contract and print a report")
    k.add_argument("target", help="HOST:PORT (Modbus TCP) or a serial port path (Modbus RTU)")
    k.add_argument("--kind", required=True, choices=["seat", "lockout", "sign"], help="what the device is")
    k.add_argument("--unit", required=True, type=int, help="the device's unit id")
    k.add_argument("--map", help="a shipped register map's name or a map file (default: the kind's shipped "
                                 "map: seat-single, lockout, sign)")
    k.add_argument("--writes", choices=["auto", "multiple", "single"], default="auto",
                   help="what the device declares: multiple writes (15, 16), single only, or auto (default)")
    k.add_argument("--read-back", choices=["yes", "no"], default="yes",
                   help="whether the device's outputs read back (no: a write-only device)")
    k.add_argument("--operator", action="store_true",
                   help="ask a person to place and lift a chip, or press the button")
    k.add_argument("--amount", metavar="DOLLARS",
                   help="with --operator at a seat (required there): the chip's value, checked against what "
                        "the device reads")
    k.add_argument("--operator-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for each thing the operator is asked to do (default 60)")
    k.add_argument("--baud", type=int, default=19200, help="serial: baud rate (default 19200)")
    k.add_argument("--parity", choices=["N", "E", "O"], default="E", help="serial: parity (default E)")
    k.add_argument("--stopbits", type=int, choices=[1, 2], default=1, help="serial: stop bits (default 1)")

    f = cmd("fault", "inject a fault: corrupt, drop, delay, garbage, exception, mute")
    f.add_argument("name", help="device or bus name")
    fs = f.add_subparsers(dest="fault", required=True, parser_class=_Parser)
    direction = _Parser(add_help=False)
    direction.add_argument("--direction", choices=["to-driver", "to-device"], default="to-driver",
                           help="the frames the fault hits: the device's replies (to-driver, the default) or the "
                                "controller's requests (to-device)")
    y = fs.add_parser("corrupt", parents=[direction], help="flip a CRC bit in the next N frames")
    y.add_argument("n", type=int, nargs="?", default=1)
    y = fs.add_parser("drop", parents=[direction], help="lose the next N frames")
    y.add_argument("n", type=int, nargs="?", default=1)
    y = fs.add_parser("delay", parents=[direction], help="hold the next N frames SECONDS longer")
    y.add_argument("seconds")
    y.add_argument("n", type=int, nargs="?", default=1)
    y = fs.add_parser("garbage", help="send bytes that are no valid frame (hex, e.g. ff 00 7e)")
    y.add_argument("hex", nargs="+")
    y = fs.add_parser("exception", help="answer with Modbus exception CODE (or 'off')")
    y.add_argument("code")
    y = fs.add_parser("mute", help="stop answering (on) or answer again (off)")
    y.add_argument("state", choices=["on", "off"])
    return p


# --- client commands ----------------------------------------------------------------------------------


def _request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The control request for a client command."""
    c = args.command
    dev = {"device": args.device} if getattr(args, "device", None) else {}
    if c == "place":
        params: dict[str, Any] = {"seat": args.seat, "spot": args.spot}
        if args.amount is not None:
            params["amount_cents"] = parse_cents(args.amount, "--amount")
        return "place_chip", params
    if c == "remove":
        return "remove_chip", {"seat": args.seat, "spot": args.spot}
    if c == "lockout":
        return "press_lockout", dev
    if c == "shuffle":
        return "shuffle", {"count": args.count, **({"deck": args.deck} if args.deck else {}), **dev}
    if c == "shuffle-fault":
        return "shuffle_fault", {"reason": args.reason, **dev}
    if c == "jam":
        return "jam_shoe", dev
    if c == "dispense":
        return "dispense", {"count": args.count, **dev}
    if c == "deal":
        from controller.cards import parse_card

        for i, card in enumerate(args.cards):  # bad input is refused here, before anything is sent (exit 2)
            parse_card(card, f"cards[{i}]")
        return "deal", {"cards": args.cards, **dev}
    if c == "roll":
        return "roll", {"die1": args.die1, "die2": args.die2, **dev}
    if c == "sign":
        return "sign", dev
    if c in ("status", "connections", "lights", "unplug", "replug", "reboot"):
        return c, ({"name": args.name} if c in ("unplug", "replug", "reboot") else {})
    if c == "fault":
        return _fault_request(args)
    raise InputError("arguments", f"unknown command {c!r}")


def _fault_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    name, fault = args.name, args.fault
    if fault in ("corrupt", "drop"):
        return fault, {"name": name, "n": args.n, "direction": args.direction.replace("-", "_")}
    if fault == "delay":
        try:
            seconds = Decimal(args.seconds)
        except InvalidOperation:
            raise InputError("seconds", f"{args.seconds!r} is not a number of seconds such as 0.5") from None
        if not seconds.is_finite() or seconds <= 0:
            raise InputError("seconds", "must be more than 0")
        return "delay", {"name": name, "seconds": float(seconds), "n": args.n,
                         "direction": args.direction.replace("-", "_")}
    if fault == "garbage":
        text = " ".join(args.hex)
        try:
            bytes.fromhex(text)
        except ValueError:
            raise InputError("hex", f"{text!r} is not hex bytes such as \"ff 00 7e\"") from None
        return "garbage", {"name": name, "hex": text}
    if fault == "exception":
        if args.code.lower() in ("off", "none"):
            return "exception", {"name": name, "code": None}
        try:
            code = int(args.code, 0)
        except ValueError:
            raise InputError("code", f"{args.code!r} is not a Modbus exception code (such as 4 or 0x06) or 'off'") from None
        return "exception", {"name": name, "code": code}
    return "mute", {"name": name, "on": args.state == "on"}


def _print_human(args: argparse.Namespace, op: str, params: dict[str, Any], result: Any) -> None:
    c = args.command
    if op == "place_chip":
        amount = f" ({format_dollars_human(params['amount_cents'])})" if "amount_cents" in params else ""
        if result.get("already_on_the_spot"):
            print(f"seat {args.seat} {args.spot}: a chip was on the spot already (never lifted): the device sees no "
                  "new chip and nothing is wagered; remove it (progressive-hil remove ...) and place it again")
        else:
            print(f"seat {args.seat} {args.spot}: chip placed{amount} on {result['device']}{_acked(result)}")
    elif op == "remove_chip":
        print(f"seat {args.seat} {args.spot}: chip removed from {result['device']}{_acked(result)}")
    elif op in ("press_lockout", "shuffle", "shuffle_fault", "jam_shoe", "dispense", "deal", "roll"):
        print(f"{c}: sent by {result['device']}{_acked(result)}")
    elif op == "sign":
        _print_sign(result)
    elif op == "lights":
        _print_lights(result)
    elif op == "status":
        _print_status(result)
    elif op == "connections":
        _print_connections(result.values())
    elif op in ("unplug", "replug"):
        print(f"{op}ged {args.name}: {', '.join(result['devices'])}")
    elif op == "reboot":
        print(f"rebooted {args.name}")
    else:
        detail = {k: v for k, v in params.items() if k != "name"}
        print(f"{args.name}: {op} " + " ".join(f"{k}={v}" for k, v in detail.items()))


def _acked(result: dict[str, Any]) -> str:
    acked = result.get("acknowledged")
    if acked is None:
        return ""  # Modbus: the driver reads it on its next poll
    if acked:
        return "; acknowledged by the driver"
    return "; not acknowledged yet: the device keeps sending it until a driver does"


def _money(cents: Any) -> str:
    return format_dollars_human(cents) if isinstance(cents, int) else f"{cents} cents"


def _print_sign(result: dict[str, Any]) -> None:
    for label, cents in result.get("amounts", []):
        print(f"meter {label}: {_money(cents)}")
    m = result.get("message")
    if not m:
        print("message: none")
        return
    parts = [str(m.get("message"))]
    if m.get("table"):
        parts.append(f"table {m['table']}")
    if m.get("seat"):
        parts.append(f"seat {m['seat']}")
    if m.get("amount_cents"):
        parts.append(_money(m["amount_cents"]))
    print("message: " + " ".join(parts))


def _print_lights(result: dict[str, Any]) -> None:
    lamp = result.get("lockout_lamp")
    print(f"lock-out lamp: {'none' if lamp is None else ('ON' if lamp else 'off')}")
    for seat, s in result.get("seats", {}).items():
        accepted = ", ".join(s["accepted"]) or "-"
        print(f"seat {seat}: accepted {accepted}; win {'ON' if s['win'] else 'off'}")


def _where(d: dict[str, Any]) -> str:
    if d.get("transport") == "tcp":
        return f"{d['host']}:{d['tcp_port']}"
    return f"{d.get('port')} @{d.get('baud')}"


def _print_connections(conns: Any) -> None:
    rows = [("DEVICE", "KIND", "VIA", "WHERE", "UNIT", "SEATS")]
    for d in conns:
        rows.append((d["name"], d["kind"], d["transport"], _where(d), str(d.get("unit", "-")),
                     ",".join(str(s) for s in d.get("seats", [])) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _print_status(st: dict[str, Any]) -> None:
    print(f"table {st['table']} ({st['seats']} seats) from {st['source']}")
    _print_connections(st["devices"])
    faults = []
    for d in [*st["devices"], *st["buses"]]:
        now = [k for k in ("unplugged", "muted") if d.get(k)]
        if d.get("exception"):
            now.append(f"exception {d['exception']}")
        now += [f"{f['pending']} {kind} pending" for kind, f in d.get("faults", {}).items() if f.get("pending")]
        if now:
            faults.append(f"{d['name']}: " + ", ".join(now))
    print("faults in force: " + ("; ".join(faults) if faults else "none"))
    injected = []
    for d in [*st["devices"], *st["buses"]]:
        kinds = [f"{kind} {f['set']}" + (" bytes" if kind == "garbage" else "")
                 + (f" ({f['applied']} applied)" if "applied" in f else "") for kind, f in d.get("faults", {}).items()]
        if kinds:
            injected.append(f"{d['name']}: " + ", ".join(kinds))
    print("faults set: " + ("; ".join(injected) if injected else "none"))
    for w in [*st["buses"], *st["lines"]]:
        if "frames" in w:
            fr = w["frames"]
            print(f"wire {w['name']}: {fr['to_device']} frames to device, {fr['to_driver']} to driver, "
                  f"{w['dropped']} dropped, {w['corrupted']} corrupted, {w['delayed']} delayed, "
                  f"{w['garbage_bytes']} bytes of garbage")
        elif "dropped" in w:
            print(f"link {w['name']}: {w['dropped']} replies dropped, {w['delayed']} delayed")


def _client(args: argparse.Namespace) -> int:
    op, params = _request(args)
    path = getattr(args, "control", None) or control.default_socket()
    try:
        result = control.request(path, op, **params)
    except control.RigRefused as e:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": str(e)}))
        print(f"progressive-hil: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except control.ControlUnavailable as e:
        print(f"progressive-hil: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if getattr(args, "json", False):
        print(json.dumps({"ok": True, "result": result}, indent=None))
    else:
        _print_human(args, op, params, result)
    return 0


# --- conform ------------------------------------------------------------------------------------------


def _conform(args: argparse.Namespace) -> int:
    from drivers.modbus.registermap import Kind, RegisterMapError
    from hil import conform

    try:
        transport, _, _ = conform.parse_target(args.target)
    except ValueError as e:
        raise InputError("target", str(e)) from None
    units = "1-247 or 255" if transport == "tcp" else "1-247"
    if not (1 <= args.unit <= 247 or (transport == "tcp" and args.unit == 255)):
        raise InputError("--unit", f"{args.unit}: a unit id is {units} on {transport}")
    if args.baud <= 0:
        raise InputError("--baud", f"{args.baud}: must be positive")
    if not 0 < args.operator_timeout <= 3600:
        raise InputError("--operator-timeout", f"{args.operator_timeout}: 0 to 3600 seconds")
    chip = None if args.amount is None else parse_cents(args.amount, "--amount")
    if chip is not None and chip <= 0:
        raise InputError("--amount", f"{args.amount}: a chip's value is more than 0")
    if chip is None and args.operator and args.kind == "seat":
        # without it a seat reading the wager's words the other way round would pass
        raise InputError("--amount", "required with --operator at a seat: the value of the chip to place")
    kind = Kind(args.kind)
    try:
        rmap, name = conform.load_map(kind, args.map)
    except (RegisterMapError, ValueError) as e:
        raise InputError("--map", str(e).splitlines()[0]) from None
    opts = conform.Options(kind, args.target, args.unit, name, transport, args.writes, args.read_back == "yes",
                           args.operator_timeout, chip)

    async def ask(instruction: conform.Instruction) -> bool | None:
        if instruction.action != "confirm":
            print(f"operator: {instruction.text} (waiting up to {args.operator_timeout:g} s)", file=sys.stderr,
                  flush=True)
            return None
        print(f"operator: {instruction.text} [y/n] ", end="", file=sys.stderr, flush=True)
        line = await _read_line(args.operator_timeout)
        return None if line is None else line.strip().lower() in ("y", "yes")

    pymodbus_log = logging.getLogger("pymodbus")
    level = pymodbus_log.level
    pymodbus_log.setLevel(logging.CRITICAL)  # the report says what went wrong, once
    try:
        report = asyncio.run(conform.conform(opts, rmap, baud=args.baud, parity=args.parity,
                                             stopbits=args.stopbits, operator=ask if args.operator else None))
    except (ConnectionError, OSError) as e:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": str(e), "verdict": "FAIL"}))
        print(f"progressive-hil: conform: {e}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        pymodbus_log.setLevel(level)
    if getattr(args, "json", False):
        print(json.dumps(conform.report_json(report)))
    else:
        print(conform.render_text(report), end="")
    return {"PASS": 0, "INCOMPLETE": EXIT_INCOMPLETE}.get(report.verdict, EXIT_REFUSED)


async def _read_line(timeout_s: float) -> str | None:
    """A line from stdin, or None at its end or after ``timeout_s``. Read in a daemon thread: a person who
    never answers must not keep the program from exiting."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future[str | None] = loop.create_future()

    def read() -> None:
        try:
            line: str | None = sys.stdin.readline() or None
        except (OSError, ValueError):  # no stdin to read
            line = None

        def deliver() -> None:
            if not got.done():
                got.set_result(line)

        with contextlib.suppress(RuntimeError):  # the kit ended meanwhile: its loop is closed
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=read, name="operator-answer", daemon=True).start()
    try:
        return await asyncio.wait_for(got, timeout_s)
    except TimeoutError:
        return None


# --- run ----------------------------------------------------------------------------------------------


def _configure_logging(level: str) -> None:
    # Logs go to stderr: stdout carries the driver ports for whoever started the rig.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.dev.ConsoleRenderer(colors=False)],
    )


async def _run(args: argparse.Namespace) -> int:
    from hil.rig import Rig, RigError  # only here: client commands start faster without them

    rig = Rig.from_file(args.config)
    path = getattr(args, "control", None) or control.default_socket()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _serve(rig, path, args, stop)
    except RigError as e:  # a simulator or wire could not start
        print(f"progressive-hil: {e}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if not getattr(args, "json", False):
        print("rig stopped", flush=True)
    return 0


async def _serve(rig: Any, path: str, args: argparse.Namespace, stop: asyncio.Event) -> None:
    """Run the rig and its control socket until ``stop`` is set."""
    async with rig:
        # The connections file is complete before the control socket appears: scripts wait for the socket.
        if args.connections:
            rig.write_driver_config(args.connections)
        async with control.ControlServer(rig, path):
            _announce(rig, path, args)
            await stop.wait()


def _announce(rig: Any, path: str, args: argparse.Namespace) -> None:
    """Print where the drivers reach each device."""
    conns = {n: c.as_dict() for n, c in rig.connections().items()}
    if getattr(args, "json", False):
        print(json.dumps({"table": rig.config.table, "control": str(path), "devices": conns}), flush=True)
        return
    print(f"table {rig.config.table} ({rig.config.seats} seats) from {args.config}")
    _print_connections(conns.values())
    print(f"control socket: {path}")
    if args.connections:
        print(f"driver connections written to {args.connections}")
    print("running; Ctrl-C stops the rig", flush=True)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        args = _parser().parse_args(argv)
        if args.command == "run":
            _configure_logging(args.log_level)
            return asyncio.run(_run(args))
        if args.command == "conform":
            return _conform(args)
        if args.command == "check":
            from hil.rig_config import load_rig_config

            cfg = load_rig_config(args.config)
            n = sum(1 for _ in cfg.devices())
            print(f"{args.config}: table {cfg.table}, {cfg.seats} seats, {n} devices: ok")
            return 0
        return _client(args)
    except InputError as e:
        print(f"progressive-hil: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except control.SocketInUse as e:
        print(f"progressive-hil: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    except Exception as e:  # a bug, not bad input
        if debug:
            raise
        print(f"progressive-hil: internal error: {type(e).__name__}: {e} (run with --debug for details)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())

"""progressive-demo: the table daemon on a simulated table, no hardware, no broker (the README's ``./run``).

The rig (the shipped rig table hil/caribbean-stud-7.toml) runs in-process; the shipped example table
(tables/caribbean-stud.toml) is pointed at it; the journal and both control sockets (control.sock for
`progressivectl`, rig.sock for `progressive-hil`) live in --demo-dir; a scripted dealer plays rounds. The
daemon is `progressived`'s own (controller.cli.daemon.serve): only the rig and the dealer are the demo's.
Both files are package data (progressive_examples), so the demo runs from an installed wheel as from a checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from dataclasses import replace
from pathlib import Path

import structlog

from controller import __version__
from controller.cli import daemon as progressived

DEMO_DIR = Path(".progressive-demo")
DEMO_SUPERVISOR = ("demo-floor", "demo-secret")  # name and secret, for trying approvals on the demo table only


def demo_files() -> tuple[Path, Path]:
    """The shipped example table and the rig table it is cabled as."""
    import progressive_examples

    return progressive_examples.path("tables", "caribbean-stud.toml"), \
        progressive_examples.path("hil", "caribbean-stud-7.toml")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="progressive-demo",
                                description="The table daemon on a simulated Caribbean Stud table (no hardware)")
    p.add_argument("--version", action="version", version=f"progressive-demo {__version__}")
    p.add_argument("--table", type=Path, help="a table's configuration cabled as the rig (default: the shipped "
                                              "example, tables/caribbean-stud.toml)")
    p.add_argument("--rig", type=Path, help="the rig's table (default: the shipped hil/caribbean-stud-7.toml)")
    p.add_argument("--demo-dir", default=str(DEMO_DIR), help="where the journal and both sockets live")
    p.add_argument("--socket", help="the daemon's control socket (default: control.sock in --demo-dir)")
    p.add_argument("--rounds", type=int, help="stop after the scripted dealer played this many rounds")
    p.add_argument("--no-dealer", action="store_true", help="no scripted dealer (drive the rig yourself)")
    p.add_argument("--metrics", help="serve metrics on HOST:PORT (default: none)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                   help="auto: readable lines on a terminal, JSON otherwise (default auto)")
    args = p.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        p.error("--rounds: at least 1")
    if args.metrics is not None:
        host, _, port = args.metrics.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            p.error(f"--metrics: {args.metrics!r} is not HOST:PORT")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from controller.service import logs

    table, rig_file = demo_files()
    table, rig_file = args.table or table, args.rig or rig_file
    if not rig_file.is_file():
        print(f"progressive-demo: --rig: {rig_file}: no such file", file=sys.stderr)
        return 2
    cfg = progressived.load_table(table)
    if cfg is None:
        return 2
    logs.configure(args.log_format, cfg.logging.level)
    logs.set_table_context(table=cfg.table)
    from hil.attach import AttachError
    from hil.control import SocketInUse
    from hil.rig_config import RigConfigError

    try:
        return progressived.run_daemon(lambda: _demo(cfg, rig_file, args))
    except (AttachError, RigConfigError) as e:  # the table is not cabled as the rig, or no rig file
        print(f"progressive-demo: {'--table' if isinstance(e, AttachError) else '--rig'}: {e}", file=sys.stderr)
        return 2
    except SocketInUse as e:  # a demo runs there already: its rig holds the socket
        print(f"progressive-demo: --demo-dir: {e}: a demo is running there already; stop it (Ctrl-C) or give "
              "another --demo-dir", file=sys.stderr)
        return 1


async def _demo(cfg, rig_file: Path, args: argparse.Namespace) -> int:
    from hil.attach import attach
    from hil.control import ControlServer as RigControl
    from hil.rig import Rig

    async with contextlib.AsyncExitStack() as stack:
        d = Path(args.demo_dir).resolve()
        d.mkdir(parents=True, exist_ok=True, mode=0o750)
        rig = await stack.enter_async_context(Rig.from_file(rig_file))
        rig_sock = d / "rig.sock"
        await stack.enter_async_context(RigControl(rig, rig_sock))
        sock = Path(args.socket) if args.socket else d / "control.sock"
        cfg = replace(attach(cfg, rig.connections()), state_dir=d / "state",
                      supervisors=(*cfg.supervisors, _demo_supervisor()))
        structlog.get_logger("progressived").info(
            "demo table on the simulated rig", journal=str(cfg.state_dir),
            status=f"progressivectl status --socket {sock}", rig=f"progressive-hil --control {rig_sock} lights",
            supervisor=f"{DEMO_SUPERVISOR[0]} (secret: {DEMO_SUPERVISOR[1]})")
        listen = None
        if args.metrics:
            host, _, port = args.metrics.rpartition(":")
            listen = (host, int(port))

        async def dealer(daemon, run: asyncio.Task[None]) -> None:
            await _dealer(rig, daemon, args.rounds, run)

        return await progressived.serve(cfg, socket=str(sock), listen=listen,
                                        companion=None if args.no_dealer else dealer)


def _demo_supervisor():
    from controller.config.credentials import PBKDF2, hash_credential, parse_credential
    from controller.config.model import Supervisor

    name, secret = DEMO_SUPERVISOR
    return Supervisor(name, parse_credential(hash_credential(secret, PBKDF2)))


async def _dealer(rig, daemon, rounds: int | None, run: asyncio.Task[None]) -> None:
    from hil.dealer import play

    async with asyncio.timeout(60):
        await daemon.ready.wait()
        while not all(i.up for i in daemon._info.values()):
            await asyncio.sleep(0.05)
    played: list[str] = []
    try:
        await play(rig, daemon, rounds=rounds, seats=daemon.cfg.seats, floorperson=DEMO_SUPERVISOR,
                   on_round=played.append)
    finally:  # also when stopped (Ctrl-C, SIGTERM): what the demo did, and where its journal is
        if daemon.ledger is not None:
            from controller.money import format_cents

            meters = daemon.ledger.state
            structlog.get_logger("progressived").info(
                "demo finished", rounds=len(played),
                amounts={m: format_cents(s.current_cents) for m, s in sorted(meters.items())},
                hits=sum(len(s.history) for s in meters.values()), journal=str(daemon.cfg.state_dir))
    if rounds is not None:
        run.cancel()  # the demo asked for so many rounds: a clean stop


if __name__ == "__main__":
    sys.exit(main())

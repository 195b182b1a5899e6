"""progressived: the table daemon.

    progressived --config /etc/progressive/table.toml     a real table (systemd runs this)
    progressived                                            the demo: a simulated table on the rig,
                                                            no hardware, no broker
    progressived --role link --config /etc/progressive/link.toml
                                                            the link authority of linked meters

The demo starts the hardware-in-the-loop rig in-process (config/hil/caribbean-stud-7.toml), points the
example table (config/tables/caribbean-stud.toml) at it, keeps its journal in ``.progressive-demo/`` and
lets a scripted dealer play rounds. `progressivectl status --socket .progressive-demo/control.sock` and
`progressive-hil --control .progressive-demo/rig.sock ...` talk to it while it runs.

Exit status: 0 after a clean stop (SIGTERM, Ctrl-C, or --rounds played), 2 for a configuration that cannot
be used (every problem printed), 1 when the table cannot start (a damaged journal, a busy port), 70 when a task
the table cannot go on without failed (its reason and traceback logged; controller.app.shell); a storage error
exits 74 from the ledger itself. systemd restarts the daemon from the journal after any of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import replace
from pathlib import Path

from .. import __version__

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
DEMO_RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
DEMO_DIR = Path(".progressive-demo")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="progressived", description="Table progressive controller daemon")
    p.add_argument("--version", action="version", version=f"progressived {__version__}")
    p.add_argument("--role", choices=("table", "link"), default="table",
                   help="table: a table's controller (the default); link: the link authority of linked meters")
    p.add_argument("--config", help="table configuration (TOML); without it, the demo on a simulated table")
    p.add_argument("--socket", help="control socket (default /run/progressive/control.sock; demo: in --demo-dir)")
    p.add_argument("--demo-dir", default=str(DEMO_DIR), help="demo: where the journal and sockets live")
    p.add_argument("--rounds", type=int, help="demo: stop after the scripted dealer played this many rounds")
    p.add_argument("--no-dealer", action="store_true", help="demo: no scripted dealer (drive the rig yourself)")
    p.add_argument("--metrics", help="demo: serve metrics on HOST:PORT (default: none)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), help="override the configured format")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from ..app import logs
    from ..config import load_config
    from ..config.problems import ConfigError

    if args.role == "link":
        return _main_link(args)
    source = Path(args.config) if args.config else DEMO_TABLE
    try:
        cfg = load_config(source)
    except ConfigError as e:
        for problem in e.problems:
            print(problem.line(str(source)), file=sys.stderr)
        return 2
    fmt = args.log_format or ("auto" if not args.config else cfg.logging.format)
    logs.configure(fmt, cfg.logging.level)
    logs.set_table_context(table=cfg.table)
    try:
        return asyncio.run(_run(cfg, args))
    except KeyboardInterrupt:
        return 0
    except _StartError as e:
        print(f"progressived: {e}", file=sys.stderr)
        return 1
    except _Failed as e:
        print(f"progressived: {e}", file=sys.stderr)
        return EXIT_SOFTWARE


EXIT_SOFTWARE = 70  # EX_SOFTWARE: a task of the daemon failed (its traceback is in the log)


class _StartError(Exception):
    pass


class _Failed(Exception):
    pass


def _main_link(args: argparse.Namespace) -> int:
    from ..app import logs
    from ..config.authority import load_authority_config
    from ..config.problems import ConfigError

    if not args.config:
        print("progressived: --role link needs --config FILE (the link authority's configuration)", file=sys.stderr)
        return 2
    try:
        cfg = load_authority_config(Path(args.config))
    except ConfigError as e:
        for problem in e.problems:
            print(problem.line(str(args.config)), file=sys.stderr)
        return 2
    logs.configure(args.log_format or cfg.logging.format, cfg.logging.level)
    logs.set_table_context(authority=cfg.authority)
    try:
        return asyncio.run(_run_link(cfg))
    except KeyboardInterrupt:
        return 0
    except _StartError as e:
        print(f"progressived: {e}", file=sys.stderr)
        return 1


async def _run_link(cfg) -> int:
    import structlog

    from ..app.sdnotify import Notifier, watchdog_interval
    from ..ledger.errors import LedgerError
    from ..link.authority import LinkAuthority

    log = structlog.get_logger("progressived")
    main_task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)
    authority = LinkAuthority(cfg)
    notifier = Notifier()
    try:
        server, _thread = start_metrics(authority.metrics.registry, cfg.metrics.host, cfg.metrics.port)
    except OSError as e:
        raise _StartError(f"metrics: cannot listen on {cfg.metrics.listen}: {e}") from None
    log.info("metrics", url=f"http://{cfg.metrics.listen}/metrics")
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(authority.run(), name="authority")
            await authority.ready.wait()
            notifier.ready(f"link authority {cfg.authority}")
            interval = watchdog_interval()
            if interval:
                tg.create_task(_watchdog(authority, notifier, interval), name="watchdog")
    except* LedgerError as group:
        raise _StartError("; ".join(str(e) for e in group.exceptions)) from None
    except* asyncio.CancelledError:
        pass
    finally:
        notifier.stopping()
        server.shutdown()
    return 0


async def _watchdog(authority, notifier, interval: float) -> None:
    """Pings systemd while the authority's journal takes writes (the health path: a failed ledger stops them)."""
    while True:
        if authority.ledger is not None and authority.ledger.failed is None:
            notifier.watchdog()
        await asyncio.sleep(interval)


def start_metrics(registry, host: str, port: int):
    from prometheus_client.exposition import start_http_server
    return start_http_server(port, addr=host, registry=registry)


async def _run(cfg, args: argparse.Namespace) -> int:
    import structlog

    from ..app.control import ControlServer, socket_path
    from ..app.dice_table import DiceTableDaemon
    from ..app.metrics import Metrics
    from ..app.shell import DaemonFailed
    from ..app.table import TableDaemon
    from ..config.devices import build_drivers
    from ..errors import InputError
    from ..ledger.errors import LedgerError

    log = structlog.get_logger("progressived")
    main_task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)

    async with contextlib.AsyncExitStack() as stack:
        rig = None
        if args.config is None:
            rig, cfg, sock = await _demo(stack, cfg, args)
        else:
            sock = socket_path(args.socket)
        metrics = Metrics(cfg.table)
        listen = (args.metrics.rsplit(":", 1) if args.metrics else None) if args.config is None else \
            (cfg.metrics.host, cfg.metrics.port)
        if listen:
            try:
                server, _thread = metrics.serve(listen[0], int(listen[1]))
            except OSError as e:
                raise _StartError(f"metrics: cannot listen on {listen[0]}:{listen[1]}: {e}") from None
            stack.callback(server.shutdown)
            log.info("metrics", url=f"http://{listen[0]}:{server.server_port}/metrics")
        buses, devices = build_drivers(cfg)
        daemon_class = DiceTableDaemon if cfg.game.dice else TableDaemon
        daemon = daemon_class(cfg, devices, buses=buses, metrics=metrics, control=lambda d: ControlServer(sock, d))
        try:
            async with asyncio.TaskGroup() as tg:
                run = tg.create_task(daemon.run(), name="table")
                if rig is not None and not args.no_dealer:
                    tg.create_task(_dealer(rig, daemon, args.rounds, run), name="dealer")
        except* DaemonFailed as group:
            raise _Failed("; ".join(str(e) for e in group.exceptions)) from None
        except* (LedgerError, InputError, OSError) as group:
            raise _StartError("; ".join(str(e) for e in group.exceptions)) from None
        except* asyncio.CancelledError:
            pass
        except* Exception as group:  # a fault of the daemon itself: its reason in the log, then exit 70
            for e in group.exceptions:
                log.error("the controller failed", error=f"{type(e).__name__}: {e}", exc_info=e)
            raise _Failed("; ".join(f"{type(e).__name__}: {e}" for e in group.exceptions)) from None
    return 0


async def _demo(stack: contextlib.AsyncExitStack, cfg, args: argparse.Namespace):
    import structlog

    from hil.attach import attach
    from hil.control import ControlServer as RigControl
    from hil.rig import Rig

    d = Path(args.demo_dir).resolve()
    d.mkdir(parents=True, exist_ok=True, mode=0o750)
    rig = await stack.enter_async_context(Rig.from_file(DEMO_RIG))
    rig_sock = d / "rig.sock"
    await stack.enter_async_context(RigControl(rig, rig_sock))
    sock = Path(args.socket) if args.socket else d / "control.sock"
    cfg = replace(attach(cfg, rig.connections()), state_dir=d / "state",
                  supervisors=(*cfg.supervisors, _demo_supervisor()))
    structlog.get_logger("progressived").info(
        "demo table on the simulated rig", journal=str(cfg.state_dir),
        status=f"progressivectl status --socket {sock}", rig=f"progressive-hil --control {rig_sock} lights",
        supervisor=f"{DEMO_SUPERVISOR[0]} (secret: {DEMO_SUPERVISOR[1]})")
    return rig, cfg, str(sock)


DEMO_SUPERVISOR = ("demo-floor", "demo-secret")  # name and secret, for trying approvals on the demo table only


def _demo_supervisor():
    from ..config.credentials import PBKDF2, hash_credential, parse_credential
    from ..config.model import Supervisor

    name, secret = DEMO_SUPERVISOR
    return Supervisor(name, parse_credential(hash_credential(secret, PBKDF2)))


async def _dealer(rig, daemon, rounds: int | None, run: asyncio.Task) -> None:
    from hil.dealer import play

    async with asyncio.timeout(60):
        await daemon.ready.wait()
        while not all(i.up for i in daemon._info.values()):
            await asyncio.sleep(0.05)
    await play(rig, daemon, rounds=rounds, seats=daemon.cfg.seats)
    if rounds is not None:
        run.cancel()  # the demo asked for so many rounds: a clean stop


if __name__ == "__main__":
    sys.exit(main())

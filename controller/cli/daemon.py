"""progressived: the table daemon.

    progressived --config /etc/progressive/table.toml     a real table (systemd runs this)
    progressived --role link --config /etc/progressive/link.toml
                                                            the link authority of linked meters

The demo (the same daemon on a simulated table) is `progressive-demo` (hil.demo): this module never imports
the rig.

Exit status: 0 after a clean stop (SIGTERM, Ctrl-C), 2 for a configuration that cannot be used (every problem
printed), 1 when the table cannot start (a damaged journal, a busy port), 70 when a task the table cannot go on
without failed (its reason and traceback logged; controller.app.shell), 74 for a storage error: from the ledger
itself once it runs, or at start-up (a disk still full: one line on standard error). systemd restarts the
daemon from the journal after any of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import signal
import sqlite3
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller import __version__
from controller.exits import EXIT_INTERNAL, EXIT_STORAGE

if TYPE_CHECKING:
    import threading
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry
    from structlog.typing import FilteringBoundLogger

    from controller.app.shell import TableShell
    from controller.authority.authority import LinkAuthority
    from controller.config.authority import AuthorityConfig
    from controller.config.model import TableConfig
    from controller.service.sdnotify import Notifier


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="progressived", description="Table progressive controller daemon",
                                epilog="The demo on a simulated table, no hardware: progressive-demo")
    p.add_argument("--version", action="version", version=f"progressived {__version__}")
    p.add_argument("--role", choices=("table", "link"), default="table",
                   help="table: a table's controller (the default); link: the link authority of linked meters")
    p.add_argument("--config", help="the table's (or the link authority's) configuration (TOML)")
    p.add_argument("--socket", help="control socket (default /run/progressive/control.sock; with --role link "
                                    "/run/progressive-link/control.sock)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), help="override the configured format")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from controller.service import logs
    from controller.service.control import socket_path

    if args.role == "link":
        return _main_link(args)
    if not args.config:
        print("progressived: --config FILE is required (the table's configuration); the demo on a simulated "
              "table is progressive-demo", file=sys.stderr)
        return 2
    source = Path(args.config)
    cfg = load_table(source)
    if cfg is None:
        return 2
    logs.configure(args.log_format or cfg.logging.format, cfg.logging.level)
    logs.set_table_context(table=cfg.table)
    _log_warnings(cfg, source)
    listen = (cfg.metrics.host, cfg.metrics.port)
    # the process's own heap, frozen after start-up (controller/app/heap.py); not where serve runs inside another program
    return run_daemon(lambda: serve(cfg, socket=socket_path(args.socket), listen=listen, freeze_heap=True))


def load_table(source: Path) -> TableConfig | None:
    """The table's configuration, checked whole; None after printing every problem, as check-config does."""
    from controller.config import load_config
    from controller.tomlfile.problems import ConfigError

    try:
        return load_config(source)
    except ConfigError as e:
        for problem in e.problems:
            print(problem.line(str(source)), file=sys.stderr)
        return None


def run_daemon(start: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a daemon to its end and give its exit status: 0 after a stop (SIGTERM, Ctrl-C), else why it ended, in
    one line on standard error."""
    try:
        return asyncio.run(start())
    except KeyboardInterrupt:
        return 0
    except _Ending as e:
        print(f"progressived: {e}", file=sys.stderr)
        return e.status


# An OSError met at start-up that says the disk has no room (full, over quota, a file too large). Not EIO: a
# serial port unplugged says EIO too; the ledger makes a failing disk's EIO its own FatalStorageError.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class _Ending(Exception):
    """Why the daemon stops, one line, and its exit status."""

    status = 1


class _StartError(_Ending):
    status = 1


class _Failed(_Ending):
    status = EXIT_INTERNAL


class _StorageError(_Ending):
    status = EXIT_STORAGE


def _log_warnings(cfg: TableConfig | AuthorityConfig, source: Path) -> None:
    import structlog

    log = structlog.get_logger("progressived")
    for w in cfg.warnings:  # as check-config prints them
        log.warning(w.message, config=str(source), path=w.path, hint=w.hint)


def _is_storage_error(e: BaseException) -> bool:
    """A write that found no room or failed on the device: the ledger's own FatalStorageError, or what
    start-up met before the ledger could say so (the anchor's file, SQLite's own error)."""
    from controller.ledger.errors import FatalStorageError

    if isinstance(e, FatalStorageError):
        return True
    if isinstance(e, OSError):
        return e.errno in _STORAGE_ERRNOS
    if isinstance(e, sqlite3.Error):
        name = getattr(e, "sqlite_errorname", "")
        return name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and "READ" not in name)
    return False


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


def _ending(group: BaseExceptionGroup, log: FilteringBoundLogger,
            start_errors: tuple[type[BaseException], ...]) -> _Ending:
    """The one way the daemon ends for what its task group raised, the gravest first: a storage error (74),
    a task that failed (70, logged with its traceback), a start-up refusal (1). One clause decides: several
    clauses of an ``except*`` that each raise escape together as an ExceptionGroup, a traceback on standard
    error and status 1."""
    from controller.app.shell import DaemonFailed

    errors = [e for e in _leaves(group) if not isinstance(e, asyncio.CancelledError)]
    storage = [e for e in errors if _is_storage_error(e)]
    if storage:
        for e in storage:
            log.error("storage error", error=f"{type(e).__name__}: {e}")
        return _StorageError("storage error, exiting to start again from the journal once there is room: "
                             + "; ".join(str(e) for e in storage))
    failed = [e for e in errors if isinstance(e, DaemonFailed)]
    other = [e for e in errors if not isinstance(e, (DaemonFailed, *start_errors))]
    for e in other:  # a fault of the daemon itself: its reason in the log, then exit 70
        log.error("the controller failed", error=f"{type(e).__name__}: {e}", exc_info=e)
    if failed or other:
        return _Failed("; ".join([str(e) for e in failed] + [f"{type(e).__name__}: {e}" for e in other]))
    return _StartError("; ".join(str(e) for e in errors))


def _main_link(args: argparse.Namespace) -> int:
    from controller.config.authority import load_authority_config
    from controller.service import logs
    from controller.tomlfile.problems import ConfigError

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
    _log_warnings(cfg, Path(args.config))  # a supervisors' file others can read, as at a table
    from controller.service.control import DEFAULT_LINK_SOCKET

    # $PROGRESSIVE_SOCKET names a table's socket: the authority's is --socket or its own default
    return run_daemon(lambda: _run_link(cfg, args.socket or DEFAULT_LINK_SOCKET))


async def _run_link(cfg: AuthorityConfig, socket: str) -> int:
    import structlog

    from controller.app.heap import freeze_when_ready
    from controller.authority.authority import LinkAuthority
    from controller.ledger.errors import LedgerError
    from controller.service.control import ControlServer, ServerError
    from controller.service.sdnotify import Notifier, watchdog_interval

    log = structlog.get_logger("progressived")
    main_task = asyncio.current_task()
    assert main_task is not None
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
    control = ControlServer(socket, authority)  # reads only: status, meters
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(authority.run(), name="authority")
            tg.create_task(_standby(authority, notifier, watchdog_interval()), name="standby")
            await authority.ready.wait()
            try:
                await control.start()
            except (ServerError, OSError) as e:
                raise _StartError(f"control socket {socket}: {e}") from None
            notifier.ready(f"link authority {cfg.authority}")
            tg.create_task(freeze_when_ready(authority.ready), name="heap")  # the process's own heap
            interval = watchdog_interval()
            if interval:
                tg.create_task(_watchdog(authority, notifier, interval), name="watchdog")
    except* asyncio.CancelledError:
        pass
    except* Exception as group:  # noqa: BLE001 - _ending logs each with its traceback and exits with a status
        raise _ending(group, log, (LedgerError, _StartError)) from None
    finally:
        notifier.stopping()
        await control.stop()
        server.shutdown()
    return 0


async def _standby(authority: LinkAuthority, notifier: Notifier, interval: float | None) -> None:
    """While the journal is another authority's: systemd told this one is up as a standby (STATUS says so), and its
    watchdog pinged while it waits; done once it holds the journal (then it is ready: the status is replaced)."""
    waits = [asyncio.ensure_future(authority.standby.wait()), asyncio.ensure_future(authority.ready.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    if authority.ready.is_set():
        return
    notifier.ready(f"link authority {authority.cfg.authority}: {authority.standby_reason}")
    while not authority.ready.is_set():
        if interval:
            notifier.watchdog()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(authority.ready.wait(), interval or 60.0)


async def _watchdog(authority: LinkAuthority, notifier: Notifier, interval: float) -> None:
    """Pings systemd while the authority's journal takes writes (the health path: a failed ledger stops them)."""
    while True:
        if authority.ledger is not None and authority.ledger.failed is None:
            notifier.watchdog()
        await asyncio.sleep(interval)


def start_metrics(registry: CollectorRegistry, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    from prometheus_client.exposition import start_http_server
    return start_http_server(port, addr=host, registry=registry)


# Something run beside the table daemon, in its task group (the demo's scripted dealer): given the daemon and the
# daemon's own task (cancelling it is a clean stop).
Companion = Callable[["TableShell", "asyncio.Task[None]"], Coroutine[Any, Any, None]]


async def serve(cfg: TableConfig, *, socket: str, listen: tuple[str, int] | None, companion: Companion | None = None,
                freeze_heap: bool = False) -> int:
    """The table daemon of `cfg` until SIGTERM or SIGINT (a clean stop: 0), its control socket at `socket`, its
    metrics served at `listen` (None: not served). Raises _Ending for anything else."""
    import structlog

    from controller.app.dice_table import DiceTableDaemon
    from controller.app.heap import freeze_when_ready
    from controller.app.metrics import Metrics
    from controller.app.table import TableDaemon
    from controller.config.devices import build_drivers
    from controller.errors import InputError
    from controller.ledger.errors import LedgerError
    from controller.service.control import ControlServer

    log = structlog.get_logger("progressived")
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)

    async with contextlib.AsyncExitStack() as stack:
        metrics = Metrics(cfg.table)
        if listen:
            try:
                server, _thread = metrics.serve(listen[0], int(listen[1]))
            except OSError as e:
                raise _StartError(f"metrics: cannot listen on {listen[0]}:{listen[1]}: {e}") from None
            stack.callback(server.shutdown)
            log.info("metrics", url=f"http://{listen[0]}:{server.server_port}/metrics")
        buses, devices = build_drivers(cfg)
        daemon_class = DiceTableDaemon if cfg.game.dice else TableDaemon
        daemon = daemon_class(cfg, devices, buses=buses, metrics=metrics, control=lambda d: ControlServer(socket, d))
        try:
            async with asyncio.TaskGroup() as tg:
                run = tg.create_task(daemon.run(), name="table")
                if freeze_heap:
                    tg.create_task(freeze_when_ready(daemon.ready), name="heap")
                if companion is not None:
                    tg.create_task(companion(daemon, run), name="companion")
        except* asyncio.CancelledError:
            pass
        except* Exception as group:  # noqa: BLE001 - a fault of the daemon itself: its reason in the log, then exit 70
            raise _ending(group, log, (LedgerError, InputError, OSError)) from None
    return 0


__all__ = ["Companion", "load_table", "main", "run_daemon", "serve", "start_metrics"]


if __name__ == "__main__":
    sys.exit(main())

"""The command lines for the tests, `progressivectl ARGS` (run_ctl) and `progressive-hil ARGS` (run_hil): in this
process (the command's `main(argv)`, its standard streams, environment and logging configuration swapped for the
call) or, with `process=True`, the installed command as a child process. Each file of CLI tests keeps a few of those
(the contract: a real executable, its exit status and streams); the rest run in-process, where starting Python for
each call would cost most of the files' time."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import structlog

CTL = Path(sys.executable).parent / "progressivectl"
HIL = Path(sys.executable).parent / "progressive-hil"


def run_ctl(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
            process: bool = False) -> subprocess.CompletedProcess[str]:
    return _run(CTL, "controller.cli.ctl", args, stdin=stdin, env=env, process=process, unset="PROGRESSIVE_SOCKET")


def run_hil(*args: str, env: dict[str, str] | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    """A client command waits on the rig's socket: from a coroutine, call this in a thread (asyncio.to_thread)."""
    return _run(HIL, "hil.cli", args, stdin=None, env=env, process=process, unset="PROGRESSIVE_HIL_SOCKET")


def _run(command: Path, module: str, args: tuple[str, ...], *, stdin: str | None, env: dict[str, str] | None,
         process: bool, unset: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != unset}  # the default socket is not the test's to use
    environ.update(env or {})
    if process:
        return subprocess.run([str(command), *args], input=stdin if stdin is not None else "", capture_output=True,
                              text=True, timeout=120, env=environ)
    main = importlib.import_module(module).main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_in, saved_log = dict(os.environ), sys.stdin, structlog.get_config()
    os.environ.clear()
    os.environ.update(environ)
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")  # with a .buffer, as a pipe
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's own refusals and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.stdin = saved_in
        os.environ.clear()
        os.environ.update(saved_env)
        structlog.configure(**saved_log)  # a command that sets up its log (progressive-hil run) sets up the test's
    return subprocess.CompletedProcess([str(command), *args], code, out.getvalue(), err.getvalue())

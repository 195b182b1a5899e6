"""`progressivectl ARGS` for the tests: in this process (`ctl.main(argv)`, its standard streams and environment
swapped for the call) or, with `process=True`, the installed command as a child process. Each file of CLI tests
keeps a few of those (the contract: a real executable, its exit status and streams); the rest run in-process,
where starting Python for each call would cost most of the files' time."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

CTL = Path(sys.executable).parent / "progressivectl"


def run_ctl(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
            process: bool = False) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "PROGRESSIVE_SOCKET"}
    environ.update(env or {})
    if process:
        return subprocess.run([str(CTL), *args], input=stdin if stdin is not None else "", capture_output=True,
                              text=True, timeout=120, env=environ)
    from controller.cli import ctl

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_in = dict(os.environ), sys.stdin
    os.environ.clear()
    os.environ.update(environ)
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")  # with a .buffer, as a pipe
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = ctl.main(list(args))
            except SystemExit as e:  # argparse's own refusals and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        sys.stdin = saved_in
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess([str(CTL), *args], code, out.getvalue(), err.getvalue())

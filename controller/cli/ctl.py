"""progressivectl: the operator's command line.

A contract that other tools script against (docs/cli.md). Bad input exits with status 2 and one
line on stderr that names the field and what is wrong; never a traceback. Each group of commands is
its own module; this one puts them under one parser and runs the command asked for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from controller import __version__
from controller.cli import audit, client, configuration, offline, report
from controller.cli.common import Exit, Parser
from controller.errors import InputError
from controller.exits import EXIT_BAD_INPUT, EXIT_INTERNAL


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="progressivectl", description="Table progressive controller: operator's command line")
    p.add_argument("--version", action="version", version=f"progressivectl {__version__}")
    p.add_argument("--debug", action="store_true", help="show a traceback for internal errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    # In the order --help has always listed them, whatever their group.
    offline.add_settle(sub)
    offline.add_odds(sub)
    offline.add_check_paytable(sub)
    audit.add_parsers(sub)
    report.add_parsers(sub)
    client.add_meters(sub)
    client.add_history(sub)
    offline.add_paytables(sub)
    configuration.add_parsers(sub)
    client.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        args = _parser().parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except Exit as e:
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


__all__ = ["main"]


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The manual pages, built from man/PROGRAM.SECTION.in and the program's own argparse parser.

The prose (NAME, DESCRIPTION, FILES, EXIT STATUS, SEE ALSO) is written by hand in man/; the SYNOPSIS, the
OPTIONS and, for a program with commands, every COMMAND with its arguments are written here from the parser the
program builds, so a page cannot drift from the command line (tests/system/test_install_steps.py renders each page and
looks for every option in it). No dependency: roff is written as text.

    python scripts/manpages.py OUT [VERSION]     writes OUT/man1/*.1 and OUT/man8/*.8 (scripts/release gzips them)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAN = ROOT / "man"

# program -> (section, module, the function that builds its parser: called with [] where it also parses)
PROGRAMS: dict[str, tuple[int, str, str]] = {
    "progressived": (8, "controller.cli.daemon", "_args"),
    "progressivectl": (1, "controller.cli.ctl", "_parser"),
    "progressive-hil": (1, "hil.cli", "_parser"),
    "progressive-console": (1, "controller.console.server", "options"),
    "progressive-demo": (1, "hil.demo", "_args"),
}


class _Caught(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(program: str) -> argparse.ArgumentParser:
    """The parser `program` builds. Some programs build and parse in one function: their parse is stopped at
    its start and the parser taken from it, so nothing of the program runs."""
    _, module, name = PROGRAMS[program]
    build: Callable[..., object] = getattr(importlib.import_module(module), name)
    original = argparse.ArgumentParser.parse_args

    def caught(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> argparse.Namespace:
        raise _Caught(self)

    argparse.ArgumentParser.parse_args = caught  # type: ignore[assignment,method-assign]
    try:
        built = build() if name == "_parser" else build([])
    except _Caught as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    assert isinstance(built, argparse.ArgumentParser), program
    return built


def esc(text: str) -> str:
    """Text as roff reads it: backslashes escaped, no line taken for a request, option dashes as dashes."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.splitlines())


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return parser._get_formatter()._expand_help(action)


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each command, in the order --help lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _term(action: argparse.Action) -> str:
    """The `.TP` tag of an argument: its option strings and what it takes, or the positional's name."""
    if not action.option_strings:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        return f"\\fI{esc(name)}\\fR"
    takes = ""
    if action.nargs != 0:
        if action.choices is not None:
            takes = "{" + ",".join(esc(str(c)) for c in action.choices) + "}"
        else:
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            takes = f"\\fI{esc(metavar)}\\fR"
        if action.nargs in ("*", "+"):
            takes += " ..."
    return ", ".join(f"\\fB{esc(o)}\\fR" + (f" {takes}" if takes else "") for o in action.option_strings)


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        out += [".TP", _term(action)]
        text = _help(parser, action)
        shown = action.default not in (None, False, True, argparse.SUPPRESS, [], ())
        if action.option_strings and action.choices is None and shown and action.nargs != 0 \
                and "default" not in text:
            text = f"{text} (default: {action.default})" if text else f"default: {action.default}"
        out.append(esc(text) if text else "")
    return out


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().removeprefix("usage: ").split())


def _filled(usage: str) -> str:
    """A usage line that wraps at the page's width: between its bracketed groups, never inside one ("[--log-format
    {auto,json,console}]" stays whole)."""
    out, depth = [], 0
    for ch in esc(usage):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        out.append("\\ " if ch == " " and depth > 0 else ch)
    return "".join(out)


def generated(program: str) -> dict[str, list[str]]:
    """The generated parts of `program`'s page, by marker: @SYNOPSIS@, @OPTIONS@ and @COMMANDS@."""
    parser = parser_of(program)
    commands = list(_commands(parser))
    if commands:
        synopsis = [".nf", f"\\fB{esc(program)}\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGUMENTS\\fR]", ".fi"]
    else:
        synopsis = [_filled(_usage(parser))]
    options = [".SH OPTIONS", ".TP", "\\fB\\-h\\fR, \\fB\\-\\-help\\fR", "print the usage and exit", *_arguments(parser)]
    cmds: list[str] = []
    if commands:
        cmds.append(".SH COMMANDS")
        for name, text, sub in commands:
            cmds += [f".SS {esc(name)}", esc(text) if text else "", ".PP", _filled(_usage(sub))]
            nested = list(_commands(sub))
            args = _arguments(sub)
            if args:
                cmds += [".RS", *args, ".RE"]
            if nested:
                cmds += [".RS"]
                for inner, inner_text, inner_sub in nested:
                    cmds += [".TP", f"\\fB{esc(name)} {esc(inner)}\\fR", esc(inner_text) if inner_text else "",
                             ".br", _filled(_usage(inner_sub)), ".RS", *_arguments(inner_sub), ".RE"]
                cmds += [".RE"]
    return {"@SYNOPSIS@": synopsis, "@OPTIONS@": options, "@COMMANDS@": cmds}


def page(program: str, version: str) -> str:
    """`program`'s page: its man/ source with the generated parts put in at their markers."""
    section = PROGRAMS[program][0]
    source = (MAN / f"{program}.{section}.in").read_text(encoding="utf-8")
    parts = generated(program)
    out: list[str] = []
    for line in source.replace("@VERSION@", version).splitlines():
        marker = line.removeprefix('.\\" ').strip()
        if marker in parts:
            out += [x for x in parts.pop(marker) if x != ""]
        else:
            out.append(line)
    missing = [m for m, lines in parts.items() if lines]
    if missing:
        raise SystemExit(f"manpages: man/{program}.{section}.in has no {', '.join(missing)} line")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    if len(argv) == 2:
        version = argv[1]
    else:
        from controller import __version__ as version
    for program, (section, _, _) in PROGRAMS.items():
        d = out / f"man{section}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{program}.{section}").write_text(page(program, version), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

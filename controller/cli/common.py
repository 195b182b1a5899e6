"""What every command group of `progressivectl` shares: its exit statuses, its parser's one-line refusal, the one
way a secret is read, and the output of JSON, meters and hits (the same whether from the daemon or a state
directory)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from controller.errors import InputError

EXIT_UNAVAILABLE = 1  # no daemon answered, or it failed
EXIT_DAMAGED = 1  # a damaged journal


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2, as for any bad input
        raise InputError("arguments", message)


class Exit(Exception):
    """Leave with `status` after printing `line` on standard error."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


def dump_json(value: Any, indent: int | None = 2) -> int:
    json.dump(value, sys.stdout, indent=indent)
    sys.stdout.write("\n")
    return 0


def no_such_meter(meter_id: str, known: Iterable[str]) -> InputError:
    return InputError("--meter", f"unknown meter {meter_id!r}; defined: {', '.join(sorted(known)) or 'none'}")


def show_meters(rows: list[dict[str, Any]], as_json: bool = False) -> int:
    """Meters (as meter_json gives them): as JSON, or for people."""
    if as_json:
        return dump_json(rows)
    for r in rows:
        print(f"{r['meter']}: ${r['shown']} (reset ${r['reset']}, rate {r['rate']}, reserve rate {r['reserve_rate']}"
              + (f", ceiling ${r['ceiling']})" if r["ceiling"] else ")"))
        print(f"    qualifying wagers {r['qualifying_wagers']['count']} for ${r['qualifying_wagers']['amount']}; "
              f"contributions ${r['contributions']}; seed ${r['seed']}; reserve ${r['reserve']}; "
              f"overflow ${r['overflow']}; adjustments ${r['adjustments']}")
        print(f"    paid by the table ${r['paid_by_table']}; by an attendant ${r['paid_by_attendant']}; "
              f"cumulative ${r['cumulative_payouts']}")
        for label, h in r["hits"].items():
            print(f"    {label}: {h['count']} hits, ${h['amount']}")
        for lk in r.get("locked", ()):
            print(f"    locked {lk['claim']}: ${lk['amount']} table {lk['table']} seat {lk['seat']} {lk['award']}, "
                  "awaiting approval")
    return 0


def show_hits(hits: list[dict[str, Any]], as_json: bool = False, limit: int | None = None) -> int:
    """Hits (as hit_json gives them) oldest first, with `limit` only that many of the most recent: as JSON, or for
    people, one a line."""
    hits = sorted(hits, key=lambda h: (h["time"], h["meter"], h["number"]))
    if limit is not None:
        hits = hits[-limit:]
    if as_json:
        return dump_json(hits)
    for h in hits:
        print(f"{h['time']}  {h['meter']} #{h['number']}  table {h['table']} round {h['round']} seat {h['seat']}  "
              f"{h['hand']} {h['award']}  ${h['amount']} ({h['paid_by']})  meter ${h['meter_before']} -> "
              f"${h['meter_after']}  approved by {h['approved_by']}")
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


def state_or_journal(text: str) -> Path | str:
    """--state: a state directory, or the URL of a link authority's journal on PostgreSQL (kept whole: a Path
    would fold its '//')."""
    return text if text.startswith(("postgresql://", "postgres://")) else Path(text)


__all__ = ["EXIT_DAMAGED", "EXIT_UNAVAILABLE", "Exit", "Parser", "dump_json", "no_such_meter", "read_secret",
           "show_hits", "show_meters", "state_or_journal"]

"""The one way a TOML file a person writes is parsed, and the one way pydantic's errors about it are placed.

    doc = parse_toml(text)                       # a dict, TOML floats as Decimal; TomlError when malformed
    doc = parse_toml(text, floats=float)         # where a float is not money (a register map's scale)
    doc, problem, st = read_toml(path, "the table's TOML configuration file")   # a configuration file, or why not
    model = validate_table(Model, doc, at="devices.seat-3")  # InvalidTable: each error at its TOML path

The table's and the link authority's files, the supervisors and approvers files, paytables and register maps
are parsed by `parse_toml`; each caller words its own refusal from the `TomlError` (a table's file says
``line 12: malformed TOML: ...``, a register map ``not valid TOML: ...``). A pydantic validation of a TOML table
goes through `validate_table`, whose errors name the TOML path at fault (``devices.seat-3.seats[0]``), never
pydantic's own location; each caller words the messages (config/fields.py `problems_from` for a configuration).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from os import PathLike
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from controller.tomlfile.files import FileRefused, read_file
from controller.tomlfile.problems import Problem, join

M = TypeVar("M", bound=BaseModel)

_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
# pydantic's names for the members of a union it tried (``scale: int | float | str``): not TOML keys.
_UNION_MEMBERS = frozenset({"int", "float", "str", "bool"})


class TomlError(ValueError):
    """Text that is not TOML. `problem` says so as a configuration reports it: at ``line N`` with the column,
    or at the file for an error without a line; `detail` is tomllib's own message, or the name of the error
    met (``ValueError`` for an integer of thousands of digits, ``RecursionError`` for absurd nesting), which
    is the TomlError's ``__cause__``."""

    def __init__(self, problem: Problem, detail: str) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail


def parse_toml(text: str, *, floats: Callable[[str], Any] = Decimal) -> dict[str, Any]:
    """The TOML document in `text`. TOML floats become `floats` of their text: Decimal by default, so that no
    binary float is ever made from a file (money fields refuse floats). Raises TomlError."""
    try:
        return tomllib.loads(text, parse_float=floats)
    except tomllib.TOMLDecodeError as e:
        raise TomlError(_line_problem(text, str(e)), str(e)) from e
    except (ValueError, RecursionError) as e:
        raise TomlError(Problem("", f"malformed TOML: {type(e).__name__}"), type(e).__name__) from e


def _line_problem(text: str, msg: str) -> Problem:
    hint = ""
    if "twice" in msg or "overwrite" in msg.lower():
        hint = "each name (wager, meter, bus, device) and each key may be defined once"
    if m := _LINE.search(msg):
        problem = _LINE.sub("", msg).strip()
        return Problem(f"line {m.group(1)}", f"malformed TOML: {problem} (column {m.group(2)})", hint)
    # tomllib says "at end of document" when the last line is unfinished.
    line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    return Problem(f"line {line}", f"malformed TOML: {msg.replace('(at end of document)', '').strip()} "
                   "(at the end of the file)", hint)


def read_toml(path: str | PathLike[str],
              what: str) -> tuple[dict[str, Any] | None, Problem | None, os.stat_result | None]:
    """A configuration file's TOML document and its status, or the one problem that stops its reading
    (`what` names the file in the hint). Bounded and never blocking (files.read_file)."""
    try:
        read = read_file(path)
    except FileRefused as e:
        return None, Problem("", f"cannot read the configuration: {e.reason}", f"give the path of {what}"), None
    try:
        return parse_toml(read.text(path)), None, read.stat
    except FileRefused as e:  # not UTF-8
        return None, Problem("", e.reason, "save the file as UTF-8"), read.stat
    except TomlError as e:
        return None, e.problem, read.stat


# --- pydantic's errors at their TOML paths -------------------------------------------------------


def toml_path(loc: Iterable[str | int], at: str = "") -> str:
    """pydantic's location of an error as a TOML path under `at`: ``devices.seat-3.seats[0]``, a key that is
    not bare in quotes; pydantic's names for a validator or a union member left out."""
    return join(at, *_keys(loc))


def _keys(loc: Iterable[str | int]) -> list[str | int]:
    return [part for part in loc if not (isinstance(part, str) and (
        "[" in part or part.startswith("function-") or part in _UNION_MEMBERS))]


@dataclass(frozen=True)
class FieldError:
    """One error of a validation: its TOML path, the keys and indices that lead there from the table
    validated, and pydantic's record of it (``type``, ``msg``, ``ctx``, ``input``) for the caller's words."""

    path: str
    keys: tuple[str | int, ...]
    details: ErrorDetails


class InvalidTable(ValueError):
    """A TOML table that its model refuses; `errors` holds every error, in pydantic's order."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.details['msg']}" for e in errors))
        self.errors = errors


def validate_table(model: type[M], data: Mapping[str, Any], *, at: str = "",
                   context: dict[str, Any] | None = None) -> M:
    """`data` (a TOML table, at the path `at` of its file) validated by `model`. Raises InvalidTable."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as e:
        errors = []
        for details in e.errors(include_url=False):
            keys = tuple(_keys(details["loc"]))
            errors.append(FieldError(join(at, *keys), keys, details))
        raise InvalidTable(errors) from None


__all__ = ["FieldError", "InvalidTable", "TomlError", "parse_toml", "read_toml", "toml_path", "validate_table"]

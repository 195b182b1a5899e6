"""Problems found in a table configuration, and the error that carries them.

A problem names the TOML path at fault (``meters.main.reset``, ``devices.seat-3.seats[0]``, or
``line 12`` for malformed TOML), says what is wrong and, where there is one, how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from controller.errors import InputError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Problem:
    path: str  # TOML path; "" for the file as a whole
    message: str
    hint: str = ""

    def line(self, source: str = "", *, warning: bool = False) -> str:
        """One line: ``FILE: path: message (hint: ...)``; a warning ``FILE: warning: path: message (hint: ...)``."""
        parts = [p for p in (source, "warning" if warning else "", self.path) if p]
        text = ": ".join([*parts, self.message])
        return f"{text} (hint: {self.hint})" if self.hint else text

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "message": self.message, "hint": self.hint}

    def __str__(self) -> str:
        return self.line()


class ConfigError(InputError):
    """A configuration that cannot be used. ``problems`` holds every problem found, in the order of the
    file's sections; ``source`` names the file; ``warnings`` what was found that works but should not stay
    so. ``str(e)`` is one line per problem."""

    def __init__(self, source: str, problems: Sequence[Problem], warnings: Sequence[Problem] = ()) -> None:
        if not problems:
            raise ValueError("a ConfigError needs at least one problem")
        first = problems[0]
        super().__init__(f"{source}: {first.path}" if first.path else source, first.message)
        self.source = source
        self.problems = list(problems)
        self.warnings = list(warnings)
        Exception.__init__(self, "\n".join(p.line(source) for p in self.problems))

    def at(self, prefix: str) -> ConfigError:
        return self


def key(name: str) -> str:
    """A TOML key as written in a path: bare when it can be, else quoted."""
    return name if _BARE_KEY.fullmatch(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def join(prefix: str, *parts: str | int) -> str:
    """``join("meters", "main", "reset") == "meters.main.reset"``; ints become ``[i]``."""
    out = prefix
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out = f"{out}.{key(part)}" if out else key(part)
    return out


class Problems:
    """Collects problems; ``add`` returns None so that checks can ``return problems.add(...)``."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, path: str, message: str, hint: str = "") -> None:
        self.items.append(Problem(path, message, hint))

    def extend(self, problems: Iterable[Problem]) -> None:
        self.items.extend(problems)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


__all__ = ["ConfigError", "Problem", "Problems", "join", "key"]

"""Supervisors' names as people read them: an approval is journaled under its supervisor's name (`approved_by`), so
no two supervisors may have names that read alike.

- A name is taken in Unicode's NFKC form, in the files and where it is typed: "ｆloor-1" is "floor-1".
- After NFKC a name is written with ASCII letters, digits, space, '-', '_' and '.' only. A Cyrillic "о" in
  "floor-1" is refused, whatever it looks like: the maintained libraries for confusables do not fit (see
  docs/configuration.md, "Supervisors' names"), and within this set the one table that matters is short.
- Two names are confusable when their skeletons are equal (Unicode Technical Standard #39, section 4): each
  character replaced by its prototype in Unicode's confusables.txt. Within the allowed set that table maps
  "1" and "I" to "l", "0" to "O" and "m" to "rn": "floor-1" and "floor-l" are one name to the eye.
"""

from __future__ import annotations

import string
import unicodedata

MAX_NAME = 64
ALLOWED = frozenset(string.ascii_letters + string.digits + " -_.")
# confusables.txt's prototypes of the characters of ALLOWED that have one (the others are their own)
PROTOTYPES = {"1": "l", "I": "l", "0": "O", "m": "rn"}


def normal(name: str) -> str:
    """`name` as it is compared and journaled: NFKC."""
    return unicodedata.normalize("NFKC", name)


def refusal(name: str) -> str | None:
    """Why `name` (already NFKC) cannot be a supervisor's name; None when it can."""
    if not name.strip() or name != name.strip() or len(name) > MAX_NAME:
        return f"must be 1 to {MAX_NAME} characters, without leading or trailing blanks"
    odd = sorted({c for c in name if c not in ALLOWED})
    if odd:
        shown = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in odd[:3])
        return (f"{name!r} holds {shown}: a name is ASCII letters, digits, space, '-', '_' and '.' (a look-alike "
                "of another script would read as someone else's)")
    return None


def skeleton(name: str) -> str:
    """UTS #39's skeleton of a name of ALLOWED characters (NFD leaves those as they are)."""
    return "".join(PROTOTYPES.get(c, c) for c in name)


class DistinctNames:
    """Names listed one after the other, each refused if it is, or reads as, one listed before."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, str]] = {}  # skeleton -> (name, where it was listed)

    def clash(self, name: str, at: str) -> str | None:
        """None, `name` (NFKC, allowed) kept as listed at `at`; else the problem, naming both names."""
        seen = self._seen.get(skeleton(name))
        if seen is not None:
            other, where = seen
            if other == name:
                return f"{name!r} is listed twice (already {where})"
            return (f"{name!r} reads as {other!r} ({where}): confusable names (Unicode's skeleton), so one "
                    "supervisor's approvals would read as the other's")
        self._seen[skeleton(name)] = (name, at)
        return None


__all__ = ["ALLOWED", "MAX_NAME", "PROTOTYPES", "DistinctNames", "normal", "refusal", "skeleton"]

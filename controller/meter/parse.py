"""Checks and codecs shared by the meter's parameters, operations and state (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from controller.errors import InputError
from controller.money import UNITS_PER_DOLLAR, format_units, parse_units

MAX_TEXT = 500  # characters in a free-text field (reason, who, award text)
MAX_ID = 100  # characters in a round id or table name

_FRACTION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(?:/([0-9]+))?")


def text(value: object, field: str, *, allow_empty: bool = False, max_len: int = MAX_TEXT) -> str:
    """A string without control characters or surrounding blanks."""
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, not {value!r}")
    if not value and allow_empty:
        return value
    if not value.strip():
        raise InputError(field, "must not be empty")
    if value != value.strip():
        raise InputError(field, f"{value!r} has leading or trailing blanks")
    if len(value) > max_len:
        raise InputError(field, f"is longer than {max_len} characters")
    if not value.isprintable():
        raise InputError(field, f"{value!r} holds control characters")
    return value


def identifier(value: object, field: str) -> str:
    """A round id or table name: printable, no blanks at all."""
    s = text(value, field, max_len=MAX_ID)
    # The only printable character that is whitespace is the ASCII space (every other Unicode space is a
    # separator, not printable), and text() has refused what is not printable.
    if " " in s:
        raise InputError(field, f"{s!r} holds blanks")
    return s


def integer(value: object, field: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"must be a whole number (int), not {value!r}")
    if minimum is not None and value < minimum:
        raise InputError(field, f"must be at least {minimum}, not {value}")
    return value


def cents(value: object, field: str) -> int:
    """A positive whole number of cents (an int: a sub-cent amount cannot be written)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"must be a whole number of cents (int), not {value!r}")
    if value <= 0:
        raise InputError(field, f"must be more than zero, not {value}")
    return value


def moment(value: object, field: str) -> datetime:
    """A time given by the caller (the core has no clock): a datetime with a UTC offset."""
    if not isinstance(value, datetime):
        raise InputError(field, f"must be a datetime, not {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError(field, "must carry a UTC offset (a naive time is ambiguous)")
    return value


def fraction(value: object, field: str) -> Fraction:
    """An exact number: Fraction, int or finite Decimal (never a binary float) as a Fraction."""
    if isinstance(value, (bool, float)):
        raise InputError(field, f"must be exact (a decimal string, Fraction or Decimal), not the float {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise InputError(field, f"must be finite, not {value}")
        return Fraction(value)
    if isinstance(value, str):
        return parse_fraction(value, field)
    raise InputError(field, f"must be a number, not {value!r}")


# --- JSON codecs -------------------------------------------------------------------------------


def parse_fraction(value: object, field: str) -> Fraction:
    """A decimal string ("12.5") or a ratio of decimals ("100/3"), exactly."""
    if not isinstance(value, str):
        raise InputError(field, f"must be a decimal string such as \"12.5\" or a ratio such as \"100/3\", not {value!r}")
    m = _FRACTION.fullmatch(value.strip())
    if not m or len(value) > 60:
        raise InputError(field, f"{value!r} is not a decimal such as \"12.5\" or a ratio such as \"100/3\"")
    n = Fraction(m.group(1))
    if m.group(2) is not None:
        d = int(m.group(2))
        if d == 0:
            raise InputError(field, f"{value!r} divides by zero")
        n /= d
    return n


def format_fraction(f: Fraction) -> str:
    """A decimal string when `f` has a finite decimal expansion, else "numerator/denominator"."""
    d = f.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return f"{f.numerator}/{f.denominator}"
    places = max(twos, fives)
    scaled = f * 10**places
    assert scaled.denominator == 1
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled.numerator), 10**places)
    return f"{sign}{whole}.{frac:0{places}d}" if places else f"{sign}{whole}"


def parse_signed_units(value: object, field: str) -> int:
    """A signed decimal string of dollars ("-0.000125") as meter units."""
    if isinstance(value, str) and value.startswith("-"):
        return -parse_units(value[1:], field)
    return parse_units(value, field)


def format_signed_units(units: int) -> str:
    return format_units(units)


def parse_moment(value: object, field: str) -> datetime:
    if not isinstance(value, str):
        raise InputError(field, f"must be an ISO 8601 time string such as \"2025-01-31T21:05:00+00:00\", not {value!r}")
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(field, f"{value!r} is not an ISO 8601 time such as \"2025-01-31T21:05:00+00:00\"") from None
    return moment(t, field)


def format_moment(t: datetime) -> str:
    return t.isoformat()


def obj(value: object, field: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """A decoded JSON object with exactly the keys expected (unknown keys are refused: typos)."""
    if not isinstance(value, dict) and not isinstance(value, Mapping):  # dict first: the ABC check is slow
        raise InputError(field, f"must be an object, not {type(value).__name__}")
    allowed = _allowed(required, optional)
    for key in value:
        if key not in allowed:
            raise InputError(join(field, str(key)), f"unknown key; expected one of {', '.join(sorted(allowed))}")
    for key in required:
        if key not in value:
            raise InputError(join(field, key), "is required")
    return value


_ALLOWED: dict[tuple[tuple[str, ...], tuple[str, ...]], frozenset[str]] = {}


def _allowed(required: tuple[str, ...], optional: tuple[str, ...]) -> frozenset[str]:
    """The keys obj() accepts; the callers' tuples are constants, so each set is built once."""
    try:
        return _ALLOWED[required, optional]
    except KeyError:
        allowed = _ALLOWED[required, optional] = frozenset(required) | frozenset(optional)
        return allowed


def array(value: object, field: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):  # a tuple of types: `list | tuple` builds a union per call
        raise InputError(field, f"must be a list, not {type(value).__name__}")
    return list(value)


def join(prefix: str, field: str) -> str:
    if not prefix:
        return field
    if not field:
        return prefix
    return prefix + field if field.startswith("[") else f"{prefix}.{field}"


def renamed(e: InputError, names: Mapping[str, str], prefix: str) -> InputError:
    """`e` with each segment of its field path renamed by `names` (``cents`` -> ``amount``), under `prefix`."""
    parts = []
    for part in e.field.split("."):
        head, bracket, rest = part.partition("[")
        parts.append(names.get(head, head) + bracket + rest)
    return type(e)(".".join(parts), e.problem).at(prefix)


assert UNITS_PER_DOLLAR == 1_000_000  # parse_units/format_units keep 6 decimal places of a dollar


__all__ = ["MAX_ID", "MAX_TEXT", "array", "cents", "format_fraction", "format_moment", "format_signed_units",
           "fraction", "identifier", "integer", "join", "moment", "obj", "parse_fraction", "parse_moment",
           "parse_signed_units", "renamed", "text"]

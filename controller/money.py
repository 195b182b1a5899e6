"""Exact money.

Amounts paid are integer cents. A progressive meter keeps sub-cent contributions exactly, in
meter units of 1/10,000 of a cent (a millionth of a dollar): a whole-cent wager times a rate of
progression with up to four decimal places is then always a whole number of units. No binary
float is used anywhere money flows.
"""

from __future__ import annotations

import re
from fractions import Fraction

from controller.errors import InputError

CENTS_PER_DOLLAR = 100
UNITS_PER_CENT = 10_000
UNITS_PER_DOLLAR = CENTS_PER_DOLLAR * UNITS_PER_CENT

_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?")


_PARSED: dict[tuple[str, int], int] = {}  # the amounts a table sends are few: each is parsed once
_PARSED_MAX = 4096
_PARSED_TEXT_MAX = 24  # longer texts (padded with blanks or zeros) are parsed each time: the memo stays small


def _parse_decimal(text: object, field: str, places: int) -> int:
    """`text` as an integer count of 10**-places dollars."""
    if type(text) is str:
        known = _PARSED.get((text, places))
        if known is not None:
            return known
    value = _parse_decimal_text(text, field, places)
    if len(text) <= _PARSED_TEXT_MAX:  # type: ignore[arg-type]  # a str: checked by _parse_decimal_text
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text, places] = value  # type: ignore[index]
    return value


def _parse_decimal_text(text: object, field: str, places: int) -> int:
    if isinstance(text, bool) or not isinstance(text, str):
        raise InputError(field, f"must be a decimal string of dollars such as \"10000.00\", not {text!r}")
    s = text.strip()
    if not _DECIMAL.fullmatch(s):
        raise InputError(field, f"{text!r} is not a decimal amount of dollars such as \"10000.00\"")
    whole, _, frac = s.partition(".")
    if len(frac.rstrip("0")) > places:
        raise InputError(field, f"{text!r} has more than {places} decimal places")
    if len(whole) > 15:
        raise InputError(field, f"{text!r} is too large")
    frac = frac.rstrip("0").ljust(places, "0")
    scale: int = 10**places
    return int(whole) * scale + int(frac or "0")


def parse_cents(text: object, field: str) -> int:
    """A decimal string of dollars ("12.50") as integer cents; more than 2 places is an error."""
    return _parse_decimal(text, field, 2)


def parse_units(text: object, field: str) -> int:
    """A decimal string of dollars as integer meter units (up to 6 decimal places)."""
    return _parse_decimal(text, field, 6)


def format_cents(cents: int) -> str:
    """Integer cents as a decimal string of dollars: 123456 -> "1234.56"."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), CENTS_PER_DOLLAR)
    return f"{sign}{whole}.{frac:02d}"


def format_units(units: int) -> str:
    """Meter units as dollars with at least 2 and at most 6 decimal places."""
    if units == 0:  # most amounts of an operation's effect
        return "0.00"
    sign = "-" if units < 0 else ""
    whole, frac = divmod(abs(units), UNITS_PER_DOLLAR)
    digits = f"{frac:06d}".rstrip("0")
    if len(digits) < 2:
        digits = digits.ljust(2, "0")
    return f"{sign}{whole}.{digits}"


def format_dollars_human(cents: int) -> str:
    """Cents for people: 100000 -> "$1,000.00"."""
    whole, frac = divmod(abs(cents), CENTS_PER_DOLLAR)
    return f"{'-' if cents < 0 else ''}${whole:,}.{frac:02d}"


def format_units_human(units: int) -> str:
    """Meter units for people, exact: 10017850000 -> "$10,017.85"; a sub-cent remainder keeps its digits
    (10000157500 -> "$10,000.1575"), so that a printed sum still adds up to the unit."""
    text = format_units(abs(units))
    whole, _, frac = text.partition(".")
    return f"{'-' if units < 0 else ''}${int(whole):,}.{frac}"


def cents_to_units(cents: int) -> int:
    return cents * UNITS_PER_CENT


def floor_units_to_cents(units: int) -> int:
    """The whole cents in `units`; the sub-cent remainder is left to the caller (it stays on the meter)."""
    if units < 0:
        raise ValueError("negative meter amount")
    return units // UNITS_PER_CENT


def floor_fraction_of_cents(cents: int, factor: Fraction) -> int:
    """`cents` times an exact fraction, floored to the cent (odds such as 3 to 2 on an odd wager)."""
    product = Fraction(cents) * factor
    return product.numerator // product.denominator


__all__ = ["CENTS_PER_DOLLAR", "UNITS_PER_CENT", "UNITS_PER_DOLLAR", "cents_to_units", "floor_fraction_of_cents",
           "floor_units_to_cents", "format_cents", "format_dollars_human", "format_units", "format_units_human",
           "parse_cents", "parse_units"]

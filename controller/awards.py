"""Kinds of award a paytable can state, and what each pays.

Design conventions: "N for 1" pays N times the wager (the wager is not returned); "N to 1" pays
N times the wager and returns the wager. A percentage of the meter is floored to the cent and the
remainder stays on the meter. Fractional odds (3 to 2) on an odd wager are floored to the cent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from controller.errors import InputError
from controller.money import UNITS_PER_CENT, format_dollars_human, parse_cents


def _fmt(n: Fraction) -> str:
    if n.denominator == 1:
        return f"{n.numerator:,}"
    return f"{n.numerator}/{n.denominator}"


@dataclass(frozen=True)
class PercentOfMeter:
    """A percentage of the progressive meter, e.g. 100% for a royal flush (639a.12(d)(1))."""

    percent: Fraction

    def describe(self) -> str:
        return f"{_fmt(self.percent)}% of meter"

    def meter_units(self, meter_units: int) -> int:
        """The award in meter units, floored to a whole cent."""
        raw = Fraction(meter_units) * self.percent / 100
        whole_units = raw.numerator // raw.denominator
        return whole_units - whole_units % UNITS_PER_CENT


@dataclass(frozen=True)
class ForOne:
    """N for 1: the player receives N times the wager; the wager is not returned."""

    n: Fraction

    def describe(self) -> str:
        return f"{_fmt(self.n)} for 1"

    def received_cents(self, wager_cents: int) -> int:
        p = Fraction(wager_cents) * self.n
        return p.numerator // p.denominator

    @property
    def multiple(self) -> Fraction:
        """What the player receives per unit wagered."""
        return self.n


@dataclass(frozen=True)
class ToOne:
    """N to 1 (or N to M, as 3 to 2): wins N/M times the wager and the wager is returned."""

    n: Fraction

    def describe(self) -> str:
        if self.n.denominator == 1:
            return f"{self.n.numerator:,} to 1"
        return f"{self.n.numerator} to {self.n.denominator}"

    def received_cents(self, wager_cents: int) -> int:
        p = Fraction(wager_cents) * self.n
        return p.numerator // p.denominator + wager_cents

    @property
    def multiple(self) -> Fraction:
        return self.n + 1


@dataclass(frozen=True)
class Fixed:
    """A fixed sum, as an Envy Bonus by the size of the receiver's wager (639a.12(d)(6))."""

    cents: int

    def describe(self) -> str:
        return format_dollars_human(self.cents)

    def received_cents(self, wager_cents: int) -> int:
        return self.cents


Award = PercentOfMeter | ForOne | ToOne | Fixed

_PERCENT = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*%(?:\s*of\s*(?:the\s*)?meter)?")
_FOR = re.compile(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*for\s*1")
_TO = re.compile(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*to\s*([0-9][0-9,]*)")
_DOLLARS = re.compile(r"\$\s*([0-9][0-9,]*(?:\.[0-9]{1,2})?)")


def _num(text: str) -> Fraction:
    return Fraction(text.replace(",", ""))


def parse_award(text: object, field: str) -> Award:
    """An award as the regulations print it: "100% of meter", "500 for 1", "30 to 1", "3 to 2", "$1,000"."""
    if not isinstance(text, str):
        raise InputError(field, f"an award is a string such as \"500 for 1\", not {text!r}")
    s = text.strip().lower()
    if m := _PERCENT.fullmatch(s):
        pct = _num(m.group(1))
        if not 0 < pct <= 100:
            raise InputError(field, f"{text!r}: a percentage of the meter must be more than 0 and at most 100")
        return PercentOfMeter(pct)
    if m := _FOR.fullmatch(s):
        n = _num(m.group(1))
        if n <= 0:
            raise InputError(field, f"{text!r}: odds must be positive")
        return ForOne(n)
    if m := _TO.fullmatch(s):
        n, d = _num(m.group(1)), _num(m.group(2))
        if n <= 0 or d <= 0:
            raise InputError(field, f"{text!r}: odds must be positive")
        return ToOne(n / d)
    if m := _DOLLARS.fullmatch(s):
        cents = parse_cents(m.group(1).replace(",", ""), field)
        if cents <= 0:
            raise InputError(field, f"{text!r}: a fixed award must be more than $0")
        return Fixed(cents)
    raise InputError(
        field,
        f"unknown award {text!r}: write \"100% of meter\", \"500 for 1\", \"30 to 1\", \"3 to 2\" or \"$1,000\"",
    )


def describe(award: Award) -> str:
    return award.describe()


__all__ = ["Award", "Fixed", "ForOne", "PercentOfMeter", "ToOne", "describe", "parse_award"]

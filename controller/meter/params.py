"""The parameters of a progressive meter (N.J.A.C. 13:69E-1.39A, 9 NYCRR 5320.8: base/reset, rate of
progression, limit (ceiling), hidden (reserve) rate; the reset floor of 58 Pa. Code)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from controller.errors import InputError, RulesError
from controller.meter import parse as _check
from controller.meter.award import RESET_FLOOR_CENTS
from controller.money import UNITS_PER_CENT, format_cents, format_dollars_human, parse_cents

RATE_PLACES = 4  # a whole-cent wager times the rate is then a whole number of meter units
MIN_HISTORY = 25  # N.J.A.C. 13:69E-1.39A, 9 NYCRR 5320.8: a history of at least the last 25 hits
DEFAULT_HISTORY = 100
_METER_ID = re.compile(r"[a-z0-9-]+")
_RATE = re.compile(r"[0-9]*\.?[0-9]+")


@dataclass(frozen=True)
class MeterParams:
    """What the certificate holder files for one progressive meter.

    ``rate`` and ``reserve_rate`` are exact fractions of a wager (given as Fraction, Decimal or a
    decimal string such as "0.15"; never a float) with at most four decimal places. Money is in cents.
    """

    meter_id: str
    reset_cents: int
    rate: Fraction
    wager_sizes: tuple[int, ...]
    reserve_rate: Fraction = Fraction(0)
    ceiling_cents: int | None = None
    history_size: int = DEFAULT_HISTORY

    def __post_init__(self) -> None:
        if not isinstance(self.meter_id, str) or not _METER_ID.fullmatch(self.meter_id) or len(self.meter_id) > 64:
            raise InputError("meter_id", f"{self.meter_id!r} must be 1 to 64 characters of a-z, 0-9 and -")
        _check.integer(self.reset_cents, "reset_cents")
        if self.reset_cents < RESET_FLOOR_CENTS:
            raise RulesError(
                "reset_cents",
                f"{format_dollars_human(self.reset_cents)} is below the $10,000 floor "
                "(§ 667a.12(d)(3), § 639a.12(d)(4), § 639a.12(e)(4))",
            )
        rate = _rate(self.rate, "rate")
        if not 0 < rate < 1:
            raise InputError("rate", f"{_check.format_fraction(rate)}: the rate of progression must be more than 0 and less than 1")
        reserve = _rate(self.reserve_rate, "reserve_rate")
        if reserve < 0:
            raise InputError("reserve_rate", "must not be negative")
        if rate + reserve >= 1:
            raise RulesError(
                "reserve_rate",
                f"rate {_check.format_fraction(rate)} + reserve_rate {_check.format_fraction(reserve)} must be less than 1",
            )
        object.__setattr__(self, "rate", rate)
        object.__setattr__(self, "reserve_rate", reserve)
        if self.ceiling_cents is not None:
            _check.integer(self.ceiling_cents, "ceiling_cents")
            if self.ceiling_cents <= self.reset_cents:
                raise InputError(
                    "ceiling_cents",
                    f"{format_dollars_human(self.ceiling_cents)} must be above the reset amount "
                    f"{format_dollars_human(self.reset_cents)}",
                )
        sizes = _check.array(self.wager_sizes, "wager_sizes")
        if not sizes:
            raise InputError("wager_sizes", "must list at least one accepted wager amount")
        for i, size in enumerate(sizes):
            _check.cents(size, f"wager_sizes[{i}]")
            if size in sizes[:i]:
                raise InputError(f"wager_sizes[{i}]", f"{format_dollars_human(size)} is listed twice")
        object.__setattr__(self, "wager_sizes", tuple(sorted(sizes)))
        _check.integer(self.history_size, "history_size")
        if self.history_size < MIN_HISTORY:
            raise RulesError("history_size", f"must keep at least the last {MIN_HISTORY} hits, not {self.history_size}")

    @property
    def reset_units(self) -> int:
        return self.reset_cents * UNITS_PER_CENT

    @property
    def ceiling_units(self) -> int | None:
        return None if self.ceiling_cents is None else self.ceiling_cents * UNITS_PER_CENT

    @property
    def rate_units(self) -> int:
        """Meter units contributed per cent wagered (the rate in ten-thousandths)."""
        return _units_per_cent(self.rate)

    @property
    def reserve_units(self) -> int:
        """Meter units put in reserve per cent wagered."""
        return _units_per_cent(self.reserve_rate)


def _units_per_cent(rate: Fraction) -> int:
    u = rate * UNITS_PER_CENT
    assert u.denominator == 1
    return u.numerator


def _rate(value: object, field: str) -> Fraction:
    if isinstance(value, str):
        value = parse_rate(value, field)
    f = _check.fraction(value, field)
    if (f * 10**RATE_PLACES).denominator != 1:
        raise InputError(field, f"{_check.format_fraction(f)} has more than {RATE_PLACES} decimal places")
    return f


def parse_rate(value: object, field: str) -> Fraction:
    """A rate as a decimal string such as "0.15" (at most four decimal places)."""
    if not isinstance(value, str) or not _RATE.fullmatch(value.strip()):
        raise InputError(field, f"must be a decimal string such as \"0.15\", not {value!r}")
    s = value.strip()
    _, _, frac = s.partition(".")
    if len(frac.rstrip("0")) > RATE_PLACES:
        raise InputError(field, f"{value!r} has more than {RATE_PLACES} decimal places")
    return Fraction(s)


def format_rate(rate: Fraction) -> str:
    """0.15 -> "0.15"; 0 -> "0"."""
    return _check.format_fraction(rate) if rate else "0"


# --- JSON -------------------------------------------------------------------------------------

_KEYS = ("meter_id", "reset", "rate", "wager_sizes")
_OPTIONAL = ("reserve_rate", "ceiling", "history_size")
_DICT_NAMES = {"reset_cents": "reset", "ceiling_cents": "ceiling"}


def params_from_dict(d: object, field_prefix: str = "") -> MeterParams:
    """Parameters from decoded JSON/TOML: money as decimal strings of dollars, rates as decimal strings.

    Keys: ``meter_id``, ``reset`` ("10000.00"), ``rate`` ("0.15"), ``wager_sizes`` (["5.00", ...]), and
    optionally ``reserve_rate`` ("0.02"), ``ceiling`` ("50000.00" or null), ``history_size`` (int).
    """
    at = field_prefix
    m = _check.obj(d, at, _KEYS, _OPTIONAL)
    reset = parse_cents(m["reset"], _check.join(at, "reset"))
    rate = parse_rate(m["rate"], _check.join(at, "rate"))
    reserve = parse_rate(m.get("reserve_rate", "0"), _check.join(at, "reserve_rate"))
    ceiling_text = m.get("ceiling")
    ceiling = None if ceiling_text is None else parse_cents(ceiling_text, _check.join(at, "ceiling"))
    sizes = [
        parse_cents(s, _check.join(at, f"wager_sizes[{i}]"))
        for i, s in enumerate(_check.array(m["wager_sizes"], _check.join(at, "wager_sizes")))
    ]
    try:
        return MeterParams(
            meter_id=m["meter_id"],
            reset_cents=reset,
            rate=rate,
            reserve_rate=reserve,
            ceiling_cents=ceiling,
            wager_sizes=tuple(sizes),
            history_size=m.get("history_size", DEFAULT_HISTORY),
        )
    except InputError as e:
        raise _check.renamed(e, _DICT_NAMES, at) from None


def params_to_dict(p: MeterParams) -> dict[str, Any]:
    """The inverse of `params_from_dict`: ``params_from_dict(params_to_dict(p)) == p``."""
    return {
        "meter_id": p.meter_id,
        "reset": format_cents(p.reset_cents),
        "rate": format_rate(p.rate),
        "reserve_rate": format_rate(p.reserve_rate),
        "ceiling": None if p.ceiling_cents is None else format_cents(p.ceiling_cents),
        "wager_sizes": [format_cents(c) for c in p.wager_sizes],
        "history_size": p.history_size,
    }


__all__ = ["DEFAULT_HISTORY", "MIN_HISTORY", "RATE_PLACES", "MeterParams", "format_rate", "params_from_dict",
           "params_to_dict", "parse_rate"]

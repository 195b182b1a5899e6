"""Field types of the configuration (pydantic), and pydantic's errors in a configuration's words (`problems_from`).

TOML is read with ``parse_float=Decimal``, so no binary float is ever made from the file: a money field
that holds a TOML float (``reset = 10000.0``) is refused with a message that says how to write it; a
rate written as a bare decimal (``rate = 0.15``) is taken exactly; seconds become floats only after
parsing (they are not money).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainValidator, ValidationInfo
from pydantic_core import PydanticCustomError

from controller.errors import InputError
from controller.meter.params import RATE_PLACES, parse_rate
from controller.money import parse_cents
from controller.tomlfile.problems import Problem, join
from controller.tomlfile.toml import FieldError

MAX_DOLLARS = 10**12  # whole dollars written as a TOML integer: beyond this is a typo


def custom(message: str, hint: str = "") -> PydanticCustomError:
    """A validation error whose message and hint are ours (see `problems_from`)."""
    return PydanticCustomError("config", "{message}", {"message": message, "hint": hint})


def show(value: object) -> str:
    """How a TOML value is described in a message."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, Decimal):
        return f"the TOML float {value}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


# --- money ---------------------------------------------------------------------------------------


def _field(info: ValidationInfo | None) -> str:
    return (info.field_name if info is not None else None) or "amount"


def _example(name: str) -> str:
    """How to write an amount for the key `name`: an array element has no key of its own."""
    return '"5.00"' if name == "wager_sizes" else f'{name} = "10000.00"'


def _float_hint(value: Decimal) -> str:
    exp = value.as_tuple().exponent
    text = f"{value:.2f}" if isinstance(exp, int) and exp >= -2 and value.is_finite() and value >= 0 else "10000.00"
    return f'write "{text}" (dollars and cents, in quotes) or a whole number of dollars without a decimal point'


def money_cents(value: object, info: ValidationInfo | None = None) -> int:
    """Money in a TOML file: a decimal string of dollars ("10000.00") or an integer of whole dollars
    (10000). Never a float: a TOML float is refused, saying how to write it. Returns cents."""
    name = _field(info)
    if isinstance(value, bool):
        raise custom(f"must be an amount of dollars, not {show(value)}", f"write {_example(name)}")
    if isinstance(value, Decimal):
        raise custom(f"{value} is a TOML float, and money is never read from a float", _float_hint(value))
    if isinstance(value, int):
        if value < 0:
            raise custom(f"{value} is negative", "amounts of money are zero or more")
        if value > MAX_DOLLARS:
            raise custom(f"{value} dollars is too large", f"write {_example(name)}")
        return value * 100
    if isinstance(value, str):
        try:
            return parse_cents(value, name)
        except InputError as e:
            raise custom(e.problem, f'write {_example(name)}: digits, a point and at most two decimals; no "$" or ","') from None
    raise custom(f"must be an amount of dollars, not {show(value)}", f"write {_example(name)}")


def rate_fraction(value: object, info: ValidationInfo | None = None) -> Fraction:
    """A rate (a fraction of each wager): "0.15" or the bare decimal 0.15 (read exactly), at most four
    decimal places. Range checks belong to MeterParams."""
    name = _field(info)
    hint = f'write {name} = "0.15" for 15%, with at most {RATE_PLACES} decimal places'
    if isinstance(value, bool):
        raise custom(f"must be a decimal rate, not {show(value)}", hint)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise custom(f"{value} is not a number", hint)
        value = format(value, "f")
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            raise custom(f"{value!r}: write the rate as a fraction of the wager, not a percentage", hint)
        try:
            return parse_rate(text, name)
        except InputError as e:
            raise custom(e.problem, hint) from None
    raise custom(f"must be a decimal rate, not {show(value)}", hint)


def seconds(value: object) -> object:
    """A duration in seconds: an integer or a decimal (TOML floats arrive as Decimal) -> float."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise custom(f"{value} is not a number of seconds", "write a number such as 0.5")
        return float(value)
    return value


# Two-argument callables: pydantic then passes the ValidationInfo (which names the key).
Money = Annotated[int, PlainValidator(lambda value, info: money_cents(value, info))]
Rate = Annotated[Fraction, PlainValidator(lambda value, info: rate_fraction(value, info))]
Seconds = Annotated[float, BeforeValidator(seconds)]


def decimals_to_float(data: Mapping[str, Any]) -> dict[str, Any]:
    """A table whose TOML floats (Decimal) become floats: for driver settings in seconds, never money."""
    return {k: (float(v) if isinstance(v, Decimal) and v.is_finite() else v) for k, v in data.items()}


# --- pydantic errors -> problems -----------------------------------------------------------------

_KINDS = {
    "string_type": "a string in quotes",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "float_type": "a number",
    "float_parsing": "a number",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "dataclass_type": "a table",
    "tuple_type": "an array",
}


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """A hint for an unknown key: the closest allowed key, and the allowed keys."""
    known = sorted(allowed)
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    listed = f"keys allowed here: {', '.join(known)}" if known else ""
    if close:
        return f"did you mean {close[0]!r}? " + listed
    return listed or "remove it"


def unknown_key(path: str, key: str, allowed: Iterable[str]) -> Problem:
    if key == "password":
        hint = ("put it in a file only the daemon can read (chmod 600) and set password_file = \"...\""
                if path.startswith("mqtt.") else
                "store only a hash: credential = the line `progressivectl hash-credential` prints")
        return Problem(path, "a password is never written in the configuration", hint)
    return Problem(path, "unknown key", did_you_mean(key, allowed))


def _limit(value: object) -> object:
    """A limit as it was written: 60, not the 60.0 of a float field."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# pydantic's error type -> our message, from its context and the value written
_MESSAGES: dict[str, Callable[[Mapping[str, Any], object], str]] = {
    "literal_error": lambda ctx, value: f"must be {ctx.get('expected', '?')}, not {show(value)}",
    "greater_than_equal": lambda ctx, value: f"must be at least {_limit(ctx.get('ge'))}, not {value}",
    "greater_than": lambda ctx, value: f"must be more than {_limit(ctx.get('gt'))}, not {value}",
    "less_than_equal": lambda ctx, value: f"must be at most {_limit(ctx.get('le'))}, not {value}",
    "less_than": lambda ctx, value: f"must be less than {_limit(ctx.get('lt'))}, not {value}",
    "string_too_short": lambda ctx, value: "must not be empty",
    "string_too_long": lambda ctx, value: f"is longer than {ctx.get('max_length')} characters",
    "too_short": lambda ctx, value: f"must list at least {ctx.get('min_length')}",
    "too_long": lambda ctx, value: f"must list at most {ctx.get('max_length')}",
}


def problems_from(
    errors: Iterable[FieldError],
    *,
    allowed: Iterable[str] = (),
    required_hints: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Every error of a validation (toml.validate_table) as a problem at its TOML path.

    `allowed`: the keys of the table validated (for unknown-key hints); `required_hints`: what to write
    for a missing key, by key.
    """
    allowed = tuple(allowed)
    out: list[Problem] = []
    for fe in errors:
        err = fe.details
        loc = fe.keys
        path = fe.path
        kind = err["type"]
        ctx = err.get("ctx") or {}
        value = err.get("input")
        hint = ""
        if kind == "config":
            message, hint = ctx.get("message", err["msg"]), ctx.get("hint", "")
        elif kind == "extra_forbidden":
            last = str(loc[-1]) if loc else ""
            out.append(unknown_key(path, last, allowed if len(loc) == 1 else ()))
            continue
        elif kind == "missing":
            message = "is required"
            last = str(loc[-1]) if loc else ""
            hint = (required_hints or {}).get(str(last), "")
        elif kind == "value_error":
            cause = ctx.get("error")
            if isinstance(cause, InputError):
                path = join(path, *[p for p in cause.field.split(".") if p]) if cause.field else path
                message = cause.problem
            else:
                message = str(err["msg"]).removeprefix("Value error, ")
        elif kind in _KINDS:
            message = f"must be {_KINDS[kind]}, not {show(value)}"
            if isinstance(value, str) and kind.startswith(("int", "float", "bool")):
                hint = "write it without quotes"
            elif isinstance(value, Decimal) and kind.startswith("int"):
                hint = "write a whole number, without a decimal point"
        elif kind in _MESSAGES:
            message = _MESSAGES[kind](ctx, value)
        else:
            message = str(err["msg"])
        out.append(Problem(path, message, hint))
    return out


__all__ = ["MAX_DOLLARS", "Money", "Rate", "Seconds", "custom", "decimals_to_float", "did_you_mean", "money_cents",
           "problems_from", "rate_fraction", "seconds", "show", "unknown_key"]

"""Properties of the configuration checks, over many generated inputs."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError
from test_config import base, problems, write

from controller.config import load_config
from controller.config.fields import money_cents
from controller.meter.award import RESET_FLOOR_CENTS

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(st.integers(min_value=0, max_value=10**14))
def test_money_string_is_exact_cents(cents):
    assert money_cents(f"{cents // 100}.{cents % 100:02d}") == cents


@given(st.integers(min_value=0, max_value=10**12))
def test_money_integer_is_whole_dollars(dollars):
    assert money_cents(dollars) == dollars * 100


@given(st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=0, max_value=10**9))
def test_a_toml_float_is_never_money(value):
    try:
        money_cents(Decimal(value))
    except PydanticCustomError as e:
        assert "is a TOML float" in e.context["message"]
    else:
        raise AssertionError("a float was taken as money")


@SETTINGS
@given(cents=st.integers(min_value=1, max_value=10**10))
def test_reset_amounts_through_the_file(tmp_path, cents):
    doc = base()
    doc["meters"]["main"]["reset"] = f"{cents // 100}.{cents % 100:02d}"
    if cents >= RESET_FLOOR_CENTS:
        assert load_config(write(tmp_path, doc)).meters["main"].params.reset_cents == cents
    else:
        found = problems(tmp_path, doc)
        assert [p.path for p in found] == ["meters.main.reset"]
        assert "below the $10,000 floor" in found[0].message


def _tables(doc: dict, prefix: tuple = ()) -> list[tuple]:
    """The path of every table in the document (arrays of tables by index)."""
    out = [prefix]
    for k, v in doc.items():
        if isinstance(v, dict):
            out += _tables(v, (*prefix, k))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, item in enumerate(v):
                out += _tables(item, (*prefix, k, i))
    return out


def _toml_path(parts: tuple) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


TABLES = [t for t in _tables(base()) if t not in (("wagers",), ("meters",), ("buses",), ("devices",))]


@SETTINGS
@given(where=st.sampled_from(TABLES), key=st.from_regex(r"zz[a-z_]{1,10}", fullmatch=True),
       value=st.one_of(st.integers(), st.text(max_size=5), st.booleans()))
def test_an_unknown_key_anywhere_is_the_one_problem(tmp_path, where, key, value):
    doc = base()
    table = doc
    for part in where:
        table = table[part]
    table[key] = value
    found = problems(tmp_path, doc)
    assert [(p.path, p.message) for p in found] == [(_toml_path((*where, key)), "unknown key")]

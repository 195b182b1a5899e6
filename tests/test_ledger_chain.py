"""The hash chain: canonical JSON, entry text, entry hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from controller.errors import InputError
from controller.ledger import chain


def test_canonical_json():
    assert chain.canonical({"b": 1, "a": [True, None, "x"]}) == '{"a":[true,null,"x"],"b":1}'
    assert chain.canonical({"s": "caf\u00e9 \u20ac"}) == '{"s":"caf\\u00e9 \\u20ac"}'  # ASCII only
    assert chain.canonical(10**30) == str(10**30)  # big integers stay exact
    for bad in (1.5, {"x": 0.1}, [float("nan")], {"x": object()}):
        with pytest.raises((TypeError, ValueError)):
            chain.canonical(bad)


def test_canonical_body_is_what_the_reducer_sees():
    text, decoded = chain.canonical_body({"z": (1, 2), "a": {"k": "v"}})
    assert text == '{"a":{"k":"v"},"z":[1,2]}'
    assert decoded == {"a": {"k": "v"}, "z": [1, 2]}  # a tuple comes back a list, live as on replay
    with pytest.raises(InputError) as e:
        chain.canonical_body({"cents": 0.1})
    assert e.value.field == "body"


def test_entry_text_is_the_canonical_array():
    args = ("ab" * 32, 7, "table-1:\u00e9", "2026-11-29T12:00:00.000001Z", "deposit", '{"cents":5}', '{"b":1}')
    text = chain.entry_text(*args)
    assert text == chain.canonical([args[0], 7, args[2], args[3], "deposit", {"cents": 5}, {"b": 1}])
    assert json.loads(text)[2] == "table-1:\u00e9"
    assert chain.entry_hash(text) == hashlib.sha256(text.encode()).hexdigest()


def test_hash_covers_every_field():
    base = ("0" * 64, 3, "k", "2026-11-29T12:00:00.000000Z", "deposit", '{"cents":5}', "null")
    h = chain.entry_hash(chain.entry_text(*base))
    for i, other in enumerate(("1" * 64, 4, "k2", "2026-11-29T12:00:00.000001Z", "withdraw", '{"cents":6}', "1")):
        changed = list(base)
        changed[i] = other
        assert chain.entry_hash(chain.entry_text(*changed)) != h, f"field {i} is not covered"


def test_entry_parsing_rejects_malformed():
    good = chain.entry_text("0" * 64, 1, "k", "t", "genesis", "{}", "null")
    assert chain.Entry(good).seq == 1
    for bad in ("[1,2,3]", "not json", good.replace('"' + "0" * 64, '"xyz'), good.replace(",1,", ',"1",'),
                good.replace("{}", "[]")):
        with pytest.raises(ValueError):
            chain.Entry(bad)


def test_keys_and_kinds():
    assert chain.check_key("table-7:1234") == "table-7:1234"
    for bad in ("", "a b", "x\n", "ledger:x", "k" * 201, 5, None):
        with pytest.raises(InputError):
            chain.check_key(bad)
    assert chain.check_kind("contribution") == "contribution"
    for bad in ("", "self-check", "genesis", "checkpoint", "two words", "\u00e9", 3):
        with pytest.raises(InputError):
            chain.check_kind(bad)


def test_time_format():
    import datetime as dt

    t = dt.datetime(2026, 11, 29, 13, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert chain.format_time(t) == "2026-11-29T12:00:00.000005Z"
    with pytest.raises(ValueError):
        chain.format_time(dt.datetime(2026, 1, 1))  # naive: refused

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


def test_decoding_canonical_text_is_strict():
    for value in ({"a": [1, {"b": None}], "c": "\u00e9"}, [], {}, "x", 10**30, True, None):
        text = chain.canonical(value)
        assert chain.canonical_decoded(value) == (text, json.loads(text))
    for bad in ("1.5", '{"a":1e3}', '{"a":1} ', "{} {}", "", " 1", "[1,]"):
        with pytest.raises(ValueError):
            chain._decode(bad)


def test_a_printable_space_is_only_the_ascii_space():
    """check_key relies on it: isprintable() and no " " is the same test as isprintable() and no split()."""
    odd = [c for c in map(chr, range(0x110000)) if c.isprintable() and c.split() != [c]]
    assert odd == [" "]
    for bad in ("a\u00a0b", "a\u2028b", "a\u3000b", "a\tb", "a\u200bb"):
        with pytest.raises(InputError):
            chain.check_key(bad)
    assert chain.check_key("t\u00e9ble-7:\u20ac1") == "t\u00e9ble-7:\u20ac1"


def test_segment_digest_in_bulk_is_the_same():
    entries = [(chain.entry_hash(f"[{i}]"), f"k\u00e9y-{i}", f"[{i}]") for i in range(7)]
    one = chain.SegmentDigest()
    for h, k, t in entries:
        one.add(h, k, t)
    bulk = chain.SegmentDigest()
    bulk.add_many([], [], [])
    for part in (entries[:1], entries[1:4], [], entries[4:]):
        bulk.add_many([h for h, _k, _t in part], [k for _h, k, _t in part], [t.encode() for _h, _k, t in part])
    assert (bulk.n, bulk.hexdigest()) == (one.n, one.hexdigest())
    hashes, keys, texts = (x.encode() for x in ("".join(h for h, _k, _t in entries),
                                                  "\n".join(k for _h, k, _t in entries),
                                                  "\n".join(t for _h, _k, t in entries)))
    assert chain.digest_of_parts(hashes, keys, texts) == one.hexdigest()


def test_canonical_checked_finds_every_float():
    """It skips decoding when the text has none of '.', 'e+', 'e-': every float the encoder writes has one."""
    import math
    import random
    import struct

    rng = random.Random(7)
    floats = [0.0, -0.0, 1.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 123456789012345678.0, 0.1, 2.5e-5]
    floats += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    for f in floats:
        if not math.isfinite(f):
            continue
        text = float.__repr__(f)
        assert "." in text or "e+" in text or "e-" in text, text
        for value in (f, {"x": f}, [1, {"k": [f]}]):
            with pytest.raises(ValueError):
                chain.canonical_checked(value)
    for ok in ({"value": 10**20, "meter": "table-7", "note": "e+e-."}, [True, None, "x"], 0):
        assert chain.canonical_checked(ok) == chain.canonical(ok)

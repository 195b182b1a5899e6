"""Register maps: the shipped ones load; bad ones are refused naming the file and the TOML path; register
values decode and encode exactly (uint32/int32 word order, scale to cents)."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.errors import InputError
from drivers.events import SignMessage
from drivers.modbus import Kind, RegisterMapError, Table, load_register_map
from drivers.modbus.core import codec
from drivers.modbus.core.codec import DataType, WordOrder
from drivers.modbus.devices import plan_blocks
from drivers.modbus.registermap import Point, parse_register_map

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "config" / "devices").glob("*.toml"))


def test_shipped_maps_load():
    assert {p.name for p in SHIPPED} >= {"seat-single.toml", "seat-io.toml", "lockout.toml", "sign.toml"}
    kinds = {}
    for path in SHIPPED:
        m = load_register_map(path)
        kinds[path.name] = m.kind
        assert m.source == str(path)
    assert kinds["seat-io.toml"] is Kind.SEAT and kinds["sign.toml"] is Kind.SIGN
    io = load_register_map(ROOT / "config" / "devices" / "seat-io.toml")
    assert io.seats == list(range(1, 8))
    # seven sensors on consecutive discrete inputs: one read; lights in two banks: two blocks
    assert [(b.table, b.address, b.count) for b in plan_blocks(io.inputs)] == [(Table.DISCRETE_INPUT, 0, 7)]
    assert [(b.address, b.count) for b in plan_blocks(io.outputs, write=True)] == [(0, 7), (8, 7)]
    sign = load_register_map(ROOT / "config" / "devices" / "sign.toml")
    assert sign.message_codes[SignMessage.WIN] == 1
    assert [(b.address, b.count) for b in plan_blocks(sign.outputs)] == [(0, 6), (16, 8)]


SEAT_OK = """
kind = "seat"
[[inputs]]
role = "wager_present"
seat = 1
spot = "progressive"
table = "discrete_input"
address = 0
[[inputs]]
role = "wager_amount"
seat = 1
spot = "progressive"
table = "input_register"
address = 0
type = "uint32"
word_order = "big"
scale = 100
[[outputs]]
role = "accepted_light"
seat = 1
spot = "progressive"
table = "coil"
address = 0
[[outputs]]
role = "win_light"
seat = 1
table = "coil"
address = 1
"""

LOCKOUT_OK = """
kind = "lockout"
[[inputs]]
role = "button"
mode = "counter"
table = "input_register"
address = 0
type = "uint16"
[[outputs]]
role = "lamp"
table = "coil"
address = 0
"""

SIGN_OK = """
kind = "sign"
[[outputs]]
role = "meter_amount"
slot = 1
table = "holding_register"
address = 0
type = "uint32"
word_order = "little"
[[outputs]]
role = "message_code"
table = "holding_register"
address = 10
type = "uint16"
[[outputs]]
role = "message_seat"
table = "holding_register"
address = 11
type = "uint16"
[[outputs]]
role = "message_amount"
table = "holding_register"
address = 12
type = "uint32"
word_order = "big"
scale = "0.1"
[[outputs]]
role = "message_table"
table = "holding_register"
address = 14
type = "ascii"
length = 4
"""


def _write(tmp_path: Path, text: str, name: str = "map.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_maps_parse(tmp_path):
    seat = load_register_map(_write(tmp_path, SEAT_OK))
    amount = seat.one("wager_amount")
    assert amount.scale == 100 and amount.width == 2 and amount.to_cents(7) == 700
    sign = load_register_map(_write(tmp_path, SIGN_OK))
    assert sign.one("message_amount").from_cents(123) == 1230  # tenths of a cent
    assert load_register_map(_write(tmp_path, LOCKOUT_OK)).one("button").mode.value == "counter"


def _replace(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


BAD = [
    # (name, map text, TOML path of the error, words in the problem)
    ("unknown kind", _replace(LOCKOUT_OK, 'kind = "lockout"', 'kind = "shoe"'), "kind", "'seat', 'lockout' or 'sign'"),
    ("amount on a bit table", _replace(SEAT_OK, 'table = "input_register"\naddress = 0\ntype = "uint32"',
                                      'table = "discrete_input"\naddress = 1\ntype = "bool"'),
     "inputs[1].type", "wager_amount is an amount"),
    ("overlapping addresses", _replace(SEAT_OK, 'table = "coil"\naddress = 1', 'table = "coil"\naddress = 0'),
     "outputs[1].address", "overlaps outputs[0] (coil 0)"),
    ("bad data type", _replace(LOCKOUT_OK, 'type = "uint16"', 'type = "float32"'), "inputs[0].type", "Input should be"),
    ("bit table with a number", _replace(LOCKOUT_OK, 'mode = "counter"\ntable = "input_register"',
                                         'mode = "counter"\ntable = "discrete_input"'), "inputs[0].type", "one bit"),
    ("missing win light", SEAT_OK.split("[[outputs]]\nrole = \"win_light\"")[0], "outputs", "missing win_light for seat 1"),
    ("missing accepted light", _replace(SEAT_OK, '[[outputs]]\nrole = "accepted_light"\nseat = 1\nspot = "progressive"\n'
                                        'table = "coil"\naddress = 0\n', ""),
     "outputs", "missing accepted_light for seat 1 spot 'progressive' (inputs[0])"),
    ("two win lights", _replace(SEAT_OK, 'role = "accepted_light"\nseat = 1\nspot = "progressive"\ntable = "coil"\naddress = 0\n',
                                'role = "win_light"\nseat = 1\ntable = "coil"\naddress = 2\n'),
     "outputs[1].seat", "a second win_light"),
    ("missing lamp", LOCKOUT_OK.split("[[outputs]]")[0], "outputs", "needs a lamp point"),
    ("missing message code", _replace(SIGN_OK, 'role = "message_code"', 'role = "meter_amount"\nslot = 2'),
     "outputs", "needs a message_code point"),
    ("scale that loses cents on input", _replace(SEAT_OK, "scale = 100", "scale = 0.5"), "inputs[1].scale", "loses cents"),
    ("scale that loses cents on output", _replace(SIGN_OK, 'scale = "0.1"', "scale = 100"), "outputs[3].scale",
     "loses cents"),
    ("no word order", _replace(SEAT_OK, 'word_order = "big"\n', ""), "inputs[1].word_order", "required for uint32"),
    ("word order on 16 bits", _replace(LOCKOUT_OK, 'type = "uint16"', 'type = "uint16"\nword_order = "big"'),
     "inputs[0].word_order", "only for 32-bit"),
    ("misspelt key", _replace(LOCKOUT_OK, "address = 0\ntype", "adress = 0\ntype"), "inputs[0].adress", "unknown key"),
    ("output on a read-only table", _replace(LOCKOUT_OK, 'role = "lamp"\ntable = "coil"', 'role = "lamp"\ntable = "discrete_input"'),
     "outputs[0].table", "read-only"),
    ("role of another kind", _replace(LOCKOUT_OK, 'role = "lamp"', 'role = "win_light"'), "outputs[0].role",
     "not a lockout output"),
    ("address out of range", _replace(LOCKOUT_OK, "address = 0\ntype", "address = 70000\ntype"),
     "inputs[0].address", "0..65535"),
    ("runs past the last address", _replace(SEAT_OK, "address = 0\ntype = \"uint32\"", "address = 65535\ntype = \"uint32\""),
     "inputs[1].address", "run past 65535"),
    ("amount without presence", _replace(SEAT_OK, 'spot = "progressive"\ntable = "input_register"', 'spot = "ante"\ntable = "input_register"'),
     "inputs[1].spot", "no wager_present for seat 1 spot 'ante'"),
    ("ascii without length", _replace(SIGN_OK, "length = 4\n", ""), "outputs[4].length", "required for ascii"),
    ("counter as bool", _replace(LOCKOUT_OK, 'type = "uint16"', 'type = "bool"'), "inputs[0].type", "needs uint16"),
    ("momentary as number", _replace(LOCKOUT_OK, 'mode = "counter"', 'mode = "momentary"'), "inputs[0].type", "on or off"),
    ("seat out of range", _replace(SEAT_OK, "seat = 1\nspot", "seat = 0\nspot"), "inputs[0].seat", "1..64"),
    ("a sign with inputs", SIGN_OK + '[[inputs]]\nrole = "button"\nmode = "counter"\ntable = "coil"\naddress = 0\n',
     "inputs[0].role", "a sign has no inputs"),
    ("string for a number", _replace(LOCKOUT_OK, "address = 0\ntype", 'address = "0"\ntype'), "inputs[0].address",
     "valid integer"),
    ("message code clash", SIGN_OK + "[message_codes]\nWIN = 2\n", "message_codes", "share a code"),
]


@pytest.mark.parametrize("name,text,where,words", BAD, ids=[b[0] for b in BAD])
def test_bad_maps_are_refused_naming_file_and_path(tmp_path, name, text, where, words):
    path = _write(tmp_path, text, "seat-io.toml")
    with pytest.raises(RegisterMapError) as err:
        load_register_map(path)
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"{path}: {where}: "), first
    assert words in first, first
    assert isinstance(err.value, InputError) and err.value.field == where


def test_the_error_format_of_the_docs(tmp_path):
    # config/devices/seat-io.toml with its third sensor wired to the first one's input
    text = (ROOT / "config" / "devices" / "seat-io.toml").read_text().replace(
        "seat = 3\nspot = \"progressive\"\ntable = \"discrete_input\"\naddress = 2",
        "seat = 3\nspot = \"progressive\"\ntable = \"discrete_input\"\naddress = 0")
    path = _write(tmp_path, text, "seat-io.toml")
    with pytest.raises(RegisterMapError) as err:
        load_register_map(path)
    assert str(err.value) == f"{path}: inputs[2].address: overlaps inputs[0] (discrete_input 0)"


def test_every_error_is_listed(tmp_path):
    text = _replace(_replace(LOCKOUT_OK, 'type = "uint16"', 'type = "int32"'), 'role = "lamp"', 'role = "lmap"')
    with pytest.raises(RegisterMapError) as err:
        load_register_map(_write(tmp_path, text))
    fields = [f for f, _ in err.value.errors]
    assert "inputs[0].type" in fields and "outputs[0].role" in fields
    assert len(str(err.value).splitlines()) == len(err.value.errors)


def test_unreadable_and_invalid_toml(tmp_path):
    with pytest.raises(RegisterMapError, match="cannot read"):
        load_register_map(tmp_path / "absent.toml")
    path = _write(tmp_path, "kind = \n")
    with pytest.raises(RegisterMapError) as err:
        load_register_map(path)
    assert str(err.value).startswith(f"{path}: not valid TOML")


# --- values -----------------------------------------------------------------------------------------


def _point(dtype: DataType, word_order: WordOrder | None = None, scale: Fraction = Fraction(1)) -> Point:
    return Point(path="inputs[0]", role="wager_amount", table=Table.INPUT_REGISTER, address=0, dtype=dtype,
                 word_order=word_order, scale=scale)


def test_word_order_by_example():
    big, little = _point(DataType.UINT32, WordOrder.BIG), _point(DataType.UINT32, WordOrder.LITTLE)
    assert big.encode(0x12345678) == [0x1234, 0x5678]
    assert little.encode(0x12345678) == [0x5678, 0x1234]
    assert big.decode([0xFFFF, 0xFFFE]) == 0xFFFFFFFE
    assert _point(DataType.INT32, WordOrder.BIG).decode([0xFFFF, 0xFFFE]) == -2
    assert _point(DataType.INT16).decode([0x8000]) == -32768
    with pytest.raises(ValueError):
        big.encode(1 << 32)
    with pytest.raises(ValueError):
        _point(DataType.UINT16).encode(-1)


WIDE = st.sampled_from([(DataType.UINT32, WordOrder.BIG), (DataType.UINT32, WordOrder.LITTLE),
                        (DataType.INT32, WordOrder.BIG), (DataType.INT32, WordOrder.LITTLE),
                        (DataType.UINT16, None), (DataType.INT16, None)])
REGISTER = st.integers(0, 0xFFFF)


@given(WIDE, st.data())
def test_values_round_trip(layout, data):
    dtype, order = layout
    lo, hi = codec.int_range(dtype)
    value = data.draw(st.integers(lo, hi))
    p = _point(dtype, order)
    assert p.decode(p.encode(value)) == value


@given(WIDE, st.lists(REGISTER, min_size=2, max_size=2))
def test_registers_round_trip(layout, regs):
    dtype, order = layout
    p = _point(dtype, order)
    regs = regs[:p.width]
    assert p.encode(p.decode(regs)) == regs


@given(st.integers(1, 10_000), st.integers(0, 0xFFFFFFFF), st.sampled_from(list(WordOrder)))
def test_amounts_read_exactly(scale, raw, order):
    p = _point(DataType.UINT32, order, Fraction(scale))
    cents = p.to_cents(p.decode(p.encode(raw)))
    assert cents == raw * scale and isinstance(cents, int)
    assert p.from_cents(cents) == raw


@given(st.integers(1, 1000), st.integers(0, 4_000_000))
def test_amounts_written_exactly(per_cent, cents):
    scale = Fraction(1, per_cent)  # counts of 1/per_cent cent
    assert codec.scale_writes_exactly(scale)
    raw = codec.cents_to_raw(cents, scale)
    assert raw == cents * per_cent and codec.raw_to_cents(raw, scale) == cents


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=8))
def test_ascii_round_trip(text):
    regs = codec.ascii_to_registers(text, 4)
    assert len(regs) == 4 and codec.registers_to_ascii(regs) == text


def test_scales_that_lose_cents():
    assert not codec.scale_reads_exactly(Fraction(1, 10))
    assert not codec.scale_writes_exactly(Fraction(100))
    with pytest.raises(ValueError):
        codec.cents_to_raw(150, Fraction(100))
    with pytest.raises(ValueError):
        codec.raw_to_cents(3, Fraction(1, 2))


def test_parse_from_data_names_the_source():
    with pytest.raises(RegisterMapError) as err:
        parse_register_map({"kind": "seat"}, "inline")
    assert str(err.value) == "inline: inputs: a seat map needs at least one wager_present point"

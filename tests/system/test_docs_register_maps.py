"""docs/register-maps.md is the specification vendors build devices from: its register tables, models, identity
values, function codes and unit ids are checked here against the shipped maps and tables, so that the document
cannot drift from what the controller reads and writes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from drivers.modbus import ModbusBus, SerialBusSettings, TcpSettings, make_device
from drivers.modbus.core.codec import ascii_to_registers
from drivers.modbus.devices import ModbusDevice, plan_blocks
from drivers.modbus.frames import READ_FC, write_fc
from drivers.modbus.registermap import Point, RegisterMap, Table, load_register_map

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "register-maps.md").read_text(encoding="utf-8")
MAPS = sorted((ROOT / "config" / "devices").glob("*.toml"))
PREFIX = {Table.COIL: "0", Table.DISCRETE_INPUT: "1", Table.INPUT_REGISTER: "3", Table.HOLDING_REGISTER: "4"}


def _manual(table: Table, address: int) -> str:
    """A manual's 5-digit number: the table's digit, then the address counted from 1."""
    return f"{PREFIX[table]}{address + 1:04d}"


def _span(first: str, last: str) -> str:
    return first if first == last else f"{first}-{last}"


def _row_of(p: Point) -> tuple[str, ...]:
    """What the document's row of a point says: role and qualifiers, table, addresses, manual numbers, type."""
    who = " ".join(x for x in (f"seat {p.seat}" if p.seat else "", f"`{p.spot}`" if p.spot else "",
                               f"slot {p.slot}" if p.slot else "", p.mode.value if p.mode else "") if x)
    kind = p.dtype.value + (f" {p.word_order.value}" if p.word_order else "") + (f" {p.length}" if p.length else "")
    return (f"`{p.role}`" + (f" {who}" if who else ""), f"`{p.table.value}`",
            _span(str(p.address), str(p.end - 1)), _span(_manual(p.table, p.address), _manual(p.table, p.end - 1)),
            f"`{kind}`")


def _section(heading: str) -> str:
    """The text under a heading, to the next heading."""
    at = DOC.find(heading + "\n")
    assert at >= 0, f"no heading {heading!r} in docs/register-maps.md"
    body = DOC[at + len(heading) + 1:]
    nxt = re.search(r"^#{1,4} ", body, re.M)
    return body[:nxt.start()] if nxt else body


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _table_rows(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    return rows[2:]  # past the header and its rule


def _map(path: Path) -> RegisterMap:
    return load_register_map(path)


@pytest.mark.parametrize("path", MAPS, ids=[p.stem for p in MAPS])
def test_each_shipped_map_has_its_register_table(path):
    m = _map(path)
    rows = _table_rows(_section(f"### `{path.name}`: `{m.model}`"))
    documented = sorted(tuple(r[:5]) for r in rows)
    points = [*m.inputs, *m.outputs, *([m.identity] if m.identity else [])]
    assert documented == sorted(_row_of(p) for p in points)
    for r in rows:  # every row says how it is accessed and what it holds at power-on
        assert r[5] in ("R", "R/W") and r[6] and r[7], r
        assert (r[5] == "R/W") == (r[1] in ("`coil`", "`holding_register`") and not r[0].startswith("`identity`"))
    if m.identity is not None:
        (ident,) = [r for r in rows if r[0] == "`identity`"]
        assert ident[6] == f"`{m.model}`"


@pytest.mark.parametrize("path", MAPS, ids=[p.stem for p in MAPS])
def test_each_shipped_map_names_the_function_codes_it_needs(path):
    m = _map(path)
    text = _section(f"### `{path.name}`: `{m.model}`")
    para = text[text.index("Function codes:"):].split("\n\n")[0].replace("\n", " ")
    first = re.sub(r"\([^)]*\)", "", para).split(". ")[0]
    required_part, _, optional_part = first.partition("optional")
    required = {int(n) for n in re.findall(r"\d+", required_part)}
    optional = {int(n) for n in re.findall(r"\d+", optional_part)}
    reads = {READ_FC[p.table] for p in (*m.inputs, *m.outputs, *([m.identity] if m.identity else []))}
    singles = {write_fc(p.table, 1) for p in m.outputs}
    multiples = {write_fc(b.table, b.count) for b in plan_blocks(m.outputs, write=True) if b.count > 1}
    assert required == reads | singles, para
    assert optional == multiples, para


def test_the_shipped_maps_table_names_every_map_and_its_model():
    rows = _table_rows(_section("## Maps shipped"))
    listed = {r[0].strip("`"): r[1].strip("`") for r in rows}
    assert listed == {p.name: _map(p).model for p in MAPS}


def test_the_identity_values_are_what_the_models_encode_to():
    rows = {r[0].strip("`"): r[1] for r in _table_rows(_section("### Identity"))}
    with_identity = [m for m in map(_map, MAPS) if m.identity is not None]
    assert set(rows) == {m.model for m in with_identity}
    for m in with_identity:
        assert m.identity is not None
        words = ascii_to_registers(m.model, m.identity.width)
        assert rows[m.model] == "`" + " ".join(f"0x{w:04X}" for w in words) + "`", m.model
        where = (f"input registers {m.identity.address}-{m.identity.end - 1} "
                 f"({_manual(m.identity.table, m.identity.address)}-{_manual(m.identity.table, m.identity.end - 1)})")
        assert where in _flat(_section("### Identity")), where


def _units() -> dict[str, dict[str, set[int]]]:
    """Unit ids of each kind in every shipped table and rig file."""
    found: dict[str, dict[str, set[int]]] = {}
    for f in sorted((ROOT / "config" / "tables").glob("*.toml")):
        for d in tomllib.loads(f.read_text()).get("devices", {}).values():
            if "unit" in d:
                found.setdefault(f.name, {}).setdefault(d["kind"], set()).add(d["unit"])
    for f in sorted((ROOT / "config" / "hil").glob("*.toml")):
        data = tomllib.loads(f.read_text())
        for bus in (*data.get("rtu", []), *data.get("tcp", [])):
            for d in bus["devices"]:
                found.setdefault(f.name, {}).setdefault(d["kind"], set()).add(d["unit"])
    return found


def test_the_unit_ids_the_document_gives_are_those_shipped():
    units = _units()
    lockouts = {f: k["lockout"] for f, k in units.items() if "lockout" in k}
    signs = {f: k["sign"] for f, k in units.items() if "sign" in k}
    assert lockouts.pop("minimal.toml") == {10}
    assert set().union(*lockouts.values()) == {20} and set().union(*signs.values()) == {30}
    assert "minimal.toml" not in signs
    shipped = _section("## Maps shipped")
    assert "unit 20 on every shipped table and rig (unit 10 in `minimal.toml`)" in shipped
    assert "unit 30 on every shipped table and rig that has a sign (`minimal.toml` has none)" in shipped
    transport = _flat(_section("### Transport and unit ids"))
    assert "20 for the lock-out button and 30 for the sign (10 for the lock-out in `minimal.toml`)" in transport


def _driver(map_name: str, settings: SerialBusSettings | TcpSettings | None = None) -> ModbusDevice:
    """A driver as the daemon makes it (no options beyond the map), on a bus that is never opened."""
    bus = ModbusBus(settings or SerialBusSettings(port="unused"))
    return make_device(map_name, bus, 1, _map(ROOT / "config" / "devices" / f"{map_name}.toml"))


def _seconds(x: float) -> str:
    return f"{x:g} s"


def test_the_timing_the_document_gives_is_the_drivers_defaults():
    serial, tcp = SerialBusSettings(port="unused"), TcpSettings(host="unused")
    timing = _flat(_section("### Timing"))
    assert (f"**Answer within the bus's `timeout`**: {_seconds(serial.timeout)} on a serial line, "
            f"{_seconds(tcp.timeout)} on TCP") in timing
    assert f"tried again twice (`retries` {serial.retries}); after three failed attempts" in timing
    assert serial.retries == tcp.retries == 2
    assert f"at most `lockout_every - 1` ({serial.lockout_every - 1}) other devices' reads" in timing
    assert tcp.lockout_every == serial.lockout_every
    assert f"every `health_interval` ({_seconds(serial.health_interval)})" in timing
    seat, lockout, sign = _driver("seat-single"), _driver("lockout"), _driver("sign")
    assert seat.poll_interval == lockout.poll_interval
    assert f"(its `poll_interval`, {_seconds(seat.poll_interval)} by default" in timing
    assert sign.poll_interval == 1.0 and "the sign every second (its read-back), whatever the phase" in timing
    assert seat.verify_every == lockout.verify_every
    assert f"read back every {seat.verify_every}th poll (`verify_every`)" in timing
    assert (f"a backoff from {_seconds(seat.backoff.initial)} doubling to {_seconds(seat.backoff.cap)}"
            in timing and seat.backoff.factor == 2)
    assert f"until {seat.busy_down_after} polls in a row are answered so" in _flat(
        _section("### Addresses and exceptions"))
    assert f"after `reconnect_after` ({tcp.reconnect_after}) failed transactions" in _flat(
        _section("### Transport and unit ids"))
    if "max_rate" in TcpSettings.model_fields:  # the cap of a TCP bus
        assert f"at most `max_rate` transactions a second ({tcp.max_rate:g} by default)" in timing

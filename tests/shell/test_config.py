"""The table configuration: the shipped examples load; every class of mistake is reported, all of them at
once, each at its exact TOML path with a hint; the result maps onto the drivers' settings."""

from __future__ import annotations

import copy
import json
import shutil
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from controller.config import (
    ConfigError,
    LinkedMeter,
    Problem,
    StandaloneMeter,
    TableConfig,
    build_drivers,
    check_config,
    driver_settings,
    hash_credential,
    load_config,
)
from controller.config.credentials import SCRYPT_N, SCRYPT_P, SCRYPT_R
from controller.config.model import MQTT_PROTOCOLS
from controller.games import GAMES
from controller.link.mqtt import PROTOCOLS, MqttSettings

from linkrig import AUTHORITY_KEY

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "config" / "tables"
DEVICES = ROOT / "config" / "devices"
# A hash made with the smallest cost the configuration accepts, so that tests run fast.
CREDENTIAL = hash_credential("a supervisor's secret", n=2**14, r=8, p=1)


# --- writing TOML (the standard library only reads it) ---------------------------------------------


def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, Decimal)):
        return str(v)
    if isinstance(v, str):
        # A TOML basic string: JSON's escapes, but characters outside the BMP written as themselves
        # (TOML has no surrogate pairs) and DEL escaped.
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(v)


def _is_array_of_tables(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dumps(doc: dict[str, Any]) -> str:
    lines: list[str] = []

    def emit(prefix: str, table: dict[str, Any]) -> None:
        for k, v in table.items():
            if not isinstance(v, dict) and not _is_array_of_tables(v):
                lines.append(f"{_key(k)} = {_value(v)}")
        for k, v in table.items():
            name = f"{prefix}.{_key(k)}" if prefix else _key(k)
            if isinstance(v, dict):
                lines.extend(["", f"[{name}]"])
                emit(name, v)
            elif _is_array_of_tables(v):
                for item in v:
                    lines.extend(["", f"[[{name}]]"])
                    emit(name, item)

    emit("", doc)
    return "\n".join(lines) + "\n"


# --- a sound table to break ------------------------------------------------------------------------


def _modbus(unit: int, rmap: str, **more: Any) -> dict[str, Any]:
    return {"transport": "rtu", "bus": "table-bus", "unit": unit, "register_map": str(DEVICES / rmap), **more}


def base() -> dict[str, Any]:
    """Flop Poker, six seats: one wagering device per seat, lock-out and sign on an RTU bus; a counting
    shuffler and a card-reading shoe on the line protocol."""
    devices: dict[str, Any] = {
        f"seat-{s}": {"kind": "seat", **_modbus(s, "seat-single.toml", seats=[s])} for s in range(1, 7)
    }
    devices["lockout"] = {"kind": "lockout", **_modbus(20, "lockout.toml")}
    devices["sign"] = {"kind": "sign", **_modbus(30, "sign.toml")}
    devices["shuffler"] = {"kind": "card-counter", "roles": ["shuffler"], "transport": "line",
                           "port": "/dev/ttyUSB1"}
    devices["shoe"] = {"kind": "card-counter", "roles": ["shoe"], "reads_cards": True, "transport": "line",
                       "port": "/dev/ttyUSB2", "baud": 9600}
    return {
        "table": "FP-01",
        "game": "flop-poker",
        "seats": 6,
        "state_dir": "state",
        "wagers": {
            "progressive-flop": {"paytable": "flop-poker-progressive-a", "meter": "main"},
            "flop": {"paytable": "flop-poker-flop-wager"},
        },
        "meters": {"main": {"reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00", "5.00"]}},
        "cards": {"source": "shoe", "shuffler": "counting"},
        "buses": {"table-bus": {"transport": "rtu", "port": "/dev/ttyUSB0", "baud": 19200, "parity": "E"}},
        "devices": devices,
        "supervisors": [{"name": "Pit Boss", "credential": CREDENTIAL}],
    }


def write(tmp_path: Path, doc: dict[str, Any] | str, name: str = "table.toml") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else dumps(doc), encoding="utf-8")
    return p


def problems(tmp_path: Path, doc: dict[str, Any] | str) -> list[Problem]:
    return check_config(write(tmp_path, doc))


def one(found: list[Problem], path: str) -> Problem:
    """The one problem found, which must be at `path`."""
    assert [p.path for p in found] == [path], "\n".join(map(str, found))
    return found[0]


def at(found: list[Problem], path: str) -> Problem:
    """The problem at `path` among others."""
    hits = [p for p in found if p.path == path]
    assert len(hits) == 1, f"no single problem at {path}:\n" + "\n".join(map(str, found))
    return hits[0]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of config/ (tables, devices, paytables), so that examples can be edited with their relative
    paths intact."""
    for sub in ("tables", "devices", "paytables"):
        shutil.copytree(ROOT / "config" / sub, tmp_path / sub)
    return tmp_path


def edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


# --- the examples --------------------------------------------------------------------------------

EXAMPLES = sorted(TABLES.glob("*.toml"))


def test_base_is_sound(tmp_path):
    cfg = load_config(write(tmp_path, base()))
    assert cfg.game.id == "flop-poker" and cfg.seats == 6
    assert cfg.state_dir == tmp_path / "state"  # relative to the configuration file
    assert isinstance(cfg.meters["main"], StandaloneMeter)
    assert cfg.meters["main"].params.reset_cents == 10_000_00
    assert cfg.meters["main"].params.rate == Fraction(15, 100)
    assert cfg.cards is not None and cfg.cards.stub_count_every is None  # a counting shuffler
    assert cfg.supervisors[0].name == "Pit Boss"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_sound(path):
    assert check_config(path) == []
    cfg = load_config(path)
    assert isinstance(cfg, TableConfig)
    assert path.stem == cfg.game.id or path.stem.startswith(cfg.game.id + "-")  # the game, or the game and a variant
    assert 1 <= cfg.seats <= cfg.game.max_seats
    assert cfg.wagers and cfg.devices
    # the hashes at the default cost (32 MiB a check): an example is what a box is set up from
    assert {(c.scheme, c.n, c.r, c.p) for c in (s.credential for s in cfg.supervisors)} == {
        ("scrypt", SCRYPT_N, SCRYPT_R, SCRYPT_P)}


def test_an_example_for_every_game_with_a_progressive_wager_and_hot_roller():
    want = {g.id for g in GAMES.values() if any(w.progressive for w in g.wagers.values())} | {"hot-roller-craps"}
    assert want <= {p.stem for p in EXAMPLES}
    assert len(want) >= 10


RIG_TABLES = {"caribbean-stud.toml": "caribbean-stud-7.toml", "hot-roller-craps.toml": "craps-hot-roller.toml"}


def _rig_kind(d: Any) -> str:
    if d.kind == "card-counter":
        return "+".join(d.roles)
    return "dice" if d.kind == "dice-entry" else d.kind


@pytest.mark.parametrize(("ours", "rig"), RIG_TABLES.items())
def test_examples_are_cabled_as_the_rig(ours, rig):
    from hil.rig_config import load_rig_config

    cfg = load_config(TABLES / ours)
    table = load_rig_config(ROOT / "config" / "hil" / rig)
    assert (cfg.table, cfg.seats) == (table.table, table.seats)
    theirs = {}
    for _, dev in table.devices():
        theirs[dev.name] = (dev.kind, getattr(dev, "unit", None), tuple(dev.seats),
                            getattr(dev, "map", None) and Path(dev.map).resolve())
    mine = {d.name: (_rig_kind(d), d.unit, d.seats, d.register_map_path) for d in cfg.devices.values()}
    assert mine == theirs
    buses = {b.name for b in (*table.rtu, *table.tcp)}
    assert set(cfg.buses) == buses


def test_examples_use_the_rig_device_files():
    used = set()
    for path in EXAMPLES:
        cfg = load_config(path)
        for d in cfg.devices.values():
            if d.register_map_path is not None:
                assert d.register_map_path.parent == DEVICES.resolve()
                used.add(d.register_map_path.name)
    assert {"seat-single.toml", "seat-io.toml", "lockout.toml", "sign.toml"} <= used


# --- meters and money ----------------------------------------------------------------------------


def test_reset_below_the_floor(tmp_path):
    doc = base()
    doc["meters"]["main"]["reset"] = "5000.00"
    p = one(problems(tmp_path, doc), "meters.main.reset")
    assert p.message.startswith("$5,000.00 is below the $10,000 floor (§ 667a.12(d)(3)")
    assert '"10000.00"' in p.hint


@pytest.mark.parametrize("rate", ["0", "1", "1.5", "0.0000"])
def test_rate_outside_zero_to_one(tmp_path, rate):
    doc = base()
    doc["meters"]["main"]["rate"] = rate
    p = one(problems(tmp_path, doc), "meters.main.rate")
    assert "more than 0 and less than 1" in p.message


def test_rate_may_be_a_bare_decimal_read_exactly(tmp_path):
    doc = base()
    doc["meters"]["main"]["rate"] = Decimal("0.1234")
    cfg = load_config(write(tmp_path, doc))
    assert cfg.meters["main"].params.rate == Fraction(1234, 10000)


def test_rate_with_more_than_four_places(tmp_path):
    doc = base()
    doc["meters"]["main"]["rate"] = "0.12345"
    assert "more than 4 decimal places" in one(problems(tmp_path, doc), "meters.main.rate").message


@pytest.mark.parametrize(("key", "value", "path"), [
    ("reset", Decimal("10000.0"), "meters.main.reset"),
    ("reset", Decimal("1e4"), "meters.main.reset"),
    ("ceiling", Decimal("50000.5"), "meters.main.ceiling"),
    ("wager_sizes", ["1.00", Decimal("5.0")], "meters.main.wager_sizes[1]"),
])
def test_float_money_is_refused_saying_how_to_write_it(tmp_path, key, value, path):
    doc = base()
    doc["meters"]["main"][key] = value
    p = one(problems(tmp_path, doc), path)
    assert "is a TOML float" in p.message
    assert "in quotes" in p.hint and "whole number of dollars" in p.hint


def test_float_money_hint_gives_the_amount_in_cents(tmp_path):
    doc = base()
    doc["meters"]["main"]["reset"] = Decimal("12500.5")
    assert '"12500.50"' in one(problems(tmp_path, doc), "meters.main.reset").hint


def test_money_as_whole_dollars(tmp_path):
    doc = base()
    doc["meters"]["main"].update(reset=25000, ceiling=100000, wager_sizes=[1, "5.00"])
    params = load_config(write(tmp_path, doc)).meters["main"].params
    assert (params.reset_cents, params.ceiling_cents, params.wager_sizes) == (2_500_000, 10_000_000, (100, 500))


@pytest.mark.parametrize("text", ["$10,000.00", "10000.001", "-5", "ten"])
def test_money_strings_that_are_not_amounts(tmp_path, text):
    doc = base()
    doc["meters"]["main"]["reset"] = text
    p = one(problems(tmp_path, doc), "meters.main.reset")
    assert 'write reset = "10000.00"' in p.hint


def test_ceiling_reserve_and_history_are_checked_by_the_meter_parameters(tmp_path):
    doc = base()
    doc["meters"]["main"].update(reset="20000.00", ceiling="15000.00", reserve_rate="0.9", history_size=10)
    found = problems(tmp_path, doc)
    assert {p.path for p in found} == {"meters.main.ceiling", "meters.main.reserve_rate", "meters.main.history_size"}
    assert "must be above the reset amount $20,000.00" in at(found, "meters.main.ceiling").message


def test_every_problem_of_one_meter_is_reported(tmp_path):
    doc = base()
    doc["meters"]["main"].update(reset="5000.00", rate="2", resett="1", wager_sizes=["1.00", Decimal("2.5")])
    found = problems(tmp_path, doc)
    assert [p.path for p in found] == [
        "meters.main.resett", "meters.main.wager_sizes[1]", "meters.main.reset", "meters.main.rate",
    ]


def test_wager_size_listed_twice(tmp_path):
    doc = base()
    doc["meters"]["main"]["wager_sizes"] = ["1.00", "1"]
    assert "listed twice" in one(problems(tmp_path, doc), "meters.main.wager_sizes[1]").message


def test_meter_that_no_wager_uses(tmp_path):
    doc = base()
    doc["meters"]["spare"] = dict(doc["meters"]["main"])
    one(problems(tmp_path, doc), "meters.spare")


def test_progressive_wager_without_its_meter(tmp_path):
    doc = base()
    del doc["wagers"]["progressive-flop"]["meter"]
    # One problem: "no wager uses meters.main" would only repeat it.
    p = one(problems(tmp_path, doc), "wagers.progressive-flop.meter")
    assert p.message == "is required: the Progressive Flop Wager is paid from a progressive meter"


def test_wager_naming_a_meter_that_is_not_defined(tmp_path):
    doc = base()
    doc["wagers"]["progressive-flop"]["meter"] = "mian"
    found = problems(tmp_path, doc)
    assert "no meter 'mian' is defined" in at(found, "wagers.progressive-flop.meter").message


def test_non_progressive_wager_with_a_meter(tmp_path):
    doc = base()
    doc["wagers"]["flop"]["meter"] = "main"
    assert "not a progressive wager" in one(problems(tmp_path, doc), "wagers.flop.meter").message


# --- unknown keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "typo", "meant"), [
    ((), "seat", "seats"),
    (("meters", "main"), "resett", "reset"),
    (("devices", "seat-2"), "unti", "unit"),
    (("devices", "shoe"), "baudrate", "baud"),
    (("buses", "table-bus"), "parrity", "parity"),
    (("cards",), "shufler", "shuffler"),
    (("wagers", "flop"), "paytabel", "paytable"),
])
def test_a_typo_is_an_unknown_key_with_a_suggestion(tmp_path, where, typo, meant):
    doc = base()
    table = doc
    for k in where:
        table = table[k]
    table[typo] = table.pop(meant) if meant in table else 1
    found = problems(tmp_path, doc)
    path = ".".join((*where, typo))
    p = at(found, path)
    assert p.message == "unknown key"
    assert p.hint.startswith(f"did you mean {meant!r}?")


def test_unknown_key_in_a_supervisor(tmp_path):
    doc = base()
    doc["supervisors"][0]["role"] = "pit"
    assert one(problems(tmp_path, doc), "supervisors[0].role").message == "unknown key"


def test_unknown_wager_of_the_game(tmp_path):
    doc = base()
    doc["wagers"]["progresive-flop"] = doc["wagers"].pop("progressive-flop")
    found = problems(tmp_path, doc)
    p = at(found, "wagers.progresive-flop")
    assert "Flop Poker has no wager 'progresive-flop'" in p.message
    assert "'progressive-flop'" in p.hint


def test_unknown_game(tmp_path):
    doc = base()
    doc["game"] = "flop-pokr"
    p = at(problems(tmp_path, doc), "game")
    assert p.message == "unknown game 'flop-pokr'" and "'flop-poker'" in p.hint


# --- seats -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("game", "seats", "section"), [
    ("caribbean-stud", 8, "§ 639a.2(a)"),
    ("four-card-poker", 8, "§ 641a.2(a)"),
    ("let-it-ride", 8, "§ 643a.2(a)"),
    ("flop-poker", 7, "§ 667a.2(a)"),
    ("hot-roller-craps", 17, "§ 623c.1(a)(2)(i)"),
])
def test_seats_above_the_game_maximum_cite_the_section(tmp_path, game, seats, section):
    p = at(problems(tmp_path, {"game": game, "seats": seats}), "seats")
    assert f"at most {GAMES[game].max_seats}" in p.message and section in p.message
    assert p.hint == f"seats = {GAMES[game].max_seats} or fewer"


def test_seats_at_the_maximum_are_allowed(tmp_path):
    found = problems(tmp_path, {"game": "flop-poker", "seats": 6})
    assert "seats" not in [p.path for p in found]


def test_missing_seat_device(tmp_path):
    doc = base()
    del doc["devices"]["seat-3"]
    p = one(problems(tmp_path, doc), "devices")
    assert p.message == ("seat 3 is without a seat device (§ 667a.2(c)(1): a wagering device at each betting "
                         "position)")
    assert "[devices.seat-3]" in p.hint


def test_several_missing_seat_devices_in_one_problem(tmp_path):
    doc = base()
    for s in (2, 5, 6):
        del doc["devices"][f"seat-{s}"]
    assert one(problems(tmp_path, doc), "devices").message.startswith("seats 2, 5 and 6 are without a seat device")


def test_seat_served_by_two_devices(tmp_path):
    doc = base()
    doc["devices"]["seat-4"]["seats"] = [3]
    found = problems(tmp_path, doc)
    assert at(found, "devices.seat-4.seats[0]").message == "seat 3 is already served by devices.seat-3"
    assert "seat 4 is without a seat device" in at(found, "devices").message
    assert len(found) == 2


def test_seat_out_of_range(tmp_path):
    doc = base()
    doc["devices"]["seat-6"]["seats"] = [7]
    found = problems(tmp_path, doc)
    assert at(found, "devices.seat-6.seats[0]").message == "seat 7 is out of range: the table has seats 1-6"


def test_a_bad_unit_does_not_hide_a_missing_seat(tmp_path):
    doc = base()
    doc["devices"]["seat-1"]["unit"] = "1"
    del doc["devices"]["seat-2"]
    found = problems(tmp_path, doc)
    assert {p.path for p in found} == {"devices.seat-1.unit", "devices"}
    assert at(found, "devices.seat-1.unit").hint == "write it without quotes"


def test_multi_seat_module_and_its_first_seat(tmp_path):
    doc = base()
    for s in range(1, 7):
        del doc["devices"][f"seat-{s}"]
    doc["game"], doc["seats"] = "caribbean-stud", 7
    doc["wagers"] = {"progressive": {"paytable": "caribbean-stud-progressive-d", "meter": "main"}}
    doc["devices"]["seats"] = {"kind": "seat", **_modbus(1, "seat-io.toml", seats=[1, 2, 3, 4, 5, 6, 7])}
    cfg = load_config(write(tmp_path, doc))
    assert cfg.devices["seats"].first_seat == 1
    doc["devices"]["seats"]["seats"] = [1, 2, 3]
    assert "serves 7 seat(s); this device lists 3" in at(problems(tmp_path, doc), "devices.seats.seats").message
    doc["devices"]["seats"]["seats"] = [7, 6, 5, 4, 3, 2, 1]
    p = at(problems(tmp_path, doc), "devices.seats.seats")
    assert p.hint == "seats = [7, 8, 9, 10, 11, 12, 13]"


# --- paytables ---------------------------------------------------------------------------------------


def test_paytable_for_another_wager_is_refused(tmp_path):
    doc = base()
    doc["wagers"]["progressive-flop"]["paytable"] = "flop-poker-three-card-bonus"
    p = one(problems(tmp_path, doc), "wagers.progressive-flop.paytable")
    assert "not for the Progressive Flop Wager of Flop Poker" in p.message
    assert "progressivectl check-paytable --game flop-poker --wager progressive-flop" in p.hint


def test_paytable_the_rules_forbid_for_a_linked_meter(tree):
    # § 639a.12(d)(3): Paytables A, B, C and E may not be linked.
    cfg = edit(tree / "tables" / "caribbean-stud.toml", 'paytable = "caribbean-stud-progressive-d"',
               'paytable = "caribbean-stud-progressive-a"')
    text = cfg.read_text()
    start = text.index("[meters.main]")
    end = text.index("[meters.bonus]")
    cfg.write_text(text[:start] + '[meters.main]\nlinked = "pa-cs-main"\n\n' + text[end:]
                   + f'\n[mqtt]\nhost = "127.0.0.1"\nauthority_keys = ["{AUTHORITY_KEY}"]\n')
    p = one(check_config(cfg), "wagers.progressive.paytable")
    assert "may not be selected for linked games" in p.message and "§ 639a.12(d)(3)" in p.message


def test_example_paytables_are_refused_unless_allowed(tree):
    cfg = edit(tree / "tables" / "four-card-poker.toml", "allow_example_paytables = true", "")
    found = check_config(cfg)
    assert {p.path for p in found} == {"wagers.four-card-progressive.paytable", "wagers.five-card-progressive.paytable"}
    assert all("is an example" in p.message and "allow_example_paytables" in p.hint for p in found)


def test_meter_wager_size_without_an_envy_row(tree):
    cfg = edit(tree / "tables" / "caribbean-stud.toml", 'wager_sizes = ["1.00", "5.00"]',
               'wager_sizes = ["1.00", "2.00", "5.00"]')
    p = one(check_config(cfg), "meters.main.wager_sizes")
    assert "has no row for a $2.00 wager" in p.message


def test_paytable_file_relative_to_the_configuration(tree):
    cfg = load_config(tree / "tables" / "let-it-ride.toml")  # the package's example, by name
    assert cfg.wagers["three-card-progressive"].paytable.id == "let-it-ride-three-card-progressive-example"
    by_path = edit(tree / "tables" / "let-it-ride.toml", '"let-it-ride-three-card-progressive-example"',
                   '"../paytables/let-it-ride-three-card-progressive-example.toml"')
    cfg = load_config(by_path)  # a file, by its path relative to the table's
    assert cfg.wagers["three-card-progressive"].paytable.id == "let-it-ride-three-card-progressive-example"
    missing = edit(by_path, "let-it-ride-three-card-progressive-example.toml", "nope.toml")
    p = one(check_config(missing), "wagers.three-card-progressive.paytable")
    assert p.message.startswith("../paytables/nope.toml: cannot read the paytable file")


def test_unknown_paytable_id_suggests_one(tmp_path):
    doc = base()
    doc["wagers"]["flop"]["paytable"] = "flop-poker-flop-wagr"
    assert "did you mean 'flop-poker-flop-wager'?" in one(problems(tmp_path, doc), "wagers.flop.paytable").hint


# --- buses and devices ---------------------------------------------------------------------------------


def test_device_on_an_undefined_bus(tmp_path):
    doc = base()
    doc["devices"]["sign"]["bus"] = "tabel-bus"
    p = one(problems(tmp_path, doc), "devices.sign.bus")
    assert p.message == "no bus 'tabel-bus' is defined"
    assert "table-bus" in p.hint


def test_missing_register_map_file(tmp_path):
    doc = base()
    doc["devices"]["sign"]["register_map"] = str(DEVICES / "sgin.toml")
    p = one(problems(tmp_path, doc), "devices.sign.register_map")
    assert p.message.endswith("sgin.toml: no such file")


def test_register_map_is_loaded_with_the_drivers_loader(tmp_path):
    bad = tmp_path / "bad-map.toml"
    bad.write_text('kind = "seat"\n[[inputs]]\nrole = "wager_presnt"\nseat = 1\nspot = "progressive"\n'
                   'table = "discrete_input"\naddress = 0\n')
    doc = base()
    doc["devices"]["seat-1"]["register_map"] = "bad-map.toml"  # relative to the configuration file
    found = problems(tmp_path, doc)
    assert found and all(p.path == "devices.seat-1.register_map" for p in found)
    assert any("bad-map.toml: inputs[0].role" in p.message for p in found)


def test_register_map_of_another_kind(tmp_path):
    doc = base()
    doc["devices"]["lockout"]["register_map"] = str(DEVICES / "sign.toml")
    p = one(problems(tmp_path, doc), "devices.lockout.kind")
    assert "describes a sign device" in p.message


def test_unit_used_twice_on_a_bus(tmp_path):
    doc = base()
    doc["devices"]["sign"]["unit"] = 20
    assert one(problems(tmp_path, doc), "devices.sign.unit").message == \
        "unit 20 is already used on bus 'table-bus' by devices.lockout"


def test_unit_out_of_range_for_rtu(tmp_path):
    doc = base()
    doc["devices"]["sign"]["unit"] = 248
    one(problems(tmp_path, doc), "devices.sign.unit")


def test_bus_setting_on_a_modbus_device(tmp_path):
    doc = base()
    doc["devices"]["lockout"]["baud"] = 9600
    p = one(problems(tmp_path, doc), "devices.lockout.baud")
    assert p.hint == "set it in [buses.table-bus]"


def test_bus_settings_are_the_drivers_own(tmp_path):
    doc = base()
    doc["buses"]["table-bus"]["parity"] = "X"
    assert one(problems(tmp_path, doc), "buses.table-bus.parity").message == "must be 'N', 'E' or 'O', not the string 'X'"
    doc["buses"]["table-bus"].update(parity="N", backoff_initial=Decimal("9.0"), backoff_cap=1)
    assert "backoff_initial must not exceed backoff_cap" in one(problems(tmp_path, doc), "buses.table-bus").message
    doc["buses"]["table-bus"].update(backoff_initial=Decimal("0.5"), timeout=Decimal("0.4"))
    cfg = load_config(write(tmp_path, doc))
    assert cfg.buses["table-bus"].settings.timeout == 0.4  # seconds: a float once read, never money


def test_line_settings_are_checked_by_the_driver(tmp_path):
    doc = base()
    doc["devices"]["shoe"].update(baud=300, ack_timeout=Decimal("0.1"))
    p = one(problems(tmp_path, doc), "devices.shoe.ack_timeout")
    assert "shorter than a longest frame" in p.message


def test_unused_bus(tmp_path):
    doc = base()
    doc["buses"]["spare"] = {"transport": "rtu", "port": "/dev/ttyUSB9"}
    one(problems(tmp_path, doc), "buses.spare")


def test_two_devices_on_one_serial_port(tmp_path):
    doc = base()
    doc["devices"]["shoe"]["port"] = "/dev/ttyUSB0"
    assert "already the port of buses.table-bus" in one(problems(tmp_path, doc), "devices.shoe.port").message


def test_invalid_device_name_is_quoted_in_the_path(tmp_path):
    doc = base()
    doc["devices"]["Shoe 2"] = doc["devices"].pop("shoe")
    found = problems(tmp_path, doc)
    assert 'devices."Shoe 2"' in [p.path for p in found]


def test_a_name_defined_twice_is_malformed_toml_with_a_hint(tmp_path):
    text = dumps(base()) + '\n[devices.sign]\nkind = "sign"\n'
    p = one(problems(tmp_path, text), f"line {text.count(chr(10)) - 1}")
    assert p.message.startswith("malformed TOML") and "defined once" in p.hint


def test_no_lockout_device(tmp_path):
    doc = base()
    del doc["devices"]["lockout"]
    p = one(problems(tmp_path, doc), "devices")
    assert p.message.startswith("no lock-out device (§ 667a.2(c)(2)")


def test_no_sign_for_a_table_with_a_meter(tmp_path):
    doc = base()
    del doc["devices"]["sign"]
    assert one(problems(tmp_path, doc), "devices").message.startswith("no sign")


def test_card_counter_on_modbus(tmp_path):
    doc = base()
    doc["devices"]["shuffler"] = {"kind": "card-counter", "roles": ["shuffler"], **_modbus(40, "lockout.toml")}
    assert "speaks the line protocol" in one(problems(tmp_path, doc), "devices.shuffler.transport").message


# --- cards -------------------------------------------------------------------------------------------


def test_stub_count_without_a_counting_shuffler(tmp_path):
    doc = base()
    del doc["devices"]["shuffler"]
    doc["cards"] = {"source": "shoe", "shuffler": "none", "stub_count_every": 6}
    p = one(problems(tmp_path, doc), "cards.stub_count_every")
    assert "at least once every 5 rounds of play (§ 667a.8(f))" in p.message
    doc["cards"]["stub_count_every"] = 5
    assert load_config(write(tmp_path, doc)).cards.stub_count_every == 5
    del doc["cards"]["stub_count_every"]
    assert load_config(write(tmp_path, doc)).cards.stub_count_every == 5  # the default without one


def test_two_decks_need_a_shuffler(tmp_path):
    doc = base()
    del doc["devices"]["shuffler"]
    doc["cards"] = {"source": "shoe", "shuffler": "none", "two_decks": True}
    assert "§ 667a.3(b)" in one(problems(tmp_path, doc), "cards.two_decks").message


def test_counting_shuffler_needs_its_device(tmp_path):
    doc = base()
    del doc["devices"]["shuffler"]
    assert "no device is a shuffler" in one(problems(tmp_path, doc), "cards.shuffler").message


def test_cards_from_the_shoe_need_a_card_reading_shoe(tmp_path):
    doc = base()
    doc["devices"]["shoe"]["reads_cards"] = False
    assert "no device is a card-reading shoe" in one(problems(tmp_path, doc), "cards.source").message
    doc["cards"]["source"] = "dealer"
    assert problems(tmp_path, doc) == []


def test_card_table_needs_cards_section(tmp_path):
    doc = base()
    del doc["cards"]
    assert one(problems(tmp_path, doc), "cards").message == "is required at a card table"


# --- dice ------------------------------------------------------------------------------------------


def test_dice_table_decisions(tree):
    path = tree / "tables" / "hot-roller-craps.toml"
    cfg = load_config(path)
    assert cfg.cards is None and cfg.meters == {} and cfg.devices_of("dice-entry")
    # positions need not have seat devices: all or none
    text = path.read_text()
    start, end = text.index("[devices.seat-1]"), text.index("[devices.lockout]")
    path.write_text(text[:start] + text[end:])
    assert check_config(path) == []
    path.write_text(text.replace("seats = [4]", "seats = [3]\n"))
    found = check_config(path)
    assert {p.path for p in found} == {"devices.seat-4.seats[0]", "devices"}
    assert "seat 4 is without a seat device, while others have one" in at(found, "devices").message


def test_dice_table_needs_dice_entry_and_has_no_cards(tree):
    path = edit(tree / "tables" / "hot-roller-craps.toml", 'kind = "dice-entry"', 'kind = "card-counter"\nroles = ["shoe"]')
    path.write_text(path.read_text() + '\n[cards]\nsource = "dealer"\nshuffler = "none"\n')
    found = check_config(path)
    assert {p.path for p in found} == {"cards", "devices.dice.kind", "devices"}
    assert "no dice-entry device" in at(found, "devices").message


# --- supervisors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", ["hunter2hunter2", "pa$$word1", "$ecret!", "0123456789abcdef0123456789abcdef"])
def test_plain_text_credential_is_refused_and_never_repeated(tmp_path, secret):
    doc = base()
    doc["supervisors"][0]["credential"] = secret
    p = one(problems(tmp_path, doc), "supervisors[0].credential")
    assert "hash-credential" in p.hint
    assert secret not in p.message and secret not in p.hint
    assert "plain password" in p.message or "unsalted digest" in p.message


def test_password_key_in_a_supervisor(tmp_path):
    doc = base()
    doc["supervisors"][0]["password"] = "hunter2hunter2"
    p = one(problems(tmp_path, doc), "supervisors[0].password")
    assert p.message == "a password is never written in the configuration" and "hash-credential" in p.hint
    assert "hunter2" not in p.line()


def test_linked_meter_id(tmp_path):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1"}
    doc["meters"]["main"]["linked"] = "pa flop 1"
    p = one(problems(tmp_path, doc), "meters.main.linked")
    assert p.message == "'pa flop 1' is not a meter id of a link authority"


def test_numeric_pin_credential_is_not_repeated(tmp_path):
    doc = base()
    doc["supervisors"][0]["credential"] = 482913
    p = one(problems(tmp_path, doc), "supervisors[0].credential")
    assert "482913" not in p.line()


def test_weak_hash_parameters_are_refused(tmp_path):
    doc = base()
    doc["supervisors"][0]["credential"] = CREDENTIAL.replace("$16384$", "$1024$", 1)
    assert "power of two from 16384" in one(problems(tmp_path, doc), "supervisors[0].credential").message


def test_a_table_with_a_meter_needs_a_supervisor(tmp_path):
    doc = base()
    del doc["supervisors"]
    assert "§ 639a.11(c)(5)(iii)" in one(problems(tmp_path, doc), "supervisors").message


def test_supervisor_listed_twice(tmp_path):
    doc = base()
    doc["supervisors"].append(dict(doc["supervisors"][0]))
    one(problems(tmp_path, doc), "supervisors[1].name")


# --- linked meters and MQTT ----------------------------------------------------------------------------


def linked(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["meters"]["main"] = {"linked": "pa-flop-1", "wager_sizes": ["1.00", "5.00"]}
    return doc


def test_linked_meter_without_mqtt(tmp_path):
    p = one(problems(tmp_path, linked(base())), "meters.main.linked")
    assert "needs the [mqtt] section" in p.message and "[mqtt]" in p.hint


def test_linked_meter_with_mqtt(tmp_path):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "link.casino.example", "link_timeout": Decimal("7.5")}
    cfg = load_config(write(tmp_path, doc))
    meter = cfg.meters["main"]
    assert isinstance(meter, LinkedMeter) and meter.linked_id == "pa-flop-1" and meter.wager_sizes == (100, 500)
    assert cfg.mqtt is not None
    assert (cfg.mqtt.port, cfg.mqtt.tls, cfg.mqtt.client_id, cfg.mqtt.link_timeout) == (8883, True, "FP-01", 7.5)


def test_linked_meter_does_not_take_the_authoritys_parameters(tmp_path):
    doc = linked(base())
    doc["meters"]["main"]["reset"] = "10000.00"
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1"}
    assert "link authority" in one(problems(tmp_path, doc), "meters.main.reset").message


def test_mqtt_password_never_inline(tmp_path):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1", "username": "fp-01", "password": "s3cret-s3cret"}
    p = one(problems(tmp_path, doc), "mqtt.password")
    assert "never written in the configuration" in p.message and "password_file" in p.hint
    assert "s3cret" not in p.line()


def test_mqtt_password_file_must_be_private(tmp_path):
    secret = tmp_path / "mqtt-password"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1", "username": "fp-01", "password_file": "mqtt-password"}
    p = one(problems(tmp_path, doc), "mqtt.password_file")
    assert p.message == f"{secret} holds the MQTT password and can be read by its group and others (mode 0644)"
    assert p.hint == f"chmod 0600 {secret}; chown progressive {secret}"
    secret.chmod(0o600)
    cfg = load_config(write(tmp_path, doc))
    assert cfg.mqtt is not None and cfg.mqtt.password_file == tmp_path / "mqtt-password"


def test_mqtt_without_tls_only_on_this_machine(tmp_path):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "10.1.2.3", "tls": False}
    one(problems(tmp_path, doc), "mqtt.tls")
    doc["mqtt"]["host"] = "127.0.0.1"
    assert load_config(write(tmp_path, doc)).mqtt.port == 1883


def test_mqtt_client_certificate_comes_with_its_key(tmp_path):
    (tmp_path / "cert.pem").write_text("x")
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "127.0.0.1", "cert_file": "cert.pem"}
    one(problems(tmp_path, doc), "mqtt.key_file")


def test_mqtt_protocol_reaches_the_links_settings(tmp_path):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "link.casino.example"}
    assert load_config(write(tmp_path, doc)).mqtt.protocol == "5"  # the default
    doc["mqtt"]["protocol"] = "3.1.1"
    cfg = load_config(write(tmp_path, doc))
    assert cfg.mqtt is not None and cfg.mqtt.protocol == "3.1.1"
    assert MqttSettings.from_config(cfg.mqtt).protocol == "3.1.1"
    assert MQTT_PROTOCOLS == PROTOCOLS  # the configuration offers what the link speaks


@pytest.mark.parametrize("value", ["4", "3.1", 5, Decimal("3.1")])
def test_mqtt_protocol_is_5_or_311_in_quotes(tmp_path, value):
    doc = linked(base())
    doc["mqtt"] = {"authority_keys": [AUTHORITY_KEY], "host": "link.casino.example", "protocol": value}
    p = one(problems(tmp_path, doc), "mqtt.protocol")
    assert p.message.startswith('must be "5" or "3.1.1", not ') and 'protocol = "3.1.1"' in p.hint
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, doc))
    assert f"{tmp_path / 'table.toml'}: mqtt.protocol: must be" in str(e.value)


# --- the rest of the file ---------------------------------------------------------------------------------


def test_metrics_listen_address(tmp_path):
    doc = base()
    doc["metrics"] = {"listen": "[::1]:9100"}
    cfg = load_config(write(tmp_path, doc))
    assert (cfg.metrics.host, cfg.metrics.port, cfg.metrics.listen) == ("::1", 9100, "[::1]:9100")
    doc["metrics"] = {"listen": "0.0.0.0"}
    one(problems(tmp_path, doc), "metrics.listen")


def test_logging(tmp_path):
    doc = base()
    doc["logging"] = {"format": "console", "level": "debug"}
    assert load_config(write(tmp_path, doc)).logging.format == "console"
    doc["logging"] = {"format": "xml"}
    assert "must be 'json' or 'console'" in one(problems(tmp_path, doc), "logging.format").message


def test_state_dir_is_required(tmp_path):
    doc = base()
    del doc["state_dir"]
    assert one(problems(tmp_path, doc), "state_dir").message == "is required"


def test_state_dir_must_be_a_directory(tmp_path):
    (tmp_path / "state").write_text("not a directory")
    one(problems(tmp_path, base()), "state_dir")


def test_malformed_toml_names_the_line(tmp_path):
    p = one(problems(tmp_path, 'table = "FP-01"\ngame = \n'), "line 2")
    assert p.message.startswith("malformed TOML")


def test_unreadable_file(tmp_path):
    p = one(check_config(tmp_path / "nope.toml"), "")
    assert p.message.startswith("cannot read the configuration")


def test_several_errors_in_one_file_are_all_reported(tmp_path):
    doc = base()
    doc["meters"]["main"]["reset"] = "9999.99"  # below the floor
    doc["meters"]["main"]["ceiling"] = Decimal("50000.0")  # a float
    doc["seets"] = 6  # a typo at the top
    doc["devices"]["sign"]["bus"] = "nope"  # an undefined bus
    doc["devices"]["seat-4"]["seats"] = [5]  # seat 5 twice, seat 4 without a device
    doc["devices"]["lockout"]["register_map"] = "missing.toml"
    doc["supervisors"][0]["credential"] = "letmein123"
    doc["cards"]["stub_count_every"] = 0
    found = problems(tmp_path, doc)
    assert sorted(p.path for p in found) == sorted([
        "seets", "meters.main.ceiling", "meters.main.reset", "cards.stub_count_every",
        "devices.lockout.register_map", "devices.sign.bus", "devices.seat-5.seats[0]", "devices",
        "supervisors[0].credential",
    ])
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, doc))
    assert e.value.problems == found
    assert len(str(e.value).splitlines()) == len(found)


def test_problems_come_in_the_order_of_the_file(tmp_path):
    doc = base()
    devices = doc.pop("devices")
    doc = {"devices": devices, **doc}  # [devices] first, [meters] later
    doc["devices"]["sign"]["bus"] = "nope"
    doc["meters"]["main"]["reset"] = "1.00"
    assert [p.path for p in problems(tmp_path, doc)] == ["devices.sign.bus", "meters.main.reset"]


def test_problem_line_shape():
    p = Problem("meters.main.reset", "$5,000.00 is below the $10,000 floor", 'reset = "10000.00"')
    assert p.line("t.toml") == 't.toml: meters.main.reset: $5,000.00 is below the $10,000 floor (hint: reset = "10000.00")'
    assert Problem("", "cannot read").line("t.toml") == "t.toml: cannot read"
    assert p.to_dict() == {"path": "meters.main.reset", "message": "$5,000.00 is below the $10,000 floor",
                           "hint": 'reset = "10000.00"'}


# --- driver settings ---------------------------------------------------------------------------------------


def test_driver_settings_from_the_caribbean_stud_example():
    from drivers.line import LineSettings
    from drivers.modbus import SerialBusSettings

    cfg = load_config(TABLES / "caribbean-stud.toml")
    ds = driver_settings(cfg)
    bus = ds.buses["table-bus"]
    assert isinstance(bus, SerialBusSettings)
    assert (bus.port, bus.baud, bus.parity, bus.stopbits) == ("/dev/ttyUSB0", 19200, "E", 1)
    by_name = {m.name: m for m in ds.modbus}
    assert [by_name[f"seat-{s}"].first_seat for s in range(1, 8)] == list(range(1, 8))
    assert by_name["seat-3"].unit == 3 and by_name["lockout"].unit == 20 and by_name["sign"].bus == "table-bus"
    line = {spec.name: spec for spec in ds.line}
    assert isinstance(line["shoe"].settings, LineSettings) and line["shoe"].settings.port == "/dev/ttyUSB2"
    assert line["shoe"].seats == 7


def test_build_drivers_makes_the_drivers_without_opening_anything():
    from drivers.line import LineDevice
    from drivers.modbus import ModbusLockoutButton, ModbusMeterSign, ModbusSeatDevice

    buses, devices = build_drivers(load_config(TABLES / "four-card-poker.toml"))
    assert set(buses) == {"table-bus"}
    assert isinstance(devices["seats"], ModbusSeatDevice) and devices["seats"].bus is buses["table-bus"]
    assert isinstance(devices["lockout"], ModbusLockoutButton)
    assert isinstance(devices["sign"], ModbusMeterSign)
    assert isinstance(devices["shuffler"], LineDevice)


def test_tcp_bus_settings_from_the_hot_roller_example():
    from drivers.modbus import TcpSettings

    ds = driver_settings(load_config(TABLES / "hot-roller-craps.toml"))
    assert isinstance(ds.buses["table-net"], TcpSettings)
    assert (ds.buses["table-net"].host, ds.buses["table-net"].port) == ("127.0.0.1", 5020)
    assert {m.name for m in ds.modbus} == {"seat-1", "seat-2", "seat-3", "seat-4", "lockout", "sign"}


# --- the documentation -------------------------------------------------------------------------------------


def test_the_complete_example_of_the_documentation_is_sound(tmp_path):
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("## A complete example"):]
    example = section[section.index("```toml\n") + len("```toml\n"):section.index("\n```\n")]
    # As installed: register maps beside the file, MQTT files under /etc/progressive (here: tmp_path).
    shutil.copytree(DEVICES, tmp_path / "devices")
    (tmp_path / "mqtt").mkdir()
    for name in ("ca.pem", "cs-07.pem", "cs-07.key", "password"):
        (tmp_path / "mqtt" / name).write_text("x\n")
        (tmp_path / "mqtt" / name).chmod(0o600)
    example = example.replace("/etc/progressive/", f"{tmp_path}/")
    # Its supervisors file, as that section of the documentation shows it and installed as it says.
    sup = section[section.index("# /etc/progressive/supervisors.toml"):]
    sup = sup[:sup.index("\n```\n")]
    (tmp_path / "supervisors.toml").write_text(sup, encoding="utf-8")
    (tmp_path / "supervisors.toml").chmod(0o600)
    cfg = load_config(write(tmp_path, example))
    assert [s.name for s in cfg.supervisors] == ["J. Smith"] and cfg.warnings == ()
    assert isinstance(cfg.meters["bonus"], LinkedMeter) and cfg.mqtt is not None
    assert cfg.devices["seats"].seats == (1, 2, 3, 4, 5, 6, 7)
    assert cfg.supervisors[0].name == "J. Smith"
    assert (cfg.metrics.host, cfg.metrics.port) == ("0.0.0.0", 9464)


def test_the_gaming_day_setting(tmp_path):
    from datetime import time

    doc = base()
    cfg = load_config(write(tmp_path, doc))
    assert (cfg.report.day_starts, cfg.report.time_zone) == (time(6, 0), "America/New_York")
    assert cfg.report.dir_for(cfg.state_dir) == cfg.state_dir / "reports"
    doc["report"] = {"day_starts": "04:30", "time_zone": "America/Chicago", "dir": "reports"}
    cfg = load_config(write(tmp_path, doc))
    assert (cfg.report.day_starts, cfg.report.time_zone, cfg.report.dir) == (time(4, 30), "America/Chicago",
                                                                              tmp_path / "reports")
    doc["report"] = {"day_starts": "6:00"}
    assert "HH:MM" in one(problems(tmp_path, doc), "report.day_starts").message
    doc["report"] = {"time_zone": "Eastern"}
    assert "not a time zone" in one(problems(tmp_path, doc), "report.time_zone").message
    doc["report"] = {"day_start": "06:00"}
    one(problems(tmp_path, doc), "report.day_start")

"""Rig configuration files: the shipped ones load; bad ones are refused naming the file and the TOML path."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.rig_config import RigConfigError, load_rig_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "config" / "hil").glob("*.toml"))


def test_the_shipped_configurations_exist() -> None:
    assert {p.name for p in SHIPPED} >= {"caribbean-stud-7.toml", "craps-hot-roller.toml", "minimal.toml"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_configurations_load(path: Path) -> None:
    cfg = load_rig_config(path)
    for _, dev in cfg.devices():
        if hasattr(dev, "map"):
            assert dev.map.is_file()


def test_caribbean_stud_7_is_a_whole_table() -> None:
    cfg = load_rig_config(ROOT / "config" / "hil" / "caribbean-stud-7.toml")
    assert cfg.seats == 7
    (bus,) = cfg.rtu
    assert bus.baud == 19200
    seats = [d for d in bus.devices if d.kind == "seat"]
    assert sorted(d.unit for d in seats) == [1, 2, 3, 4, 5, 6, 7]
    assert sorted(s for d in seats for s in d.seats) == [1, 2, 3, 4, 5, 6, 7]
    assert {d.kind for d in bus.devices} == {"seat", "lockout", "sign"}
    assert sorted(d.kind for d in cfg.line) == ["shoe", "shuffler"]


def test_craps_hot_roller_shows_tcp_and_dice() -> None:
    cfg = load_rig_config(ROOT / "config" / "hil" / "craps-hot-roller.toml")
    assert len(cfg.tcp) == 1
    assert [d.kind for d in cfg.line] == ["dice"]
    kinds = {d.kind for _, d in cfg.devices()}
    assert kinds >= {"seat", "lockout", "sign", "dice"}


GOOD = """
table = "T1"
seats = 3

[[rtu]]
name = "bus"
devices = [
  { unit = 1, name = "seat-1", kind = "seat", map = "maps/seat.toml", seats = [1] },
  { unit = 2, name = "seat-2", kind = "seat", map = "maps/seat-pair.toml", seats = [2, 3] },
  { unit = 9, name = "lockout", kind = "lockout", map = "maps/lockout.toml" },
]

[[tcp]]
name = "net"
devices = [{ unit = 1, name = "sign", kind = "sign", map = "maps/sign.toml" }]

[[line]]
name = "shoe"
kind = "shoe"
"""


SEAT_MAP = """
kind = "seat"
inputs = [
  { role = "wager_present", table = "discrete_input", address = 0, seat = 1, spot = "progressive" },
  { role = "wager_present", table = "discrete_input", address = 1, seat = 2, spot = "progressive" },
]
outputs = [
  { role = "accepted_light", table = "coil", address = 0, seat = 1, spot = "progressive" },
  { role = "win_light", table = "coil", address = 1, seat = 1 },
  { role = "accepted_light", table = "coil", address = 2, seat = 2, spot = "progressive" },
  { role = "win_light", table = "coil", address = 3, seat = 2 },
]
"""
ONE_SEAT_MAP = SEAT_MAP.replace("seat = 2", "seat = 1").split("inputs")[0] + """
inputs = [{ role = "wager_present", table = "discrete_input", address = 0, seat = 1, spot = "progressive" }]
outputs = [
  { role = "accepted_light", table = "coil", address = 0, seat = 1, spot = "progressive" },
  { role = "win_light", table = "coil", address = 1, seat = 1 },
]
"""
LOCKOUT_MAP = """
kind = "lockout"
inputs = [{ role = "button", table = "input_register", address = 0, type = "uint16", mode = "counter" }]
outputs = [{ role = "lamp", table = "coil", address = 0 }]
"""
SIGN_MAP = """
kind = "sign"
outputs = [
  { role = "meter_amount", table = "holding_register", address = 0, type = "uint32", word_order = "big", slot = 1 },
  { role = "message_code", table = "holding_register", address = 2, type = "uint16" },
  { role = "message_table", table = "holding_register", address = 3, type = "ascii", length = 4 },
  { role = "message_seat", table = "holding_register", address = 7, type = "uint16" },
  { role = "message_amount", table = "holding_register", address = 8, type = "uint32", word_order = "big" },
]
"""


def write_maps(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in (("seat", ONE_SEAT_MAP), ("seat-pair", SEAT_MAP), ("lockout", LOCKOUT_MAP),
                       ("sign", SIGN_MAP)):
        (d / f"{name}.toml").write_text(text)


@pytest.fixture
def write(tmp_path: Path):
    write_maps(tmp_path / "maps")

    (tmp_path / "maps" / "broken.toml").write_text('kind = "sign"\noutputs = []\n')

    def _write(text: str) -> Path:
        p = tmp_path / "rig.toml"
        p.write_text(text)
        return p

    return _write


def test_good_configuration_and_map_paths_are_relative_to_the_file(write, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir("/")  # the working directory must not matter
    cfg = load_rig_config(write(GOOD))
    assert cfg.table == "T1"
    assert cfg.rtu[0].devices[0].map == (tmp_path / "maps" / "seat.toml").resolve()
    assert cfg.rtu[0].baud == 19200 and cfg.rtu[0].paced is True
    assert cfg.tcp[0].host == "127.0.0.1" and cfg.tcp[0].port == 0
    assert [w for w, _ in cfg.devices()] == ["rtu[0].devices[0]", "rtu[0].devices[1]", "rtu[0].devices[2]",
                                           "tcp[0].devices[0]", "line[0]"]


def test_map_by_name_is_looked_up_in_config_devices(tmp_path: Path) -> None:
    write_maps(tmp_path / "devices")
    (tmp_path / "hil").mkdir()
    p = tmp_path / "hil" / "rig.toml"
    p.write_text(GOOD.replace("maps/seat.toml", "seat").replace("maps/", "../devices/"))
    cfg = load_rig_config(p)
    assert cfg.rtu[0].devices[0].map == (tmp_path / "devices" / "seat.toml").resolve()
    assert cfg.rtu[0].devices[1].map == (tmp_path / "devices" / "seat-pair.toml").resolve()


BAD = [
    # (change to GOOD, path in the error, words in the problem)
    (("unit = 2,", "unit = 1,"), "rtu[0].devices[1].unit", "unit 1 is already used on bus 'bus' by 'seat-1'"),
    (("seats = [2, 3]", "seats = [2, 4]"), "rtu[0].devices[1].seats[1]", "seat 4 is out of range: the table has seats 1-3"),
    (("seats = [2, 3]", "seats = [1, 3]"), "rtu[0].devices[1].seats[0]", "seat 1 is already covered by 'seat-1'"),
    (('kind = "shoe"', 'kind = "roulette-wheel"'), "line[0].kind", "unknown kind 'roulette-wheel'; kinds: seat,"),
    (("maps/seat.toml\", seats = [1]", "maps/nope.toml\", seats = [1]"), "rtu[0].devices[0].map",
     "register map not found; looked for"),
    (("map = \"maps/sign.toml\" }]", "map = \"no-such-map\" }]"), "tcp[0].devices[0].map", "register map not found"),
    (("seats = 3", "seats = \"3\""), "seats", "valid integer"),
    (("seats = 3", "seats = 0"), "seats", "greater than or equal to 1"),
    (("name = \"shoe\"", "name = \"shoe\"\nbaud = 19200\nparity = \"E\""), "line[0].parity", "unknown key"),
    (("name = \"shoe\"", "name = \"seat-1\""), "line[0].name", "name 'seat-1' is already used at rtu[0].devices[0].name"),
    (("name = \"net\"", "name = \"net\"\nhost = \"0.0.0.0\""), "tcp[0].host", "is not a loopback address"),
    (("unit = 9,", "unit = 248,"), "rtu[0].devices[2].unit", "unit 248 is not a Modbus RTU unit id (1-247)"),
    (("unit = 9,", "unit = 255,"), "rtu[0].devices[2].unit", "unit 255 is not a Modbus RTU unit id (1-247)"),
    (("unit = 1, name = \"sign\"", "unit = 250, name = \"sign\""), "tcp[0].devices[0].unit",
     "unit 250 is not a Modbus TCP unit id (1-247, or 255 for a device reached directly)"),
    (("unit = 9,", "unit = 256,"), "rtu[0].devices[2].unit", "less than or equal to 255"),
    (("map = \"maps/sign.toml\" }]", "map = \"maps/sign.toml\", read_back = \"no\" }]"),
     "tcp[0].devices[0].read_back", "valid boolean"),
    (("kind = \"lockout\", map = \"maps/lockout.toml\"", "kind = \"lockout\", map = \"maps/lockout.toml\", seats = [3]"),
     "rtu[0].devices[2].seats", "only seat devices cover seats"),
    # checked against the register maps
    (("kind = \"lockout\", map = \"maps/lockout.toml\"", "kind = \"lockout\", map = \"maps/sign.toml\""),
     "rtu[0].devices[2].kind", "'lockout', but the register map sign.toml is for a sign device"),
    (("seats = [2, 3]", "seats = [3, 2]"), "rtu[0].devices[1].seats[1]",
     "a Modbus seat device covers consecutive seats: after 3 comes 4, not 2"),
    (("seats = [2, 3]", "seats = [2]"), "rtu[0].devices[1].seats",
     "the register map seat-pair.toml serves 2 seat(s); list that many table seats"),
    (("map = \"maps/sign.toml\"", "map = \"maps/broken.toml\""), "tcp[0].devices[0].map",
     "register map refused: "),
    ((", seats = [1] }", " }"), "rtu[0].devices[0].seats", "a seat device needs the seats it covers"),
    (("name = \"bus\"", "name = \"Bus A\""), "rtu[0].name", "should match pattern"),
    (("table = \"T1\"\n", ""), "table", "is required"),
]


@pytest.mark.parametrize(("change", "where", "problem"), BAD, ids=[b[1] + ":" + b[2][:20] for b in BAD])
def test_bad_configurations_name_file_and_path(write, change, where, problem) -> None:
    old, new = change
    assert old in GOOD
    p = write(GOOD.replace(old, new, 1))
    with pytest.raises(RigConfigError) as e:
        load_rig_config(p)
    assert e.value.field == f"{p}: {where}"
    assert problem in e.value.problem


def test_a_tcp_device_reached_directly_and_what_a_device_lacks(write) -> None:
    p = write(GOOD.replace('unit = 1, name = "sign", kind = "sign", map = "maps/sign.toml"',
                           'unit = 255, name = "sign", kind = "sign", map = "maps/sign.toml", read_back = false, '
                           'writes_single = true', 1))
    sign = load_rig_config(p).tcp[0].devices[0]
    assert (sign.unit, sign.read_back, sign.writes_single) == (255, False, True)
    seat = load_rig_config(p).rtu[0].devices[0]
    assert (seat.read_back, seat.writes_single) == (True, False)


def test_no_devices_refused(write) -> None:
    p = write('table = "T"\nseats = 2\n')
    with pytest.raises(RigConfigError, match="no devices"):
        load_rig_config(p)


def test_malformed_and_missing_files(write, tmp_path: Path) -> None:
    p = write(GOOD + "\n[[line]\n")
    with pytest.raises(RigConfigError, match=f"{p}: malformed TOML"):
        load_rig_config(p)
    with pytest.raises(RigConfigError, match="cannot read the rig configuration"):
        load_rig_config(tmp_path / "absent.toml")


def test_the_example_in_the_documentation_is_valid(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "hil.md").read_text()
    example = text.split("```toml\ntable = ", 1)[1].split("```", 1)[0]
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "our-sign.toml").write_text((ROOT / "config" / "devices" / "sign.toml").read_text())
    p = tmp_path / "example.toml"
    p.write_text("table = " + example)
    cfg = load_rig_config(p)
    assert [d.name for _, d in cfg.devices()] == ["seat-1", "seats-2-8", "lockout", "sign", "seat-9", "shoe"]

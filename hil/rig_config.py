"""The rig file: its schema (pydantic models) and its loading (the TOML read, every register map checked).

The configuration (TOML, docs/hil.md) names the table and its seats, then the devices the way they
are cabled: Modbus RTU buses (one serial wire, several unit ids), Modbus TCP buses (loopback), and
line-protocol devices (each on its own serial wire). An error names the file and the TOML path.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import ErrorDetails

import progressive_examples
from controller.errors import InputError
from controller.tomlfile.files import FileRefused, kind_of, probe, read_file, show_path
from controller.tomlfile.toml import InvalidTable, TomlError, parse_toml, validate_table

# The device kinds of drivers/events.py: wagering device, lock-out, meter sign, the card counters
# (shuffler, shoe) and dice entry.
KINDS = ("seat", "lockout", "sign", "shuffler", "shoe", "dice")
Kind = Literal["seat", "lockout", "sign", "shuffler", "shoe", "dice"]

# Where register maps named without a path live: devices/ next to the rig file's directory, then the shipped ones.
PROJECT_DEVICES = progressive_examples.path("devices")

MAX_SEATS = 12

_NAME = r"[a-z0-9]+(?:[-_][a-z0-9]+)*"
Name = Annotated[str, Field(pattern=f"^{_NAME}$", max_length=48)]
TableId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=32)]
Baud = Annotated[int, Field(ge=300, le=921_600)]


class RigConfigError(InputError):
    """A rig configuration that cannot be used; the field names the file and the TOML path."""


class _Model(BaseModel):
    # strict: a seat written "3" in TOML is a mistake, not a number.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ModbusDeviceConfig(_Model):
    # Modbus over serial line §2.2: 1-247 are unit addresses; on TCP also 255, a device reached directly
    unit: int = Field(ge=1, le=255)
    name: Name
    kind: Kind
    map: Path  # resolved by _resolve_map; TOML gives a name or a path relative to the rig file
    seats: list[Annotated[int, Field(ge=1, le=MAX_SEATS)]] = []
    lenient: bool = False  # answer unmapped addresses (a real device answers exception 2): only for a test
    writes_single: bool = False  # functions 15 and 16 answered with exception 1
    read_back: bool = True  # false: reads of coils and holding registers answered with exception 1

    @field_validator("map", mode="before")
    @classmethod
    def _resolve(cls, value: object, info: ValidationInfo) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("must be a register map name or a path to a .toml file")
        return resolve_map(value, (info.context or {}).get("base"))


class RtuBusConfig(_Model):
    name: Name
    baud: Baud = 19200
    paced: bool = True  # false: bytes pass at once (fast tests); true: at the baud rate, half-duplex
    devices: list[ModbusDeviceConfig] = Field(min_length=1)


class TcpBusConfig(_Model):
    name: Name
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)  # 0: a free port, chosen at start
    devices: list[ModbusDeviceConfig] = Field(min_length=1)

    @field_validator("host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        # The simulated devices have no authentication: never listen beyond this machine.
        if value == "localhost":
            return value
        try:
            ok = ipaddress.ip_address(value).is_loopback
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{value!r} is not a loopback address (127.0.0.1, ::1 or localhost)")
        return value


class LineDeviceConfig(_Model):
    name: Name
    kind: Kind
    baud: Baud = 19200
    paced: bool = True
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    seats: list[Annotated[int, Field(ge=1, le=MAX_SEATS)]] = []


class RigConfig(_Model):
    table: TableId
    seats: int = Field(ge=1, le=MAX_SEATS)
    description: str = ""
    rtu: list[RtuBusConfig] = []
    tcp: list[TcpBusConfig] = []
    line: list[LineDeviceConfig] = []

    def devices(self) -> Iterator[tuple[str, ModbusDeviceConfig | LineDeviceConfig]]:
        """Every device with its TOML path, in file order: RTU buses, TCP buses, line devices."""
        bus: RtuBusConfig | TcpBusConfig
        dev: ModbusDeviceConfig | LineDeviceConfig
        for b, bus in enumerate(self.rtu):
            for d, dev in enumerate(bus.devices):
                yield f"rtu[{b}].devices[{d}]", dev
        for b, bus in enumerate(self.tcp):
            for d, dev in enumerate(bus.devices):
                yield f"tcp[{b}].devices[{d}]", dev
        for d, dev in enumerate(self.line):
            yield f"line[{d}]", dev


def resolve_map(value: str, base: Path | None) -> Path:
    """A register map: a path (has a '/' or ends in .toml) relative to the rig file, else a name
    looked up as NAME.toml in devices/ beside the rig file's directory, then among the shipped register maps."""
    base = base or Path.cwd()
    if "/" in value or value.endswith(".toml"):
        candidates = [base / value]
    else:
        if not re.fullmatch(_NAME, value):
            raise ValueError(f"{value!r} is neither a map name such as \"seat-wager\" nor a .toml path")
        candidates = list(dict.fromkeys([base.parent / "devices" / f"{value}.toml",
                                         PROJECT_DEVICES / f"{value}.toml"]))
    for c in candidates:
        st = probe(c)  # a path too long or a loop of links is a refusal of this key, not an OSError
        if isinstance(st, FileRefused):
            raise ValueError(f"register map {show_path(c)}: {st.reason}")
        if st is not None:
            if (kind := kind_of(st.st_mode)) is not None:
                raise ValueError(f"register map {show_path(c)}: it is {kind}, not a regular file")
            return c.resolve()
    raise ValueError("register map not found; looked for " + ", ".join(show_path(c) for c in candidates))


MapLoader = Callable[[Path], Any]


def load_rig_config(path: str | os.PathLike[str], *, load_map: MapLoader | None = None) -> RigConfig:
    """A rig configuration file, its register maps read and checked against it.
    ``load_map`` reads one map (default: drivers.modbus.registermap.load_register_map)."""
    p = Path(path)
    name = show_path(path)
    try:
        read = read_file(p)  # a regular file of at most 1 MiB: never a device, never a FIFO
    except FileRefused as e:
        raise RigConfigError(name, f"cannot read the rig configuration: {e.reason}") from None
    try:
        text = read.data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RigConfigError(name, f"is not UTF-8 text (byte {e.start})") from None
    return parse_rig_config(text, name, base=p.resolve().parent, load_map=load_map)


def parse_rig_config(text: str, source: str, *, base: Path | None = None,
                     load_map: MapLoader | None = None) -> RigConfig:
    """A rig configuration from TOML text; ``source`` names it in errors, ``base`` anchors map paths."""
    try:
        doc = parse_toml(text, floats=float)
    except TomlError as e:
        raise RigConfigError(source, f"malformed TOML: {e.detail}") from None
    try:
        cfg = validate_table(RigConfig, doc, context={"base": base})
    except InvalidTable as e:
        first = e.errors[0]
        raise RigConfigError(f"{source}: {first.path or '(top level)'}", _problem(first.details)) from None
    for where, problem in _cross_check(cfg):
        raise RigConfigError(f"{source}: {where}", problem)
    load_maps(cfg, source, load_map)
    return cfg


def load_maps(cfg: RigConfig, source: str, load_map: MapLoader | None = None) -> dict[Path, Any]:
    """Every register map the configuration names, read once each and checked against the devices
    using it: same kind, and as many table seats listed as the map has seats."""
    load = load_map or _map_loader()
    maps: dict[Path, Any] = {}
    for where, dev in cfg.devices():
        if not isinstance(dev, ModbusDeviceConfig):
            continue
        if dev.map not in maps:
            try:
                maps[dev.map] = load(dev.map)
            except InputError as e:
                # The map's own error names its file and TOML path; say which device wanted it.
                raise RigConfigError(f"{source}: {where}.map", f"register map refused: {e}") from None
        rmap = maps[dev.map]
        kind = getattr(getattr(rmap, "kind", None), "value", getattr(rmap, "kind", None))
        if kind is not None and kind != dev.kind:
            raise RigConfigError(f"{source}: {where}.kind",
                                 f"{dev.kind!r}, but the register map {dev.map.name} is for a {kind} device")
        local = list(getattr(rmap, "seats", None) or [])
        if dev.kind == "seat" and local and len(local) != len(dev.seats):
            raise RigConfigError(f"{source}: {where}.seats",
                                 f"the register map {dev.map.name} serves {len(local)} seat(s); list that many "
                                 f"table seats (its seat 1 is the first listed), not {len(dev.seats)}")
    return maps


def _problem(err: ErrorDetails) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "is required"
    if kind == "literal_error" and err["loc"] and err["loc"][-1] == "kind":
        return f"unknown kind {err.get('input')!r}; kinds: {', '.join(KINDS)}"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _cross_check(cfg: RigConfig) -> Iterator[tuple[str, str]]:
    """What one field cannot say alone: unique names and units, seats within the table, one device a seat."""
    if not (cfg.rtu or cfg.tcp or cfg.line):
        yield "(top level)", "no devices: add an [[rtu]], [[tcp]] or [[line]] section"
    names: dict[str, str] = {}
    bus: RtuBusConfig | TcpBusConfig
    dev: ModbusDeviceConfig | LineDeviceConfig
    for b, bus in enumerate(cfg.rtu):
        _claim(names, bus.name, f"rtu[{b}].name")
    for b, bus in enumerate(cfg.tcp):
        _claim(names, bus.name, f"tcp[{b}].name")
    yield from _units_on_buses(cfg)
    seat_owner: dict[int, str] = {}
    for where, dev in cfg.devices():
        if (clash := _claim(names, dev.name, f"{where}.name")) is not None:
            yield f"{where}.name", clash
        if dev.kind == "seat" and not dev.seats:
            yield f"{where}.seats", "a seat device needs the seats it covers, e.g. seats = [3]"
        if dev.kind != "seat" and dev.seats:
            yield f"{where}.seats", f"only seat devices cover seats, not a {dev.kind} device"
        for i, seat in enumerate(dev.seats):
            if seat > cfg.seats:
                yield f"{where}.seats[{i}]", f"seat {seat} is out of range: the table has seats 1-{cfg.seats}"
            if seat in seat_owner:
                yield f"{where}.seats[{i}]", f"seat {seat} is already covered by {seat_owner[seat]!r}"
            seat_owner[seat] = dev.name
            if isinstance(dev, ModbusDeviceConfig) and i and seat != dev.seats[0] + i:
                # A Modbus device knows only its first seat: its map's seat k is table seat first + k - 1.
                yield (f"{where}.seats[{i}]", f"a Modbus seat device covers consecutive seats: after "
                       f"{dev.seats[i - 1]} comes {dev.seats[i - 1] + 1}, not {seat}")


def _units_on_buses(cfg: RigConfig) -> Iterator[tuple[str, str]]:
    """A unit id of its bus's transport, once on the bus."""
    by_kind: tuple[tuple[str, Sequence[RtuBusConfig | TcpBusConfig]], ...] = (("rtu", cfg.rtu), ("tcp", cfg.tcp))
    for kind, buses in by_kind:
        for b, bus in enumerate(buses):
            units: dict[int, str] = {}
            for d, dev in enumerate(bus.devices):
                if not (dev.unit <= 247 or (kind == "tcp" and dev.unit == 255)):
                    yield (f"{kind}[{b}].devices[{d}].unit", f"unit {dev.unit} is not a Modbus {kind.upper()} unit id "
                           + ("(1-247)" if kind == "rtu" else "(1-247, or 255 for a device reached directly)"))
                if dev.unit in units:
                    yield (f"{kind}[{b}].devices[{d}].unit",
                           f"unit {dev.unit} is already used on bus {bus.name!r} by {units[dev.unit]!r}")
                units[dev.unit] = dev.name


def _claim(names: dict[str, str], name: str, where: str) -> str | None:
    if name in names:
        return f"name {name!r} is already used at {names[name]}"
    names[name] = where
    return None


def _map_loader() -> MapLoader:
    from drivers.modbus.registermap import load_register_map

    return load_register_map


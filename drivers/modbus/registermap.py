"""Register maps: what each Modbus address of a device means, in a TOML file a technician can write.

A map describes one model of device (one Modbus unit): its kind (``seat``, ``lockout`` or ``sign``) and its
points. Each point is a role (what it is to the controller), a Modbus table and address, a data type and,
for amounts, a scale to cents. The same map drives the driver (drivers/modbus/devices.py) and the simulator
of the rig (hil/modbus_devices.py). The format, with examples, is documented in docs/register-maps.md.

Every error names the file and the TOML path of the point at fault, for example
``config/devices/seat-io.toml: inputs[2].address: overlaps inputs[0] (discrete_input 0)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from controller.errors import InputError
from controller.tomlfile.files import FileRefused, read_text, show_path
from controller.tomlfile.toml import FieldError, InvalidTable, TomlError, parse_toml, toml_path, validate_table
from drivers.events import SignMessage
from drivers.modbus.core import codec
from drivers.modbus.core.codec import DataType, WordOrder

MAX_ADDRESS = 0xFFFF
MAX_LOCAL_SEATS = 64
MAX_ASCII_REGISTERS = 32
MAX_POINTS = 1024  # inputs, and outputs, of one map (a seven-seat module has a few dozen)
MAX_SLOT = 64  # meter slots of a sign
MAX_SCALE = Fraction(1_000_000)  # cents per count (reading) or counts per cent (writing), either way


class Table(StrEnum):
    """The four Modbus data tables. ``address`` is the 0-based address in the request (a manual's
    "40001" is holding_register 0)."""

    COIL = "coil"
    DISCRETE_INPUT = "discrete_input"
    INPUT_REGISTER = "input_register"
    HOLDING_REGISTER = "holding_register"

    @property
    def is_bits(self) -> bool:
        return self in (Table.COIL, Table.DISCRETE_INPUT)

    @property
    def writable(self) -> bool:
        return self in (Table.COIL, Table.HOLDING_REGISTER)


class Kind(StrEnum):
    SEAT = "seat"
    LOCKOUT = "lockout"
    SIGN = "sign"


class ButtonMode(StrEnum):
    COUNTER = "counter"  # a register the device increments on every press; the controller compares
    MOMENTARY = "momentary"  # an input that is on while the button is held


# role -> (kind, direction, fields it needs, fields it may have)
_IDENT = {"seat", "spot", "slot", "meter", "mode"}
ROLES: dict[str, tuple[Kind, str, set[str], set[str]]] = {
    "wager_present": (Kind.SEAT, "inputs", {"seat", "spot"}, set()),
    "wager_amount": (Kind.SEAT, "inputs", {"seat", "spot"}, {"scale"}),
    "accepted_light": (Kind.SEAT, "outputs", {"seat", "spot"}, set()),
    "win_light": (Kind.SEAT, "outputs", {"seat"}, set()),
    "button": (Kind.LOCKOUT, "inputs", {"mode"}, set()),
    "lamp": (Kind.LOCKOUT, "outputs", set(), set()),
    "meter_amount": (Kind.SIGN, "outputs", {"slot"}, {"meter", "scale"}),
    "message_code": (Kind.SIGN, "outputs", set(), set()),
    "message_table": (Kind.SIGN, "outputs", set(), set()),
    "message_seat": (Kind.SIGN, "outputs", set(), set()),
    "message_amount": (Kind.SIGN, "outputs", set(), {"scale"}),
}
BOOL_ROLES = {"wager_present", "accepted_light", "win_light", "lamp"}
AMOUNT_ROLES = {"wager_amount", "meter_amount", "message_amount"}
INT_TYPES = {DataType.UINT16, DataType.INT16, DataType.UINT32, DataType.INT32}
UNSIGNED_TYPES = {DataType.UINT16, DataType.UINT32}
DEFAULT_MESSAGE_CODES = {SignMessage.WIN: 1, SignMessage.PENDING: 2, SignMessage.OFFLINE: 3,
                         SignMessage.CLOSED: 4}
_SPOT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_MODEL = re.compile(r"^[!-~](?:[ -~]{0,62}[!-~])?$")  # printable ASCII, what a device can say in registers


class RegisterMapError(InputError):
    """A register map that cannot be used. ``errors`` holds every (TOML path, problem) found; the message
    starts with the first one."""

    def __init__(self, source: str, errors: Sequence[tuple[str, str]]) -> None:
        first_field, first_problem = errors[0]
        super().__init__(first_field, first_problem)
        self.source = source
        self.errors = list(errors)
        lines = [f"{source}: {f}: {p}" if f else f"{source}: {p}" for f, p in self.errors]
        Exception.__init__(self, "\n".join(lines))

    def at(self, prefix: str) -> RegisterMapError:
        return self


# --- the TOML schema (structure and types; meaning is checked afterwards) ---------------------


class _PointModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: StrictStr
    table: Table
    address: StrictInt
    type: DataType = DataType.BOOL
    word_order: WordOrder | None = None
    scale: StrictInt | float | StrictStr | None = None
    length: StrictInt | None = None
    seat: StrictInt | None = None
    spot: StrictStr | None = None
    slot: StrictInt | None = None
    meter: StrictStr | None = None
    mode: ButtonMode | None = None
    description: StrictStr | None = None


class _IdentityModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: Table
    address: StrictInt
    length: StrictInt


class _MapModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Kind
    model: StrictStr | None = None
    description: StrictStr = ""
    identity: _IdentityModel | None = None
    inputs: list[_PointModel] = Field([], max_length=MAX_POINTS)
    outputs: list[_PointModel] = Field([], max_length=MAX_POINTS)
    message_codes: dict[str, StrictInt] | None = None


# --- the checked map ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Point:
    """One checked point. ``path`` is its TOML path (``inputs[2]``) for messages. Compared by identity:
    drivers key dicts by point, and each map's points are distinct objects."""

    path: str
    role: str
    table: Table
    address: int
    dtype: DataType
    word_order: WordOrder | None = None
    scale: Fraction = Fraction(1)
    length: int | None = None
    seat: int | None = None
    spot: str | None = None
    slot: int | None = None
    meter: str | None = None
    mode: ButtonMode | None = None

    @property
    def width(self) -> int:
        """How many coils/inputs (bit tables) or registers the point takes."""
        if self.table.is_bits:
            return 1
        if self.dtype is DataType.ASCII:
            return self.length or 1
        if self.dtype is DataType.BOOL:
            return 1
        return codec.INT_LAYOUT[self.dtype][0]

    @property
    def end(self) -> int:
        """One past the last address."""
        return self.address + self.width

    def decode(self, raw: Sequence[int] | Sequence[bool]) -> bool | int | str:
        """The point's value from its raw coils or registers (``width`` of them)."""
        if len(raw) != self.width:
            raise ValueError(f"{self.path}: expected {self.width} values, got {len(raw)}")
        if self.dtype is DataType.BOOL:
            return bool(raw[0])
        if self.dtype is DataType.ASCII:
            return codec.registers_to_ascii([int(r) for r in raw])
        return codec.registers_to_int([int(r) for r in raw], self.dtype, self.word_order)

    def encode(self, value: bool | int | str) -> list[int] | list[bool]:
        """Raw coils or registers for a value."""
        if self.dtype is DataType.BOOL:
            return [bool(value)] if self.table.is_bits else [1 if value else 0]
        if self.dtype is DataType.ASCII:
            return codec.ascii_to_registers(str(value), self.width)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.path}: {value!r} is not an integer")
        return codec.int_to_registers(value, self.dtype, self.word_order)

    def to_cents(self, raw_value: int) -> int:
        return codec.raw_to_cents(raw_value, self.scale)

    def from_cents(self, cents: int) -> int:
        return codec.cents_to_raw(cents, self.scale)

    def describe(self) -> str:
        span = str(self.address) if self.width == 1 else f"{self.address}-{self.end - 1}"
        return f"{self.table.value} {span}"


@dataclass(frozen=True)
class RegisterMap:
    """A checked map. ``model`` names the device model it describes (the map's ``model``, or its file's name);
    ``identity``, when the map has one, is the block of registers where the device reports that name in ASCII,
    read at start and on every reconnect."""

    kind: Kind
    source: str
    description: str
    inputs: tuple[Point, ...]
    outputs: tuple[Point, ...]
    message_codes: dict[SignMessage, int] = field(default_factory=dict)
    model: str = ""
    identity: Point | None = None

    def points(self, role: str) -> list[Point]:
        return [p for p in (*self.inputs, *self.outputs) if p.role == role]

    def one(self, role: str) -> Point:
        found = self.points(role)
        if len(found) != 1:
            raise LookupError(f"{self.source}: expected one {role} point, found {len(found)}")
        return found[0]

    @property
    def seats(self) -> list[int]:
        """Local seat numbers (1 = the first seat this device serves)."""
        return sorted({p.seat for p in self.points("wager_present") if p.seat is not None})


def load_register_map(path: str | Path) -> RegisterMap:
    """Read and check a register map file. Raises RegisterMapError naming the file and TOML path."""

    source = show_path(path)
    try:
        text = read_text(path)  # a regular file of at most 1 MiB: never a device, never a FIFO
    except FileRefused as exc:
        reason = exc.reason if exc.reason.startswith("is not UTF-8") else f"cannot read: {exc.reason}"
        raise RegisterMapError(source, [("", reason)]) from None
    try:
        data = parse_toml(text, floats=float)  # a scale is not money: a TOML float stays a float
    except TomlError as exc:
        raise RegisterMapError(source, [("", f"not valid TOML: {exc.detail}")]) from None
    return parse_register_map(data, source)


def parse_register_map(data: dict[str, Any], source: str = "<register map>") -> RegisterMap:

    try:
        model = validate_table(_MapModel, data)
    except InvalidTable as exc:
        # per point, an unknown key first: "address: required" is the consequence of a misspelt "adress"
        groups: dict[str, list[FieldError]] = {}
        for e in exc.errors:
            groups.setdefault(toml_path(e.details["loc"][:-1]), []).append(e)
        ordered = [e for g in groups.values() for e in sorted(g, key=lambda e: e.details["type"] != "extra_forbidden")]
        raise RegisterMapError(source, [(e.path, _msg(e.details["type"], e.details["msg"])) for e in ordered]) from None
    return _Checker(model, source).check()


def _msg(kind: str, message: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key (check the spelling)"
    if kind == "missing":
        return "required"
    return message


class _Checker:
    """The meaning of a map: roles per kind, types per role, overlaps, missing points."""

    def __init__(self, model: _MapModel, source: str) -> None:
        self.m = model
        self.source = source
        self.errors: list[tuple[str, str]] = []

    def err(self, path: str, problem: str) -> None:
        self.errors.append((path, problem))

    def check(self) -> RegisterMap:
        kind = self.m.kind
        inputs = [p for i, pm in enumerate(self.m.inputs) if (p := self._point(kind, "inputs", i, pm))]
        outputs = [p for i, pm in enumerate(self.m.outputs) if (p := self._point(kind, "outputs", i, pm))]
        if not self.errors:
            self._overlaps(inputs + outputs)
            {Kind.SEAT: self._seat, Kind.LOCKOUT: self._lockout, Kind.SIGN: self._sign}[kind](inputs, outputs)
        codes = self._message_codes(kind)
        model = self._model()
        identity = self._identity(model, inputs + outputs)
        if self.errors:
            raise RegisterMapError(self.source, self.errors)
        return RegisterMap(kind=kind, source=self.source, description=self.m.description,
                           inputs=tuple(inputs), outputs=tuple(outputs), message_codes=codes, model=model,
                           identity=identity)

    # --- the model and where the device says it ---

    def _model(self) -> str:
        if self.m.model is None:  # a map without a model name is named by its file
            return Path(self.source).stem if self.source != "<register map>" else ""
        model = self.m.model
        if not _MODEL.match(model):
            self.err("model", f"{model!r}: 1-{2 * MAX_ASCII_REGISTERS} printable ASCII characters, no leading or "
                     "trailing space")
        return model

    def _identity(self, model: str, points: list[Point]) -> Point | None:
        im = self.m.identity
        if im is None:
            return None
        if self.m.model is None:
            self.err("model", "required with [identity]: the model name the device reports there")
        if im.table.is_bits:
            self.err("identity.table", f"{im.table.value} holds bits: the model name is text in an input_register "
                     "or holding_register block")
            return None
        if not 1 <= im.length <= MAX_ASCII_REGISTERS:
            self.err("identity.length", f"must be 1..{MAX_ASCII_REGISTERS} registers")
            return None
        if not 0 <= im.address <= MAX_ADDRESS - im.length + 1:
            self.err("identity.address", f"{im.length} registers from {im.address} run past {MAX_ADDRESS}")
            return None
        if len(model) > 2 * im.length:
            self.err("identity.length", f"{im.length} registers hold {2 * im.length} characters; the model "
                     f"{model!r} has {len(model)}")
        point = Point(path="identity", role="identity", table=im.table, address=im.address, dtype=DataType.ASCII,
                      length=im.length)
        for q in points:
            if q.table is point.table and point.address < q.end and q.address < point.end:
                self.err("identity.address", f"overlaps {q.path} ({q.describe()})")
                break
        return point

    # --- one point ---

    def _point(self, kind: Kind, direction: str, i: int, pm: _PointModel) -> Point | None:
        path = f"{direction}[{i}]"
        n_before = len(self.errors)
        spec = ROLES.get(pm.role)
        if spec is None or spec[0] is not kind or spec[1] != direction:
            allowed = sorted(r for r, s in ROLES.items() if s[0] is kind and s[1] == direction)
            self.err(f"{path}.role", f"{pm.role!r} is not a {kind.value} {direction[:-1]}"
                     + (f" (one of: {', '.join(allowed)})" if allowed else f" (a {kind.value} has no {direction})"))
            return None
        _kind, _dir, needs, may = spec
        for name in needs:
            if getattr(pm, name) is None:
                self.err(f"{path}.{name}", f"required for {pm.role}")
        for name in sorted((_IDENT | {"scale"}) - needs - may):
            if getattr(pm, name) is not None:
                self.err(f"{path}.{name}", f"not used by {pm.role}")
        if pm.seat is not None and not 1 <= pm.seat <= MAX_LOCAL_SEATS:
            self.err(f"{path}.seat", f"must be 1..{MAX_LOCAL_SEATS} (seats are numbered from 1 on each device)")
        if pm.slot is not None and not 1 <= pm.slot <= MAX_SLOT:
            self.err(f"{path}.slot", f"must be 1..{MAX_SLOT} (a sign's slots are numbered from 1)")
        if pm.spot is not None and not _SPOT.match(pm.spot):
            self.err(f"{path}.spot", "must be 1-32 characters of a-z, 0-9, _ and -, starting with a letter or digit")
        if pm.slot is not None and not 1 <= pm.slot <= 32:
            self.err(f"{path}.slot", "must be 1..32")
        if pm.meter is not None and not pm.meter.strip():
            self.err(f"{path}.meter", "must not be empty")
        if direction == "outputs" and not pm.table.writable:
            self.err(f"{path}.table", f"{pm.table.value} is read-only; an output needs a coil or holding_register")
        self._type(path, pm)
        scale = self._scale(path, pm, direction)
        if not 0 <= pm.address <= MAX_ADDRESS:
            self.err(f"{path}.address", f"must be 0..{MAX_ADDRESS}")
        if len(self.errors) > n_before:
            return None
        point = Point(path=path, role=pm.role, table=pm.table, address=pm.address, dtype=pm.type,
                      word_order=pm.word_order, scale=scale, length=pm.length, seat=pm.seat, spot=pm.spot,
                      slot=pm.slot, meter=pm.meter, mode=pm.mode)
        if point.end - 1 > MAX_ADDRESS:
            self.err(f"{path}.address", f"{point.width} {'registers' if not pm.table.is_bits else 'bits'} from "
                     f"{pm.address} run past {MAX_ADDRESS}")
            return None
        return point

    def _type(self, path: str, pm: _PointModel) -> None:
        t = pm.type
        if pm.table.is_bits and t is not DataType.BOOL:
            self.err(f"{path}.type", f"a {pm.table.value} holds one bit: the type must be bool, not {t.value}")
            return
        role = pm.role
        if role in BOOL_ROLES and t is not DataType.BOOL:
            self.err(f"{path}.type", f"{role} is on or off: the type must be bool, not {t.value}")
        elif role in AMOUNT_ROLES and t not in INT_TYPES:
            self.err(f"{path}.type", f"{role} is an amount: the type must be uint16, int16, uint32 or int32, "
                     f"not {t.value}")
        elif role in ("message_code", "message_seat") and t not in UNSIGNED_TYPES:
            self.err(f"{path}.type", f"{role} needs uint16 or uint32, not {t.value}")
        elif role == "message_table" and t is not DataType.ASCII:
            self.err(f"{path}.type", f"message_table is text: the type must be ascii, not {t.value}")
        elif role == "button":
            self._button_type(path, pm)
        self._width(path, pm)

    def _button_type(self, path: str, pm: _PointModel) -> None:
        t = pm.type
        if pm.mode is ButtonMode.COUNTER and t not in UNSIGNED_TYPES:
            self.err(f"{path}.type", f"a press counter needs uint16 or uint32, not {t.value}")
        if pm.mode is ButtonMode.COUNTER and pm.table.is_bits:
            self.err(f"{path}.table", "a press counter lives in an input_register or holding_register")
        if pm.mode is ButtonMode.MOMENTARY and t is not DataType.BOOL:
            self.err(f"{path}.type", f"a momentary button is on or off: the type must be bool, not {t.value}")

    def _width(self, path: str, pm: _PointModel) -> None:
        """word_order for a 32-bit type only, length for ascii only."""
        t = pm.type
        wide = t in (DataType.UINT32, DataType.INT32)
        if wide and pm.word_order is None:
            self.err(f"{path}.word_order", f"required for {t.value}: \"big\" (high word at the lower address) "
                     "or \"little\" (low word first)")
        if not wide and pm.word_order is not None:
            self.err(f"{path}.word_order", f"only for 32-bit types, not {t.value}")
        if t is DataType.ASCII:
            if pm.length is None:
                self.err(f"{path}.length", "required for ascii: the number of registers (two characters each)")
            elif not 1 <= pm.length <= MAX_ASCII_REGISTERS:
                self.err(f"{path}.length", f"must be 1..{MAX_ASCII_REGISTERS} registers")
        elif pm.length is not None:
            self.err(f"{path}.length", "only for ascii")

    def _scale(self, path: str, pm: _PointModel, direction: str) -> Fraction:
        if pm.scale is None:
            return Fraction(1)
        try:
            scale = Fraction(str(pm.scale))
        except (ValueError, ZeroDivisionError):
            self.err(f"{path}.scale", f"{pm.scale!r} is not a number")
            return Fraction(1)
        if scale <= 0:
            self.err(f"{path}.scale", "must be positive (cents per count)")
        elif not 1 / MAX_SCALE <= scale <= MAX_SCALE:
            self.err(f"{path}.scale", f"{pm.scale} is out of range: from 1/{MAX_SCALE} to {MAX_SCALE}")
        elif direction == "inputs" and not codec.scale_reads_exactly(scale):
            self.err(f"{path}.scale", f"{pm.scale} loses cents: an amount read from the device needs a whole "
                     "number of cents per count (1 = cents, 100 = dollars)")
        elif direction == "outputs" and not codec.scale_writes_exactly(scale):
            self.err(f"{path}.scale", f"{pm.scale} loses cents: an amount written to the device needs whole "
                     "counts per cent (1 = cents, 0.1 = tenths of a cent)")
        return scale

    # --- the map as a whole ---

    def _overlaps(self, points: list[Point]) -> None:
        by_table: dict[Table, list[Point]] = {}
        for p in points:
            by_table.setdefault(p.table, []).append(p)
        for table_points in by_table.values():
            taken: list[Point] = []
            for p in table_points:
                for q in taken:
                    if p.address < q.end and q.address < p.end:
                        self.err(f"{p.path}.address", f"overlaps {q.path} ({q.describe()})")
                        break
                taken.append(p)

    def _need_one(self, points: list[Point], role: str, direction: str) -> None:
        found = [p for p in points if p.role == role]
        if not found:
            self.err(direction, f"a {self.m.kind.value} map needs a {role} point")
        for extra in found[1:]:
            self.err(f"{extra.path}.role", f"a second {role} (the first is {found[0].path})")

    def _seat(self, inputs: list[Point], outputs: list[Point]) -> None:
        present: dict[tuple[int, str], Point] = {}
        for p in inputs:
            if p.role == "wager_present":
                key = (p.seat, p.spot)
                if key in present:
                    self.err(f"{p.path}.spot", f"seat {p.seat} spot {p.spot!r} already has a wager_present "
                             f"({present[key].path})")
                present[key] = p  # type: ignore[index]
        if not present:
            self.err("inputs", "a seat map needs at least one wager_present point")
            return
        amounts: dict[tuple[int, str], Point] = {}
        for p in inputs:
            if p.role == "wager_amount":
                key = (p.seat, p.spot)
                if key not in present:
                    self.err(f"{p.path}.spot", f"no wager_present for seat {p.seat} spot {p.spot!r}")
                elif key in amounts:
                    self.err(f"{p.path}.spot", f"seat {p.seat} spot {p.spot!r} already has a wager_amount "
                             f"({amounts[key].path})")
                amounts[key] = p  # type: ignore[index]
        self._seat_lights(outputs, present)

    def _seat_lights(self, outputs: list[Point], present: dict[tuple[int, str], Point]) -> None:
        """An accepted light for each wager_present, a win light for each seat, none for anything else."""
        lights: dict[tuple[int, str], Point] = {}
        wins: dict[int, Point] = {}
        for p in outputs:
            if p.role == "accepted_light":
                key = (p.seat, p.spot)
                if key not in present:
                    self.err(f"{p.path}.spot", f"no wager_present for seat {p.seat} spot {p.spot!r}")
                elif key in lights:
                    self.err(f"{p.path}.spot", f"a second accepted_light for seat {p.seat} spot {p.spot!r}")
                lights[key] = p  # type: ignore[index]
            elif p.role == "win_light":
                if p.seat not in {s for s, _ in present}:
                    self.err(f"{p.path}.seat", f"seat {p.seat} has no wager_present point")
                elif p.seat in wins:
                    self.err(f"{p.path}.seat", f"a second win_light for seat {p.seat}")
                wins[p.seat] = p  # type: ignore[index]
        for (seat, spot), p in present.items():
            if (seat, spot) not in lights:
                self.err("outputs", f"missing accepted_light for seat {seat} spot {spot!r} ({p.path})")
        for seat in sorted({s for s, _ in present}):
            if seat not in wins:
                self.err("outputs", f"missing win_light for seat {seat}")

    def _lockout(self, inputs: list[Point], outputs: list[Point]) -> None:
        self._need_one(inputs, "button", "inputs")
        self._need_one(outputs, "lamp", "outputs")

    def _sign(self, inputs: list[Point], outputs: list[Point]) -> None:
        slots = [p for p in outputs if p.role == "meter_amount"]
        if not slots:
            self.err("outputs", "a sign map needs at least one meter_amount point")
        seen_slots: dict[int, Point] = {}
        seen_meters: dict[str, Point] = {}
        for p in slots:
            if p.slot in seen_slots:
                self.err(f"{p.path}.slot", f"slot {p.slot} is already {seen_slots[p.slot].path}")
            seen_slots[p.slot] = p  # type: ignore[index]
            if p.meter is not None:
                if p.meter in seen_meters:
                    self.err(f"{p.path}.meter", f"meter {p.meter!r} is already {seen_meters[p.meter].path}")
                seen_meters[p.meter] = p
        named = [p for p in slots if p.meter is not None]
        if named and len(named) != len(slots):
            unnamed = next(p for p in slots if p.meter is None)
            self.err(f"{unnamed.path}.meter", "either every meter_amount names its meter or none does")
        for role in ("message_code", "message_table", "message_seat", "message_amount"):
            self._need_one(outputs, role, "outputs")

    def _message_codes(self, kind: Kind) -> dict[SignMessage, int]:
        raw = self.m.message_codes
        if raw is None:
            return dict(DEFAULT_MESSAGE_CODES) if kind is Kind.SIGN else {}
        if kind is not Kind.SIGN:
            self.err("message_codes", "only a sign has message codes")
            return {}
        codes = dict(DEFAULT_MESSAGE_CODES)
        for name, value in raw.items():
            try:
                msg = SignMessage(name)
            except ValueError:
                names = ", ".join(m.value for m in SignMessage)
                self.err(f"message_codes.{name}", f"unknown message (one of: {names})")
                continue
            if not 1 <= value <= 0xFFFF:
                self.err(f"message_codes.{name}", "must be 1..65535 (0 means no message)")
            codes[msg] = value
        if len(set(codes.values())) != len(codes):
            self.err("message_codes", "two messages share a code")
        return codes


__all__ = ["AMOUNT_ROLES", "BOOL_ROLES", "DEFAULT_MESSAGE_CODES", "INT_TYPES", "MAX_ADDRESS", "MAX_ASCII_REGISTERS",
           "MAX_LOCAL_SEATS", "MAX_POINTS", "MAX_SCALE", "MAX_SLOT", "ROLES", "UNSIGNED_TYPES", "ButtonMode", "Kind",
           "Point", "RegisterMap", "RegisterMapError", "Table", "load_register_map", "parse_register_map"]

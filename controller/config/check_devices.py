"""[buses] and [devices]: each bus, each device and its register map, and what they say together
(every seat served, the devices a table needs)."""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from controller.config import schema
from controller.config.check import Checker
from controller.config.fields import decimals_to_float, show
from controller.config.model import BusConfig, DeviceConfig
from controller.errors import InputError
from controller.tomlfile.files import FileRefused, probe, show_path
from controller.tomlfile.problems import join

# The register maps the package ships, given by name (register_map = "seat-single"): on a box, the installed
# package's devices/ directory. (By name: progressive_examples is config/, installed; mypy does not see it.)
SHIPPED_MAPS: Path = importlib.import_module("progressive_examples").path("devices")
# The example paytable files the examples name the same way ([wagers.ID] paytable = "NAME").
SHIPPED_PAYTABLES: Path = importlib.import_module("progressive_examples").path("paytables")

# The model of a line-protocol device when its entry names none: the protocol's name (the device reports none).
LINE_MODEL = "line-protocol-1"


def _model_problem(model: str) -> str | None:
    if not all(" " <= c <= "~" for c in model) or model != model.strip():
        return f"{model!r} is not a model name: printable ASCII, no leading or trailing space"
    return None


class DeviceChecks(Checker):
    """Each bus and each device alone: `buses`, `devices` and `device_common` by name (what they say together:
    controller.config.check_wiring)."""

    # --- buses -------------------------------------------------------------------------------------

    def _bus(self, name: str, raw: object) -> None:
        from drivers.modbus import SerialBusSettings, TcpSettings

        self.buses[name] = None
        at, body = self.entry("buses", name, raw, "bus",
                              f'[buses.{name}] with transport = "rtu" and port = "/dev/ttyUSB0"')
        if body is None:
            return
        rest = {k: v for k, v in body.items() if k not in ("transport", "description")}
        transport = body.get("transport")
        if "description" in body and not isinstance(body["description"], str):
            self.add(join(at, "description"), f"must be a string, not {show(body['description'])}")
        model: type[BaseModel]
        if transport == "rtu":
            model = SerialBusSettings
        elif transport == "tcp":
            model = TcpSettings
        else:
            why = "is required" if transport is None else f"must be \"rtu\" or \"tcp\", not {show(transport)}"
            self.add(join(at, "transport"), why,
                     'transport = "rtu" (an RS-485 line) or "tcp" (a Modbus TCP connection); a line-protocol '
                     'device has its own port and no bus')
            return
        allowed = (*model.model_fields, "transport", "description")
        settings = self.validate(model, decimals_to_float(rest), at, allowed=allowed, hints={
            "port": 'port = "/dev/ttyUSB0" (the serial port of the RS-485 line)',
            "host": 'host = "10.0.0.5" (the Modbus TCP gateway)'})
        if settings is not None:
            self.buses[name] = BusConfig(name, transport, settings)

    # --- devices -----------------------------------------------------------------------------------

    def _device(self, name: str, raw: object) -> None:
        from drivers.modbus import SerialBusSettings, TcpSettings

        self.devices[name] = None
        at, body = self.entry("devices", name, raw, "device", f'[devices.{name}] with kind and transport')
        if body is None:
            return
        line_model = schema.line_fields()
        modbus_keys = tuple(schema.ModbusFields.model_fields)
        line_keys = tuple(line_model.model_fields)
        common_keys = tuple(schema.DeviceCommon.model_fields)
        common = self.validate(schema.DeviceCommon, {k: v for k, v in body.items() if k in common_keys}, at, hints={
            "kind": 'kind = "seat", "lockout", "sign", "card-counter" or "dice-entry"',
            "transport": 'transport = "rtu" or "tcp" (Modbus, on a bus) or "line" (the line protocol, on its own port)',
        })
        if common is not None:
            self.device_common[name] = common
        transport = body.get("transport")
        rest = {k: v for k, v in body.items() if k not in common_keys}
        if transport in ("rtu", "tcp"):
            bus_keys = set(SerialBusSettings.model_fields) | set(TcpSettings.model_fields) | set(line_keys)
            for k in list(rest):
                if k in bus_keys and k not in modbus_keys:
                    del rest[k]
                    bus = body.get("bus")
                    self.add(join(at, k), "is a setting of the bus, not of a Modbus device",
                             f"set it in [buses.{bus}]" if isinstance(bus, str) else "set it in the [buses.NAME] "
                             "this device is on")
            fields = self.validate(schema.ModbusFields, rest, at, allowed=common_keys + modbus_keys, hints={
                "bus": 'bus = "table-bus": the [buses.table-bus] this device is on',
                "unit": "unit = 1: the device's Modbus unit id",
                "register_map": 'register_map = "seat-single" (a shipped map) or a map file\'s path: what each '
                                'register means',
            })
        elif transport == "line":
            for k in list(rest):
                if k in modbus_keys:
                    del rest[k]
                    self.add(join(at, k), f"only a Modbus device (transport = \"rtu\" or \"tcp\") has a {k}",
                             'a line-protocol device has its own serial port: port = "/dev/ttyUSB1"')
            fields = self.validate(line_model, decimals_to_float(rest), at, allowed=common_keys + line_keys, hints={
                "port": 'port = "/dev/ttyUSB1": the serial port the device is on'})
        else:
            return  # the transport's problem is already reported by DeviceCommon
        if common is None or fields is None:
            return
        dev = self._device_meaning(name, at, common, fields)
        self.devices[name] = dev

    def _device_meaning(self, name: str, at: str, common: Any, fields: Any) -> DeviceConfig | None:
        kind, transport = common.kind, common.transport
        seats = tuple(common.seats)
        roles = tuple(common.roles)
        ok = self._seats_and_roles(at, common, seats, roles)
        if transport == "line":
            line = self._line_settings(at, fields)
            model = LINE_MODEL if common.model is None else common.model
            why = _model_problem(model)
            if why is not None:
                ok = False
                self.add(join(at, "model"), why, f'model = "SHOE-2000"; without it the model is "{LINE_MODEL}"')
            if line is None or not ok:
                return None
            return DeviceConfig(name, kind, transport, seats, roles, common.reads_cards, common.description,
                                line=line, model=model)
        # Modbus
        if kind in ("card-counter", "dice-entry"):
            self.add(join(at, "transport"), f"a {kind} speaks the line protocol; Modbus register maps describe "
                     "seats, lock-outs and signs", 'transport = "line", with port = "/dev/ttyUSB1"')
            return None
        unit = fields.unit
        if not (1 <= unit <= 247 or (transport == "tcp" and unit == 255)):
            ok = False
            ids = "1-247" if transport == "rtu" else "1-247, or 255 for a device reached directly"
            self.add(join(at, "unit"), f"{unit} is not a Modbus {transport.upper()} unit id ({ids})",
                     "the unit id set on the device (its Modbus address)")
        if not fields.read_back and kind != "sign":
            ok = False  # an accepted light is the player's acknowledgement of a wager (docs/rounds.md)
            self.add(join(at, "read_back"), "only a sign may be write-only: a seat's accepted light and the "
                     "lock-out's lamp are read back", "read_back = true (the default), or remove it")
        map_path = self._register_map_path(fields.register_map, join(at, "register_map"))
        rmap = None if map_path is None else self._register_map(map_path, fields.register_map, join(at, "register_map"))
        if rmap is not None:
            ok = self._matches_register_map(at, kind, seats, rmap, fields.register_map) and ok
            ok = self._matches_model(at, common.model, rmap, fields.register_map) and ok
        else:
            ok = False  # the map's problems are reported once, at the first device that names it
        if not ok or map_path is None or rmap is None:
            return None
        return DeviceConfig(name, kind, transport, seats, roles, common.reads_cards, common.description,
                            bus=fields.bus, unit=unit, register_map_path=map_path.resolve(), register_map=rmap,
                            poll_interval=fields.poll_interval, model=rmap.model, writes=fields.writes,
                            read_back=fields.read_back)

    def _seats_and_roles(self, at: str, common: Any, seats: tuple[int, ...], roles: tuple[str, ...]) -> bool:
        """Seats only on a seat device, roles and reads_cards only on a card counter."""
        ok = True
        kind = common.kind
        if kind == "seat" and not seats:
            ok = False
            self.add(join(at, "seats"), "is required: a seat device lists the seats it serves",
                     "seats = [3] (or [1, 2, 3] for a device that serves several)")
        if kind != "seat" and seats:
            ok = False
            self.add(join(at, "seats"), f"only a seat device serves seats, not a {kind}", "remove seats")
        if kind == "card-counter":
            if not roles:
                ok = False
                self.add(join(at, "roles"), "is required: what the card counter is",
                         'roles = ["shuffler"], ["shoe"] or ["shuffler", "shoe"]')
            for i, role in enumerate(roles):
                if role in roles[:i]:
                    ok = False
                    self.add(join(at, "roles", i), f"{role!r} is listed twice", "list each role once")
            if common.reads_cards and "shoe" not in roles:
                ok = False
                self.add(join(at, "reads_cards"), "only a shoe reads the cards as they are dealt",
                         'add "shoe" to roles, or remove reads_cards')
        else:
            if roles:
                ok = False
                self.add(join(at, "roles"), f"only a card-counter has roles, not a {kind}", "remove roles")
            if common.reads_cards:
                ok = False
                self.add(join(at, "reads_cards"), f"only a card-counter shoe reads cards, not a {kind}",
                         "remove reads_cards")
        return ok

    def _matches_register_map(self, at: str, kind: str, seats: tuple[int, ...], rmap: Any, ref: str) -> bool:
        """The device is of its register map's kind, and a seat device lists as many seats as its map, in order."""
        map_kind = getattr(rmap.kind, "value", rmap.kind)
        if map_kind != kind:
            self.add(join(at, "kind"), f"{kind!r}, but the register map {ref} describes a "
                     f"{map_kind} device", "use the register map of this device's model")
            return False
        if kind == "seat" and seats:
            local = list(rmap.seats)
            if len(local) != len(seats):
                self.add(join(at, "seats"),
                         f"the register map {ref} serves {len(local)} seat(s); this device lists "
                         f"{len(seats)}", f"list {len(local)} table seat(s), the first being the table seat of "
                         "the map's first seat")
                return False
            want = [seats[0] + s - local[0] for s in local]
            if list(seats) != want:
                self.add(join(at, "seats"), "a Modbus seat device serves the table seats that follow its "
                         "first seat in the order of its register map",
                         f"seats = {want}")
                return False
        return True

    def _matches_model(self, at: str, model: str | None, rmap: Any, ref: str) -> bool:
        """A model the entry names is its register map's: the map is what the device is checked against."""
        if model is None or model == rmap.model:
            return True
        self.add(join(at, "model"), f"{model!r}, but the register map {ref} describes the model {rmap.model!r}",
                 "use the register map of this device's model, or correct the model")
        return False

    def _line_settings(self, at: str, fields: BaseModel) -> Any:
        from drivers.line import LineSettings

        try:
            return LineSettings(**fields.model_dump())
        except InputError as e:
            self.add(join(at, *e.field.split(".")), e.problem, "see docs/line-protocol.md for the serial settings")
            return None
        except (TypeError, ValueError) as e:
            self.add(at, f"serial settings refused: {e}")
            return None

    def _register_map_path(self, ref: str, at: str) -> Path | None:
        """A map file's path (it has a '/' or ends in .toml: relative to this file), else the name of a shipped
        map; a name never means a file beside this one, so it reads the same wherever the file is copied."""
        if "/" in ref or "\\" in ref or ref.endswith(".toml"):
            return self.usable_path(ref, at)
        shipped = sorted(p.stem for p in SHIPPED_MAPS.glob("*.toml"))
        if ref in shipped:
            return SHIPPED_MAPS / f"{ref}.toml"
        close = difflib.get_close_matches(ref, shipped, n=1, cutoff=0.6)
        self.add(at, f"no shipped register map is named {ref[:64]!r}",
                 (f"did you mean {close[0]!r}? " if close else "") + f"the shipped maps are {', '.join(shipped)}, "
                 f"in {SHIPPED_MAPS}; a map of your own is given by its path, relative to this configuration file")
        return None

    def _register_map(self, path: Path, ref: str, at: str) -> Any:
        if path in self._maps:
            return self._maps[path]
        self._maps[path] = None
        st = probe(path)
        if st is None or isinstance(st, FileRefused):
            self.add(at, f"{show_path(ref)}: no such file" if st is None else f"{show_path(ref)}: {st.reason}",
                     f"a path is relative to this configuration file; a shipped map is given by its name, as "
                     f"register_map = \"seat-single\" (the shipped maps are in {SHIPPED_MAPS})")
            return None
        from drivers.modbus import RegisterMapError, load_register_map

        try:
            rmap = load_register_map(path)
        except RegisterMapError as e:
            for where, problem in e.errors:
                self.add(at, f"{ref}: {where}: {problem}" if where else f"{ref}: {problem}",
                         "docs/register-maps.md describes the format")
            return None
        except InputError as e:
            self.add(at, f"{ref}: {e.problem}", "docs/register-maps.md describes the format")
            return None
        self._maps[path] = rmap
        return rmap


__all__ = ["LINE_MODEL", "SHIPPED_MAPS", "SHIPPED_PAYTABLES", "DeviceChecks"]

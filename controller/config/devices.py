"""From a validated configuration to the drivers' own settings, and to the drivers themselves.

    settings = driver_settings(cfg)          # plain values: what each bus and driver is given
    buses, devices = build_drivers(cfg)      # ModbusBus per bus, a Device per configured device

Nothing here opens a port: the drivers connect when their ``run`` starts (drivers/device.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.config.model import TableConfig

if TYPE_CHECKING:
    from drivers.device import Device
    from drivers.line import LineSettings
    from drivers.modbus import ModbusBus, RegisterMap, SerialBusSettings, TcpSettings


@dataclass(frozen=True)
class ModbusDeviceSpec:
    """What ``drivers.modbus.make_device`` is given for one device."""

    name: str
    kind: str
    bus: str
    unit: int
    register_map: RegisterMap
    first_seat: int = 1
    poll_interval: float | None = None
    writes: str = "auto"
    read_back: bool = True

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"first_seat": self.first_seat, "writes": self.writes, "read_back": self.read_back}
        if self.poll_interval is not None:
            out["poll_interval"] = self.poll_interval
        return out


@dataclass(frozen=True)
class LineDeviceSpec:
    """What ``drivers.line.LineDevice`` is given for one device. ``seats``: the table's seat count (the
    driver refuses seat numbers outside 1..seats, both ways)."""

    name: str
    kind: str
    settings: LineSettings
    seats: int


@dataclass(frozen=True)
class DriverSettings:
    buses: dict[str, SerialBusSettings | TcpSettings]
    modbus: tuple[ModbusDeviceSpec, ...]
    line: tuple[LineDeviceSpec, ...]


def driver_settings(cfg: TableConfig) -> DriverSettings:
    """The settings of every bus and device driver of `cfg`, in the order of the file."""
    buses = {name: b.settings for name, b in cfg.buses.items()}
    modbus: list[ModbusDeviceSpec] = []
    line: list[LineDeviceSpec] = []
    for d in cfg.devices.values():
        if d.transport == "line":
            assert d.line is not None
            line.append(LineDeviceSpec(d.name, d.kind, d.line, cfg.seats))
        else:
            assert d.bus is not None and d.unit is not None and d.register_map is not None
            modbus.append(ModbusDeviceSpec(
                d.name, d.kind, d.bus, d.unit, d.register_map,
                first_seat=d.first_seat if d.kind == "seat" else 1, poll_interval=d.poll_interval,
                writes=d.writes, read_back=d.read_back,
            ))
    return DriverSettings(buses, tuple(modbus), tuple(line))


def build_drivers(cfg: TableConfig) -> tuple[dict[str, ModbusBus], dict[str, Device]]:
    """One ModbusBus per bus (shared by the devices on it) and one driver per device, by name."""
    from drivers.line import LineDevice
    from drivers.modbus import ModbusBus, make_device

    ds = driver_settings(cfg)
    buses = {name: ModbusBus(settings, name=name) for name, settings in ds.buses.items()}
    devices: dict[str, Device] = {}
    for m in ds.modbus:
        devices[m.name] = make_device(m.name, buses[m.bus], m.unit, m.register_map, **m.options())
    for spec in ds.line:
        devices[spec.name] = LineDevice(spec.name, spec.settings, seats=spec.seats)
    return buses, devices


__all__ = ["DriverSettings", "LineDeviceSpec", "ModbusDeviceSpec", "build_drivers", "driver_settings"]

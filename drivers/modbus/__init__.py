"""Modbus RTU and Modbus TCP device drivers described by register maps. What is pure is in `core/`.

Layered like pymodbus underneath them:

- settings.py: one settings object per connection (serial line or TCP), and how the pymodbus client is
  configured (transport);
- frames.py: function codes, frame lengths, CRC errors told from garbage (framer);
- core/codec.py, registermap.py: register values <-> Python values and cents; the TOML register maps (PDU);
- bus.py: ModbusBus, one client and one lock per bus, silence, timeouts, retries, reconnects (transaction);
- core/schedule.py (pure), scheduler.py: which read goes next on a bus, by the round's phase; one scheduler per bus;
- core/edges.py (pure), devices.py: polled states -> events, commands -> writes; the Device implementations (client).
"""

from drivers.modbus.bus import BusError, DeviceException, ModbusBus, NoResponse, NotConnected, Transaction
from drivers.modbus.devices import (
    DeviceMetrics,
    ModbusDevice,
    ModbusLockoutButton,
    ModbusMeterSign,
    ModbusSeatDevice,
    make_device,
)
from drivers.modbus.registermap import Kind, Point, RegisterMap, RegisterMapError, Table, load_register_map
from drivers.modbus.settings import SerialBusSettings, TcpSettings

__all__ = [
    "BusError",
    "DeviceException",
    "DeviceMetrics",
    "Kind",
    "ModbusBus",
    "ModbusDevice",
    "ModbusLockoutButton",
    "ModbusMeterSign",
    "ModbusSeatDevice",
    "NoResponse",
    "NotConnected",
    "Point",
    "RegisterMap",
    "RegisterMapError",
    "SerialBusSettings",
    "Table",
    "TcpSettings",
    "Transaction",
    "load_register_map",
    "make_device",
]

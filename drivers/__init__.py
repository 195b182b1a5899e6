"""The drivers of the table's devices: their events and commands (`events.py`), the `Device` contract
(`device.py`), a device's health (`health.py`); the buses and ports in `modbus/` and `line/`."""

__all__: list[str] = []  # its modules are imported by name

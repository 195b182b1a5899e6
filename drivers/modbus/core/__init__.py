"""The Modbus drivers' pure part: register values to Python values and cents (`codec.py`), two polls to an edge
(`edges.py`), which read goes next by the round's phase (`schedule.py`). No I/O: the bus and the devices above
it (`drivers.modbus.bus`, `devices`, `scheduler`) carry them out."""

__all__: list[str] = []  # its modules are imported by name

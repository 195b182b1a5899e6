"""The line protocol's pure part: a line's framing (`frame.py`) and the messages of each device kind
(`protocol.py`). No I/O: the port and the driver (`drivers.line.port`, `driver`) carry them out."""

__all__: list[str] = []  # its modules are imported by name

"""Point a table configuration at a running rig: the rig's ports change on every run, the table's
configuration names the ports of a real table. The serial framing follows the rig too: a pseudo-terminal
refuses parity, so the rig frames its RTU lines as 8N2 (the same 11 bits a character as 8E1). Everything else
in the configuration stays as checked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.config.model import TableConfig


class AttachError(ValueError):
    pass


def attach(cfg: TableConfig, connections: dict[str, Any]) -> TableConfig:
    """`cfg` with each bus and line device moved to where the rig's device of the same name is.
    Every configured device must be on the rig, on the same transport."""
    buses = dict(cfg.buses)
    devices = dict(cfg.devices)
    for name, dev in cfg.devices.items():
        conn = connections.get(name)
        if conn is None:
            raise AttachError(f"devices.{name}: the rig has no device of that name")
        if conn.transport != dev.transport:
            raise AttachError(f"devices.{name}: {dev.transport} in the configuration, {conn.transport} on the rig")
        if dev.transport == "line":
            assert dev.line is not None, "a line device has its line settings"
            devices[name] = replace(dev, line=replace(dev.line, port=conn.port, baud=conn.baud,
                                                      **_framing(conn)))
            continue
        assert dev.bus is not None, "a Modbus device names its bus"
        bus = buses[dev.bus]
        if dev.transport == "rtu":
            update = {"port": conn.port, "baud": conn.baud, **_framing(conn)}
        else:
            update = {"host": conn.host, "port": conn.tcp_port}
        buses[dev.bus] = replace(bus, settings=bus.settings.model_copy(update=update))
    return replace(cfg, buses=buses, devices=devices)


def _framing(conn: Any) -> dict[str, Any]:
    return {k: v for k in ("parity", "stopbits") if (v := getattr(conn, k, None)) is not None}

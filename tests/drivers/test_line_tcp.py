"""The line protocol driver over TCP: through a serial device server (`socket://host:port`), as a shoe on a
floor's Ethernet-to-serial box would be reached. Behind the server: the rig's paced wire and simulator."""

from __future__ import annotations

from test_line_driver import NAME, arun, bench

from drivers.events import CardDealt, DeviceDown, DeviceUp, SetWinLight, ShufflerCount
from hil.terminal_server import TerminalServer
from hil.wire import SerialWire


@arun
async def test_events_and_commands_over_tcp():
    wire = SerialWire(115200, name="tcp-test").start()
    try:
        async with (TerminalServer(wire.driver_port, baud=115200) as ts,
                    bench(lively=True, seats=7, port=ts.url, wire=wire) as b):
            await b.sim.shuffle(52, "red")
            assert await b.next() == ShufflerCount(NAME, 52, "red")
            await b.sim.deal([0, 51])
            assert [await b.next(), await b.next()] == [CardDealt(NAME, 0), CardDealt(NAME, 51)]
            await b.driver.send(SetWinLight(4, True))
            assert b.sim.lights()["win"].get(4) is True
            assert [c for c in b.sim.applied_commands if c == SetWinLight(4, True)] == [SetWinLight(4, True)]
    finally:
        wire.close()


@arun
async def test_a_lost_connection_is_a_device_down_then_up():
    wire = SerialWire(115200, name="tcp-test").start()
    try:
        async with (TerminalServer(wire.driver_port, baud=115200) as ts,
                    bench(lively=True, seats=7, port=ts.url, wire=wire) as b):
            wire.unplug()
            ev = await b.next(timeout=5)
            assert isinstance(ev, DeviceDown)
            wire.replug()
            assert await b.next(timeout=10) == DeviceUp(NAME)
            await b.sim.shuffle(52)
            assert await b.next() == ShufflerCount(NAME, 52, None)
    finally:
        wire.close()

"""A serial device server (terminal server) for the rig: a TCP port whose bytes go to and from a serial
line, as the Ethernet-to-RS-232/485 boxes on casino floors do. The line driver reaches it with a pyserial
URL, ``socket://host:port``; behind it the rig's paced wire and simulated device are the same as ever."""

from __future__ import annotations

import asyncio
import contextlib

import serial_asyncio_fast

CHUNK = 4096


class TerminalServer:
    def __init__(self, serial_port: str, *, baud: int = 19200, host: str = "127.0.0.1", port: int = 0) -> None:
        self.serial_port = serial_port
        self.baud = baud
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"socket://{self.host}:{self.port}"

    async def __aenter__(self) -> TerminalServer:
        self._server = await asyncio.start_server(self._client, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        self._tasks.add(me)
        s_reader, s_writer = await serial_asyncio_fast.open_serial_connection(url=self.serial_port, baudrate=self.baud)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(_pump(reader, s_writer))
                tg.create_task(_pump(s_reader, writer))
        except* (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(me)
            s_writer.close()
            writer.close()


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while data := await src.read(CHUNK):
        dst.write(data)
        await dst.drain()
    raise ConnectionError("closed")

"""The serial port under the line protocol: an asyncio.Protocol that turns bytes into frames.

Shared by the driver and the device simulator. Opening runs pyserial's open in a thread (a USB
adapter can take its time); if the opener is cancelled meanwhile, the port is closed as soon as the
open finishes, so a cancelled reconnect never leaks a file descriptor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

import serial
from serial_asyncio_fast import SerialTransport, connection_for_serial

from drivers.line.core.frame import MAX_FRAME, DecodeError, Decoder, Frame

CLOSE_TIMEOUT_S = 2.0


class FrameProtocol(asyncio.Protocol):
    """Bytes in, frames and decode errors out (``on_item``); ``closed`` resolves when the port is gone."""

    def __init__(self, on_item: Callable[[Frame | DecodeError], None],
                 on_lost: Callable[[Exception | None], None], max_frame: int = MAX_FRAME) -> None:
        self._on_item = on_item
        self._on_lost = on_lost
        self.decoder = Decoder(max_frame)
        self.transport: SerialTransport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's signature names a BaseTransport; serial_asyncio_fast hands this protocol its SerialTransport
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for item in self.decoder.feed(data):
            self._on_item(item)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_lost(exc)

    def write(self, data: bytes) -> bool:
        """Write one whole frame in one call (the line sees frames, not fragments)."""
        t = self.transport
        if t is None or t.is_closing():
            return False
        t.write(data)
        return True


def _close_when_opened(fut: asyncio.Future[serial.Serial]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().close()


async def open_port(path: str, protocol: FrameProtocol, *, baud: int, bytesize: int = 8, parity: str = "N",
                    stopbits: float = 1, timeout: float = 2.0) -> SerialTransport:
    """Open ``path`` and attach ``protocol``. Raises OSError/serial.SerialException/TimeoutError."""
    loop = asyncio.get_running_loop()
    opener = loop.run_in_executor(None, partial(
        serial.serial_for_url, path, baudrate=baud, bytesize=bytesize, parity=parity, stopbits=stopbits))
    try:
        async with asyncio.timeout(timeout):
            ser = await asyncio.shield(opener)
    except BaseException:
        opener.add_done_callback(_close_when_opened)
        raise
    transport, _ = await connection_for_serial(loop, lambda: protocol, ser)
    protocol.transport = transport  # before connection_made runs, so close_port can close it
    return transport


async def close_port(protocol: FrameProtocol) -> None:
    """Close at once (nothing buffered is worth a wait) and wait, bounded, until the fd is closed."""
    t = protocol.transport
    if t is None:
        return  # never opened, or already closed
    if not t.is_closing():
        t.abort()
    await asyncio.wait({protocol.closed}, timeout=CLOSE_TIMEOUT_S)


__all__ = ["CLOSE_TIMEOUT_S", "FrameProtocol", "close_port", "open_port"]

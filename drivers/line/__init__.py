"""Our text line protocol for serial devices (shoes, shufflers, seat sensors, signs, dice entry).

``core/frame`` (bytes <-> frames), ``core/protocol`` (frames <-> messages, sequence/ACK state), both pure, ``port`` (the
asyncio.Protocol on a serial port), ``driver`` (LineDevice, LineSettings). The specification is
docs/line-protocol.md.
"""

from drivers.line.core.frame import MAX_FRAME, DecodeError, Decoder, Frame, crc16, encode
from drivers.line.core.protocol import PROTOCOL_VERSION, ArgError, Link, Role
from drivers.line.driver import CommandRejected, LineDevice, LineSettings

__all__ = [
    "MAX_FRAME",
    "PROTOCOL_VERSION",
    "ArgError",
    "CommandRejected",
    "DecodeError",
    "Decoder",
    "Frame",
    "LineDevice",
    "LineSettings",
    "Link",
    "Role",
    "crc16",
    "encode",
]

"""Our text line protocol for serial devices (shoes, shufflers, seat sensors, signs, dice entry).

``frame`` (bytes <-> frames), ``protocol`` (frames <-> messages, sequence/ACK state), ``port`` (the
asyncio.Protocol on a serial port), ``driver`` (LineDevice, LineSettings). The specification is
docs/line-protocol.md.
"""

from drivers.line.driver import CommandRejected, LineDevice, LineSettings
from drivers.line.frame import MAX_FRAME, DecodeError, Decoder, Frame, crc16, encode
from drivers.line.protocol import PROTOCOL_VERSION, ArgError, Link, Role

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

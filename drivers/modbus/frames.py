"""Frame-level facts the bus needs beside pymodbus' own framer: function codes per table, frame lengths
(for the wire-time model and to spot stray bytes), and telling a CRC error from garbage.

pymodbus' RTU framer drops a frame whose CRC is wrong without saying so (the request then times out); the
bus sees the raw bytes through pymodbus' ``trace_packet`` hook and uses these functions to name the fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pymodbus.framer.rtu import FramerRTU

from drivers.modbus.registermap import Table

READ_COILS = 1
READ_DISCRETE_INPUTS = 2
READ_HOLDING_REGISTERS = 3
READ_INPUT_REGISTERS = 4
WRITE_SINGLE_COIL = 5
WRITE_SINGLE_REGISTER = 6
WRITE_MULTIPLE_COILS = 15
WRITE_MULTIPLE_REGISTERS = 16

READ_FC = {
    Table.COIL: READ_COILS,
    Table.DISCRETE_INPUT: READ_DISCRETE_INPUTS,
    Table.HOLDING_REGISTER: READ_HOLDING_REGISTERS,
    Table.INPUT_REGISTER: READ_INPUT_REGISTERS,
}
MAX_READ = {Table.COIL: 2000, Table.DISCRETE_INPUT: 2000, Table.HOLDING_REGISTER: 125, Table.INPUT_REGISTER: 125}
MAX_WRITE = {Table.COIL: 1968, Table.HOLDING_REGISTER: 123}

# Modbus over Serial Line v1.02 §2.5.1.1: a frame ends with a silence of 3.5 character times (t3.5); above
# 19200 baud the spec fixes it at 1.75 ms so that fast lines do not need sub-millisecond timers.
T35_CHARACTERS = 3.5
T35_FIXED_ABOVE_BAUD = 19200
T35_FIXED_S = 0.00175


def t35(baud: int, char_bits: int = 11) -> float:
    """The inter-frame silence in seconds."""
    if baud > T35_FIXED_ABOVE_BAUD:
        return T35_FIXED_S
    return T35_CHARACTERS * char_bits / baud


EXCEPTION_NAMES = {
    1: "illegal_function",
    2: "illegal_address",
    3: "illegal_value",
    4: "device_failure",
    5: "acknowledge",
    6: "busy",
    8: "memory_parity",
    10: "gateway_path",
    11: "gateway_no_response",
}
# Modbus Application Protocol v1.1b3 §7: 5 and 6 mean "alive, come back later"; the others mean the
# request cannot be served (a fault in the device or a register map that does not match it).
BUSY_CODES = frozenset({5, 6})


class Framing(StrEnum):
    RTU = "rtu"  # unit id + PDU + CRC16
    SOCKET = "socket"  # MBAP header (7 bytes, unit id last) + PDU


def write_fc(table: Table, count: int) -> int:
    if table is Table.COIL:
        return WRITE_SINGLE_COIL if count == 1 else WRITE_MULTIPLE_COILS
    if table is Table.HOLDING_REGISTER:
        return WRITE_SINGLE_REGISTER if count == 1 else WRITE_MULTIPLE_REGISTERS
    raise ValueError(f"{table.value} is read-only")


def _pdu_request_len(fc: int, count: int) -> int:
    if fc in (READ_COILS, READ_DISCRETE_INPUTS, READ_HOLDING_REGISTERS, READ_INPUT_REGISTERS,
              WRITE_SINGLE_COIL, WRITE_SINGLE_REGISTER):
        return 5
    if fc == WRITE_MULTIPLE_COILS:
        return 6 + (count + 7) // 8
    if fc == WRITE_MULTIPLE_REGISTERS:
        return 6 + 2 * count
    raise ValueError(f"function code {fc}")


def _pdu_response_len(fc: int, count: int) -> int:
    if fc in (READ_COILS, READ_DISCRETE_INPUTS):
        return 2 + (count + 7) // 8
    if fc in (READ_HOLDING_REGISTERS, READ_INPUT_REGISTERS):
        return 2 + 2 * count
    if fc in (WRITE_SINGLE_COIL, WRITE_SINGLE_REGISTER, WRITE_MULTIPLE_COILS, WRITE_MULTIPLE_REGISTERS):
        return 5
    raise ValueError(f"function code {fc}")


def _adu(framing: Framing, pdu_len: int) -> int:
    return pdu_len + (3 if framing is Framing.RTU else 7)


def request_len(framing: Framing, fc: int, count: int) -> int:
    """Bytes of the request frame."""
    return _adu(framing, _pdu_request_len(fc, count))


def response_len(framing: Framing, fc: int, count: int) -> int:
    """Bytes of a normal response frame."""
    return _adu(framing, _pdu_response_len(fc, count))


def exception_len(framing: Framing) -> int:
    return _adu(framing, 2)


def crc_ok(frame: bytes) -> bool:
    """The last two bytes of an RTU frame are the CRC of the rest."""
    if len(frame) < 4:
        return False
    return FramerRTU.compute_CRC(frame[:-2]) == int.from_bytes(frame[-2:], "big")


def bad_crc_reply(buf: bytes, unit: int, fc: int, expect_len: int) -> bool:
    """``buf`` starts with a complete reply to (unit, fc) whose CRC is wrong."""
    if len(buf) < 5 or buf[0] != unit:
        return False
    if buf[1] == fc:
        length = expect_len
    elif buf[1] == fc | 0x80:
        length = 5
    else:
        return False
    return len(buf) >= length and not crc_ok(buf[:length])


def classify_failed_rx(buffers: Sequence[bytes], unit: int, fc: int, expect_len: int) -> str:
    """Why bytes that arrived during a failed attempt did not make a reply: ``crc`` if one of them was a
    complete reply to this request with a wrong CRC, else ``garbage``."""
    for buf in buffers:
        for i in range(len(buf)):
            if bad_crc_reply(buf[i:], unit, fc, expect_len):
                return "crc"
    return "garbage"


__all__ = ["BUSY_CODES", "EXCEPTION_NAMES", "MAX_READ", "MAX_WRITE", "READ_COILS", "READ_DISCRETE_INPUTS", "READ_FC",
           "READ_HOLDING_REGISTERS", "READ_INPUT_REGISTERS", "T35_CHARACTERS", "T35_FIXED_ABOVE_BAUD", "T35_FIXED_S",
           "WRITE_MULTIPLE_COILS", "WRITE_MULTIPLE_REGISTERS", "WRITE_SINGLE_COIL", "WRITE_SINGLE_REGISTER", "Framing",
           "bad_crc_reply", "classify_failed_rx", "crc_ok", "exception_len", "request_len", "response_len", "t35",
           "write_fc"]

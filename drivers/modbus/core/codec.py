"""Register values <-> Python values, and raw counts <-> cents.

Modbus moves 16-bit registers, most significant byte first; a 32-bit value spans two registers and the order
of the two is the device's choice (the spec does not fix it), so every 32-bit point states it:

- ``big``: high word at the lower address (what most manuals call "big-endian word order", ABCD);
- ``little``: low word at the lower address (CDAB).

Money is exact: a point's ``scale`` is a fraction (``fractions.Fraction``). Reading, cents = raw * scale and
the scale must be a whole number of cents per count (1 = cents, 100 = dollars). Writing, raw = cents / scale
and the scale must be one count per whole fraction of a cent (1 = cents, 1/10 = tenths of a cent). Anything
else would lose cents, and the register map refuses it (registermap.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from fractions import Fraction


class DataType(StrEnum):
    BOOL = "bool"
    UINT16 = "uint16"
    INT16 = "int16"
    UINT32 = "uint32"
    INT32 = "int32"
    ASCII = "ascii"  # text, two characters per register, first character in the high byte


class WordOrder(StrEnum):
    BIG = "big"  # high word first
    LITTLE = "little"  # low word first


# (registers, signed, bits) for the integer types
INT_LAYOUT: dict[DataType, tuple[int, bool, int]] = {
    DataType.UINT16: (1, False, 16),
    DataType.INT16: (1, True, 16),
    DataType.UINT32: (2, False, 32),
    DataType.INT32: (2, True, 32),
}


def int_range(dtype: DataType) -> tuple[int, int]:
    _n, signed, bits = INT_LAYOUT[dtype]
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def registers_to_int(regs: Sequence[int], dtype: DataType, word_order: WordOrder | None) -> int:
    n, signed, bits = INT_LAYOUT[dtype]
    if len(regs) != n:
        raise ValueError(f"{dtype.value} needs {n} registers, got {len(regs)}")
    for r in regs:
        if not 0 <= r <= 0xFFFF:
            raise ValueError(f"register value {r} out of range")
    words = list(regs) if n == 1 or word_order is WordOrder.BIG else list(reversed(regs))
    value = 0
    for w in words:
        value = (value << 16) | w
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def int_to_registers(value: int, dtype: DataType, word_order: WordOrder | None) -> list[int]:
    n, _signed, bits = INT_LAYOUT[dtype]
    lo, hi = int_range(dtype)
    if not lo <= value <= hi:
        raise ValueError(f"{value} does not fit {dtype.value} ({lo}..{hi})")
    value &= (1 << bits) - 1
    words = [(value >> (16 * (n - 1 - i))) & 0xFFFF for i in range(n)]  # high word first
    return words if n == 1 or word_order is WordOrder.BIG else list(reversed(words))


def registers_to_ascii(regs: Sequence[int]) -> str:
    raw = b"".join(int(r).to_bytes(2, "big") for r in regs)
    return raw.rstrip(b"\x00 ").decode("ascii", errors="replace")


def ascii_to_registers(text: str, registers: int) -> list[int]:
    raw = text.encode("ascii")
    if len(raw) > 2 * registers:
        raise ValueError(f"{text!r} is longer than {2 * registers} characters")
    raw = raw.ljust(2 * registers, b"\x00")
    return [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]


def raw_to_cents(raw: int, scale: Fraction) -> int:
    if scale.denominator == 1:
        return raw * scale.numerator  # the usual case, without Fraction arithmetic on every poll
    cents = raw * scale
    if cents.denominator != 1:
        raise ValueError(f"{raw} x {scale} is not a whole number of cents")
    return int(cents)


def cents_to_raw(cents: int, scale: Fraction) -> int:
    raw = Fraction(cents) / scale
    if raw.denominator != 1:
        raise ValueError(f"{cents} cents is not a whole number of counts of {scale} cents")
    return int(raw)


def scale_reads_exactly(scale: Fraction) -> bool:
    """Every raw count maps to whole cents."""
    return scale > 0 and scale.denominator == 1


def scale_writes_exactly(scale: Fraction) -> bool:
    """Every amount in cents maps to a whole raw count."""
    return scale > 0 and scale.numerator == 1


__all__ = ["INT_LAYOUT", "DataType", "WordOrder", "ascii_to_registers", "cents_to_raw", "int_range", "int_to_registers",
           "raw_to_cents", "registers_to_ascii", "registers_to_int", "scale_reads_exactly", "scale_writes_exactly"]

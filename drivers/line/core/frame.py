"""Frames of the line protocol: bytes <-> (seq, verb, args). Pure, no I/O.

    $0042 WAGER 3 main 2500*8F71\\r\\n

A frame is ``'$'``, a four-digit sequence number, a space, a verb, zero or more space-separated
arguments, ``'*'``, the CRC-16 of the text between ``'$'`` and ``'*'`` as four hex digits, CR LF.
Printable ASCII only, at most ``MAX_FRAME`` bytes in all. docs/line-protocol.md is the specification;
the constants below are named after it.

The decoder is incremental and bounded: ``feed(bytes)`` returns the frames and the errors found so
far, never raises, and never holds more than one frame's worth of bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.errors import InputError

START = ord("$")  # start of frame; never appears inside one, so a receiver resynchronises on it
CRC_MARK = ord("*")  # separates the text from its checksum
CR, LF = 0x0D, 0x0A  # end of frame: CR LF; a frame is complete only at its LF
END = b"\r\n"
MAX_FRAME = 128  # bytes, '$' to LF inclusive (spec §2)
SEQ_DIGITS = 4
SEQ_MODULO = 10_000  # sequence numbers 0000..9999, then 0000 again
MAX_VERB = 16
# Overhead of a frame around its text: '$' + '*' + 4 hex digits + CR LF.
OVERHEAD = 1 + 1 + 4 + 2

# CRC-16/CCITT-FALSE (a.k.a. CRC-16/IBM-3740): width 16, poly 0x1021, init 0xFFFF, no reflection,
# xorout 0x0000; check("123456789") = 0x29B1. A CRC, unlike an XOR sum, catches swapped bytes and all
# burst errors up to 16 bits.
CRC_POLY = 0x1021
CRC_INIT = 0xFFFF
CRC_CHECK = 0x29B1


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ CRC_POLY) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_TABLE = _crc_table()


def crc16(data: bytes) -> int:
    crc = CRC_INIT
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc


# Error kinds, as counted in DeviceHealth.errors.
GARBAGE = "garbage"  # bytes outside any frame
OVERSIZE = "oversize"  # no end of frame within MAX_FRAME bytes
CRC_ERROR = "crc"  # checksum does not match the text
MALFORMED = "malformed"  # control character, missing CR or checksum, bad sequence number or verb

_VERB = re.compile(r"[A-Z][A-Z0-9_]*")
_HEX = frozenset(b"0123456789ABCDEFabcdef")
_GARBAGE_PREVIEW = 32  # bytes of garbage kept for the log


class FrameEncodeError(InputError):
    """A frame that cannot be written (bad verb or argument, too long): a bug in the caller."""


@dataclass(frozen=True, slots=True)
class Frame:
    seq: int
    verb: str
    args: tuple[str, ...] = ()
    raw: bytes = b""


@dataclass(frozen=True, slots=True)
class DecodeError:
    """Bytes the decoder threw away: ``kind`` is one of the error kinds, ``data`` the bytes at fault
    (at most one frame's worth)."""

    kind: str
    detail: str
    data: bytes


def _printable(b: int) -> bool:
    return 0x20 <= b <= 0x7E


def check_arg(arg: str, field: str = "arg") -> None:
    """An argument is 1+ printable characters other than space, '$' and '*'."""
    if not isinstance(arg, str) or not arg:
        raise FrameEncodeError(field, f"an argument must be a non-empty string, not {arg!r}")
    for ch in arg:
        o = ord(ch)
        if not (0x21 <= o <= 0x7E) or ch in "$*":
            raise FrameEncodeError(field, f"{arg!r}: character {ch!r} is not allowed (printable, no space, '$' or '*')")


def encode(seq: int, verb: str, args: tuple[str, ...] | list[str] = (), *, max_frame: int = MAX_FRAME) -> bytes:
    if not isinstance(seq, int) or not 0 <= seq < SEQ_MODULO:
        raise FrameEncodeError("seq", f"must be 0..{SEQ_MODULO - 1}, not {seq!r}")
    if not isinstance(verb, str) or len(verb) > MAX_VERB or not _VERB.fullmatch(verb):
        raise FrameEncodeError("verb", f"{verb!r} is not A-Z then A-Z, 0-9, _ (at most {MAX_VERB})")
    for i, a in enumerate(args):
        check_arg(a, f"args[{i}]")
    text = " ".join((f"{seq:0{SEQ_DIGITS}d}", verb, *args)).encode("ascii")
    frame = b"$" + text + b"*" + f"{crc16(text):04X}".encode("ascii") + END
    if len(frame) > max_frame:
        raise FrameEncodeError("frame", f"{len(frame)} bytes, over the {max_frame}-byte limit")
    return frame


def parse_text(text: bytes, raw: bytes = b"") -> Frame | DecodeError:
    """The text between '$' and '*' (checksum already verified) as a Frame."""
    parts = text.decode("ascii").split(" ")
    if len(parts) < 2:
        return DecodeError(MALFORMED, "no verb", raw)
    seq, verb, args = parts[0], parts[1], tuple(parts[2:])
    if len(seq) != SEQ_DIGITS or not seq.isdigit() or not seq.isascii():
        return DecodeError(MALFORMED, f"sequence number {seq!r} is not {SEQ_DIGITS} digits", raw)
    if len(verb) > MAX_VERB or not _VERB.fullmatch(verb):
        return DecodeError(MALFORMED, f"verb {verb!r} is not A-Z then A-Z, 0-9, _", raw)
    if any(not a for a in args):
        return DecodeError(MALFORMED, "empty argument (two spaces, or a trailing space)", raw)
    return Frame(int(seq), verb, args, raw)


def parse_frame(raw: bytes) -> Frame | DecodeError:
    """One complete frame, '$' to LF (the decoder has checked characters and length)."""
    body = raw[1:-2]
    if len(body) < 5 or body[-5] != CRC_MARK or not all(b in _HEX for b in body[-4:]):
        return DecodeError(MALFORMED, "no '*' and four hex digits before CR LF", raw)
    text = body[:-5]
    if CRC_MARK in text:
        return DecodeError(MALFORMED, "'*' inside the text", raw)
    got, want = int(body[-4:], 16), crc16(text)
    if got != want:
        return DecodeError(CRC_ERROR, f"checksum {got:04X}, computed {want:04X}", raw)
    return parse_text(text, raw)


_HUNT, _FRAME, _SKIP = range(3)


class Decoder:
    """Incremental frame decoder with a bounded buffer.

    States: hunting for '$' (anything else is garbage), inside a frame (collecting up to
    ``max_frame`` bytes), skipping the rest of a frame already reported bad (until LF or '$').
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        if max_frame < OVERHEAD + SEQ_DIGITS + 2:
            raise ValueError(f"max_frame {max_frame} is too small for any frame")
        self.max_frame = max_frame
        self._state = _HUNT
        self._buf = bytearray()
        self._garbage = bytearray()  # preview of the current garbage run
        self._garbage_len = 0

    @property
    def buffered(self) -> int:
        """Bytes held (at most max_frame + the garbage preview)."""
        return len(self._buf) + len(self._garbage)

    def reset(self) -> None:
        self._state = _HUNT
        self._buf.clear()
        self._garbage.clear()
        self._garbage_len = 0

    def _flush_garbage(self, out: list[Frame | DecodeError]) -> None:
        if self._garbage_len:
            more = "" if self._garbage_len <= len(self._garbage) else " (start shown)"
            out.append(DecodeError(GARBAGE, f"{self._garbage_len} bytes outside a frame{more}", bytes(self._garbage)))
            self._garbage.clear()
            self._garbage_len = 0

    def _bad(self, out: list[Frame | DecodeError], kind: str, detail: str) -> None:
        out.append(DecodeError(kind, detail, bytes(self._buf)))
        self._buf.clear()

    def feed(self, data: bytes) -> list[Frame | DecodeError]:
        out: list[Frame | DecodeError] = []
        buf = self._buf
        for b in data:
            if b == START:
                self._flush_garbage(out)
                if self._state == _FRAME:
                    self._bad(out, MALFORMED, "frame cut short by a new '$'")
                buf.clear()
                buf.append(b)
                self._state = _FRAME
            elif self._state == _HUNT:
                self._garbage_len += 1
                if len(self._garbage) < _GARBAGE_PREVIEW:
                    self._garbage.append(b)
            elif self._state == _SKIP:
                if b == LF:
                    self._state = _HUNT
            else:  # inside a frame
                if len(buf) + 1 > self.max_frame:
                    self._bad(out, OVERSIZE, f"no end of frame within {self.max_frame} bytes")
                    self._state = _HUNT if b == LF else _SKIP
                elif b == LF:
                    if buf[-1] != CR:
                        self._bad(out, MALFORMED, "LF without CR")
                    else:
                        buf.append(b)
                        out.append(parse_frame(bytes(buf)))
                        buf.clear()
                    self._state = _HUNT
                elif buf[-1] == CR:
                    buf.append(b)
                    self._bad(out, MALFORMED, "CR not followed by LF")
                    self._state = _SKIP
                elif b == CR or _printable(b):
                    buf.append(b)
                else:
                    buf.append(b)
                    self._bad(out, MALFORMED, f"control or non-ASCII byte 0x{b:02X} in a frame")
                    self._state = _SKIP
        self._flush_garbage(out)
        return out


__all__ = ["CR", "CRC_CHECK", "CRC_ERROR", "CRC_INIT", "CRC_MARK", "CRC_POLY", "END", "GARBAGE", "LF", "MALFORMED",
           "MAX_FRAME", "MAX_VERB", "OVERHEAD", "OVERSIZE", "SEQ_DIGITS", "SEQ_MODULO", "START", "DecodeError",
           "Decoder", "Frame", "FrameEncodeError", "check_arg", "crc16", "encode", "parse_frame", "parse_text"]

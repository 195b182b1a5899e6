"""Line protocol frames: encoding, the CRC, and the incremental decoder (resync, bounds, errors)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.line.core.frame import (
    CRC_CHECK,
    CRC_ERROR,
    GARBAGE,
    MALFORMED,
    MAX_FRAME,
    OVERSIZE,
    SEQ_MODULO,
    DecodeError,
    Decoder,
    Frame,
    FrameEncodeError,
    crc16,
    encode,
)


def frames_of(items: list[Frame | DecodeError]) -> list[tuple[int, str, tuple[str, ...]]]:
    return [(f.seq, f.verb, f.args) for f in items if isinstance(f, Frame)]


def kinds_of(items: list[Frame | DecodeError]) -> list[str]:
    return [e.kind for e in items if isinstance(e, DecodeError)]


# --- strategies ---------------------------------------------------------------------------------

ARG_CHARS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "$*")
seqs = st.integers(0, SEQ_MODULO - 1)
verbs = st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True)
args = st.lists(st.text(ARG_CHARS, min_size=1, max_size=12), max_size=5)


@st.composite
def valid_frames(draw: st.DrawFn) -> bytes:
    seq, verb, a = draw(seqs), draw(verbs), draw(args)
    try:
        return encode(seq, verb, a)
    except FrameEncodeError:  # too long: drop arguments until it fits
        while a:
            a = a[:-1]
            try:
                return encode(seq, verb, a)
            except FrameEncodeError:
                continue
        return encode(seq, verb, ())


# --- CRC and encoding ---------------------------------------------------------------------------


def test_crc_is_ccitt_false_with_its_check_value():
    assert crc16(b"123456789") == CRC_CHECK == 0x29B1
    assert crc16(b"") == 0xFFFF


def test_encode_known_frames():
    # The examples of docs/line-protocol.md.
    assert encode(42, "WAGER", ["3", "main", "2500"]) == b"$0042 WAGER 3 main 2500*8F71\r\n"
    assert encode(1, "CARD", ["AS"]) == b"$0001 CARD AS*E633\r\n"
    assert encode(0, "ACK") == b"$0000 ACK*B1EE\r\n"
    assert encode(3, "NAK", ["card", "UNKNOWN"]) == b"$0003 NAK card UNKNOWN*024D\r\n"


@pytest.mark.parametrize("seq, verb, a, field", [
    (-1, "PING", [], "seq"),
    (SEQ_MODULO, "PING", [], "seq"),
    (1, "ping", [], "verb"),
    (1, "9PING", [], "verb"),
    (1, "A" * 17, [], "verb"),
    (1, "WAGER", ["two words"], "args[0]"),
    (1, "WAGER", ["1", ""], "args[1]"),
    (1, "WAGER", ["a*b"], "args[0]"),
    (1, "WAGER", ["$"], "args[0]"),
    (1, "WAGER", ["caf\u00e9"], "args[0]"),
    (1, "WAGER", ["x\r"], "args[0]"),
    (1, "AMOUNTS", ["M=1" * 40], "frame"),
])
def test_encode_refuses_what_the_wire_cannot_carry(seq, verb, a, field):
    with pytest.raises(FrameEncodeError) as e:
        encode(seq, verb, a)
    assert e.value.field == field


def test_encode_bound_is_inclusive():
    verb_len = len(encode(1, "X", ["a"]))
    exact = encode(1, "X", ["a" * (MAX_FRAME - verb_len + 1)])
    assert len(exact) == MAX_FRAME
    with pytest.raises(FrameEncodeError):
        encode(1, "X", ["a" * (MAX_FRAME - verb_len + 2)])
    assert frames_of(Decoder().feed(exact)) == [(1, "X", ("a" * (MAX_FRAME - verb_len + 1),))]


@given(seqs, verbs, args)
def test_round_trip(seq, verb, a):
    try:
        data = encode(seq, verb, a)
    except FrameEncodeError:
        return
    assert len(data) <= MAX_FRAME
    out = Decoder().feed(data)
    assert out == [Frame(seq, verb, tuple(a), data)]


# --- decoder errors -----------------------------------------------------------------------------

GOOD = encode(7, "CARD", ["AS"])


@pytest.mark.parametrize("bad, kind", [
    (b"hello", GARBAGE),
    (GOOD[:-3] + b"\r\n", MALFORMED),  # a checksum digit missing
    (GOOD.replace(b"AS", b"AH"), CRC_ERROR),
    (GOOD.replace(b"*", b"#"), MALFORMED),
    (GOOD[:-2] + b"\n", MALFORMED),  # LF without CR
    (GOOD[:-1] + bytes([GOOD[-1] ^ 1]) + b"x", MALFORMED),  # the wire's corrupt_next flips the LF's last bit
    (GOOD[:5] + b"\x00" + GOOD[5:], MALFORMED),
    (GOOD[:-8], MALFORMED),  # cut short by the next '$'
    (b"$" + b"7" * 300 + b"\r\n", OVERSIZE),
    (b"$12 PING*" + f"{crc16(b'12 PING'):04X}".encode() + b"\r\n", MALFORMED),  # three-digit sequence number
    (b"$0012 ping*" + f"{crc16(b'0012 ping'):04X}".encode() + b"\r\n", MALFORMED),
    (b"$0012 WAGER 1  main*" + f"{crc16(b'0012 WAGER 1  main'):04X}".encode() + b"\r\n", MALFORMED),
])
def test_bad_input_is_reported_and_the_next_frame_still_decodes(bad, kind):
    d = Decoder()
    out = d.feed(bad + GOOD)
    assert kind in kinds_of(out)
    assert frames_of(out) == [(7, "CARD", ("AS",))]


def test_lowercase_checksum_accepted():
    assert frames_of(Decoder().feed(GOOD[:-6] + GOOD[-6:-2].lower() + b"\r\n")) == [(7, "CARD", ("AS",))]


def test_error_carries_the_bytes_at_fault():
    bad = GOOD.replace(b"AS", b"AH")
    (err, frame) = Decoder().feed(bad + GOOD)
    assert isinstance(err, DecodeError) and err.kind == CRC_ERROR and err.data == bad
    assert isinstance(frame, Frame) and frame.raw == GOOD


def test_oversize_is_bounded_and_reported_once():
    d = Decoder()
    out = d.feed(b"$" + b"A" * 10_000)
    assert kinds_of(out) == [OVERSIZE]
    assert d.buffered <= MAX_FRAME
    out = d.feed(b"B" * 10_000 + b"\r\n" + GOOD)
    assert kinds_of(out) == []  # the rest of the bad frame is skipped, not reported again
    assert frames_of(out) == [(7, "CARD", ("AS",))]


# --- fuzz ---------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise_and_stay_bounded(data):
    d = Decoder()
    for i in range(0, len(data), 37):
        out = d.feed(data[i:i + 37])
        assert all(isinstance(x, (Frame, DecodeError)) for x in out)
        assert d.buffered <= MAX_FRAME  # garbage is reported at the end of each feed, not kept
    assert all(len(x.data) <= MAX_FRAME for x in d.feed(b"\r\n") if isinstance(x, DecodeError))


@settings(max_examples=100)
@given(st.lists(st.tuples(st.binary(max_size=60), valid_frames()), max_size=8), st.binary(max_size=60))
def test_valid_frames_embedded_in_garbage_are_all_recovered(chunks, tail):
    stream = b"".join(g + f for g, f in chunks) + tail
    want = frames_of([Decoder().feed(f)[0] for _, f in chunks])
    got = frames_of(Decoder().feed(stream))
    # Garbage could by chance hold a valid frame of its own; ours must all be there, in order.
    it = iter(got)
    assert all(any(w == g for g in it) for w in want)
    if not any(b"$" in g for g, _ in chunks) and b"$" not in tail:
        assert got == want


@settings(max_examples=60)
@given(st.lists(st.tuples(st.binary(max_size=20), valid_frames()), min_size=1, max_size=3))
def test_any_split_gives_the_same_frames(chunks):
    stream = b"".join(g + f for g, f in chunks)
    whole = Decoder().feed(stream)
    want_frames, want_kinds = frames_of(whole), [k for k in kinds_of(whole) if k != GARBAGE]
    d = Decoder()
    one_by_one = [x for i in range(len(stream)) for x in d.feed(stream[i:i + 1])]
    assert frames_of(one_by_one) == want_frames
    assert [k for k in kinds_of(one_by_one) if k != GARBAGE] == want_kinds
    for cut in range(len(stream) + 1):
        d = Decoder()
        parts = d.feed(stream[:cut]) + d.feed(stream[cut:])
        assert frames_of(parts) == want_frames

"""The hash chain: canonical JSON, the text of an entry, its hash, the digest of a segment.

An entry is stored as one line of canonical JSON, the array

    [prev_hash, seq, key, time, kind, body, result]

- canonical JSON: keys sorted, no spaces, ASCII only (other characters as \\u escapes), no floats;
- `prev_hash`: the hash of entry seq-1 as 64 lower-case hex digits (64 zeros for entry 1);
- `time`: UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``;
- `body`: the operation (a JSON object); `result`: what the reducer returned for it (any JSON value).

The hash of an entry is SHA-256 over the ASCII bytes of that text, so it covers the previous hash, the
sequence number, the idempotency key, the time, the kind, the body and the result. Changing any of
them, deleting an entry or reordering entries breaks the chain at the first entry touched.

A checkpoint entry records the digest of its *segment*: the entries from the previous checkpoint (or
entry 1) to the entry just before it, their hashes, keys and texts (see SegmentDigest). Start-up checks
old segments against these digests in bulk instead of hashing entry by entry.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

from controller.errors import InputError

GENESIS_PREV = "0" * 64
HEX = frozenset("0123456789abcdef")

# Kinds and keys the ledger writes itself; callers may not use them.
GENESIS = "genesis"
SELF_CHECK = "self-check"
CHECKPOINT = "checkpoint"
INTERNAL_KINDS = frozenset({GENESIS, SELF_CHECK, CHECKPOINT})
INTERNAL_KEY_PREFIX = "ledger:"

MAX_KEY_LEN = 200
MAX_KIND_LEN = 64

_quote = json.encoder.encode_basestring_ascii
_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
_encode: Callable[[Any], str] = _encoder.encode


def _not_json(o: object) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


# JSONEncoder.encode builds its C encoder anew on every call; build it once. Same output: keys sorted,
# no spaces, ASCII, NaN/Infinity refused. No check for circular references (they cannot be journaled
# anyway: the C encoder then fails with RecursionError).
_c_make = getattr(json.encoder, "c_make_encoder", None)
if _c_make is not None:
    _c_encoder = _c_make(None, _not_json, _quote, None, ":", ",", True, False, False)

    def _fast_encode(value: Any) -> str:  # the fast form of the same function
        if isinstance(value, str):
            return _quote(value)
        return "".join(_c_encoder(value, 0))

    _encode = _fast_encode


def _no_float(text: str) -> Any:
    raise ValueError(f"floating-point number {text} (use integers or decimal strings)")


_strict_decoder = json.JSONDecoder(parse_float=_no_float)
# JSONDecoder.__init__ sets scan_once; typeshed does not declare it.
_scan = _strict_decoder.scan_once  # type: ignore[attr-defined]


def _decode(text: str) -> Any:
    """The value of a canonical text, floats refused. Canonical text is one JSON value with no whitespace
    around it, so the decoder's scanner is called directly: JSONDecoder.decode would only add two
    whitespace matches around the same call."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError(f"not a JSON value: {text[:40]!r}") from None
    if end != len(text):
        raise ValueError(f"extra data after a JSON value at {end}")
    return value


def canonical(value: Any) -> str:
    """Canonical JSON text of `value`. Raises TypeError/ValueError for what JSON cannot hold exactly."""
    return canonical_decoded(value)[0]


def canonical_decoded(value: Any) -> tuple[str, Any]:
    """The canonical text of `value` and the value decoded from it (tuples become lists, and so on).
    Raises TypeError/ValueError for what JSON cannot hold exactly (floats among them)."""
    text = _encode(value)
    return text, _decode(text)


def canonical_checked(value: Any) -> str:
    """Like canonical(), without decoding when the text cannot hold a float. The encoder writes a float
    as float.__repr__ does, which always has a '.' or an exponent with its sign ('1.5', '1e+16', '1e-07'):
    a text with none of '.', 'e+', 'e-' has no float; one with any of them is decoded strictly to be sure
    (three substring searches cost less than one regular expression)."""
    text = _encode(value)
    if "." in text or "e+" in text or "e-" in text:
        _decode(text)
    return text


def encode(value: Any) -> str:
    """Canonical text of a value known to be exact JSON (no float check: for comparing)."""
    return _encode(value)


def canonical_body(body: Any, field: str = "body") -> tuple[str, dict[str, Any]]:
    """The canonical text of an operation's body and the body as decoded from that text (what the
    reducer sees, live and on replay). Raises InputError naming `field`."""
    if not isinstance(body, dict):
        raise InputError(field, f"must be a JSON object (dict), not {type(body).__name__}")
    try:
        text = _encode(body)
        decoded = _decode(text)
    except (TypeError, ValueError) as e:
        raise InputError(field, f"not exact JSON: {e}") from None
    return text, decoded


def check_key(key: object, field: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise InputError(field, f"must be a non-empty string, not {key!r}")
    if len(key) > MAX_KEY_LEN:
        raise InputError(field, f"longer than {MAX_KEY_LEN} characters")
    # A printable character that is whitespace is the ASCII space and nothing else (every other Unicode
    # space is a separator, not printable; tests check the whole code space): so no split() is needed.
    if not key.isprintable() or " " in key:
        raise InputError(field, f"{key!r} contains spaces or control characters")
    if key.startswith(INTERNAL_KEY_PREFIX):
        raise InputError(field, f"keys beginning with {INTERNAL_KEY_PREFIX!r} are reserved for the ledger")
    return key


_good_kinds: set[str] = set()


def check_kind(kind: object, field: str = "kind") -> str:
    if kind in _good_kinds:
        return kind
    if not isinstance(kind, str) or not kind or len(kind) > MAX_KIND_LEN:
        raise InputError(field, f"must be a non-empty string of at most {MAX_KIND_LEN} characters, not {kind!r}")
    if not (kind.isascii() and kind.isprintable()) or kind.split() != [kind]:
        raise InputError(field, f"{kind!r} must be printable ASCII without spaces")
    if kind in INTERNAL_KINDS:
        raise InputError(field, f"{kind!r} is reserved for the ledger")
    if len(_good_kinds) < 1000:
        _good_kinds.add(kind)
    return kind


def format_time(t: _dt.datetime) -> str:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError("the ledger's clock must return an aware datetime")
    if t.tzinfo is not _dt.UTC:
        t = t.astimezone(_dt.UTC)
    return t.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def entry_text(prev_hash: str, seq: int, key: str, time: str, kind: str, body_text: str, result_text: str) -> str:
    """The canonical text of an entry; `body_text` and `result_text` must already be canonical."""
    return f'["{prev_hash}",{seq},{_quote(key)},"{time}",{_quote(kind)},{body_text},{result_text}]'


def entry_hash(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class SegmentDigest:
    """The digest of a run of consecutive entries, as a checkpoint records it:

        SHA-256( H || K || E )   (each part 64 hex digits)
        H = SHA-256 of the entries' hashes, concatenated (64 hex digits each)
        K = SHA-256 of the entries' keys, joined by LF
        E = SHA-256 of the entries' texts, joined by LF

    Three parts rather than one line per entry because SQLite can build each part in one aggregate
    without concatenating strings row by row (see journal.segment_parts): that is what makes checking
    a million entries at start-up fast. Keys have no LF (no whitespace) and texts are single-line JSON,
    so the joins are unambiguous; hashes have a fixed width."""

    __slots__ = ("_h", "_k", "_e", "n")

    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self._k = hashlib.sha256()
        self._e = hashlib.sha256()
        self.n = 0

    def add(self, hash_hex: str, key: str, text: str) -> None:
        self._h.update(hash_hex.encode("ascii"))
        if self.n:
            self._k.update(b"\n" + key.encode())
            self._e.update(b"\n" + text.encode("ascii"))
        else:
            self._k.update(key.encode())
            self._e.update(text.encode("ascii"))
        self.n += 1

    def add_many(self, hashes: list[str], keys: list[str], texts: list[bytes]) -> None:
        """The same as add() for each entry in turn (the same bytes reach the three digests), with the
        entries' texts already encoded as ASCII."""
        if not hashes:
            return
        self._h.update("".join(hashes).encode("ascii"))
        k = "\n".join(keys).encode()
        e = b"\n".join(texts)
        if self.n:
            self._k.update(b"\n" + k)
            self._e.update(b"\n" + e)
        else:
            self._k.update(k)
            self._e.update(e)
        self.n += len(hashes)

    def hexdigest(self) -> str:
        return combine_parts(self._h.hexdigest(), self._k.hexdigest(), self._e.hexdigest())


def combine_parts(h: str, k: str, e: str) -> str:
    return hashlib.sha256((h + k + e).encode("ascii")).hexdigest()


def digest_of_parts(hashes: bytes, keys: bytes, texts: bytes) -> str:
    """The segment digest from the three concatenations (as journal.segment_parts returns them)."""
    return combine_parts(hashlib.sha256(hashes).hexdigest(), hashlib.sha256(keys).hexdigest(),
                         hashlib.sha256(texts).hexdigest())


class Entry:
    """A parsed entry. Raises ValueError with a plain description when the text is not a well-formed entry."""

    __slots__ = ("prev_hash", "seq", "key", "time", "kind", "body", "result")

    def __init__(self, text: str) -> None:
        try:
            v = json.loads(text)
        except ValueError as e:
            raise ValueError(f"not valid JSON ({e})") from None
        if not isinstance(v, list) or len(v) != 7:
            raise ValueError("not an array of 7 fields [prev_hash, seq, key, time, kind, body, result]")
        prev, seq, key, time, kind, body, result = v
        if not (isinstance(prev, str) and len(prev) == 64 and set(prev) <= HEX):
            raise ValueError("prev_hash is not 64 hex digits")
        if type(seq) is not int:
            raise ValueError("seq is not an integer")
        if not isinstance(key, str) or not isinstance(time, str) or not isinstance(kind, str):
            raise ValueError("key, time and kind must be strings")
        if not isinstance(body, dict):
            raise ValueError("body is not a JSON object")
        self.prev_hash, self.seq, self.key, self.time, self.kind, self.body, self.result = (
            prev, seq, key, time, kind, body, result)


__all__ = ["CHECKPOINT", "GENESIS", "GENESIS_PREV", "HEX", "INTERNAL_KEY_PREFIX", "INTERNAL_KINDS", "MAX_KEY_LEN",
           "MAX_KIND_LEN", "SELF_CHECK", "Entry", "SegmentDigest", "canonical", "canonical_body", "canonical_checked",
           "canonical_decoded", "check_key", "check_kind", "combine_parts", "digest_of_parts", "encode", "entry_hash",
           "entry_text", "format_time", "utc_now"]

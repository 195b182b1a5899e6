"""The journal's anchor: its head (sequence number and hash) as it was last seen, kept outside the journal so that
a journal rolled back or rewritten is found at the next start.

The hash chain proves that a journal is whole and in order; it cannot prove that it is the latest one. An
older copy of the state directory put back, the WAL deleted after a payout (its last commits lost), or every
entry from some point on written again with a changed field and a fresh chain, all give a sound chain. The
anchor says what the head was: the journal must hold the anchored entry, with the anchored hash. Kept in a file
outside the state directory, written after each change that matters (and every minute while the journal grows),
and sent off the box (docs/security.md), it catches a restore of the state directory alone; with a key it
cannot be forged by someone who cannot read the key, and an anchor off the box catches the rest.

    anchor = Anchor.of(ledger.head, key)        # key: bytes or None
    write_anchor(path, anchor)                  # atomic: a reader sees the old or the new one
    problem = check_anchor(db_path, read_anchor(path, key))   # None: the journal holds it
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from controller.ledger import journal
from controller.ledger.chain import Entry, format_time, utc_now
from controller.ledger.errors import LedgerError
from controller.ledger.store import open_reading

if TYPE_CHECKING:
    from controller.ledger.ledger import Head

KEY_BYTES = 32  # at least, for HMAC-SHA256
MAX_FILE = 4096  # an anchor file, and a key file, are small: a larger one is not read


class AnchorError(LedgerError):
    """An anchor or key file that cannot be used (malformed, forged, unreadable); the message says which."""


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    at: str  # when it was taken (ISO 8601, UTC)
    mac: str | None = None  # HMAC-SHA256 of seq, hash and time under the journal key, when there is one

    @classmethod
    def of(cls, head: Head, key: bytes | None, at: str | None = None) -> Anchor:
        """The anchor of `head`, signed with `key` when given."""
        at = at or format_time(utc_now())
        return cls(head.seq, head.hash, at, None if key is None else _mac(key, head.seq, head.hash, at))

    def text(self) -> str:
        """`seq:hash`, as `progressivectl audit verify --expect-head` takes it."""
        return f"{self.seq}:{self.hash}"

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "at": self.at, **({"mac": self.mac} if self.mac else {})}

    def signed_with(self, key: bytes) -> bool:
        """Whether its MAC is the one `key` makes: it was made by a holder of the journal key."""
        return _is_hex64(self.mac) and hmac.compare_digest(self.mac, _mac(key, self.seq, self.hash, self.at))


def _is_hex64(text: object) -> TypeGuard[str]:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _mac(key: bytes, seq: int, hash_: str, at: str) -> str:
    return hmac.new(key, f"progressive-anchor/1:{seq}:{hash_}:{at}".encode(), "sha256").hexdigest()


def write_anchor(path: Path, anchor: Anchor) -> None:
    """Write `anchor` to `path` atomically and durably (a new file renamed over the old, both fsynced), readable
    by its owner only; creates the directory (0700) if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, (json.dumps(anchor.to_json(), sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # no half-written anchor left beside the file
        raise
    journal.fsync_path(path.parent)


def read_anchor(path: Path, key: bytes | None) -> Anchor | None:
    """The anchor in `path`, None when there is none; AnchorError when it is not one, or when a key is given and
    its MAC is missing or wrong (forged, or made with another key)."""
    data = _read_small(Path(path), "anchor")
    if data is None:
        return None
    try:
        d = json.loads(data)
        seq, hash_, at, mac = d["seq"], d["hash"], d["at"], d.get("mac")
    except (ValueError, KeyError, TypeError):
        raise AnchorError(f"{path}: not an anchor of the journal") from None
    if type(seq) is not int or not 0 <= seq < 2**63 or not _is_hex64(hash_) or not isinstance(at, str) \
            or not (mac is None or _is_hex64(mac)):
        raise AnchorError(f"{path}: not an anchor of the journal (seq, hash, at or mac malformed)")
    anchor = Anchor(seq, hash_, at, mac)
    if key is not None and not anchor.signed_with(key):
        raise AnchorError(f"{path}: the anchor is not signed with the journal key (forged, or another key's)")
    return anchor


def check_anchor(db: Path | str, anchor: Anchor) -> str | None:
    """None when the journal at `db` (its file, or its PostgreSQL URL) holds the anchored entry with the anchored
    hash; else what is wrong."""
    store = open_reading(db)
    try:
        row = store.entry_at(anchor.seq)
        last = store.seq_range()
    finally:
        store.close()
    of, at = (f" of {anchor.at}", f" at {anchor.at}") if anchor.at else ("", "")
    if row is None:
        head = last[1] if last else 0
        return (f"the journal ends at entry {head}, but its anchor{of} is at entry {anchor.seq}: it was "
                "rolled back (an older copy restored, or the end of it lost)")
    if row[3] != anchor.hash:
        kind = Entry(row[2]).kind
        return (f"entry {anchor.seq} of the journal ({kind}) is not the one anchored{at} (hash "
                f"{row[3][:16]}..., anchored {anchor.hash[:16]}...): the journal was rewritten (or rolled back and "
                "written on)")
    return None


def load_key(path: Path) -> bytes:
    """The journal key in `path`: a regular file readable by its owner only, of at least KEY_BYTES bytes."""
    path = Path(path)
    data = _read_small(path, "key")
    if data is None:
        raise AnchorError(f"{path}: no such key file (make one: head -c 32 /dev/urandom > {path}; chmod 0400)")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AnchorError(f"{path}: the journal key can be read by other users (mode {stat.filemode(mode)}): "
                          f"chmod 0400 {path}, owned by the user the daemon runs as")
    # A key written as a line of text is the same key without its newline; a random key whose last byte happens to
    # be a newline (1 in 256 of `head -c 32 /dev/urandom`) is kept whole: the same file gives the same key always.
    key = data[:-1] if data.endswith(b"\n") and len(data) > KEY_BYTES else data
    if len(key) < KEY_BYTES:
        raise AnchorError(f"{path}: a journal key has at least {KEY_BYTES} bytes, this one {len(key)}")
    return key


def _read_small(path: Path, what: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise AnchorError(f"{path}: cannot read the {what} file: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AnchorError(f"{path}: the {what} file is not a regular file")
        if st.st_size > MAX_FILE:
            raise AnchorError(f"{path}: the {what} file is larger than {MAX_FILE} bytes")
        return os.read(fd, MAX_FILE + 1)
    finally:
        os.close(fd)


__all__ = ["KEY_BYTES", "Anchor", "AnchorError", "check_anchor", "load_key", "read_anchor", "write_anchor"]

"""A digest of the installed software, for the power-up self-check entry."""

from __future__ import annotations

import hashlib
from pathlib import Path


def software_digest(root: str | Path | None = None) -> str:
    """SHA-256 over the files of the installed `controller` package (or of `root`): for each file in
    order of its relative path, the line ``<relative path> <sha256 of its bytes>``. Byte-code caches are
    left out, so the digest names the source that is installed, whatever has been compiled."""
    base = Path(root) if root is not None else Path(__file__).resolve().parent.parent
    outer = hashlib.sha256()
    files = sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix not in (".pyc", ".pyo"))
    for p in files:
        rel = p.relative_to(base).as_posix()
        outer.update(f"{rel} {hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return outer.hexdigest()


__all__ = ["software_digest"]

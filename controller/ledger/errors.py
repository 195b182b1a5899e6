"""Errors of the ledger. Refusals of an operation by the reducer are the reducer's own
``controller.errors.InputError`` / ``RulesError`` and pass through to the caller unchanged."""

from __future__ import annotations

from controller.errors import InputError


class LedgerError(Exception):
    """Base class of the ledger's own errors."""


class LedgerDamaged(LedgerError):
    """The journal on disk is damaged or has been tampered with. The ledger refuses to start and never
    writes over it. `seq` is the first bad entry when one can be named, else None (a file-level fault)."""

    def __init__(self, path: object, seq: int | None, problem: str) -> None:
        where = f"entry {seq}: " if seq is not None else ""
        super().__init__(f"ledger {path} is damaged: {where}{problem}")
        self.path = str(path)
        self.seq = seq
        self.problem = problem


class LedgerBusy(LedgerError):
    """Another process (or another Ledger in this one) already has the state directory open."""


class LedgerClosed(LedgerError):
    """The ledger was closed; nothing more is accepted."""


class FatalStorageError(LedgerError):
    """A write or COMMIT failed (disk full, I/O error). The operation was NOT acknowledged; it may or may
    not be in the journal after a restart, whole or not at all. Retry it with the same key after the restart."""




class KeyConflict(InputError):
    """The idempotency key was already used for a different operation."""

    def __init__(self, key: str, seq: int) -> None:
        super().__init__("key", f"{key!r} was already used for a different operation (entry {seq})")
        self.key = key
        self.seq = seq

    def at(self, prefix: str) -> InputError:  # keep the type's own constructor out of InputError.at
        return InputError(f"{prefix}.{self.field}" if prefix else self.field, self.problem)


__all__ = ["FatalStorageError", "KeyConflict", "LedgerBusy", "LedgerClosed", "LedgerDamaged", "LedgerError"]

"""The protocol of the state a ledger derives from its journal."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

S = TypeVar("S")


class Reducer(Protocol[S]):
    """Derives state from journaled operations. All methods are pure and deterministic.

    - `initial()` is the state of an empty journal.
    - `apply(state, kind, body)` returns ``(new_state, result)`` without changing `state` (readers may hold
      it). It raises ``controller.errors.InputError`` or ``RulesError`` to refuse the operation: nothing is
      journaled and the caller gets that error. `body` is the operation as it was journaled (JSON decoded),
      so replay sees exactly what the live call saw. `result` must be JSON-safe: it is journaled with the
      entry, returned in the receipt (also to a retry) and compared on replay.
    - `check(state)` raises (any exception) when the invariant does not hold.
    - `snapshot(state)` is a JSON-safe dict (integers and strings: no floats); `restore(snapshot(s))`
      must give a state equal to `s`.
    """

    def initial(self) -> S: ...

    def apply(self, state: S, kind: str, body: dict[str, Any]) -> tuple[S, Any]: ...

    def check(self, state: S) -> None: ...

    def snapshot(self, state: S) -> dict[str, Any]: ...

    def restore(self, data: dict[str, Any]) -> S: ...


__all__ = ["Reducer"]

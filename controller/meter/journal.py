"""The meters as the ledger derives them: every progressive of a state directory, by meter id.

The journal holds two kinds of entry for meters: ``define-meter`` (a new progressive with its
parameters) and the meter operations of `controller.meter` (``book-contributions``,
``pay-percent-award``, ...), each with the id of the meter it moves in ``meter``. Replaying the
journal through `MetersReducer` rebuilds every meter exactly; the ledger checks the invariant of
every meter after each entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Protocol

from controller.errors import InputError, RulesError
from controller.meter import (
    MeterParams,
    MeterState,
    Op,
    apply,
    check_invariant,
    initial_state,
    op_from_dict,
    params_from_dict,
    params_to_dict,
    state_from_dict,
    state_to_dict,
)
from controller.meter.parse import parse_moment

DEFINE_METER = "define-meter"
# At a link authority: a table's operation the rules refused, journaled under the operation's key so that
# the table's sequence moves on exactly once (controller.link); the meters are untouched.
LINK_REFUSED = "link-refused"
# At a link authority: the head of a table's own journal, as the table sent it (kept off the table's box).
TABLE_ANCHOR = "table-anchor"
# At a link authority: a supervisor cleared the anchor of a table kept aside as planted (controller.linkproto.anchors).
TABLE_ANCHOR_CLEARED = "table-anchor-cleared"

Meters = Mapping[str, MeterState]
FULL_CHECK_EVERY = 64  # operations between the ledger's full checks of a meter, and as many more as it has rounds open


class MetersJournal(Protocol):
    """What `configure_meter` needs of a ledger of meters (a controller.ledger.Ledger[Meters])."""

    @property
    def state(self) -> Meters: ...

    def submit(self, kind: str, body: dict[str, Any], key: str) -> object: ...


def define_meter_body(params: MeterParams, set_by: str, at: datetime) -> dict[str, Any]:
    """The journal body that creates a meter."""
    return {"params": params_to_dict(params), "set_by": set_by, "at": at.isoformat()}


def configure_meter(ledger: MetersJournal, params: MeterParams, owner: str, source: str,
                    now: datetime) -> str | None:
    """Bring meter `params.meter_id` of `ledger` to its configured parameters:
    define it if the journal does not have it, or record a parameter change (which the meter refuses while
    one of its rounds is open or an award is locked: InputError). `owner` (a table or an authority) keys the
    entries. Returns "defined", "changed" or None (already so)."""
    from controller.meter import ops as meter_ops

    current = ledger.state.get(params.meter_id)
    if current is None:
        ledger.submit(DEFINE_METER, define_meter_body(params, source, now), f"define:{owner}:{params.meter_id}")
        return "defined"
    if current.params == params:
        return None
    op = meter_ops.ChangeParams(params, source, now)
    ledger.submit(op.kind, op_body(params.meter_id, op), f"params:{owner}:{params.meter_id}:{now.isoformat()}")
    return "changed"


def op_body(meter_id: str, op: Op) -> dict[str, Any]:
    """The journal body of a meter operation on `meter_id`."""
    body = op.to_dict()
    body.pop("kind", None)
    return {"meter": meter_id, **body}


def op_from_body(kind: str, body: Mapping[str, Any]) -> Op:
    """The meter operation a journal entry of `kind` holds: its body less ``meter`` (and ``approval``, a linked
    payment's signed approval: kept in the journal, not applied)."""
    fields = {k: v for k, v in body.items() if k not in ("meter", "approval")}
    return op_from_dict({"kind": kind, **fields})


Check = Callable[[dict[str, Any]], dict[str, Any]]


class MetersReducer:
    """`controller.ledger.Reducer` over every meter of a state directory. `entries` checks the journal's entries
    of other kinds that sit beside the meters without moving them (a table's: controller.round.journal), each
    returning its effect."""

    def __init__(self, entries: Mapping[str, Check] | None = None) -> None:
        self._entries: Mapping[str, Check] = MappingProxyType(dict(entries or {}))
        # meter id -> the last of its states known to hold the invariant. States are immutable, and the
        # meter engine checks every state it returns (what the operation touched, with the running totals), so
        # the ledger's check after each entry need not check that same object again; the full check, which
        # sums every open round afresh, runs on a state it did not make (a snapshot restored) and, on a meter,
        # FULL_CHECK_EVERY + (its open rounds at the last full check) operations after the last: its cost spread
        # over them stays a constant per operation.
        self._checked: dict[str, MeterState] = {}
        self._applied: dict[str, MeterState] = {}  # meter id -> the state its last operation made
        self._until_full: dict[str, int] = {}  # meter id -> operations left before its next full check

    def initial(self) -> Meters:
        return MappingProxyType({})

    def apply(self, state: Meters, kind: str, body: dict[str, Any]) -> tuple[Meters, dict[str, Any]]:
        if not isinstance(body, dict):
            raise InputError("body", "must be an object")
        if kind == DEFINE_METER:
            params = params_from_dict(body.get("params"), "params")
            if params.meter_id in state:
                raise RulesError("params.meter_id", f"meter {params.meter_id!r} is already defined")
            at = parse_moment(body.get("at"), "at")
            new = initial_state(params, str(body.get("set_by", "")), at)
            return _with(state, params.meter_id, new), {"meter": params.meter_id}
        if kind == LINK_REFUSED:
            for k in ("table", "field", "message"):
                if not isinstance(body.get(k), str):
                    raise InputError(k, "must be text")
            return state, {"refused": body["message"]}
        if (check := self._entries.get(kind)) is not None:
            return state, check(body)
        if kind == TABLE_ANCHOR:
            if not (isinstance(body.get("table"), str) and isinstance(body.get("seq"), int)
                    and isinstance(body.get("hash"), str) and isinstance(body.get("at"), str)):
                raise InputError("body", "a table's anchor has table, seq, hash and at")
            return state, {}
        if kind == TABLE_ANCHOR_CLEARED:
            if not (isinstance(body.get("table"), str) and isinstance(body.get("seq"), int)
                    and isinstance(body.get("cleared_by"), str)):
                raise InputError("body", "a clearing of a table's anchor has table, seq and cleared_by")
            return state, {}
        meter_id = body.get("meter")
        if not isinstance(meter_id, str) or meter_id not in state:
            raise RulesError("meter", f"unknown meter {meter_id!r}; defined: {', '.join(sorted(state)) or 'none'}")
        op = op_from_body(kind, body)
        new, effect = apply(state[meter_id], op)  # checks the invariant of `new` (what `op` touched)
        self._applied[meter_id] = new
        self._until_full[meter_id] = self._until_full.get(meter_id, 0) - 1
        return _with(state, meter_id, new), {"meter": meter_id, **effect.to_dict()}

    def check(self, state: Meters) -> None:
        checked = self._checked
        for meter_id in sorted(state):
            s = state[meter_id]
            if checked.get(meter_id) is s:
                continue
            if self._applied.get(meter_id) is s and self._until_full[meter_id] > 0:
                continue  # `apply` checked what its operation touched
            try:
                check_invariant(s)
            except Exception as e:  # name the meter: a state directory holds several
                raise type(e)(f"meter {meter_id}: {e}") from e
            checked[meter_id] = s
            self._until_full[meter_id] = FULL_CHECK_EVERY + len(s.open_rounds)

    def snapshot(self, state: Meters) -> dict[str, Any]:
        return {meter_id: state_to_dict(state[meter_id]) for meter_id in sorted(state)}

    def restore(self, data: dict[str, Any]) -> Meters:
        return MappingProxyType({k: state_from_dict(v, f"snapshot.{k}") for k, v in sorted(data.items())})


def _with(state: Meters, meter_id: str, new: MeterState) -> Meters:
    d = dict(state)
    d[meter_id] = new
    return MappingProxyType(d)


__all__ = ["DEFINE_METER", "FULL_CHECK_EVERY", "LINK_REFUSED", "TABLE_ANCHOR", "TABLE_ANCHOR_CLEARED", "Check", "Meters", "MetersJournal",
           "MetersReducer", "configure_meter", "define_meter_body", "op_body", "op_from_body"]

"""The whole meter state as JSON and back, exactly: a snapshot a ledger can store beside its journal.

Meter amounts are decimal strings of dollars with up to six places (meter units), amounts paid are
decimal strings of dollars, counts are integers, times ISO 8601 with an offset. A snapshot that does
not balance (check_invariant) is refused as bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.errors import InputError, InvariantViolation
from controller.meter import parse as _check
from controller.meter.params import params_from_dict, params_to_dict
from controller.meter.state import Booking, Hit, LockedAward, MeterState, SharedAward, check_invariant, with_maps
from controller.money import format_cents, format_units, parse_cents, parse_units

_UNITS = (
    "current", "seed", "contributions", "reserve", "reserve_in", "reserve_to_meter", "overflow", "overflow_in",
    "overflow_to_meter", "adjustments", "meter_awards",
)
_CENTS = (
    "meter_paid_cents", "owed_cents", "wagers_cents", "voided_wagers_cents", "paid_by_table_cents",
    "paid_by_attendant_cents", "cumulative_payouts_cents",
)
_COUNTS = ("wagers_count", "voided_rounds", "hit_count")
_OTHER = ("params", "hits", "history", "open_rounds", "recent_rounds", "params_set_by", "params_set_at")
# Written only when not empty: a snapshot without them (every snapshot before locked awards) loads with none,
# and the state digest a checkpoint of an older journal records is still the one replay gives.
_LOCKS = ("locked", "settled_claims", "released_to_overflow", "locks_taken")


def _key(name: str) -> str:
    return name.removesuffix("_cents")


def state_to_dict(s: MeterState) -> dict[str, Any]:
    d: dict[str, Any] = {"params": params_to_dict(s.params)}
    d.update({k: format_units(getattr(s, k)) for k in _UNITS})
    d.update({_key(k): format_cents(getattr(s, k)) for k in _CENTS})
    d.update({k: getattr(s, k) for k in _COUNTS})
    d["hits"] = {label: {"count": n, "amount": format_cents(c)} for label, (n, c) in sorted(s.hits.items())}
    d["history"] = [hit_to_dict(h) for h in s.history]
    d["open_rounds"] = {rid: _booking_to_dict(b) for rid, b in s.open_rounds.items()}
    d["recent_rounds"] = list(s.recent_rounds)
    d["params_set_by"] = s.params_set_by
    d["params_set_at"] = None if s.params_set_at is None else _check.format_moment(s.params_set_at)
    if s.locked:
        d["locked"] = {claim: _locked_to_dict(a) for claim, a in sorted(s.locked.items())}
    if s.settled_claims:
        d["settled_claims"] = list(s.settled_claims)
    if s.released_to_overflow:
        d["released_to_overflow"] = format_units(s.released_to_overflow)
    if s.locks_taken:
        d["locks_taken"] = s.locks_taken
    return d


def state_from_dict(d: object, field_prefix: str = "") -> MeterState:
    """The inverse of `state_to_dict`; refuses a snapshot whose books do not balance."""
    j = _check.join
    at = field_prefix
    m = _check.obj(d, at, (*_UNITS, *(_key(k) for k in _CENTS), *_COUNTS, *_OTHER), _LOCKS)
    kw: dict[str, Any] = {"params": params_from_dict(m["params"], j(at, "params"))}
    kw.update({k: _check.parse_signed_units(m[k], j(at, k)) for k in _UNITS})
    kw.update({k: parse_cents(m[_key(k)], j(at, _key(k))) for k in _CENTS})
    kw.update({k: _check.integer(m[k], j(at, k), minimum=0) for k in _COUNTS})
    hits_at = j(at, "hits")
    hits = m["hits"]
    if not isinstance(hits, Mapping):
        raise InputError(hits_at, "must be an object")
    kw["hits"] = {}
    for label, v in hits.items():
        where = j(hits_at, str(label))
        hv = _check.obj(v, where, ("count", "amount"))
        kw["hits"][_check.text(label, where)] = (
            _check.integer(hv["count"], j(where, "count"), minimum=1),
            parse_cents(hv["amount"], j(where, "amount")),
        )
    kw["history"] = tuple(
        _hit_from_dict(h, j(at, f"history[{i}]")) for i, h in enumerate(_check.array(m["history"], j(at, "history")))
    )
    rounds_at = j(at, "open_rounds")
    rounds = m["open_rounds"]
    if not isinstance(rounds, Mapping):
        raise InputError(rounds_at, "must be an object")
    kw["open_rounds"] = {
        _check.identifier(rid, rounds_at): _booking_from_dict(b, j(rounds_at, str(rid))) for rid, b in rounds.items()
    }
    kw["recent_rounds"] = tuple(
        _check.identifier(r, j(at, f"recent_rounds[{i}]"))
        for i, r in enumerate(_check.array(m["recent_rounds"], j(at, "recent_rounds")))
    )
    kw["params_set_by"] = _check.text(m["params_set_by"], j(at, "params_set_by"), allow_empty=True)
    set_at = m["params_set_at"]
    kw["params_set_at"] = None if set_at is None else _check.parse_moment(set_at, j(at, "params_set_at"))
    locked_at = j(at, "locked")
    locked = m.get("locked", {})
    if not isinstance(locked, Mapping):
        raise InputError(locked_at, "must be an object")
    kw["locked"] = {
        _check.identifier(c, locked_at): _locked_from_dict(a, j(locked_at, str(c))) for c, a in locked.items()
    }
    kw["settled_claims"] = tuple(
        _check.identifier(c, j(at, f"settled_claims[{i}]"))
        for i, c in enumerate(_check.array(m.get("settled_claims", []), j(at, "settled_claims")))
    )
    kw["released_to_overflow"] = parse_units(m.get("released_to_overflow", "0"), j(at, "released_to_overflow"))
    kw["locks_taken"] = _check.integer(m.get("locks_taken", 0), j(at, "locks_taken"), minimum=0)
    state = with_maps(MeterState(params=kw.pop("params"), current=kw.pop("current"), seed=kw.pop("seed")), **kw)
    try:
        check_invariant(state)
    except InvariantViolation as e:
        raise InputError(at, f"the snapshot does not balance: {e}") from None
    return state


def hit_to_dict(h: Hit) -> dict[str, Any]:
    return {
        "number": h.number,
        "table": h.table,
        "round_id": h.round_id,
        "seat": h.seat,
        "hand": h.hand,
        "award": h.award,
        "amount": format_cents(h.amount_cents),
        "paid_by": h.paid_by,
        "shares": h.shares,
        "meter_before": format_units(h.meter_before),
        "meter_after": format_units(h.meter_after),
        "at": _check.format_moment(h.at),
        "approved_by": h.approved_by,
    }


def _hit_from_dict(d: object, at: str) -> Hit:
    j = _check.join
    keys = (
        "number", "table", "round_id", "seat", "hand", "award", "amount", "paid_by", "shares", "meter_before",
        "meter_after", "at", "approved_by",
    )
    m = _check.obj(d, at, keys)
    paid_by = m["paid_by"]
    if paid_by not in ("attendant", "table"):
        raise InputError(j(at, "paid_by"), f"must be \"table\" or \"attendant\", not {paid_by!r}")
    return Hit(
        number=_check.integer(m["number"], j(at, "number"), minimum=1),
        table=_check.identifier(m["table"], j(at, "table")),
        round_id=_check.identifier(m["round_id"], j(at, "round_id")),
        seat=_check.integer(m["seat"], j(at, "seat"), minimum=1),
        hand=_check.text(m["hand"], j(at, "hand"), allow_empty=True),
        award=_check.text(m["award"], j(at, "award")),
        amount_cents=parse_cents(m["amount"], j(at, "amount")),
        paid_by=paid_by,
        shares=_check.integer(m["shares"], j(at, "shares"), minimum=1),
        meter_before=_check.parse_signed_units(m["meter_before"], j(at, "meter_before")),
        meter_after=_check.parse_signed_units(m["meter_after"], j(at, "meter_after")),
        at=_check.parse_moment(m["at"], j(at, "at")),
        approved_by=_check.text(m["approved_by"], j(at, "approved_by")),
    )


def _booking_to_dict(b: Booking) -> dict[str, Any]:
    d = {
        "table": b.table,
        "wagers": [{"seat": s, "amount": format_cents(c)} for s, c in b.wagers],
        "contributed": format_units(b.contributed),
        "reserved": format_units(b.reserved),
        "overflowed": format_units(b.overflowed),
        "booked_at": _check.format_moment(b.booked_at),
        "paid": b.paid,
        "shared": [
            {
                "hand": sh.hand,
                "award": sh.award,
                "percent": _check.format_fraction(sh.percent),
                "shares": sh.shares,
                "per_share": format_cents(sh.per_share_cents),
                "meter_before": format_units(sh.meter_before),
                "meter_after": format_units(sh.meter_after),
                "paid_seats": list(sh.paid_seats),
            }
            for sh in b.shared
        ],
    }
    if b.on_dealer:  # only when there are: older snapshots keep their exact form (checkpoint digests)
        d["on_dealer"] = list(b.on_dealer)
    if b.round_meters:
        d["round_meters"] = list(b.round_meters)
    if b.awarded:
        d["awarded"] = [{"seat": seat, "hand": hand, "award": award} for seat, hand, award in b.awarded]
    return d


def _booking_from_dict(d: object, at: str) -> Booking:
    j = _check.join
    m = _check.obj(d, at, ("table", "wagers", "contributed", "reserved", "overflowed", "booked_at", "paid", "shared"),
                   ("on_dealer", "round_meters", "awarded"))
    wagers = []
    for i, w in enumerate(_check.array(m["wagers"], j(at, "wagers"))):
        where = j(at, f"wagers[{i}]")
        wm = _check.obj(w, where, ("seat", "amount"))
        wagers.append((_check.integer(wm["seat"], j(where, "seat"), minimum=1), parse_cents(wm["amount"], j(where, "amount"))))
    if not isinstance(m["paid"], bool):
        raise InputError(j(at, "paid"), "must be true or false")
    shared = []
    for i, sh in enumerate(_check.array(m["shared"], j(at, "shared"))):
        where = j(at, f"shared[{i}]")
        sm = _check.obj(
            sh, where, ("hand", "award", "percent", "shares", "per_share", "meter_before", "meter_after", "paid_seats")
        )
        shared.append(SharedAward(
            hand=_check.text(sm["hand"], j(where, "hand")),
            award=_check.text(sm["award"], j(where, "award")),
            percent=_check.parse_fraction(sm["percent"], j(where, "percent")),
            shares=_check.integer(sm["shares"], j(where, "shares"), minimum=2),
            per_share_cents=parse_cents(sm["per_share"], j(where, "per_share")),
            meter_before=_check.parse_signed_units(sm["meter_before"], j(where, "meter_before")),
            meter_after=_check.parse_signed_units(sm["meter_after"], j(where, "meter_after")),
            paid_seats=tuple(
                _check.integer(x, j(where, f"paid_seats[{k}]"), minimum=1)
                for k, x in enumerate(_check.array(sm["paid_seats"], j(where, "paid_seats")))
            ),
        ))
    return Booking(
        table=_check.identifier(m["table"], j(at, "table")),
        wagers=tuple(wagers),
        contributed=parse_units(m["contributed"], j(at, "contributed")),
        reserved=parse_units(m["reserved"], j(at, "reserved")),
        overflowed=parse_units(m["overflowed"], j(at, "overflowed")),
        booked_at=_check.parse_moment(m["booked_at"], j(at, "booked_at")),
        paid=m["paid"],
        shared=tuple(shared),
        on_dealer=tuple(_check.integer(x, j(at, f"on_dealer[{k}]"), minimum=0)
                        for k, x in enumerate(_check.array(m.get("on_dealer", []), j(at, "on_dealer")))),
        round_meters=tuple(_check.identifier(x, j(at, f"round_meters[{k}]"))
                           for k, x in enumerate(_check.array(m.get("round_meters", []), j(at, "round_meters")))),
        awarded=tuple(_awarded(x, j(at, f"awarded[{k}]"))
                      for k, x in enumerate(_check.array(m.get("awarded", []), j(at, "awarded")))),
    )


def _awarded(d: object, at: str) -> tuple[int, str, str]:
    m = _check.obj(d, at, ("seat", "hand", "award"))
    return (_check.integer(m["seat"], _check.join(at, "seat"), minimum=1), _check.text(m["hand"], _check.join(at, "hand")),
            _check.text(m["award"], _check.join(at, "award")))



def _locked_to_dict(a: LockedAward) -> dict[str, Any]:
    return {
        "round_id": a.round_id,
        "table": a.table,
        "seat": a.seat,
        "hand": a.hand,
        "award": a.award,
        "percent": _check.format_fraction(a.percent),
        "shares": a.shares,
        "amount": format_cents(a.amount_cents),
        "meter_before": format_units(a.meter_before),
        "meter_after": format_units(a.meter_after),
        "from_reserve": format_units(a.from_reserve),
        "from_overflow": format_units(a.from_overflow),
        "seeded": format_units(a.seeded),
        "at": _check.format_moment(a.at),
        **({"number": a.number, "nonce": a.nonce} if a.number else {}),  # older snapshots load as they were
        **({"cards": a.cards} if a.cards else {}),
    }


def _locked_from_dict(d: object, at: str) -> LockedAward:
    j = _check.join
    keys = (
        "round_id", "table", "seat", "hand", "award", "percent", "shares", "amount", "meter_before",
        "meter_after", "from_reserve", "from_overflow", "seeded", "at",
    )
    m = _check.obj(d, at, keys, ("number", "nonce", "cards"))
    return LockedAward(
        round_id=_check.identifier(m["round_id"], j(at, "round_id")),
        table=_check.identifier(m["table"], j(at, "table")),
        seat=_check.integer(m["seat"], j(at, "seat"), minimum=1),
        hand=_check.text(m["hand"], j(at, "hand")),
        award=_check.text(m["award"], j(at, "award")),
        percent=_check.parse_fraction(m["percent"], j(at, "percent")),
        shares=_check.integer(m["shares"], j(at, "shares"), minimum=1),
        amount_cents=parse_cents(m["amount"], j(at, "amount")),
        meter_before=parse_units(m["meter_before"], j(at, "meter_before")),
        meter_after=parse_units(m["meter_after"], j(at, "meter_after")),
        from_reserve=parse_units(m["from_reserve"], j(at, "from_reserve")),
        from_overflow=parse_units(m["from_overflow"], j(at, "from_overflow")),
        seeded=parse_units(m["seeded"], j(at, "seeded")),
        at=_check.parse_moment(m["at"], j(at, "at")),
        number=_check.integer(m.get("number", 0), j(at, "number"), minimum=0),
        nonce=_check.text(m["nonce"], j(at, "nonce")) if "nonce" in m else "",
        cards=_check.text(m["cards"], j(at, "cards")) if "cards" in m else "",
    )


__all__ = ["hit_to_dict", "state_from_dict", "state_to_dict"]

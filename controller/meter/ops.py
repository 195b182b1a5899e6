"""Operations on a progressive meter: immutable values a ledger journals as JSON.

Each operation has a stable ``kind`` and ``to_dict()``/``from_dict()`` with money as decimal strings
of dollars, rates and percentages as exact decimal strings (or "n/d"), times as ISO 8601 with an
offset. The constructor checks what can be checked without the meter (InputError naming the field);
`controller.meter.apply` checks the rest against the state (RulesError).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any, ClassVar, TypeVar

from ..awards import PercentOfMeter, parse_award
from ..cards import card_str, parse_card
from ..errors import InputError
from ..money import format_cents, parse_cents
from . import _check
from .params import MeterParams, params_from_dict, params_to_dict

PAID_BY = ("attendant", "table")  # 605a.7(a): a meter of each

_DICT_NAMES = {"cents": "amount", "units": "amount"}


_T = TypeVar("_T")


def _build(cls: type[_T], kwargs: dict[str, Any], prefix: str) -> _T:
    try:
        return cls(**kwargs)
    except InputError as e:
        raise _check.renamed(e, _DICT_NAMES, prefix) from None


@dataclass(frozen=True)
class BookContributions:
    """The progressive wagers of a round, booked in one batch when the wagers are locked ("no more bets")."""

    kind: ClassVar[str] = "book-contributions"
    round_id: str
    table: str
    wagers: tuple[tuple[int, int], ...]  # (seat, cents); a seat may appear twice (own hand and dealer's hand)
    at: datetime
    # Drawn at lock-out, before any card is dealt, and recorded with the booking (§ 639a.1 "Magic Card",
    # "Lucky Bonus"); only on the meter of a wager that pays them.
    magic_card: int | None = None
    lucky_seat: int | None = None  # 0: the dealer's position
    # Which of `wagers` (0-based positions) are wagers on the dealer's hand (§ 639a.7(d)(4)): a restarted
    # controller resumes each wager on its spot.
    on_dealer: tuple[int, ...] = ()
    # Every meter the round books when it books more than one (each its own journal entry): a restart that
    # finds some of them missing knows the lock-out never completed.
    round_meters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check.identifier(self.round_id, "round_id")
        _check.identifier(self.table, "table")
        items = _check.array(self.wagers, "wagers")
        out = []
        for i, w in enumerate(items):
            if not isinstance(w, (tuple, list)) or len(w) != 2:
                raise InputError(f"wagers[{i}]", f"must be a pair (seat, cents), not {w!r}")
            seat, c = w
            if type(seat) is not int or seat < 1:  # the field's name is made only for the error
                _check.integer(seat, f"wagers[{i}].seat", minimum=1)
            if isinstance(c, bool) or not isinstance(c, int):
                raise InputError(f"wagers[{i}].cents", f"seat {seat}: must be a whole number of cents, not {c!r}")
            if c <= 0:
                raise InputError(f"wagers[{i}].cents", f"seat {seat}: a wager must be more than zero, not {c}")
            out.append((seat, c))
        object.__setattr__(self, "wagers", tuple(out))
        _check.moment(self.at, "at")
        if self.magic_card is not None:
            _check.integer(self.magic_card, "magic_card", minimum=0)
            if self.magic_card > 51:
                raise InputError("magic_card", f"{self.magic_card} is not a card (0..51)")
        if self.lucky_seat is not None:
            _check.integer(self.lucky_seat, "lucky_seat", minimum=0)
        marks = tuple(_check.integer(x, f"on_dealer[{k}]", minimum=0)
                      for k, x in enumerate(_check.array(self.on_dealer, "on_dealer")))
        if len(set(marks)) != len(marks) or any(x >= len(out) for x in marks):
            raise InputError("on_dealer", f"{list(marks)} must be distinct positions in wagers (0..{len(out) - 1})")
        object.__setattr__(self, "on_dealer", tuple(sorted(marks)))
        meters = tuple(_check.identifier(x, f"round_meters[{k}]")
                       for k, x in enumerate(_check.array(self.round_meters, "round_meters")))
        object.__setattr__(self, "round_meters", tuple(sorted(set(meters))))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "round_id": self.round_id,
            "table": self.table,
            "wagers": [{"seat": s, "amount": format_cents(c)} for s, c in self.wagers],
            "at": _check.format_moment(self.at),
        }
        if self.magic_card is not None:
            d["magic_card"] = card_str(self.magic_card)
        if self.lucky_seat is not None:
            d["lucky_seat"] = self.lucky_seat
        if self.on_dealer:  # only when there are: older entries keep their exact form
            d["on_dealer"] = list(self.on_dealer)
        if self.round_meters:
            d["round_meters"] = list(self.round_meters)
        return d

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> BookContributions:
        m = _fields(d, field_prefix, cls.kind, ("round_id", "table", "wagers", "at"),
                    ("magic_card", "lucky_seat", "on_dealer", "round_meters"))
        wagers = []
        for i, w in enumerate(_check.array(m["wagers"], _check.join(field_prefix, "wagers"))):
            try:  # the field's name is made only for an error
                wm = _check.obj(w, "", ("seat", "amount"))
                wagers.append((wm["seat"], parse_cents(wm["amount"], "amount")))
            except InputError as e:
                raise e.at(_check.join(field_prefix, f"wagers[{i}]")) from None
        at = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
        kw: dict[str, Any] = {"round_id": m["round_id"], "table": m["table"], "wagers": tuple(wagers), "at": at}
        if "magic_card" in m:
            kw["magic_card"] = parse_card(m["magic_card"], _check.join(field_prefix, "magic_card"))
        if "lucky_seat" in m:
            kw["lucky_seat"] = m["lucky_seat"]
        if "on_dealer" in m:
            kw["on_dealer"] = tuple(_check.array(m["on_dealer"], _check.join(field_prefix, "on_dealer")))
        if "round_meters" in m:
            kw["round_meters"] = tuple(_check.array(m["round_meters"], _check.join(field_prefix, "round_meters")))
        return _build(cls, kw, field_prefix)


@dataclass(frozen=True)
class VoidRound:
    """A voided round (misdeal, shoe jam, wrong card count) returns every wager: its booking is reversed."""

    kind: ClassVar[str] = "void-round"
    round_id: str
    at: datetime
    reason: str

    def __post_init__(self) -> None:
        _check.identifier(self.round_id, "round_id")
        _check.moment(self.at, "at")
        _check.text(self.reason, "reason")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "round_id": self.round_id, "at": _check.format_moment(self.at), "reason": self.reason}

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> VoidRound:
        m = _fields(d, field_prefix, cls.kind, ("round_id", "at", "reason"))
        at = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
        return _build(cls, {"round_id": m["round_id"], "at": at, "reason": m["reason"]}, field_prefix)


@dataclass(frozen=True)
class PayPercentAward:
    """A percentage of the meter paid to one seat (by the attendant), from the meter at that seat's turn.

    ``shares`` > 1: an award on the dealer's hand divided equally among that many players (§ 639a.12(e)(2));
    each sharer is paid by one operation with the same hand, award, percent and shares.
    """

    kind: ClassVar[str] = "pay-percent-award"
    round_id: str
    table: str
    seat: int
    hand: str
    award: str  # as the paytable states it: "100% of meter"
    percent: Fraction
    at: datetime
    approved_by: str
    shares: int = 1

    def __post_init__(self) -> None:
        _check_percent_award(self)
        _check.text(self.approved_by, "approved_by")
        _check.integer(self.shares, "shares", minimum=1)

    def to_dict(self) -> dict[str, Any]:
        return _percent_award_dict(self, "approved_by")

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> PayPercentAward:
        return _percent_award_from_dict(cls, d, field_prefix, "approved_by")


def _percent_award_dict(op: Any, last: str) -> dict[str, Any]:
    """The dict form of a percentage award paid at once (`last` = "approved_by") or locked ("claim")."""
    return {
        "kind": op.kind,
        "round_id": op.round_id,
        "table": op.table,
        "seat": op.seat,
        "hand": op.hand,
        "award": op.award,
        "percent": _check.format_fraction(op.percent),
        "at": _check.format_moment(op.at),
        last: getattr(op, last),
        "shares": op.shares,
    }


def _percent_award_from_dict(cls: type[_T], d: object, field_prefix: str, last: str,
                             extra: tuple[str, ...] = ()) -> _T:
    keys = ("round_id", "table", "seat", "hand", "award", "percent", "at", last)
    m = _fields(d, field_prefix, cls.kind, keys, ("shares", *extra))  # type: ignore[attr-defined]
    kw = {k: m[k] for k in keys}
    kw["percent"] = _check.parse_fraction(m["percent"], _check.join(field_prefix, "percent"))
    kw["at"] = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
    kw["shares"] = m.get("shares", 1)
    kw.update({k: m[k] for k in extra if k in m})
    return _build(cls, kw, field_prefix)


def _check_percent_award(op: Any) -> None:
    """The checks a percentage award makes on itself, paid at once or locked (in the order they are named)."""
    _check.identifier(op.round_id, "round_id")
    _check.identifier(op.table, "table")
    _check.integer(op.seat, "seat", minimum=1)
    _check.text(op.hand, "hand")
    _check.text(op.award, "award")
    pct = _check.fraction(op.percent, "percent")
    if not 0 < pct <= 100:
        raise InputError("percent", f"{_check.format_fraction(pct)} must be more than 0 and at most 100")
    object.__setattr__(op, "percent", pct)
    stated = parse_award(op.award, "award")
    if not isinstance(stated, PercentOfMeter) or stated.percent != pct:
        raise InputError("award", f"{op.award!r} does not state {_check.format_fraction(pct)}% of the meter")
    _check.moment(op.at, "at")


@dataclass(frozen=True)
class PayFixedAward:
    """A fixed or odds payout of a progressive wager (Envy Bonus, "500 for 1"): recorded, the meter untouched."""

    kind: ClassVar[str] = "pay-fixed-award"
    round_id: str
    table: str
    seat: int
    hand: str  # may be empty (a Lucky Bonus pays on no hand)
    award: str
    cents: int
    paid_by: str  # "table" or "attendant"
    at: datetime
    approved_by: str

    def __post_init__(self) -> None:
        _check.identifier(self.round_id, "round_id")
        _check.identifier(self.table, "table")
        _check.integer(self.seat, "seat", minimum=1)
        _check.text(self.hand, "hand", allow_empty=True)
        _check.text(self.award, "award")
        try:
            stated = parse_award(self.award, "award")
        except InputError:
            stated = None  # a label the paytable parser does not know is accepted as it is
        if isinstance(stated, PercentOfMeter):
            raise InputError("award", f"{self.award!r} is a percentage of the meter: pay it with PayPercentAward")
        _check.cents(self.cents, "cents")
        if self.paid_by not in PAID_BY:
            raise InputError("paid_by", f"must be \"table\" or \"attendant\", not {self.paid_by!r}")
        _check.moment(self.at, "at")
        _check.text(self.approved_by, "approved_by")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "round_id": self.round_id,
            "table": self.table,
            "seat": self.seat,
            "hand": self.hand,
            "award": self.award,
            "amount": format_cents(self.cents),
            "paid_by": self.paid_by,
            "at": _check.format_moment(self.at),
            "approved_by": self.approved_by,
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> PayFixedAward:
        keys = ("round_id", "table", "seat", "hand", "award", "amount", "paid_by", "at", "approved_by")
        m = _fields(d, field_prefix, cls.kind, keys)
        kw = {k: m[k] for k in keys if k != "amount"}
        kw["cents"] = parse_cents(m["amount"], _check.join(field_prefix, "amount"))
        kw["at"] = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
        return _build(cls, kw, field_prefix)


@dataclass(frozen=True)
class TopUp:
    """Operator money put on the visible meter, booked as seed (for example a promotion)."""

    kind: ClassVar[str] = "top-up"
    cents: int
    at: datetime
    who: str
    reason: str

    def __post_init__(self) -> None:
        _check.cents(self.cents, "cents")
        _check.moment(self.at, "at")
        _check.text(self.who, "who")
        _check.text(self.reason, "reason")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "amount": format_cents(self.cents),
            "at": _check.format_moment(self.at),
            "who": self.who,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> TopUp:
        m = _fields(d, field_prefix, cls.kind, ("amount", "at", "who", "reason"))
        kw = {
            "cents": parse_cents(m["amount"], _check.join(field_prefix, "amount")),
            "at": _check.parse_moment(m["at"], _check.join(field_prefix, "at")),
            "who": m["who"],
            "reason": m["reason"],
        }
        return _build(cls, kw, field_prefix)


@dataclass(frozen=True)
class Adjust:
    """An authorized adjustment of the visible meter, in signed meter units.

    ``credential`` is the authorization the shell has verified (supervisor badge and approval code):
    it is journaled verbatim, so it must never be a reusable secret such as a password.
    """

    kind: ClassVar[str] = "adjust"
    units: int
    reason: str
    credential: str
    at: datetime

    def __post_init__(self) -> None:
        _check.integer(self.units, "units")
        if self.units == 0:
            raise InputError("units", "an adjustment of zero changes nothing")
        _check.text(self.reason, "reason")
        _check.text(self.credential, "credential")
        _check.moment(self.at, "at")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "amount": _check.format_signed_units(self.units),
            "reason": self.reason,
            "credential": self.credential,
            "at": _check.format_moment(self.at),
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> Adjust:
        m = _fields(d, field_prefix, cls.kind, ("amount", "reason", "credential", "at"))
        kw = {
            "units": _check.parse_signed_units(m["amount"], _check.join(field_prefix, "amount")),
            "reason": m["reason"],
            "credential": m["credential"],
            "at": _check.parse_moment(m["at"], _check.join(field_prefix, "at")),
        }
        return _build(cls, kw, field_prefix)


@dataclass(frozen=True)
class ChangeParams:
    """New parameters for the meter; refused while a round is open."""

    kind: ClassVar[str] = "change-params"
    params: MeterParams
    who: str
    at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.params, MeterParams):
            raise InputError("params", f"must be MeterParams, not {type(self.params).__name__}")
        _check.text(self.who, "who")
        _check.moment(self.at, "at")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": params_to_dict(self.params),
            "who": self.who,
            "at": _check.format_moment(self.at),
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> ChangeParams:
        m = _fields(d, field_prefix, cls.kind, ("params", "who", "at"))
        kw = {
            "params": params_from_dict(m["params"], _check.join(field_prefix, "params")),
            "who": m["who"],
            "at": _check.parse_moment(m["at"], _check.join(field_prefix, "at")),
        }
        return _build(cls, kw, field_prefix)


@dataclass(frozen=True)
class CloseRound:
    """The round is settled: it can no longer be voided or paid."""

    kind: ClassVar[str] = "close-round"
    round_id: str
    at: datetime

    def __post_init__(self) -> None:
        _check.identifier(self.round_id, "round_id")
        _check.moment(self.at, "at")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "round_id": self.round_id, "at": _check.format_moment(self.at)}

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> CloseRound:
        m = _fields(d, field_prefix, cls.kind, ("round_id", "at"))
        at = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
        return _build(cls, {"round_id": m["round_id"], "at": at}, field_prefix)


@dataclass(frozen=True)
class LockPercentAward:
    """A percentage award on a linked meter taken at the hit and held under ``claim`` until approved or rejected
    (58 Pa. Code 605a.8): the meter resets at once, as a payout would reset it, so other tables play on."""

    kind: ClassVar[str] = "lock-percent-award"
    round_id: str
    table: str
    seat: int
    hand: str
    award: str
    percent: Fraction
    at: datetime
    claim: str  # unique per meter: the id the supervisor approves or rejects
    shares: int = 1
    # A random value the link authority gives the lock (never the table): with the lock's number, what an approval
    # of its payment names, so that no approval pays a lock other than its own, even on a journal wiped or put
    # back (controller.link.approval). Empty in the journals of before.
    nonce: str = ""
    # The hand's cards as the claim showed them ("AH KH QH JH TH"): journaled with the lock at the authority, and what
    # a supervisor's approval of its payment names with the rest. Empty in the journals of before.
    cards: str = ""

    def __post_init__(self) -> None:
        _check_percent_award(self)
        _check.identifier(self.claim, "claim")
        _check.integer(self.shares, "shares", minimum=1)
        if self.nonce and not (len(self.nonce) == 32 and all(c in "0123456789abcdef" for c in self.nonce)):
            raise InputError("nonce", "must be 32 hex digits")
        if not isinstance(self.cards, str) or len(self.cards) > 64 or not all(
                c.isalnum() or c == " " for c in self.cards):
            raise InputError("cards", "must be the hand's cards as text (\"AH KH QH JH TH\"), at most 64 characters")

    def to_dict(self) -> dict[str, Any]:
        return {**_percent_award_dict(self, "claim"), **({"nonce": self.nonce} if self.nonce else {}),
                **({"cards": self.cards} if self.cards else {})}

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> LockPercentAward:
        return _percent_award_from_dict(cls, d, field_prefix, "claim", ("nonce", "cards"))


@dataclass(frozen=True)
class PayLockedAward:
    """A supervisor approved a locked award: it is paid (by the attendant) and enters the hit history."""

    kind: ClassVar[str] = "pay-locked-award"
    claim: str
    approved_by: str
    at: datetime

    def __post_init__(self) -> None:
        _check.identifier(self.claim, "claim")
        _check.text(self.approved_by, "approved_by")
        _check.moment(self.at, "at")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "claim": self.claim,
            "approved_by": self.approved_by,
            "at": _check.format_moment(self.at),
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> PayLockedAward:
        m = _fields(d, field_prefix, cls.kind, ("claim", "approved_by", "at"))
        at = _check.parse_moment(m["at"], _check.join(field_prefix, "at"))
        return _build(cls, {"claim": m["claim"], "approved_by": m["approved_by"], "at": at}, field_prefix)


@dataclass(frozen=True)
class ReleaseLockedAward:
    """A supervisor rejected a locked award: every transfer of the lock is reversed and the amount goes back."""

    kind: ClassVar[str] = "release-locked-award"
    claim: str
    rejected_by: str
    reason: str
    at: datetime

    def __post_init__(self) -> None:
        _check.identifier(self.claim, "claim")
        _check.text(self.rejected_by, "rejected_by")
        _check.text(self.reason, "reason")
        _check.moment(self.at, "at")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "claim": self.claim,
            "rejected_by": self.rejected_by,
            "reason": self.reason,
            "at": _check.format_moment(self.at),
        }

    @classmethod
    def from_dict(cls, d: object, field_prefix: str = "") -> ReleaseLockedAward:
        m = _fields(d, field_prefix, cls.kind, ("claim", "rejected_by", "reason", "at"))
        kw = {
            "claim": m["claim"],
            "rejected_by": m["rejected_by"],
            "reason": m["reason"],
            "at": _check.parse_moment(m["at"], _check.join(field_prefix, "at")),
        }
        return _build(cls, kw, field_prefix)


Op = (
    BookContributions | VoidRound | PayPercentAward | PayFixedAward | TopUp | Adjust | ChangeParams | CloseRound
    | LockPercentAward | PayLockedAward | ReleaseLockedAward
)

OPS: Mapping[str, type[Op]] = {
    cls.kind: cls
    for cls in (
        BookContributions, VoidRound, PayPercentAward, PayFixedAward, TopUp, Adjust, ChangeParams, CloseRound,
        LockPercentAward, PayLockedAward, ReleaseLockedAward,
    )
}


def op_from_dict(d: object, field_prefix: str = "") -> Op:
    """Any operation from its dict, chosen by its ``kind``."""
    if not isinstance(d, Mapping):
        raise InputError(field_prefix, f"an operation must be an object, not {type(d).__name__}")
    kind = d.get("kind")
    cls = OPS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InputError(_check.join(field_prefix, "kind"), f"{kind!r} is not one of {', '.join(OPS)}")
    return cls.from_dict(d, field_prefix)


def _fields(
    d: object, prefix: str, kind: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if isinstance(d, Mapping) and d.get("kind") != kind:
        raise InputError(_check.join(prefix, "kind"), f"is {d.get('kind')!r}, expected {kind!r}")
    return _check.obj(d, prefix, ("kind", *required), optional)

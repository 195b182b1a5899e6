"""Operations on a progressive meter: immutable values a ledger journals as JSON.

Each operation has a stable ``kind`` and ``to_dict()``/``from_dict()`` with money as decimal strings
of dollars, rates and percentages as exact decimal strings (or "n/d"), times as ISO 8601 with an
offset. The constructor checks what can be checked without the meter (InputError naming the field);
`controller.meter.apply` checks the rest against the state (RulesError).

Each operation declares its fields once, in ``FIELDS``: per attribute its check, its key in the dict, how it is
written and read, whether the key may be absent and when it is left out; between them, the checks that relate
fields to each other. `Operation` runs the constructor's checks, ``to_dict`` and ``from_dict`` from that table,
in its order: the order decides which error a bad operation gets, and the order of the dict's keys, which the
journal's hash chain covers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from functools import partial
from typing import Any, ClassVar, NamedTuple, TypeVar

from controller.awards import PercentOfMeter, parse_award
from controller.cards import card_str, parse_card
from controller.errors import InputError
from controller.meter import parse as _check
from controller.meter.params import MeterParams, params_from_dict, params_to_dict
from controller.money import format_cents, parse_cents

PAID_BY = ("attendant", "table")  # 605a.7(a): a meter of each

_DICT_NAMES = {"cents": "amount", "units": "amount"}


# --- the codec: fields declared once ----------------------------------------------------------------------------


class Codec(NamedTuple):
    """How a value is checked (and normalised) by the constructor, written into the dict and read from it."""

    check: Callable[[Any, str], Any]  # (value, attribute) -> the value kept, or InputError naming the attribute
    encode: Callable[[Any], Any] | None = None  # None: written as it is
    decode: Callable[[Any, str], Any] | None = None  # (JSON value, its field path); None: read as it is


class Field(NamedTuple):
    """One attribute of an operation and its key in the operation's dict."""

    attr: str
    codec: Codec
    key: str = ""  # the dict's key, when it is not the attribute's name
    optional: bool = False  # the key may be absent from a dict (the attribute's default then)
    omit: Callable[[Any], bool] | None = None  # the key is left out when true: older entries keep their form


class Relation(NamedTuple):
    """A check that relates fields to each other, made where it stands in ``FIELDS`` (those above it checked)."""

    check: Callable[[Any], None]


_T = TypeVar("_T", bound="Operation")


class Operation:
    """What every operation has: its constructor's checks, ``to_dict`` and ``from_dict``, run from its ``FIELDS``
    (plain loops over a table a reviewer reads: no code is generated)."""

    kind: ClassVar[str]
    FIELDS: ClassVar[tuple[Field | Relation, ...]]
    _KEYS: ClassVar[tuple[tuple[Field, str], ...]]  # each field and its key in the dict
    _REQUIRED: ClassVar[tuple[str, ...]]
    _OPTIONAL: ClassVar[tuple[str, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = [f for f in cls.FIELDS if isinstance(f, Field)]
        declared = [a for a, t in cls.__dict__.get("__annotations__", {}).items() if not str(t).startswith("ClassVar")]
        if declared != [f.attr for f in fields]:
            raise TypeError(f"{cls.__name__}: FIELDS name {[f.attr for f in fields]}, the class declares {declared}")
        for f in fields:
            if f.omit is not None and not f.optional:  # its dict would be refused by from_dict
                raise TypeError(f"{cls.__name__}.{f.attr}: a key that may be left out must be optional")
        cls._KEYS = tuple((f, f.key or f.attr) for f in fields)
        cls._REQUIRED = ("kind", *(k for f, k in cls._KEYS if not f.optional))
        cls._OPTIONAL = tuple(k for f, k in cls._KEYS if f.optional)

    def __post_init__(self) -> None:
        for step in self.FIELDS:
            if isinstance(step, Relation):
                step.check(self)
                continue
            value = getattr(self, step.attr)
            kept = step.codec.check(value, step.attr)  # the same value, or the value normalised
            if kept is not value:
                object.__setattr__(self, step.attr, kept)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        for f, key in self._KEYS:
            value = getattr(self, f.attr)
            if f.omit is not None and f.omit(value):
                continue  # older entries keep their form
            d[key] = value if f.codec.encode is None else f.codec.encode(value)
        return d

    @classmethod
    def from_dict(cls: type[_T], d: object, field_prefix: str = "") -> _T:
        m = _fields(d, field_prefix, cls.kind, cls._REQUIRED, cls._OPTIONAL)
        kw: dict[str, Any] = {}
        for f, key in cls._KEYS:
            if key not in m:  # an optional key absent: the attribute's default
                continue
            value = m[key]
            kw[f.attr] = value if f.codec.decode is None else f.codec.decode(value, _check.join(field_prefix, key))
        return _build(cls, kw, field_prefix)


def _fields(d: object, prefix: str, kind: str, required: tuple[str, ...], optional: tuple[str, ...]) -> Mapping[str, Any]:
    """`d` as an operation of `kind` with the keys `required` ("kind" among them) and `optional`."""
    if isinstance(d, Mapping) and d.get("kind") != kind:
        raise InputError(_check.join(prefix, "kind"), f"is {d.get('kind')!r}, expected {kind!r}")
    return _check.obj(d, prefix, required, optional)


def _build(cls: type[_T], kwargs: dict[str, Any], prefix: str) -> _T:
    try:
        return cls(**kwargs)
    except InputError as e:  # the constructor names attributes, a reader of the dict wants its keys
        raise _check.renamed(e, _DICT_NAMES, prefix) from None


def _is_none(value: object) -> bool:
    return value is None


def _is_empty(value: object) -> bool:
    return not value


# The values most fields hold.
IDENT = Codec(_check.identifier)
TEXT = Codec(_check.text)
TEXT_OR_EMPTY = Codec(partial(_check.text, allow_empty=True))
POSITIVE = Codec(partial(_check.integer, minimum=1))
MOMENT = Codec(_check.moment, _check.format_moment, _check.parse_moment)
CENTS = Codec(_check.cents, format_cents, parse_cents)


def _check_wagers(value: object, field: str) -> tuple[tuple[int, int], ...]:
    out = []
    for i, w in enumerate(_check.array(value, field)):
        if not isinstance(w, (tuple, list)) or len(w) != 2:
            raise InputError(f"{field}[{i}]", f"must be a pair (seat, cents), not {w!r}")
        seat, c = w
        if type(seat) is not int or seat < 1:  # the field's name is made only for the error
            _check.integer(seat, f"{field}[{i}].seat", minimum=1)
        if isinstance(c, bool) or not isinstance(c, int):
            raise InputError(f"{field}[{i}].cents", f"seat {seat}: must be a whole number of cents, not {c!r}")
        if c <= 0:
            raise InputError(f"{field}[{i}].cents", f"seat {seat}: a wager must be more than zero, not {c}")
        out.append((seat, c))
    return tuple(out)


def _write_wagers(wagers: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    return [{"seat": s, "amount": format_cents(c)} for s, c in wagers]


def _read_wagers(value: object, field: str) -> tuple[tuple[Any, int], ...]:
    wagers = []
    for i, w in enumerate(_check.array(value, field)):
        try:  # the field's name is made only for an error
            wm = _check.obj(w, "", ("seat", "amount"))
            wagers.append((wm["seat"], parse_cents(wm["amount"], "amount")))
        except InputError as e:
            raise e.at(_check.join(field, f"[{i}]")) from None
    return tuple(wagers)


def _check_card(value: object, field: str) -> object:
    if value is not None:
        card = _check.integer(value, field, minimum=0)
        if card > 51:
            raise InputError(field, f"{card} is not a card (0..51)")
    return value


def _check_position(value: object, field: str) -> object:
    if value is not None:
        _check.integer(value, field, minimum=0)
    return value


def _check_marks(value: object, field: str) -> tuple[int, ...]:
    return tuple(_check.integer(x, f"{field}[{k}]", minimum=0) for k, x in enumerate(_check.array(value, field)))


def _check_meters(value: object, field: str) -> tuple[str, ...]:
    meters = tuple(_check.identifier(x, f"{field}[{k}]") for k, x in enumerate(_check.array(value, field)))
    return tuple(sorted(set(meters)))


def _read_list(value: object, field: str) -> tuple[Any, ...]:
    return tuple(_check.array(value, field))


def _on_dealer_within_wagers(op: BookContributions) -> None:
    marks, n = op.on_dealer, len(op.wagers)
    if len(set(marks)) != len(marks) or any(x >= n for x in marks):
        raise InputError("on_dealer", f"{list(marks)} must be distinct positions in wagers (0..{n - 1})")
    object.__setattr__(op, "on_dealer", tuple(sorted(marks)))


@dataclass(frozen=True)
class BookContributions(Operation):
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

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("round_id", IDENT),
        Field("table", IDENT),
        Field("wagers", Codec(_check_wagers, _write_wagers, _read_wagers)),
        Field("at", MOMENT),
        Field("magic_card", Codec(_check_card, card_str, parse_card), optional=True, omit=_is_none),
        Field("lucky_seat", Codec(_check_position), optional=True, omit=_is_none),
        # Only when there are: older entries keep their exact form.
        Field("on_dealer", Codec(_check_marks, list, _read_list), optional=True, omit=_is_empty),
        Relation(_on_dealer_within_wagers),
        Field("round_meters", Codec(_check_meters, list, _read_list), optional=True, omit=_is_empty),
    )


@dataclass(frozen=True)
class VoidRound(Operation):
    """A voided round (misdeal, shoe jam, wrong card count) returns every wager: its booking is reversed."""

    kind: ClassVar[str] = "void-round"
    round_id: str
    at: datetime
    reason: str

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (Field("round_id", IDENT), Field("at", MOMENT), Field("reason", TEXT))


def _check_percent(value: object, field: str) -> Fraction:
    pct = _check.fraction(value, field)
    if not 0 < pct <= 100:
        raise InputError(field, f"{_check.format_fraction(pct)} must be more than 0 and at most 100")
    return pct


def _award_states_percent(op: PayPercentAward | LockPercentAward) -> None:
    stated = parse_award(op.award, "award")
    if not isinstance(stated, PercentOfMeter) or stated.percent != op.percent:
        raise InputError("award", f"{op.award!r} does not state {_check.format_fraction(op.percent)}% of the meter")


# A percentage award paid at once or locked, up to its time (the rest differs).
_PERCENT_AWARD: tuple[Field | Relation, ...] = (
    Field("round_id", IDENT),
    Field("table", IDENT),
    Field("seat", POSITIVE),
    Field("hand", TEXT),
    Field("award", TEXT),
    Field("percent", Codec(_check_percent, _check.format_fraction, _check.parse_fraction)),
    Relation(_award_states_percent),
    Field("at", MOMENT),
)


@dataclass(frozen=True)
class PayPercentAward(Operation):
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

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        *_PERCENT_AWARD, Field("approved_by", TEXT), Field("shares", POSITIVE, optional=True))


def _not_a_percentage(op: PayFixedAward) -> None:
    try:
        stated = parse_award(op.award, "award")
    except InputError:
        stated = None  # a label the paytable parser does not know is accepted as it is
    if isinstance(stated, PercentOfMeter):
        raise InputError("award", f"{op.award!r} is a percentage of the meter: pay it with PayPercentAward")


def _check_paid_by(value: object, field: str) -> object:
    if value not in PAID_BY:
        raise InputError(field, f"must be \"table\" or \"attendant\", not {value!r}")
    return value


@dataclass(frozen=True)
class PayFixedAward(Operation):
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

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("round_id", IDENT),
        Field("table", IDENT),
        Field("seat", POSITIVE),
        Field("hand", TEXT_OR_EMPTY),
        Field("award", TEXT),
        Relation(_not_a_percentage),
        Field("cents", CENTS, "amount"),
        Field("paid_by", Codec(_check_paid_by)),
        Field("at", MOMENT),
        Field("approved_by", TEXT),
    )


@dataclass(frozen=True)
class TopUp(Operation):
    """Operator money put on the visible meter, booked as seed (for example a promotion)."""

    kind: ClassVar[str] = "top-up"
    cents: int
    at: datetime
    who: str
    reason: str

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("cents", CENTS, "amount"), Field("at", MOMENT), Field("who", TEXT), Field("reason", TEXT))


def _check_units(value: object, field: str) -> int:
    units = _check.integer(value, field)
    if units == 0:
        raise InputError(field, "an adjustment of zero changes nothing")
    return units


@dataclass(frozen=True)
class Adjust(Operation):
    """An authorized adjustment of the visible meter, in signed meter units.

    ``credential`` is the authorization the shell has verified (supervisor badge and approval code):
    it is journaled verbatim, so it must never be a reusable secret such as a password.
    """

    kind: ClassVar[str] = "adjust"
    units: int
    reason: str
    credential: str
    at: datetime

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("units", Codec(_check_units, _check.format_signed_units, _check.parse_signed_units), "amount"),
        Field("reason", TEXT),
        Field("credential", TEXT),
        Field("at", MOMENT),
    )


def _check_params(value: object, field: str) -> object:
    if not isinstance(value, MeterParams):
        raise InputError(field, f"must be MeterParams, not {type(value).__name__}")
    return value


@dataclass(frozen=True)
class ChangeParams(Operation):
    """New parameters for the meter; refused while a round is open."""

    kind: ClassVar[str] = "change-params"
    params: MeterParams
    who: str
    at: datetime

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("params", Codec(_check_params, params_to_dict, params_from_dict)), Field("who", TEXT),
        Field("at", MOMENT))


@dataclass(frozen=True)
class CloseRound(Operation):
    """The round is settled: it can no longer be voided or paid."""

    kind: ClassVar[str] = "close-round"
    round_id: str
    at: datetime

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (Field("round_id", IDENT), Field("at", MOMENT))


def _check_nonce(value: Any, field: str) -> Any:
    if not isinstance(value, str) or (value and not (len(value) == 32 and all(c in "0123456789abcdef" for c in value))):
        raise InputError(field, "must be 32 hex digits")
    return value


def _check_cards(value: object, field: str) -> object:
    if not isinstance(value, str) or len(value) > 64 or not all(c.isalnum() or c == " " for c in value):
        raise InputError(field, "must be the hand's cards as text (\"AH KH QH JH TH\"), at most 64 characters")
    return value


@dataclass(frozen=True)
class LockPercentAward(Operation):
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
    # back (controller.linkproto.approval). Empty in the journals of before.
    nonce: str = ""
    # The hand's cards as the claim showed them ("AH KH QH JH TH"): journaled with the lock at the authority, and what
    # a supervisor's approval of its payment names with the rest. Empty in the journals of before.
    cards: str = ""

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        *_PERCENT_AWARD,
        Field("claim", IDENT),
        Field("shares", POSITIVE, optional=True),
        Field("nonce", Codec(_check_nonce), optional=True, omit=_is_empty),
        Field("cards", Codec(_check_cards), optional=True, omit=_is_empty),
    )


@dataclass(frozen=True)
class PayLockedAward(Operation):
    """A supervisor approved a locked award: it is paid (by the attendant) and enters the hit history."""

    kind: ClassVar[str] = "pay-locked-award"
    claim: str
    approved_by: str
    at: datetime

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("claim", IDENT), Field("approved_by", TEXT), Field("at", MOMENT))


@dataclass(frozen=True)
class ReleaseLockedAward(Operation):
    """A supervisor rejected a locked award: every transfer of the lock is reversed and the amount goes back."""

    kind: ClassVar[str] = "release-locked-award"
    claim: str
    rejected_by: str
    reason: str
    at: datetime

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("claim", IDENT), Field("rejected_by", TEXT), Field("reason", TEXT), Field("at", MOMENT))


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


__all__ = ["CENTS", "IDENT", "MOMENT", "OPS", "PAID_BY", "POSITIVE", "TEXT", "TEXT_OR_EMPTY", "Adjust",
           "BookContributions", "ChangeParams", "CloseRound", "Codec", "Field", "LockPercentAward", "Op", "Operation",
           "PayFixedAward", "PayLockedAward", "PayPercentAward", "Relation", "ReleaseLockedAward", "TopUp", "VoidRound",
           "op_from_dict"]

"""Reading a dice paytable: the award for each outcome key, and what a wager receives.

Any object with ``.id``, ``.kind`` and ``.pays`` (each pay with ``.hand``, an outcome key, and
``.award``) will do, so the rules do not depend on how paytables are loaded. Dice odds are
"N to 1" (the wager is returned, § 668a.4, § 623c.1(h)); "N for 1" is accepted too. A percentage
of a meter or a fixed sum has no meaning for these wagers and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from controller.awards import Award, ForOne, ToOne
from controller.errors import InputError

LOSE = "lose"

PayAward = ToOne | ForOne


class PayLike(Protocol):  # read-only members: a frozen Pay is one
    @property
    def hand(self) -> object: ...

    @property
    def award(self) -> Award: ...


class PaytableLike(Protocol):  # read-only members: a frozen Paytable is one
    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> object: ...

    @property
    def pays(self) -> Iterable[PayLike]: ...


def kind_value(kind: object) -> str:
    """A paytable kind as its string value (an enum member or a plain string)."""
    return str(getattr(kind, "value", kind))


def _key(hand: object) -> str:
    return hand if isinstance(hand, str) else str(getattr(hand, "label", hand))


def pay_table(paytable: PaytableLike, kind: str, field: str = "paytable") -> tuple[tuple[str, PayAward], ...]:
    """The (outcome key, award) pairs of `paytable`, which must be of `kind`."""
    if kind_value(getattr(paytable, "kind", None)) != kind:
        pid = getattr(paytable, "id", "?")
        raise InputError(field, f"paytable {pid!r} is for {kind_value(getattr(paytable, 'kind', None))!r}, not {kind!r}")
    out: dict[str, PayAward] = {}
    for pay in paytable.pays:
        key = _key(pay.hand)
        if not isinstance(pay.award, (ToOne, ForOne)):
            raise InputError(
                field,
                f"paytable {paytable.id!r} pays {key!r} as {pay.award.describe()!r}; dice wagers are paid at odds "
                "such as \"30 to 1\"",
            )
        if key in out:
            raise InputError(field, f"paytable {paytable.id!r} gives {key!r} twice")
        out[key] = pay.award
    return tuple(out.items())


def received_cents(award: PayAward, wager_cents: int) -> int:
    """What a winning wager receives, the wager included for "to 1" odds, floored to the cent."""
    return award.received_cents(wager_cents)


def check_wager_cents(wager_cents: object, field: str = "wager") -> int:
    if isinstance(wager_cents, bool) or not isinstance(wager_cents, int) or wager_cents <= 0:
        raise InputError(field, f"a wager is a positive whole number of cents, not {wager_cents!r}")
    return wager_cents


__all__ = ["LOSE", "PayAward", "PayLike", "PaytableLike", "check_wager_cents", "kind_value", "pay_table",
           "received_cents"]

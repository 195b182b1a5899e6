"""Props & Hops (§ 668a.2-668a.4) as a state machine fed one roll at a time.

Every wager except Six Eight Shake is decided by the next roll. Wagers are made before the dice
are shaken (§ 668a.2(a)): here, between rolls. After a roll the dealer collects the losing
wagers before paying the winning ones (§ 668a.3(i)); within each, seats are taken from the
dealer's right counterclockwise (§ 668a.3(e)), i.e. highest seat number first.

A bet is offered when the paytable gives odds for it. The Any Craps, Any Seven and Any Doubles
wagers of the earlier temporary rules (§ 585.2(f)(2)-(4)) have no odds in our copy of the
regulations and are offered only when an operator's paytable gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import combinations

from controller.awards import Award
from controller.dice.layout import EXAMPLE_LAYOUT, HOPS, HopLayout
from controller.dice.pays import LOSE, PayAward, PaytableLike, check_wager_cents, pay_table, received_cents
from controller.dice.roll import Roll, parse_roll
from controller.dice.six_eight_shake import BET as SIX_EIGHT_SHAKE
from controller.dice.six_eight_shake import SixEightShakeWager
from controller.errors import InputError, RulesError
from controller.games import HandKind
from controller.positions import settlement_order

SEATS = range(1, 7)  # § 668a.1(a): betting positions for six players
REMOVED = "removed"

_FACE = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
_TOTAL = {2: "two", 4: "four", 6: "six", 8: "eight", 10: "ten", 12: "twelve"}

Rule = Callable[[Roll, HopLayout], str | None]  # the outcome key the roll wins, or None


@dataclass(frozen=True)
class Bet:
    name: str
    section: str
    pay_keys: tuple[str, ...]  # paytable keys the bet needs; it is offered when all are given
    rule: Rule | None  # None: not decided by one roll (Six Eight Shake)

    def outcome(self, roll: Roll, layout: HopLayout = EXAMPLE_LAYOUT) -> str:
        if self.rule is None:
            raise ValueError(f"{self.name} is not a single-roll wager")
        return self.rule(roll, layout) or LOSE


def _double(face: int) -> Rule:
    return lambda r, _l: "double" if r.first == r.second == face else None


def _any_number(a: int, b: int) -> Rule:
    return lambda r, _l: "any-number" if r.combination == (a, b) else None


def _field(r: Roll, _l: HopLayout) -> str | None:
    # § 668a.4: 2 or 12 pays 2 to 1; 3, 4, 9, 10 or 11 pays 1 to 1
    if r.total in (2, 12):
        return "field-2-or-12"
    return "field" if r.total in (3, 4, 9, 10, 11) else None


def _hop(hop: str) -> Rule:
    return lambda r, layout: hop if r.combination in layout.combinations(hop) else None


def _bets() -> dict[str, Bet]:
    bets = [
        Bet(f"{_TOTAL[2 * f]}-the-hardway", f"§ 668a.2(d)({i})", ("double",), _double(f))
        for i, f in enumerate(range(1, 7), 1)
    ]
    bets += [
        Bet(f"{_FACE[a]}-{_FACE[b]}", f"§ 668a.2(e)({i})", ("any-number",), _any_number(a, b))
        for i, (a, b) in enumerate(combinations(range(1, 7), 2), 1)
    ]
    bets.append(Bet("field", "§ 668a.2(f)(1)", ("field-2-or-12", "field"), _field))
    bets += [Bet(h, f"§ 668a.2(f)({i})", (h,), _hop(h)) for i, h in enumerate(HOPS, 2)]
    bets += [
        Bet("one-six-and-under", "§ 668a.2(f)(6)", ("one-six-and-under",),
            lambda r, _l: "one-six-and-under" if r.combination == (1, 6) or r.total < 7 else None),
        Bet("three-four-and-over", "§ 668a.2(f)(7)", ("three-four-and-over",),
            lambda r, _l: "three-four-and-over" if r.combination == (3, 4) or r.total > 7 else None),
        Bet(SIX_EIGHT_SHAKE, "§ 668a.2(f)(8)", (SIX_EIGHT_SHAKE,), None),
        Bet("any-craps", "§ 585.2(f)(2)", ("any-craps",),
            lambda r, _l: "any-craps" if r.total in (2, 3, 12) else None),
        Bet("any-seven", "§ 585.2(f)(3)", ("any-seven",), lambda r, _l: "any-seven" if r.total == 7 else None),
        Bet("any-doubles", "§ 585.2(f)(4)", ("any-doubles",), lambda r, _l: "any-doubles" if r.is_double else None),
    ]
    return {b.name: b for b in bets}


BETS: dict[str, Bet] = _bets()
BET_ORDER: dict[str, int] = {name: i for i, name in enumerate(BETS)}
EARLIER_RULES_BETS = ("any-craps", "any-seven", "any-doubles")  # § 585.2 only
OPTIONAL_KEYS = (SIX_EIGHT_SHAKE, *EARLIER_RULES_BETS)  # § 668a.1(b)(5): "if offering" Six Eight Shake
KNOWN_KEYS: tuple[str, ...] = tuple(dict.fromkeys(k for b in BETS.values() for k in b.pay_keys))


def single_roll_outcome(bet: str, roll: Roll, layout: HopLayout = EXAMPLE_LAYOUT) -> str:
    """The outcome key a single-roll `bet` gets from `roll` ("lose" if it loses)."""
    return BETS[bet].outcome(roll, layout)


@dataclass(frozen=True)
class PropsWager:
    seat: int
    bet: str
    wager_cents: int
    roll: int  # index of the roll it is placed before
    tag: int | None = None


@dataclass(frozen=True)
class PropsResolution:
    seat: int
    bet: str
    wager_cents: int
    roll: int  # index of the roll that settled it (for a removal: the roll it was taken down before)
    outcome: str  # a paytable key, "lose" or "removed"
    award: Award | None
    amount_cents: int  # received, the wager included for "to 1" odds; 0 for a loss; the wager if removed
    placed_before_roll: int
    tag: int | None = None


def _order(r: PropsResolution) -> tuple[int, int, int]:
    """The highest seat first (§ 668a.3(e): the card tables' order), then the bets in the layout's order."""
    return (*settlement_order(r.seat), BET_ORDER[r.bet])


@dataclass(frozen=True)
class PropsAndHops:
    paytable_id: str
    awards: tuple[tuple[str, PayAward], ...]
    layout: HopLayout = EXAMPLE_LAYOUT
    rolls: int = 0  # rolls recorded; the next roll has this index
    wagers: tuple[PropsWager, ...] = ()  # single-roll wagers on the next roll
    shakes: tuple[SixEightShakeWager, ...] = ()  # open Six Eight Shake wagers

    @classmethod
    def new(cls, paytable: PaytableLike, layout: HopLayout | None = None, field: str = "paytable") -> PropsAndHops:
        awards = pay_table(paytable, HandKind.PROPS_AND_HOPS.value, field)
        have = dict(awards)
        unknown = [k for k in have if k not in KNOWN_KEYS]
        if unknown:
            raise InputError(field, f"paytable {paytable.id!r} has outcomes Props & Hops does not know: {', '.join(unknown)}")
        missing = [k for k in KNOWN_KEYS if k not in have and k not in OPTIONAL_KEYS]
        if missing:
            raise InputError(field, f"paytable {paytable.id!r} gives no odds for {', '.join(missing)} (§ 668a.4)")
        return cls(paytable.id, awards, layout if layout is not None else EXAMPLE_LAYOUT)

    @property
    def offered(self) -> tuple[str, ...]:
        have = dict(self.awards)
        return tuple(b.name for b in BETS.values() if all(k in have for k in b.pay_keys))

    def shake_at(self, seat: int) -> SixEightShakeWager | None:
        return next((s for s in self.shakes if s.seat == seat), None)

    def place(self, seat: object, bet: object, wager_cents: object, tag: int | None = None) -> PropsAndHops:
        """A wager made before the next roll is shaken (§ 668a.2(a))."""
        if isinstance(seat, bool) or not isinstance(seat, int) or seat not in SEATS:
            raise InputError("seat", f"Props & Hops seats are numbered 1 to 6 (§ 668a.1(a)), not {seat!r}")
        if not isinstance(bet, str) or bet not in BETS:
            raise InputError("bet", f"unknown bet {bet!r}; the bets: {', '.join(BETS)}")
        cents = check_wager_cents(wager_cents)
        if bet not in self.offered:
            if bet in EARLIER_RULES_BETS:
                why = (f"{bet} is a wager of the earlier temporary rules ({BETS[bet].section}) whose odds are not in "
                       f"the regulations; paytable {self.paytable_id!r} gives none, so it is not offered")
            else:
                why = f"paytable {self.paytable_id!r} gives no odds for {bet}, so it is not offered"
            raise RulesError("bet", why)
        if bet == SIX_EIGHT_SHAKE:
            if (open_ := self.shake_at(seat)) is not None:
                raise RulesError(
                    "seat",
                    f"seat {seat} already has a Six Eight Shake wager, made before roll {open_.placed_before_roll} "
                    "and not yet resolved",
                )
            shake = SixEightShakeWager(seat, cents, self.rolls, tag=tag)
            return replace(self, shakes=(*self.shakes, shake))
        if any(w.seat == seat and w.bet == bet for w in self.wagers):
            raise RulesError("bet", f"seat {seat} already has a {bet} wager on roll {self.rolls}")
        return replace(self, wagers=(*self.wagers, PropsWager(seat, bet, cents, self.rolls, tag)))

    def remove_six_eight_shake(self, seat: int) -> tuple[PropsAndHops, PropsResolution]:
        """The player takes the wager down, allowed any time before a seven (§ 668a.2(f)(8))."""
        shake = self.shake_at(seat)
        if shake is None:
            raise RulesError(
                "seat",
                f"seat {seat} has no unresolved Six Eight Shake wager to take down; a wager may be removed only "
                "before a seven is rolled (§ 668a.2(f)(8))",
            )
        out = PropsResolution(
            seat, SIX_EIGHT_SHAKE, shake.wager_cents, self.rolls, REMOVED, None, shake.wager_cents,
            shake.placed_before_roll, shake.tag,
        )
        return replace(self, shakes=tuple(s for s in self.shakes if s is not shake)), out

    def roll(self, dice: object) -> tuple[PropsAndHops, tuple[PropsResolution, ...]]:
        """Record one roll and settle what it decides: losers collected first, then winners paid (§ 668a.3(i))."""
        r: Roll = parse_roll(dice)
        pays = dict(self.awards)
        settled: list[PropsResolution] = []

        def resolution(seat: int, bet: str, cents: int, outcome: str, placed: int, tag: int | None) -> PropsResolution:
            award = pays.get(outcome)
            amount = received_cents(award, cents) if award is not None else 0
            return PropsResolution(seat, bet, cents, self.rolls, outcome, award, amount, placed, tag)

        for w in self.wagers:
            outcome = BETS[w.bet].outcome(r, self.layout)
            settled.append(resolution(w.seat, w.bet, w.wager_cents, outcome, w.roll, w.tag))
        still_open: list[SixEightShakeWager] = []
        for s in self.shakes:
            after, decided = s.step(r)
            if decided is None:
                still_open.append(after)
            else:
                settled.append(resolution(s.seat, SIX_EIGHT_SHAKE, s.wager_cents, decided, s.placed_before_roll, s.tag))
        losers = sorted((x for x in settled if x.award is None), key=_order)
        winners = sorted((x for x in settled if x.award is not None), key=_order)
        state = replace(self, rolls=self.rolls + 1, wagers=(), shakes=tuple(still_open))
        return state, (*losers, *winners)


__all__ = ["BETS", "BET_ORDER", "EARLIER_RULES_BETS", "KNOWN_KEYS", "OPTIONAL_KEYS", "REMOVED", "SEATS", "Bet",
           "PropsAndHops", "PropsResolution", "PropsWager", "Rule", "single_roll_outcome"]

"""The exact odds of one wager under one paytable: outcomes, return at a meter, break-even meter.

Return is what the wager is expected to receive divided by what it costs: every outcome's
probability times what that outcome pays at the given meter, percentage awards floored to the
cent as they are paid (design conventions), plus the bonuses paid on top of the wager's own
outcome (Envy Bonus, Magic Card, Lucky Bonus). All arithmetic is in integers and Fractions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from math import ceil

from controller.awards import Award, PercentOfMeter
from controller.cards import DECK_SIZE
from controller.errors import InputError, RulesError
from controller.games import CardRule, Game, HandKind, Wager, game, wager
from controller.hands.categories import category_from_label
from controller.money import UNITS_PER_CENT, format_dollars_human
from controller.odds.counts import hand_counts
from controller.paytables.model import ANY_WAGER, Pay, Paytable, hand_type

LOSING = "other"  # the hand label of the losing remainder: every outcome no row pays

# Cards a Magic Card can match: the five of a five-card Poker hand (§ 639a.1 "Magic Card Bonus";
# § 641a.1: the dealer's first five; § 643a.1: the player's three and the two community cards).
MAGIC_CARD_MATCHES = 5


@dataclass(frozen=True)
class Outcome:
    """One row of the paytable (or the losing remainder) and how often it happens."""

    hand: str  # the paytable's hand label or dice outcome key; LOSING for the remainder
    min_rank: int | None  # the row's lowest first rank (a pair of jacks or better: 11)
    count: int | None  # deals out of the report's total; None for the dice Markov chains
    probability: Fraction
    award: str  # as the paytable states it; "" for the remainder
    received_cents: int  # what one wager receives at the report's meter (0 for the remainder)


@dataclass(frozen=True)
class Bonus:
    """A payout on top of the wager's own outcome: Envy Bonus, Magic Card or Lucky Bonus."""

    kind: str  # "envy", "magic-card", "lucky-bonus"
    hand: str  # the envy hand label, or the kind again
    count: int
    total: int  # count/total is the chance of one occurrence
    probability: Fraction
    occurrences: int  # chances per round: the other players for envy, else 1
    award: str
    received_cents: int


@dataclass(frozen=True)
class OddsReport:
    game_id: str
    wager_id: str
    paytable_id: str
    bet: str | None  # the Props & Hops bet, else None
    meter_units: int
    wager_cents: int
    players: int
    lucky_positions: int | None
    total: int | None  # equally likely deals counted; None for the dice Markov chains
    method: str
    outcomes: tuple[Outcome, ...]  # paytable order, then the losing remainder
    bonuses: tuple[Bonus, ...]
    return_: Fraction  # expected amount received / amount wagered, at meter_units
    break_even_meter_units: int | None  # whole cents; None when no award is a percentage of the meter
    break_even_linear_units: Fraction | None  # the exact root of the return without flooring
    notes: tuple[str, ...] = ()

    @property
    def expected_received_cents(self) -> Fraction:
        return self.return_ * self.wager_cents


@dataclass(frozen=True)
class _Row:
    pay: Pay | None
    count: int | None
    probability: Fraction


def received_cents(award: Award, meter_units: int, wager_cents: int) -> int:
    """What an award pays one wager: a percentage of the meter floored to the cent."""
    if isinstance(award, PercentOfMeter):
        return award.meter_units(meter_units) // UNITS_PER_CENT
    return award.received_cents(wager_cents)


def _check_int(value: object, field: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"must be a whole number, not {value!r}")
    if value < low or (high is not None and value > high):
        span = f"at least {low}" if high is None else f"{low} to {high}"
        raise InputError(field, f"must be {span}, not {value}")
    return value


def _check_paytable(g: Game, w: Wager, paytable: object) -> Paytable:
    if not isinstance(paytable, Paytable):
        raise InputError("paytable", f"must be a Paytable, not {type(paytable).__name__}")
    if paytable.kind is not w.hand:
        raise RulesError("paytable", f"{paytable.id!r} pays {paytable.kind.value} hands; the {w.title} is paid on {w.hand.value} hands")
    if paytable.games and g.id not in paytable.games:
        raise RulesError("paytable", f"{paytable.id!r} is for {', '.join(paytable.games)}, not {g.id}")
    if paytable.wager not in (ANY_WAGER, w.id):
        raise RulesError("paytable", f"{paytable.id!r} is for the {paytable.wager!r} wager, not {w.id!r}")
    return paytable


def _card_rows(w: Wager, paytable: Paytable) -> tuple[list[_Row], int, str]:
    """Rows in paytable order plus the losing remainder, from exact hand counts."""
    by_hand: Mapping[tuple[IntEnum, int | None], int]
    if w.dealer_rule is CardRule.DEALER_BEST_FOUR:
        # The Bad Beat Bonus is paid on the losing hand of the player's and the dealer's (§ 641a.7(d)(6)).
        from controller.odds import badbeat

        if any(p.min_rank is not None for p in paytable.pays):
            raise RulesError("paytable", f"{paytable.id!r}: a Bad Beat row is paid on the losing hand's category; a min_rank is not supported")
        bad_beat = badbeat.bad_beat_counts()
        by_hand = {(c, None): n for c, n in bad_beat.by_losing_hand.items()}
        total, method = bad_beat.total, bad_beat.method
    else:
        counts = hand_counts(w.hand, w.rule, three_card_ace_low=w.three_card_ace_low)
        by_hand = {key: n for key, n in counts.by_hand.items()}  # keys of (category, rank): a rank is never None
        total, method = counts.total, counts.method
    per_row = [0] * len(paytable.pays)
    paid = 0
    for (category, first_rank), n in by_hand.items():
        pay = paytable.pay_for(category, first_rank)
        if pay is None:
            continue
        index = next(i for i, p in enumerate(paytable.pays) if p is pay)
        per_row[index] += n
        paid += n
    rows = [_Row(p, n, Fraction(n, total)) for p, n in zip(paytable.pays, per_row, strict=True)]
    rows.append(_Row(None, total - paid, Fraction(total - paid, total)))
    return rows, total, method


def _dice_rows(g: Game, w: Wager, paytable: Paytable, bet: str | None) -> tuple[list[_Row], str]:
    from controller.dice import odds as dice_odds  # only dice games need the dice modules

    if w.hand is HandKind.HOT_ROLLER:
        from controller.dice.hot_roller import OUTCOME_KEYS

        probs: dict[str, Fraction] = {}
        for k, p in dice_odds.hot_roller_outcomes().items():
            key = OUTCOME_KEYS.get(k, LOSING)
            probs[key] = probs.get(key, Fraction(0)) + p
        rows = [_Row(p, None, probs.get(p.hand, Fraction(0))) for p in paytable.pays]
        method = "Markov chain over the combinations thrown before a seven (§ 623c.1(g)), exact"
    else:
        from controller.dice.props_and_hops import BETS

        if bet is None:
            raise InputError("bet", f"{g.title} has many bets; name one of: {', '.join(BETS)}")
        probs = dice_odds.props_and_hops_outcomes(bet)
        keys = BETS[bet].pay_keys
        missing = [k for k in keys if not any(p.hand == k for p in paytable.pays)]
        if missing:
            raise RulesError("bet", f"paytable {paytable.id!r} gives no odds for {', '.join(missing)}, so it does not offer {bet!r}")
        rows = [_Row(p, None, probs.get(p.hand, Fraction(0))) for p in paytable.pays if p.hand in keys]
        method = "Markov chain until a seven (§ 668a.2(f)(8)), exact" if BETS[bet].rule is None else "all 36 rolls of two dice"
    rows.append(_Row(None, None, 1 - sum((r.probability for r in rows), Fraction(0))))
    return rows, method


def _label(pay: Pay | None) -> str:
    return LOSING if pay is None else pay.hand


def _bonuses(
    g: Game, w: Wager, paytable: Paytable, wager_cents: int, players: int, lucky_positions: int | None,
    notes: list[str], wins: int = 0, total: int = 1,
) -> list[tuple[Bonus, Award]]:
    out: list[tuple[Bonus, Award]] = []
    if paytable.envy is not None:
        row = paytable.envy.by_wager.get(wager_cents)
        if row is None:
            sizes = ", ".join(format_dollars_human(c) for c in paytable.envy.wager_sizes)
            notes.append(f"no Envy Bonus is stated for a {format_dollars_human(wager_cents)} wager (only {sizes}); none is counted")
        else:
            # Every other player's hand has the same distribution as this one, so the expected
            # envy is (players - 1) times one other hand's chance: linearity of expectation.
            counts = hand_counts(w.hand, w.envy_rule or w.rule, three_card_ace_low=w.three_card_ace_low)
            enum = hand_type(w.hand)
            assert enum is not None
            for label, fixed in sorted(row.items(), key=lambda kv: category_from_label(enum, kv[0]), reverse=True):
                n = counts.count(category_from_label(enum, label))
                out.append((Bonus("envy", label, n, counts.total, Fraction(n, counts.total), players - 1,
                                  fixed.describe(), fixed.cents), fixed))
    if lucky_positions is not None and not (w.magic_and_lucky and paytable.lucky_bonus is not None):
        raise InputError("lucky_positions", f"the {w.title} under {paytable.id!r} has no Lucky Bonus")
    if w.magic_and_lucky:
        # § 639a.12(e)(3): the system draws a card (of 52, independently of the deal) and a seat.
        # Both are "additional" payouts to a winning hand (docs/rules.md), so each needs a win:
        # P(win and match) = wins/total * 5/52, P(win and lucky) = wins/total * 1/positions.
        if paytable.magic_card is not None:
            award = paytable.magic_card
            n, d = wins * MAGIC_CARD_MATCHES, total * DECK_SIZE
            out.append((Bonus("magic-card", "magic-card", n, d, Fraction(n, d), 1, award.describe(), 0), award))
        if paytable.lucky_bonus is not None:
            # § 639a.1 "Lucky Bonus": a player's seat, or the dealer's position where a wager
            # may be placed on the dealer's hand.
            positions = lucky_positions or g.max_seats + (1 if w.dealer_bets else 0)
            award = paytable.lucky_bonus
            n, d = wins, total * positions
            out.append((Bonus("lucky-bonus", "lucky-bonus", n, d, Fraction(n, d), 1, award.describe(), 0), award))
    return out


def _return_cents(
    rows: list[tuple[Fraction, Award]], meter_units: int, wager_cents: int
) -> Fraction:
    """Expected cents received: Σ weight × award paid at this meter."""
    return sum((p * received_cents(a, meter_units, wager_cents) for p, a in rows), Fraction(0))


def _linear(rows: list[tuple[Fraction, Award]], wager_cents: int) -> tuple[Fraction, Fraction, Fraction]:
    """The return without flooring is (fixed + slope·M) / wager: (fixed cents, slope in cents
    per meter unit, the chance of a percentage award)."""
    percent = [(p, a) for p, a in rows if isinstance(a, PercentOfMeter)]
    fixed = sum((p * received_cents(a, 0, wager_cents) for p, a in rows if not isinstance(a, PercentOfMeter)), Fraction(0))
    slope = sum((p * a.percent / 100 for p, a in percent), Fraction(0)) / UNITS_PER_CENT
    return fixed, slope, sum((p for p, _ in percent), Fraction(0))


def break_even_linear(rows: list[tuple[Fraction, Award]], wager_cents: int) -> Fraction | None:
    """The meter (units, exact) at which the return would reach 1 if awards were not floored."""
    fixed, slope, _ = _linear(rows, wager_cents)
    return None if slope == 0 else max(Fraction(0), (wager_cents - fixed) / slope)


def break_even_meter(rows: list[tuple[Fraction, Award]], wager_cents: int) -> int | None:
    """The least whole-cent meter (in units) at which the return as paid reaches 1.

    Without flooring the return is linear in the meter, a + s·M; the exact root, rounded up to
    the cent, is the first candidate. Flooring each percentage award to the cent can only lower
    the return, by less than a cent per award, so the answer lies between that root and the root
    of a + s·M - Σp = wager; a binary search over whole cents finds it.
    """
    fixed, slope, loss = _linear(rows, wager_cents)  # flooring loses less than a cent per award
    if slope == 0:
        return None

    def reaches(cents: int) -> bool:
        return _return_cents(rows, cents * UNITS_PER_CENT, wager_cents) >= wager_cents

    low = max(0, ceil((wager_cents - fixed) / slope / UNITS_PER_CENT))
    high = max(low, ceil((wager_cents - fixed + loss) / slope / UNITS_PER_CENT))
    assert reaches(high), "the return at the upper bound must reach 1"
    while low < high:
        mid = (low + high) // 2
        if reaches(mid):
            high = mid
        else:
            low = mid + 1
    return low * UNITS_PER_CENT


def percent_of_meter_chance(game_id: str, wager_id: str, paytable: Paytable) -> Fraction:
    """The chance that one wager wins an award that is a percentage of the meter (its rows' hands counted
    exactly; 0 without such a row, counting nothing). What the alerting rules compare a table's hits with."""
    g = game(game_id, "game")
    w = wager(g, wager_id, "wager")
    pt = _check_paytable(g, w, paytable)
    if g.dice or not any(isinstance(p.award, PercentOfMeter) for p in pt.pays):
        return Fraction(0)
    rows, _, _ = _card_rows(w, pt)
    return sum((r.probability for r in rows if r.pay is not None and isinstance(r.pay.award, PercentOfMeter)),
               Fraction(0))


def odds_report(
    game_id: str,
    wager_id: str,
    paytable: Paytable,
    *,
    meter_units: int,
    wager_cents: int = 100,
    players: int = 1,
    lucky_positions: int | None = None,
    bet: str | None = None,
) -> OddsReport:
    """Exact outcomes, return at `meter_units` and break-even meter of a wager under a paytable.

    `players` is the number of players dealt a hand, this one included (for the Envy Bonus);
    `lucky_positions` the positions the Lucky Bonus is drawn from (default: the game's seats,
    plus the dealer's position when a wager may be placed on the dealer's hand); `bet` names the
    Props & Hops bet.
    """
    g = game(game_id, "game")
    w = wager(g, wager_id, "wager")
    pt = _check_paytable(g, w, paytable)
    meter_units = _check_int(meter_units, "meter_units", 0)
    wager_cents = _check_int(wager_cents, "wager_cents", 1)
    players = _check_int(players, "players", 1, max(g.max_seats, 1))
    if lucky_positions is not None:
        lucky_positions = _check_int(lucky_positions, "lucky_positions", 1)
    if bet is not None and w.hand is not HandKind.PROPS_AND_HOPS:
        raise InputError("bet", f"only Props & Hops has bets to name; the {w.title} has none")

    notes: list[str] = []
    total: int | None
    if g.dice:
        rows, method = _dice_rows(g, w, pt, bet)
        total = None
    else:
        rows, total, method = _card_rows(w, pt)
    wins = sum(r.count or 0 for r in rows if r.pay is not None)
    bonuses = _bonuses(g, w, pt, wager_cents, players, lucky_positions, notes, wins, total or 1)

    weighted = [(r.probability, r.pay.award) for r in rows if r.pay is not None]
    weighted += [(b.probability * b.occurrences, a) for b, a in bonuses]
    expected = _return_cents(weighted, meter_units, wager_cents)

    outcomes = tuple(
        Outcome(
            hand=_label(r.pay),
            min_rank=None if r.pay is None else r.pay.min_rank,
            count=r.count,
            probability=r.probability,
            award="" if r.pay is None else r.pay.award.describe(),
            received_cents=0 if r.pay is None else received_cents(r.pay.award, meter_units, wager_cents),
        )
        for r in rows
    )
    paid_bonuses = tuple(
        Bonus(b.kind, b.hand, b.count, b.total, b.probability, b.occurrences, b.award,
              received_cents(a, meter_units, wager_cents))
        for b, a in bonuses
    )
    if players == 1 and any(b.kind == "envy" for b, _ in bonuses):
        notes.append("Envy Bonus counts only with other players at the table (players > 1)")
    return OddsReport(
        game_id=g.id,
        wager_id=w.id,
        paytable_id=pt.id,
        bet=bet,
        meter_units=meter_units,
        wager_cents=wager_cents,
        players=players,
        lucky_positions=next(
            (b.total // (total or 1) for b in paid_bonuses if b.kind == "lucky-bonus"), None
        ),
        total=total,
        method=method,
        outcomes=outcomes,
        bonuses=paid_bonuses,
        return_=expected / wager_cents,
        break_even_meter_units=break_even_meter(weighted, wager_cents),
        break_even_linear_units=break_even_linear(weighted, wager_cents),
        notes=tuple(notes),
    )


__all__ = ["LOSING", "MAGIC_CARD_MATCHES", "Bonus", "OddsReport", "Outcome", "break_even_linear", "break_even_meter",
           "odds_report", "percent_of_meter_chance", "received_cents"]

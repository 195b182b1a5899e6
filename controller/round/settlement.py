"""Settlement of one wager for one round of a card game, as a pure function.

Given the game, the wager, its paytable, the meter, the seats with their cards, the community and
dealer cards, who wagered on the dealer's hand, the Magic Card and the Lucky Bonus position, it
returns every payout in the order the rules settle them and the meter after.

The rules followed, by section:
- Order: "beginning with the player farthest to the dealer's right and continuing around the table
  in a counterclockwise direction" (§ 639a.11(c), § 641a.11(c), § 667a.11(d)); with seats numbered
  1..N clockwise from the dealer's far left that is seat N first, then N-1, ..., 1.
- A percentage award is paid from "the amount on the meter when it is the player's turn to be paid"
  (§ 639a.12(d)(5), § 667a.12(d)(4)); a second qualifying hand later in the round is paid from
  what the meter holds then.
- Only the highest ranking hand formed is paid (§ 639a.12(d)(2), § 639a.12(e)(2), § 667a.12(d)(2)).
- Folds: § 639a.11(b) (a folded Caribbean Stud player forfeits the Progressive Payout Wager but not
  the Five Card Hand Bonus Wager, and keeps the right to an Envy Bonus), § 641a.11(b) (likewise for
  Four Card Poker's progressive wagers), § 667a.11(b) (a folded Flop Poker player stays eligible for
  the Three Card Bonus and Progressive Flop Wagers; the fold is the absence of a Flop Wager).
  Let It Ride has no fold that touches these wagers (§ 643a.7(j)).
- Envy Bonus: paid to each progressive wagerer for each *other* player holding an Envy Bonus
  Qualifying Hand, several if several hold one, never for one's own hand or the dealer's
  (§ 639a.11(c)(5)(v), § 641a.11(c)(5)(v)); the amount depends on the receiver's wager
  (§ 639a.12(d)(6)). A folded hand is collected before the dealer's hand is revealed
  (§ 639a.11(c), § 641a.11(c)), so it holds no hand for an Envy Bonus.
- Five Card Hand Bonus on the dealer's hand: a percentage award is divided equally among the
  players who wagered on the dealer's hand (§ 639a.12(e)(2), § 641a.12(g)(2)). The share is
  locked at the turn of the first of them in settlement order; indivisible cents stay on the meter.
- Magic Card and Lucky Bonus are "additional" payouts (§ 639a.1, § 641a.1, § 643a.1, § 639a.12(e)(3)):
  paid on top of a winning Five Card Hand Bonus hand, never alone (docs/rules.md says why).
- Bad Beat Bonus (§ 641a.7(d)(6), § 641a.11(c)(6)): paid on the rank of the losing hand when the
  player's hand is two pair or better and the dealer's outranks it, or the dealer's is two pair or
  better and the player's outranks it.
- Floorperson validation: every progressive payout (§ 639a.11(c)(5)(iii), § 641a.11(c)(5)(iii),
  § 667a.11(d)(2)(iii)); a Five Card Hand Bonus payout of 500 for 1 or more or a percentage of the
  meter (§ 639a.11(c)(6)(ii), § 641a.11(c)(7)(ii)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from controller.awards import Award, ForOne, PercentOfMeter
from controller.cards import card_str
from controller.errors import InputError, RulesError
from controller.games import CardRule, FoldEffect, Game, HandKind, Wager
from controller.hands import four, poker5, three
from controller.hands.categories import Four, Poker5, Three
from controller.hands.select import Hand, form_hand
from controller.meter.award import RESET_FLOOR_CENTS, take_percent
from controller.money import UNITS_PER_CENT, format_dollars_human
from controller.paytables import Paytable
from controller.paytables.model import ANY_WAGER
from controller.positions import DEALER, DEALER_POSITION, settlement_order


def in_settlement_order(seats: Iterable[Seat]) -> list[Seat]:
    """The seats in the order the rules settle them (controller.positions.settlement_order): seat N first."""
    return sorted(seats, key=lambda s: settlement_order(s.seat))

_CATEGORY_KINDS = {HandKind.POKER5: Poker5, HandKind.THREE: Three, HandKind.FOUR: Four}
_FIRST_RANK = {HandKind.POKER5: poker5.first_rank, HandKind.THREE: three.first_rank, HandKind.FOUR: four.first_rank}
_BAD_BEAT_MINIMUM = Four.TWO_PAIR  # § 641a.7(d)(6)
_VALIDATION_ODDS = 500  # § 639a.11(c)(6)(ii): "odds of 500 for 1"
_FORFEITED_BY_FOLD = (FoldEffect.FORFEIT, FoldEffect.FORFEIT_KEEP_ENVY)


@dataclass(frozen=True)
class Seat:
    """A seat of the round: its wager on its own hand, whether it folded, and its cards."""

    seat: int
    wager: int = 0  # cents wagered on the player's own hand (0: no wager)
    folded: bool = False
    cards: tuple[int, ...] = ()
    # Settle only the Envy Bonuses this seat receives for other hands, not its own hand (which is not
    # given): a jackpot claim settles one hand at a time.
    envy_only: bool = False


@dataclass(frozen=True)
class Round:
    """One wager of a round to settle: the game, the wager and its paytable, the meter, every seat, the community
    and dealer's cards, the wagers on the dealer's hand, and the Magic Card and Lucky Bonus position drawn."""

    game: Game
    wager: Wager
    paytable: Paytable
    meter: int  # meter units before the first payout of the round
    reset: int  # meter units
    seats: tuple[Seat, ...]
    community: tuple[int, ...] = ()
    dealer: tuple[int, ...] = ()
    dealer_wagers: Mapping[int, int] = field(default_factory=dict)  # seat -> cents on the dealer's hand
    magic_card: int | None = None
    lucky_seat: int | None = None  # a seat number, or DEALER_POSITION


@dataclass(frozen=True)
class Payout:
    """One payout to one seat: what it is (`kind`; controller.round.payout_kind says it in words), on whose hand,
    the award as the paytable states it and the cents received, who pays it and whether it needs a supervisor."""

    seat: int
    wager: int  # cents of the wager this pays
    kind: str  # "paytable", "envy", "magic-card", "lucky-bonus"
    hand_of: str  # "player", DEALER, or "seat N" (the envy holder)
    hand: str  # label of the hand paid on ("" for Lucky Bonus)
    cards: tuple[int, ...]
    award: str  # as the paytable states it
    amount: int  # cents the player receives (a returned wager included for "to 1")
    paid_by: str  # "attendant" for meter awards, "table" otherwise
    requires_validation: bool
    meter_before: int | None = None
    meter_after: int | None = None
    shared_by: int = 1


@dataclass(frozen=True)
class Settlement:
    """A round settled: its payouts in settlement order, the meter before and after, the seed added to restore the
    reset amount, and the seats a fold forfeited."""

    payouts: tuple[Payout, ...]
    meter_before: int
    meter_after: int
    seeded: int  # meter units added to restore the reset amount
    forfeited: tuple[int, ...]  # seats whose wager a fold forfeited

    @property
    def meter_paid_cents(self) -> int:
        """Cents the meter pays (by an attendant)."""
        return sum(p.amount for p in self.payouts if p.paid_by == "attendant")

    @property
    def table_paid_cents(self) -> int:
        """Cents the table pays (the dealer): every award not taken from the meter."""
        return sum(p.amount for p in self.payouts if p.paid_by == "table")


def settle(rnd: Round) -> Settlement:
    """Every payout of the round's wager in settlement order, and the meter after."""
    _check_round(rnd)
    state = _MeterState(rnd.meter, rnd.reset)
    payouts: list[Payout] = []
    forfeited: list[int] = []
    w = rnd.wager
    order = in_settlement_order(rnd.seats)
    hands = {s.seat: _player_hand(rnd, s) for s in order}
    dealer_hand = _dealer_hand(rnd)
    dealer_share: tuple[int, Payout] | None = None  # (cents per share, template) locked at first turn

    for s in order:
        own = hands[s.seat]
        folds_away = s.folded and w.fold in _FORFEITED_BY_FOLD
        if s.envy_only:
            if s.wager and rnd.paytable.envy is not None and not s.folded:
                payouts.extend(_envy(rnd, s, hands))
            continue
        if s.wager:
            if folds_away:
                forfeited.append(s.seat)
            else:
                payouts.extend(_own_hand_payouts(rnd, s, own, dealer_hand, state))
            if rnd.paytable.envy is not None and not (s.folded and w.fold is FoldEffect.FORFEIT):
                payouts.extend(_envy(rnd, s, hands))
        on_dealer = rnd.dealer_wagers.get(s.seat, 0)
        if on_dealer and folds_away:
            if s.seat not in forfeited:
                forfeited.append(s.seat)
        elif on_dealer and dealer_hand is not None:
            p, dealer_share = _dealer_payout(rnd, s.seat, on_dealer, dealer_hand, state, dealer_share)
            if p:
                payouts.append(p)
                if w.magic_and_lucky:
                    payouts.extend(_magic_and_lucky(rnd, s.seat, on_dealer, dealer_hand, DEALER))

    return Settlement(
        payouts=tuple(payouts),
        meter_before=rnd.meter,
        meter_after=state.meter,
        seeded=state.seeded,
        forfeited=tuple(forfeited),
    )


def _own_hand_payouts(rnd: Round, s: Seat, own: Hand | None, dealer_hand: Hand | None,
                      state: _MeterState) -> list[Payout]:
    """What the seat's wager on its own hand pays (not folded away): the Bad Beat, or its paytable's award and
    the Magic Card and Lucky Bonus that follow it."""
    w = rnd.wager
    if w.id == "bad-beat":
        p = _bad_beat(rnd, s, own, dealer_hand)
        return [p] if p else []
    if own is None:
        return []
    p = _paytable_payout(rnd, s.seat, s.wager, own, "player", state)
    if not p:
        return []
    return [p, *(_magic_and_lucky(rnd, s.seat, s.wager, own, "player") if w.magic_and_lucky else [])]


class _MeterState:
    def __init__(self, meter: int, reset: int) -> None:
        self.meter = meter
        self.reset = reset
        self.seeded = 0

    def take(self, percent: Fraction, shares: int = 1) -> tuple[int, int, int]:
        """(cents per share, meter before, meter after)."""
        before = self.meter
        per_share, change = take_percent(self.meter, self.reset, percent, shares)
        self.meter = change.after
        self.seeded += change.seeded
        return per_share, before, change.after


def _folds_away(rnd: Round, seat_no: int) -> bool:
    seat = next(s for s in rnd.seats if s.seat == seat_no)
    return seat.folded and rnd.wager.fold in _FORFEITED_BY_FOLD


def _requires_validation(w: Wager, award: object) -> bool:
    if not w.progressive:
        return False
    if w.id != "five-card-hand-bonus":
        return True  # every progressive payout is validated by a floorperson
    if isinstance(award, PercentOfMeter):
        return True
    return isinstance(award, ForOne) and award.n >= _VALIDATION_ODDS


def _paytable_payout(rnd: Round, seat: int, wager: int, hand: Hand, hand_of: str, state: _MeterState) -> Payout | None:
    pay = rnd.paytable.pay_for(hand.category, _first_rank(hand))
    if pay is None:
        return None
    award = pay.award
    if isinstance(award, PercentOfMeter):
        cents, before, after = state.take(award.percent)
        return Payout(
            seat, wager, "paytable", hand_of, hand.label, hand.cards, award.describe(), cents, "attendant",
            _requires_validation(rnd.wager, award), before, after,
        )
    return Payout(
        seat, wager, "paytable", hand_of, hand.label, hand.cards, award.describe(),
        award.received_cents(wager), "table", _requires_validation(rnd.wager, award),
    )


def _dealer_payout(
    rnd: Round, seat: int, wager: int, hand: Hand, state: _MeterState, locked: tuple[int, Payout] | None
) -> tuple[Payout | None, tuple[int, Payout] | None]:
    """A Five Card Hand Bonus on the dealer's hand; a percentage award is shared (§ 639a.12(e)(2))."""
    pay = rnd.paytable.pay_for(hand.category, _first_rank(hand))
    if pay is None:
        return None, locked
    award = pay.award
    if not isinstance(award, PercentOfMeter):
        return Payout(
            seat, wager, "paytable", DEALER, hand.label, hand.cards, award.describe(),
            award.received_cents(wager), "table", _requires_validation(rnd.wager, award),
        ), locked
    if locked is None:
        sharers = sum(1 for seat_no, v in rnd.dealer_wagers.items() if v and not _folds_away(rnd, seat_no))
        cents, before, after = state.take(award.percent, sharers)
        template = Payout(
            seat, wager, "paytable", DEALER, hand.label, hand.cards, award.describe(), cents, "attendant",
            True, before, after, sharers,
        )
        return template, (cents, template)
    cents, template = locked
    return Payout(
        seat, wager, "paytable", DEALER, hand.label, hand.cards, award.describe(), cents, "attendant",
        True, template.meter_before, template.meter_after, template.shared_by,
    ), locked


def _envy(rnd: Round, receiver: Seat, hands: Mapping[int, Hand | None]) -> list[Payout]:
    envy = rnd.paytable.envy
    assert envy is not None
    kind = _CATEGORY_KINDS[rnd.wager.hand]
    qualifying = kind.from_label(envy.qualifying)
    table = envy.by_wager.get(receiver.wager)
    out: list[Payout] = []
    for other in in_settlement_order(rnd.seats):
        if other.seat == receiver.seat or other.folded:
            continue  # never for one's own hand; a folded hand was collected (§ 639a.11(c))
        hand = hands[other.seat]
        if hand is None or hand.category < qualifying:
            continue
        if table is None:
            sizes = ", ".join(format_dollars_human(c) for c in sorted(envy.by_wager))
            raise RulesError(
                f"seats[{_index(rnd, receiver.seat)}].wager",
                f"the envy table of {rnd.paytable.id} has no row for a {format_dollars_human(receiver.wager)} "
                f"wager; it has {sizes} (§ 639a.12(d)(6))",
            )
        amount = table.get(hand.label)
        if amount is None:
            continue
        out.append(Payout(
            receiver.seat, receiver.wager, "envy", f"seat {other.seat}", hand.label, hand.cards,
            amount.describe(), amount.cents, "table", False,
        ))
    return out


def _magic_and_lucky(rnd: Round, seat: int, wager: int, hand: Hand, hand_of: str) -> list[Payout]:
    out: list[Payout] = []
    pt = rnd.paytable
    if pt.magic_card is not None and rnd.magic_card is not None and rnd.magic_card in hand.cards:
        out.append(Payout(
            seat, wager, "magic-card", hand_of, hand.label, (rnd.magic_card,), pt.magic_card.describe(),
            _received(pt.magic_card, wager), "table", False,
        ))
    lucky_here = (hand_of == "player" and rnd.lucky_seat == seat) or (
        hand_of == DEALER and rnd.lucky_seat == DEALER_POSITION
    )
    if pt.lucky_bonus is not None and lucky_here:
        out.append(Payout(
            seat, wager, "lucky-bonus", hand_of, "", (), pt.lucky_bonus.describe(),
            _received(pt.lucky_bonus, wager), "table", False,
        ))
    return out


def _received(award: Award, wager: int) -> int:
    """What a wager receives of an award the table pays (Magic Card, Lucky Bonus, Bad Beat: never a percentage of
    the meter, which a paytable's check refuses there)."""
    if isinstance(award, PercentOfMeter):
        raise TypeError(f"{award.describe()} is a percentage of the meter: not an award the table pays")
    return award.received_cents(wager)


def _bad_beat(rnd: Round, s: Seat, own: Hand | None, dealer: Hand | None) -> Payout | None:
    if own is None or dealer is None:
        return None
    if own.value == dealer.value:
        return None
    losing = own if dealer.value > own.value else dealer
    winner_is_dealer = losing is own
    if losing.category < _BAD_BEAT_MINIMUM:
        return None
    pay = rnd.paytable.pay_for(losing.category, _first_rank(losing))
    if pay is None:
        return None
    return Payout(
        s.seat, s.wager, "paytable", "player" if winner_is_dealer else DEALER, losing.label, losing.cards,
        pay.award.describe(), _received(pay.award, s.wager), "table", False,
    )


def _first_rank(hand: Hand) -> int:
    """The rank that names the hand, for rows restricted by rank (a pair of jacks or better, four aces)."""
    return _FIRST_RANK[hand.kind](hand.value)


def _player_hand(rnd: Round, s: Seat) -> Hand | None:
    if not s.cards:
        return None
    try:
        return form_hand(
            rnd.wager.rule, rnd.wager.hand, s.cards, rnd.community, rnd.dealer,
            three_card_ace_low=rnd.wager.three_card_ace_low,
        )
    except InputError as e:
        raise e.at(f"seats[{_index(rnd, s.seat)}]") from None


def _dealer_hand(rnd: Round) -> Hand | None:
    rule = rnd.wager.dealer_rule
    if rule is None or not rnd.dealer:
        return None
    try:
        return form_hand(rule, rnd.wager.hand, (), rnd.community, rnd.dealer)
    except InputError as e:
        raise e.at("dealer") from None


def _check_round(rnd: Round) -> None:
    _check_what_is_settled(rnd)
    g, w = rnd.game, rnd.wager
    seen: set[int] = set()
    for i, s in enumerate(rnd.seats):
        _check_seat(rnd, f"seats[{i}]", s, seen)
    if rnd.community and len(rnd.community) not in g.community_cards or (
        not rnd.community and _needs_community(w) and g.community_cards != (0,)
    ):
        want = " or ".join(str(n) for n in g.community_cards)
        raise InputError("community", f"has {len(rnd.community)} cards; {g.title} uses {want} community cards")
    _check_dealer(rnd, seen)
    _check_draws(rnd)
    _check_duplicates(rnd)


def _check_what_is_settled(rnd: Round) -> None:
    """The game, its wager, the paytable and the meter go together."""
    g, w = rnd.game, rnd.wager
    if g.dice:
        raise RulesError("game", f"{g.title} is a dice game: settle it with its positions and rolls")
    if w.id not in g.wagers or g.wagers[w.id] is not w:
        raise RulesError("wager", f"{w.id!r} is not a wager of {g.title}")
    if g.id not in rnd.paytable.games or rnd.paytable.wager not in (w.id, ANY_WAGER):
        raise RulesError(
            "paytable", f"{rnd.paytable.id} is a paytable for {', '.join(rnd.paytable.games)} {rnd.paytable.wager}, "
            f"not for {g.id} {w.id}",
        )
    if rnd.paytable.pays_percent_of_meter:
        if rnd.reset < RESET_FLOOR_CENTS * UNITS_PER_CENT:
            raise RulesError(
                "meter.reset", "the reset amount may not be less than $10,000 (§ 639a.12(d)(4), § 667a.12(d)(3))"
            )
        if rnd.meter < rnd.reset:
            raise RulesError("meter.amount", "is below the reset amount; the meter never shows less than its reset")


def _check_seat(rnd: Round, where: str, s: Seat, seen: set[int]) -> None:
    """One seat of the round (`seen`: the seats before it, this one added)."""
    g, w = rnd.game, rnd.wager
    if not 1 <= s.seat <= g.max_seats:
        raise RulesError(f"{where}.seat", f"{s.seat} is not a seat of {g.title} (1..{g.max_seats}, § {g.chapter}.2(a))")
    if s.seat in seen:
        raise RulesError(f"{where}.seat", f"seat {s.seat} appears twice")
    seen.add(s.seat)
    if s.wager < 0:
        raise RulesError(f"{where}.wager", "is negative")
    if s.folded and w.fold is FoldEffect.NO_FOLD:
        raise RulesError(f"{where}.folded", f"{g.title} has no fold that affects the {w.title} (§ {g.chapter}.7)")
    if s.folded and s.wager and w.fold is FoldEffect.IS_THE_FOLD:
        raise RulesError(f"{where}.folded", f"a player who folds makes no {w.title} (§ {g.chapter}.1 \"Fold\")")
    if s.folded and w.fold is FoldEffect.NOT_IN_OUR_COPY and (s.wager or rnd.dealer_wagers.get(s.seat)):
        raise RulesError(
            f"{where}.folded",
            f"what a fold does to the {w.title} of {g.title} is not in the regulations this controller "
            f"implements (§ {g.chapter}.11); a folded seat cannot be settled",
        )
    forfeits = s.folded and w.fold in (FoldEffect.FORFEIT, FoldEffect.FORFEIT_KEEP_ENVY)
    needs_cards = bool(s.wager) and not forfeits and not s.envy_only
    if s.cards and len(s.cards) != g.player_cards:
        raise InputError(f"{where}.cards", f"has {len(s.cards)} cards; {g.title} deals {g.player_cards} to a player")
    if needs_cards and not s.cards:
        raise InputError(f"{where}.cards", "are required to settle this seat")


def _check_dealer(rnd: Round, seen: set[int]) -> None:
    """The wagers on the dealer's hand, by seats of the round, and the dealer's cards they need."""
    g, w = rnd.game, rnd.wager
    dealer_needed = any(rnd.dealer_wagers.values()) or w.id == "bad-beat"
    if rnd.dealer_wagers and not w.dealer_bets:
        raise RulesError("dealer.wagers", f"the {w.title} of {g.title} cannot be placed on the dealer's hand")
    for seat_no, amount in rnd.dealer_wagers.items():
        if seat_no not in seen:
            raise RulesError("dealer.wagers", f"seat {seat_no} wagers on the dealer's hand but is not among the seats")
        if amount < 0:
            raise RulesError("dealer.wagers", f"seat {seat_no}: the wager is negative")
    if rnd.dealer and len(rnd.dealer) not in g.dealer_cards:
        want = " or ".join(str(n) for n in g.dealer_cards)
        raise InputError("dealer.cards", f"has {len(rnd.dealer)} cards; the dealer of {g.title} receives {want}")
    if dealer_needed and not rnd.dealer:
        raise InputError("dealer.cards", "are required: a wager depends on the dealer's hand")


def _check_draws(rnd: Round) -> None:
    """A Magic Card or Lucky Bonus position only where the paytable pays it."""
    g, w = rnd.game, rnd.wager
    bonus = w.magic_and_lucky
    if rnd.magic_card is not None and not (bonus and rnd.paytable.magic_card is not None):
        raise RulesError("magic_card", f"the {w.title} under {rnd.paytable.id} pays no Magic Card Bonus")
    if rnd.lucky_seat is not None:
        if not (bonus and rnd.paytable.lucky_bonus is not None):
            raise RulesError("lucky_seat", f"the {w.title} under {rnd.paytable.id} pays no Lucky Bonus")
        if rnd.lucky_seat == DEALER_POSITION and not w.dealer_bets:
            raise RulesError("lucky_seat", f"the dealer's position is not drawn for the Lucky Bonus at {g.title}")
        if rnd.lucky_seat != DEALER_POSITION and not 1 <= rnd.lucky_seat <= g.max_seats:
            raise RulesError("lucky_seat", f"{rnd.lucky_seat} is not a position of {g.title}")


def _index(rnd: Round, seat: int) -> int:
    return next(i for i, s in enumerate(rnd.seats) if s.seat == seat)


def _needs_community(w: Wager) -> bool:
    rules = {w.rule, w.dealer_rule}
    return bool(rules & {
        CardRule.PLAYER_AND_COMMUNITY, CardRule.PLAYER_AND_FLOP, CardRule.PLAYER_AND_TWO_OF_COMMUNITY,
        CardRule.DEALER_AND_FLOP, CardRule.DEALER_AND_COMMUNITY,
    })


def _check_duplicates(rnd: Round) -> None:
    """One deck: no card may be in two places (§ 667a.3(a); the Magic Card is a separate draw)."""
    where: dict[int, str] = {}
    places: list[tuple[str, Sequence[int]]] = [(f"seats[{i}].cards", s.cards) for i, s in enumerate(rnd.seats)]
    places += [("community", rnd.community), ("dealer.cards", rnd.dealer)]
    for name, cards in places:
        for i, c in enumerate(cards):
            here = f"{name}[{i}]"
            if c in where:
                raise InputError(here, f"duplicate card {card_str(c)} (already at {where[c]})")
            where[c] = here


__all__ = ["Payout", "Round", "Seat", "Settlement", "in_settlement_order", "settle"]

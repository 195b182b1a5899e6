"""Hits detected from a card-reading shoe, as a pure function: the cards the shoe read, in the order it read
them, are given to the hands as the game's dealing procedure deals them, and once every hand is complete the
hands that a wager of the round pays are the claims the dealer would make (seat, spot, cards), in settlement
order. The daemon sends each through the dealer's claim path (controller/app/table.py); nothing here pays.

The dealing procedures (a card-reading shoe is a manual dealing shoe whose reader sees each card as the dealer
draws it, so the procedure of the manual dealing shoe applies):

- Let It Ride Poker, § 643a.8(d): starting with the player farthest to the dealer's left (seat 1) and going
  clockwise, one card to each player, one to the community area, a second to each player, a second to the
  community area, a third to each player.
- Flop Poker, § 667a.8(d): starting with the player farthest to the dealer's left, one card at a time to each
  player until each has three; then, once the players have decided, the dealer burns the next card and deals
  the three community cards (§ 667a.8(e), § 667a.11(c)). The burned card leaves the shoe, so the shoe reads it.
- Caribbean Stud Poker: our copy of § 639a.8 does not reprint the order (`* * * * *`). Decided
  (docs/rounds.md, Decisions): one card at a time in rotation, beginning with seat 1 and continuing clockwise
  to each player dealt, the dealer last in each rotation, until each player and the dealer have five cards: the
  order of § 643a.8(d) and § 667a.8(d), with the dealer's hand where Let It Ride deals its community card.

Cards go to "each player who has placed" the game's required wagers (§ 643a.8(d)(1), § 667a.8(d)); the
controller senses only the wagers of the progressive table game system, so the seats dealt are given
(`seats`; by default the seats with an accepted wager). A seat dealt that is not among them makes the deal
longer than the one computed here: the card after the computed end is refused as one more than the deal uses.

Errors name the field (`cards[7]`, `seats`, `game`): a card after the end of the deal, a card read twice (one
deck has each card once, § 667a.3(a): a fault of the shoe or the deck, and the hands of the deal cannot be
trusted), a value that is not one of the 52 cards of the round's deck.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.cards import card_str, parse_card
from controller.errors import CardError, InputError, RulesError
from controller.games import Game, Wager
from controller.meter.award import RESET_FLOOR_CENTS
from controller.money import UNITS_PER_CENT
from controller.paytables import Paytable
from controller.positions import DEALER, DEALER_POSITION, position_name
from controller.round.settlement import Round, Seat, settle, settlement_order

PLAYERS = "players"  # one card to each seat dealt, seat 1 first, clockwise
# DEALER ("dealer"): one card to the dealer's hand
COMMUNITY = "community"  # one card to the community area
BURN = "burn"  # one card drawn and discarded unseen


@dataclass(frozen=True)
class Procedure:
    """How a game's cards leave a manual dealing shoe: `steps` in order, each one card to a place, or
    PLAYERS: one card to each seat dealt."""

    game: str
    source: str
    steps: tuple[str, ...]


PROCEDURES: dict[str, Procedure] = {p.game: p for p in (
    Procedure("caribbean-stud", "§ 639a.8 as decided in docs/rounds.md: our copy does not reprint it",
              (PLAYERS, DEALER) * 5),
    Procedure("let-it-ride", "§ 643a.8(d)", (PLAYERS, COMMUNITY, PLAYERS, COMMUNITY, PLAYERS)),
    Procedure("flop-poker", "§ 667a.8(d), § 667a.11(c)", (PLAYERS,) * 3 + (BURN, COMMUNITY, COMMUNITY, COMMUNITY)),
)}


def procedure(game: Game) -> Procedure:
    """The dealing procedure of `game`, or RulesError when the regulations we hold do not give it."""
    found = PROCEDURES.get(game.id)
    if found is None:
        raise RulesError("game", f"the dealing procedure of {game.title} (§ {game.chapter}.8) is not in the "
                                 "regulations this controller implements: its hits are claimed by the dealer")
    return found


@dataclass(frozen=True)
class Deal:
    """The cards read so far, given to the places the procedure deals them to."""

    game: str
    seats: tuple[int, ...]  # the seats dealt, in dealing order
    places: tuple[int | str, ...]  # where each card of the whole deal goes: a seat number, DEALER, ...
    cards: tuple[int, ...]
    hands: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # each seat's cards, in dealing order
    dealer: tuple[int, ...] = ()
    community: tuple[int, ...] = ()
    burned: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        """How many cards the whole deal uses."""
        return len(self.places)

    @property
    def complete(self) -> bool:
        return len(self.cards) == self.length


def _place(place: int | str) -> str:
    if isinstance(place, int):
        return f"seat {place}"
    return {DEALER: "the dealer", COMMUNITY: "the community cards", BURN: "the burned card"}[place]


def _card(value: object, where: str) -> int:
    if isinstance(value, str):
        return parse_card(value, where)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 51:
        raise CardError(where, f"{value!r} is not a card of the round's deck (52 cards: 0..51)")
    return value


def _seats(game: Game, seats: object) -> tuple[int, ...]:
    if not isinstance(seats, (list, tuple)):
        raise InputError("seats", f"must be a list of seat numbers, not {seats!r}")
    out: list[int] = []
    for i, s in enumerate(seats):
        if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= game.max_seats:
            raise InputError(f"seats[{i}]", f"{s!r} is not a seat of {game.title} (1..{game.max_seats})")
        if s in out:
            raise InputError(f"seats[{i}]", f"seat {s} appears twice")
        out.append(s)
    return tuple(sorted(out))  # seat 1 is the player farthest to the dealer's left: dealt first


def assign(game: Game, seats: object, cards: Sequence[object]) -> Deal:
    """The cards read so far (ints 0..51 as the shoe reports them, or notation such as "AS"), in reading order,
    given to the seats dealt and the dealer, community and burn as `game`'s procedure deals them."""
    proc = procedure(game)
    dealt = _seats(game, seats)
    if not dealt:
        raise InputError("seats", "no seat was dealt: a deal needs a player")
    places: list[int | str] = []
    for step in proc.steps:
        places.extend(dealt if step == PLAYERS else (step,))
    hands: dict[int, list[int]] = {s: [] for s in dealt}
    other: dict[str, list[int]] = {DEALER: [], COMMUNITY: [], BURN: []}
    seen: dict[int, int] = {}
    out: list[int] = []
    for i, value in enumerate(cards):
        where = f"cards[{i}]"
        card = _card(value, where)
        if i >= len(places):
            raise InputError(where, f"{card_str(card)} is one card more than the deal uses ({_uses(proc, dealt)}, "
                                    f"{proc.source}): a seat the controller does not see was dealt, or the shoe "
                                    "read a card too many")
        if card in seen:
            j = seen[card]
            raise CardError(where, f"duplicate card {card_str(card)} (already at cards[{j}], dealt to "
                                   f"{_place(places[j])}): one deck has each card once (§ 667a.3(a)); the shoe "
                                   "read a card twice or the deck is not whole: the deal cannot be trusted")
        seen[card] = i
        out.append(card)
        place = places[i]
        if isinstance(place, int):
            hands[place].append(card)
        else:
            other[place].append(card)
    return Deal(game.id, dealt, tuple(places), tuple(out), {s: tuple(h) for s, h in hands.items()},
                tuple(other[DEALER]), tuple(other[COMMUNITY]), tuple(other[BURN]))


def _uses(proc: Procedure, dealt: tuple[int, ...]) -> str:
    """What the whole deal uses, e.g. "15 cards: 5 to each of seats 3, 5; 5 to the dealer"."""
    seats = ", ".join(map(str, dealt))
    parts = [f"{proc.steps.count(PLAYERS)} to {'each of seats' if len(dealt) > 1 else 'seat'} {seats}"]
    what = {DEALER: "to the dealer", COMMUNITY: "community", BURN: "burned"}
    for step in dict.fromkeys(s for s in proc.steps if s != PLAYERS):  # in the order they are first dealt
        parts.append(f"{proc.steps.count(step)} {what[step]}")
    total = proc.steps.count(PLAYERS) * len(dealt) + sum(1 for s in proc.steps if s != PLAYERS)
    return f"{total} cards: " + "; ".join(parts)


@dataclass(frozen=True)
class SpotWager:
    """A wager spot of the table: the wager it takes, its paytable, and whether it is on the dealer's hand."""

    spot: str
    wager: Wager
    paytable: Paytable
    on_dealer: bool = False


@dataclass(frozen=True)
class Hit:
    """A hand a wager of the round pays: the claim the dealer would make for it."""

    seat: int  # a seat number, or DEALER_POSITION for the dealer's hand
    spot: str
    cards: tuple[int, ...]  # the hand's own cards, as a claim gives them (the player's, or the dealer's)
    hand: str  # the hand paid, e.g. "royal-flush"
    award: str  # as the paytable states it, e.g. "100% of meter"
    turn: int  # the seat at whose turn it is settled: the seat, or the first seat that wagered on the dealer's hand
    community: tuple[int, ...] = ()

    @property
    def order(self) -> tuple[int, int]:
        return settlement_order(self.turn, self.seat == DEALER_POSITION)

    def claim(self) -> dict[str, object]:
        """The arguments of the dealer's claim for this hand (the control socket's `claim`)."""
        return {"seat": position_name(self.seat), "spot": self.spot, "cards": [card_str(c) for c in self.cards]}

    def describe(self) -> str:
        who = "the dealer's hand" if self.seat == DEALER_POSITION else f"seat {self.seat}"
        return f"{who} {' '.join(card_str(c) for c in self.cards)}: {self.hand} on {self.spot} ({self.award})"


@dataclass(frozen=True)
class Detection:
    deal: Deal
    hits: tuple[Hit, ...]  # empty until the deal is complete


def detect(game: Game, spots: Sequence[SpotWager], accepted: Mapping[tuple[int, str], int],
           cards: Sequence[object], seats: object = None) -> Detection:
    """The deal so far and, once it is complete, every hand that a wager of `accepted` ((seat, spot) -> cents)
    pays, in settlement order: seat N first, then N-1, ...; within a seat's turn its own hand (its spots in the
    table's order), then the dealer's hand when that seat is the first that wagered on it (§ 639a.11(c),
    § 639a.12(e)(2); controller/round/claims.py). `seats` are the seats dealt (default: those in `accepted`)."""
    by_spot = {s.spot: s for s in spots}
    for (_seat, spot) in accepted:
        if spot not in by_spot:
            raise InputError("accepted", f"{spot!r} is not a wager spot of the table ({', '.join(by_spot)})")
    dealt = sorted({seat for seat, _ in accepted}) if seats is None else seats
    deal = assign(game, dealt, cards)
    for seat, spot in accepted:
        if seat not in deal.seats:
            raise InputError("seats", f"seat {seat} has an accepted wager on {spot} but is not among the seats dealt")
    if not deal.complete:
        return Detection(deal, ())
    nominal = RESET_FLOOR_CENTS * UNITS_PER_CENT  # qualifying does not depend on the meter's amount
    hits: list[tuple[tuple[int, int, int], Hit]] = []
    for index, sw in enumerate(spots):
        wagers = {seat: cents for (seat, spot), cents in accepted.items() if spot == sw.spot and cents}
        if not wagers:
            continue
        if sw.on_dealer:
            rnd = Round(game=game, wager=sw.wager, paytable=sw.paytable, meter=nominal, reset=nominal,
                        seats=tuple(Seat(s) for s in sorted(wagers)), community=deal.community,
                        dealer=deal.dealer, dealer_wagers=wagers)
            pays = [p for p in settle(rnd).payouts if p.kind == "paytable" and p.hand_of == DEALER]
            if pays:
                hit = Hit(DEALER_POSITION, sw.spot, deal.dealer, pays[0].hand, pays[0].award, max(wagers), rnd.community)
                hits.append(((*hit.order, index), hit))
            continue
        for seat, cents in wagers.items():
            rnd = Round(game=game, wager=sw.wager, paytable=sw.paytable, meter=nominal, reset=nominal,
                        seats=(Seat(seat, cents, False, deal.hands[seat]),), community=deal.community)
            pays = [p for p in settle(rnd).payouts if p.kind == "paytable" and p.seat == seat and p.hand_of == "player"]
            if pays:
                hit = Hit(seat, sw.spot, deal.hands[seat], pays[0].hand, pays[0].award, seat, rnd.community)
                hits.append(((*hit.order, index), hit))
    return Detection(deal, tuple(h for _, h in sorted(hits, key=lambda kh: kh[0])))


__all__ = ["BURN", "COMMUNITY", "PLAYERS", "PROCEDURES", "Deal", "Detection", "Hit", "Procedure",
           "SpotWager", "assign", "detect", "procedure"]

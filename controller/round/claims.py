"""Jackpot claims of one round, as § 639a.11(c)(5)-(6), § 641a.11(c)(5)-(7) and § 667a.11(d)(2) describe them.

The dealer claims a hit with the cards; the engine verifies the hand (the settlement of that hand alone,
controller.round.settlement) and that the seat had an accepted wager; the amount is fixed from the meter at that
player's turn; a payout that is a percentage of the meter or 500 for 1 and more waits for a floorperson's
approval (§ 639a.11(c)(6)(ii)); then it is paid through the ledger. Claims are settled one at a time, in
the order the rules settle the seats (N first, then N-1, ..., § 639a.11(c)): a claim that comes before one
already settled in this round is refused, so no amount is ever taken from a meter the rules say it should
have been taken before. A rejected claim changes nothing.

Two kinds of claim:

- a seat's own hand (`verify`), on one of its spots: the paytable payout, with the Magic Card and Lucky
  Bonus payouts the round's draws give that hand (§ 639a.12(e)(3)), and the Envy Bonuses it earns the other
  players (§ 639a.11(c)(5)(v));
- the dealer's hand (`verify_dealer`), on the spot of a wager on the dealer's hand: one claim that pays every
  seat with an accepted wager on that spot, each its own payout (a percentage of the meter divided equally,
  § 639a.12(e)(2)) with the Magic Card and Lucky Bonus payouts of the dealer's hand, in settlement order. It
  is settled at the turn of the first of those seats (the highest numbered), after that seat's own hand.

The Magic Card and the Lucky Bonus position are the ones drawn at lock-out and recorded with the round's
booking (`Draws`); both are paid with a winning hand only, on top of its payout (docs/rules.md), so they are
claimed with the hand, never on their own.

This module is pure: it verifies and orders, and says how a claim is written in the journal (`claim_to_json`,
`claim_from_json`); its lifecycle (pending, approved, paid, ...) is controller.round.claim_machine; the daemon
pays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from controller.awards import PercentOfMeter, parse_award
from controller.cards import card_str, cards_str, parse_card, parse_cards
from controller.errors import InputError, RulesError
from controller.games import Game, Wager
from controller.meter import ops as meter_ops
from controller.money import format_cents, format_dollars_human, format_units, parse_cents, parse_units
from controller.paytables import Paytable
from controller.positions import DEALER, DEALER_POSITION, position_name, position_words, settlement_order
from controller.round.model import TableRules
from controller.round.settlement import Payout, Round, Seat, settle

# locking: a linked meter's percentage award is being locked at the link authority (its amount is the
# authority's); pending: awaits a supervisor; paying: approved (or paid by the table), its payouts being
# journaled; paid; rejected (by a supervisor); voided (with its round); refused (the authority refused the lock).
Status = Literal["locking", "pending", "paying", "paid", "rejected", "voided", "refused"]
STATUSES: tuple[str, ...] = ("locking", "pending", "paying", "paid", "rejected", "voided", "refused")
OPEN: frozenset[str] = frozenset({"locking", "pending", "paying"})  # not decided, or not yet all paid
ENDED_UNPAID: frozenset[str] = frozenset({"rejected", "voided", "refused"})  # nothing of it was paid



@dataclass(frozen=True)
class Draws:
    """The Magic Card and the Lucky Bonus position drawn at lock-out (§ 639a.1), as the booking recorded them.
    `lucky_seat` is a seat number, or DEALER_POSITION (0) for the dealer's position."""

    magic_card: int | None = None
    lucky_seat: int | None = None

    @classmethod
    def from_booking(cls, body: Mapping[str, Any], field_prefix: str = "booking") -> Draws:
        """The draws of a journaled booking (the body of a book-contributions entry: `magic_card` such as "7H",
        `lucky_seat` a number, 0 for the dealer's position); absent keys are no draw."""
        magic = body.get("magic_card")
        lucky = body.get("lucky_seat")
        if lucky is not None and (isinstance(lucky, bool) or not isinstance(lucky, int) or lucky < 0):
            raise InputError(f"{field_prefix}.lucky_seat", f"must be a position number, not {lucky!r}")
        return cls(None if magic is None else parse_card(magic, f"{field_prefix}.magic_card"), lucky)

    def to_json(self) -> dict[str, Any]:
        lucky = None if self.lucky_seat is None else position_name(self.lucky_seat)
        return {"magic_card": None if self.magic_card is None else card_str(self.magic_card), "lucky_seat": lucky}


@dataclass(frozen=True)
class Claim:
    id: str
    round_id: str
    seat: int  # the claiming seat; DEALER_POSITION (0) for the dealer's hand
    spot: str
    meter: str
    wager_cents: int  # the claiming seat's wager (0 for the dealer's hand: each payout carries its wager)
    cards: tuple[int, ...]
    payouts: tuple[Payout, ...]
    status: Status = "pending"
    by: str = ""  # who approved or rejected (or, paid by the table, who claimed it)
    reason: str = ""
    turn: int = 0  # the seat at whose turn the claim is settled (the seat itself, or the first dealer wagerer)
    claimed_by: str = "dealer"  # "dealer", or "shoe" for a hit detected from the card-reading shoe
    locks: tuple[int, ...] = ()  # payouts locked at the link authority (a linked meter's percentage awards)
    locked: tuple[int, ...] = ()  # of those, the ones the authority has locked (their amounts are its)
    paid: tuple[int, ...] = ()  # payouts journaled as paid
    # The supervisor's approvals of the payouts a linked meter's authority verifies: (payout, by, mac), made at
    # the approval (controller.linkproto.approval) and journaled with it, so that a payment finished after a restart
    # carries them too.
    approvals: tuple[tuple[int, str, str], ...] = ()
    # The number and nonce the authority gave each lock (payout, number, nonce): the approval of its payment names
    # them, so that it pays that lock only (controller.linkproto.approval).
    lock_numbers: tuple[tuple[int, int, str], ...] = ()
    # Payouts whose payment the link authority refused after others of the claim were paid (a later share of a
    # shared award): the claim is being paid still, and waits for a supervisor to approve them again.
    refused: tuple[int, ...] = ()

    def approval_of(self, i: int) -> tuple[str, str] | None:
        """(by, mac) of payout `i`'s latest approval (an approval again after a refusal comes last)."""
        return next(((by, mac) for j, by, mac in reversed(self.approvals) if j == i), None)

    def approvals_of(self, i: int) -> int:
        """How many times payout `i` was approved (its payment's key names the later ones: each is a payment)."""
        return sum(1 for j, _by, _mac in self.approvals if j == i)

    @property
    def on_dealer(self) -> bool:
        return self.seat == DEALER_POSITION

    @property
    def who(self) -> str:
        return position_words(self.seat)

    @property
    def order(self) -> tuple[int, int]:
        """Position in the settlement of the round: seat N first; within a seat, its own hand first."""
        return settlement_order(self.turn or self.seat, self.on_dealer)

    @property
    def amount_cents(self) -> int:
        """What the claiming player receives (Envy Bonuses to other players aside); for the dealer's hand,
        what every player who wagered on it receives."""
        if self.on_dealer:
            return sum(p.amount for p in self.payouts)
        return sum(p.amount for p in self.payouts if p.seat == self.seat)

    @property
    def winners(self) -> tuple[int, ...]:
        """The seats whose win light this claim turns on: the players paid on the claimed hand."""
        if self.on_dealer:
            return tuple(sorted({p.seat for p in self.payouts}, reverse=True))
        return (self.seat,)

    @property
    def needs_approval(self) -> bool:
        return any(p.requires_validation for p in self.payouts)

    @property
    def unpaid(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.payouts)) if i not in self.paid)

    @property
    def lit(self) -> bool:
        """Whether this claim keeps its win lights on: verified, and neither rejected, voided nor refused."""
        return self.status not in ENDED_UNPAID

    def describe(self) -> str:
        parts = ", ".join(_describe(p, self) for p in self.payouts)
        return f"claim {self.id}: {self.who} {cards_str(self.cards)}: {parts}"


def _describe(p: Payout, claim: Claim) -> str:
    if p.kind == "envy":
        return f"Envy Bonus to seat {p.seat} {p.award}"
    to = f"seat {p.seat} " if claim.on_dealer else ""
    if p.kind == "magic-card":
        what = f"Magic Card {card_str(p.cards[0])}"
    elif p.kind == "lucky-bonus":
        what = "Lucky Bonus"
    else:
        what = p.hand
    shared = f" (1 of {p.shared_by} shares)" if p.shared_by > 1 else ""
    return f"{to}{what} {p.award}{shared} = {format_dollars_human(p.amount)}"


def hit_hand(p: Payout) -> str:
    """The hand a payout is recorded on in the meter's hit history: the hand's rank, marked when it is the
    dealer's; the Magic Card with the card; the Lucky Bonus (which pays on a position, not on a hand)."""
    if p.kind == "magic-card":
        return f"magic card {card_str(p.cards[0])}" + (" (dealer's hand)" if p.hand_of == DEALER else "")
    if p.kind == "lucky-bonus":
        return "lucky bonus" + (" (dealer's position)" if p.hand_of == DEALER else "")
    if p.kind == "paytable" and p.hand_of == DEALER:
        return f"{p.hand} (dealer's hand)"
    return p.hand


@dataclass(frozen=True)
class RoundClaims:
    round_id: str
    claims: tuple[Claim, ...] = field(default_factory=tuple)
    draws: Draws | None = None  # read from the round's booking at the first claim that needs them
    first: int = 1  # the lowest number a new claim may take (after a restart: after every one journaled)

    @property
    def open(self) -> Claim | None:
        """The claim not yet decided or not yet paid (claims are settled one at a time), if any."""
        return next((c for c in self.claims if c.status in OPEN), None)

    @property
    def pending(self) -> Claim | None:
        return next((c for c in self.claims if c.status == "pending"), None)

    @property
    def lit(self) -> frozenset[int]:
        """Seats whose win light a claim that is not rejected, voided or refused has turned on."""
        return frozenset(s for c in self.claims if c.lit for s in c.winners)

    @property
    def next_number(self) -> int:
        """The number of the round's next claim: after every claim here, and never below `first`."""
        made = [int(c.id.rsplit("-c", 1)[1]) for c in self.claims if c.id.rsplit("-c", 1)[-1].isdigit()]
        return max([self.first, *(n + 1 for n in made)])

    def get(self, claim_id: object) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise InputError("claim_id", f"no claim {claim_id!r} in round {self.round_id}")

    def with_claim(self, claim: Claim) -> RoundClaims:
        """`claim` added, or put in the place of the claim of the same id."""
        if any(c.id == claim.id for c in self.claims):
            return replace(self, claims=tuple(claim if c.id == claim.id else c for c in self.claims))
        return replace(self, claims=(*self.claims, claim))

    def with_draws(self, draws: Draws) -> RoundClaims:
        return replace(self, draws=draws)


def payout_key(rid: str, seat: int, spot: str, i: int) -> str:
    """The journal key of payout `i` of a hand: by the hand, not the claim, so that a hand claimed again after a
    restart is never paid twice (§ 639a.11(c)(5))."""
    return f"{rid}:{position_name(seat)}:{spot}:pay:{i}"


def claim_spot(rules: TableRules, accepted: Mapping[tuple[int, str], int], seat: object, spot: object) -> str:
    """The spot a claim is for. `seat` "dealer": the table's spot of a wager on the dealer's hand (named by
    `spot` where there are several). A seat number: `spot`, or, when none is given, the first spot of the
    player's own hand (in the table's order of wagers) on which the seat has an accepted wager."""
    dealer_spots = [s for s, r in rules.spots.items() if r.on_dealer]
    own_spots = [s for s, r in rules.spots.items() if not r.on_dealer]
    if seat == DEALER:
        if spot is None:
            if not dealer_spots:
                raise RulesError("seat", f"no wager at table {rules.table} can be placed on the dealer's hand")
            if len(dealer_spots) > 1:
                raise InputError("spot", f"say which wager on the dealer's hand: {', '.join(dealer_spots)}")
            return dealer_spots[0]
        if spot not in dealer_spots:
            have = f" (the table's: {', '.join(dealer_spots)})" if dealer_spots else ""
            raise InputError("spot", f"{spot!r} is not a spot of a wager on the dealer's hand{have}")
        return str(spot)
    if isinstance(seat, bool) or not isinstance(seat, int):
        raise InputError("seat", f"must be a seat number or \"dealer\", not {seat!r}")
    if seat == DEALER_POSITION:
        raise InputError("seat", "write \"dealer\" for the dealer's hand; seats are numbered from 1")
    if not 1 <= seat <= rules.seats:  # malformed, not a rules refusal: no such seat at this table
        raise InputError("seat", f"{seat} is not a seat of table {rules.table} (1..{rules.seats})")
    if spot is None:
        if not own_spots:
            raise RulesError("spot", f"table {rules.table} has no wager on the player's own hand")
        return next((s for s in own_spots if (seat, s) in accepted), own_spots[0])
    if spot in dealer_spots:
        raise InputError("spot", f"{spot!r} is the wager on the dealer's hand: claim it with seat \"dealer\"")
    if spot not in own_spots:
        raise InputError("spot", f"{spot!r} is not a progressive wager spot of table {rules.table} "
                                 f"(the player's own hand: {', '.join(own_spots)})")
    return str(spot)


def verify(rc: RoundClaims, *, game: Game, wager: Wager, paytable: Paytable, meter_units: int, reset_units: int,
           seat: object, spot: str, meter: str, wager_cents: int | None, cards: object,
           others: dict[int, int] | None = None, draws: Draws = Draws()) -> Claim:
    """A new claim for `seat`'s own hand, verified and priced from the meter as it stands, or RulesError/
    InputError saying why not. `wager_cents` is the seat's accepted wager on the spot (None: it had none);
    `others` the other seats' accepted wagers on the spot, who receive an Envy Bonus for this hand where the
    paytable has one (§ 639a.11(c)(5)(v): one for each other player holding a qualifying hand); `draws` the
    round's Magic Card and Lucky Bonus position, which add their payouts to a winning hand of a wager that
    pays them (§ 639a.12(e)(3))."""
    if isinstance(seat, bool) or not isinstance(seat, int):
        raise InputError("seat", f"must be a seat number, not {seat!r}")
    _one_at_a_time(rc)
    if wager_cents is None:
        raise RulesError("seat", f"seat {seat} has no accepted {wager.title} in round {rc.round_id} "
                                 "(the light was not on: § 639a.11(c)(5)(ii))")
    _check_turn(rc, seat, spot, seat)
    hand = _cards(rc, game, cards, game.player_cards, seat)
    receivers = tuple(Seat(s, c, envy_only=True) for s, c in sorted((others or {}).items()) if s != seat)
    magic, lucky = _draws_for(wager, paytable, draws)
    rnd = Round(game=game, wager=wager, paytable=paytable, meter=meter_units, reset=reset_units,
                seats=(Seat(seat, wager_cents, False, hand), *receivers), magic_card=magic, lucky_seat=lucky)
    paid = _settle(rnd, "seats[0].cards")
    payouts = tuple(p for p in paid if p.seat == seat and p.hand_of == "player"
                    and p.kind in ("paytable", "magic-card", "lucky-bonus"))
    if payouts:  # Envy Bonuses exist only beside a paid hand at least as high (straight flush or better)
        payouts += tuple(p for p in paid if p.kind == "envy" and p.hand_of == f"seat {seat}")
    if not payouts:
        raise RulesError("cards", f"{cards_str(hand)} is not a winning hand for the {wager.title}")
    return Claim(f"{rc.round_id}-c{rc.next_number}", rc.round_id, seat, spot, meter, wager_cents, hand, payouts,
                 turn=seat)


def verify_dealer(rc: RoundClaims, *, game: Game, wager: Wager, paytable: Paytable, meter_units: int,
                  reset_units: int, spot: str, meter: str, wagers: Mapping[int, int], cards: object,
                  draws: Draws = Draws()) -> Claim:
    """A new claim for the dealer's hand, or RulesError/InputError saying why not. `wagers` are the accepted
    wagers on the dealer's hand by seat: each of those seats is paid for the hand (a percentage of the meter
    is taken once, at the first of them in settlement order, and divided equally: § 639a.12(e)(2)), with
    the Magic Card when one of the dealer's cards matches it and the Lucky Bonus when the dealer's position
    was drawn (§ 639a.1 "Magic Card Bonus" (ii), "Lucky Bonus" (ii))."""
    _one_at_a_time(rc)
    if not wager.dealer_bets:
        raise RulesError("seat", f"the {wager.title} of {game.title} cannot be placed on the dealer's hand")
    if not wagers:
        raise RulesError("seat", f"no seat has an accepted {wager.title} on the dealer's hand in round "
                                 f"{rc.round_id} (no light was on: § 639a.11(c)(5)(ii))")
    turn = max(wagers)
    _check_turn(rc, DEALER_POSITION, spot, turn)
    hand = _cards(rc, game, cards, game.dealer_cards, DEALER_POSITION)
    magic, lucky = _draws_for(wager, paytable, draws)
    rnd = Round(game=game, wager=wager, paytable=paytable, meter=meter_units, reset=reset_units,
                seats=tuple(Seat(s) for s in sorted(wagers)), dealer=hand, dealer_wagers=dict(wagers),
                magic_card=magic, lucky_seat=lucky)
    payouts = tuple(p for p in _settle(rnd, "dealer.cards") if p.hand_of == DEALER)
    if not payouts:
        raise RulesError("cards", f"{cards_str(hand)} is not a winning hand for the {wager.title} on the dealer's hand")
    return Claim(f"{rc.round_id}-c{rc.next_number}", rc.round_id, DEALER_POSITION, spot, meter, 0, hand, payouts,
                 turn=turn)


def claim_refusal(rc: RoundClaims) -> str | None:
    """Why no new claim can be made now, or None: claims are settled one at a time (§ 639a.11(c))."""
    c = rc.open
    return None if c is None else f"{c.id} {status_text(c)}: claims are settled one at a time"


def status_text(c: Claim) -> str:
    """Where a claim stands, as what follows its id in a sentence."""
    return {"locking": "is being locked at the link authority", "pending": "awaits a supervisor's approval",
            "paying": "is being paid",
            "paid": f"was paid (approved by {c.by})" if c.needs_approval or c.claimed_by == "shoe"
            else "was paid by the table",
            "rejected": f"was rejected by {c.by}", "voided": "was voided with its round",
            "refused": "was refused by the link authority"}[c.status]


def _one_at_a_time(rc: RoundClaims) -> None:
    why = claim_refusal(rc)
    if why is not None:
        raise RulesError("claim", why)


def _check_turn(rc: RoundClaims, seat: int, spot: str, turn: int) -> None:
    """Refuse a hand claimed twice, and a claim that the rules settle before one already settled."""
    live = [c for c in rc.claims if c.lit]
    who = position_words(seat)
    for c in live:
        if c.seat == seat and c.spot == spot:
            raise RulesError("seat", f"{who} was settled in round {rc.round_id} already ({c.id})")
    mine = settlement_order(turn, seat == DEALER_POSITION)
    later = [c for c in live if c.order > mine]
    if later:
        last = max(later, key=lambda c: c.order)
        if seat == DEALER_POSITION:
            mine_text = f"the dealer's hand is settled at seat {turn}'s turn (the first seat that wagered on it), so"
        else:
            mine_text = f"seat {seat} is settled"
        theirs = f"the dealer's hand (settled at seat {last.turn}'s turn)" if last.on_dealer else f"seat {last.seat}"
        raise RulesError("seat", f"{mine_text} before {theirs}: seats are settled from the dealer's right, N to 1, "
                                 "each player's own hand before the dealer's (§ 639a.11(c)); void or settle by hand")


def _cards(rc: RoundClaims, game: Game, cards: object, counts: int | tuple[int, ...], seat: int) -> tuple[int, ...]:
    """The claimed cards: as many as the game deals that hand, none twice, and none in another hand claimed
    in this round (one deck, § 667a.3(a)); a seat claiming a second wager must show the same hand."""
    allowed = (counts,) if isinstance(counts, int) else counts
    # Where hands share community cards the same card is in several hands: only the count is checked there.
    shared = game.community_cards != (0,)
    seen: dict[int, str] = {}
    same_hand: Claim | None = None
    for c in rc.claims:
        if not c.lit:
            continue
        if c.seat == seat:
            same_hand = same_hand or c
            continue
        if not shared:
            for card in c.cards:
                seen.setdefault(card, f"{c.who}, claim {c.id}")
    hand = tuple(parse_cards(cards, "cards", count=allowed, seen=seen))
    if same_hand is not None and sorted(hand) != sorted(same_hand.cards):
        raise InputError("cards", f"{same_hand.who} holds {cards_str(same_hand.cards)} (claim {same_hand.id}); "
                                  f"a second wager on the same hand is claimed with the same cards")
    return hand


def _draws_for(wager: Wager, paytable: Paytable, draws: Draws) -> tuple[int | None, int | None]:
    """The draws that mean something for this wager under this paytable (the settlement refuses the others)."""
    if not wager.magic_and_lucky:
        return None, None
    magic = draws.magic_card if paytable.magic_card is not None else None
    lucky = draws.lucky_seat if paytable.lucky_bonus is not None else None
    if lucky == DEALER_POSITION and not wager.dealer_bets:
        lucky = None  # nobody can wager on the dealer's hand at this game: the dealer's position pays no one
    return magic, lucky


def _settle(rnd: Round, cards_field: str) -> tuple[Payout, ...]:
    """The settlement of the claimed hand; an error about its cards is named as the claim's `cards`."""
    try:
        return settle(rnd).payouts
    except InputError as e:
        if e.field == cards_field or e.field.startswith(cards_field + "["):
            raise type(e)("cards" + e.field[len(cards_field):], e.problem) from None
        raise


# --- the meter operations of a claim's payouts (controller.meter.ops) ------------------------------------


def lock_id(claim: Claim, i: int) -> str:
    """The id under which payout `i` of `claim` is locked at the link authority."""
    return f"{claim.id}:{i}"


def lock_op(claim: Claim, i: int, table: str, at: datetime) -> meter_ops.LockPercentAward:
    """Lock payout `i` (a percentage of a linked meter; for a shared award its first share, with the number of
    shares) at the link authority, at this player's turn (§ 605a.8)."""
    p = claim.payouts[i]
    award = parse_award(p.award, "award")
    assert isinstance(award, PercentOfMeter)
    return meter_ops.LockPercentAward(claim.round_id, table, p.seat, hit_hand(p), p.award, award.percent, at,
                                      lock_id(claim, i), shares=p.shared_by, cards=cards_str(p.cards))


def payout_op(claim: Claim, i: int, table: str, at: datetime) -> meter_ops.Op:
    """The operation that pays payout `i`, approved by `claim.by`: the lock of a linked meter's percentage award;
    a percentage of the meter (a local meter's; or a later share of a shared award, paid from what the first
    share took, on either kind of meter); or a fixed or odds payout (Envy Bonus, Magic Card, Lucky Bonus)."""
    p = claim.payouts[i]
    if i in claim.locks:
        return meter_ops.PayLockedAward(lock_id(claim, i), claim.by, at)
    award = parse_award(p.award, "award")
    if isinstance(award, PercentOfMeter):
        return meter_ops.PayPercentAward(claim.round_id, table, p.seat, hit_hand(p), p.award, award.percent, at,
                                         claim.by, shares=p.shared_by)
    return meter_ops.PayFixedAward(claim.round_id, table, p.seat, hit_hand(p), p.award, p.amount, p.paid_by, at,
                                   claim.by)


def release_op(claim: Claim, i: int, by: str, reason: str, at: datetime) -> meter_ops.ReleaseLockedAward:
    return meter_ops.ReleaseLockedAward(lock_id(claim, i), by, reason, at)


# --- a claim as the journal keeps it ----------------------------------------------------------------------


def claim_to_json(c: Claim) -> dict[str, Any]:
    """The claim as a JSON object: money as decimal strings of dollars, meter amounts in meter units as decimal
    strings of dollars too, cards as text."""
    return {
        "id": c.id, "round_id": c.round_id, "seat": c.seat, "spot": c.spot, "meter": c.meter,
        "wager": format_cents(c.wager_cents), "cards": [card_str(x) for x in c.cards],
        "payouts": [_payout_to_json(p) for p in c.payouts],
        "status": c.status, "by": c.by, "reason": c.reason, "turn": c.turn, "claimed_by": c.claimed_by,
        "locks": list(c.locks), "locked": list(c.locked), "paid": list(c.paid),
        **({"approvals": [list(a) for a in c.approvals]} if c.approvals else {}),
        **({"lock_numbers": [list(n) for n in c.lock_numbers]} if c.lock_numbers else {}),
        **({"refused": list(c.refused)} if c.refused else {}),
    }


def _payout_to_json(p: Payout) -> dict[str, Any]:
    d: dict[str, Any] = {
        "seat": p.seat, "wager": format_cents(p.wager), "kind": p.kind, "hand_of": p.hand_of, "hand": p.hand,
        "cards": [card_str(x) for x in p.cards], "award": p.award, "amount": format_cents(p.amount),
        "paid_by": p.paid_by, "requires_validation": p.requires_validation, "shared_by": p.shared_by,
    }
    for name in ("meter_before", "meter_after"):
        v = getattr(p, name)
        if v is not None:
            d[name] = format_units(v)
    return d


def claim_from_json(d: object, field_prefix: str = "claim") -> Claim:
    """The claim of `claim_to_json`; InputError naming the field otherwise."""
    m = _obj(d, field_prefix)
    f = _Fields(m, field_prefix)
    status = f.text("status")
    if status not in STATUSES:
        raise InputError(f"{field_prefix}.status", f"{status!r} is not one of {', '.join(STATUSES)}")
    payouts = tuple(_payout_from_json(p, f"{field_prefix}.payouts[{i}]")
                    for i, p in enumerate(f.array("payouts")))
    indices = {}
    for name in ("locks", "locked", "paid", "refused"):
        if name == "refused" and name not in m:  # only when there are: older records as they were
            indices[name] = ()
            continue
        values = f.array(name)
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(payouts) for i in values):
            raise InputError(f"{field_prefix}.{name}", f"must be payout indices 0..{len(payouts) - 1}")
        indices[name] = tuple(values)
    approvals = []
    for i, a in enumerate(m.get("approvals", [])):
        if not (isinstance(a, list) and len(a) == 3 and isinstance(a[0], int) and 0 <= a[0] < len(payouts)
                and all(isinstance(x, str) for x in a[1:])):
            raise InputError(f"{field_prefix}.approvals[{i}]", "must be [payout, by, mac]")
        approvals.append((a[0], a[1], a[2]))
    numbers = []
    for i, n in enumerate(m.get("lock_numbers", [])):
        if not (isinstance(n, list) and len(n) == 3 and all(type(x) is int for x in n[:2])
                and 0 <= n[0] < len(payouts) and 0 < n[1] < 2**63 and isinstance(n[2], str) and len(n[2]) <= 64):
            raise InputError(f"{field_prefix}.lock_numbers[{i}]", "must be [payout, number, nonce]")
        numbers.append((n[0], n[1], n[2]))
    return Claim(f.text("id"), f.text("round_id"), f.integer("seat"), f.text("spot"), f.text("meter"),
                 parse_cents(f.text("wager"), f"{field_prefix}.wager"),
                 tuple(parse_cards(f.array("cards"), f"{field_prefix}.cards")), payouts, status,  # type: ignore[arg-type]
                 f.text("by"), f.text("reason"), f.integer("turn"), f.text("claimed_by"), **indices,
                 approvals=tuple(approvals), lock_numbers=tuple(numbers))


def _payout_from_json(d: object, prefix: str) -> Payout:
    f = _Fields(_obj(d, prefix), prefix)
    units = {name: parse_units(f.m[name], f"{prefix}.{name}") if name in f.m else None
             for name in ("meter_before", "meter_after")}
    flag = f.m.get("requires_validation")
    if not isinstance(flag, bool):
        raise InputError(f"{prefix}.requires_validation", "must be true or false")
    return Payout(f.integer("seat"), parse_cents(f.text("wager"), f"{prefix}.wager"), f.text("kind"),
                  f.text("hand_of"), f.text("hand"), tuple(parse_cards(f.array("cards"), f"{prefix}.cards")),
                  f.text("award"), parse_cents(f.text("amount"), f"{prefix}.amount"), f.text("paid_by"), flag,
                  units["meter_before"], units["meter_after"], f.integer("shared_by"))


def _obj(d: object, prefix: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise InputError(prefix, f"must be an object, not {type(d).__name__}")
    return d


@dataclass(frozen=True)
class _Fields:
    m: Mapping[str, Any]
    prefix: str

    def _get(self, name: str) -> object:
        if name not in self.m:
            raise InputError(f"{self.prefix}.{name}", "is missing")
        return self.m[name]

    def text(self, name: str) -> str:
        v = self._get(name)
        if not isinstance(v, str):
            raise InputError(f"{self.prefix}.{name}", f"must be text, not {v!r}")
        return v

    def integer(self, name: str) -> int:
        v = self._get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"{self.prefix}.{name}", f"must be a whole number, not {v!r}")
        return v

    def array(self, name: str) -> list[Any]:
        v = self._get(name)
        if not isinstance(v, list):
            raise InputError(f"{self.prefix}.{name}", f"must be an array, not {v!r}")
        return v


__all__ = ["OPEN", "STATUSES", "Claim", "Draws", "RoundClaims", "claim_from_json", "claim_refusal", "claim_spot",
           "claim_to_json", "hit_hand", "lock_id", "status_text", "lock_op", "payout_key", "payout_op", "release_op", "verify",
           "verify_dealer"]

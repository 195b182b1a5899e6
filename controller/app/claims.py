"""Jackpot claims of one round, as § 639a.11(c)(5), § 641a.11(c)(5) and § 667a.11(d)(2) describe them.

The dealer claims a hit with the cards; the engine verifies the hand (the settlement of that seat alone,
controller.settlement) and that the seat had an accepted wager; the amount is fixed from the meter at that
player's turn; a payout that is a percentage of the meter or 500 for 1 and more waits for a floorperson's
approval (§ 639a.11(c)(6)(ii)); then it is paid through the ledger. Claims are settled one at a time, in
the order the rules settle the seats (N first, then N-1, ..., § 639a.11(c)): a claim for a seat that
comes before one already settled in this round is refused, so no amount is ever taken from a meter the
rules say it should have been taken before. A rejected claim changes nothing.

This module is pure: it verifies and orders; the daemon pays.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ..cards import cards_str, parse_cards
from ..errors import InputError, RulesError
from ..games import Game, Wager
from ..money import format_cents
from ..paytables import Paytable
from ..settlement import Payout, Round, Seat, settle

Status = Literal["pending", "paid", "rejected"]


@dataclass(frozen=True)
class Claim:
    id: str
    round_id: str
    seat: int
    spot: str
    meter: str
    wager_cents: int
    cards: tuple[int, ...]
    payouts: tuple[Payout, ...]
    status: Status = "pending"
    by: str = ""  # who approved or rejected
    reason: str = ""

    @property
    def amount_cents(self) -> int:
        """What the claiming player receives (Envy Bonuses to other players aside)."""
        return sum(p.amount for p in self.payouts if p.seat == self.seat)

    @property
    def needs_approval(self) -> bool:
        return any(p.requires_validation for p in self.payouts)

    def describe(self) -> str:
        parts = ", ".join(f"{p.hand or p.kind} {p.award} = ${format_cents(p.amount)}" if p.seat == self.seat
                          else f"envy bonus to seat {p.seat} {p.award}" for p in self.payouts)
        return f"claim {self.id}: seat {self.seat} {cards_str(self.cards)}: {parts}"


@dataclass(frozen=True)
class RoundClaims:
    round_id: str
    claims: tuple[Claim, ...] = field(default_factory=tuple)

    @property
    def pending(self) -> Claim | None:
        return next((c for c in self.claims if c.status == "pending"), None)

    def get(self, claim_id: object) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise InputError("claim_id", f"no claim {claim_id!r} in round {self.round_id}")

    def with_claim(self, claim: Claim) -> RoundClaims:
        others = tuple(c for c in self.claims if c.id != claim.id)
        return replace(self, claims=(*others, claim))


def verify(rc: RoundClaims, *, game: Game, wager: Wager, paytable: Paytable, meter_units: int, reset_units: int,
           seat: object, spot: str, meter: str, wager_cents: int | None, cards: object,
           others: dict[int, int] | None = None) -> Claim:
    """A new claim for `seat`, verified and priced from the meter as it stands, or RulesError/InputError
    saying why not. `wager_cents` is the seat's accepted wager on the spot (None: it had none); `others`
    the other seats' accepted wagers on the spot, who receive an Envy Bonus for this hand where the paytable
    has one (§ 639a.11(c)(5)(v): one for each other player holding a qualifying hand)."""
    if isinstance(seat, bool) or not isinstance(seat, int):
        raise InputError("seat", f"must be a seat number, not {seat!r}")
    if rc.pending is not None:
        raise RulesError("claim", f"{rc.pending.id} awaits a supervisor's approval: claims are settled one at a time")
    if wager_cents is None:
        raise RulesError("seat", f"seat {seat} has no accepted {wager.title} in round {rc.round_id} "
                                 "(the light was not on: § 639a.11(c)(5)(ii))")
    settled = [c.seat for c in rc.claims if c.status != "rejected"]
    if any(s == seat for s in settled):
        raise RulesError("seat", f"seat {seat} was settled in round {rc.round_id} already")
    if any(s < seat for s in settled):
        raise RulesError("seat", f"seat {seat} is settled before seat {min(settled)} (seats are settled from the "
                                 "dealer's right, N to 1: § 639a.11(c)); void or settle by hand")
    hand = tuple(parse_cards(cards, "cards"))
    receivers = tuple(Seat(s, c, envy_only=True) for s, c in sorted((others or {}).items()) if s != seat)
    rnd = Round(game=game, wager=wager, paytable=paytable, meter=meter_units, reset=reset_units,
                seats=(Seat(seat, wager_cents, False, hand), *receivers))
    paid = settle(rnd).payouts
    payouts = tuple(p for p in paid if p.seat == seat and p.kind == "paytable")
    if payouts:  # Envy Bonuses exist only beside a paid hand at least as high (straight flush or better)
        payouts += tuple(p for p in paid if p.kind == "envy" and p.hand_of == f"seat {seat}")
    if not payouts:
        raise RulesError("cards", f"{cards_str(hand)} is not a winning hand for the {wager.title}")
    n = len(rc.claims) + 1
    return Claim(f"{rc.round_id}-c{n}", rc.round_id, seat, spot, meter, wager_cents, hand, payouts)

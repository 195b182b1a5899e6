"""The positions at a table: seats numbered from 1 and the dealer's hand. Position 0 stands for the dealer's hand
wherever a seat number is held (the Lucky Bonus may select the dealer's position: § 639a.1 "Lucky Bonus" (ii));
"dealer" is how it is written: the control socket's and progressivectl's `seat`, a payout's `hand_of`, a journal
key, the spot of a wager on it ("<wager>-dealer"). (The dealer who claims a hit, a claim's `claimed_by` "dealer", is
the person, not this position.)"""

from __future__ import annotations

DEALER_POSITION = 0
DEALER = "dealer"
_OWN_HAND, _DEALERS_HAND = 0, 1


def position_name(position: int) -> int | str:
    """A position as it is written: its seat number, or "dealer"."""
    return DEALER if position == DEALER_POSITION else position


def position_words(position: int) -> str:
    """A position in a sentence: "seat 4", "the dealer's hand"."""
    return "the dealer's hand" if position == DEALER_POSITION else f"seat {position}"


def settlement_order(turn: int, on_dealer: bool = False) -> tuple[int, int]:
    """A hand's place in a round's settlement (ascending): seat N's turn first, then N-1, ... (from the dealer's
    right, counterclockwise: § 639a.11(c), § 641a.11(c), § 667a.11(d), and at the dice tables § 668a.3(e)); within
    a seat's turn its own hand before the dealer's hand, which is settled at the turn of the first seat that
    wagered on it (§ 639a.12(e)(2))."""
    return (-turn, _DEALERS_HAND if on_dealer else _OWN_HAND)


__all__ = ["DEALER", "DEALER_POSITION", "position_name", "position_words", "settlement_order"]

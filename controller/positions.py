"""The positions at a table: seats numbered from 1 and the dealer's hand. Position 0 stands for the dealer's hand
wherever a seat number is held (the Lucky Bonus may select the dealer's position: § 639a.1 "Lucky Bonus" (ii));
"dealer" is how it is written: the control socket's and progressivectl's `seat`, a payout's `hand_of`, a journal
key, the spot of a wager on it ("<wager>-dealer")."""

from __future__ import annotations

DEALER_POSITION = 0
DEALER = "dealer"


def position_name(position: int) -> int | str:
    """A position as it is written: its seat number, or "dealer"."""
    return DEALER if position == DEALER_POSITION else position


__all__ = ["DEALER", "DEALER_POSITION", "position_name"]

"""What devices tell the controller (events) and what it tells them (commands).

Plain frozen data, independent of transport: a seat wagering device on a Modbus I/O module and one on
our line protocol raise the same ``WagerSensed``. Each event names the device (its configured name) so
that the table's round logic can tell a lock-out button from a seat without knowing the wire.

The device kinds are the ones the regulations require of a progressive table game system: a wagering
device at each betting position that acknowledges the wager and a lock-out that stops wagers being
recognized after "no more bets" (639a.2(c), 641a.2(c), 643a.2(d), 667a.2(c)); meter displays; automated
shufflers and shoes that count the cards (667a.5(b), 667a.13(d)-(e)); dice entry for the dice games.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# --- events (device -> controller) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WagerSensed:
    """A chip is on a wager spot. ``amount_cents`` only where the device can read the wager."""

    device: str
    seat: int
    spot: str
    amount_cents: int | None = None
    # The chip was already there when the controller (re)gained contact with the device (a start, a
    # recovery): placed while nobody could see it, so not a wager until it is lifted and placed again.
    present_at_contact: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class WagerRemoved:
    device: str
    seat: int
    spot: str


@dataclass(frozen=True, slots=True)
class LockoutPressed:
    """The dealer pressed the lock-out ("no more bets"). `previous_read_at`: when the read before the one that
    saw the press was sent (time.monotonic()): the press came after it, so from then to the wagers frozen is the
    longest a press waited to take effect. None where nobody can say (a press the device pushes)."""

    device: str
    previous_read_at: float | None = field(default=None, compare=False)  # a time, not what happened


@dataclass(frozen=True, slots=True)
class ShufflerCount:
    """An automated shuffler counted the cards after a shuffle (667a.5(b)). ``deck`` names which of
    two alternating decks it was (667a.3(b)), or is None for a single-deck shuffler."""

    device: str
    count: int
    deck: str | None = None


@dataclass(frozen=True, slots=True)
class ShuffleFault:
    device: str
    reason: str


@dataclass(frozen=True, slots=True)
class CardsDispensed:
    """A shoe reports how many cards it has dispensed since the last shuffle."""

    device: str
    count: int


@dataclass(frozen=True, slots=True)
class ShoeJam:
    device: str


@dataclass(frozen=True, slots=True)
class CardDealt:
    """A card-reading shoe read a card as it was dealt (``card`` as in controller.cards: 0..51)."""

    device: str
    card: int


@dataclass(frozen=True, slots=True)
class DiceRolled:
    device: str
    die1: int
    die2: int


@dataclass(frozen=True, slots=True)
class DeviceDown:
    """The device stopped answering (or its cable is out). Raised once per outage."""

    device: str
    reason: str


@dataclass(frozen=True, slots=True)
class DeviceUp:
    """The device answers again (also raised once on first contact)."""

    device: str


Event = (
    WagerSensed
    | WagerRemoved
    | LockoutPressed
    | ShufflerCount
    | ShuffleFault
    | CardsDispensed
    | ShoeJam
    | CardDealt
    | DiceRolled
    | DeviceDown
    | DeviceUp
)

# --- commands (controller -> device) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetAcceptedLight:
    """Acknowledge (or withdraw) a wager at a seat's spot: the light the player sees."""

    seat: int
    spot: str
    on: bool


@dataclass(frozen=True, slots=True)
class SetWinLight:
    seat: int
    on: bool


@dataclass(frozen=True, slots=True)
class SetLockoutLamp:
    on: bool


@dataclass(frozen=True, slots=True)
class ShowAmounts:
    """Show the meters, in cents, in the order given: ``((meter_id, cents), ...)``. The sign leaves any
    message it showed: amounts are its normal face."""

    amounts: tuple[tuple[str, int], ...]


class SignMessage(StrEnum):
    WIN = "WIN"
    PENDING = "PENDING"
    OFFLINE = "OFFLINE"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class ShowMessage:
    """A message on the meter display. WIN carries table, seat and amount."""

    message: SignMessage
    table: str | None = None
    seat: int | None = None
    amount_cents: int | None = None


Command = SetAcceptedLight | SetWinLight | SetLockoutLamp | ShowAmounts | ShowMessage


__all__ = ["CardDealt", "CardsDispensed", "Command", "DeviceDown", "DeviceUp", "DiceRolled", "Event", "LockoutPressed",
           "SetAcceptedLight", "SetLockoutLamp", "SetWinLight", "ShoeJam", "ShowAmounts", "ShowMessage", "ShuffleFault",
           "ShufflerCount", "SignMessage", "WagerRemoved", "WagerSensed"]

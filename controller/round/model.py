"""The data of a table's rounds: what the rules of this table are, where the round is, and the inputs and
effects of the round state machine (controller.round.machine). Plain frozen data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from controller.errors import InputError

MAX_STUB_INTERVAL = 5  # § 667a.8(f), § 667a.9(f), § 667a.10(e): count the stub at least once every 5 rounds


@dataclass(frozen=True)
class SpotRule:
    """One wager spot at every seat: which wager it takes, which meter it feeds, and the accepted amounts.

    ``on_dealer``: a wager on the dealer's hand (Five Card Hand Bonus, § 639a.7(d)(4)).
    """

    spot: str
    wager: str
    meter: str
    sizes: tuple[int, ...]  # cents
    on_dealer: bool = False

    def __post_init__(self) -> None:
        if not self.sizes or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in self.sizes):
            raise InputError(f"spots.{self.spot}.sizes", "must be one or more whole positive amounts of cents")


@dataclass(frozen=True)
class TableRules:
    table: str
    seats: int
    spots: Mapping[str, SpotRule]
    counting_shuffler: bool = True  # a shuffler that counts 52 cards after each shuffle (§ 667a.5(b))
    two_decks: bool = False  # two decks alternated by the shuffler (§ 667a.3(b))
    stub_count_every: int = MAX_STUB_INTERVAL

    def __post_init__(self) -> None:
        if self.seats < 1:
            raise InputError("seats", "must be at least 1")
        if not 1 <= self.stub_count_every <= MAX_STUB_INTERVAL:
            raise InputError("stub_count_every", f"must be 1 to {MAX_STUB_INTERVAL} (§ 667a.8(f))")
        if self.two_decks and not self.counting_shuffler:
            raise InputError("two_decks", "two alternating decks need an automated shuffler (§ 667a.3(b))")
        object.__setattr__(self, "spots", MappingProxyType(dict(self.spots)))


class Phase(StrEnum):
    BETTING = "betting"  # wagers are recognized (unless a block is up)
    LOCKING = "locking"  # lock-out pressed: wagers frozen, the booking is on its way to disk
    DEALING = "dealing"  # wagers locked and booked; cards dealt, hands settled
    VOID = "void"  # voided before settlement: waiting for the reversal to reach disk


class Block(StrEnum):
    """Why progressive wagering is disabled. Several may be up at once; betting needs none."""

    DECK = "deck"  # a shuffler count other than 52, a stub count that failed, or decks out of alternation
    STUB = "stub"  # the stub has not been counted in the last `stub_count_every` rounds (§ 667a.8(f))
    DEVICE = "device"  # a device of the whole table is down (the lock-out, the sign, a card counter)
    LINK = "link"  # the link authority of a linked meter has not been heard from
    CLOSED = "closed"  # the table is closed by a supervisor


SpotKey = tuple[int, str]  # (seat, spot)


@dataclass(frozen=True)
class DeckState:
    rounds_since_count: int = 0  # rounds dealt since the last good count (shuffler or stub)
    last_deck: str | None = None  # the deck the shuffler counted last (two-deck alternation)
    dispensed: int | None = None  # cards a shoe reported dispensed this round


@dataclass(frozen=True)
class TableState:
    round_no: int  # the current (or next) round
    phase: Phase = Phase.BETTING
    sensed: Mapping[SpotKey, int | None] = field(default_factory=dict)  # chips the devices report now
    stale: frozenset[SpotKey] = frozenset()  # chips left from a previous round: not a wager until replaced
    accepted: Mapping[SpotKey, int] = field(default_factory=dict)  # acknowledged wagers of this round (cents)
    blocks: Mapping[Block, frozenset[str]] = field(default_factory=dict)  # block -> who raised it
    # a seat's wagering device that does not answer -> the seats it serves: wagering disabled there only
    seats_down: Mapping[str, frozenset[int]] = field(default_factory=dict)
    deck: DeckState = DeckState()
    lamp: bool = False
    void_requested: str | None = None  # why the round being dealt is to be voided (a wrong stub count)

    @property
    def blocked(self) -> bool:
        return any(self.blocks.values())

    @property
    def disabled_seats(self) -> frozenset[int]:
        return disabled_seats(self.seats_down)


def disabled_seats(seats_down: Mapping[str, frozenset[int]]) -> frozenset[int]:
    """Seats where wagering is disabled because a wagering device of theirs does not answer."""
    return frozenset(seat for seats in seats_down.values() for seat in seats)


def round_id(table: str, round_no: int) -> str:
    return f"{table}-r{round_no}"


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipSensed:
    seat: int
    spot: str
    amount_cents: int | None = None


@dataclass(frozen=True)
class ChipRemoved:
    seat: int
    spot: str


@dataclass(frozen=True)
class LockoutPressed:
    """"No more bets" (§ 639a.8(b)). The shell draws the Magic Card and Lucky Bonus seat with the OS CSPRNG
    at this moment, before any card is dealt, and passes them in to be recorded with the booking."""

    magic_card: int | None = None
    lucky_seat: int | None = None


@dataclass(frozen=True)
class Booked:
    """The round's contributions are on disk (the ledger acknowledged the booking)."""

    round_id: str


@dataclass(frozen=True)
class ShuffleCounted:
    count: int
    deck: str | None = None


@dataclass(frozen=True)
class StubCounted:
    """The dealer counted the stub (§ 667a.8(f)). ``dealt`` is the number of cards out of the deck; None
    takes it from the shoe's dispensed count. ``by``: the supervisor who counted (a recount that finds the
    deck whole clears the block and the void a wrong count asked for). The counts are as they were entered:
    the machine checks them."""

    stub: object
    dealt: object = None
    by: str | None = None


@dataclass(frozen=True)
class CardsDispensed:
    count: int


@dataclass(frozen=True)
class DeckReplaced:
    """A supervisor confirmed that a new, inspected deck is in use (§ 667a.4, § 667a.5(b))."""

    by: str


@dataclass(frozen=True)
class VoidRound:
    """A shoe jam (§ 667a.13(e)), a misdeal (§ 667a.13(a), (c)) or a failed stub count (§ 667a.8(h))."""

    reason: str


@dataclass(frozen=True)
class Voided:
    """The reversal of a voided round's booking is on disk."""

    round_id: str


@dataclass(frozen=True)
class VoidRefused:
    """The ledger refused to reverse the voided round's booking (an award was paid): it is dealt again."""

    round_id: str
    reason: str


@dataclass(frozen=True)
class RoundSettled:
    """Every hand of the round is settled (payouts are the claim machinery's business). ``by``: a supervisor who
    settles a round a wrong stub count asked to void, where the void cannot be (an award of it was paid)."""

    round_id: str
    by: str | None = None


@dataclass(frozen=True)
class BlockRaised:
    block: Block
    source: str


@dataclass(frozen=True)
class BlockCleared:
    block: Block
    source: str


@dataclass(frozen=True)
class SeatsDown:
    """A seat's wagering device stopped answering: it can no longer acknowledge a wager at the seats it serves
    (§ 639a.2(c)(1)), so wagering is disabled there; the rest of the table goes on."""

    device: str
    seats: tuple[int, ...]


@dataclass(frozen=True)
class SeatsUp:
    """The device answers again (or for the first time)."""

    device: str


Input = (ChipSensed | ChipRemoved | LockoutPressed | Booked | ShuffleCounted | StubCounted | CardsDispensed
         | DeckReplaced | VoidRound | Voided | VoidRefused | RoundSettled | BlockRaised | BlockCleared
         | SeatsDown | SeatsUp)

# --- effects -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Light:
    """The accepted light of a seat's spot: the player's proof that the wager was recognized."""

    seat: int
    spot: str
    on: bool


@dataclass(frozen=True)
class Lamp:
    on: bool


@dataclass(frozen=True)
class Book:
    """Book the round's contributions, one batch per meter, durably; answer with Booked."""

    round_id: str
    wagers: Mapping[str, tuple[tuple[int, int], ...]]  # meter -> ((seat, cents), ...)
    magic_card: int | None
    lucky_seat: int | None
    # meter -> the indices in wagers[meter] of the wagers on the dealer's hand (§ 639a.7(d)(4)); a seat may have
    # a wager on its own hand and one on the dealer's hand on the same meter. Meters without any are left out.
    on_dealer: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Reconcile:
    """For the dealer's chip count: how many wagers of each spot the system accepted (§ 639a.8(b))."""

    round_id: str
    counts: Mapping[str, int]


@dataclass(frozen=True)
class Reverse:
    """Reverse the booking of a voided round (every wager returned); answer with Voided."""

    round_id: str
    reason: str
    meters: tuple[str, ...]


@dataclass(frozen=True)
class Close:
    """The round is over: record it closed (it can no longer be voided or paid)."""

    round_id: str


@dataclass(frozen=True)
class Opened:
    """Betting is open for this round."""

    round_id: str


@dataclass(frozen=True)
class Note:
    """Something for the log and the metrics (of the round machine and the claim machine): ``what`` is the log
    event's name, a short lower-case phrase that stays the same (e.g. "wager not recognized"); what varies is in
    ``detail``."""

    what: str
    detail: Mapping[str, object] = field(default_factory=dict)


Effect = Light | Lamp | Book | Reconcile | Reverse | Close | Opened | Note


@dataclass(frozen=True)
class Step:
    state: TableState
    effects: tuple[Effect, ...] = ()


__all__ = ["MAX_STUB_INTERVAL", "Block", "BlockCleared", "BlockRaised", "Book", "Booked", "CardsDispensed",
           "ChipRemoved", "ChipSensed", "Close", "DeckReplaced", "DeckState", "Effect", "Input", "Lamp", "Light",
           "LockoutPressed", "Note", "Opened", "Phase", "Reconcile", "Reverse", "RoundSettled", "SeatsDown", "SeatsUp",
           "ShuffleCounted", "SpotKey", "SpotRule", "Step", "StubCounted", "TableRules", "TableState", "VoidRefused",
           "VoidRound", "Voided", "disabled_seats", "round_id"]

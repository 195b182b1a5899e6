"""What a payout is, decided once for the report, the daemon's views and the console: the jackpot (a percentage
of the meter), an Envy Bonus (§ 639a.11(c)(5)(v)), the Magic Card or the Lucky Bonus (§ 639a.12(e)(3)), or a
fixed award of the paytable (any other row: "500 for 1", "$1,000").

A claim's payout says its kind (`Payout.kind`); a hit in the meter's history says only its hand and its award
(`claims.hit_hand` writes the Magic Card and the Lucky Bonus into the hand), so an Envy Bonus there is known by
its paytable (`is_envy`). Each reader words the kind its own way (`TITLES` for people)."""

from __future__ import annotations

from controller.awards import PercentOfMeter, parse_award
from controller.errors import InputError
from controller.paytables import Paytable

JACKPOT, FIXED, ENVY, MAGIC_CARD, LUCKY_BONUS = "jackpot", "fixed-award", "envy-bonus", "magic-card", "lucky-bonus"
KINDS: tuple[str, ...] = (JACKPOT, FIXED, ENVY, MAGIC_CARD, LUCKY_BONUS)
TITLES: dict[str, str] = {JACKPOT: "Jackpot", FIXED: "Fixed award", ENVY: "Envy Bonus", MAGIC_CARD: "Magic Card",
                          LUCKY_BONUS: "Lucky Bonus"}
_OF_PAYOUT = {"envy": ENVY, "magic-card": MAGIC_CARD, "lucky-bonus": LUCKY_BONUS}  # Payout.kind; "paytable": by award


def is_percent(award: object) -> bool:
    """The award is a percentage of the meter ("100% of meter"); text that is no award is not."""
    try:
        return isinstance(parse_award(award, "award"), PercentOfMeter)
    except InputError:
        return False


def payout_kind(award: object, kind: object = None, hand: object = "") -> str:
    """One of KINDS: by the payout's `kind` where a claim gives it ("envy", "magic-card", "lucky-bonus";
    "paytable" says no more); else by the `hand` a hit is recorded on ("magic card 7H", "lucky bonus", as
    `hit_hand` writes them); else JACKPOT for a percentage of the meter and FIXED for any other award."""
    what = _OF_PAYOUT.get(kind) if isinstance(kind, str) else None
    if what is not None:
        return what
    if is_percent(award):
        return JACKPOT
    text = hand if isinstance(hand, str) else ""
    if text.startswith("magic card"):
        return MAGIC_CARD
    return LUCKY_BONUS if text.startswith("lucky bonus") else FIXED


def is_envy(paytable: Paytable, hand: str, award: str) -> bool:
    """Whether a hit the table paid on `hand` with `award` is an Envy Bonus of `paytable`: the award is its envy
    table's for that hand and not the paytable's own row for it."""
    if paytable.envy is None or award in {p.award.describe() for p in paytable.pays if p.hand == hand}:
        return False
    return any(row.get(hand) is not None and row[hand].describe() == award for row in paytable.envy.by_wager.values())


__all__ = ["ENVY", "FIXED", "JACKPOT", "KINDS", "LUCKY_BONUS", "MAGIC_CARD", "TITLES", "is_envy", "is_percent",
           "payout_kind"]

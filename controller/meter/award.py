"""Taking a percentage award from a progressive meter (pure arithmetic).

Design conventions: a percentage award is computed from the meter when it is that player's turn
to be paid (§ 639a.12(d)(5), § 667a.12(d)(4)) and floored to the cent; the remainder stays on
the meter. The meter never shows less than its reset amount (§ 639a.12(d)(4), § 667a.12(d)(3)):
if an award takes it below, it is restored to the reset amount and what that took is booked as
seed, so that ``after == before - paid + seeded`` always holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from controller.money import UNITS_PER_CENT

RESET_FLOOR_CENTS = 10_000_00  # $10,000: § 639a.12(d)(4), § 639a.12(e)(4), § 641a.12(g)(4), § 667a.12(d)(3)


@dataclass(frozen=True)
class MeterTake:
    paid_cents: int  # what leaves the meter, in whole cents
    before: int  # meter units
    after: int  # meter units, never below the reset amount
    seeded: int  # meter units added to restore the reset amount


def take_percent(meter: int, reset: int, percent: Fraction, shares: int = 1) -> tuple[int, MeterTake]:
    """Pay `percent` of `meter` split equally among `shares` players.

    Returns (cents per share, the meter change). The award is floored to the cent, then divided
    equally to the cent; indivisible cents stay on the meter (§ 639a.12(e)(2), design conventions).
    """
    if shares < 1:
        raise ValueError("shares must be at least 1")
    raw = Fraction(meter) * percent / 100
    total_cents = (raw.numerator // raw.denominator) // UNITS_PER_CENT
    per_share = total_cents // shares
    paid = per_share * shares
    left = meter - paid * UNITS_PER_CENT
    seeded = max(0, reset - left)
    return per_share, MeterTake(paid_cents=paid, before=meter, after=left + seeded, seeded=seeded)


__all__ = ["RESET_FLOOR_CENTS", "MeterTake", "take_percent"]

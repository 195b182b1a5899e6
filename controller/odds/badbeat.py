"""Four Card Poker's Bad Beat Bonus Wager (§ 641a.7(d)(6), § 641a.11(c)(6)): not yet exact."""

from __future__ import annotations

from ..errors import RulesError
from .counts import HandCounts


def bad_beat_counts() -> HandCounts:
    raise RulesError("wager", "exact Bad Beat Bonus odds are not available")

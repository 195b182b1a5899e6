"""The Six Eight Shake Wager (§ 668a.2(f)(8), § 668a.3(e), (i)) as a value stepped one roll at a time.

It wins once each combination of six (1-5, 2-4, 3-3) and of eight (2-6, 3-5, 4-4) has been
thrown before a seven, and is paid at once (§ 668a.3(i)); a seven loses it. The player may take
it down at any time before a seven (§ 668a.2(f)(8)).

The regulations describe one set of lammers for the table. A wager made after some of them have
moved would then need fewer combinations than one made earlier, so each wager here keeps its own
lammers: only throws after it was made count for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from controller.dice.pays import LOSE
from controller.dice.roll import Combination, Roll

BET = "six-eight-shake"

# § 668a.2(f)(8), § 668a.3(e): the six combinations that carry a lammer.
COMBINATIONS: tuple[Combination, ...] = ((1, 5), (2, 4), (3, 3), (2, 6), (3, 5), (4, 4))


@dataclass(frozen=True)
class SixEightShakeWager:
    seat: int
    wager_cents: int
    placed_before_roll: int  # index of the first roll that counts for this wager
    thrown: frozenset[Combination] = frozenset()  # lammers moved to the Six Eight Shake circle
    tag: int | None = None

    @property
    def lammers(self) -> tuple[Combination, ...]:
        """Combinations still carrying a lammer, i.e. still to be thrown."""
        return tuple(c for c in COMBINATIONS if c not in self.thrown)

    def step(self, roll: Roll) -> tuple[SixEightShakeWager, str | None]:
        """The wager after `roll`, and its outcome if the roll resolves it (BET or "lose")."""
        if roll.total == 7:
            return self, LOSE
        c = roll.combination
        if c not in COMBINATIONS or c in self.thrown:
            return self, None
        after = replace(self, thrown=self.thrown | {c})
        return after, (BET if not after.lammers else None)


__all__ = ["BET", "COMBINATIONS", "SixEightShakeWager"]

"""Hot Roller Craps (§ 623c.1) as a state machine fed one roll at a time.

A series of rolls runs until a 7. Wagers are accepted only before its come-out roll, i.e. while
no roll of the series has been recorded, and are then fixed until the 7 settles them
(§ 623c.1(b)). Each throw of a 4, 5, 6, 8, 9 or 10 puts a marker on its combination (§ 623c.1(d));
a number is complete once all its combinations are marked (§ 623c.1(f)). On the 7 every wager wins
if at least two numbers are complete, paid by how many are (§ 623c.1(g)-(h)), and loses otherwise.

The machine is an immutable value: each step returns a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from controller.awards import Award
from controller.dice.pays import LOSE, PayAward, PaytableLike, check_wager_cents, pay_table, received_cents
from controller.dice.roll import Combination, Roll, combination_str, parse_roll
from controller.errors import InputError, RulesError
from controller.games import HandKind

BET = "hot-roller"

# § 623c.1(a)(2)(iii)(A)-(F): the combinations depicted under each number.
NUMBERS: dict[int, tuple[Combination, ...]] = {
    4: ((1, 3), (2, 2)),
    5: ((1, 4), (2, 3)),
    6: ((1, 5), (2, 4), (3, 3)),
    8: ((2, 6), (3, 5), (4, 4)),
    9: ((3, 6), (4, 5)),
    10: ((4, 6), (5, 5)),
}
MARKER_COMBINATIONS: tuple[Combination, ...] = tuple(c for combos in NUMBERS.values() for c in combos)

POSITIONS = range(1, 17)  # § 623c.1(a)(2)(i): no more than 16 wager areas, numbered from 1

# § 623c.1(h): paid by the count of completed numbers; fewer than two loses (§ 623c.1(g)).
OUTCOME_KEYS: dict[int, str] = {
    2: "two-numbers",
    3: "three-numbers",
    4: "four-numbers",
    5: "five-numbers",
    6: "six-numbers",
}


def outcome_key(numbers_complete: int) -> str:
    return OUTCOME_KEYS.get(numbers_complete, LOSE)


def complete_numbers(markers: frozenset[Combination]) -> tuple[int, ...]:
    """The numbers all of whose combinations are marked (§ 623c.1(f))."""
    return tuple(n for n, combos in NUMBERS.items() if all(c in markers for c in combos))


@dataclass(frozen=True)
class HotRollerWager:
    position: int
    wager_cents: int
    tag: int | None = None  # the caller's reference, e.g. an index into its input


@dataclass(frozen=True)
class HotRollerResolution:
    position: int
    wager_cents: int
    outcome: str  # an OUTCOME_KEYS value or "lose"
    award: Award | None
    amount_cents: int  # received, the wager included; 0 for a loss
    numbers_complete: int
    tag: int | None = None


@dataclass(frozen=True)
class HotRoller:
    paytable_id: str
    awards: tuple[tuple[str, PayAward], ...]
    markers: frozenset[Combination] = frozenset()
    series_rolls: int = 0  # rolls recorded since the last 7; 0 means the next roll is the come-out
    wagers: tuple[HotRollerWager, ...] = ()  # in position order

    @classmethod
    def new(cls, paytable: PaytableLike, field: str = "paytable") -> HotRoller:
        awards = pay_table(paytable, HandKind.HOT_ROLLER.value, field)
        have = dict(awards)
        missing = [k for k in OUTCOME_KEYS.values() if k not in have]
        if missing:
            raise InputError(field, f"paytable {paytable.id!r} gives no odds for {', '.join(missing)} (§ 623c.1(h))")
        unknown = [k for k in have if k not in OUTCOME_KEYS.values()]
        if unknown:
            raise InputError(field, f"paytable {paytable.id!r} has outcomes Hot Roller does not know: {', '.join(unknown)}")
        return cls(paytable.id, tuple((k, have[k]) for k in OUTCOME_KEYS.values()))

    @property
    def numbers_complete(self) -> tuple[int, ...]:
        return complete_numbers(self.markers)

    def wager_at(self, position: int) -> HotRollerWager | None:
        return next((w for w in self.wagers if w.position == position), None)

    def place(self, position: object, wager_cents: object, tag: int | None = None) -> HotRoller:
        """A wager at `position`, accepted only before the come-out roll (§ 623c.1(b))."""
        if isinstance(position, bool) or not isinstance(position, int) or position not in POSITIONS:
            raise InputError("position", f"Hot Roller wager areas are numbered 1 to 16 (§ 623c.1(a)(2)(i)), not {position!r}")
        cents = check_wager_cents(wager_cents)
        if self.series_rolls:
            raise RulesError(
                "roll",
                f"a Hot Roller wager may be made only prior to the come-out roll (§ 623c.1(b)); "
                f"{self.series_rolls} roll(s) of this series have been thrown and it runs until a 7",
            )
        if self.wager_at(position) is not None:
            raise RulesError(
                "position",
                f"position {position} already has a Hot Roller wager; it may not be increased or reduced "
                "until resolved (§ 623c.1(b))",
            )
        wagers = sorted((*self.wagers, HotRollerWager(position, cents, tag)), key=lambda w: w.position)
        return replace(self, wagers=tuple(wagers))

    def remove(self, position: int) -> HotRoller:
        """Always refused: a wager stays until the 7 resolves it (§ 623c.1(b))."""
        if self.wager_at(position) is None:
            raise RulesError("position", f"position {position} has no Hot Roller wager")
        raise RulesError(
            "position",
            f"the Hot Roller wager at position {position} may not be reduced, increased or removed until resolved "
            "on a 7 (§ 623c.1(b))",
        )

    def roll(self, dice: object) -> tuple[HotRoller, tuple[HotRollerResolution, ...]]:
        """Record one throw; on a 7 settle every wager (§ 623c.1(g)) and start a new series."""
        r: Roll = parse_roll(dice)
        if r.total != 7:
            markers = self.markers | {r.combination} if r.combination in MARKER_COMBINATIONS else self.markers
            return replace(self, markers=markers, series_rolls=self.series_rolls + 1), ()
        count = len(self.numbers_complete)
        key = outcome_key(count)
        award = dict(self.awards).get(key)
        resolutions = tuple(
            HotRollerResolution(
                w.position, w.wager_cents, key, award,
                received_cents(award, w.wager_cents) if award is not None else 0, count, w.tag,
            )
            for w in self.wagers  # position-number order
        )
        return replace(self, markers=frozenset(), series_rolls=0, wagers=()), resolutions

    def board(self) -> dict[int, dict[str, bool]]:
        """For a display: each number's combinations and whether a marker is on each."""
        return {n: {combination_str(c): c in self.markers for c in combos} for n, combos in NUMBERS.items()}


__all__ = ["BET", "MARKER_COMBINATIONS", "NUMBERS", "OUTCOME_KEYS", "POSITIONS", "HotRoller", "HotRollerResolution",
           "HotRollerWager", "complete_numbers", "outcome_key"]

"""Dice wagers: Hot Roller Craps (§ 623c.1) and Props & Hops (§ 668a, § 585.2) as pure state
machines fed one roll at a time, their settlement for the command line, and their exact odds."""

from controller.dice.hot_roller import (
    MARKER_COMBINATIONS,
    NUMBERS,
    OUTCOME_KEYS,
    HotRoller,
    HotRollerResolution,
    HotRollerWager,
    complete_numbers,
)
from controller.dice.layout import EXAMPLE_GRID, EXAMPLE_LAYOUT, HOPS, HopLayout, parse_layout
from controller.dice.odds import (
    hot_roller_outcomes,
    hot_roller_return,
    props_and_hops_outcomes,
    props_and_hops_return,
    six_eight_shake_win_probability,
)
from controller.dice.pays import LOSE
from controller.dice.props_and_hops import (
    BETS,
    REMOVED,
    Bet,
    PropsAndHops,
    PropsResolution,
    PropsWager,
    single_roll_outcome,
)
from controller.dice.roll import (
    ALL_ROLLS,
    COMBINATIONS,
    Combination,
    Roll,
    combination_str,
    parse_combination,
    parse_roll,
)
from controller.dice.settle import DiceAward, DiceSettlement, settle_dice, to_json
from controller.dice.six_eight_shake import SixEightShakeWager

__all__ = [
    "ALL_ROLLS", "BETS", "COMBINATIONS", "EXAMPLE_GRID", "EXAMPLE_LAYOUT", "HOPS", "LOSE", "MARKER_COMBINATIONS",
    "NUMBERS", "OUTCOME_KEYS", "REMOVED", "Bet", "Combination", "DiceAward", "DiceSettlement", "HopLayout",
    "HotRoller", "HotRollerResolution", "HotRollerWager", "PropsAndHops", "PropsResolution", "PropsWager", "Roll",
    "SixEightShakeWager", "combination_str", "complete_numbers", "hot_roller_outcomes", "hot_roller_return",
    "parse_combination", "parse_layout", "parse_roll", "props_and_hops_outcomes", "props_and_hops_return",
    "settle_dice", "single_roll_outcome", "six_eight_shake_win_probability", "to_json",
]

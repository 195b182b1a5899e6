"""Paytables as data: the model, the TOML loader, the paytables the regulations print, and the
rules for selecting one (docs/paytables.md)."""

from controller.paytables.load import all_paytables, builtin_paytables, find_paytable, load_paytable, load_paytable_text
from controller.paytables.model import (
    ANY_WAGER,
    DICE_KEYS,
    HOT_ROLLER_KEYS,
    PROPS_AND_HOPS_KEYS,
    PROPS_AND_HOPS_OPTIONAL_KEYS,
    EnvyTable,
    Pay,
    Paytable,
    hand_keys,
    hand_type,
)
from controller.paytables.validate import (
    ENVY_QUALIFYING,
    MINIMUM_PAYING,
    EnvyRule,
    Minimum,
    check_paytable_for,
    covers,
    printed_paytables,
)

__all__ = [
    "ANY_WAGER",
    "DICE_KEYS",
    "ENVY_QUALIFYING",
    "HOT_ROLLER_KEYS",
    "MINIMUM_PAYING",
    "PROPS_AND_HOPS_KEYS",
    "PROPS_AND_HOPS_OPTIONAL_KEYS",
    "EnvyRule",
    "EnvyTable",
    "Minimum",
    "Pay",
    "Paytable",
    "all_paytables",
    "builtin_paytables",
    "check_paytable_for",
    "covers",
    "find_paytable",
    "hand_keys",
    "hand_type",
    "load_paytable",
    "load_paytable_text",
    "printed_paytables",
]

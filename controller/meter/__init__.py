"""The progressive meter as a pure core: parameters, state, operations and `apply`.

    state = initial_state(params)
    state, effect = apply(state, BookContributions("r1", "t1", ((3, 500),), at))

Every operation is an immutable value with a stable ``kind`` and ``to_dict``/``from_dict`` (a ledger
journals them); `apply` is the one function that moves money, and every state it returns satisfies
`check_invariant`. No I/O, no clock: times and credentials come in as arguments. See docs/meters.md.
"""

from controller.errors import InvariantViolation
from controller.meter.engine import Effect, apply
from controller.meter.ops import (
    OPS,
    Adjust,
    BookContributions,
    ChangeParams,
    CloseRound,
    LockPercentAward,
    Op,
    PayFixedAward,
    PayLockedAward,
    PayPercentAward,
    ReleaseLockedAward,
    TopUp,
    VoidRound,
    op_from_dict,
)
from controller.meter.params import DEFAULT_HISTORY, MIN_HISTORY, MeterParams, params_from_dict, params_to_dict
from controller.meter.snapshot import state_from_dict, state_to_dict
from controller.meter.state import (
    RECENT_CLAIMS,
    RECENT_ROUNDS,
    Booking,
    Hit,
    LockedAward,
    MeterState,
    SharedAward,
    check_invariant,
    hit_label,
    initial_state,
    invariant_failures,
    invariant_holds,
)

__all__ = [
    "DEFAULT_HISTORY", "MIN_HISTORY", "OPS", "RECENT_CLAIMS", "RECENT_ROUNDS",
    "Adjust", "BookContributions", "Booking", "ChangeParams", "CloseRound", "Effect", "Hit", "InvariantViolation",
    "LockPercentAward", "LockedAward", "MeterParams", "MeterState", "Op", "PayFixedAward", "PayLockedAward",
    "PayPercentAward", "ReleaseLockedAward", "SharedAward", "TopUp", "VoidRound",
    "apply", "check_invariant", "hit_label", "initial_state", "invariant_failures", "invariant_holds",
    "op_from_dict", "params_from_dict", "params_to_dict", "state_from_dict", "state_to_dict",
]

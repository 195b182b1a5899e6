"""[meters]: a table's own meters (their parameters checked by MeterParams) and its linked meters."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from controller.config import schema
from controller.config.check import Checker
from controller.config.model import LinkedMeter, StandaloneMeter
from controller.errors import InputError
from controller.meter.award import RESET_FLOOR_CENTS
from controller.meter.params import DEFAULT_HISTORY, MeterParams
from controller.money import format_dollars_human
from controller.tomlfile.problems import join

METER_ID = re.compile(r"[a-z0-9-]+")
_METER_FIELD = {"reset_cents": "reset", "ceiling_cents": "ceiling", "meter_id": ""}
_METER_HINT = {
    "reset": f'the reset amount is at least the floor: reset = "{RESET_FLOOR_CENTS // 100}.00"',
    "rate": 'the rate of progression is the fraction of each wager added to the meter, more than 0 and less '
            'than 1: rate = "0.15" for 15%',
    "reserve_rate": "the rate of progression and the reserve rate together must be less than 1",
    "ceiling": "the ceiling must be above the reset amount; leave it out for no ceiling",
    "wager_sizes": 'list each accepted wager amount once: wager_sizes = ["1.00", "5.00"]',
    "history_size": f"keep at least the last 25 hits: history_size = {DEFAULT_HISTORY} (the default)",
    "": "a meter id is 1 to 64 characters of a-z, 0-9 and -",
}
_METER_PARAM = {"reset": "reset_cents", "ceiling": "ceiling_cents"}  # TOML key -> MeterParams field
_METER_STAND_INS = {"reset": f"{RESET_FLOOR_CENTS // 100}", "rate": "0.01", "reserve_rate": "0",
                    "ceiling": None, "wager_sizes": ["1.00"], "history_size": DEFAULT_HISTORY, "description": ""}
_NEUTRAL: dict[str, Any] = {  # a valid stand-in for a field found wrong, so the next fields get checked too
    "meter_id": "m", "reset_cents": RESET_FLOOR_CENTS, "rate": Fraction(1, 100), "reserve_rate": Fraction(0),
    "ceiling_cents": None, "wager_sizes": (100,), "history_size": DEFAULT_HISTORY,
}


class MeterChecks(Checker):
    """Each meter of [meters]: `meters` and `meter_linked` by id."""

    def _meter(self, mid: str, raw: object) -> None:
        at = join("meters", mid)
        self.meters[mid] = None
        if not METER_ID.fullmatch(mid) or len(mid) > 64:
            self.add(at, f"{mid!r} is not a valid meter id", _METER_HINT[""])
            return
        body = self.table(raw, at, f'[meters.{mid}] with reset, rate and wager_sizes, or linked = "..."')
        if body is None:
            return
        if "linked" in body:
            self.meter_linked[mid] = True
            rest = dict(body)
            for k in schema.STANDALONE_ONLY:
                if k in rest:
                    del rest[k]
                    self.add(join(at, k), "is set by the link authority: a linked meter takes its parameters "
                             "from the authority that owns it",
                             f"remove {k}, or remove linked to make this meter the table's own")
            m = self.validate(schema.LinkedMeterModel, rest, at,
                              allowed=tuple(schema.LinkedMeterModel.model_fields))
            if m is not None:
                sizes = tuple(m.wager_sizes)
                for i, size in enumerate(sizes):
                    if size <= 0:
                        self.add(join(at, "wager_sizes", i), "must be more than zero", _METER_HINT["wager_sizes"])
                    elif size in sizes[:i]:
                        self.add(join(at, "wager_sizes", i), f"{format_dollars_human(size)} is listed twice",
                                 _METER_HINT["wager_sizes"])
                self.meters[mid] = LinkedMeter(mid, m.linked, tuple(sorted(set(sizes))))
            return
        self.meter_linked[mid] = False
        allowed = (*schema.StandaloneMeterModel.model_fields, "linked")
        checked = self.validate(schema.StandaloneMeterModel, body, at, allowed=allowed, hints={
            "reset": f'reset = "{RESET_FLOOR_CENTS // 100}.00" (at least the $10,000 floor)',
            "rate": 'rate = "0.15" (15% of each wager goes to the meter)',
            "wager_sizes": 'wager_sizes = ["1.00", "5.00"] (the wager amounts accepted)',
        }, stand_ins=_METER_STAND_INS)
        if checked is None:
            return
        m, bad = checked
        quiet = {_METER_PARAM.get(k, k) for k in bad}
        params = self._meter_params(mid, at, {
            "meter_id": mid, "reset_cents": m.reset, "rate": m.rate, "reserve_rate": m.reserve_rate,
            "ceiling_cents": m.ceiling, "wager_sizes": tuple(m.wager_sizes), "history_size": m.history_size,
        }, quiet)
        if params is not None and not bad:
            self.meters[mid] = StandaloneMeter(mid, params)

    def _meter_params(self, mid: str, at: str, kwargs: dict[str, Any], quiet: set[str]) -> MeterParams | None:
        """MeterParams checks the parameters and stops at the first problem; to report them all, each
        field found wrong is replaced by a valid stand-in and the rest checked again. Problems of the
        fields in `quiet` (already reported, holding stand-ins) are not reported again."""
        found = False
        for _ in range(len(_NEUTRAL) + 1):
            try:
                params = MeterParams(**kwargs)
            except InputError as e:
                found = True
                head, bracket, rest = e.field.partition("[")
                key = _METER_FIELD.get(head, head)
                if head not in quiet:
                    self.add(join(at, key) + (bracket + rest if bracket else ""), e.problem,
                             _METER_HINT.get(key, ""))
                if head not in _NEUTRAL or kwargs.get(head) == _NEUTRAL[head]:
                    return None
                kwargs[head] = _NEUTRAL[head]
                continue
            return None if found else params
        return None


__all__ = ["METER_ID", "MeterChecks"]

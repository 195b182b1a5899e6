"""The lock-out press at a card table: the Magic Card and Lucky Bonus position drawn at it, and its two timings
as metrics (from the press to the wagers locked, and from the lock-out read before the press to the freeze)."""

from __future__ import annotations

import time
from collections.abc import Callable

from controller.app.metrics import Metrics
from controller.config.model import TableConfig


def draws(cfg: TableConfig, draw: Callable[[int], int]) -> dict[str, int | None]:
    """Magic Card and Lucky Bonus position (§ 639a.1), drawn with `draw` (the OS CSPRNG) at lock-out. The position
    is one of the seats 1..N, or the dealer's position (0) where the wager that pays it may be placed on the
    dealer's hand (§ 639a.1, § 641a.1 "Lucky Bonus" (ii)); elsewhere a seat only (§ 643a.1 "Lucky Bonus": "the
    position that is randomly selected" is where a player is seated). Each position equally likely."""
    paying = [w.wager for w in cfg.wagers.values() if w.wager.magic_and_lucky]
    if not paying:
        return {"magic_card": None, "lucky_seat": None}
    magic = draw(52)
    # 0 (the dealer's position) to N where a paying wager may be on the dealer's hand, else 1 to N
    lucky = draw(cfg.seats + 1) if any(w.lucky_dealer_position for w in paying) else 1 + draw(cfg.seats)
    return {"magic_card": magic, "lucky_seat": lucky}


class LockoutTimer:
    """Times a press of the lock-out: `pressed` when it comes (with the drivers' read before it), `frozen` when the
    round leaves betting (observed only while the press is being applied), `locked` when the wagers are locked."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._pressed_at: float | None = None
        self._window_from: float | None = None  # the lock-out read before the press (drivers' LockoutPressed)

    def pressed(self, previous_read_at: float | None) -> None:
        self._pressed_at = time.monotonic()
        self._window_from = previous_read_at

    def applied(self) -> None:
        """The press went through the round machine: a freeze after it is not the press's."""
        self._window_from = None

    def frozen(self) -> None:
        if self._window_from is not None:
            self._metrics.lockout_window.observe(time.monotonic() - self._window_from)
            self._window_from = None

    def locked(self) -> None:
        if self._pressed_at is not None:
            self._metrics.lockout_latency.observe(time.monotonic() - self._pressed_at)
            self._pressed_at = None


__all__ = ["LockoutTimer", "draws"]

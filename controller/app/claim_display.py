"""What a card table shows of its jackpot claims: the win lights, PENDING and WIN on the meter sign, and the
claims' metrics. It decides nothing: the claim machine's steps say what to show (controller.round.claim_machine)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from controller.app.metrics import Metrics
from controller.app.sign import Sign
from controller.money import format_cents
from controller.round import claim_machine as cm

log = structlog.get_logger("table")


class ClaimDisplay:
    """The win lights, the sign's PENDING and WIN, and the claims' metrics, as the claim machine's steps say."""

    def __init__(self, table: str, sign: Sign, metrics: Metrics, win_light: Callable[[int, bool], None],
                 on_paid: Callable[[], None] = lambda: None) -> None:
        self._table = table
        self._sign = sign
        self._metrics = metrics
        self._win_light = win_light
        self._on_paid = on_paid

    def light(self, seat: int, on: bool) -> None:
        self._win_light(seat, on)  # § 639a.11(c)(5)(ii): the light the dealer verifies

    def lights_off(self, seats: Iterable[int]) -> None:
        for seat in sorted(seats):
            self._win_light(seat, False)

    def show(self, face: cm.Face) -> None:
        """PENDING with the seat and amount of the claim that waits (or nothing), and the pending metric."""
        self._sign.pending(face.seat, face.amount_cents)
        self._metrics.claims_pending.set(1 if face.pending else 0)

    def ended(self, statuses: Iterable[str]) -> None:
        """Claims ended unpaid at a step: rejected, voided or refused."""
        for status in statuses:
            self._metrics.claims.labels(status).inc()

    def won(self, w: cm.Won) -> None:
        """Every payout of the claim is journaled: WIN on the sign, and the journal anchored (`on_paid`)."""
        self._metrics.claims.labels("paid").inc()
        log.info("claim paid", claim=w.claim_id, seat=w.seat, amount=format_cents(w.amount_cents), by=w.by)
        self._sign.win(self._table, w.seat, w.amount_cents)
        self._on_paid()


__all__ = ["ClaimDisplay"]

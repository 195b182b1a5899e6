"""The claim display (controller/app/claim_display.py): the win lights, PENDING and WIN on a real sign and the
claims' metrics, as the claim machine's steps say; it decides nothing itself."""

from __future__ import annotations

from controller.app.claim_display import ClaimDisplay
from controller.app.metrics import Metrics
from controller.app.sign import Sign
from controller.round import claim_machine as cm
from controller.round.claims import Claim, RoundClaims
from controller.round.settlement import Payout
from drivers import events as ev

RID = "CS-07-r1"


class Out:
    def __init__(self) -> None:
        self.shown: ev.Command | None = None

    def want(self, key: object, command: ev.Command) -> None:
        self.shown = command


def royal(seat: int = 6) -> Claim:
    p = Payout(seat, 100, "paytable", "player", "royal-flush", (), "100% of meter", 1_000_045, "attendant", True)
    return Claim(f"{RID}-c1", RID, seat, "progressive", "main", 100, (), (p,), turn=seat)


def display() -> tuple[ClaimDisplay, Out, Metrics, list[tuple[int, bool]], list[str]]:
    out, metrics, lights, paid = Out(), Metrics("CS-07"), [], []
    d = ClaimDisplay("CS-07", Sign("CS-07", [out]), metrics, lambda seat, on: lights.append((seat, on)),
                     on_paid=lambda: paid.append("anchored"))
    return d, out, metrics, lights, paid


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_claim_that_waits_is_shown_pending_with_its_seat_and_amount_and_counted():
    d, out, metrics, lights, _ = display()
    step = cm.step(RoundClaims(RID), cm.NewClaim(royal(6)))
    for e in step.effects:
        if isinstance(e, cm.WinLight):
            d.light(e.seat, e.on)
    d.show(step.face)
    assert isinstance(out.shown, ev.ShowMessage) and out.shown.message is ev.SignMessage.PENDING
    assert (out.shown.seat, out.shown.amount_cents) == (6, 1_000_045)
    assert sample(metrics, "progressive_claims_pending") == 1
    assert lights == [(6, True)]
    d.show(cm.Face())  # nothing waits any more
    assert sample(metrics, "progressive_claims_pending") == 0
    assert not (isinstance(out.shown, ev.ShowMessage) and out.shown.message is ev.SignMessage.PENDING), out.shown


def test_a_paid_claim_shows_its_win_and_anchors_the_journal():
    d, out, metrics, _, paid = display()
    rc = cm.step(RoundClaims(RID), cm.NewClaim(royal(4))).claims
    rc = cm.step(rc, cm.Approve(f"{RID}-c1", "floor-1")).claims
    won = [e for e in cm.step(rc, cm.PaymentsMade(f"{RID}-c1", (0,))).effects if isinstance(e, cm.Won)]
    assert won == [cm.Won(f"{RID}-c1", 4, 1_000_045, "floor-1")]
    d.won(won[0])
    assert isinstance(out.shown, ev.ShowMessage) and out.shown.message is ev.SignMessage.WIN
    assert (out.shown.table, out.shown.seat, out.shown.amount_cents) == ("CS-07", 4, 1_000_045)
    assert paid == ["anchored"] and sample(metrics, "progressive_claims_total", outcome="paid") == 1


def test_claims_that_ended_unpaid_are_counted_by_how_and_lights_go_off():
    d, _, metrics, lights, _ = display()
    rc = cm.step(RoundClaims(RID), cm.NewClaim(royal(3))).claims
    step = cm.step(rc, cm.Reject(f"{RID}-c1", "floor-1", "misread"))
    assert step.ended == ("rejected",)
    d.ended(step.ended)
    d.ended(("voided", "voided"))
    assert sample(metrics, "progressive_claims_total", outcome="rejected") == 1
    assert sample(metrics, "progressive_claims_total", outcome="voided") == 2
    d.lights_off({5, 2})
    assert lights == [(2, False), (5, False)]

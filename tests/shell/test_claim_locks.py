"""The award locks (controller/app/claim_locks.py) at a real link authority over a real Mosquitto: a linked
meter's percentage award locked for a claim, the authority's answer fed to the claim machine, the lock as it was
sent read back for an approval to name, and the lock given back when the claim ends unpaid."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_claim_approval_path import bet_and_lock, linked_harness

from controller.app.claim_locks import AwardLocks
from controller.round import claim_machine as cm
from controller.round.claims import Claim, RoundClaims, verify_dealer

from rigtable import until

RID = "CS-07-r1"
ON_DEALER = "five-card-hand-bonus-dealer"
STRAIGHT_FLUSH = ["9D", "8D", "7D", "6D", "5D"]  # 10% of the meter, shared


def test_a_lock_is_answered_into_the_machine_read_back_as_sent_and_given_back(tmp_path: Path) -> None:
    with linked_harness(tmp_path) as (h, rig):
        d = h.daemon
        assert d is not None and d.meters is not None
        bet_and_lock(h, [(5, ON_DEALER), (2, ON_DEALER)])
        wcfg = d.cfg.wagers[d.rules.spots[ON_DEALER].wager]
        units, reset = d.meters.port("bonus").amounts("bonus")
        verified = verify_dealer(RoundClaims(RID), game=d.cfg.game, wager=wcfg.wager, paytable=wcfg.paytable,
                                 meter_units=units, reset_units=reset, spot=ON_DEALER, meter="bonus",
                                 wagers={5: 100, 2: 100}, cards=STRAIGHT_FLUSH)
        claim = replace(verified, id=f"{RID}-c9")  # beside the desk's own claims
        state = [cm.step(RoundClaims(RID), cm.NewClaim(claim, linked=True)).claims]
        assert state[0].get(claim.id).locks == (0,)
        fed: list[cm.Input] = []
        answered = asyncio.Event()

        async def feed(event: cm.Input) -> None:
            fed.append(event)
            state[0] = cm.step(state[0], event).claims
            answered.set()

        def now(cid: str) -> Claim | None:
            return next((c for c in state[0].claims if c.id == cid), None)

        locks = AwardLocks(d.meters, "CS-07", spawn=lambda coro, name: h.loop.create_task(coro, name=name),
                           claim_now=now, feed=feed)

        async def lock() -> None:
            await locks.send(claim.id, 0)
            await answered.wait()

        h.run(lock())
        taken = rig.meter().locked[f"{claim.id}:0"]
        assert fed == [cm.Locked(claim.id, 0, taken.amount_cents, fed[0].number, fed[0].nonce)]  # type: ignore[union-attr]
        assert fed[0].number > 0 and taken.shares == 2  # type: ignore[union-attr]
        assert state[0].get(claim.id).status == "pending"
        assert not locks.awaiting
        sent = h.run(locks.sent(claim.id, "bonus", (0,)))
        assert list(sent) == [0] and sent[0].claim == f"{claim.id}:0" and sent[0].shares == 2
        assert h.run(locks.sent(claim.id, "main", (0,))) == {}  # the table's own meter locks nothing

        out = cm.step(state[0], cm.Reject(claim.id, "floor-1", "misread"))
        state[0] = out.claims
        [release] = [e for e in out.effects if isinstance(e, cm.Release)]

        async def given_back() -> Any:
            await locks.release(release)
            await until(lambda: f"{claim.id}:0" not in rig.meter().locked, "the lock given back at the authority")

        h.run(given_back())

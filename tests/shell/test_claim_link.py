"""A claim's question to the link authority (controller/app/claim_link.py): asked again after each timeout, with
one warning, until it answers; not asked once the claim has moved on; a refusal is the caller's to answer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.app import claim_link
from controller.link.client import LinkRefused
from controller.round.claims import Claim
from controller.round.settlement import Payout

RID = "CS-07-r1"


def claim(status: str, **kw: tuple[int, ...]) -> Claim:
    p = Payout(0, 100, "paytable", "dealer", "straight-flush", (), "10% of meter", 10_000, "attendant", True,
               shared_by=2)
    return Claim(f"{RID}-c1", RID, 0, "five-card-hand-bonus-dealer", "bonus", 0, (), (p, p), status=status,  # type: ignore[arg-type]
                 locks=(0,), **kw)


async def test_the_answer_is_asked_again_after_each_timeout_until_it_comes(monkeypatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(claim_link.log, "warning", lambda what, **kw: warned.append(what))
    c = claim("locking")
    tries = []

    async def ask(got: Claim) -> str:
        tries.append(got)
        if len(tries) < 3:
            raise TimeoutError
        return "locked"

    assert await claim_link.ask_link(lambda cid: c, c.id, 0, "locking", "a lock", ask) == (c, "locked")
    assert len(tries) == 3 and warned == ["the link authority has not answered a lock yet: it waits in the outbox"]


async def test_nothing_is_asked_once_the_claim_moved_on() -> None:
    async def ask(got: Claim) -> str:
        raise AssertionError("asked")

    paying = claim("paying")
    for now in (None, claim("rejected"), claim("locking", locked=(0,)), replace(paying, paid=(1,))):
        status = "paying" if now is not None and now.status == "paying" else "locking"
        index = 1 if status == "paying" else 0
        assert await claim_link.ask_link(lambda cid, now=now: now, paying.id, index, status, "it", ask) is None


async def test_a_refusal_is_raised_to_the_caller() -> None:
    async def ask(got: Claim) -> str:
        raise LinkRefused("approval", "does not verify")

    c = claim("paying")
    with pytest.raises(LinkRefused, match="does not verify"):
        await claim_link.ask_link(lambda cid: c, c.id, 0, "paying", "a payment", ask)

"""A scripted dealer: plays rounds on the rig as a dealer and players would, so that the demo table lives.

Each round: the shuffler counts the deck, a few players place a chip on the progressive spot, the dealer
presses the lock-out, the shoe deals, and the dealer tells the controller the round is settled. Everything
goes through the simulated hardware; only "settled" goes through the controller's own control operation,
as `progressivectl settle-round` would. Randomness here is the demo's, not the game's: `random` is fine.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, Protocol

import structlog

log = structlog.get_logger("dealer")

STEP_TIMEOUT_S = 15.0


class Table(Protocol):
    state: Any

    async def call(self, op: str, args: dict[str, Any]) -> Any: ...


async def _settle(table: Table, rid: str, floorperson: tuple[str, str] | None, pause: float) -> None:
    """Settle the round; while a claim of it waits for a floorperson (a hit the shoe detected: the settle claims it
    first), the floorperson walks over and approves it, or the dealer waits for someone who does."""
    from controller.errors import InputError

    async with asyncio.timeout(STEP_TIMEOUT_S * 8):
        while True:
            try:
                await table.call("settle", {"round_id": rid})
                return
            except InputError as refused:  # a claim of the round waits, or the shoe's hits are claimed first
                log.info("the round is not settled yet", reason=str(refused))
                claims = (await table.call("round", {}))["claims"]
                for c in (c for c in claims if c["status"] == "pending"):
                    if floorperson is None:
                        log.info("waiting for a floorperson to approve", claim=c["claim_id"])
                        continue
                    await asyncio.sleep(pause)  # the floorperson walks over
                    name, secret = floorperson
                    try:
                        await table.call("approve", {"claim_id": c["claim_id"], "supervisor": name, "secret": secret})
                    except InputError as e:  # decided meanwhile: the settle says what holds the round next
                        log.info("the floorperson's approval refused", claim=c["claim_id"], reason=str(e))
                    else:
                        log.info("the floorperson approved", claim=c["claim_id"], supervisor=name)
                await asyncio.sleep(pause)


async def _until(predicate, what: str, timeout: float = STEP_TIMEOUT_S) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise RuntimeError(f"dealer: {what} did not happen within {timeout} s") from None


async def play(rig: Any, table: Table, *, rounds: int | None = None, seats: int = 7, spot: str = "progressive",
               wager_cents: int = 100, pause: float = 1.0, rng: random.Random | None = None,
               floorperson: tuple[str, str] | None = None, on_round: Callable[[str], None] | None = None) -> int:
    """Play `rounds` rounds (forever with None); returns how many were played, and tells `on_round` each round's id
    as it ends. A hit the shoe detected waits for a floorperson: `floorperson` (name, secret) approves it when the
    round is settled; without one, the dealer waits until someone does (`progressivectl approve`)."""
    rng = rng or random.Random()
    played = 0
    while rounds is None or played < rounds:
        await rig.shuffle(52)
        players = sorted(rng.sample(range(1, seats + 1), rng.randint(1, min(4, seats))))
        for seat in players:
            await rig.place_chip(seat, spot, wager_cents)
        want = len(players)
        await _until(lambda want=want: len(table.state.accepted) >= want, f"wagers at seats {players} acknowledged")
        await asyncio.sleep(pause)  # players look at their lights
        await rig.press_lockout()
        await _until(lambda: table.state.phase.value == "dealing", "the booking")
        for seat in players:  # the dealer collects the chips (§ 639a.8(b))
            await rig.remove_chip(seat, spot)
        await rig.deal(rng.sample(range(52), 5 * (len(players) + 1)))
        await asyncio.sleep(pause)
        # the chips collected before the settle, as a dealer does: while the cards are dealt the seats are read only
        # every few seconds (the bus's health_interval), and a chip still seen at the settle is left for the next
        # round ("chips left on their spots")
        await _until(lambda: not table.state.sensed, "chips collected")
        status = await table.call("status", {})
        rid = status["round"]["id"]
        await _settle(table, rid, floorperson, pause)
        log.info("round played", round=rid, players=players)
        played += 1
        if on_round is not None:
            on_round(rid)
    return played

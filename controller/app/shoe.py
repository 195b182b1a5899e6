"""The dealing shoe at a card table: a jam voids the round being dealt (§ 667a.13(e)). Where the cards come from a
card-reading shoe (`cards.source` "shoe"): the cards of the round's deal, and, once the deal is complete, each hand
a wager of the round pays, detected (controller/round/detect.py) and claimed through the claim desk as the dealer
would claim it, by "shoe" (docs/rounds.md). A settle claims the hits left at once; a restart reads a deal whose
hits were being claimed again from the journal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from controller.app.claim_desk import ClaimDesk
from controller.cards import card_str, cards_str, parse_cards
from controller.config.model import TableConfig
from controller.errors import InputError
from controller.ledger import Ledger
from controller.ledger.errors import KeyConflict
from controller.ledger.reader import Found, JournalReader
from controller.meter.journal import Meters as MeterStates
from controller.positions import position_name
from controller.round import detect
from controller.round import model as rm
from controller.round.journal import DEAL

log = structlog.get_logger("table")

DETECTED_CLAIM_S = 8.0  # how long a settle waits for the shoe's detected hits to be claimed (the CLI waits 10 s)
CLAIM_RECHECK_S = 0.25  # a detected hit waiting for another claim's verification looks again this often
FIRST_CARD = ":first"  # `{round}:deal:first`: a deal began (journaled at its first card)
DROPPED = ":dropped"  # `{round}:deal:dropped`: a card more came after the claims of its hits began
SHOE_JAM = "shoe jam (§ 667a.13(e))"


class Detected:
    """The hits the card-reading shoe detected in a complete deal of round `rid`, `dealt` cards long, and how far
    their claims have got: claimed in order, `next` the first not claimed yet; `now` claims them without waiting
    for the deal to settle (the dealer settles: the deal is over); `moved` is set at every step. `restored`: read
    again from the journal at a restart (its wait passed before the stop; hits the shoe claimed before are left)."""

    def __init__(self, rid: str, dealt: int, hits: tuple[detect.Hit, ...], *, restored: bool = False) -> None:
        self.rid, self.dealt, self.hits, self.restored = rid, dealt, hits, restored
        self.next = 0
        self.end = ""  # how the claiming ended: "claimed" (each hit), "dropped" (the deal or the round changed),
        # "failed" (an error: the hits left still hold the settle)
        self.blocked = False  # the next hit waits for a claim before it to be settled (one at a time)
        self.now = asyncio.Event()
        self.moved = asyncio.Event()

    @property
    def over(self) -> bool:
        return bool(self.end)

    @property
    def left(self) -> tuple[detect.Hit, ...]:
        """The hits not claimed yet that still hold the settle."""
        return self.hits[self.next:] if self.end in ("", "failed") else ()

    def step(self, *, to: int | None = None, end: str = "", blocked: bool = False) -> None:
        if to is not None:
            self.next = to
        self.end = self.end or end
        self.blocked = blocked
        self.moved.set()


class Shoe:
    """The shoe's cards of the round being dealt and the claims of their detected hits; its jams. `round_now` is
    the round machine's state (None while starting), `until` waits for a condition on the round or its claims,
    `settled_s` is how long a complete deal waits for a card more before its hits are claimed; `void` voids the
    round being dealt, unless `paid_refusal` says why it cannot be (an award of it was paid)."""

    def __init__(self, cfg: TableConfig, rules: rm.TableRules, ledger: Ledger[MeterStates], desk: ClaimDesk, *,
                 round_now: Callable[[], rm.TableState | None],
                 spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]],
                 until: Callable[[Callable[[], bool], float | None], Awaitable[None]], settled_s: float,
                 void: Callable[[str], None], paid_refusal: Callable[[], str | None]) -> None:
        self.cfg, self.rules, self.ledger, self.desk = cfg, rules, ledger, desk
        self._round_now, self._spawn, self._until, self._settled_s = round_now, spawn, until, settled_s
        self._void, self._paid_refusal = void, paid_refusal
        self.cards: list[int] = []
        self.detected: Detected | None = None  # the hits of the last complete deal, and their claims
        self.deal_unknown: str | None = None  # a round dealt across a restart before its deal was complete

    @property
    def reads_deal(self) -> bool:
        return self.cfg.cards is not None and self.cfg.cards.source == "shoe"

    def _round_id(self) -> str:
        state = self._round_now()
        assert state is not None
        return rm.round_id(self.cfg.table, state.round_no)

    def _dealing(self, rid: str | None = None) -> bool:
        """A round is being dealt (round `rid`, when given)."""
        state = self._round_now()
        return state is not None and state.phase is rm.Phase.DEALING and rid in (None, self._round_id())

    def jammed(self, device: str) -> None:
        """§ 667a.13(e): a jammed dealing shoe voids the round being dealt, unless an award of it was paid."""
        if not self._dealing():
            log.warning("shoe jam outside a round", device=device)
            return
        rid, why = self._round_id(), self._paid_refusal()
        if why is not None:
            log.error("shoe jam: the round is not voided", device=device, round=rid, reason=why)
        elif self.desk.busy:  # a claim in the middle of a step: the void comes right after it
            self._spawn(self._void_when_idle(device, rid), f"shoe-jam:{rid}")
        else:
            self._void(SHOE_JAM)

    async def _void_when_idle(self, device: str, rid: str) -> None:
        desk = self.desk
        await self._until(lambda: not self._dealing(rid) or not desk.busy, None)
        if not self._dealing(rid):
            log.warning("shoe jam: the round ended meanwhile", device=device, round=rid)
            return
        why = self._paid_refusal()
        if why is not None:
            log.error("shoe jam: the round is not voided", device=device, round=rid, reason=why)
            return
        self._void(SHOE_JAM)

    def opened(self) -> None:
        """Betting opened on a new round: no card of its deal yet."""
        self.cards.clear()

    def dealt(self, card: int) -> None:
        self.cards.append(card)
        self.read()

    def read(self, *, restored: bool = False) -> None:
        """The deal so far: once it is complete, its hits detected and claimed (in the background)."""
        state = self._round_now()
        if not self.reads_deal or state is None:
            return
        rid, n = self._round_id(), len(self.cards)
        if rid == self.deal_unknown:
            return
        if n == 1 and not restored:  # a deal begun: a restart before it is complete knows it lost cards
            self._spawn(self._journal_deal(rid, tuple(self.cards), FIRST_CARD), f"deal:{rid}")
        spots = [detect.SpotWager(s, self.cfg.wagers[r.wager].wager, self.cfg.wagers[r.wager].paytable, r.on_dealer)
                 for s, r in self.rules.spots.items()]
        try:
            found = detect.detect(self.cfg.game, spots, state.accepted, self.cards)
        except InputError as err:
            if n == 1 or err.field.startswith(f"cards[{n - 1}]"):  # once: at the card at fault (or the first card)
                log.error("shoe deal not read: the dealer claims its hits", round=rid, error=str(err))
            return
        if not found.deal.complete:
            return
        log.info("deal complete", round=rid, seats=list(found.deal.seats), cards=cards_str(self.cards),
                 hits=len(found.hits))
        for hit in found.hits:
            log.info("hit detected", round=rid, seat=position_name(hit.seat), spot=hit.spot, cards=cards_str(hit.cards),
                     hand=hit.hand, award=hit.award)
        if found.hits:
            det = self.detected = Detected(rid, n, found.hits, restored=restored)
            if restored:
                det.now.set()  # its wait for a card more passed before the stop
            self._spawn(self._claim_detected(det), f"detected:{rid}")

    async def _journal_deal(self, rid: str, cards: tuple[int, ...], what: str = "") -> None:
        """The deal's cards in the journal: `{rid}:deal` the deal whose hits are being claimed (a restart claims those
        left), FIRST_CARD that a deal began (a restart before the deal was complete knows it lost cards), DROPPED
        that a card more came after its claims began (a restart claims none)."""
        with contextlib.suppress(KeyConflict):  # journaled before the restart that read it again
            await self.ledger.submit_async(DEAL, {"round_id": rid, "cards": [card_str(c) for c in cards]},
                                           f"{rid}:deal{what}")

    async def restore(self, rid: str) -> None:
        """At a restart in a round being dealt: a deal the shoe read complete, whose hits were being claimed, is read
        again from the journal and its hits not claimed by the shoe before are claimed; a deal begun and not complete
        (or dropped) before the stop is not read at all: its cards before the stop are lost."""
        state = self._round_now()
        assert state is not None
        if not self.reads_deal or state.phase is not rm.Phase.DEALING:
            return

        def read() -> tuple[Found | None, bool]:
            with JournalReader(self.ledger.db_path) as r:  # the deal's three keys in one read
                got = dict(r.entries(f"{rid}:deal"))
            dropped = f"{rid}:deal{DROPPED}" in got
            begun = dropped or f"{rid}:deal{FIRST_CARD}" in got
            deal = got.get(f"{rid}:deal")
            return (deal if not dropped else None), begun

        deal, begun = await asyncio.to_thread(read)
        if deal is None:
            if begun:  # what the shoe reads now is not the deal from its start: hands detected could be others
                self.deal_unknown = rid
                log.warning("the shoe's cards of the round before the restart are not known: the dealer claims its "
                            "hits", round=rid)
            return
        self.cards = list(parse_cards(deal.body["cards"], "cards"))
        log.info("deal read again from the journal: its hits are claimed", round=rid, cards=cards_str(self.cards))
        self.read(restored=True)

    async def _claim_detected(self, det: Detected) -> None:
        """Claim the hits of a complete deal through the dealer's claim path, one at a time in settlement order,
        once no card more came for `settled_s` (a card more means a seat the controller does not see was dealt),
        or at once when the dealer settles the round (`det.now`: the deal is over)."""
        desk, rid = self.desk, det.rid
        end = "failed"  # unless it ends as it should
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._settled_s):
                await det.now.wait()

        def dropped(i: int) -> bool:
            if self._dealing(rid) and len(self.cards) == det.dealt:
                return False
            log.warning("detected hits not claimed", round=rid, left=[h.describe() for h in det.hits[i:]],
                        reason="the shoe read a card more" if self._dealing(rid) else "the round is no longer dealt")
            return True

        def claimable() -> bool:  # the booking on disk; no claim left unsettled (one at a time), none being verified
            state = self._round_now()
            return state is None or self._round_id() != rid or (
                state.phase is not rm.Phase.LOCKING and desk.state.open is None and desk.busy is None)

        try:
            if dropped(0):
                end = "dropped"
                return
            if not det.restored:  # the deal whose hits are claimed: a restart claims those left
                await self._journal_deal(rid, tuple(self.cards[:det.dealt]))
            for i, hit in enumerate(det.hits):
                while True:
                    det.step(blocked=desk.state.open is not None)
                    await self._until(claimable, CLAIM_RECHECK_S)
                    det.step()
                    if dropped(i):
                        if self._dealing(rid):  # a card more: a restart claims none of them
                            await self._journal_deal(rid, tuple(self.cards), DROPPED)
                        end = "dropped"
                        return
                    if det.restored and any(c.claimed_by == "shoe" and (c.seat, c.spot) == (hit.seat, hit.spot)
                                            for c in desk.state.claims):
                        break  # claimed by the shoe before the restart (approved, rejected, ...): left as it is
                    try:
                        got = await desk.claim(hit.claim(), by="shoe")
                    except InputError as err:  # a RulesError too: claimed by the dealer already, settled before, ...
                        if desk.busy is not None:
                            continue  # another claim was being verified: this one after it
                        log.warning("detected hit not claimed", round=rid, hit=hit.describe(), error=str(err))
                    else:
                        log.info("detected hit claimed", round=rid, claim=got["claim_id"], status=got["status"],
                                 by="shoe")
                    break
                det.step(to=i + 1)
            end = "claimed"
        finally:
            det.step(end=end)

    async def unclaimed(self, rid: str) -> tuple[detect.Hit, ...]:
        """Before round `rid` is settled: the hits the shoe detected in its deal are claimed now (the dealer's settle
        says the deal is over), as far as they can be (one claim at a time, each after the one before is settled);
        the hits not claimed yet (by the shoe or the dealer). A settle never ends a round with one of them."""
        det = self.detected
        if det is None or det.rid != rid:
            return ()
        det.now.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DETECTED_CLAIM_S):
                # blocked: the next hit waits for a claim that waits for a supervisor (not one that just ended)
                while not (det.over or (det.blocked and self.desk.state.open is not None)):
                    det.moved.clear()
                    await det.moved.wait()
        claimed = {(c.seat, c.spot) for c in self.desk.state.claims} if self.desk.state.round_id == rid else set()
        return tuple(h for h in det.left if (h.seat, h.spot) not in claimed)


__all__ = ["CLAIM_RECHECK_S", "DETECTED_CLAIM_S", "SHOE_JAM", "Detected", "Shoe"]

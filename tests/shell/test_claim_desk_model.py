"""The claim desk against a small model: a stateful property test (hypothesis RuleBasedStateMachine).

The real table daemon (controller.app.table, with its claim desk, round machine, ledger and, for the linked
variant, its link to a real Mosquitto and a real link authority) runs in the test's event loop with no devices:
the test feeds it what devices would report (chips, the lock-out press, a shoe jam) and asks it what a dealer
and a floorperson would (claim, approve, reject, void, settle, stub count), in random interleavings, with
restarts at any step: between two steps, and in the middle of an approval, between two of its payouts (the
journal stops answering there, as it would for a process that died). Wagers are on the player's own hand and on
the dealer's hand, so that awards are shared by 2 to 7 players.

What must hold after every step:
- every request is answered: a result, or a refusal (InputError, RulesError, PermissionError), never another
  exception and never a hang; the daemon never stops on a refusal;
- the model's claims and the desk's agree: an approval of a pending claim pays it, of anything else is refused;
  a rejection likewise; a void is refused once anything of the round was paid, and ends its pending claims;
- money: the payouts in the meters' histories are exactly the payouts of the claims the desk says are paid, each
  once (each hand paid at most once; a shared award paid to every sharer, never to some), and the ledger's
  invariant holds after every entry (it checks it; a violation would stop the daemon);
- the sign: PENDING (with the claim's seat and amount) while a claim awaits a supervisor and no newer WIN is in
  force; never PENDING when none waits.

Longer: PROGRESSIVE_MODEL_EXAMPLES=N (default 12 local, 4 linked); PROGRESSIVE_MODEL_SHRINK=1 shrinks a failure
(minutes: every example starts daemons).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.app import meter_port
from controller.app.table import TableDaemon
from controller.config import load_config
from controller.config.model import LinkedMeter, MqttConfig
from controller.errors import InputError
from controller.round import model as rm
from drivers import events as ev

import soak
from rigtable import drawing, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
FLOOR = {"supervisor": SUPERVISOR, "secret": SECRET}
PROG, BONUS, ON_DEALER = "progressive", "five-card-hand-bonus", "five-card-hand-bonus-dealer"
EXAMPLES = soak.cycles("PROGRESSIVE_MODEL_EXAMPLES", default=5, soak=200)
pytestmark = soak.mark
# Each example starts a daemon (and restarts it): shrinking a failure takes minutes, so only when asked for.
PHASES = tuple(Phase) if os.environ.get("PROGRESSIVE_MODEL_SHRINK") else (Phase.explicit, Phase.reuse, Phase.generate)
STEP_S = 20.0  # the longest any one step may take (a claim on a linked meter waits for the authority)

# Hands a dealer may claim, each with distinct cards across a seat's own hand and the dealer's (one deck).
SEAT_HANDS = {
    "royal": ["AS", "KS", "QS", "JS", "TS"], "straight-flush": ["9C", "8C", "7C", "6C", "5C"],
    "four": ["4S", "4H", "4D", "4C", "2D"], "flush": ["2H", "5H", "9H", "JH", "KH"],
    "trips": ["3S", "3H", "3D", "8D", "QC"], "nothing": ["2S", "7H", "9D", "JC", "KD"],
}
DEALER_HANDS = {"royal": ["AD", "KD", "QD", "JD", "TD"], "straight-flush": ["9D", "8D", "7D", "6D", "5D"],
                "flush": ["3C", "4C", "6C", "8C", "TC"], "nothing": ["2C", "7D", "9S", "JH", "KC"]}


class Stop(Exception):
    """Where the journal stops answering: the process died there."""


class Harness:
    """The daemon in an event loop of the test's own, and its restarts."""

    def __init__(self, state_dir: Path, adjust=lambda cfg: cfg) -> None:
        self.state_dir = state_dir
        self.adjust = adjust
        self.loop = asyncio.new_event_loop()
        self.daemon: TableDaemon | None = None
        self.task: asyncio.Task | None = None
        self.cut_after: int | None = None  # payouts journaled before the journal stops answering
        self.cut = asyncio.Event()
        self.requests: list[asyncio.Task] = []  # requests in flight when the daemon stops

    def run(self, coro, timeout: float = STEP_S) -> Any:
        async def bounded():
            async with asyncio.timeout(timeout):
                return await coro
        return self.loop.run_until_complete(bounded())

    def start(self) -> None:
        cfg = self.adjust(replace(load_config(TABLE), state_dir=self.state_dir))
        self.daemon = TableDaemon(cfg, {}, draw=drawing("2C", 7))
        self.task = self.loop.create_task(self.daemon.run())

        async def ready():
            while not self.daemon.ready.is_set():
                assert not self.task.done(), self.task.exception() if not self.task.cancelled() else "cancelled"
                await asyncio.sleep(0.005)
            if self.daemon.link is not None:
                while not (self.daemon.link.alive and self.daemon.link.values):
                    await asyncio.sleep(0.01)
        self.run(ready())

    def stop(self) -> None:
        """Stop the daemon (and a request it was answering), as the end of its process would."""
        if self.task is None:
            return
        self._cancel([t for t in (self.task, *self.requests) if not t.done()])
        self.task, self.requests = None, []

    def _cancel(self, tasks: list[asyncio.Task]) -> None:
        async def cancelled():
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.run(cancelled())

    def restart(self) -> None:
        self.stop()
        self.cut_after, self.cut = None, asyncio.Event()
        self.start()

    def close(self) -> None:
        self.stop()
        self._cancel([t for t in asyncio.all_tasks(self.loop) if not t.done()])
        self.loop.close()

    def alive(self) -> bool:
        return self.task is not None and not self.task.done()

    async def settled(self) -> None:
        """Until nothing moves: the round machine's writes, the desk's effects, the link's outbox."""
        d = self.daemon
        for _ in range(2000):
            await asyncio.sleep(0)
            busy = d.state.phase in (rm.Phase.LOCKING, rm.Phase.VOID) or d.desk._running or d.desk.waiting_on_link or d.journal.writes and any(
                not t.done() for t in d.journal.writes.values())
            if d.link is not None and d.link.outbox.pending:
                busy = True
            det = d.shoe.detected  # the shoe's hits, claimed at the settle: the next one is claimable now
            if det is not None and det.now.is_set() and not det.over and d.desk.state.open is None:
                busy = True
            if not busy:
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the daemon did not settle")


class ClaimDeskModel(RuleBasedStateMachine):
    """Subclasses say which meter the bonus wagers feed (local, or linked)."""

    linked = False

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="desk-model-"))
        self.h = Harness(self.tmp / "state", self.adjust)
        self.h.start()
        self.round = 1
        self.dealing = False
        self.dealt = False  # the shoe read this round's deal
        self.claims: dict[str, dict[str, Any]] = {}  # claim id -> {"status": ..., "round": ...}
        self.paid_in_round = False
        self.void_requested = False

    # -- plumbing --

    def adjust(self, cfg):
        return with_supervisor(cfg, SUPERVISOR, SECRET)

    @property
    def d(self) -> TableDaemon:
        assert self.h.daemon is not None
        return self.h.daemon

    def rid(self) -> str:
        return f"CS-07-r{self.round}"

    def call(self, op: str, **args: Any) -> Any:
        """A request as the control socket hands it over: its answer, or the refusal (as an exception)."""
        try:
            result = self.h.run(self.d.call(op, args))
        except (InputError, PermissionError) as refusal:
            result = refusal
        except TimeoutError:
            raise AssertionError(f"{op} {args} was not answered within {STEP_S} s") from None
        self.h.run(self.h.settled())
        assert self.h.alive(), f"the daemon stopped after {op} {args}"
        self._shoe_claims()
        return result

    def _shoe_claims(self) -> None:
        """The claims the card-reading shoe made (each detected hit, once the one before it was settled)."""
        if self.d.desk.state.round_id != self.rid():
            return
        for c in self.d.desk.state.claims:
            if c.claimed_by == "shoe" and c.id not in self.claims:
                self.claims[c.id] = {"status": c.status, "round": self.rid()}
                event(f"shoe claim {c.status}")
                if c.status == "paid":
                    self.paid_in_round = True

    def history(self) -> list[tuple]:
        meters = dict(self.d.ledger.state)
        out = []
        for m, s in meters.items():
            out += [(m, h.round_id, h.seat, h.hand, h.award, h.amount_cents) for h in s.history]
        return out

    def linked_history(self) -> list[tuple]:
        return []

    # -- rules --

    @precondition(lambda self: not self.dealing)
    @rule(own=st.lists(st.tuples(st.integers(1, 7), st.sampled_from((PROG, BONUS))), max_size=8, unique=True),
          on_dealer=st.sets(st.integers(1, 7), max_size=7))
    def bet_and_lock(self, own, on_dealer):
        """Wagers on the players' own hands, and on the dealer's hand by 0 to 7 of them (an award shared by all)."""
        chips = [*own, *((seat, ON_DEALER) for seat in sorted(on_dealer))] or [(1, PROG)]
        if self.d.state.blocks.get(rm.Block.DECK):  # a wrong count took the deck away: a new one first
            assert not isinstance(self.call("deck_replaced", **FLOOR), Exception)
        for seat, spot in chips:
            self.d.apply(rm.ChipSensed(seat, spot, 100))
        self.d.on_device_event(ev.LockoutPressed("lockout"))
        self.h.run(self.h.settled())
        assert self.d.state.phase is rm.Phase.DEALING, self.d.state
        assert dict(self.d.state.accepted) == {(s, p): 100 for s, p in chips}
        for seat, spot in chips:  # the dealer collects the chips (§ 639a.8(b))
            self.d.apply(rm.ChipRemoved(seat, spot))
        self.dealing = True

    @precondition(lambda self: self.dealing)
    @rule(data=st.data(), hand=st.sampled_from(sorted(SEAT_HANDS)))
    def claim_seat(self, data, hand):
        """A seat's own hand: mostly one with a wager there (the others are refused, and are tried too)."""
        own = sorted((seat, spot) for seat, spot in self.d.state.accepted if spot != ON_DEALER)
        seat, spot = data.draw(st.sampled_from(own) if own and data.draw(st.integers(0, 4)) else
                               st.tuples(st.integers(1, 7), st.sampled_from((PROG, BONUS))))
        self._claim({"seat": seat, "spot": spot, "cards": SEAT_HANDS[hand]})

    @precondition(lambda self: self.dealing and not self.dealt and not self._round_claims() and not self.void_requested
                  and len({seat for seat, _ in self.d.state.accepted}) <= len(SEAT_HANDS))
    @rule(data=st.data())
    def deal_by_shoe_and_settle_at_once(self, data):
        """The card-reading shoe reads the whole deal (a hand drawn for each seat dealt, the dealer's from the rest
        of the deck), and the dealer settles at once, before the shoe's hits would be claimed by themselves: the
        settle claims them first and is refused while one waits for a supervisor; no detected hit is ever left
        unclaimed by a settle that goes through."""
        from controller.cards import parse_card
        from controller.positions import DEALER_POSITION

        seats = sorted({seat for seat, _ in self.d.state.accepted})
        names = data.draw(st.lists(st.sampled_from(sorted(SEAT_HANDS)), min_size=len(seats), max_size=len(seats),
                                   unique=True))
        hands = [[parse_card(c) for c in SEAT_HANDS[n]] for n in names]
        used = {c for h in hands for c in h}
        rest = [c for c in range(52) if c not in used]
        dealer = rest[data.draw(st.integers(0, len(rest) - 5)):][:5]
        for i in range(5):  # one card at a time, seat 1 first, the dealer last (docs/rounds.md)
            for card in [h[i] for h in hands] + [dealer[i]]:
                self.d.on_device_event(ev.CardDealt("shoe", card))
        self.dealt = True
        det = self.d.shoe.detected
        hits = () if det is None or det.rid != self.rid() else det.hits
        self._settle(False)
        if self.dealing:  # refused: a claim of the deal waits, and the hits after it are named
            assert hits and self._round_claims("pending", "locking"), (hits, self.claims)
        else:  # settled: every hit of the deal was claimed (and paid: none needed a supervisor)
            claimed = {(c.seat, c.spot) for c in self._all_claims() if c.round_id == f"CS-07-r{self.round - 1}"}
            assert {(DEALER_POSITION if h.seat == 0 else h.seat, h.spot) for h in hits} <= claimed or not hits, (
                hits, claimed)
        event(f"shoe deal with {len(hits)} hits")

    @precondition(lambda self: self.dealing)
    @rule(hand=st.sampled_from(sorted(DEALER_HANDS)))
    def claim_dealer(self, hand):
        self._claim({"seat": "dealer", "cards": DEALER_HANDS[hand]})

    def _claim(self, args: dict[str, Any]) -> None:
        open_ = [c for c, m in self.claims.items() if m["status"] in ("pending", "locking", "paying")]
        got = self.call("claim", **args)
        if self.void_requested:  # § 667a.8(h): the hands are void
            assert isinstance(got, InputError) and "to be voided" in str(got), got
            return
        if isinstance(got, Exception):
            if open_:
                assert "one at a time" in str(got) or "awaits" in str(got) or "being" in str(got), got
            return
        assert not open_, f"a claim made while {open_} was not settled"
        assert got["status"] in ("pending", "paid", "locking"), got
        c = self.d.desk.state.get(got["claim_id"])
        event(f"claim {got['status']}" + (" (shared)" if any(p.shared_by > 1 for p in c.payouts) else ""))
        self.claims[got["claim_id"]] = {"status": got["status"], "round": self.rid()}
        if got["status"] == "paid":
            self.paid_in_round = True

    def _pick(self, data, wanted: tuple[str, ...] | None = None) -> str | None:
        """A claim of the round (mostly a pending one: the others are refused, and are tried too)."""
        ids = [c for c, m in self.claims.items() if m["round"] == self.rid()
               and (wanted is None or m["status"] in wanted)]
        pending = [c for c in ids if self.claims[c]["status"] == "pending"]
        if pending and data.draw(st.integers(0, 4)):
            ids = pending
        return data.draw(st.sampled_from(ids)) if ids else None

    def _round_claims(self, *statuses: str) -> bool:
        return any(m["round"] == self.rid() and (not statuses or m["status"] in statuses)
                   for m in self.claims.values())

    @precondition(lambda self: self.dealing and self._round_claims())
    @rule(data=st.data())
    def approve(self, data):
        cid = self._pick(data)
        if cid is None:
            return
        was = self.claims[cid]["status"]
        got = self.call("approve", claim_id=cid, **FLOOR)
        if was == "pending" and self.void_requested:
            assert isinstance(got, InputError) and "to be voided" in str(got), got
        elif was == "pending":
            assert not isinstance(got, Exception), got
            self.claims[cid]["status"] = "paid"
            self.paid_in_round = True
            event("approved")
        else:
            assert isinstance(got, InputError), (cid, was, got)

    @precondition(lambda self: self.dealing and self._round_claims("pending") and not self.void_requested)
    @rule(data=st.data(), after=st.integers(0, 6))
    def approve_and_stop_midway(self, data, after):
        """The approval is journaled, `after` payouts are, then the process stops; the restart finishes it."""
        cid = self._pick(data, ("pending",))
        if cid is None:
            return
        h = self.h
        h.cut_after = after
        real_local, real_linked = meter_port.LocalMeters.submit, meter_port.LinkedMeters.submit
        count = {"n": 0}

        async def cutting(real, port, op, meter, key, *rest):
            if ":pay:" in key:
                if count["n"] >= after:
                    h.cut.set()
                    await asyncio.Event().wait()  # the process died here
                count["n"] += 1
            return await real(port, op, meter, key, *rest)

        meter_port.LocalMeters.submit = lambda port, op, meter, key, *rest: cutting(real_local, port, op, meter, key,
                                                                                    *rest)
        meter_port.LinkedMeters.submit = lambda port, op, meter, key, *rest: cutting(real_linked, port, op, meter,
                                                                                     key, *rest)
        try:
            approval = h.loop.create_task(self.d.call("approve", {"claim_id": cid, **FLOOR}))
            h.requests.append(approval)

            async def until_cut_or_done():
                while not (h.cut.is_set() or approval.done()):
                    await asyncio.sleep(0.002)
            h.run(until_cut_or_done())
            if approval.done():  # fewer payouts than `after`: paid in full before the stop
                approval.result()
                event("approval stopped: after all its payouts")
            else:
                event("approval stopped: between two payouts" if after else "approval stopped: before any payout")
        finally:
            meter_port.LocalMeters.submit, meter_port.LinkedMeters.submit = real_local, real_linked
        self.claims[cid]["status"] = "paid"  # approved before the stop: paid to the end after it
        self.paid_in_round = True
        self._restart()

    @precondition(lambda self: self.dealing and self._round_claims())
    @rule(data=st.data())
    def reject(self, data):
        cid = self._pick(data)
        if cid is None:
            return
        was = self.claims[cid]["status"]
        got = self.call("reject", claim_id=cid, reason="not the cards", **FLOOR)
        if was in ("pending", "locking"):
            assert not isinstance(got, Exception), got
            self.claims[cid]["status"] = "rejected"
        else:
            assert isinstance(got, InputError), (cid, was, got)

    @precondition(lambda self: self.dealing)
    @rule(how=st.sampled_from(("void", "settle", "settle by a supervisor", "shoe jam")))
    def end_round(self, how):
        if how == "void":
            self._void()
        elif how == "shoe jam":
            self._shoe_jam()
        else:
            self._settle(how == "settle by a supervisor")

    def _void(self) -> None:
        got = self.call("void", reason="misdeal", **FLOOR)
        if self.paid_in_round:
            assert isinstance(got, InputError) and "can no longer be voided" in str(got), got
            assert self.d.state.phase is rm.Phase.DEALING
            event("void refused: paid")
            return
        assert not isinstance(got, Exception), got
        event("void with a pending claim" if got["claims_voided"] else "void")
        for cid, m in self.claims.items():
            if m["round"] == self.rid() and m["status"] in ("pending", "locking"):
                assert cid in got["claims_voided"]
                m["status"] = "voided"
        self._next_round()

    def _settle(self, supervised: bool) -> None:
        got = self.call("settle", round_id=self.rid(), **(FLOOR if supervised else {}))
        # pending before, or claimed by the shoe at this settle (its detected hits are claimed first)
        pending = [c for c, m in self.claims.items() if m["round"] == self.rid() and m["status"] == "pending"]
        if pending or (self.void_requested and not (supervised and self.paid_in_round)):
            assert isinstance(got, InputError), got
            return
        assert not isinstance(got, Exception), got
        self._next_round()

    @rule(how=st.sampled_from(("restart", "stub count wrong", "stub count right", "stub recount by a supervisor")))
    def interrupt(self, how):
        """What comes between a dealer's and a floorperson's requests: a restart, a stub count (any time)."""
        if how == "restart":
            self._restart()
            return
        wrong = how == "stub count wrong"
        got = self.call("stub_count", stub=30 if wrong else 35, dealt=17,
                        **(FLOOR if how == "stub recount by a supervisor" else {}))
        assert not isinstance(got, Exception), got
        if self.dealing and wrong:
            self.void_requested = True
        elif how == "stub recount by a supervisor":
            self.void_requested = False

    def _shoe_jam(self) -> None:
        self.d.on_device_event(ev.ShoeJam("shoe"))
        self.h.run(self.h.settled())
        assert self.h.alive()
        if self.paid_in_round:
            assert self.d.state.phase is rm.Phase.DEALING
        else:
            for m in self.claims.values():
                if m["round"] == self.rid() and m["status"] in ("pending", "locking"):
                    m["status"] = "voided"
            self._next_round()

    def _restart(self) -> None:
        self.h.restart()
        self.h.run(self.h.settled())
        if self.dealing:
            assert self.d.state.phase is rm.Phase.DEALING and self.d.round_info()["id"] == self.rid()
            desk = {c["claim_id"]: c["status"] for c in self.d.round_info()["claims"]}
            for cid, m in self.claims.items():
                if m["round"] == self.rid():
                    assert desk.get(cid) == m["status"], (cid, m, desk)

    def _next_round(self) -> None:
        self.round += 1
        self.dealing = False
        self.dealt = False
        self.paid_in_round = False
        self.void_requested = False
        if self.d.state.blocks.get(rm.Block.DECK):  # a wrong count took the deck away: a new one
            self.call("deck_replaced", **FLOOR)
        assert self.d.round_info()["id"] == self.rid() and self.d.state.phase is rm.Phase.BETTING

    # -- invariants --

    @invariant()
    def desk_agrees_with_the_model(self):
        if self.d.desk.state.round_id != self.rid():
            return
        desk = {c.id: c.status for c in self.d.desk.state.claims}
        for cid, m in self.claims.items():
            if m["round"] == self.rid():
                assert desk.get(cid) == m["status"], (cid, m["status"], desk)

    @invariant()
    def every_paid_payout_once_and_nothing_else(self):
        """The meters' histories hold exactly the payouts of the paid claims: all of a claim's, once."""
        wanted: Counter = Counter()
        for c in self._all_claims():
            if c.status == "paid":
                for p in c.payouts:
                    wanted[(c.round_id, p.seat, p.amount)] += 1
            else:
                assert not c.paid, f"{c.id} is {c.status} with payouts {c.paid} journaled"
        have = Counter((r, seat, cents) for _m, r, seat, _hand, _award, cents in self.history() + self.linked_history())
        assert have == wanted, f"history {sorted(have.items())} != paid claims {sorted(wanted.items())}"

    def _all_claims(self):
        """Every claim of every round, as the journal's last record of each left it."""
        from controller.ledger.reader import JournalReader
        from controller.round.claims import claim_from_json
        from controller.round.journal import CLAIM

        last = {}
        with JournalReader(self.d.ledger.db_path) as r:
            for _key, found in r.entries("CS-07-r"):
                if found.kind == CLAIM:
                    c = claim_from_json(found.body["claim"])
                    last[c.id] = c
        return list(last.values())

    @invariant()
    def the_sign_shows_the_desk(self):
        face = self.d.sign.face()
        pending = self.d.desk.state.pending if self.d.desk.state.round_id == self.rid() else None
        if pending is not None:  # the claim that waits, whatever win of this table came before or after it
            assert isinstance(face, ev.ShowMessage) and face.message is ev.SignMessage.PENDING, face
            assert (face.seat, face.amount_cents) == (pending.seat, pending.amount_cents)
        else:
            assert not (isinstance(face, ev.ShowMessage) and face.message is ev.SignMessage.PENDING), face

    def teardown(self) -> None:
        self.h.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


TestClaimDeskLocal = ClaimDeskModel.TestCase
TestClaimDeskLocal.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None,
                                       suppress_health_check=list(HealthCheck), phases=PHASES)


# --- the same on a linked meter: a real broker and link authority -------------------------------------------


class LinkedClaimDeskModel(ClaimDeskModel):
    """The Five Card Hand Bonus meter linked; one broker for the whole run, an authority afresh per example."""

    linked = True
    broker: Any = None

    def __init__(self) -> None:
        from linkrig import LinkRig

        self.tmp_link = Path(tempfile.mkdtemp(prefix="desk-link-"))
        self.link_rig = LinkRig(self.tmp_link, self.broker, ("CS-07",))
        self._auth_loop_started = False
        super().__init__()

    def adjust(self, cfg):
        from linkrig import AUTHORITY_KEY, METER, PREFIX

        if not self._auth_loop_started:  # the authority runs in the daemon's event loop
            self._auth_loop_started = True
            self.h.run(self.link_rig.start_authority())
        password = self.tmp_link / "table.password"
        password.write_text(self.broker.passwords["CS-07"] + "\n", encoding="utf-8")
        password.chmod(0o600)
        mqtt = MqttConfig(host=self.broker.host, port=self.broker.port, tls=True, client_id="CS-07",
                          topic_prefix=PREFIX, link_timeout=5.0, ca_file=self.broker.ca_file, username="CS-07",
                          password_file=password, authority_keys=(AUTHORITY_KEY,))
        cfg = replace(cfg, meters={**cfg.meters, "bonus": LinkedMeter("bonus", METER, (100,))}, mqtt=mqtt)
        return with_supervisor(cfg, SUPERVISOR, SECRET)

    def history(self) -> list[tuple]:
        return [h for h in super().history() if h[0] != "bonus"]

    @precondition(lambda self: self.dealing and self._round_claims())
    @rule(data=st.data())
    def approve(self, data):
        """As on a table's own meter; on the linked one, every other approval of a pending claim is made while the
        broker forges answers (below): pending claims are few, and each is worth the attack."""
        pending = [c for c, m in self.claims.items() if m["round"] == self.rid() and m["status"] == "pending"]
        if pending and not self.void_requested and data.draw(st.booleans()):
            self.approve_through_forged_and_lost_answers(data, data.draw(st.booleans()))
        else:
            super().approve(data)

    def approve_through_forged_and_lost_answers(self, data, lose):
        """An approval while the broker forges the authority's answers to the table's payments (a refusal and an
        acknowledgement naming each payment exactly, and a meter value of $10.00, none signed), and, with `lose`,
        the authority's first answer to a payment lost on the way (the table sends it again and the authority
        answers from its journal). Paid once, on the true answers only (docs/security.md)."""
        import json

        from controller.app import claim_link
        from controller.linkproto import schema

        cid = self._pick(data, ("pending",))
        if cid is None:
            return
        link, authority, h = self.d.link, self.link_rig.authority, self.h
        assert authority is not None
        real_reply, lost = authority._reply, []

        async def lossy(table, msg):
            if isinstance(msg, schema.Ack) and not lost:
                lost.append(msg.seq)
                return
            await real_reply(table, msg)

        def forge() -> None:
            down, meter = link.topics.down("CS-07"), link.topics.meter(next(iter(link.values)))
            for sent in list(link.outbox.pending.values()):
                digest = schema.op_digest(schema.Op("CS-07", sent.seq, sent.kind, sent.linked, dict(sent.body),
                                                    None if sent.approval is None else dict(sent.approval)))
                for forged in ({"type": "refused", "field": "approval", "message": "does not verify"},
                               {"type": "ack", "entry": 1, "result": {"paid": "0.01"}}):
                    link._on_message(down, json.dumps({"v": schema.VERSION, "seq": sent.seq, "op": digest,
                                                       **forged}).encode())
            link._on_message(meter, json.dumps({"v": schema.VERSION, "type": "meter", "meter": meter.split("/")[-1],
                                                "amount": "10.00", "reset": "10.00", "entry": 10**9, "at": "2099",
                                                "locked": []}).encode())

        if lose:
            authority._reply = lossy
        waited, claim_link.LINK_ANSWER_S = claim_link.LINK_ANSWER_S, 10.0  # through a resend (2 s)
        try:
            approval = h.loop.create_task(self.d.call("approve", {"claim_id": cid, **FLOOR}))
            h.requests.append(approval)

            async def forging():
                while not approval.done():
                    forge()
                    await asyncio.sleep(0.005)
            h.run(forging())
            got = approval.result()
        finally:
            authority._reply, claim_link.LINK_ANSWER_S = real_reply, waited
        h.run(h.settled())
        assert "approved by" in got["message"] and "paid" in got["message"], got
        assert link.rejected.get("not_signed", 0) > 0
        assert all(v.entry < 10**9 and v.cents >= 1_000_000 for v in link.values.values()), link.values
        event("approved through forged answers" + (", one answer lost" if lost else ""))
        self.claims[cid]["status"] = "paid"
        self.paid_in_round = True

    def linked_history(self) -> list[tuple]:
        a = self.link_rig.authority
        if a is None or a.ledger is None:
            return []
        return [("bonus", h.round_id, h.seat, h.hand, h.award, h.amount_cents)
                for s in a.ledger.state.values() for h in s.history]

    def teardown(self) -> None:
        self.h.stop()
        with contextlib.suppress(Exception):
            self.h.run(self.link_rig.close())
        super().teardown()
        shutil.rmtree(self.tmp_link, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    from broker import require_mosquitto, start_broker

    require_mosquitto()
    b = start_broker(tmp_path_factory.mktemp("mosquitto"), ("CS-07", "authority"))
    try:
        yield b
    finally:
        b.stop()


def test_claim_desk_on_a_linked_meter(shared_broker):
    LinkedClaimDeskModel.broker = shared_broker
    run = LinkedClaimDeskModel.TestCase
    run.settings = settings(max_examples=max(2, EXAMPLES // 3), stateful_step_count=20, deadline=None,
                            suppress_health_check=list(HealthCheck), phases=PHASES)
    run("runTest").runTest()

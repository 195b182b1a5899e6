"""The claim → approve → pay → sign → settle/void path of the table daemon on the rig, one test for each way it
used to fail (each failed on the daemon before the claim desk): a refused request is an answer and the table
plays on; a payment cut short is finished after a restart; concurrent decisions on one claim; the sign's
messages keep their time; a wrong stub count asks a supervisor to void; pending claims outlive a restart and a
void ends them in the journal. The linked meter's cases, with a real broker and authority, are in
tests/shell/test_claim_desk_linked.py."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from controller.app.table import TableDaemon
from controller.errors import RulesError
from controller.round.model import Block
from controller.service.control import ControlClient, ControlError, ControlServer

from rigtable import daemon_on_rig, drawing, lit, lock_round, message, until, win, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
FLOOR = {"supervisor": SUPERVISOR, "secret": SECRET}
BONUS, ON_DEALER = "five-card-hand-bonus", "five-card-hand-bonus-dealer"
FOUR_ACES = ["AS", "AD", "AC", "AH", "2D"]  # Progressive Payout Wager: four of a kind, validated by a floorperson
STRAIGHT_FLUSH = ["9D", "8D", "7D", "6D", "5D"]  # Five Card Hand Bonus: 10% of the meter
FLUSH = ["3H", "4H", "6H", "8H", "TH"]  # Five Card Hand Bonus: 50 for 1, paid by the table


@contextlib.asynccontextmanager
async def table(tmp_path, *, magic: str = "2C", lucky: int | str = 7, state: str = "state"):
    daemon_class = functools.partial(TableDaemon, draw=drawing(magic, lucky))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / state,
                             lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET)) as (daemon, rig):
        yield daemon, rig


def events(logs, name: str) -> list[dict]:
    return [e for e in logs if e.get("event") == name]


# --- 1. a refused request is an answer: the daemon lives, the round is where it was ---------------------------


async def test_a_void_refused_after_a_payout_is_an_answer_and_the_round_is_dealt_on(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(4, "progressive"), (6, "progressive")])
        got = await daemon.call("claim", {"seat": 4, "cards": FOUR_ACES})
        await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        with capture_logs() as logs:
            with pytest.raises(RulesError, match=r"CS-07-r1-c1 was paid .*can no longer be voided"):
                await daemon.call("void", {"reason": "test", **FLOOR})
            # a device's shoe jam and a dealer's wrong stub count meet the same refusal, as answers and logs
            await rig.jam_shoe()
            await until(lambda: events(logs, "shoe jam: the round is not voided"), "the jam refused in the log")
            asked = await daemon.call("stub_count", {"stub": 30, "dealt": 17})
            assert asked["void_requested"] is True
            with pytest.raises(RulesError, match="can no longer be voided"):
                await daemon.call("void", {"reason": "stub count", **FLOOR})
        assert not events(logs, "round voided") and not events(logs, "task failed")
        assert daemon.state.phase.value == "dealing" and daemon.round_info()["id"] == "CS-07-r1"
        status = await daemon.call("status", {})  # alive and answering
        assert status["round"] == {"id": "CS-07-r1", "phase": "dealing"}
        # the round cannot be voided; the stub count asked for a void: a supervisor settles it
        with pytest.raises(RulesError, match="to be voided"):
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        done = await daemon.call("settle", {"round_id": "CS-07-r1", **FLOOR})
        assert "CS-07-r2 open for betting" in done["message"]
        main = daemon.ledger.state["main"]
        assert main.voided_rounds == 0 and "CS-07-r1" in main.recent_rounds


async def test_a_shoe_jam_after_a_table_paid_bonus_leaves_the_round_dealt(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(4, BONUS), (2, "progressive")])
        paid = await daemon.call("claim", {"seat": 4, "spot": BONUS, "cards": FLUSH})
        assert paid["status"] == "paid"
        with capture_logs() as logs:
            await rig.jam_shoe()
            await until(lambda: events(logs, "shoe jam: the round is not voided"), "the jam refused in the log")
        assert daemon.state.phase.value == "dealing"
        assert (await daemon.call("settle", {"round_id": "CS-07-r1"}))["message"].startswith("round CS-07-r1 settled")


async def test_a_void_with_a_pending_claim_ends_it_in_the_journal_and_says_so(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(4, "progressive"), (6, "progressive")])
        got = await daemon.call("claim", {"seat": 4, "cards": FOUR_ACES})
        await until(lambda: win(rig, 4) and message(rig) == "PENDING", "win light, PENDING")
        done = await daemon.call("void", {"reason": "misdeal", **FLOOR})
        assert done["claims_voided"] == [got["claim_id"]] and got["claim_id"] in done["message"]
        assert daemon.round_info()["id"] == "CS-07-r2"
        main = daemon.ledger.state["main"]  # every wager returned, nothing paid
        assert main.voided_rounds == 1 and not main.history and main.current_cents == 1_000_000
        await until(lambda: not win(rig, 4) and message(rig) is None, lambda: f"lights and sign: {rig.sign()}")
        from controller.ledger.reader import JournalReader
        with JournalReader(daemon.ledger.db_path) as r:
            assert r.lookup(f"{got['claim_id']}:voided").body["claim"]["status"] == "voided"


# --- 3. a stop between two payouts of a shared award: finished after the restart --------------------------------


async def test_a_stop_between_two_shares_is_finished_at_the_start(tmp_path, monkeypatch):
    """The dealer's hand pays 10% of the meter shared by seats 5 and 2 (§ 639a.12(e)(2)); the controller stops
    after the first share is journaled. The claim was approved before: the restart pays the second share, and
    the round then settles (before, it could be neither settled nor voided, and the claim not made again)."""
    from controller.app import meter_port

    cut = asyncio.Event()
    real = meter_port.LocalMeters.submit

    async def submit(self, op, meter, key, *rest):
        if ":dealer:" in key and key.endswith(":pay:1"):  # the second share: seat 2's, after seat 5's
            cut.set()
            await asyncio.Event().wait()  # the controller stops here
        return await real(self, op, meter, key, *rest)

    async with table(tmp_path, magic="2C", lucky=7) as (daemon, rig):
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER), (3, "progressive")])
        got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        assert got["status"] == "pending"
        monkeypatch.setattr(meter_port.LocalMeters, "submit", submit)
        approve = asyncio.create_task(daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR}))
        await cut.wait()
        shares = [h.seat for h in daemon.ledger.state["bonus"].history if h.award == "10% of meter"]
        assert shares == [5]  # one share paid, the other not
        with pytest.raises(RulesError, match="is being paid"):  # nor claimed again meanwhile
            await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        approve.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await approve
        monkeypatch.setattr(meter_port.LocalMeters, "submit", real)
    async with table(tmp_path) as (daemon, rig):
        await until(lambda: daemon.desk.state.claims and daemon.desk.state.claims[0].status == "paid",
                    lambda: f"the claim paid to the end: {daemon.desk.claims_json()}")
        bonus = daemon.ledger.state["bonus"]
        assert sorted(h.seat for h in bonus.history if h.award == "10% of meter") == [2, 5]
        assert bonus.owed_cents == 0
        await until(lambda: win(rig, 5) and win(rig, 2), "both winners' lights")
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert "CS-07-r1" in daemon.ledger.state["bonus"].recent_rounds


# --- 4. concurrent decisions on one claim -----------------------------------------------------------------------


async def test_concurrent_approve_approve_reject_one_wins_the_others_are_refused(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(6, "progressive"), (2, "progressive"), (7, "progressive")])
        got = await daemon.call("claim", {"seat": 6, "cards": ["AS", "KS", "QS", "JS", "TS"]})
        cid = got["claim_id"]
        outcomes = await asyncio.gather(
            daemon.call("approve", {"claim_id": cid, **FLOOR}),
            daemon.call("approve", {"claim_id": cid, **FLOOR}),
            daemon.call("reject", {"claim_id": cid, "reason": "late", **FLOOR}),
            return_exceptions=True)
        ok = [o for o in outcomes if isinstance(o, dict)]
        refused = [o for o in outcomes if isinstance(o, RulesError)]
        assert len(ok) == 1 and len(refused) == 2, outcomes  # whichever came first decided; the others were told
        main = daemon.ledger.state["main"]
        if "approved by floor-1 and paid" in ok[0]["message"]:
            assert all(re.search(r"is being paid|was paid", str(e)) for e in refused), outcomes
            assert sorted(h.seat for h in main.history) == [2, 6, 7]  # the royal flush and two Envy Bonuses, once
        else:
            assert "nothing paid" in ok[0]["message"] and all("was rejected" in str(e) for e in refused), outcomes
            assert main.history == ()


# --- 5. the sign: PENDING while the claim waits, WIN for its time -----------------------------------------------


async def test_the_sign_keeps_pending_while_the_claim_waits_and_win_for_its_time(tmp_path, monkeypatch):
    from controller.app import sign

    monkeypatch.setattr(sign, "SIGN_REFRESH_S", 0.1)  # refreshes as often as a test can watch
    monkeypatch.setattr(sign, "WIN_DISPLAY_S", 1.5)
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(4, "progressive"), (6, "progressive")])
        got = await daemon.call("claim", {"seat": 4, "cards": FOUR_ACES})
        await until(lambda: message(rig) == "PENDING", "PENDING")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # meters and refreshes come and go; PENDING stays
            daemon._show_meters()
            assert message(rig) == "PENDING", rig.sign()
            await asyncio.sleep(0.05)
        await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        await until(lambda: message(rig) == "WIN", "WIN")
        seen = time.monotonic()
        while message(rig) == "WIN":
            assert time.monotonic() - seen < 15, f"WIN never gave way to the meters: {rig.sign()}"
            daemon._show_meters()
            await asyncio.sleep(0.02)
        shown = time.monotonic() - seen
        # never cut short (the two writes to the sign may each wait a bus cycle); then the meters again
        assert shown >= 1.5 - 0.3, f"WIN shown {shown:.2f} s, for 1.5 s wanted"
        assert rig.sign()["amounts"][0] == (1, daemon.ledger.state["main"].current_cents)


# --- 7. a wrong stub count from the socket group: blocks, and asks a supervisor to void -----------------------


async def test_a_wrong_stub_count_blocks_and_waits_for_a_supervisor(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(3, "progressive"), (5, "progressive")])
        before = daemon.ledger.state["main"]
        asked = await daemon.call("stub_count", {"stub": 30, "dealt": 17})  # anyone in the socket group
        assert asked["deck_ok"] is False and asked["void_requested"] is True
        assert daemon.state.phase.value == "dealing" and daemon.ledger.state["main"] == before  # nothing returned
        assert daemon.state.blocks.get(Block.DECK) == {"stub"}  # wagering disabled at once
        info = daemon.round_info()
        assert "30 + 17" in info["void_requested"] and len(info["wagers"]) == 2
        with pytest.raises(RulesError, match="to be voided"):
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        # a supervisor's recount of 52 withdraws the request (the dealer miscounted)
        await daemon.call("stub_count", {"stub": 35, "dealt": 17, **FLOOR})
        assert daemon.round_info()["void_requested"] is None and not daemon.state.blocked
        # again wrong: the supervisor confirms the void, and every wager is returned
        await daemon.call("stub_count", {"stub": 30, "dealt": 17})
        done = await daemon.call("void", {"reason": "stub count confirmed", **FLOOR})
        assert "2 wagers returned" in done["message"]
        main = daemon.ledger.state["main"]
        assert main.voided_rounds == 1 and main.wagers_count == 0


# --- 8. a pending claim outlives a restart ----------------------------------------------------------------------


async def test_a_pending_claim_waits_again_after_a_restart(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(6, "progressive"), (3, "progressive")])
        got = await daemon.call("claim", {"seat": 6, "cards": FOUR_ACES})
    async with table(tmp_path) as (daemon, rig):
        info = daemon.round_info()
        assert [(c["claim_id"], c["status"]) for c in info["claims"]] == [(got["claim_id"], "pending")]
        await until(lambda: win(rig, 6) and message(rig) == "PENDING" and lit(rig, 6) == ["progressive"],
                    lambda: f"the resumed round's lights and PENDING: {rig.lights()} {rig.sign()}")
        with pytest.raises(RulesError, match="awaits a supervisor"):
            await daemon.call("claim", {"seat": 3, "cards": FOUR_ACES})  # one at a time, as before the stop
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"]
        assert [h.seat for h in daemon.ledger.state["main"].history] == [6]
        # the next claim of the round is numbered after the journaled one
        nxt = await daemon.call("claim", {"seat": 3, "cards": ["KS", "KD", "KC", "KH", "3D"]})
        assert nxt["claim_id"] == "CS-07-r1-c2"


async def test_requests_on_the_control_socket_are_answered_while_refusals_come_and_go(tmp_path):
    """Through the real control socket, as progressivectl sends them: each request gets its answer, a refusal
    with its field, and the daemon keeps serving."""
    sock = tmp_path / "control.sock"

    daemon_class = functools.partial(TableDaemon, control=lambda d: ControlServer(sock, d))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                             lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET)) as (daemon, rig):
        await lock_round(daemon, rig, [(4, "progressive")])
        c = ControlClient(sock)
        got = await c.call("claim", seat=4, cards=FOUR_ACES)
        await c.call("approve", claim_id=got["claim_id"], **FLOOR)
        for op, args in (("void", {"reason": "late", **FLOOR}), ("approve", {"claim_id": got["claim_id"], **FLOOR}),
                         ("reject", {"claim_id": got["claim_id"], "reason": "x", **FLOOR}),
                         ("claim", {"seat": 9, "cards": FOUR_ACES}), ("settle", {"round_id": "CS-07-r9"})):
            with pytest.raises(ControlError) as refused:
                await c.call(op, **args)
            assert refused.value.kind in ("rules", "input") and refused.value.field, (op, refused.value)
        assert (await c.call("status"))["round"]["phase"] == "dealing"
        with pytest.raises(ControlError, match=r"^seat: 9 is not a seat of table CS-07 \(1\.\.7\)$") as bad:
            await c.call("claim", seat=9, cards=FOUR_ACES)
        assert bad.value.kind == "input"  # malformed input, as docs/cli.md says, not a rules refusal
        with pytest.raises(ControlError, match=r"^round_id: round CS-07-r9 is not the current round CS-07-r1$"):
            await c.call("settle", round_id="CS-07-r9")



# --- races between a claim's steps and the round's end ----------------------------------------------------------


@contextlib.contextmanager
def held_record(monkeypatch, event: str):
    """The claim's `event` record is held on its way to the journal until the block ends; yields the moment it
    is held."""
    from controller.app import claim_desk

    real = claim_desk.ClaimDesk._record
    started, release = asyncio.Event(), asyncio.Event()

    async def held(self, c, what, key):
        if what == event:
            started.set()
            await release.wait()
        return await real(self, c, what, key)

    monkeypatch.setattr(claim_desk.ClaimDesk, "_record", held)
    try:
        yield started
    finally:
        release.set()


async def test_the_round_ends_only_after_a_claims_steps_and_each_request_gets_its_own_answer(tmp_path, monkeypatch):
    """A settle or a void asked while a claim's records are being journaled is refused for the moment (before, it
    went through and the approval, rejection or claim answered 'no claim ...' or an internal error)."""
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(6, "progressive"), (3, "progressive")])
        with held_record(monkeypatch, "claimed") as started:
            claim = asyncio.create_task(daemon.call("claim", {"seat": 6, "cards": FOUR_ACES}))
            await started.wait()
            with pytest.raises(RulesError, match="being journaled: the round is voided after it"):
                await daemon.call("void", {"reason": "misdeal", **FLOOR})
        assert (await claim)["status"] == "pending"
        with held_record(monkeypatch, "paid") as started:
            approve = asyncio.create_task(daemon.call("approve", {"claim_id": "CS-07-r1-c1", **FLOOR}))
            await started.wait()
            with pytest.raises(RulesError, match="being journaled: the round is settled after it"):
                await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert "approved by floor-1 and paid" in (await approve)["message"]
        await until(lambda: message(rig) == "WIN", "the win shown")
        assert (await daemon.call("settle", {"round_id": "CS-07-r1"}))["message"].startswith("round CS-07-r1 settled")


async def test_a_shoe_jam_while_a_claim_is_verified_voids_the_round_right_after(tmp_path, monkeypatch):
    from controller.app import meter_port

    real = meter_port.LocalMeters.journaled
    started = asyncio.Event()

    async def slow(self, meter, key):
        started.set()
        await asyncio.sleep(0.3)
        return await real(self, meter, key)

    monkeypatch.setattr(meter_port.LocalMeters, "journaled", slow)
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(6, "progressive"), (3, "progressive")])
        claim = asyncio.create_task(daemon.call("claim", {"seat": 6, "cards": FOUR_ACES}))
        await started.wait()
        await rig.jam_shoe()  # § 667a.13(e): the round is void; nothing of it was paid
        got = await claim
        await until(lambda: daemon.round_info()["id"] == "CS-07-r2", "the round voided after the claim's step")
        main = daemon.ledger.state["main"]
        assert main.voided_rounds == 1 and not main.history
        from controller.ledger.reader import JournalReader
        with JournalReader(daemon.ledger.db_path) as r:
            assert r.lookup(f"{got['claim_id']}:voided") is not None  # the pending claim ended with the round


async def test_a_round_to_be_voided_takes_no_claim_and_no_approval_and_is_settled_only_where_it_cannot_be(tmp_path):
    """§ 667a.8(h): after a wrong stub count the hands are void. Nothing more is claimed or paid (before, the dealer
    could claim a table-paid hand and so make the void impossible), a pending claim can only be rejected, and a
    supervisor's settlement is for a round whose void cannot be."""
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(4, BONUS), (6, "progressive")])
        pending = await daemon.call("claim", {"seat": 6, "cards": FOUR_ACES})
        await daemon.call("stub_count", {"stub": 30, "dealt": 17})
        with pytest.raises(RulesError, match="to be voided"):
            await daemon.call("claim", {"seat": 4, "spot": BONUS, "cards": FLUSH})
        with pytest.raises(RulesError, match="to be voided"):
            await daemon.call("approve", {"claim_id": pending["claim_id"], **FLOOR})
        await daemon.call("reject", {"claim_id": pending["claim_id"], "reason": "hands void", **FLOOR})
        with pytest.raises(RulesError, match="only where its void cannot be"):
            await daemon.call("settle", {"round_id": "CS-07-r1", **FLOOR})
        done = await daemon.call("void", {"reason": "stub count", **FLOOR})
        assert "2 wagers returned" in done["message"] and not daemon.ledger.state["bonus"].history

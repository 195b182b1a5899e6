"""Claims on a linked meter end to end: a real Mosquitto (TLS, the shipped ACL), the link authority, and the table
daemon on the rig with its Five Card Hand Bonus meter linked (its Progressive Payout Wager meter its own).

The dealer's hand shared by several players (§ 639a.12(e)(2)) is the case that used to strand money: the first
share is locked at the authority at the claim and paid from the lock; the later shares are paid from what the lock
took, and the round then closes at the authority. Also: a stop between two shares is finished at the start, a
rejection gives the lock back (and a concurrent approval is refused), a void with a pending claim releases its lock
before the round is reversed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import replace
from pathlib import Path

import pytest

from controller.app import claim_link, claim_locks
from controller.app.table import TableDaemon
from controller.config.model import LinkedMeter, MqttConfig
from controller.errors import RulesError
from controller.money import UNITS_PER_CENT

from broker import running_broker
from linkrig import AUTHORITY_KEY, METER, PREFIX, RESET, LinkRig, approval_keys
from rigtable import daemon_on_rig, drawing, lock_round, message, until, win, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
TABLE_ID = "CS-07"
SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
FLOOR = {"supervisor": SUPERVISOR, "secret": SECRET}
BONUS, ON_DEALER = "five-card-hand-bonus", "five-card-hand-bonus-dealer"
STRAIGHT_FLUSH = ["9D", "8D", "7D", "6D", "5D"]  # 10% of the meter, shared on the dealer's hand
ROYAL = ["AH", "KH", "QH", "JH", "TH"]  # 100% of the meter


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (TABLE_ID, "authority")) as b:
        yield b


@contextlib.asynccontextmanager
async def authority(tmp_path, broker, approvers=None):
    rig = LinkRig(tmp_path, broker, (TABLE_ID,))
    if approvers is not None:
        rig.cfg = replace(rig.cfg, approvers=approvers)
    try:
        await rig.start_authority()
        yield rig
    finally:
        await rig.close()


def _linked(cfg, tmp_path: Path, broker, meter: str = "bonus", sizes: tuple[int, ...] = (100,)):
    password = tmp_path / "table.password"
    password.write_text(broker.passwords[TABLE_ID] + "\n", encoding="utf-8")
    password.chmod(0o600)
    mqtt = MqttConfig(host=broker.host, port=broker.port, tls=True, client_id=TABLE_ID, topic_prefix=PREFIX,
                      link_timeout=2.0, ca_file=broker.ca_file, username=TABLE_ID, password_file=password,
                      authority_keys=(AUTHORITY_KEY,))
    cfg = replace(cfg, meters={**cfg.meters, meter: LinkedMeter(meter, METER, sizes)}, mqtt=mqtt)
    return with_supervisor(cfg, SUPERVISOR, SECRET)


def _linked_main(cfg, tmp_path: Path, broker):
    """The Progressive Payout Wager's meter linked (Paytable D: a royal flush earns every other wagerer an Envy
    Bonus), the Five Card Hand Bonus's the table's own."""
    return _linked(cfg, tmp_path, broker, "main", (100, 500))


@contextlib.asynccontextmanager
async def linked_table(tmp_path, broker, *, magic: str = "2C", lucky: int | str = 7, link=_linked):
    daemon_class = functools.partial(TableDaemon, draw=drawing(magic, lucky))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                             lambda cfg: link(cfg, tmp_path, broker)) as (daemon, rig):
        await until(lambda: daemon.link.alive and METER in daemon.link.values, "the authority heard, its meter known")
        yield daemon, rig


async def answered(daemon) -> None:
    await until(lambda: not daemon.link.outbox.pending, "every operation answered by the authority", 20)


def shares(meter, award: str = "10% of meter") -> list[tuple[int, int, int]]:
    return sorted((h.seat, h.amount_cents, h.shares) for h in meter.history if h.award == award)


async def test_a_dealers_hand_award_shared_on_a_linked_meter_pays_every_sharer(tmp_path, broker):
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER), (3, "progressive")])
        await answered(daemon)
        before = link.meter().current
        got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        assert got["status"] == "pending", got
        assert len(link.meter().locked) == 1  # the whole award left the meter at the claim, at the authority
        await until(lambda: win(rig, 5) and win(rig, 2) and message(rig) == "PENDING", "lights, PENDING")
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"]
        await answered(daemon)
        m = link.meter()
        per_share = (before // UNITS_PER_CENT // 10) // 2
        assert shares(m) == [(2, per_share, 2), (5, per_share, 2)]
        assert not m.locked and m.owed_cents == 0
        # a second approval and a rejection are answers, not a second payment
        with pytest.raises(RulesError, match="was paid"):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        with pytest.raises(RulesError, match="was paid"):
            await daemon.call("reject", {"claim_id": got["claim_id"], "reason": "late", **FLOOR})
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        await answered(daemon)
        assert f"{TABLE_ID}-r1" not in link.meter().open_rounds  # the round closed at the authority
        refused = [s for s in daemon.link.outbox.pending.values()]
        assert daemon.link.outbox.refused == 0 and not refused


async def test_a_stop_between_two_linked_shares_is_finished_at_the_start(tmp_path, broker, monkeypatch):
    from controller.app import meter_port

    cut = asyncio.Event()
    real = meter_port.LinkedMeters.submit

    async def submit(self, op, meter, key, *rest):
        if op.kind == "pay-percent-award":  # the second share, after the lock's payment
            cut.set()
            await asyncio.Event().wait()  # the controller stops here
        return await real(self, op, meter, key, *rest)

    async with authority(tmp_path, broker) as link:
        async with linked_table(tmp_path, broker) as (daemon, rig):
            await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER)])
            got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
            monkeypatch.setattr(meter_port.LinkedMeters, "submit", submit)
            approve = asyncio.create_task(daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR}))
            await cut.wait()
            await answered(daemon)
            assert [s for s, _c, _n in shares(link.meter())] == [5]  # one share paid at the authority
            approve.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await approve
            monkeypatch.setattr(meter_port.LinkedMeters, "submit", real)
        async with linked_table(tmp_path, broker) as (daemon, rig):
            await until(lambda: daemon.desk.state.claims and daemon.desk.state.claims[0].status == "paid",
                        lambda: f"paid to the end: {daemon.desk.claims_json()}")
            await answered(daemon)
            assert [s for s, _c, _n in shares(link.meter())] == [2, 5] and link.meter().owed_cents == 0
            await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
            await answered(daemon)
            assert f"{TABLE_ID}-r1" not in link.meter().open_rounds


async def test_a_rejected_linked_claim_gives_its_lock_back_and_a_late_approval_is_refused(tmp_path, broker):
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(4, BONUS), (6, BONUS)])
        await answered(daemon)
        before = link.meter().current
        got = await daemon.call("claim", {"seat": 6, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "pending" and link.meter().current == RESET * UNITS_PER_CENT  # locked: reset at once
        outcomes = await asyncio.gather(
            daemon.call("reject", {"claim_id": got["claim_id"], "reason": "cards switched", **FLOOR}),
            daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR}), return_exceptions=True)
        assert sum(isinstance(o, dict) for o in outcomes) == 1 and sum(isinstance(o, RulesError) for o in outcomes) == 1
        await answered(daemon)
        m = link.meter()
        if isinstance(outcomes[0], dict):  # the rejection decided: the amount went back
            assert m.current == before and not m.locked and not m.history
        else:
            assert [h.seat for h in m.history] == [6] and not m.locked
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        await answered(daemon)
        assert not link.meter().open_rounds


async def test_a_void_releases_a_pending_linked_claim_before_the_round_is_reversed(tmp_path, broker):
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await answered(daemon)
        reset = link.meter().current
        await lock_round(daemon, rig, [(4, BONUS), (6, BONUS)])
        got = await daemon.call("claim", {"seat": 6, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "pending"
        done = await daemon.call("void", {"reason": "misdeal", **FLOOR})
        assert done["claims_voided"] == [got["claim_id"]]
        await answered(daemon)
        m = link.meter()
        assert not m.locked and not m.open_rounds and not m.history and m.current == reset
        assert daemon.link.outbox.refused == 0


async def test_an_older_authority_is_not_sent_what_it_cannot_take(tmp_path, broker):
    """An authority that does not list pay-percent-award in its `expect` (one of before it) would drop it, and the
    table's sequence with it: a shared award on the dealer's hand is refused at the claim instead, nothing locked."""
    from controller.linkproto import schema

    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        assert daemon.link.accepts("pay-percent-award")  # this authority says it takes it
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER)])
        daemon.link.authority_kinds = schema.BASE_OPS  # as an older authority's expect leaves it
        with pytest.raises(RulesError, match="older version of the link protocol"):
            await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        await answered(daemon)
        assert not link.meter().locked


async def test_a_claim_waiting_for_an_unanswered_lock_may_be_rejected(tmp_path, broker, monkeypatch):
    """The authority is down: the claim answers `locking` (it waits in the outbox); a supervisor may reject it
    (before, only a void of the whole round ended it). When the authority is back the lock is taken and given
    back at once, in that order."""
    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)  # the claim's answer: `locking` after this long
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(6, BONUS), (4, BONUS)])
        await answered(daemon)
        before = link.meter().current
        await link.stop_authority()
        got = await daemon.call("claim", {"seat": 6, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "locking", got
        done = await daemon.call("reject", {"claim_id": got["claim_id"], "reason": "wrong hand", **FLOOR})
        assert "nothing paid" in done["message"]
        await link.start_authority()
        await answered(daemon)
        m = link.meter()
        assert not m.locked and not m.history and m.current == before
        assert daemon.link.outbox.refused == 0
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        await answered(daemon)
        assert not link.meter().open_rounds


async def test_a_journal_restored_with_its_anchor_is_found_by_the_authoritys_anchor(tmp_path, broker):
    """Someone who copies files on the box puts back an older state directory and the older anchor file with it:
    the table's own check passes (they agree), but the authority kept a newer anchor of the table's journal and
    sends it back at the connection: the table says so (an error and a metric)."""
    import shutil

    from structlog.testing import capture_logs

    from controller.config.model import AnchorConfig

    state, anchor_dir = tmp_path / "state", AnchorConfig().file_for(tmp_path / "state").parent
    async with authority(tmp_path, broker) as link:
        async with linked_table(tmp_path, broker) as (daemon, rig):
            await until(lambda: TABLE_ID in link.authority.anchors, "the authority holds the table's anchor")
        shutil.copytree(state, tmp_path / "old-state")
        shutil.copytree(anchor_dir, tmp_path / "old-anchor")
        async with linked_table(tmp_path, broker) as (daemon, rig):
            await lock_round(daemon, rig, [(4, BONUS)])
            await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
            await daemon.anchoring.anchor("test")
            head = daemon.anchoring.last.seq
            await until(lambda: link.authority.anchors[TABLE_ID].seq == head, "the newer anchor at the authority")
        shutil.rmtree(state)
        shutil.rmtree(anchor_dir)
        shutil.copytree(tmp_path / "old-state", state)
        shutil.copytree(tmp_path / "old-anchor", anchor_dir)
        with capture_logs() as logs:
            async with linked_table(tmp_path, broker) as (daemon, rig):  # starts: its own anchor agrees
                await until(lambda: any(e["event"].startswith("the link authority's anchor") for e in logs),
                            "the authority's anchor found not to match")
                text = daemon.metrics.exposition().decode()
        assert 'progressive_ledger_anchor_problems_total{problem="authority"} 1.0' in text
        alert = next(e for e in logs if e["event"].startswith("the link authority's anchor"))
        assert alert["log_level"] == "error" and "rolled back" in alert["problem"] and alert["seq"] == head, alert


async def test_an_approval_by_a_supervisor_the_authority_does_not_list_is_refused_before_anything_moves(
        tmp_path, broker):
    """The authority says whose approvals it verifies: an approval by anyone else is refused at the table, the
    claim pending and its lock held, nothing sent; once the authority lists the supervisor, the same approval pays."""
    others = {"floor-2": approval_keys()["floor-2"]}
    async with authority(tmp_path, broker, approvers=others) as link, \
            linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(3, BONUS)])
        got = await daemon.call("claim", {"seat": 3, "cards": ROYAL})
        await answered(daemon)
        assert len(link.meter().locked) == 1
        sent = daemon.link.outbox.next_seq
        with pytest.raises(RulesError, match="floor-1 is not an approver of the link authority"):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert daemon.desk.state.get(got["claim_id"]).status == "pending"
        assert daemon.link.outbox.next_seq == sent and len(link.meter().locked) == 1
        await link.stop_authority()
        link.cfg = replace(link.cfg, approvers=approval_keys())
        await link.start_authority()
        await until(lambda: daemon.link.approvers is not None and SUPERVISOR in daemon.link.approvers,
                    "the authority lists floor-1 now")
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "paid" in done["message"], done
        await answered(daemon)
        m = link.meter()
        assert not m.locked and [h.approved_by for h in m.history] == [SUPERVISOR]


async def test_a_refused_jackpot_pays_none_of_its_envy_bonuses_and_the_hand_claimed_again_pays_each_once(
        tmp_path, broker):
    """A royal flush on the linked Progressive Payout Wager, another seat wagering: the jackpot (approved, verified
    by the authority) and the other seat's Envy Bonus (pay-fixed-award). The Envy Bonus is sent only once the
    jackpot is confirmed: when the authority refuses the jackpot, nothing of the claim is paid (before, the Envy
    Bonus was paid then, the claim stayed being paid forever, and a claim of the hand again paid it twice)."""
    from controller.linkproto import approval

    stale = {SUPERVISOR: approval.approval_key(SUPERVISOR, "an old secret")}
    async with authority(tmp_path, broker, approvers=stale) as link, \
            linked_table(tmp_path, broker, link=_linked_main) as (daemon, rig):
        await lock_round(daemon, rig, [(3, "progressive"), (4, "progressive")])
        await answered(daemon)
        got = await daemon.call("claim", {"seat": 3, "cards": ROYAL})
        claim = daemon.desk.state.get(got["claim_id"])
        assert [p.seat for p in claim.payouts] == [3, 4]  # the jackpot, then seat 4's Envy Bonus
        with pytest.raises(RulesError, match="refused payout 0"):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        await answered(daemon)
        assert daemon.desk.state.get(got["claim_id"]).status == "refused"
        assert not link.meter().history  # the Envy Bonus was not sent
        await link.stop_authority()
        link.cfg = replace(link.cfg, approvers=approval_keys())
        await link.start_authority()
        await until(lambda: daemon.link.approvers is not None, "the authority heard again")
        again = await daemon.call("claim", {"seat": 3, "cards": ROYAL})
        done = await daemon.call("approve", {"claim_id": again["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"], done
        await answered(daemon)
        assert sorted(h.seat for h in link.meter().history) == [3, 4]  # each paid once
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})


async def test_a_later_share_refused_after_the_first_was_paid_is_not_sent_again_and_again(tmp_path, broker,
                                                                                           monkeypatch):
    """A dealer's-hand award shared by two seats: the first share paid, the second refused by the authority (its
    approvers changed in between). The claim stays being paid (one share is), the refusal is logged once, and the
    refused payment is not sent again (before, about 400 times a second, and again after each restart). A supervisor
    approves the refused share again once the authority verifies them: it is paid, and the round settles (before,
    nothing could end such a claim)."""
    from structlog.testing import capture_logs

    from controller.linkproto import approval

    real = approval.check

    def check(keys, kind, *rest):
        if kind == "pay-percent-award":
            return "the approval by 'floor-1' does not verify (the approvers changed)"
        return real(keys, kind, *rest)

    monkeypatch.setattr(approval, "check", check)
    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)  # approve answers `paying` after this long
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER)])
        got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        with capture_logs() as logs:
            done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
            assert done["status"] == "paying", done
            await until(lambda: any(e["event"] == "the link authority refused a payment" for e in logs), "refused")
            await answered(daemon)
            await asyncio.sleep(0.5)  # a window in which a loop would have sent it again many times
        refusals = [e for e in logs if e["event"] == "the link authority refused a payment"]
        assert len(refusals) == 1 and refusals[0]["paid_before"] == [0], refusals
        c = daemon.desk.state.get(got["claim_id"])
        assert c.status == "paying" and c.paid == (0,) and c.refused == (1,)
        assert len(link.meter().history) == 1  # the first share, once
        with pytest.raises(RulesError, match="is being paid"):
            await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        # The way out: the approvers agree again, and a supervisor approves the refused share again; it is paid
        # once (under a key of its own), the first share is not paid again, and the round settles.
        monkeypatch.setattr(approval, "check", real)
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"], done
        await answered(daemon)
        assert shares(link.meter()) == sorted(shares(link.meter())) and [s for s, _c, _n in shares(link.meter())] \
            == [2, 5]
        assert link.meter().owed_cents == 0
        with pytest.raises(RulesError, match="was paid"):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        await until(lambda: daemon.desk.busy is None, "the claim's records journaled")
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        await answered(daemon)
        assert not link.meter().open_rounds


async def test_an_approval_the_authority_cannot_verify_is_never_shown_paid(tmp_path, broker):
    """floor-1 listed at the authority with the key of an old secret (changed at the tables, not at the authority):
    the authority refuses the payment; the table does not show it paid. The claim ends refused, its lock goes back
    to the meter, and the hand is claimed again and paid once the authority has floor-1's key."""
    from controller.linkproto import approval

    stale = {SUPERVISOR: approval.approval_key(SUPERVISOR, "an old secret")}
    async with authority(tmp_path, broker, approvers=stale) as link, \
            linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(3, BONUS)])
        await answered(daemon)  # the booking applied at the authority
        before = link.meter().current
        got = await daemon.call("claim", {"seat": 3, "cards": ROYAL})
        with pytest.raises(RulesError, match="refused payout 0: the approval by 'floor-1' does not verify"):
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert daemon.desk.state.get(got["claim_id"]).status == "refused"
        await until(lambda: not link.meter().locked, "the lock released at the authority")
        await answered(daemon)
        m = link.meter()
        assert not m.history and not m.locked and m.current == before  # the lock went back, nothing paid
        await until(lambda: not win(rig, 3), "the win light is off")
        await link.stop_authority()
        link.cfg = replace(link.cfg, approvers=approval_keys())
        await link.start_authority()
        await until(lambda: daemon.link.approvers is not None, "the authority heard again")
        again = await daemon.call("claim", {"seat": 3, "cards": ROYAL})
        assert again["claim_id"] != got["claim_id"]
        done = await daemon.call("approve", {"claim_id": again["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"], done
        await answered(daemon)
        m = link.meter()
        assert not m.locked and [(h.seat, h.approved_by) for h in m.history] == [(3, SUPERVISOR)]


def _two_supervisors(cfg, tmp_path: Path, broker):
    """The linked table with floor-1 and floor-2, both approvers at the authority (linkrig.APPROVERS)."""
    from controller.config.credentials import MIN_PBKDF2_ITERATIONS, PBKDF2, hash_credential, parse_credential
    from controller.config.model import Supervisor

    from linkrig import APPROVERS

    cfg = _linked(cfg, tmp_path, broker)
    return replace(cfg, supervisors=tuple(
        Supervisor(n, parse_credential(hash_credential(s, PBKDF2, iterations=MIN_PBKDF2_ITERATIONS)))
        for n, s in APPROVERS.items()))


async def test_a_share_refused_is_approved_again_by_another_supervisor_with_the_shares_behind_it(
        tmp_path, broker, monkeypatch):
    """Three seats share the dealer's straight flush. floor-1's approval of the later shares is refused by the
    authority (its key changed there between the shares): the first share is paid, the second refused, the third
    waits behind it. floor-2 approves again: both remaining shares are paid under floor-2's approvals, each once,
    and the round settles (before, the third was sent with floor-1's old approval and refused in its turn)."""
    from controller.linkproto import approval

    from linkrig import APPROVERS

    real = approval.check

    def check(keys, kind, table, linked, body, signed):
        if kind == "pay-percent-award" and body.get("approved_by") == SUPERVISOR:
            return "the approval by 'floor-1' does not verify (the approvers changed)"
        return real(keys, kind, table, linked, body, signed)

    monkeypatch.setattr(approval, "check", check)
    monkeypatch.setattr(claim_link, "LINK_ANSWER_S", 1.0)
    async with authority(tmp_path, broker) as link, \
            linked_table(tmp_path, broker, link=_two_supervisors) as (daemon, rig):
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER), (6, ON_DEALER)])
        got = await daemon.call("claim", {"seat": "dealer", "cards": STRAIGHT_FLUSH})
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert done["status"] == "paying", done
        await until(lambda: daemon.desk.state.get(got["claim_id"]).refused, "a share refused")
        await answered(daemon)
        c = daemon.desk.state.get(got["claim_id"])
        assert len(c.paid) == 1 and len(c.refused) == 1 and len(c.unpaid) == 2, c
        done = await daemon.call("approve", {"claim_id": got["claim_id"], "supervisor": "floor-2",
                                             "secret": APPROVERS["floor-2"]})
        assert "approved by floor-2 and paid" in done["message"], done
        await answered(daemon)
        m = link.meter()
        first = c.payouts[c.paid[0]].seat
        assert sorted((h.seat, h.approved_by) for h in m.history) == sorted(
            (seat, SUPERVISOR if seat == first else "floor-2") for seat in (2, 5, 6)), m.history
        assert m.owed_cents == 0 and not m.locked
        await until(lambda: daemon.desk.busy is None, "the claim's records journaled")
        await daemon.call("settle", {"round_id": f"{TABLE_ID}-r1"})
        await answered(daemon)
        assert not link.meter().open_rounds


async def test_a_lock_sent_before_the_cards_were_is_approved_as_it_was_sent(tmp_path, broker, monkeypatch):
    """A lock sent by the table's previous version carries no cards, and the authority holds it so. Approved after
    the upgrade, the approval names the lock as the link journal sent it (no cards), and verifies: paid."""
    real = claim_locks.lock_op
    monkeypatch.setattr(claim_locks, "lock_op", lambda *a, **k: replace(real(*a, **k), cards=""))
    async with authority(tmp_path, broker) as link, linked_table(tmp_path, broker) as (daemon, rig):
        await lock_round(daemon, rig, [(3, BONUS)])
        got = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ROYAL})
        assert got["status"] == "pending", got
        (held,) = link.meter().locked.values()
        assert held.cards == ""
        monkeypatch.setattr(claim_locks, "lock_op", real)  # upgraded
        done = await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        assert "approved by floor-1 and paid" in done["message"], done
        assert [h.seat for h in link.meter().history] == [3]

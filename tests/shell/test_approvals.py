"""A table's MQTT credentials alone do not pay a linked jackpot: the attack of a client logged in as a table, with
no daemon, no cards and no supervisor, run for real against a link authority through Mosquitto (TLS, the shipped
ACL). And what a compromised table or the broker can still try with an approval it saw: moved to another payment,
replayed, signed by someone else. Each refused, counted as an anomaly per table; hits far beyond the odds and
awards on rounds never booked are alerts too. The approvals file of the authority and `progressivectl
approval-key` are checked here as well."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from controller.config import ConfigError
from controller.config.authority import check_authority_config, load_authority_config
from controller.link.mqtt import MqttLink
from controller.linkproto import approval, schema
from controller.meter import ops

from broker import running_broker
from linkrig import AT, METER, PREFIX, LinkRig, approvers_file, signed, signing_key_file
from rigtable import until

TOPICS = schema.Topics(PREFIX)
TABLE = "cs-01"
NOBODY = "Nobody Approved This"
CTL = Path(sys.executable).parent / "progressivectl"


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (TABLE, "fcp-02", "authority")) as b:
        yield b


class RawTable:
    """A client holding the table's MQTT credentials and nothing else: it sends operations it numbers itself."""

    def __init__(self, broker, table: str = TABLE) -> None:
        self.table = table
        self.inbox: list = []
        self.mq = MqttLink(broker.settings(table), TOPICS.table_subscriptions(table))
        self.task: asyncio.Task | None = None
        self.seq = 0

    async def __aenter__(self) -> RawTable:
        self.task = asyncio.create_task(self.mq.run(lambda t, p: self.inbox.append(schema.decode(t, p))))
        await self.mq.wait_connected(10)
        await self.mq.publish(TOPICS.up(self.table), schema.encode(schema.Hello(self.table, 1, os.urandom(16).hex())))
        await until(lambda: any(isinstance(m, schema.Expect) for m in self.inbox), "the authority's expect")
        self.seq = next(m for m in self.inbox if isinstance(m, schema.Expect)).next_seq - 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def send(self, op, approval_: dict | None = None) -> schema.Ack | schema.Refused:
        """Send `op` as the next operation; the authority's answer."""
        self.seq += 1
        seq = self.seq
        body = op.to_dict()
        body.pop("kind")
        await self.mq.publish(TOPICS.up(self.table), schema.encode(schema.Op(self.table, seq, op.kind, METER, body,
                                                                              approval_)))
        await until(lambda: any(isinstance(m, schema.Ack | schema.Refused) and m.seq == seq for m in self.inbox),
                    f"the answer to operation {seq}")
        return next(m for m in self.inbox if isinstance(m, schema.Ack | schema.Refused) and m.seq == seq)


def anomalies(rig: LinkRig, anomaly: str, table: str = TABLE) -> float:
    assert rig.authority is not None
    return rig.authority.metrics.registry.get_sample_value(
        "progressive_link_anomalies_total", {"table": table, "anomaly": anomaly}) or 0.0


def book(n: int, seats=((3, 100),)) -> ops.BookContributions:
    return ops.BookContributions(f"{TABLE}-r{n}", TABLE, seats, AT)


def lock(n: int, claim: str, seat: int = 3) -> ops.LockPercentAward:
    return ops.LockPercentAward(f"{TABLE}-r{n}", TABLE, seat, "royal-flush", "100% of meter", Fraction(100), AT, claim)


async def test_a_tables_mqtt_credentials_alone_cannot_pay_a_linked_jackpot(tmp_path, broker):
    """The attack of the issue: hello, a $1 booking, a lock of 100% of the meter, and its payment 'approved' by
    nobody. Before: the authority paid $10,000.15. Now every payment without an approval the authority verifies
    is refused (journaled, final), the lock stays unpaid, and each refusal is an anomaly of that table."""
    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        async with RawTable(broker) as t:
            assert isinstance(await t.send(book(1)), schema.Ack)
            locked = await t.send(lock(1, f"{TABLE}-r1-c1:0"))
            assert isinstance(locked, schema.Ack)
            pay = ops.PayLockedAward(f"{TABLE}-r1-c1:0", NOBODY, AT)
            as_floor = ops.PayLockedAward(f"{TABLE}-r1-c1:0", "floor-1", AT)  # in a real approver's name
            tries = [  # (what, payment, approval, why refused)
                ("no approval", pay, None, "carries no approval"),
                ("an approval by nobody the authority knows", pay, {"by": NOBODY, "mac": "00" * 32},
                 "is not an approver"),
                ("an approval by someone else than the payment says", pay, {"by": "floor-1", "mac": "00" * 32},
                 "its approval is by 'floor-1'"),
                ("an approver's name, a made-up MAC", as_floor, {"by": "floor-1", "mac": os.urandom(32).hex()},
                 "does not verify"),
                ("a MAC that is not hex (before: a traceback, no answer)", as_floor, {"by": "floor-1", "mac": "é" * 64},
                 "not an HMAC-SHA256 in hex"),
                ("an approver's name, signed with a guessed key", as_floor,
                 approval.sign(os.urandom(32), as_floor.kind, TABLE, METER, _body(as_floor)), "does not verify"),
                ("a true approval of this payment, made for another table", as_floor,
                 signed(as_floor, "fcp-02", locked=locked.result, lock=lock(1, f"{TABLE}-r1-c1:0")), "does not verify"),
            ]
            answers = [(what, why, await t.send(op, a)) for what, op, a, why in tries]
        for what, why, answer in answers:
            assert isinstance(answer, schema.Refused) and answer.field == "approval", (what, answer)
            assert why in answer.message, (what, answer)
        m = rig.meter()
        assert not m.history and m.cumulative_payouts_cents == 0  # nothing paid
        assert list(m.locked) == [f"{TABLE}-r1-c1:0"]  # the lock holds the amount, unpaid
        assert anomalies(rig, "unapproved payment") == len(answers)
        assert anomalies(rig, "award refused") == 0  # an approval problem is counted once, as itself
    finally:
        await rig.close()


def _body(op) -> dict:
    body = op.to_dict()
    body.pop("kind")
    return body


async def test_an_approval_seen_on_the_wire_pays_only_the_payment_it_approves(tmp_path, broker):
    """What the broker (or a table box's MQTT client) sees in flight: a real approval of one payment. Moved to
    another lock, or its payment sent again, it pays nothing more."""
    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        async with RawTable(broker) as t:
            await t.send(book(1))
            await t.send(book(2))
            locked = await t.send(lock(1, f"{TABLE}-r1-c1:0"))
            first = ops.PayLockedAward(f"{TABLE}-r1-c1:0", "floor-1", AT)
            seen = signed(first, TABLE, locked=locked.result, lock=lock(1, f"{TABLE}-r1-c1:0"))  # floor-1's, at the table
            assert isinstance(await t.send(first, seen), schema.Ack)
            await t.send(lock(2, f"{TABLE}-r2-c1:0"))
            moved = await t.send(ops.PayLockedAward(f"{TABLE}-r2-c1:0", "floor-1", AT), seen)
            again = await t.send(first, seen)  # the same payment, a new sequence number
        assert isinstance(moved, schema.Refused) and moved.field == "approval" and "does not verify" in moved.message
        assert isinstance(again, schema.Refused) and "it was paid" in again.message
        m = rig.meter()
        assert len(m.history) == 1 and m.history[0].approved_by == "floor-1"
        assert list(m.locked) == [f"{TABLE}-r2-c1:0"]
        assert anomalies(rig, "unapproved payment") == 1 and anomalies(rig, "award refused") == 1
    finally:
        await rig.close()


async def test_an_approval_replayed_for_the_same_claim_id_locked_again_pays_nothing(tmp_path, broker, monkeypatch):
    """A real approval, kept (it is in the journals and was on the wire), replayed once the meter has forgotten the
    claim id it paid and someone with the table's credentials locked that claim id again at 100% of the meter:
    the approval names the lock by its number, which the meter never gives twice, so it does not verify. (The
    meter remembers RECENT_CLAIMS settled claim ids; three here, so that the churn is short.)"""
    import controller.meter.engine as engine
    import controller.meter.state as state

    monkeypatch.setattr(engine, "RECENT_CLAIMS", 3)
    monkeypatch.setattr(state, "RECENT_CLAIMS", 3)
    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        async with RawTable(broker) as t:
            await t.send(book(1, ((3, 100), (4, 100))))
            claim = f"{TABLE}-r1-c1:0"
            locked = await t.send(lock(1, claim))
            first = ops.PayLockedAward(claim, "floor-1", AT)
            seen = signed(first, TABLE, locked=locked.result, lock=lock(1, claim))
            assert isinstance(await t.send(first, seen), schema.Ack)
            for i in range(2, 6):  # locks given back need no approval: the claim id leaves the meter's memory
                await t.send(lock(1, f"{TABLE}-r1-c{i}:0", seat=4))
                await t.send(ops.ReleaseLockedAward(f"{TABLE}-r1-c{i}:0", "nobody", "churn", AT))
            assert claim not in rig.meter().settled_claims
            same_hand = await t.send(lock(1, claim))  # seat 3's royal flush was paid: never taken twice
            assert isinstance(same_hand, schema.Refused) and "is paid once" in same_hand.message, same_hand
            again = await t.send(lock(1, claim, seat=4))
            assert isinstance(again, schema.Ack) and again.result["lock"] != locked.result["lock"]
            replayed = await t.send(first, seen)
        assert isinstance(replayed, schema.Refused) and replayed.field == "approval", replayed
        assert "does not verify" in replayed.message
        m = rig.meter()
        assert len(m.history) == 1 and list(m.locked) == [claim]  # paid once; the new lock stays unpaid
    finally:
        await rig.close()


async def test_an_approval_replayed_at_an_authority_whose_journal_was_wiped_pays_nothing(tmp_path, broker):
    """The authority's journal wiped (or put back from a copy): its meter numbers its locks from 1 again, so the
    number alone would let an old approval pay the same claim id locked again. The lock's nonce, the authority's
    random value, is new: the approval does not verify."""
    import shutil

    from controller.config.model import AnchorConfig

    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        claim = f"{TABLE}-r1-c1:0"
        async with RawTable(broker) as t:
            await t.send(book(1))
            locked = await t.send(lock(1, claim))
            first = ops.PayLockedAward(claim, "floor-1", AT)
            seen = signed(first, TABLE, locked=locked.result, lock=lock(1, claim))
            assert isinstance(await t.send(first, seen), schema.Ack)
        await rig.stop_authority()
        state = rig.cfg.state_dir
        shutil.rmtree(state)
        shutil.rmtree(AnchorConfig().file_for(state).parent, ignore_errors=True)
        await rig.start_authority()
        async with RawTable(broker) as t:
            await t.send(book(1))
            again = await t.send(lock(1, claim))
            assert isinstance(again, schema.Ack) and again.result["lock"] == locked.result["lock"] == 1
            replayed = await t.send(first, seen)
        assert isinstance(replayed, schema.Refused) and "does not verify" in replayed.message, replayed
        assert not rig.meter().history and list(rig.meter().locked) == [claim]
    finally:
        await rig.close()


async def test_an_anchor_message_cannot_stop_the_authority_and_one_going_back_is_an_alert(tmp_path, broker):
    """With a table's credentials: an anchor whose sequence number has 300 digits (before: an error escaped the
    table's worker and stopped the authority, every linked table OFFLINE) is refused as malformed, and the
    authority answers the next operation. An anchor going back (an older anchor file sent again, with the older
    journal it matches) is an anomaly, journaled, and the reference the next report is judged from (one planted
    far ahead is kept aside: test_anchor.py::test_a_planted_far_ahead_anchor_masks_no_later_rollback)."""
    import json

    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        assert rig.authority is not None
        async with RawTable(broker) as t:
            def anchor(seq: int) -> bytes:
                return json.dumps({"v": schema.VERSION, "type": "anchor", "table": TABLE, "seq": seq, "hash": "ab" * 32,
                                   "at": "2026-12-01T00:00:00Z"}).encode()

            await t.mq.publish(TOPICS.up(TABLE), anchor(10**300))
            assert isinstance(await t.send(book(1)), schema.Ack)  # the authority runs on
            await t.mq.publish(TOPICS.up(TABLE), anchor(40))
            await until(lambda: TABLE in rig.authority.anchors, "the anchor kept")
            await t.mq.publish(TOPICS.up(TABLE), anchor(5))  # back: an older one sent again
            await until(lambda: anomalies(rig, "anchor went back") == 1, "an anomaly")
            assert rig.authority.anchors[TABLE].seq == 5
            assert rig.authority.held[TABLE].suspect is None
            assert isinstance(await t.send(book(2)), schema.Ack)
        assert not rig._tasks["authority"].done()  # never stopped
    finally:
        await rig.close()


async def test_a_table_cannot_pay_release_or_lock_another_tables_claims(tmp_path, broker):
    """Claim ids are no secret (every table hears them on the win topic). Table fcp-02 releasing cs-01's lock (so
    that cs-01's approved payment would be refused), or locking a claim id of cs-01's next claim on its own round,
    is refused, and counted against fcp-02."""
    rig = LinkRig(tmp_path, broker, (TABLE, "fcp-02"))
    try:
        await rig.start_authority()
        async with RawTable(broker) as a, RawTable(broker, "fcp-02") as b:
            await a.send(book(1))
            await b.send(ops.BookContributions("fcp-02-r1", "fcp-02", ((3, 100),), AT))
            claim = f"{TABLE}-r1-c1:0"
            locked = await a.send(lock(1, claim))
            assert isinstance(locked, schema.Ack)
            released = await b.send(ops.ReleaseLockedAward(claim, "nobody", "mine now", AT))
            assert isinstance(released, schema.Refused) and "is a lock of table cs-01" in released.message
            stolen = await b.send(ops.LockPercentAward("fcp-02-r1", "fcp-02", 3, "royal-flush", "100% of meter",
                                                       Fraction(100), AT, f"{TABLE}-r1-c2:0"))
            assert isinstance(stolen, schema.Refused) and "is not a claim of round fcp-02-r1" in stolen.message
            pay = ops.PayLockedAward(claim, "floor-1", AT)
            assert isinstance(await a.send(pay, signed(pay, TABLE, locked=locked.result, lock=lock(1, claim))), schema.Ack)
        assert anomalies(rig, "award refused", "fcp-02") == 2 and anomalies(rig, "award refused") == 0
    finally:
        await rig.close()


async def test_an_operation_number_taken_by_another_operation_refuses_the_tables_own(tmp_path, broker):
    """Someone with the table's credentials sends an operation under the table's next number before the table does
    (the broker pushes one of the two clients off for a moment). Before: the table's own, sent under the same
    number, was answered with the other's result, and the table took it for its own (a jackpot shown paid that was
    never paid). Now the table's is refused, naming the number, and it is an alert; the same operation sent again is
    answered as before."""
    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        async with RawTable(broker) as t:
            assert isinstance(await t.send(book(1)), schema.Ack)
            t.seq -= 1
            t.inbox.clear()  # the first answer to that number is in the inbox
            again = await t.send(book(1))  # the same operation, resent under its number: its answer
            assert isinstance(again, schema.Ack)
            t.seq -= 1
            t.inbox.clear()  # the first answer to that number is in the inbox
            taken = await t.send(book(2))  # another operation under the number already used
            assert isinstance(taken, schema.Refused) and taken.field == "seq", taken
            assert "is another operation in the authority's journal" in taken.message
            assert "r2" not in rig.meter().open_rounds  # not applied
            refused = await t.send(lock(9, f"{TABLE}-r9-c1:0"))  # a refusal, journaled with what it refused
            assert isinstance(refused, schema.Refused)
            t.seq -= 1
            t.inbox.clear()  # the first answer to that number is in the inbox
            assert isinstance(await t.send(lock(9, f"{TABLE}-r9-c1:0")), schema.Refused)  # the same: same answer
            t.seq -= 1
            t.inbox.clear()  # the first answer to that number is in the inbox
            other = await t.send(book(3))
            assert isinstance(other, schema.Refused) and other.field == "seq"
        assert anomalies(rig, "sequence taken") == 2
    finally:
        await rig.close()


async def test_hits_beyond_the_odds_and_awards_on_rounds_never_booked_are_alerts(tmp_path, broker):
    """Per table: more than three locks of a percentage of the meter within its last 10,000 wagers (about 1 in
    50,000 for an honest table), and an award on a round it never booked, each counted as an anomaly."""
    rig = LinkRig(tmp_path, broker, (TABLE,))
    try:
        await rig.start_authority()
        async with RawTable(broker) as t:
            unbooked = await t.send(lock(99, f"{TABLE}-r99-c1:0"))
            assert isinstance(unbooked, schema.Refused)
            assert anomalies(rig, "award refused") == 1
            for n in range(1, 5):
                await t.send(book(n))
                assert isinstance(await t.send(lock(n, f"{TABLE}-r{n}-c1:0")), schema.Ack)
                assert anomalies(rig, "hits beyond the odds") == (1 if n == 4 else 0), n
        hits = rig.authority.metrics.registry.get_sample_value("progressive_link_hits_total", {"table": TABLE})
        assert hits == 4
    finally:
        await rig.close()


# --- the approvers file ----------------------------------------------------------------------------------------


def _authority_file(tmp_path: Path, approvers: str | None, mode: int = 0o600) -> Path:
    if approvers is not None:
        (tmp_path / "approvers.toml").write_text(approvers, encoding="utf-8")
        (tmp_path / "approvers.toml").chmod(mode)
    path = tmp_path / "link.toml"
    path.write_text('authority = "link-1"\nstate_dir = "state"\ntables = ["cs-01"]\napprovers_file = "approvers.toml"\n'
                    f'signing_key_file = "{signing_key_file(tmp_path)}"\n'
                    '[meters.fchb-link]\nreset = "10000.00"\nrate = "0.15"\nwager_sizes = ["1.00"]\n'
                    '[mqtt]\nhost = "127.0.0.1"\ntls = false\n', encoding="utf-8")
    return path


def test_progressivectl_approval_key_makes_the_entry_the_authority_takes(tmp_path):
    out = subprocess.run([str(CTL), "approval-key", "J. Smith"], input="s3cret of J\n", capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.startswith('[[approvers]]\nname = "J. Smith"\napproval_key = "approval-key$')
    assert "s3cret" not in out
    cfg = load_authority_config(_authority_file(tmp_path, out))
    assert cfg.approvers == {"J. Smith": approval.approval_key("J. Smith", "s3cret of J")}
    bad = subprocess.run([str(CTL), "approval-key", " padded"], input="x\n", capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode != 0 and "name" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_an_approvers_file_others_can_read_is_refused(tmp_path, mode):
    path = _authority_file(tmp_path, approvers_file(tmp_path / "made").read_text(), mode)
    [p] = check_authority_config(path)
    assert p.path == "approvers_file" and f"(mode {mode:04o})" in p.message and "approval keys" in p.message
    assert p.hint.startswith("chmod 0600")


@pytest.mark.parametrize("text, found", [
    ("", "must list at least one approver"),
    ('[[approvers]]\nname = "floor-1"\napproval_key = "scrypt$abc"\n', "approvers[0].approval_key: must be the line"),
    ('[[approvers]]\nname = "floor-1"\napproval_key = "approval-key$abcd"\n', "2 bytes, not 32"),
    ('[[approvers]]\nname = "floor-1"\napproval_key = "approval-key$zz"\n', "hex digits are damaged"),
    ('[[approvers]]\nname = " x"\napproval_key = "approval-key$' + "00" * 32 + '"\n', "approvers[0].name"),
    ('[[approvers]]\nname = "a"\napproval_key = "approval-key$' + "00" * 32 + '"\n'
     '[[approvers]]\nname = "a"\napproval_key = "approval-key$' + "11" * 32 + '"\n', "'a' is listed twice"),
    ('[[approvers]]\nname = "a"\nsecret = "x"\napproval_key = "approval-key$' + "00" * 32 + '"\n',
     "approvers[0].secret: unknown key"),
    ('approvers = 3\n', "must list at least one approver"),
    ('[[approvers]]\nname = "a"\n[oops\n', "malformed TOML"),
])
def test_every_problem_of_an_approvers_file_is_named(tmp_path, text, found):
    problems = check_authority_config(_authority_file(tmp_path, text))
    assert [p.path for p in problems] == ["approvers_file"], problems
    assert found in problems[0].message, problems[0]
    assert "approval-key$" + "00" * 32 not in problems[0].message  # a key is never repeated


def test_the_approvers_file_is_required_and_must_exist(tmp_path):
    missing = _authority_file(tmp_path, None)
    [p] = check_authority_config(missing)
    assert p.path == "approvers_file" and "no such file" in p.message
    missing.write_text(missing.read_text().replace('approvers_file = "approvers.toml"\n', ""), encoding="utf-8")
    [p] = check_authority_config(missing)
    assert p.path == "approvers_file" and p.message == "is required" and "approval-key" in p.hint
    with pytest.raises(ConfigError):
        load_authority_config(missing)



def test_a_table_whose_name_begins_another_tables_cannot_move_its_rounds():
    """Round ids are `<table>-r<n>` exactly: table `cs` cannot void, close, book or lock on `cs-rail`'s rounds
    (before, a mere prefix passed), nor lock a claim id that is not its round's."""
    from controller.authority.rules import foreign as _foreign

    def op(kind: str, **body) -> schema.Op:
        return schema.Op("cs", 1, kind, METER, body)

    for kind in ("void-round", "close-round", "book-contributions"):
        assert _foreign(op(kind, round_id="cs-rail-r3"), {}) == ("body.round_id", "'cs-rail-r3' is not a round of table cs")
        assert _foreign(op(kind, round_id="cs-r3"), {}) is None
    assert _foreign(op("lock-percent-award", round_id="cs-r3", claim="cs-r3-c1:0"), {}) is None
    for claim in ("cs-r3-c1", "cs-r31-c1:0", "cs-r3-c1:0-x"):
        assert _foreign(op("lock-percent-award", round_id="cs-r3", claim=claim), {})[0] == "body.claim", claim

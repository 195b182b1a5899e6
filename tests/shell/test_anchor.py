"""The journal's anchor against the three ways to take money back by copying files on a table box: an older copy
of the state directory put back, the WAL deleted after a payout, and the journal written again with a changed
field (a sound chain all the same). Each run for real against `progressived` in a child process on the rig: the
daemon refuses to start (exit 1, one line saying what it found), where before each of them started and passed the
audit. And the anchor file itself: signed with the journal key, it cannot be made again without it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

from controller.ledger import Ledger, journal, software_digest
from controller.ledger.anchor import Anchor, AnchorError, check_anchor, load_key, read_anchor, write_anchor
from controller.ledger.chain import Entry
from controller.round.journal import JournalReducer
from hil.rig import Rig

from rigtable import lit, until
from tableproc import RIG, Tables

SUPERVISOR, SECRET = "floor-1", "s3cret-floor"
AUTH = {"supervisor": SUPERVISOR, "secret": SECRET}
TRIPS = ["2S", "2H", "2D", "9C", "KS"]  # the Progressive Payout Wager: 9 for 1, validated by a floorperson


@pytest.fixture
def tables():
    made = Tables()
    yield made
    made.close()


async def round_with_payout(t, rig, n: int, *, pay: bool, settle: bool = True) -> None:
    """Round n: a $1 wager at seat 3, locked, (a three of a kind claimed and approved), (settled)."""
    await rig.place_chip(3, "progressive", 100)
    await until(lambda: "progressive" in lit(rig, 3), "seat 3 acknowledged")
    await rig.press_lockout()
    await t.wait_round(lambda i: i["phase"] == "dealing", "booked")
    await rig.remove_chip(3, "progressive")
    if pay:
        got = await t.control("claim", seat=3, cards=TRIPS)
        await t.control("approve", claim_id=got["claim_id"], **AUTH)
    if settle:
        await t.control("settle", round_id=f"CS-07-r{n}")


async def anchored(t) -> dict:
    """Until the daemon has anchored its head (it does after a payout, off the event loop): asked over its
    control socket (the daemon raises no event a test could wait on)."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        s = await t.control("status")
        if s["anchor"] and s["anchor"]["seq"] == s["ledger_head_seq"]:
            return s
        assert asyncio.get_running_loop().time() < deadline, f"not anchored: {s}"
        await asyncio.sleep(0.05)


def forge(state_dir: Path, forged: Path):
    """Every operation of the journal in `state_dir` submitted again, in order, to a new journal in `forged`, each
    payout's approved_by changed: a sound chain of its own. Its head."""
    conn = journal.connect(state_dir / journal.DB_NAME, "ro")
    try:
        entries = [Entry(text) for _seq, _key, text, _hash in journal.rows(conn, 1)]
    finally:
        conn.close()
    with Ledger.open(forged, JournalReducer(), software_digest=software_digest()) as led:
        for e in entries:
            if e.key.startswith("ledger:"):
                continue  # the ledger's own entries (genesis, self-checks, checkpoints) it makes itself
            body = dict(e.body)
            if "approved_by" in body:
                body["approved_by"] = "Nobody Approved This"
            led.submit(e.kind, body, e.key)
        return led.head


async def refused(t) -> str:
    """Start the daemon and expect it to refuse: exit status 1 and the line it said why with (a metrics port taken
    meanwhile by another test's daemon is chosen again)."""
    for _ in range(3):
        t.launch()
        code = await t.wait_exit(30)
        if not t.port_was_taken():
            break
    err = t.stderr_path.read_text().strip().splitlines()
    assert code == 1 and err, (code, t.stderr_tail(), t.log_tail())
    return err[-1]


async def test_an_older_copy_of_the_state_directory_is_refused(tmp_path, tables):
    async with Rig.from_file(RIG) as rig:
        t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET})
        await t.start()
        await round_with_payout(t, rig, 1, pay=False)
        await t.stop()
        shutil.copytree(t.state_dir, tmp_path / "copy")  # the box's files, copied by someone who can
        await t.start()
        await round_with_payout(t, rig, 2, pay=True)
        await t.stop()
        shutil.rmtree(t.state_dir)
        shutil.copytree(tmp_path / "copy", t.state_dir)  # put back: the payout is gone from the journal
        line = await refused(t)
        again = await refused(t)  # and at every start after it: a refused journal is never anchored at its close
    assert "rolled back" in line and "anchor" in line, line
    assert "rolled back" in again and again.split("but its anchor")[1] == line.split("but its anchor")[1], again


async def test_the_wal_deleted_after_a_payout_is_refused(tmp_path, tables):
    async with Rig.from_file(RIG) as rig:
        t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET})
        await t.start()
        await round_with_payout(t, rig, 1, pay=True, settle=False)
        status = await anchored(t)  # anchored after the payout
        assert t.kill()  # the last commits are in the WAL only
        wal = t.state_dir / (journal.DB_NAME + "-wal")
        assert wal.exists() and wal.stat().st_size > 0
        wal.unlink()
        line = await refused(t)
    assert "rolled back" in line and f"entry {status['ledger_head_seq']}" in line, line


async def test_a_journal_written_again_with_a_changed_field_is_refused(tmp_path, tables):
    """Every operation submitted again, in order, to a new journal, each payout's approved_by changed: the chain
    of the new journal is sound (the audit passes it), but it is not the journal that was anchored."""
    async with Rig.from_file(RIG) as rig:
        t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET})
        await t.start()
        await round_with_payout(t, rig, 1, pay=True)
        await t.stop()
        # the daemon's process froze its start-up heap once it was ready (controller/app/heap.py)
        frozen = [e for e in t.log_events() if e["event"] == "start-up heap frozen"]
        assert len(frozen) == 1 and frozen[0]["objects"] > 10_000, frozen
        forged = tmp_path / "forged"
        forge(t.state_dir, forged)
        audit = await t.ctl("audit", "verify", "--state", str(forged), "--json")
        assert audit.returncode == 0 and json.loads(audit.stdout)["ok"] is True  # a sound chain
        true_head = json.loads((await t.ctl("audit", "verify", "--state", str(t.state_dir), "--json")).stdout)
        expected = f"{true_head['head_seq']}:{true_head['head_hash']}"  # as the log, syslog or authority has it
        checked = await t.ctl("audit", "verify", "--state", str(forged), "--expect-head", expected)
        assert checked.returncode == 1 and "DAMAGED: --expect-head: " in checked.stderr, checked.stderr
        assert (await t.ctl("audit", "verify", "--state", str(t.state_dir), "--expect-head", expected)).returncode == 0
        for bad in ("12:zz", f"{'9' * 23}:{'0' * 64}", f"{'9' * 5000}:{'0' * 64}", f"\u0661\u0662:{'0' * 64}"):
            malformed = await t.ctl("audit", "verify", "--state", str(forged), "--expect-head", bad)
            assert malformed.returncode == 2 and malformed.stderr.startswith("progressivectl: --expect-head: "), \
                malformed.stderr  # one line, never an internal error
        shutil.rmtree(t.state_dir)
        shutil.copytree(forged, t.state_dir)
        line = await refused(t)
    assert "was rewritten" in line or "rolled back" in line, line


async def test_with_the_journal_key_a_rewrite_with_an_anchor_made_again_is_refused(tmp_path, tables):
    """The rewrite of the test above, by someone who also writes the anchor file of the new journal (they can
    copy files on the box, so they can write that one too): without the journal key (`[anchor] key_file`, readable
    by the daemon's user only) the anchor they make is not signed, and the daemon refuses it. The anchor also
    went to the remote syslog of `[anchor] syslog`, where a box's files cannot reach it."""
    import socket

    key_file = tmp_path / "journal.key"
    key_file.write_bytes(os.urandom(32))
    key_file.chmod(0o400)
    collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    collector.bind(("127.0.0.1", 0))
    collector.settimeout(10)

    def keyed(doc: dict) -> dict:
        doc["anchor"] = {"key_file": str(key_file), "syslog": f"127.0.0.1:{collector.getsockname()[1]}"}
        return doc

    try:
        async with Rig.from_file(RIG) as rig:
            t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET}, adjust=keyed)
            await t.start()
            await round_with_payout(t, rig, 1, pay=True, settle=False)
            status = await anchored(t)
            await t.stop()  # anchored again at close
            anchor_file = Path(status["anchor"]["file"])
            last = json.loads(anchor_file.read_text())
            assert status["anchor"]["mac"] and last["mac"] and last["seq"] > status["anchor"]["seq"]
            lines: list[str] = []
            while not any(f"seq={last['seq']} " in x for x in lines):
                lines.append(collector.recv(4096).decode())

            forged = tmp_path / "forged"
            head = forge(t.state_dir, forged)
            write_anchor(anchor_file, Anchor.of(head, None))  # the anchor of the forged journal, unkeyed
            guessed = Anchor.of(head, os.urandom(32))  # or keyed with a key of their own
            shutil.rmtree(t.state_dir)
            shutil.copytree(forged, t.state_dir)
            line = await refused(t)
            assert "not signed with the journal key" in line, line
            write_anchor(anchor_file, guessed)
            line = await refused(t)
            assert "not signed with the journal key" in line, line
    finally:
        collector.close()
    # what the remote syslog holds names the true head, which the forged journal does not hold
    sent = next(x for x in lines if f"seq={last['seq']} " in x)
    assert f"hash={last['hash']}" in sent and f"mac={last['mac']}" in sent and "table=CS-07" in sent, sent
    assert any(f"seq={status['anchor']['seq']} hash={status['anchor']['hash']}" in x for x in lines), lines


async def test_the_anchor_deleted_is_refused_until_a_person_writes_it_again_from_the_anchor_off_the_box(tmp_path, tables):
    """Deleting the anchor is no way past it: a journal with entries and no anchor is refused at start. A person
    compares the journal with the last anchor sent off the box and writes its anchor again (`audit anchor
    --expect-head`); an anchor the journal does not hold writes nothing."""
    async with Rig.from_file(RIG) as rig:
        t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET})
        await t.start()
        await round_with_payout(t, rig, 1, pay=True, settle=False)
        status = await anchored(t)  # as the log, the syslog or the link authority has it
        await t.stop()
        anchor_file = Path(status["anchor"]["file"])
        off_box = f"{status['anchor']['seq']}:{status['anchor']['hash']}"
        anchor_file.unlink()
        line = await refused(t)
        assert "its anchor" in line and "is missing" in line and "progressivectl audit anchor" in line, line

        wrong = await t.ctl("audit", "anchor", "--state", str(t.state_dir), "--anchor", str(anchor_file),
                            "--expect-head", f"{status['anchor']['seq'] + 1000}:{'0' * 64}")
        assert wrong.returncode == 1 and "no anchor written" in wrong.stderr and not anchor_file.exists(), wrong
        done = await t.ctl("audit", "anchor", "--state", str(t.state_dir), "--anchor", str(anchor_file),
                           "--expect-head", off_box)
        assert done.returncode == 0 and "anchored entry" in done.stdout, done.stderr
        await t.start()  # the journal holds its anchor again
        assert (await t.control("status"))["ledger_head_seq"] >= status["anchor"]["seq"]
        await t.stop()


# --- the anchor file ---------------------------------------------------------------------------------------------


def _journal(tmp_path: Path) -> Ledger:
    return Ledger.open(tmp_path / "state", JournalReducer(), software_digest=software_digest())


def test_an_anchor_signed_with_the_key_cannot_be_made_again_without_it(tmp_path):
    key_file = tmp_path / "journal.key"
    key_file.write_bytes(b"k" * 40)
    key_file.chmod(0o400)
    key = load_key(key_file)
    path = tmp_path / "anchor"
    with _journal(tmp_path) as led:
        write_anchor(path, Anchor.of(led.head, key))
        good = read_anchor(path, key)
        assert good is not None and check_anchor(led.db_path, good) is None
        forged = Anchor.of(led.head, None)  # someone without the key writes an anchor of their own
        write_anchor(path, forged)
        with pytest.raises(AnchorError, match="not signed with the journal key"):
            read_anchor(path, key)
        write_anchor(path, Anchor.of(led.head, b"another key, just as long as it...."))
        with pytest.raises(AnchorError, match="not signed with the journal key"):
            read_anchor(path, key)


def test_a_journal_key_others_can_read_or_too_short_is_refused(tmp_path):
    key_file = tmp_path / "journal.key"
    key_file.write_bytes(b"k" * 40)
    key_file.chmod(0o440)
    with pytest.raises(AnchorError, match="can be read by other users"):
        load_key(key_file)
    key_file.chmod(0o400)
    key_file.write_bytes(b"short")
    with pytest.raises(AnchorError, match="at least 32 bytes"):
        load_key(key_file)
    with pytest.raises(AnchorError, match="no such key file"):
        load_key(tmp_path / "missing")


def test_an_anchor_file_that_is_not_one_is_refused_not_taken(tmp_path):
    (tmp_path / "anchor").write_text("{}")
    with pytest.raises(AnchorError, match="not an anchor"):
        read_anchor(tmp_path / "anchor", None)
    good = {"seq": 5, "hash": "ab" * 32, "at": "2026-12-01T00:00:00Z", "mac": "cd" * 32}
    for bad in ({"seq": 5.7}, {"seq": 10**30}, {"seq": True}, {"hash": "xyz"}, {"mac": "\u00e9" * 64},
                {"mac": "CD" * 32}, {"at": 5}):
        (tmp_path / "anchor").write_text(json.dumps({**good, **bad}))
        with pytest.raises(AnchorError, match="not an anchor"):  # one line, never a traceback
            read_anchor(tmp_path / "anchor", b"k" * 32)
    (tmp_path / "fifo").mkdir()
    with pytest.raises(AnchorError, match="not a regular file"):
        read_anchor(tmp_path / "fifo", None)
    assert read_anchor(tmp_path / "none", None) is None


async def test_each_anchor_goes_to_the_remote_syslog(tmp_path):
    """Off the box: one RFC 5424 line a new anchor, over UDP, to a real socket standing for the collector."""
    import socket

    from controller.app.metrics import Metrics
    from controller.service.anchoring import Anchoring

    collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    collector.bind(("127.0.0.1", 0))
    collector.settimeout(5)
    try:
        with _journal(tmp_path) as led:
            key_file = tmp_path / "journal.key"
            key_file.write_bytes(b"k" * 32)
            key_file.chmod(0o400)
            a = Anchoring(led, tmp_path / "anchor", key_file, table="CS-07", metrics=Metrics("CS-07").anchors,
                          syslog=collector.getsockname())
            a.check()  # no anchor yet: the journal is new
            await a.anchor("test")
            line = collector.recv(4096).decode()
            a.close()
    finally:
        collector.close()
    assert line.startswith("<133>1 ") and " progressived " in line and " anchor - " in line
    assert f"table=CS-07 seq={a.last.seq} hash={a.last.hash}" in line and f"mac={a.last.mac}" in line


async def test_a_syslog_name_is_resolved_off_the_event_loop_and_one_that_does_not_resolve_is_an_alert(tmp_path):
    """The name of the remote syslog is looked up in check() (a thread at start) and every minute while it does not
    resolve, never when an anchor is sent from the event loop: a dead resolver cannot stall the table."""
    import socket

    from structlog.testing import capture_logs

    from controller.app.metrics import Metrics
    from controller.service.anchoring import Anchoring

    metrics = Metrics("CS-07")
    lookups = []
    real = socket.getaddrinfo

    def getaddrinfo(*args, **kw):
        lookups.append(args[0])
        if args[0] == "syslog.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(*args, **kw)

    with _journal(tmp_path) as led, capture_logs() as logs:
        socket.getaddrinfo, saved = getaddrinfo, socket.getaddrinfo
        try:
            a = Anchoring(led, tmp_path / "anchor", None, table="CS-07", metrics=metrics.anchors,
                          syslog=("syslog.invalid", 514))
            await asyncio.to_thread(a.check)
            assert lookups == ["syslog.invalid"]
            await a.anchor("test")  # written, not sent; no lookup on the loop
            assert lookups == ["syslog.invalid"] and a.last is not None
        finally:
            socket.getaddrinfo = saved
            a.close()
    assert [e["event"] for e in logs if e["log_level"] == "error"] == [
        "the remote syslog's name does not resolve: anchors are not sent to it"]
    assert metrics.registry.get_sample_value("progressive_ledger_anchor_problems_total", {"problem": "not sent"}) == 1


async def test_an_anchor_at_the_authority_not_signed_with_the_journal_key_is_reported_as_planted(tmp_path):
    """The authority sends back the last anchor of this journal it received; one planted there with the table's MQTT
    credentials (far ahead, to raise a false rollback at every start) is not signed with the journal key: reported
    as planted, not as a rollback. A true one, signed, is compared."""
    from structlog.testing import capture_logs

    from controller.app.metrics import Metrics
    from controller.service.anchoring import Anchoring

    metrics = Metrics("CS-07")
    with _journal(tmp_path) as led, capture_logs() as logs:
        a = Anchoring(led, tmp_path / "anchor", _key(tmp_path / "journal.key"), table="CS-07", metrics=metrics.anchors)
        a.check()
        await a.anchor("test")
        await a.compare(Anchor(10**18, "ab" * 32, "2026-12-01T00:00:00Z", None))  # planted
        await a.compare(Anchor(10**18, "ab" * 32, "2026-12-01T00:00:00Z", "cd" * 32))  # planted, a made-up MAC
        await a.compare(a.last)  # the true one
        a.close()
    sample = metrics.registry.get_sample_value
    assert sample("progressive_ledger_anchor_problems_total", {"problem": "forged"}) == 2
    assert sample("progressive_ledger_anchor_problems_total", {"problem": "authority"}) is None
    assert sum("not signed with the journal key" in e["event"] for e in logs) == 2


# --- [anchor] in the table's configuration ---------------------------------------------------------------------


def _key(path: Path, size: int = 32, mode: int = 0o400) -> Path:
    path.write_bytes(os.urandom(size))
    path.chmod(mode)
    return path


def test_a_random_key_ending_in_a_newline_byte_is_kept_whole(tmp_path):
    """`head -c 32 /dev/urandom` ends in 0x0a once in 256 keys: that key is 32 bytes, not a line of 31."""
    from controller.ledger.anchor import load_key

    raw = os.urandom(31) + b"\n"
    path = tmp_path / "journal.key"
    path.write_bytes(raw)
    path.chmod(0o400)
    assert load_key(path) == raw
    (tmp_path / "text.key").write_bytes(b"k" * 40 + b"\n")
    (tmp_path / "text.key").chmod(0o400)
    assert load_key(tmp_path / "text.key") == b"k" * 40  # a line of text: its newline is not part of the key


def test_the_anchor_section_is_read_with_its_defaults(tmp_path):
    from test_config import base, write

    from controller.config import load_config

    cfg = load_config(write(tmp_path, base()))
    assert cfg.anchor.file_for(cfg.state_dir) == cfg.state_dir.parent / f"{cfg.state_dir.name}-anchor" / "anchor"
    assert cfg.anchor.key_file is None and cfg.anchor.syslog is None
    doc = base()
    doc["anchor"] = {"file": "anchors/table.anchor", "key_file": str(_key(tmp_path / "journal.key")),
                     "syslog": "logs.casino.example:514"}
    cfg = load_config(write(tmp_path, doc))
    assert cfg.anchor.file == tmp_path / "anchors" / "table.anchor"
    assert cfg.anchor.key_file == tmp_path / "journal.key" and cfg.anchor.syslog == ("logs.casino.example", 514)


@pytest.mark.parametrize("change, path, found", [
    ({"file": "state/anchor"}, "anchor.file", "is inside state_dir"),
    ({"key_file": "missing.key"}, "anchor.key_file", "no such file"),
    ({"key_file": "group.key"}, "anchor.key_file", "can be read by its group (mode 0440)"),
    ({"key_file": "short.key"}, "anchor.key_file", "the journal key has at least 32"),
    ({"key_file": "big.key"}, "anchor.key_file", "more than the 4 KiB"),
    ({"key_file": "state/in.key"}, "anchor.key_file", "inside state_dir"),
    ({"syslog": "nowhere"}, "anchor.syslog", "is not host:port"),
    ({"syslog": "bad host!:514"}, "anchor.syslog", "is not host:port"),
    ({"keyfile": "x"}, "anchor.keyfile", "unknown key"),
])
def test_every_problem_of_the_anchor_section_is_named(tmp_path, change, path, found):
    from test_config import base, one, problems

    (tmp_path / "state").mkdir()
    _key(tmp_path / "group.key", mode=0o440)
    _key(tmp_path / "short.key", size=16)
    _key(tmp_path / "big.key", size=5000)
    _key(tmp_path / "state" / "in.key")
    doc = base()
    doc["state_dir"] = "state"
    doc["anchor"] = change
    p = one(problems(tmp_path, doc), path)
    assert found in p.message, p


# --- the link authority's journal ------------------------------------------------------------------------------


async def test_the_link_authoritys_journal_is_anchored_too(tmp_path):
    """The authority's journal holds every table's linked money: an older copy of it put back is refused at its
    start as a table's is (AnchorError: progressived --role link exits 1)."""
    from controller.ledger.anchor import AnchorError
    from controller.meter import ops

    from broker import require_mosquitto, start_broker
    from linkrig import AT, LinkRig

    require_mosquitto()
    broker = start_broker(tmp_path / "mosquitto", ("cs-01", "authority"))
    rig = LinkRig(tmp_path, broker, ("cs-01",))
    try:
        await rig.start_authority()
        link = await rig.start_table("cs-01")
        await until(lambda: link.alive, "the table hears the authority")
        await link.send(ops.BookContributions("cs-01-r1", "cs-01", ((1, 100),), AT), "fchb", "cs-01-r1:book")
        await rig.all_answered()
        await rig.stop_authority()
        shutil.copytree(rig.cfg.state_dir, tmp_path / "old")
        await rig.start_authority()
        await link.send(ops.BookContributions("cs-01-r2", "cs-01", ((1, 500),), AT), "fchb", "cs-01-r2:book")
        await rig.all_answered()
        await rig.stop_authority()
        anchor = json.loads(rig.cfg.anchor.file_for(rig.cfg.state_dir).read_text())
        shutil.rmtree(rig.cfg.state_dir)
        shutil.copytree(tmp_path / "old", rig.cfg.state_dir)
        from prometheus_client import CollectorRegistry

        from controller.authority.authority import LinkAuthority

        a = LinkAuthority(rig.cfg, settings=broker.settings("authority"), registry=CollectorRegistry())
        with pytest.raises(AnchorError, match=f"its anchor of .* is at entry {anchor['seq']}: it was rolled back"):
            await a.run()
        assert a.ledger is None  # closed again
    finally:
        await rig.close()
        broker.stop()


# --- nothing off the box (issue 24, finding 5) ------------------------------------------------------------------


async def metrics_text(url: str) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(10)) as r:
        return await r.text()


async def test_with_nothing_off_the_box_a_rollback_of_state_and_anchor_together_is_said_plainly(tmp_path, tables):
    """The state directory and the anchor directory put back together, on a table with no linked meter and no remote
    syslog: the journal holds its anchor, and the box alone cannot tell (by design). Before, nothing said so; now
    check-config warns (exit 0), the daemon warns at every start and progressive_ledger_anchor_off_box is 0. With
    `[anchor] syslog` none of them: the syslog holds the head the copy lacks."""
    import socket

    off_box = "no anchor off the box: a rollback of the state directory and the anchor directory together"
    async with Rig.from_file(RIG) as rig:
        t = tables.new(rig, tmp_path / "table", supervisors={SUPERVISOR: SECRET})
        t.config_path.chmod(0o600)  # the supervisors' hashes inline: no warning of their own
        checked = await t.ctl("check-config", str(t.config_path))
        assert checked.returncode == 0 and checked.stderr.splitlines() == [
            f"{t.config_path}: warning: anchor.syslog: {off_box} cannot be noticed (this table has no linked meter, "
            "so its journal is anchored off the box only by a remote syslog) (hint: [anchor] syslog = "
            '"logs.casino.example:514", a collector this box cannot write back to (docs/security.md))'], checked
        await t.start()
        await round_with_payout(t, rig, 1, pay=False)
        status = await t.control("status")
        await t.stop()  # anchored at its close
        anchor_dir = Path(status["anchor"]["file"]).parent
        shutil.copytree(t.state_dir, tmp_path / "copy" / "state")
        shutil.copytree(anchor_dir, tmp_path / "copy" / "anchor")  # both, by someone who can copy files
        await t.start()
        await round_with_payout(t, rig, 2, pay=True, settle=False)
        paid = (await anchored(t))["ledger_head_seq"]
        await t.stop()
        for d, saved in ((t.state_dir, "state"), (anchor_dir, "anchor")):
            shutil.rmtree(d)
            shutil.copytree(tmp_path / "copy" / saved, d)
        await t.start()  # the payout is gone, and nothing on the box can tell
        assert (await t.control("status"))["ledger_head_seq"] < paid
        warned = [e for e in t.log_events(this_start=True) if e["event"].startswith(off_box)]
        assert len(warned) == 1 and warned[0]["level"] == "warning" and warned[0]["path"] == "anchor.syslog", warned
        assert "\nprogressive_ledger_anchor_off_box 0.0\n" in await metrics_text(t.metrics_url)
        await t.stop()

        collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        collector.bind(("127.0.0.1", 0))
        try:
            def with_syslog(doc: dict) -> dict:
                doc["anchor"] = {"syslog": f"127.0.0.1:{collector.getsockname()[1]}"}
                return doc

            s = tables.new(rig, tmp_path / "syslogged", supervisors={SUPERVISOR: SECRET}, adjust=with_syslog)
            s.config_path.chmod(0o600)
            checked = await s.ctl("check-config", str(s.config_path))
            assert checked.returncode == 0 and checked.stderr == "", checked.stderr
            await s.start()
            assert "\nprogressive_ledger_anchor_off_box 1.0\n" in await metrics_text(s.metrics_url)
            assert not [e for e in s.log_events() if e["event"].startswith(off_box)]
            await s.stop()
        finally:
            collector.close()


# --- anchors planted at the link authority (issue 24, finding 6) ------------------------------------------------


def _report(table: str, head):
    from controller.linkproto.schema import JournalAnchor

    return JournalAnchor(table, head.seq, head.hash, "2026-12-01T00:00:00.000000+00:00")


def _grow(led: Ledger, rounds: range) -> None:
    """Rounds booked in a table's journal (a meter of its own): its head moves on."""
    from controller.meter import BookContributions, params_from_dict
    from controller.meter.journal import define_meter_body, op_body

    from linkrig import AT

    if "main" not in led.state:
        params = params_from_dict({"meter_id": "main", "reset": "10000.00", "rate": "0.15",
                                   "wager_sizes": ["1.00"]}, "params")
        led.submit("define-meter", define_meter_body(params, "slot-tech", AT), key="define:main")
    for n in rounds:
        led.submit("book-contributions", op_body("main", BookContributions(f"cs-01-r{n}", "cs-01", ((1, 100),), AT)),
                   key=f"cs-01-r{n}:book")


async def test_a_planted_far_ahead_anchor_masks_no_later_rollback(tmp_path):
    """With the table's MQTT password, one anchor 10^15 entries ahead. Before, it became the anchor the authority kept:
    every true anchor after it was dropped unjournaled as `anchor went back`, so the table's real rollback afterwards
    looked like every report before it. Now it is kept aside (`anchor far ahead`, journaled as `suspect`), the true
    reports go on being journaled and accepted, the rollback is the one `anchor went back`, and a supervisor clears
    the planted one with progressivectl clear-anchor, journaled with their name. A real authority process, a real
    Mosquitto, the table's real journal and link."""
    import aiohttp

    from controller.ledger.reader import JournalReader
    from controller.link.client import TableLink
    from controller.link.mqtt import MqttLink
    from controller.linkproto.schema import VERSION, Topics

    from broker import require_mosquitto, start_broker
    from linkrig import METER, PREFIX, AuthorityProcess, authority_doc, mqtt_config, supervisors_file

    require_mosquitto()
    broker = start_broker(tmp_path / "mosquitto", ("cs-01", "authority"))
    doc = authority_doc(tmp_path, broker, ("cs-01",))
    doc["supervisors_file"] = str(supervisors_file(tmp_path / "sup", {SUPERVISOR: SECRET}))
    authority = AuthorityProcess(tmp_path / "authority", doc)
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    running: dict = {}

    async def start_link() -> None:
        link = TableLink("cs-01", mqtt_config("cs-01"), {"fchb": METER}, tmp_path / "cs-01" / "link",
                         settings=broker.settings("cs-01"))
        await asyncio.to_thread(link.open)
        running.update(link=link, task=asyncio.create_task(link.run()))
        await until(lambda: link.alive, "the table hears the authority")

    async def stop_link() -> None:
        running["task"].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running.pop("task")
        running.pop("link").close()

    async def table_entry() -> dict:
        return next(t for t in (await authority.control("status"))["tables"] if t["table"] == "cs-01")

    async def reported(a) -> dict:
        """Sent until the authority holds it as the reference (one report a second is journaled)."""
        async with asyncio.timeout(20):
            while True:
                running["link"].send_anchor(a)
                entry = await table_entry()
                if entry["anchor"] and entry["anchor"]["seq"] == a.seq:
                    return entry
                await asyncio.sleep(0.2)

    async def anomaly(kind: str) -> float:
        async with aiohttp.ClientSession() as http, http.get(authority.metrics_url) as r:
            text = await r.text()
        line = f'progressive_link_anomalies_total{{anomaly="{kind}",table="cs-01"}} '
        return next((float(x[len(line):]) for x in text.splitlines() if x.startswith(line)), 0.0)

    try:
        await authority.start()
        await start_link()
        with _journal(tmp_path / "cs-01") as led:
            _grow(led, range(1, 4))
            await reported(_report("cs-01", led.head))
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path / "cs-01" / "state", copy)  # the table's state directory, as it was
        await stop_link()  # the broker takes one client a user: the planter pushes the table off while it plants
        with _journal(tmp_path / "cs-01") as led:
            planter = MqttLink(broker.settings("cs-01"), ())
            planted = json.dumps({"v": VERSION, "type": "anchor", "table": "cs-01", "seq": 10**15, "hash": "ab" * 32,
                                  "at": "2026-12-01T00:00:00Z"}).encode()
            ran = asyncio.create_task(planter.run(lambda *_: None))
            try:
                await until(lambda: planter.connected, "the planter connected")
                await planter.publish(Topics(PREFIX).up("cs-01"), planted, qos=1)
                async with asyncio.timeout(20):  # kept aside, or (before) kept as the table's anchor
                    while not ((e := await table_entry()).get("anchor_suspect") or e["anchor"]["seq"] == 10**15):
                        await asyncio.sleep(0.05)
            finally:
                ran.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ran
            await start_link()
            entry = await table_entry()
            assert entry["anchor"]["seq"] < 10**15, f"the planted anchor is the one the authority keeps: {entry}"
            assert entry["anchor_suspect"]["seq"] == 10**15, entry
            assert await anomaly("anchor far ahead") == 1
            for n in (4, 7):  # the table plays on: its true anchors are taken, with no alert
                _grow(led, range(n, n + 3))
                await reported(_report("cs-01", led.head))
            assert await anomaly("anchor went back") == 0
            true_head = led.head.seq
        shutil.rmtree(tmp_path / "cs-01" / "state")
        shutil.copytree(copy, tmp_path / "cs-01" / "state")  # rolled back, and it plays on from there
        with _journal(tmp_path / "cs-01") as led:
            _grow(led, range(100, 102))
            assert led.head.seq < true_head
            await reported(_report("cs-01", led.head))
        assert await anomaly("anchor went back") == 1  # the rollback, seen

        state = Path(doc["state_dir"])
        with JournalReader(state / journal.DB_NAME) as reader:
            verdicts = [(f.body["seq"], f.body["verdict"]) for _k, f in reader.entries("anchor:cs-01:")]
        assert [v for _s, v in verdicts] == ["accepted", "suspect", "accepted", "accepted", "behind"], verdicts
        assert verdicts[1][0] == 10**15

        ctl = ("clear-anchor", "cs-01", "--supervisor", SUPERVISOR, "--secret-file", str(secret_file), "--socket",
               str(authority.socket))
        wrong = await authority.ctl(*ctl[:-4], "--seq", "12", *ctl[-4:])
        assert wrong.returncode == 2 and "is at entry 1000000000000000, not 12" in wrong.stderr, wrong.stderr
        done = await authority.ctl(*ctl[:-4], "--seq", str(10**15), *ctl[-4:], "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["cleared_by"] == SUPERVISOR
        assert (await table_entry())["anchor_suspect"] is None
        again = await authority.ctl(*ctl[:-4], "--seq", str(10**15), *ctl[-4:])
        assert again.returncode == 2 and "nothing to clear" in again.stderr, again.stderr
        with JournalReader(state / journal.DB_NAME) as reader:
            (cleared,) = [f for _k, f in reader.entries("anchor:cs-01:") if f.kind == "table-anchor-cleared"]
        assert cleared.body["cleared_by"] == SUPERVISOR and cleared.body["seq"] == 10**15

        reference = (await table_entry())["anchor"]
        await authority.stop()
        await authority.start()  # what it holds comes back from its journal
        entry = await table_entry()
        assert entry["anchor"]["seq"] == reference["seq"] and entry["anchor_suspect"] is None, entry
    finally:
        if running:
            await stop_link()
        if authority.running:
            await authority.stop()
        authority.close()
        broker.stop()


# --- how the authority judges a report (controller.linkproto.anchors, pure) ------------------------------------------


def _a(seq: int, h: str = "ab") -> object:
    from controller.linkproto.schema import JournalAnchor

    return JournalAnchor("cs-01", seq, (h * 32)[:64], "2026-12-01T00:00:00Z")


def test_each_report_is_judged_against_the_last_accepted_one():
    from controller.linkproto import anchors as k

    held = k.TableAnchors()
    steps = [(0.0, 100, "accepted"), (1.0, 100, "repeat"), (2.0, 10**15, "suspect"), (3.0, 120, "accepted"),
             (4.0, 120 + k.SLACK + 2 * k.MAX_ENTRIES_PER_S, "accepted"), (5.0, 90, "behind"), (6.0, 95, "accepted")]
    for now, seq, verdict in steps:
        got = k.judge(held, _a(seq), now)
        assert got == verdict, (now, seq, got)
        held = k.after(held, got, k.Report(_a(seq), now))
    assert held.reference.anchor.seq == 95 and held.suspect.anchor.seq == 10**15 and held.suspects == 1
    assert k.judge(held, _a(95, "cd"), 7.0) == "behind"  # the same entry, another hash: the journal rewritten
    assert k.cleared(held).suspect is None and k.cleared(held).reference == held.reference


def test_no_planted_report_masks_a_rollback():
    """Whatever a table's credentials send between its true reports: a suspect is never the reference, and right
    after a true report, the next one going back (a rollback) is always `behind` and one going on always
    `accepted`, however far ahead something was planted before."""
    from hypothesis import given
    from hypothesis import strategies as st

    from controller.linkproto import anchors as k

    @given(st.lists(st.tuples(st.integers(1, 600), st.integers(0, 500),
                              st.lists(st.integers(1, 10**18), max_size=2), st.booleans()), min_size=1, max_size=30))
    def run(steps):
        held, now, head, true_last = k.TableAnchors(), 0.0, 1, None
        for wait, grew, planted, rolled_back in steps:
            now += wait
            for seq in planted:  # with the table's credentials, between two true reports
                v = k.judge(held, _a(seq, "ee"), now)
                before, held = held.reference, k.after(held, v, k.Report(_a(seq, "ee"), now))
                if v == "suspect":  # kept aside: the reference stays the last accepted
                    assert held.reference == before and held.suspect.anchor.seq == seq
            back = rolled_back and head > 1
            head = max(1, head - 1 - grew % head) if back else head + grew
            v = k.judge(held, _a(head), now)
            if back and true_last is not None and not planted:
                assert v == "behind", (head, held)  # a rollback straight after a true report: always seen
            if not back and true_last is not None and not planted and head > true_last:
                assert v == "accepted", (head, held)  # the table's journal going on: never an alert
            held = k.after(held, v, k.Report(_a(head), now))
            if v != "suspect":
                assert held.reference.anchor.seq == head
            true_last = head

    run()

"""Damage and tampering: start-up refuses and names the first bad entry; the offline audit names it too;
a damaged ledger is never replaced by a fresh one."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from controller.ledger import Ledger, LedgerDamaged, chain, journal, verify_state_dir

from ledger_child import Accounts

CHECKPOINT_EVERY = 8


def open_ledger(path, **kw) -> Ledger:
    kw.setdefault("software_digest", "test-software")
    kw.setdefault("checkpoint_every", CHECKPOINT_EVERY)
    kw.setdefault("fatal", lambda err: None)  # not the default, which would end the test run
    return Ledger.open(path, Accounts(), **kw)


@pytest.fixture
def state_dir(tmp_path) -> Path:
    """A closed ledger with old segments (behind checkpoints) and a tail after the last checkpoint."""
    d = tmp_path / "state"
    led = open_ledger(d)
    for i in range(40):
        led.submit("deposit", {"account": f"a{i % 3}", "cents": 100 + i}, f"dep-{i}")
        if i % 4 == 3:
            led.submit("transfer", {"from": f"a{i % 3}", "to": "b", "cents": 50}, f"tr-{i}")
    led.close(checkpoint=False)  # as after a crash: entries after the last checkpoint
    return d


def db(d: Path) -> sqlite3.Connection:
    return sqlite3.connect(d / journal.DB_NAME, isolation_level=None)


def kinds(d: Path) -> dict[int, str]:
    conn = db(d)
    try:
        return {seq: chain.Entry(e).kind for seq, e in conn.execute("SELECT seq, entry FROM entries")}
    finally:
        conn.close()


def checkpoints(d: Path) -> list[int]:
    return [s for s, k in sorted(kinds(d).items()) if k == "checkpoint"]


def a_deposit(d: Path, where: str) -> int:
    """The seq of a deposit entry in an old segment ("old") or after the last checkpoint ("tail")."""
    ks = kinds(d)
    last_cp = checkpoints(d)[-1]
    seqs = [s for s, k in sorted(ks.items()) if k == "deposit" and ((s < last_cp - 2) if where == "old" else s > last_cp)]
    assert seqs, where
    return seqs[len(seqs) // 2] if where == "old" else seqs[0]


def refused(d: Path) -> LedgerDamaged:
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.name.startswith(journal.DB_NAME)}
    with pytest.raises(LedgerDamaged) as e:
        open_ledger(d)
    after = {p.name: p.read_bytes() for p in d.iterdir() if p.name.startswith(journal.DB_NAME)}
    assert after.get(journal.DB_NAME) == before.get(journal.DB_NAME), "the damaged file was written to"
    return e.value


def audited(d: Path):
    report = verify_state_dir(d, Accounts())
    assert not report.ok
    return report


def set_entry(conn, seq: int, text: str, rehash: bool) -> None:
    if rehash:
        conn.execute("UPDATE entries SET entry = ?, hash = ? WHERE seq = ?", (text, chain.entry_hash(text), seq))
    else:
        conn.execute("UPDATE entries SET entry = ? WHERE seq = ?", (text, seq))


def change_amount(d: Path, seq: int, *, rehash: bool = False) -> None:
    conn = db(d)
    (text,) = conn.execute("SELECT entry FROM entries WHERE seq = ?", (seq,)).fetchone()
    e = json.loads(text)
    e[5]["cents"] += 1000
    set_entry(conn, seq, chain.canonical(e), rehash)
    conn.close()


# --- the journal is sound -----------------------------------------------------------------------


def test_sound_journal_opens_and_audits(state_dir):
    report = verify_state_dir(state_dir, Accounts())
    assert report.ok, report.summary()
    with open_ledger(state_dir) as led:
        assert led.state == report.state
    assert len(checkpoints(state_dir)) >= 4


# --- tampering with entries ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["old", "tail"])
def test_changed_amount(state_dir, where):
    seq = a_deposit(state_dir, where)
    change_amount(state_dir, seq)
    e = refused(state_dir)
    assert e.seq == seq and "do not match its hash" in e.problem
    assert f"entry {seq}:" in str(e)
    assert audited(state_dir).first_bad_seq == seq


@pytest.mark.parametrize("where", ["old", "tail"])
def test_changed_amount_with_its_hash_recomputed(state_dir, where):
    seq = a_deposit(state_dir, where)
    change_amount(state_dir, seq, rehash=True)
    e = refused(state_dir)
    # the entry is self-consistent now; the next entry's link to it is what breaks
    assert e.seq == seq + 1 and "chain is broken" in e.problem
    # the audit replays every entry before checking the next link: the changed result names the entry itself
    report = audited(state_dir)
    assert report.first_bad_seq == seq and "result" in report.problems[0].text


def test_changed_amount_with_the_chain_after_it_rebuilt(state_dir):
    """A forger who rewrites an entry of the tail and recomputes every hash after it: the chain holds,
    but replaying the entry no longer gives the result recorded when it was acknowledged."""
    seq = a_deposit(state_dir, "tail")
    conn = db(state_dir)
    rows = conn.execute("SELECT seq, entry FROM entries WHERE seq >= ? ORDER BY seq", (seq,)).fetchall()
    prev = conn.execute("SELECT hash FROM entries WHERE seq = ?", (seq - 1,)).fetchone()[0]
    for s, text in rows:
        e = json.loads(text)
        e[0] = prev
        if s == seq:
            e[5]["cents"] += 1000
        text = chain.canonical(e)
        prev = chain.entry_hash(text)
        set_entry(conn, s, text, rehash=True)
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq and "result" in e.problem
    assert audited(state_dir).first_bad_seq == seq


@pytest.mark.parametrize("where", ["old", "tail"])
def test_deleted_entry(state_dir, where):
    seq = a_deposit(state_dir, where)
    conn = db(state_dir)
    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq and "missing" in e.problem
    assert audited(state_dir).first_bad_seq == seq


def test_deleted_last_entries_of_a_segment_and_renumbered(state_dir):
    """Entries deleted and the rest renumbered so that no number is missing."""
    seq = a_deposit(state_dir, "old")
    conn = db(state_dir)
    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    conn.execute("UPDATE entries SET seq = seq - 1 WHERE seq > ?", (seq,))
    conn.execute("UPDATE checkpoints SET seq = seq - 1")
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq
    assert audited(state_dir).first_bad_seq == seq


@pytest.mark.parametrize("where", ["old", "tail"])
def test_reordered_entries(state_dir, where):
    seq = a_deposit(state_dir, where)
    conn = db(state_dir)
    a = conn.execute("SELECT key, entry, hash FROM entries WHERE seq = ?", (seq,)).fetchone()
    b = conn.execute("SELECT key, entry, hash FROM entries WHERE seq = ?", (seq + 1,)).fetchone()
    conn.execute("BEGIN")
    conn.execute("UPDATE entries SET key = 'tmp' WHERE seq = ?", (seq,))
    conn.execute("UPDATE entries SET key = ?, entry = ?, hash = ? WHERE seq = ?", (*a, seq + 1))
    conn.execute("UPDATE entries SET key = ?, entry = ?, hash = ? WHERE seq = ?", (*b, seq))
    conn.execute("COMMIT")
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq and "reordered" in e.problem
    assert audited(state_dir).first_bad_seq == seq


@pytest.mark.parametrize("where", ["old", "tail"])
def test_changed_hash(state_dir, where):
    seq = a_deposit(state_dir, where)
    conn = db(state_dir)
    conn.execute("UPDATE entries SET hash = ? WHERE seq = ?", ("f" * 64, seq))
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq and "hash" in e.problem
    assert audited(state_dir).first_bad_seq == seq


def test_changed_key_column(state_dir):
    """The key column drives idempotency: changing it would let a retry apply twice."""
    seq = a_deposit(state_dir, "old")
    conn = db(state_dir)
    conn.execute("UPDATE entries SET key = 'forged' WHERE seq = ?", (seq,))
    conn.close()
    e = refused(state_dir)
    assert e.seq == seq and "key" in e.problem


def test_appended_forged_entry(state_dir):
    conn = db(state_dir)
    (n,) = conn.execute("SELECT max(seq) FROM entries").fetchone()
    text = chain.entry_text("0" * 64, n + 1, "forged", "2026-01-01T00:00:00.000000Z", "deposit",
                            '{"account":"a0","cents":1}', '{"balance":1}')
    conn.execute("INSERT INTO entries VALUES (?, ?, ?, ?)", (n + 1, "forged", text, chain.entry_hash(text)))
    conn.close()
    e = refused(state_dir)
    assert e.seq == n + 1 and "chain is broken" in e.problem


# --- snapshots ----------------------------------------------------------------------------------


def tamper_snapshot(d: Path, seq: int) -> None:
    conn = db(d)
    (state,) = conn.execute("SELECT state FROM checkpoints WHERE seq = ?", (seq,)).fetchone()
    data = json.loads(state)
    data["balances"]["b"] += 500
    data["deposited"] += 500  # consistent: the invariant still holds on the forged snapshot
    conn.execute("UPDATE checkpoints SET state = ? WHERE seq = ?", (chain.canonical(data), seq))
    conn.close()


def test_latest_snapshot_tampered(state_dir):
    last = checkpoints(state_dir)[-1]
    tamper_snapshot(state_dir, last)
    e = refused(state_dir)
    assert e.seq == last and "snapshot" in e.problem
    assert audited(state_dir).first_bad_seq == last


def test_older_snapshot_tampered_is_found_by_the_audit(state_dir):
    older = checkpoints(state_dir)[-2]
    tamper_snapshot(state_dir, older)
    assert audited(state_dir).first_bad_seq == older


def test_checkpoint_digest_changed(state_dir):
    """A checkpoint whose recorded segment digest was changed (and its hash recomputed)."""
    cp = checkpoints(state_dir)[1]
    conn = db(state_dir)
    (text,) = conn.execute("SELECT entry FROM entries WHERE seq = ?", (cp,)).fetchone()
    e = json.loads(text)
    e[5]["segment"]["sha256"] = "0" * 64
    set_entry(conn, cp, chain.canonical(e), rehash=True)
    conn.close()
    e = refused(state_dir)
    assert e.seq == cp and "digest" in e.problem


# --- the file -----------------------------------------------------------------------------------


def test_truncated_file(state_dir):
    path = state_dir / journal.DB_NAME
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    e = refused(state_dir)
    assert e.problem  # names the file-level fault
    assert "integrity" in e.problem or "cannot be read" in e.problem
    assert not verify_state_dir(state_dir, Accounts()).ok


def test_corrupted_bytes_in_an_entry(state_dir):
    """Bit rot inside a record: SQLite still reads the row, the chain catches the change."""
    seq = a_deposit(state_dir, "old")
    path = state_dir / journal.DB_NAME
    data = bytearray(path.read_bytes())
    conn = db(state_dir)
    (key,) = conn.execute("SELECT key FROM entries WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    needle = f',"{key}",'.encode()
    at = data.find(needle)
    assert at > 0 and data.find(needle, at + 1) < 0
    body_at = data.index(b'"cents":', at) + len(b'"cents":')
    data[body_at] = ord("9") if data[body_at] != ord("9") else ord("8")
    path.write_bytes(bytes(data))
    e = refused(state_dir)
    assert e.seq == seq
    assert audited(state_dir).first_bad_seq == seq


def test_corrupted_page(state_dir):
    path = state_dir / journal.DB_NAME
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) >= 4 * page
    data[2 * page:3 * page] = os.urandom(page)  # garbage over a whole b-tree page
    path.write_bytes(bytes(data))
    refused(state_dir)
    assert not verify_state_dir(state_dir, Accounts()).ok


# --- never a fresh database over a damaged one --------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"this is not a database\n" * 100, b"SQLite format 3\x00" + b"\x00" * 4080])
def test_never_creates_over_a_damaged_file(tmp_path, content):
    d = tmp_path / "state"
    d.mkdir()
    path = d / journal.DB_NAME
    path.write_bytes(content)
    e = refused(d)
    assert e.seq is None
    assert path.read_bytes() == content
    assert sorted(p.name for p in d.iterdir()) in ([journal.DB_NAME], sorted([journal.DB_NAME, journal.LOCK_NAME]))


def test_wal_without_database_is_refused(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    (d / (journal.DB_NAME + "-wal")).write_bytes(b"\x37\x7f\x06\x82" + b"\x00" * 100)
    with pytest.raises(LedgerDamaged) as e:
        open_ledger(d)
    assert "-wal exists" in e.value.problem
    assert not (d / journal.DB_NAME).exists()


def test_some_other_sqlite_database_is_refused(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    conn = sqlite3.connect(d / journal.DB_NAME)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    e = refused(d)
    assert "not a ledger database" in e.problem


def test_all_entries_deleted(state_dir):
    conn = db(state_dir)
    conn.execute("DELETE FROM entries")
    conn.close()
    e = refused(state_dir)
    assert e.seq == 1 and "missing" in e.problem


def test_snapshot_restore_equals_full_replay(state_dir):
    """The state built from the latest snapshot plus the tail equals a replay from entry 1."""
    report = verify_state_dir(state_dir, Accounts())
    assert report.ok
    conn = db(state_dir)
    conn.execute("DELETE FROM checkpoints")  # no snapshot at all: start-up replays everything
    conn.close()
    with open_ledger(state_dir) as led:
        assert led.startup.replayed_from == 1
        assert led.state == report.state

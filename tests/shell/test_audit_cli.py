"""`progressivectl audit verify`, `meters` and `history` on a real state directory, as an auditor uses them."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from controller.ledger import Ledger
from controller.meter import BookContributions, CloseRound, PayFixedAward, PayPercentAward, params_from_dict
from controller.meter.journal import define_meter_body, op_body
from controller.round.journal import JournalReducer

from ctlrun import run_ctl

CTL = Path(sys.executable).parent / "progressivectl"
AT = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def run(*args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    return run_ctl(*args, process=process)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("state") / "progressive"
    ledger = Ledger.open(path, JournalReducer(), software_digest="sha256:test")
    try:
        params = params_from_dict(
            {"meter_id": "cs-1", "reset": "10000.00", "rate": "0.15", "reserve_rate": "0.05",
             "wager_sizes": ["1.00", "5.00"]}, "params")
        ledger.submit("define-meter", define_meter_body(params, "slot-tech 4411", AT), key="define:cs-1")
        ops = [
            BookContributions("r1", "table-3", ((7, 500), (4, 100), (1, 100)), AT),
            PayFixedAward("r1", "table-3", 4, "four-of-a-kind", "300 for 1", 30_000, "table", AT + timedelta(minutes=1),
                          "floor 1207"),
            PayPercentAward("r1", "table-3", 7, "royal-flush", "100% of meter", Fraction(100),
                            AT + timedelta(minutes=2), "floor 1207"),
            CloseRound("r1", AT + timedelta(minutes=3)),
        ]
        for i, op in enumerate(ops):
            ledger.submit(op.kind, op_body("cs-1", op), key=f"table-3:{i}")
    finally:
        ledger.close()
    return path


def test_verify_sound_state_dir(state_dir):
    proc = run("audit", "verify", "--state", str(state_dir), process=True)  # the installed command
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout
    as_json = json.loads(run("audit", "verify", "--state", str(state_dir), "--json").stdout)
    assert as_json["ok"] is True and as_json["first_bad_seq"] is None and as_json["entries"] >= 6
    assert as_json["self_checks"], "the power-up self-check entry is recorded"


def test_meters_read_from_the_journal(state_dir):
    proc = run("meters", "--state", str(state_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    (m,) = json.loads(proc.stdout)
    # $7.00 wagered at 15% = $1.05 on the meter, 5% = $0.35 in reserve; the royal flush took
    # $10,001.05 and the reset was funded by the reserve first, then seed.
    assert m["meter"] == "cs-1"
    assert m["qualifying_wagers"] == {"count": 3, "amount": "7.00"}
    assert m["contributions"] == "1.05"
    assert m["current"] == "10000.00" and m["reserve"] == "0.00"
    assert m["paid_by_attendant"] == "10001.05" and m["paid_by_table"] == "300.00"
    assert m["cumulative_payouts"] == "10301.05"
    assert m["hits"]["royal-flush: 100% of meter"] == {"count": 1, "amount": "10001.05"}
    text = run("meters", "--state", str(state_dir))
    assert text.returncode == 0 and "cs-1: $10000.00" in text.stdout


def test_history_read_from_the_journal(state_dir):
    proc = run("history", "--state", str(state_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert [(h["seat"], h["hand"], h["amount"], h["approved_by"]) for h in hits] == [
        (4, "four-of-a-kind", "300.00", "floor 1207"),
        (7, "royal-flush", "10001.05", "floor 1207"),
    ]
    assert hits[1]["meter_before"] == "10001.05" and hits[1]["meter_after"] == "10000.00"


def _copy(state_dir: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(state_dir, dest)
    return dest


def _tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path / "ledger.sqlite3")
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_changed_amount_is_named(state_dir, tmp_path):
    """A $5.00 wager rewritten as $50.00 in the journal: the chain no longer matches at that entry."""
    copy = _copy(state_dir, tmp_path)
    seq = sqlite3.connect(copy / "ledger.sqlite3").execute(
        "SELECT seq FROM entries WHERE entry LIKE '%book-contributions%'").fetchone()[0]
    _tamper(copy, "UPDATE entries SET entry = replace(entry, '\"5.00\"', '\"50.00\"') "
                  "WHERE entry LIKE '%book-contributions%'")
    proc = run("audit", "verify", "--state", str(copy))
    assert proc.returncode == 1
    assert "DAMAGED" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    report = json.loads(run("audit", "verify", "--state", str(copy), "--json").stdout)
    assert report["ok"] is False and report["first_bad_seq"] == seq
    # meters and history refuse to read a damaged journal
    assert run("meters", "--state", str(copy)).returncode == 1
    assert run("history", "--state", str(copy)).returncode == 1


def test_missing_state_dir_is_bad_input(tmp_path):
    proc = run("audit", "verify", "--state", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "--state" in proc.stderr


def test_unknown_meter_is_bad_input(state_dir):
    proc = run("meters", "--state", str(state_dir), "--meter", "fchb-9")
    assert proc.returncode == 2 and "fchb-9" in proc.stderr


@pytest.mark.parametrize("args", [("meters",), ("history",), ("history", "--limit", "5")])
def test_a_tables_link_journal_is_named_not_read_as_meters(tmp_path, args):
    """A table's link journal holds operations sent to the link authority, not meters: one line says so (with
    --limit too, which once ended in an internal error)."""
    from controller.link.outbox import LINK_SEND, OutboxReducer, send_body

    link = tmp_path / "link"
    ledger = Ledger.open(link, OutboxReducer(), software_digest="sha256:test")
    try:
        ledger.submit(LINK_SEND, send_body("fchb", "fchb-link", BookContributions("cs-01-r1", "cs-01", ((1, 100),), AT)),
                      key="send:1")
    finally:
        ledger.close()
    r = run(*args, "--state", str(link))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().endswith("the meters are the link authority's; give its state directory"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout

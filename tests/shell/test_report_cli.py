"""`progressivectl report --state DIR --day YYYY-MM-DD` in each form, on a journal written by the ledger with its
clock set to a known gaming day; bad input is one line and status 2; a journal changed behind its hash chain's back
is refused naming the entry, and one whose chain a forger made again does not reconcile (status 1 both)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.ledger import Ledger, chain
from controller.meter import BookContributions, params_from_dict
from controller.meter.journal import define_meter_body, op_body
from controller.round.journal import JournalReducer

from ctlrun import run_ctl
from reportday import rounds

ROOT = Path(__file__).resolve().parents[2]
# 2026-11-30 at 06:00 in New York is 11:00 UTC; the day before ends then.
BEFORE = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
DURING = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("state") / "progressive"
    now = [BEFORE]
    ledger = Ledger.open(path, JournalReducer(), software_digest="sha256:test", clock=lambda: now[0])
    try:
        params = params_from_dict({"meter_id": "cs-1", "reset": "10000.00", "rate": "0.15", "reserve_rate": "0.05",
                                   "wager_sizes": ["1.00", "5.00"]}, "params")
        ledger.submit("define-meter", define_meter_body(params, "slot-tech 4411", BEFORE), key="define:cs-1")
        ledger.submit("book-contributions", op_body("cs-1", BookContributions("r0", "t3", ((1, 100),), BEFORE)),
                      key="t3:r0")
        now[0] = DURING
        for i, op in enumerate(rounds("t3", DURING)):
            ledger.submit(op.kind, op_body("cs-1", op), key=f"t3:{i}")
    finally:
        ledger.close()
    return path


def report(state_dir: Path, *args: str, process: bool = False):
    return run_ctl("report", "--state", str(state_dir), *args, process=process)


def test_text_by_default(state_dir):
    proc = report(state_dir, "--day", "2026-11-30", process=True)  # the installed command
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Progressive meter report: Table t3, gaming day Monday 30 November 2026\n"
                                  "From 2026-11-30 06:00:00 EST to 2026-12-01 06:00:00 EST (24 hours: the gaming day "
                                  "starts at 06:00, New York time)\n")
    out = proc.stdout
    assert "Qualifying wagers: 5 for $17.00 in 2 rounds\n" in out and "Returned by voids: 2 for $10.00 in 1 round\n" in out
    assert "Qualifying wagers, net of voids: 3 for $7.00\n" in out
    assert ("2026-11-30 15:00:00 EST, round r1, seat 4: Fixed award on four of a kind (300 for 1), $300.00, paid by "
            "the table (dealer), approved by floor 1207 (entry 7)") in out
    assert ("round r1, seat 7: Jackpot on royal flush (100% of meter), $10,001.20, paid by an attendant, approved by "
            "floor 1207; meter $10,001.20 before, $10,000.00 after") in out
    assert "Approved by floor 1207: 2 payouts for $10,301.20\n" in out
    assert "round r2: 2 wagers, $10.00 returned (misdeal; entry" in out
    assert "Reconciliation: the meter's visible amount balances: yes\n" in out
    assert "Visible meter (the jackpot amount shown): $10,000.15 / $10,000.00\n" in out
    for raw in ("UTC", "+00:00", "royal-flush", "paid_by", "True", "None", "balanced"):
        assert raw not in out, raw


def test_json_is_exact(state_dir):
    proc = report(state_dir, "--day", "2026-11-30", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (m,) = doc["meters"]
    assert m["opening"]["current"] == "10000.15" and m["opening"]["reserve"] == "0.05"
    assert m["wagers"] == {"rounds": 2, "count": 5, "amount": "17.00", "voided_count": 2, "voided_amount": "10.00",
                           "net_count": 3, "net_amount": "7.00"}
    assert m["contributions"] == "1.05" and m["reserved"] == "0.35"
    assert m["awards_by_paid_by"] == {"attendant": {"count": 1, "amount": "10001.20"},
                                      "table": {"count": 1, "amount": "300.00"}}
    assert m["awards_by_approver"] == {"floor 1207": {"count": 2, "amount": "10301.20"}}
    assert m["reconciliation"]["visible"]["balanced"] and m["reconciliation"]["held"]["balanced"]
    assert doc["head"]["seq"] > 0 and len(doc["head"]["hash"]) == 64
    assert (doc["table"], doc["authority"], doc["source"], doc["tables"]) == ("t3", None, {"kind": "table", "id": "t3"},
                                                                              ["t3"])
    assert m["source_id"] == "t3" and (doc["start_local"], doc["end_local"]) == ("2026-11-30 06:00:00 EST",
                                                                                 "2026-12-01 06:00:00 EST")
    assert [(a["what"], a["amount"]) for a in m["awards"]] == [("fixed-award", "300.00"), ("jackpot", "10001.20")]
    assert m["jackpots"] == {"count": 1, "amount": "10001.20"} and m["resets"] == {"count": 1, "to": ["10000.00"]}
    assert m["hits"] == 2 and m["reset_amount"] == "10000.00" and m["rate"] == "15%"
    assert m["readings"]["closing"] == {"hits": 2, "wagers_count": 4, "wagers_amount": "8.00", "paid_by_table": "300.00",
                                        "paid_by_attendant": "10001.20", "cumulative_payouts": "10301.20"}
    before = json.loads(report(state_dir, "--day", "2026-11-29", "--json").stdout)
    assert before["meters"][0]["closing"] == m["opening"]  # one day's close is the next day's opening


def test_csv_one_row_per_meter_and_figure(state_dir):
    proc = report(state_dir, "--day", "2026-11-30", "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["day", "source", "source_id", "meter", "figure", "value"] and all(len(r) == 6 for r in rows)
    assert all(r[:3] == ["2026-11-30", "table", "t3"] for r in rows[1:])  # each row says whose it is
    figures = {(r[3], r[4]): r[5] for r in rows[1:]}
    assert figures["cs-1", "wagers count"] == "5" and figures["cs-1", "paid"] == "10301.20"
    assert figures["cs-1", "awards by what: jackpot: amount"] == "10001.20" and figures["cs-1", "resets"] == "1"
    assert figures["cs-1", "reconciliation held balanced"] == "true"
    assert len(figures) == len(rows) - 1  # no figure twice


def test_html_is_one_self_contained_file(state_dir):
    proc = report(state_dir, "--day", "2026-11-30", "--html", "--day-starts", "06:00", "--time-zone",
                  "America/New_York")
    assert proc.returncode == 0, proc.stderr
    page = proc.stdout
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1 and "<polyline" in page
    assert "<script" not in page and "src=" not in page and "href=" not in page and "@media print" in page


def test_the_day_and_the_table_from_the_configuration(state_dir, tmp_path):
    example = ROOT / "config" / "tables" / "caribbean-stud.toml"
    proc = report(state_dir, "--day", "2026-11-30", "--json", "--config", str(example))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr  # CS-07's configuration, t3's journal
    assert proc.stderr == f"progressivectl: --config: {example}: the journal is of table t3, not CS-07\n"
    t3 = tmp_path / "t3.toml"
    t3.write_text(example.read_text(encoding="utf-8").replace('table = "CS-07"', 'table = "t3"')
                  .replace('"../devices/', f'"{ROOT / "config" / "devices"}/'), encoding="utf-8")
    t3.chmod(0o600)
    proc = report(state_dir, "--day", "2026-11-30", "--json", "--config", str(t3))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["start"] == "2026-11-30T11:00:00+00:00" and doc["table"] == "t3"  # the default [report]
    proc = report(state_dir, "--day", "2026-11-30", "--role", "link", "--config", str(t3))
    assert proc.returncode == 2 and proc.stderr.startswith("progressivectl: --config: "), proc.stderr
    # the meters named as the configuration's wagers are: its progressive wager's meter is the journal's cs-1
    t3.write_text(t3.read_text(encoding="utf-8").replace('meter = "main"', 'meter = "cs-1"')
                  .replace("[meters.main]", "[meters.cs-1]"), encoding="utf-8")
    proc = report(state_dir, "--day", "2026-11-30", "--config", str(t3))
    assert proc.returncode == 0, proc.stderr
    assert "Progressive Payout Wager (meter cs-1) of Table t3" in proc.stdout, proc.stdout[:2000]
    html = report(state_dir, "--day", "2026-11-30", "--html", "--config", str(t3)).stdout
    assert "Table t3, Progressive Payout Wager (meter cs-1)" in html


@pytest.mark.parametrize("args, field", [
    (("--day", "2026-11-31"), "--day"),
    (("--day", "30/11/2026"), "--day"),
    (("--day", "2026-11-30", "--day-starts", "6am"), "--day-starts"),
    (("--day", "2026-11-30", "--time-zone", "Mars/Olympus"), "--time-zone"),
    (("--day", "2026-11-30", "--role", "link"), "--role"),
])
def test_bad_input_is_one_line_and_status_2(state_dir, args, field):
    proc = report(state_dir, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"progressivectl: {field}: "), proc.stderr


def test_a_state_directory_without_a_journal(tmp_path):
    proc = report(tmp_path, "--day", "2026-11-30")
    assert proc.returncode == 2 and "--state" in proc.stderr and "holds no journal" in proc.stderr


def _changed(copy: Path) -> int:
    """The r1 booking's recorded contribution changed in the journal at `copy`; its seq."""
    con = sqlite3.connect(copy / "ledger.sqlite3")
    (seq, text), = con.execute("SELECT seq, entry FROM entries WHERE entry LIKE '%\"r1\"%book-contributions%'")
    con.execute("UPDATE entries SET entry = ? WHERE seq = ?", (text.replace('"contributed":"1.05"',
                                                                            '"contributed":"1.06"'), seq))
    con.commit()
    con.close()
    return seq


def _rechain(copy: Path, seq: int) -> None:
    """As a forger would: every entry from `seq` on linked and hashed again, each checkpoint's digest of its segment
    made again, so that the chain holds."""
    con = sqlite3.connect(copy / "ledger.sqlite3", isolation_level=None)
    rows = con.execute("SELECT seq, key, entry FROM entries ORDER BY seq").fetchall()
    prev, texts, hashes = chain.GENESIS_PREV, {}, {}
    for s, _key, text in rows:
        e = json.loads(text)
        if s >= seq:
            e[0] = prev
            if e[4] == "checkpoint":
                first, last = e[5]["segment"]["first"], e[5]["segment"]["last"]
                digest = chain.SegmentDigest()
                for k in range(first, last + 1):
                    digest.add(hashes[k], rows[k - 1][1], texts[k])
                e[5]["segment"]["sha256"] = digest.hexdigest()
            text = chain.canonical(e)
            con.execute("UPDATE entries SET entry = ?, hash = ? WHERE seq = ?", (text, chain.entry_hash(text), s))
        texts[s], hashes[s] = text, chain.entry_hash(text)
        prev = hashes[s]
    con.close()


def test_a_journal_changed_behind_the_chains_back_is_refused_naming_the_entry(state_dir, tmp_path):
    """An entry changed in a copy, its hash not made again: no figure is printed, one line names the entry."""
    copy = tmp_path / "copy"
    shutil.copytree(state_dir, copy)
    seq = _changed(copy)
    proc = report(copy, "--day", "2026-11-30", "--json")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert f"no report: the journal {copy / 'ledger.sqlite3'} is damaged: entry {seq}: its contents do not match " \
           "its hash" in proc.stderr
    # an entry deleted: the first missing is named
    con = sqlite3.connect(copy / "ledger.sqlite3", isolation_level=None)
    con.execute("DELETE FROM entries WHERE seq = ?", (seq - 1,))
    con.close()
    proc = report(copy, "--day", "2026-11-30")
    assert proc.returncode == 1 and proc.stdout == "" and f"entry {seq - 1}: missing" in proc.stderr


def test_a_changed_result_with_the_chain_made_again_does_not_reconcile(state_dir, tmp_path):
    """A forger who makes the chain again after the entry passes the chain's check, not the replay."""
    copy = tmp_path / "copy"
    shutil.copytree(state_dir, copy)
    seq = _changed(copy)
    _rechain(copy, seq)
    proc = report(copy, "--day", "2026-11-30")
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"the gaming day 2026-11-30 does not reconcile: entry {seq}: book-contributions" in proc.stderr


def _moved_past_the_day(copy: Path, *, rechain: bool) -> int:
    """The day's first entry in the journal at `copy` stamped after the day's close, its own hash made again (and with
    `rechain`, every later entry linked and hashed again as a forger would); its seq."""
    con = sqlite3.connect(copy / "ledger.sqlite3", isolation_level=None)
    seq, text = next((s, t) for s, t in con.execute("SELECT seq, entry FROM entries ORDER BY seq")
                     if json.loads(t)[3] >= "2026-11-30T11:00")
    e = json.loads(text)
    e[3] = "2026-12-01T12:00:00.000000Z"
    text = chain.canonical(e)
    con.execute("UPDATE entries SET entry = ?, hash = ? WHERE seq = ?", (text, chain.entry_hash(text), seq))
    con.close()
    if rechain:
        _rechain(copy, seq + 1)
    return seq


def test_an_entry_moved_past_the_days_close_does_not_cut_the_day_short(state_dir, tmp_path):
    """The day's first entry moved after its close, only its own hash made again: the chain is checked on past the
    day, and its successor's link names the break; the whole chain made again: the times going back are refused."""
    copy = tmp_path / "copy"
    shutil.copytree(state_dir, copy)
    seq = _moved_past_the_day(copy, rechain=False)
    proc = report(copy, "--day", "2026-11-30")
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert f"is damaged: entry {seq + 1}: its prev_hash does not match the hash of entry {seq}" in proc.stderr
    shutil.rmtree(copy)
    shutil.copytree(state_dir, copy)
    seq = _moved_past_the_day(copy, rechain=True)
    proc = report(copy, "--day", "2026-11-30")
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert f"does not reconcile: entry {seq + 1}: stamped 2026-11-30T20:00" in proc.stderr
    assert f"after entry {seq} stamped 2026-12-01T12:00:00.000000Z" in proc.stderr
    assert report(state_dir, "--day", "2026-11-30").returncode == 0


def test_a_day_without_entries_says_so_and_names_the_days_that_have_them(state_dir):
    """Before, a day with no entry (one the table did not play, or a typo in --day) printed "balanced" with status 0,
    as a day of play would. Its report is still written (a day without play is filed too), a line says it has no
    entry and which days have them, and the status is 3; a day that has not begun gives no report."""
    empty = report(state_dir, "--day", "2026-12-02", process=True)
    assert empty.returncode == 3, empty.stderr
    assert empty.stderr.strip() == ("progressivectl: the gaming day 2026-12-02 has no entry in the journal: its "
                                    "entries are of the gaming days 2026-11-29 to 2026-11-30"), empty.stderr
    assert empty.stdout.startswith("Progressive meter report: Table t3, gaming day Wednesday 2 December 2026\n")
    future = report(state_dir, "--day", "2999-01-01", process=True)
    assert future.returncode == 3 and future.stdout == ""
    assert "the gaming day 2999-01-01 has not begun (it starts at 2999-01-01 06:00 EST)" in future.stderr, future.stderr
    assert report(state_dir, "--day", "2026-11-30", process=True).returncode == 0


def test_a_day_not_over_says_its_figures_at_the_close_are_so_far(tmp_path):
    """The report of the gaming day in progress is the journal's as of now: a line says so, and when the day ends."""
    from zoneinfo import ZoneInfo

    from controller.report.day import day_of, parse_day_starts

    now = datetime.now(UTC)
    path = tmp_path / "progressive"
    ledger = Ledger.open(path, JournalReducer(), software_digest="sha256:test", clock=lambda: now)
    try:
        params = params_from_dict({"meter_id": "cs-1", "reset": "10000.00", "rate": "0.15", "reserve_rate": "0.05",
                                   "wager_sizes": ["1.00"]}, "params")
        ledger.submit("define-meter", define_meter_body(params, "slot-tech 4411", now), key="define:cs-1")
        ledger.submit("book-contributions", op_body("cs-1", BookContributions("r1", "t3", ((1, 100),), now)),
                      key="t3:r1")
    finally:
        ledger.close()
    today = day_of(now, parse_day_starts("06:00", "day_starts"), ZoneInfo("America/New_York")).day
    proc = report(path, "--day", today.isoformat(), process=True)
    assert proc.returncode == 0, proc.stderr
    assert f"progressivectl: the gaming day {today} is not over (it ends at " in proc.stderr, proc.stderr
    assert "so far" in proc.stderr and "UTC" not in proc.stderr

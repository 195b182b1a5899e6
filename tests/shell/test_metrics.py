"""Metrics: promtool accepts the exposition; the HTTP endpoint serves it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import urllib.request
from fractions import Fraction
from pathlib import Path

import pytest

from controller import __version__
from controller.app.metrics import Metrics
from controller.app.setup import award_spots, table_rules
from controller.config.load import load_config

TABLES = Path(__file__).resolve().parents[2] / "config" / "tables"

PROMTOOL = shutil.which("promtool")


def sample() -> Metrics:
    m = Metrics("t1")
    m.info.labels("t1", __version__).set(1)
    m.meter_cents.labels("cs-main").set(1_234_567)
    m.wagers.labels("progressive").inc(3)
    m.wagers_cents.labels("progressive").inc(300)
    m.not_recognized.labels("after lock-out").inc()
    m.contributions.labels("cs-main").inc(45)
    m.hits.labels("cs-main", "royal-flush").inc()
    m.payouts.labels("cs-main", "royal-flush", "attendant").inc(1_000_000)
    m.rounds.labels("closed").inc()
    m.set_phase("dealing")
    m.blocked.labels("device").set(0)
    m.seat_disabled.labels("4").set(1)
    m.lockout_latency.observe(0.012)
    m.device_up.labels("seat-1", "seat").set(1)
    m.device_errors.labels("seat-1", "crc").inc()
    m.device_poll.labels("seat-1").observe(0.004)
    m.commit_latency.observe(0.0007)
    m.claims.labels("paid").inc()
    m.claims_pending.set(1)
    m.internal_errors.labels("book").inc()
    m.auth.failures.inc()
    m.anchors.ledger_head.set(120)
    m.anchors.anchor_seq.set(118)
    m.anchors.anchor_problems.labels("missing").inc()
    m.auth.lockouts.labels("user").inc()
    m.percent_award_chances({})
    return m


@pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"), reason="promtool not installed (CI installs it)")
def test_promtool_accepts_the_exposition():
    text = sample().exposition()
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), (r.stdout + r.stderr).decode()


def test_promtool_would_catch_a_bad_name():
    """The check above can fail: promtool flags a counter without _total."""
    if PROMTOOL is None:
        pytest.skip("promtool not installed")
    bad = b"# HELP progressive_bad A counter\n# TYPE progressive_bad counter\nprogressive_bad 1\n"
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=bad, capture_output=True, timeout=60)
    assert r.returncode != 0 or r.stdout.strip() or r.stderr.strip()


def test_round_phase_is_one_hot():
    m = sample()
    text = m.exposition().decode()
    assert 'progressive_round_phase{phase="dealing"} 1.0' in text
    assert 'progressive_round_phase{phase="betting"} 0.0' in text
    assert 'progressive_meter_amount_cents{meter="cs-main"} 1.234567e+06' in text


def test_http_endpoint_serves_metrics():
    m = sample()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, thread = m.serve("127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            body = resp.read().decode()
        assert "progressive_wagers_accepted_total" in body
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_each_spot_exports_its_own_odds_of_a_percentage_award():
    """The chance the alerting rules hold a table's hits to (ProgressiveHitsBeyondOdds): exact, from the paytable,
    a game's own: Four Card Poker's four of a kind (the Four-Card Progressive) 16 times a royal or straight flush;
    a wager without a percentage award (the Bad Beat Bonus) 0; counted at the first scrape, not before."""
    chances = {}
    for game in ("caribbean-stud", "four-card-poker"):
        cfg = load_config(TABLES / f"{game}.toml")
        m = Metrics(cfg.table)
        m.percent_award_chances(award_spots(cfg, table_rules(cfg)))
        assert m.chances is not None and m.chances._chances is None  # registered, nothing counted yet
        for family in m.registry.collect():
            if family.name == "progressive_percent_award_probability":
                chances[game] = {s.labels["spot"]: s.value for s in family.samples}
    royal_or_straight_flush, four_of_a_kind = float(Fraction(40, 2_598_960)), float(Fraction(624, 2_598_960))
    assert chances["caribbean-stud"] == {"progressive": royal_or_straight_flush,
                                         "five-card-hand-bonus": royal_or_straight_flush,
                                         "five-card-hand-bonus-dealer": royal_or_straight_flush}, chances
    fcp = chances["four-card-poker"]
    assert fcp["four-card-progressive"] == four_of_a_kind and fcp["five-card-progressive"] == royal_or_straight_flush
    assert fcp.get("bad-beat", 0.0) == 0.0, fcp

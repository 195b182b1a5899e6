"""The lock-out press (controller/app/lockout.py): what is drawn at it, and its two timings as metrics, each
observed once per press and only when it happened."""

from __future__ import annotations

import time
from pathlib import Path

from controller.app.lockout import LockoutTimer, draws
from controller.app.metrics import Metrics
from controller.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def _count(m: Metrics, name: str) -> float:
    return m.registry.get_sample_value(f"{name}_count", {}) or 0.0


def test_a_table_without_a_magic_card_wager_draws_nothing():
    cfg = load_config(ROOT / "config" / "tables" / "flop-poker.toml")
    asked: list[int] = []
    assert draws(cfg, lambda n: asked.append(n) or 0) == {"magic_card": None, "lucky_seat": None}
    assert asked == []  # the CSPRNG is not even asked


def test_magic_card_is_one_of_52_and_the_lucky_position_includes_the_dealer_where_the_game_has_one():
    cfg = load_config(ROOT / "config" / "tables" / "caribbean-stud.toml")
    asked: list[int] = []
    assert draws(cfg, lambda n: asked.append(n) or n - 1) == {"magic_card": 51, "lucky_seat": cfg.seats}
    assert asked == [52, cfg.seats + 1]


def test_a_press_observes_its_window_once_and_its_latency_once():
    m = Metrics("T")
    t = LockoutTimer(m)
    t.frozen()
    t.locked()  # no press yet: nothing to time
    assert _count(m, "progressive_lockout_window_seconds") == 0
    assert _count(m, "progressive_lockout_latency_seconds") == 0
    t.pressed(time.monotonic())
    t.frozen()
    t.frozen()  # a second freeze is not this press's
    t.applied()
    t.locked()
    t.locked()
    assert _count(m, "progressive_lockout_window_seconds") == 1
    assert _count(m, "progressive_lockout_latency_seconds") == 1


def test_a_freeze_after_the_press_was_applied_is_not_timed():
    m = Metrics("T")
    t = LockoutTimer(m)
    t.pressed(time.monotonic())
    t.applied()  # the press did not freeze the wagers (refused, or the round had left betting)
    t.frozen()
    assert _count(m, "progressive_lockout_window_seconds") == 0

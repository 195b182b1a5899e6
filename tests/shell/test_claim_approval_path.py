"""A claim's approval takes its decision once, in the pure core: from the handler's `approve` to the answer, the
shell (controller/app/) enters controller/round/claim_machine.py and controller/round/claims.py at most twice
each (the step that approves, and the step that says the claim is paid), however many payouts it has.

Measured for real: the table daemon (no devices) approves a claim on its own meter (a royal flush with an Envy
Bonus to another seat) and a claim on a linked meter (the dealer's hand shared by two seats, through a real
Mosquitto and link authority), while `sys.setprofile` records every call whose caller's file is under
controller/app/ and whose callee's file is another file of controller/."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, CO_ITERABLE_COROUTINE
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from test_claim_desk_model import FLOOR, SECRET, SUPERVISOR, Harness

from controller.config.model import LinkedMeter, MqttConfig
from controller.round import model as rm
from drivers import events as ev

from rigtable import with_supervisor

ROOT = Path(__file__).resolve().parents[2]
CONTROLLER = ROOT / "controller"
APP = CONTROLLER / "app"
CORE = ("round/claim_machine.py", "round/claims.py")
AT_MOST = 2
RESUMABLE = CO_COROUTINE | CO_GENERATOR | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE


@contextlib.contextmanager
def entries() -> Iterator[Counter[str]]:
    """Every entry from a file under controller/app/ into another file of controller/, by the callee's file
    (relative to controller/). A coroutine or generator is entered once, when it starts: its resumptions are not
    entries."""
    app, controller = f"{APP}/", f"{CONTROLLER}/"
    counts: Counter[str] = Counter()
    started: dict[int, FrameType] = {}  # resumable frames seen (held, so that no id is reused meanwhile)

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_code.co_filename
        if not callee.startswith(controller) or callee.startswith(app):
            return
        caller = frame.f_back
        if caller is None or not caller.f_code.co_filename.startswith(app):
            return
        if frame.f_code.co_flags & RESUMABLE:
            if id(frame) in started:
                return
            started[id(frame)] = frame
        counts[callee[len(controller):]] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        started.clear()


def table(counts: Counter[str]) -> str:
    return "\n".join(f"  {path}: {n}" for path, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def assert_once(counts: Counter[str], what: str) -> None:
    over = {f: counts[f] for f in CORE if counts[f] > AT_MOST}
    assert not over, (f"{what}: the approval entered {over} more than {AT_MOST} times; every entry from "
                      f"controller/app/ into controller/:\n{table(counts)}")


def bet_and_lock(h: Harness, chips: list[tuple[int, str]]) -> None:
    d = h.daemon
    assert d is not None
    for seat, spot in chips:
        d.apply(rm.ChipSensed(seat, spot, 100))
    d.on_device_event(ev.LockoutPressed("lockout"))
    h.run(h.settled())
    assert d.state.phase is rm.Phase.DEALING, d.state


def approve_measured(h: Harness, claim: dict[str, Any], status: str) -> tuple[dict[str, Any], Counter[str]]:
    d = h.daemon
    assert d is not None
    got = h.run(d.call("claim", claim))
    assert got["status"] == status, got
    h.run(h.settled())
    cid = got["claim_id"]
    assert d.desk is not None and d.desk.state.get(cid).status == "pending"
    with entries() as counts:
        done = h.run(d.call("approve", {"claim_id": cid, **FLOOR}))
    assert "approved by floor-1 and paid" in done["message"], done
    h.run(h.settled())
    assert d.desk.state.get(cid).status == "paid"
    return done, counts


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "state", lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET))
    h.start()
    try:
        yield h
    finally:
        h.close()


def test_a_standalone_claims_approval_enters_the_core_at_most_twice(harness: Harness) -> None:
    bet_and_lock(harness, [(5, "progressive"), (3, "progressive")])
    royal = {"seat": 5, "spot": "progressive", "cards": ["AS", "KS", "QS", "JS", "TS"]}
    done, counts = approve_measured(harness, royal, "pending")
    assert "Envy Bonus to seat 3" in done["message"]  # two payouts: the hand's and the Envy Bonus
    assert_once(counts, "a royal flush on the table's own meter")
    assert counts["round/claim_machine.py"] >= 1  # measured: the step that approves is among them


@contextlib.contextmanager
def linked_harness(tmp_path: Path) -> Iterator[tuple[Harness, Any]]:
    """The table daemon (no devices) with its Five Card Hand Bonus meter linked, a real Mosquitto and link
    authority (tests/support/linkrig.py), in the harness's event loop."""
    from broker import running_broker
    from linkrig import AUTHORITY_KEY, METER, PREFIX, LinkRig

    with running_broker(tmp_path / "mosquitto", ("CS-07", "authority")) as broker:
        link_dir = Path(tempfile.mkdtemp(prefix="approval-link-"))
        rig = LinkRig(link_dir, broker, ("CS-07",))

        def adjust(cfg: Any) -> Any:
            password = link_dir / "table.password"
            password.write_text(broker.passwords["CS-07"] + "\n", encoding="utf-8")
            password.chmod(0o600)
            mqtt = MqttConfig(host=broker.host, port=broker.port, tls=True, client_id="CS-07", topic_prefix=PREFIX,
                              link_timeout=5.0, ca_file=broker.ca_file, username="CS-07", password_file=password,
                              authority_keys=(AUTHORITY_KEY,))
            cfg = replace(cfg, meters={**cfg.meters, "bonus": LinkedMeter("bonus", METER, (100,))}, mqtt=mqtt)
            return with_supervisor(cfg, SUPERVISOR, SECRET)

        h = Harness(tmp_path / "state", adjust)
        try:
            h.run(rig.start_authority())
            h.start()
            yield h, rig
        finally:
            h.stop()
            with contextlib.suppress(Exception):
                h.run(rig.close())
            h.close()
            shutil.rmtree(link_dir, ignore_errors=True)


def test_a_linked_claims_approval_enters_the_core_at_most_twice(tmp_path: Path) -> None:
    with linked_harness(tmp_path) as (h, _rig):
        bet_and_lock(h, [(5, "five-card-hand-bonus-dealer"), (2, "five-card-hand-bonus-dealer")])
        shared = {"seat": "dealer", "cards": ["9D", "8D", "7D", "6D", "5D"]}  # 10% of the meter, two shares
        done, counts = approve_measured(h, shared, "pending")
        assert "1 of 2 shares" in done["message"]
        assert_once(counts, "the dealer's hand shared on a linked meter")


def test_the_recorder_sees_an_entry_from_the_shell_and_nothing_else() -> None:
    """The check itself: a call made from a file under controller/app/ into controller/round/claims.py is an
    entry; the same call made from here, or from inside controller/round/, is not."""
    from controller.round import claims

    rc = claims.RoundClaims("CS-07-r1")
    shell = compile("rc.pending\nrc.pending\n", str(APP / "claim_desk.py"), "exec")
    here = compile("rc.pending\n", __file__, "exec")
    with entries() as counts:
        exec(shell, {"rc": rc})
        exec(here, {"rc": rc})
        claims.claim_refusal(rc)  # from this file; claims.py's own calls inside it are not entries either
    assert counts == Counter({"round/claims.py": 2}), table(counts)
    with pytest.raises(AssertionError, match=r"(?s)more than 2 times.*round/claims.py: 3"):
        assert_once(Counter({"round/claims.py": 3, "money.py": 1}), "three entries")

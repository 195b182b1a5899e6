"""Supervisor secrets under attack (controller/service/auth.py): checked off the event loop, at the same cost for an
unknown name, wrong guesses locked out per user and per name with an alert; and on the rig, a guess flood
through the real control socket does not stop the table's polls."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from controller.app.metrics import Metrics
from controller.app.table import TableDaemon
from controller.config.credentials import SCRYPT, hash_credential, parse_credential
from controller.config.model import Supervisor
from controller.service import auth
from controller.service.auth import LOCK_S, NAME_LIMIT, USER_LIMIT, Guesses, SupervisorCheck
from controller.service.control import ControlClient, ControlError, ControlServer

from rigtable import daemon_on_rig, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"
SECRET = "s3cret-floor"


def test_wrong_guesses_lock_out_and_the_lock_lifts():
    now = [0.0]
    g = Guesses(3, lambda: now[0])

    def wrong() -> bool:
        assert g.take("u")
        return g.wrong("u")

    assert not wrong() and not wrong() and g.locked_for("u") == 0
    assert wrong() and g.locked_for("u") == auth.WINDOW_S  # the lock-out, and the window its guesses fill
    assert not g.take("u")  # nothing is checked meanwhile
    now[0] += LOCK_S + 1
    assert g.locked_for("u") == auth.WINDOW_S - LOCK_S - 1  # the lock-out is over, its guesses still count
    now[0] = auth.WINDOW_S + 1
    assert g.locked_for("u") == 0 and not wrong()  # they fell out of the window with time
    assert g.take("u") and g.take("u") and not g.take("u")  # places taken before the answers: no third
    g.give_back("u")  # a right secret gives its place back
    assert g.take("u")


def checker(monkeypatch, credential: str, metrics: Metrics | None = None, **kw) -> tuple[SupervisorCheck, list]:
    """A check of one supervisor, recording every credential a secret is hashed against."""
    hashed = []
    real = auth.verify_credential

    def verify(secret, cred):
        hashed.append(cred)
        return real(secret, cred)

    monkeypatch.setattr(auth, "verify_credential", verify)
    supervisors = [Supervisor("floor-1", parse_credential(credential))]
    return SupervisorCheck(supervisors, (metrics or Metrics("t")).auth, **kw), hashed


async def test_an_unknown_name_costs_what_a_known_one_does(monkeypatch):
    cred = hash_credential(SECRET, SCRYPT, n=2**14, r=8, p=1)
    check, hashed = checker(monkeypatch, cred)
    try:
        for name in ("floor-1", "nobody"):
            with pytest.raises(PermissionError, match="not accepted"):
                await check.check(name, "wrong-guess", uid=1000 + len(name))
        real, decoy = hashed
        assert decoy != real and (decoy.scheme, decoy.n, decoy.r, decoy.p) == (real.scheme, real.n, real.r, real.p)
        assert await check.check("floor-1", SECRET, uid=1) == "floor-1"
    finally:
        check.close()


async def test_a_guessing_user_is_locked_out_others_are_not_and_a_name_is_locked_after_many(monkeypatch):
    cred = hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000)
    metrics = Metrics("t")
    check, hashed = checker(monkeypatch, cred, metrics)
    try:
        with capture_logs() as logs:
            for _ in range(USER_LIMIT):
                with pytest.raises(PermissionError, match="not accepted"):
                    await check.check("floor-1", "guess", uid=1001)
            n = len(hashed)
            with pytest.raises(PermissionError, match="too many wrong secrets for user 1001"):
                await check.check("floor-1", SECRET, uid=1001)  # even the right one: nothing hashed
            assert len(hashed) == n
            assert await check.check("floor-1", SECRET, uid=1002) == "floor-1"  # another user is not locked
            for uid in range(2000, 2000 + NAME_LIMIT - USER_LIMIT):  # one guess each from more users: the name is
                # locked (1002's right secret cleared none of the name's count)
                with pytest.raises(PermissionError):
                    await check.check("floor-1", "guess", uid=uid)
            with pytest.raises(PermissionError, match="too many wrong secrets for supervisor 'floor-1'"):
                await check.check("floor-1", SECRET, uid=3000)
        alerts = [e for e in logs if e["event"] == "supervisor secret guesses: locked out"]
        assert [a["scope"] for a in alerts] == ["user", "name"] and alerts[0]["peer_uid"] == 1001
        assert all(a["log_level"] == "error" for a in alerts)
        text = metrics.exposition().decode()
        assert f"progressive_auth_failures_total {NAME_LIMIT}.0" in text
        assert 'progressive_auth_lockouts_total{scope="user"} 1.0' in text
        assert 'progressive_auth_lockouts_total{scope="name"} 1.0' in text
    finally:
        check.close()


async def test_a_right_secret_between_wrong_ones_clears_no_count():
    """Two wrong guesses at one name, one right secret of another, again and again, as one user: the user is locked
    out at USER_LIMIT wrong guesses all the same (a right secret used to clear the user's count)."""
    cred = parse_credential(hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000))
    check = SupervisorCheck([Supervisor("floor-1", cred), Supervisor("floor-2", cred)], Metrics("t").auth)
    try:
        wrong = 0
        while wrong < USER_LIMIT:
            for _ in range(min(2, USER_LIMIT - wrong)):
                with pytest.raises(PermissionError, match="not accepted"):
                    await check.check("floor-2", "guess", uid=1001)
                wrong += 1
            if wrong < USER_LIMIT:
                assert await check.check("floor-1", SECRET, uid=1001) == "floor-1"
        with pytest.raises(PermissionError, match="too many wrong secrets for user 1001"):
            await check.check("floor-1", SECRET, uid=1001)
    finally:
        check.close()


async def test_after_a_lock_out_ends_the_guesses_that_earned_it_still_count(monkeypatch):
    """USER_LIMIT wrong secrets lock a user out; when the lock-out ends, the window still holds them: nothing of
    the user's is hashed until the oldest is WINDOW_S old (before, the lock-out cleared the count, and USER_LIMIT
    more were hashed right after it)."""
    now = [0.0]
    cred = hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000)
    check, hashed = checker(monkeypatch, cred, clock=lambda: now[0])
    try:
        for _ in range(USER_LIMIT):
            with pytest.raises(PermissionError, match="not accepted"):
                await check.check("floor-1", "guess", uid=1001)
        now[0] += LOCK_S + 1  # the lock-out is over
        for _ in range(USER_LIMIT):
            with pytest.raises(PermissionError, match="too many wrong secrets for user 1001: try again in 299 s"):
                await check.check("floor-1", "guess", uid=1001)
        assert len(hashed) == USER_LIMIT
        now[0] = auth.WINDOW_S + 1  # the guesses are older than the window
        assert await check.check("floor-1", SECRET, uid=1001) == "floor-1"
    finally:
        check.close()


async def test_two_users_guessing_at_one_name_at_once_never_pass_its_limit(monkeypatch):
    """Users send QUEUE wrong secrets at once each, one user after the other, at one name: NAME_LIMIT are hashed
    in all (before: 8 of each of the first two users, 16, because a guess was counted after its hash and the
    lock-out cleared the count); each user's own burst stops at USER_LIMIT."""
    cred = hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000)
    check, hashed = checker(monkeypatch, cred)
    try:
        per_user = []
        for uid in (1001, 1002, 1003):
            before = len(hashed)
            answers = await asyncio.gather(*(check.check("floor-1", f"guess-{i}", uid=uid)
                                             for i in range(auth.QUEUE)), return_exceptions=True)
            assert all(isinstance(a, PermissionError) for a in answers), answers
            per_user.append(len(hashed) - before)
        assert per_user == [USER_LIMIT, NAME_LIMIT - USER_LIMIT, 0]
        with pytest.raises(PermissionError, match="too many wrong secrets for supervisor 'floor-1'"):
            await check.check("floor-1", SECRET, uid=1004)
    finally:
        check.close()


async def test_a_name_typed_in_another_unicode_form_is_the_supervisors_name(monkeypatch):
    """The name is NFKC-normalized before it is looked up, as the supervisors' names are: a fullwidth "ｆ" is an
    "f" (before, it was an unknown name, hashed against the decoy and refused)."""
    cred = hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000)
    check, hashed = checker(monkeypatch, cred)
    try:
        assert await check.check("\uff46loor-1", SECRET, uid=1) == "floor-1"
        assert hashed[-1] == parse_credential(cred)
    finally:
        check.close()


async def test_checks_beyond_the_queue_are_answered_busy_at_once(monkeypatch):
    from controller.service.control import NotAvailable

    cred = hash_credential(SECRET, "pbkdf2_sha256", iterations=100_000)
    check, _ = checker(monkeypatch, cred)
    try:
        many = [check.check("floor-1", SECRET, uid=i) for i in range(auth.QUEUE + 3)]
        outcomes = await asyncio.gather(*many, return_exceptions=True)
        assert sum(o == "floor-1" for o in outcomes) == auth.QUEUE
        assert sum(isinstance(o, NotAvailable) for o in outcomes) == 3
    finally:
        check.close()


async def test_a_guess_flood_on_the_control_socket_leaves_the_table_polling(tmp_path, monkeypatch):
    """Guesses pipelined on several connections at a table whose supervisor has a full-cost scrypt credential
    (about a third of a second a check): the event loop never stalls for a check (before, each guess blocked it
    for the whole check, and the devices went down), every device stays up, and the guesses end in a lock-out."""
    from dataclasses import replace

    sock = tmp_path / "control.sock"
    cred = parse_credential(hash_credential(SECRET, SCRYPT))

    def adjust(cfg):
        return replace(cfg, supervisors=(Supervisor("floor-1", cred),))

    checked_on: list[int] = []  # the thread of every secret check
    real_verify = auth.verify_credential

    def verify(*args):
        checked_on.append(threading.get_ident())
        return real_verify(*args)

    monkeypatch.setattr(auth, "verify_credential", verify)
    daemon_class = functools.partial(TableDaemon, control=lambda d: ControlServer(sock, d))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state", adjust) as (daemon, rig):
        lag = 0.0
        stop = asyncio.Event()

        async def watch_the_loop():
            nonlocal lag
            while not stop.is_set():
                t0 = time.monotonic()
                await asyncio.sleep(0.01)
                lag = max(lag, time.monotonic() - t0 - 0.01)

        lockout = rig.simulator("lockout")
        polls = lockout.requests
        watcher = asyncio.create_task(watch_the_loop())
        answers: list[object] = []

        async def guess(i: int):
            c = ControlClient(sock, timeout=30)
            for j in range(4):
                try:
                    await c.call("void", reason="x", supervisor="floor-1" if j % 2 else f"probe-{i}",
                                 secret=f"guess-{i}-{j}")
                except ControlError as e:
                    answers.append(e.kind)

        t0 = time.monotonic()
        await asyncio.gather(*(guess(i) for i in range(6)))
        spent = time.monotonic() - t0
        stop.set()
        await watcher
        assert len(answers) == 24 and set(answers) <= {"auth", "unavailable"}
        assert all(i.up for i in daemon._info.values()), daemon.devices_json()
        # no check ran on the event loop's thread (each takes about a third of a second there): what the loop's
        # lag shows on a quiet machine, without the noise of a loaded one (allowed a check's time, not 24)
        assert checked_on and threading.get_ident() not in checked_on
        assert lag < 1.0, f"the event loop stalled {lag:.3f} s during the flood"
        assert lockout.requests - polls >= spent / 1.0  # the lock-out button was read all along (many a second)
        with pytest.raises(ControlError, match=f"too many wrong secrets for user {os.getuid()}"):
            await ControlClient(sock).call("void", reason="x", supervisor="floor-1", secret=SECRET)


async def test_a_burst_of_wrong_secrets_on_many_connections_hashes_at_most_the_limit(tmp_path, monkeypatch):
    """QUEUE wrong secrets sent at once on QUEUE connections of the daemon's control socket, each at another name
    (the supervisor's, and names nobody has): USER_LIMIT are hashed, the rest refused at once (before, all 8 were
    hashed: each was counted only after its hash, with the others already queued)."""
    sock = tmp_path / "control.sock"
    hashed: list[object] = []
    real_verify = auth.verify_credential

    def verify(secret, credential):
        hashed.append(credential)
        return real_verify(secret, credential)

    monkeypatch.setattr(auth, "verify_credential", verify)
    daemon_class = functools.partial(TableDaemon, control=lambda d: ControlServer(sock, d))
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                             lambda cfg: with_supervisor(cfg, "floor-1", SECRET)) as (daemon, _rig):

        async def guess(i: int) -> str:
            with pytest.raises(ControlError) as refused:
                await ControlClient(sock, timeout=30).call("authenticate", supervisor="floor-1" if i == 0 else
                                                           f"probe-{i}", secret=f"guess-{i}")
            return str(refused.value)

        answers = await asyncio.gather(*(guess(i) for i in range(auth.QUEUE)))
        assert len(hashed) == USER_LIMIT, answers
        assert sum("not accepted" in a for a in answers) == USER_LIMIT
        assert sum(f"too many wrong secrets for user {os.getuid()}" in a for a in answers) == auth.QUEUE - USER_LIMIT
        assert daemon.metrics.registry.get_sample_value("progressive_auth_failures_total") == USER_LIMIT


def test_a_stop_during_the_decoys_hash_is_not_held_by_it(tmp_path):
    """The decoy is hashed at start-up in the lowest-priority thread, which a busy box starves (over 20 s was
    seen): a daemon stopped then must not wait for it. A process whose check still hashes exits at once."""
    import subprocess
    import sys
    import textwrap

    costly = hash_credential(SECRET, SCRYPT, n=2**15, r=8, p=12)  # a second or more of CPU at nice 19
    script = textwrap.dedent(f"""
        from controller.service.auth import SupervisorCheck
        from controller.app.metrics import Metrics
        from controller.config.credentials import parse_credential
        from controller.config.model import Supervisor
        check = SupervisorCheck([Supervisor("floor-1", parse_credential({costly!r}))], Metrics("T").auth)
        check.close()
        print("closed", flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "closed\n"
        t0 = time.monotonic()
        proc.wait(timeout=120)
        took = time.monotonic() - t0
    assert proc.returncode == 0
    assert took < 0.5, f"the process waited {took:.1f} s for the decoy's hash"

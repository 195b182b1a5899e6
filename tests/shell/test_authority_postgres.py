"""Two link authorities on one journal on PostgreSQL: the one that holds it serves; the other waits as a standby
(its metric 0, no table answered, no broker session) and takes over, where the first stopped, once it is gone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from prometheus_client import CollectorRegistry
from test_authority_run import Answers, nobody_listening

from controller.authority import authority as authority_module
from controller.authority.authority import LinkAuthority
from controller.cli import daemon
from controller.linkproto import schema
from controller.service.sdnotify import Notifier

from authority_journal import TABLES, booking, op
from ctlrun import run_ctl
from linkrig import authority_config
from postgres import Postgres, postgres  # noqa: F401 - the module's PostgreSQL

pytestmark = pytest.mark.xdist_group("postgres-test_authority_postgres")  # one worker: one PostgreSQL for the module
WAIT = 20


def active(a: LinkAuthority) -> float | None:
    return a.metrics.registry.get_sample_value("progressive_authority_active")


async def test_a_standby_authority_takes_the_journal_over_where_the_first_left_it(tmp_path, postgres):  # noqa: F811
    url = postgres.new_database()
    first = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url),
                          settings=nobody_listening(), registry=CollectorRegistry())
    second = LinkAuthority(replace(authority_config(tmp_path / "two", TABLES), journal=url),
                           settings=nobody_listening(), registry=CollectorRegistry())
    answers = Answers(first)
    one = asyncio.create_task(first.run())
    two: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(first.ready.wait(), WAIT)
        assert active(first) == 1 and not first.standby.is_set()
        two = asyncio.create_task(second.run())
        await asyncio.wait_for(second.standby.wait(), WAIT)
        assert second.standby_reason == "standby: the journal is held by another authority"
        assert active(second) == 0 and not second.ready.is_set()
        assert second.mqtt is None and second.inbox is None  # no broker session, no table's operation taken
        sent = op("cs-01", 1, booking("cs-01", 1))
        first.inbox.on_message(first.topics.up("cs-01"), schema.encode(sent))
        await asyncio.wait_for(answers.arrived.wait(), WAIT)
        assert isinstance(answers.sent[0], schema.Ack)
        one.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await one
        await asyncio.wait_for(second.ready.wait(), WAIT)
        assert active(second) == 1 and not second.standby.is_set()
        assert second.next_seq == {"cs-01": 2}  # the first's operations are the second's
        assert second.ledger is not None and second.ledger.engine == "postgresql"
    finally:
        for task in (one, two):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def test_a_standby_stops_when_cancelled(tmp_path, postgres):  # noqa: F811
    url = postgres.new_database()
    first = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url),
                          settings=nobody_listening(), registry=CollectorRegistry())
    second = LinkAuthority(replace(authority_config(tmp_path / "two", TABLES), journal=url),
                           settings=nobody_listening(), registry=CollectorRegistry())
    one = asyncio.create_task(first.run())
    try:
        await asyncio.wait_for(first.ready.wait(), WAIT)
        two = asyncio.create_task(second.run())
        await asyncio.wait_for(second.standby.wait(), WAIT)
        two.cancel()
        done, _ = await asyncio.wait([two], timeout=WAIT)
        assert done and two.cancelled()
        assert second.ledger is None and active(second) == 0
    finally:
        one.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await one


async def test_audit_verify_reads_the_journal_on_postgresql_and_finds_it_rewritten(tmp_path, postgres):  # noqa: F811
    url = postgres.new_database()
    a = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url),
                      settings=nobody_listening(), registry=CollectorRegistry())
    task = asyncio.create_task(a.run())
    try:
        await asyncio.wait_for(a.ready.wait(), WAIT)
        head = a.ledger.head
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    ok = await asyncio.to_thread(run_ctl, "audit", "verify", "--state", url, "--expect-head", f"{head.seq}:{head.hash}")
    assert ok.returncode == 0 and ": ok: " in ok.stdout, ok.stderr
    day = (datetime.now(ZoneInfo("America/New_York")) - timedelta(hours=6)).date().isoformat()  # the default day
    report = await asyncio.to_thread(run_ctl, "report", "--state", url, "--day", day, "--json")
    assert report.returncode == 0, report.stderr
    assert [m["meter"] for m in json.loads(report.stdout)["meters"]] == ["fchb-link"]
    # the database's administrator can rewrite an entry; the chain tells
    changed = postgres.sql("UPDATE entries SET entry = replace(entry, 'fchb-link', 'fchb-lynk') WHERE seq = 3 "
                           "RETURNING seq", database=url.rpartition("/")[2])
    assert changed == [(3,)]  # the meter's definition
    bad = await asyncio.to_thread(run_ctl, "audit", "verify", "--state", url)
    assert bad.returncode == 1 and "entry 3: its contents do not match its hash" in bad.stderr


async def test_systemd_is_told_the_standby_is_up_and_alive_until_it_serves(tmp_path, postgres):  # noqa: F811
    url = postgres.new_database()
    first = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url),
                          settings=nobody_listening(), registry=CollectorRegistry())
    second = LinkAuthority(replace(authority_config(tmp_path / "two", TABLES), journal=url),
                           settings=nobody_listening(), registry=CollectorRegistry())
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(str(tmp_path / "notify"))
    systemd.setblocking(False)
    notifier = Notifier(str(tmp_path / "notify"))
    loop = asyncio.get_running_loop()
    one = asyncio.create_task(first.run())
    two = said = None
    try:
        await asyncio.wait_for(first.ready.wait(), WAIT)
        two = asyncio.create_task(second.run())
        said = asyncio.create_task(daemon._standby(second, notifier, 0.05))
        told = (await asyncio.wait_for(loop.sock_recv(systemd, 4096), WAIT)).decode()
        assert told == "READY=1\nSTATUS=link authority link-1: standby: the journal is held by another authority"
        assert (await asyncio.wait_for(loop.sock_recv(systemd, 4096), WAIT)) == b"WATCHDOG=1"
        assert not said.done()
        one.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await one
        await asyncio.wait_for(said, WAIT)  # done once the second serves
        assert second.ready.is_set()
    finally:
        for task in (one, two, said):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        notifier.close()
        systemd.close()


async def test_an_authority_that_lost_its_session_while_idle_stops_within_seconds(tmp_path, postgres):  # noqa: F811
    url = postgres.new_database()
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    a = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url), settings=nobody_listening(),
                      registry=CollectorRegistry(),
                      ledger_options={"fatal": lambda _err: loop.call_soon_threadsafe(stopped.set)})
    task = asyncio.create_task(a.run())
    try:
        await asyncio.wait_for(a.ready.wait(), WAIT)
        pid = a.ledger._store.conn.info.backend_pid
        assert postgres.sql("SELECT pg_terminate_backend(%s)", (pid,), database=url.rpartition("/")[2]) == [(True,)]
        await asyncio.wait_for(stopped.wait(), WAIT)  # no operation came: the check of the session found it
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, WAIT)  # and its run ended
        assert task.done()
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def test_an_authority_whose_write_its_server_never_acknowledges_stops(tmp_path, postgres, monkeypatch):  # noqa: F811
    """A primary whose synchronous standby follows another one now (its Patroni hung): the authority's COMMIT
    waits, its session still answers, and its heartbeat would tell the tables it is alive. Its check of the journal,
    queued behind that write, does not come back within HOLD_STALL_S: it gives up (the fatal hook; the process
    exits), and the operation is never answered."""
    from test_ledger_postgres import Fatal, NoStandby

    monkeypatch.setattr(authority_module, "HOLD_STALL_S", 1.0)
    url = postgres.new_database()
    fatal = Fatal()
    a = LinkAuthority(replace(authority_config(tmp_path / "one", TABLES), journal=url), settings=nobody_listening(),
                      registry=CollectorRegistry(), ledger_options={"fatal": fatal})
    answers = Answers(a)
    task = asyncio.create_task(a.run())
    try:
        await asyncio.wait_for(a.ready.wait(), WAIT)
        with NoStandby(postgres):
            a.inbox.on_message(a.topics.up("cs-01"), schema.encode(op("cs-01", 1, booking("cs-01", 1))))
            assert await asyncio.to_thread(fatal.called.wait, WAIT), "the stuck writer was not given up"
            assert "waited over 1 s" in str(fatal.errors[0])
            done, _ = await asyncio.wait([task], timeout=WAIT)  # its task group ends too
            assert done
        assert not [m for m in answers.sent if isinstance(m, schema.Ack)]
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

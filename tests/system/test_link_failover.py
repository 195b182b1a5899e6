"""The link authority through the loss of its box: two authority boxes, each an authority process beside a
PostgreSQL node of a pair under Patroni over etcd (tests/support/pgcluster.py, as docs/link-at-scale.md sets it
up), one Mosquitto, three tables (their link clients, each with its durable outbox) on one linked meter.

Both authorities are configured alike, with the pair's one multi-host URL as their `journal`: the one that holds
the journal serves, the other waits as a standby (its `progressive_authority_active` 0, no broker session). The
test plays the part of systemd: an authority that exits is started again on its box while the box is up.

Each cycle, while the tables book and close rounds and now and then lock a hit and pay it with a supervisor's
signed approval: the box of the database's leader dies (SIGKILL of its Patroni, its PostgreSQL and the active
authority, all at once). The other box's database is promoted, its authority takes the journal over and serves;
the tables go OFFLINE and come back ONLINE by themselves, resending what was not answered. The dead box comes back:
its database rejoins as the synchronous standby (pg_rewind), its authority as the standby.

Afterwards: every operation a table sent is in the journal exactly once, under its number, as the table sent it,
and every acknowledgement a table journaled is that entry; no payment is made twice; the meter equals the reset
amount plus every contribution of the rounds the tables booked, less each hit (each the whole meter as it stood
at its lock, computed here in the journal's order) plus the reset after each; every table is ONLINE and shows
that meter; the journal passes the audit. Printed: the seconds from each kill to the first table operation
applied by the new primary.

One cycle by default; LINK_FAILOVER_CYCLES=N, or the soak (PROGRESSIVE_SOAK=1 ./test -m soak: 100 cycles).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import urllib.request
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from controller.ledger import journal, verify_state_dir
from controller.ledger.chain import Entry
from controller.ledger.reader import JournalReader
from controller.link.client import TableLink
from controller.link.outbox import LINK_ACK, LINK_SEND, OutboxReducer
from controller.meter import ops
from controller.money import UNITS_PER_CENT, format_units, parse_units

import soak
from broker import Broker, running_broker
from linkrig import AT, METER, RESET, AuthorityProcess, authority_doc, contribution, mqtt_config, signed, units
from pgcluster import NODES, PgCluster, running_pgcluster
from rigtable import until
from tableproc import BIN

pytest.importorskip("psycopg", reason="psycopg is not installed (pip: psycopg[binary])")

CYCLES = soak.cycles("LINK_FAILOVER_CYCLES", default=1, soak=100)
pytestmark = [pytest.mark.xdist_group("link-failover"), pytest.mark.timeout(240 + 150 * CYCLES)]
if soak.SOAK:
    pytestmark.append(soak.mark)

TABLES = ("cs-01", "fcp-02", "lir-03")
LOCAL = "fchb"  # the tables' name of the linked meter
WAGER = 500  # cents: each seat's wager
SEATS = (1, 2, 3)
HIT_EVERY = 4  # rounds: a table locks and pays a hit every HIT_EVERY-th round
PACE_S = 0.05  # between two rounds of a table
LINK_TIMEOUT = 2.0
ANSWER_S = 120.0  # an answer waits through a failover (about ttl, 20 s) and the takeover
BEFORE_KILL = 6  # rounds each table plays before the kill
AFTER_TAKEOVER = 4  # rounds each table plays once ONLINE again


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def active(box: Box) -> bool | None:
    """The authority's own `progressive_authority_active`; None when it does not answer."""
    if box.authority.proc is None or box.authority.proc.returncode is not None:
        return None
    try:
        text = scrape(box.authority.metrics_url)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("progressive_authority_active "):
            return float(line.split()[1]) == 1.0
    return None


class Box:
    """One authority box: its PostgreSQL node (`node`, in the cluster) and its authority process, which is started
    again when it exits while the box is up (as systemd's Restart= does)."""

    def __init__(self, tmp: Path, node: str, doc: dict[str, Any]) -> None:
        self.node = node
        self.authority = AuthorityProcess(tmp / node, doc, name=f"authority-{node}")
        self.up = False
        self.starts = 0
        self.exits: list[int | None] = []
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.up = True
        await self._launch()
        self._watch = asyncio.create_task(self._supervise(), name=f"systemd:{self.node}")

    async def _launch(self) -> None:
        self.starts += 1
        await self.authority.start()  # READY=1: serving, or up as the standby

    async def _supervise(self) -> None:
        while self.up:
            proc = self.authority.proc
            if proc is not None and proc.returncode is None:
                await asyncio.sleep(0.2)
                continue
            if not self.up:
                return
            self.exits.append(None if proc is None else proc.returncode)
            await asyncio.sleep(0.5)  # RestartSec
            if self.up:
                await self._launch()

    async def die(self) -> None:
        """The authority's part of the box's death: SIGKILL, and no restart until `start`."""
        self.up = False
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        self.authority.kill()
        with contextlib.suppress(Exception):
            await self.authority.wait_exit(10)

    async def close(self) -> None:
        await self.die()
        self.authority.close()


class Table:
    """A table's link client and the rounds it played: round id -> wagers booked; its hits' claims."""

    def __init__(self, tmp: Path, broker: Broker, table: str) -> None:
        self.name = table
        self.dir = tmp / "tables" / table
        self.link = TableLink(table, mqtt_config(table, LINK_TIMEOUT), {LOCAL: METER}, self.dir,
                              settings=broker.settings(table))
        self.rounds: dict[str, int] = {}
        self.claims: list[str] = []
        self.paid: list[str] = []
        self.n = 0
        self._task: asyncio.Task[None] | None = None

    def meter_cents(self) -> int | None:
        """The linked meter's amount the table shows."""
        value = self.link.meters.values.get(METER)
        return None if value is None else value.cents

    async def start(self) -> None:
        await asyncio.to_thread(self.link.open)

        async def run() -> None:
            try:
                await self.link.run()
            finally:
                self.link.close()

        self._task = asyncio.create_task(run(), name=f"table:{self.name}")
        await until(lambda: self.link.opened.is_set(), f"{self.name} link running")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, 60)
            self._task = None

    async def play(self, rounds: int) -> None:
        """`rounds` rounds, each begun only while the link is ONLINE (a table takes no progressive wager while
        OFFLINE); what a round books is sent whatever happens to the link after (the outbox keeps it)."""
        link = self.link
        for _ in range(rounds):
            await until(lambda: link.alive, f"{self.name} ONLINE", ANSWER_S)
            self.n += 1
            rid = f"{self.name}-r{self.n}"
            wagers = tuple((s, WAGER) for s in SEATS)
            await link.send(ops.BookContributions(rid, self.name, wagers, AT), LOCAL, f"{rid}:book:{LOCAL}")
            self.rounds[rid] = len(wagers)
            if self.n % HIT_EVERY == 0:
                claim = f"{rid}-c1:0"
                lock = ops.LockPercentAward(rid, self.name, SEATS[0], "royal-flush", "100% of meter", Fraction(100),
                                            AT, claim)
                seq = await link.send(lock, LOCAL, f"{rid}-c1:lock:0")
                self.claims.append(claim)
                locked = await link.answer(seq, ANSWER_S)
                pay = ops.PayLockedAward(claim, "floor-1", AT)
                await link.send(pay, LOCAL, f"{rid}-c1:pay:0", signed(pay, self.name, locked=locked, lock=lock))
                self.paid.append(claim)
            await link.send(ops.CloseRound(rid, AT), LOCAL, f"{rid}:close:{LOCAL}")
            await asyncio.sleep(PACE_S)

    def pending(self) -> bool:
        return self.link.ledger is None or bool(self.link.outbox.pending)


def entries(db: Path) -> list[Entry]:
    conn = journal.connect(db, "ro")
    try:
        return [Entry(text) for _seq, _key, text, _hash in journal.rows(conn, 1)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def cluster():
    with running_pgcluster() as c:
        yield c


def test_tables_play_through_the_loss_of_the_authority_box(tmp_path, cluster):
    with running_broker(tmp_path / "mosquitto", (*TABLES, "authority")) as broker:
        asyncio.run(asyncio.wait_for(_scenario(tmp_path, cluster, broker), 180 + 150 * CYCLES))


async def _scenario(tmp: Path, cluster: PgCluster, broker: Broker) -> None:
    cluster.heal()
    doc = authority_doc(tmp, broker, TABLES) | {"journal": cluster.url}
    boxes = {n: Box(tmp, n, {**doc, "state_dir": str(tmp / n / "state")}) for n in NODES}
    tables = {t: Table(tmp, broker, t) for t in TABLES}
    takeovers: list[float] = []
    try:
        first, second = boxes[cluster.leader()], boxes[cluster.replica()]
        await first.start()
        await until(lambda: active(first) is True, "the first authority serving", 30)
        await second.start()
        await until(lambda: active(second) is False, "the second authority a standby", 30)
        for t in tables.values():
            await t.start()
        await until(lambda: all(t.link.alive for t in tables.values()), "every table ONLINE", 30)

        for cycle in range(CYCLES):
            takeovers.append(await _failover(cluster, boxes, tables, cycle))

        await until(lambda: all(t.link.alive for t in tables.values()), "every table ONLINE", 30)
        current = await asyncio.to_thread(_meter_from_rounds, cluster.url, tables)
        shown = current // UNITS_PER_CENT
        await until(lambda: all(t.meter_cents() == shown for t in tables.values()),
                    lambda: f"every table showing {format_units(current)}: {[t.meter_cents() for t in tables.values()]}",
                    30)
        for t in tables.values():
            await t.stop()
        await _reconcile(cluster.url, tables)
        print(f"kill -> first operation applied by the new primary, s: {[round(s, 1) for s in takeovers]}; "
              f"max {max(takeovers):.1f}")
    finally:
        for t in tables.values():
            await t.stop()
        for b in boxes.values():
            await b.close()


async def _failover(cluster: PgCluster, boxes: dict[str, Box], tables: dict[str, Table], cycle: int) -> float:
    """One cycle: the leader's box dies while the tables play; the other box serves; the dead box comes back as the
    standby. The seconds from the kill to the first table operation the new primary applied."""
    serving = next(b for b in boxes.values() if active(b))
    dead = boxes[cluster.leader()]
    other = next(b for b in boxes.values() if b is not dead)
    start = {t.name: t.n for t in tables.values()}
    play = [asyncio.create_task(t.play(BEFORE_KILL + AFTER_TAKEOVER)) for t in tables.values()]
    await until(lambda: all(t.n - start[t.name] >= BEFORE_KILL for t in tables.values()), "rounds played", 60)
    cluster.kill(dead.node)  # the database first: its authority cannot take the old leader's lock back
    await dead.die()  # serving, or the standby (then the serving one loses its session, exits and comes back)
    # Every process of the box is gone now: an entry stamped later is the new primary's. (The kill itself takes a
    # few milliseconds; one stamped just before could still be the old primary's, committed as it died.)
    killed_at = datetime.now().astimezone()
    promoted = await asyncio.to_thread(cluster.wait_leader, other.node, 90)
    await until(lambda: active(other) is True, f"the authority of {other.node} serving", 90)
    await asyncio.gather(*play)
    await until(lambda: not any(t.pending() for t in tables.values()), "every operation answered", 60)
    applied = await asyncio.to_thread(_first_applied_after, cluster.url, killed_at)
    print(f"cycle {cycle + 1}: {dead.node} killed (its authority {'serving' if serving is dead else 'the standby'}); "
          f"{other.node} the leader after {promoted:.1f} s; the first table operation applied {applied:.1f} s after "
          "the kill")
    # the dead box comes back: its database rejoins as the standby, its authority waits as the standby
    await asyncio.to_thread(cluster.restart, dead.node, 90)
    await dead.start()
    await until(lambda: active(dead) is False, f"the authority of {dead.node} a standby", 60)
    return applied


def _first_applied_after(url: str, killed_at: datetime) -> float:
    with JournalReader(url) as r:
        for rec in r.records(since=killed_at):
            if rec.key.startswith("link:"):
                return (rec.time - killed_at).total_seconds()
    raise AssertionError("no table operation applied after the kill")


async def _reconcile(url: str, tables: dict[str, Table]) -> None:
    with JournalReader(url) as r:
        records = list(r.records())
    applied: dict[str, dict[int, Any]] = {t: {} for t in tables}
    for rec in records:
        if rec.key.startswith("link:"):
            _, table, seq = rec.key.split(":")
            assert int(seq) not in applied[table], f"{rec.key} twice in the journal"
            applied[table][int(seq)] = rec
    assert not [rec for rec in records if rec.kind == "link-refused"], "an operation was refused"

    # every table's link journal: each operation sent is applied once, as sent; each acknowledgement is its entry
    for name, t in tables.items():
        report = verify_state_dir(t.dir, OutboxReducer())
        assert report.ok, report.summary()
        assert not report.state.pending and not report.state.locks and not report.state.open_rounds, name
        link_entries = entries(t.dir / journal.DB_NAME)
        sends = {e.result["seq"]: e.body for e in link_entries if e.kind == LINK_SEND}
        acks = {e.body["seq"]: e.body for e in link_entries if e.kind == LINK_ACK}
        assert sorted(sends) == list(range(1, len(sends) + 1)) == sorted(applied[name]) == sorted(acks), name
        for seq, sent in sends.items():
            rec = applied[name][seq]
            assert rec.kind == sent["kind"], (name, seq, sent, rec.kind)
            expected = {"meter": METER, **sent["body"]} | ({"approval": sent["approval"]} if "approval" in sent else {})
            if sent["kind"] == "lock-percent-award":
                expected["nonce"] = rec.body["nonce"]
            assert rec.body == expected, (name, seq, sent, rec.body)
            assert acks[seq]["entry"] == rec.seq and acks[seq]["result"] == rec.result, (name, seq, acks[seq])
        booked = {rec.body["round_id"] for rec in applied[name].values() if rec.kind == "book-contributions"}
        closed = {rec.body["round_id"] for rec in applied[name].values() if rec.kind == "close-round"}
        assert booked == closed == set(t.rounds), (name, sorted(booked ^ set(t.rounds)))

    # the journal passes the audit
    audit = await asyncio.to_thread(subprocess.run, [str(BIN / "progressivectl"), "audit", "verify", "--state", url,
                                                     "--json"], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0 and json.loads(audit.stdout)["ok"] is True, (audit.stdout, audit.stderr)


def _meter_from_rounds(url: str, tables: dict[str, Table]) -> int:
    """The meter in units, from the rounds the tables booked: no payment twice; each hit the whole meter at its
    lock, in the journal's order."""
    with JournalReader(url) as r:
        records = list(r.records())
    rounds = {rid: n for t in tables.values() for rid, n in t.rounds.items()}
    pays = [rec.body["claim"] for rec in records if rec.kind == "pay-locked-award"]
    assert len(pays) == len(set(pays)), "a payment made twice"
    assert sorted(pays) == sorted(c for t in tables.values() for c in t.paid)
    contributed, awards, locks = 0, 0, 0
    for rec in records:
        if rec.kind == "book-contributions":
            contributed += contribution(WAGER, rounds[rec.body["round_id"]])
        elif rec.kind == "lock-percent-award":
            award = units(RESET) + contributed
            assert parse_units(rec.result["meter_before"], "meter_before") == award, (rec.body, rec.result, award)
            awards += award
            contributed, locks = 0, locks + 1
    assert locks == len(pays) > 0
    wagers = sum(rounds.values())
    current = units(RESET) + contribution(WAGER, wagers) - awards + units(RESET) * locks
    return current

"""Linked progressives end to end: a real Mosquitto (TLS, the shipped ACL), the link authority and three table
daemons as child processes, each table on its own rig, one Five Card Hand Bonus meter shared by Caribbean Stud
(cs-01), Four Card Poker (fcp-02) and Let It Ride (lir-03).

The tables play rounds as a dealer would (chips on the Five Card Hand Bonus spot, the lock-out, the chips
collected, the round settled) while the test injects, one after the other:

1. a broker restart (stopped as its service would be, started again on the same port and persistence);
2. the authority killed with SIGKILL right after the lock-outs (bookings in flight), started again;
3. a table (fcp-02) killed with SIGKILL right after its round was booked, started again, while the other two
   play on;
4. the broker frozen (SIGSTOP) for longer than the tables' link_timeout, then thawed;
5. duplicated and reordered operations: a second client logged in as cs-01 replays cs-01's earlier operations
   (out of order, twice) and one far ahead of its sequence, while cs-01's daemon is stopped (the broker names a
   client after its user: a second client of cs-01's user takes cs-01's place) and the other two play on.

What the test holds as acknowledged: a wager, when the daemon lists it in its round (`round`) and the rig
shows its accepted light; a booking, when the daemon reports the round dealing. While the link is down every
table shows the `link` block in its status and OFFLINE on its sign, and a chip placed then is not accepted (no
light, not listed, counted as not recognized), while the wagers acknowledged before the outage stay (lit, and
booked at the lock-out, which does not wait for a broker that hangs); when the link is back the block clears by
itself. A monitor polls every table's status and sign all along: each table was blocked during each outage it was
in (from its link's next look after the outage began, or after `link_timeout` more when the authority was only
silent; its sign OFFLINE a bus write later), and at no other time (clear again at most `link_timeout`, a poll, a
heartbeat and the reconnection's backoff after the outage ended; a small allowance for a loaded machine on both
edges).

Then two tables hit the top award within the same second, twice: a royal flush on the Five Card Hand Bonus
claimed at cs-01 and fcp-02 at once while lir-03 locks out a round of its own, then at fcp-02 and, as soon as
lir-03's next booking is answered, at cs-01; each pair approved at once. All are paid, in the order the
authority journaled them; each takes the meter as it stood at its lock: the first the whole meter, the second
the reset amount plus exactly what was contributed between the two locks (lir-03's booking, in the second pair).

Finally, everything stopped cleanly: the authority's meter equals reset + every contribution - every award +
seed, exactly, computed from the wagers the test saw acknowledged; the authority's operations of each table are
the table's link journal, entry by entry (each booking once, each acknowledged wager in it); every journal
passes the audit.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.ledger import journal, verify_state_dir
from controller.ledger.chain import Entry
from controller.link import client as link_client
from controller.link.mqtt import MqttLink
from controller.link.outbox import LINK_ACK, LINK_REFUSED, LINK_SEND, OutboxReducer
from controller.linkproto import schema
from controller.money import UNITS_PER_CENT, format_cents, format_dollars_human, format_units, parse_cents, parse_units
from controller.service.control import ControlError, DaemonUnavailable
from hil.rig import Rig

import soak
from broker import Broker, require_mosquitto
from linkrig import (
    AUTHORITY_KEY,
    AuthorityProcess,
    approvers_file,
    contribution,
    password_file,
    signing_key_file,
    units,
)
from rigtable import lit, message, until
from tableproc import BIN, RIG, Tables

pytestmark = soak.mark  # every fault once: no shorter run (-m "not soak" leaves it out)

GAMES = {"cs-01": "caribbean-stud", "fcp-02": "four-card-poker", "lir-03": "let-it-ride"}
AUTHORITY = "link-1"
METER = "fchb-link"  # the authority's meter
LOCAL = "bonus"  # each table's name for it
SPOT = "five-card-hand-bonus"  # the Five Card Hand Bonus Wager on the player's hand: the same id in all three games
PAYTABLE = "five-card-hand-bonus"
RESET = 1_000_000  # cents
WAGER = 100  # cents: the meter's one wager size
LINK_TIMEOUT = Decimal("1.5")  # seconds, each table's
HEARTBEAT = Decimal("0.2")  # seconds, the authority's
POLL = 0.1  # seconds between two looks of the monitor at a table
SLACK = 0.75  # seconds: a loaded machine's scheduling (two cores for eight processes)
WATCH = float(LINK_TIMEOUT) / 4  # how often a table's link looks at the time since it heard the authority
SUPERVISOR = "floor-1"
SECRET = "s3cret-floor"
AUTH = {"supervisor": SUPERVISOR, "secret": SECRET}
ROYAL = ["AS", "KS", "QS", "JS", "TS"]
DEADLINE = 20.0  # any one thing awaited
RUN_DEADLINE = 300.0  # the whole test (a default run takes 30 to 50 s)
TOPICS = schema.Topics()


def run(coro, deadline: float) -> None:
    """Run the test's coroutine with a deadline and check it left no task behind (as conftest does for `async
    def` tests, whose deadline is shorter than this test may need on a loaded machine)."""
    async def main() -> None:
        async with asyncio.timeout(deadline):
            await coro
        leftover = asyncio.all_tasks() - {asyncio.current_task()}
        assert not leftover, f"tasks left running: {leftover}"

    asyncio.run(main())


def entries(db: Path) -> list[Entry]:
    if not db.exists():
        return []
    conn = journal.connect(db, "ro")
    try:
        return [Entry(text) for _seq, _key, text, _hash in journal.rows(conn, 1)]
    finally:
        conn.close()


def pending_in(link_dir: Path) -> set[int]:
    """Operations of a table's link journal that the authority has not answered yet."""
    sent: set[int] = set()
    for e in entries(link_dir / journal.DB_NAME):
        if e.kind == LINK_SEND:
            sent.add(e.result["seq"])
        elif e.kind in (LINK_ACK, LINK_REFUSED):
            sent.discard(e.body["seq"])
    return sent


# --- one table: its daemon, its rig, the rounds it played as the test saw them ------------------------------


class Table:
    def __init__(self, name: str, rig: Rig, proc: Any, log: list[str]) -> None:
        self.name, self.rig, self.proc, self.log = name, rig, proc, log
        self.seat_device = {s: c.name for c in rig.connections().values() if c.kind == "seat" for s in c.seats}
        self.chips: set[int] = set()  # seats with a chip on the spot now
        self.accepted: set[int] = set()  # ... of which the daemon acknowledged these in the round being bet
        self.rid = f"{name}-r1"
        self.rounds: dict[str, tuple[int, ...]] = {}  # round -> seats whose wager was acknowledged at lock-out
        self.rejected = 0  # chips placed while the link was down, none accepted

    @property
    def link_dir(self) -> Path:
        return self.proc.state_dir / "link"

    def note(self, text: str) -> None:
        self.log.append(f"{time.monotonic():.3f} {self.name}: {text}")

    async def info(self) -> dict[str, Any]:
        return await self.proc.control("round")

    @staticmethod
    def listed(info: dict[str, Any]) -> dict[int, int]:
        return {w["seat"]: parse_cents(w["amount"], "amount") for w in info["wagers"] if w["spot"] == SPOT}

    async def wait_round(self, pred, what: str, timeout: float = DEADLINE) -> dict[str, Any]:
        return await self.proc.wait_round(pred, what, timeout)

    async def status(self) -> dict[str, Any]:
        return await self.proc.control("status")

    async def wait_link(self, blocked: bool, what: str, timeout: float = DEADLINE) -> None:
        """The daemon's status shows the link block (or not), and then its sign OFFLINE (or the meters)."""
        deadline = time.monotonic() + timeout
        while True:
            s = await self.status()
            if any(b["block"] == "link" for b in s["blocks"]) == blocked:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what}: blocks {s['blocks']}")
            await asyncio.sleep(0.05)
        if blocked:
            await until(lambda: message(self.rig) == "OFFLINE", lambda: f"{self.name}: {what}: sign {self.rig.sign()}")
        else:
            await until(lambda: message(self.rig) in (None, "WIN"),
                        lambda: f"{self.name}: {what}: sign {self.rig.sign()}")

    async def bet(self, seats: list[int], *, accepted: bool = True) -> None:
        """Chips of WAGER on the spot at `seats`: acknowledged (light lit, listed in the round), or, while the
        link is down, not accepted (no light, not listed, counted as not recognized) and lifted again."""
        before = await self.info()
        assert before["phase"] == "betting", f"{self.name}: {before}"
        self.rid = before["id"]
        for s in seats:
            await self.rig.place_chip(s, SPOT, WAGER)
            self.chips.add(s)
        if accepted:
            await self.wait_round(lambda i: set(seats) <= set(self.listed(i)), f"wagers at {seats} listed")
            await until(lambda: all(SPOT in lit(self.rig, s) for s in seats),
                        lambda: f"{self.name}: accepted lights of {seats}: {self.rig.lights()}")
            self.accepted |= set(seats)
            self.note(f"{self.rid}: wagers at {seats} acknowledged")
            return
        info = await self.wait_round(lambda i: i["not_recognized"] >= before["not_recognized"] + len(seats),
                                     f"chips at {seats} seen and not recognized")
        assert not set(seats) & set(self.listed(info)), f"{self.name}: accepted while the link is down: {info}"
        assert not any(SPOT in lit(self.rig, s) for s in seats), \
            f"{self.name}: accepted light lit while the link is down: {self.rig.lights()}"
        self.rejected += len(seats)
        self.note(f"{self.rid}: chips at {seats} not accepted (link down)")
        await self.collect(seats)

    async def press(self) -> str:
        """The lock-out pressed with the acknowledged wagers listed, exactly; returns the round."""
        info = await self.info()
        assert info["phase"] == "betting" and info["id"] == self.rid, f"{self.name}: {info}"
        assert set(self.listed(info)) == self.accepted and all(c == WAGER for c in self.listed(info).values()), \
            f"{self.name}: the daemon lists {info['wagers']}, the test acknowledged {sorted(self.accepted)}"
        self.rounds[self.rid] = tuple(sorted(self.accepted))
        self.accepted = set()
        await self.rig.press_lockout()
        self.note(f"{self.rid}: lock-out pressed, wagers {self.rounds[self.rid]}")
        return self.rid

    async def dealing(self, timeout: float = DEADLINE) -> None:
        rid = self.rid
        await self.wait_round(lambda i: i["id"] == rid and i["phase"] == "dealing", f"{rid} booked", timeout)
        self.note(f"{rid}: dealing")

    async def lockout(self) -> str:
        rid = await self.press()
        await self.dealing()
        return rid

    async def collect(self, seats: list[int] | None = None) -> None:
        """The chips lifted; each seat's device polled twice since, so that the daemon has seen it."""
        seats = sorted(self.chips) if seats is None else seats
        sims = {s: self.rig.simulator(self.seat_device[s]) for s in seats}
        marks = {s: sim.requests for s, sim in sims.items()}
        for s in seats:
            await self.rig.remove_chip(s, SPOT)
            self.chips.discard(s)
        for s, sim in sims.items():
            await sim.wait_until(lambda s=s, sim=sim: sim.requests >= marks[s] + 2, timeout=DEADLINE)

    async def settle(self) -> None:
        rid = self.rid
        got = await self.proc.control("settle", round_id=rid, timeout=DEADLINE)
        self.note(f"{rid}: settled: {got['message']}")
        nxt = await self.info()
        assert nxt["phase"] == "betting" and nxt["id"] != rid, f"{self.name}: after settling {rid}: {nxt}"
        self.rid = nxt["id"]

    async def play(self, seats: list[int]) -> str:
        """A whole round: wagers at `seats`, lock-out, chips collected, settled."""
        await self.bet(seats)
        rid = await self.lockout()
        await self.collect()
        await self.settle()
        return rid


# --- the monitor: every table's link block and sign, all along ------------------------------------------------


@dataclass
class Sample:
    t0: float  # asked
    t1: float  # answered
    state: str  # "blocked" (the link block), "clear", "down" (no daemon answered)
    sign: str | None  # the message on the table's sign (OFFLINE, WIN, PENDING) or None: the meters
    other_blocks: tuple[str, ...] = ()


@dataclass
class Window:
    """One outage: injected at `start`; undone from `end` (the broker or a daemon being started again, the broker
    thawed) until `back` (listening, READY, thawed)."""

    what: str
    tables: tuple[str, ...]
    start: float
    silent: bool = False  # nothing tells the tables: they notice that the authority is not heard
    reconnect: bool = False  # the connections to the broker were lost: a reconnection's backoff at the end
    killed: bool = False  # the tables' daemons were killed (and started again)
    end: float = float("inf")
    back: float = float("inf")

    @property
    def tol_start(self) -> float:
        """By then every table of the outage is blocked: at its link's next look after the connection was lost
        or the authority's will (offline) came, or after link_timeout and that look when the authority is only
        silent."""
        return (float(LINK_TIMEOUT) if self.silent else 0.0) + WATCH + POLL + SLACK

    @property
    def tol_end(self) -> float:
        """After `back`, by then every table is clear again: it hears the authority's next heartbeat once it
        (and the authority) reconnected, which after a lost connection takes up to the backoff's next wait
        (0.5 s doubled after each failed attempt, 10% jitter: at most the outage's length and 0.55 s). The
        link_timeout is added as the tolerance of the edge."""
        backoff = 1.1 * ((self.back - self.start) + 0.5) if self.reconnect else 0.0
        return float(LINK_TIMEOUT) + POLL + float(HEARTBEAT) + backoff + SLACK


SIGN_LAG = 1.5  # seconds from the daemon's state to its sign: a write on a paced RTU bus shared by nine devices


class Monitor:
    def __init__(self, tables: dict[str, Table]) -> None:
        self.tables = tables
        self.samples: dict[str, list[Sample]] = {t: [] for t in tables}
        self.windows: list[Window] = []
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._watch(t), name=f"monitor:{t.name}") for t in self.tables.values()]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _watch(self, t: Table) -> None:
        while True:
            t0 = time.monotonic()
            try:
                s = await t.proc.control("status", timeout=2.0)
                blocks = {b["block"] for b in s["blocks"]}
                state = "blocked" if "link" in blocks else "clear"
                others = tuple(sorted(blocks - {"link"}))
            except (DaemonUnavailable, ControlError, OSError):
                state, others = "down", ()
            self.samples[t.name].append(Sample(t0, time.monotonic(), state, message(t.rig), others))
            await asyncio.sleep(POLL)

    def open(self, what: str, tables: tuple[str, ...], **kind: bool) -> Window:
        w = Window(what, tables, time.monotonic(), **kind)
        self.windows.append(w)
        return w

    @staticmethod
    def ending(w: Window) -> None:
        w.end = time.monotonic()

    @staticmethod
    def back(w: Window) -> None:
        w.back = time.monotonic()
        if w.end == float("inf"):
            w.end = w.back

    def edges(self) -> dict[str, dict[str, tuple[float, float, float]]]:
        """Per outage and table, for the report: how long after the outage began the table was first seen
        blocked and its sign first seen OFFLINE, and how long after it was back the table was first seen clear."""
        out: dict[str, dict[str, tuple[float, float, float]]] = {}
        for w in self.windows:
            for name in w.tables:
                ss = [s for s in self.samples[name] if w.start <= s.t0 <= w.back + w.tol_end + SIGN_LAG]
                first = next((s.t1 - w.start for s in ss if s.state == "blocked"), float("nan"))
                sign = next((s.t1 - w.start for s in ss if s.sign == "OFFLINE"), float("nan"))
                clear = next((s.t1 - w.back for s in ss if s.t0 >= w.back and s.state == "clear"), float("nan"))
                out.setdefault(f"{w.what} ({w.back - w.start:.1f} s)", {})[name] = \
                    (round(first, 2), round(sign, 2), round(clear, 2))
        return out

    def check(self) -> None:
        """Every table was blocked (its status and, a bus write later, its sign) while it should have been, and
        only then."""
        for name, samples in self.samples.items():
            mine = [w for w in self.windows if name in w.tables]
            assert samples, f"{name}: never sampled"
            for s in samples:
                assert not s.other_blocks, f"{name}: other blocks than the link's: {s}"
                inside = [w for w in mine if w.start <= s.t1 and s.t0 <= w.back + w.tol_end]
                if s.state == "blocked":
                    assert inside, f"{name}: blocked at {s.t0:.2f}, outside every outage: {self._around(name, s)}"
                if s.state == "down":
                    assert any(w.killed and s.t0 <= w.back for w in inside), \
                        f"{name}: no daemon answered at {s.t0:.2f}, and it was not killed then"
                if s.sign == "OFFLINE":
                    assert [w for w in mine if w.start <= s.t1 and s.t0 <= w.back + w.tol_end + SIGN_LAG], \
                        f"{name}: the sign showed OFFLINE at {s.t0:.2f}, outside every outage: {self._around(name, s)}"
            for w in mine:
                during = [s for s in samples if w.start + w.tol_start <= s.t0 and s.t1 <= w.end]
                for s in during:
                    assert s.state in ("blocked", "down"), \
                        f"{name}: not blocked at {s.t0:.2f} during {w.what}: {self._around(name, s)}"
                assert any(s.state in ("blocked", "down") for s in samples
                           if w.start <= s.t0 and s.t1 <= w.back + w.tol_end), f"{name}: never blocked during {w.what}"
                assert any(s.state == "clear" for s in samples if s.t0 >= w.back), f"{name}: not clear after {w.what}"
                if w.killed:
                    continue  # a killed daemon drives no sign: it shows what it showed until the new daemon writes
                first = next((s.t1 for s in samples if s.t0 >= w.start and s.state == "blocked"), None)
                assert first is not None and first <= w.end, f"{name}: not blocked before {w.what} ended"
                for s in samples:
                    if first + SIGN_LAG <= s.t0 and s.t1 <= w.end:
                        assert s.sign == "OFFLINE", f"{name}: the sign shows {s.sign!r} at {s.t0:.2f} during {w.what}"

    def _around(self, name: str, s: Sample) -> str:
        near = [x for x in self.samples[name] if abs(x.t0 - s.t0) < 3.0]
        ws = [(w.what, round(w.start, 2), round(w.end, 2), round(w.back, 2)) for w in self.windows]
        return f"samples near: {[(round(x.t0, 2), x.state, x.sign) for x in near]}; outages: {ws}"


# --- configuration ----------------------------------------------------------------------------------------


def authority_doc(tmp: Path, broker: Broker) -> dict[str, Any]:
    return {
        "authority": AUTHORITY,
        "description": "Five Card Hand Bonus link under test",
        "state_dir": str(tmp / "authority" / "state"),
        "tables": list(GAMES),
        "heartbeat": HEARTBEAT,
        "meters": {METER: {"reset": format_cents(RESET), "rate": "0.15", "wager_sizes": [format_cents(WAGER)]}},
        "mqtt": {"host": broker.host, "port": broker.port, "tls": True, "ca_file": str(broker.ca_file),
                 "username": "authority",
                 "password_file": str(password_file(tmp, "authority", broker.passwords["authority"]))},
        "metrics": {"listen": "127.0.0.1:0"},  # chosen at each start
        "logging": {"format": "json", "level": "info"},
        "approvers_file": str(approvers_file(tmp / "authority-files")),
        "signing_key_file": str(signing_key_file(tmp / "authority-files")),
    }


def table_adjust(tmp: Path, broker: Broker, table: str):
    """The example Caribbean Stud table (its devices are the rig's) made table `table` of game GAMES[table]:
    the Five Card Hand Bonus its only wager, on the linked meter, and the broker to reach the authority."""
    def adjust(doc: dict[str, Any]) -> dict[str, Any]:
        doc["table"] = table
        doc["game"] = GAMES[table]
        doc["description"] = f"{GAMES[table]} on the link"
        doc["wagers"] = {SPOT: {"paytable": PAYTABLE, "meter": LOCAL}}
        doc["meters"] = {LOCAL: {"linked": METER, "wager_sizes": [format_cents(WAGER)]}}
        # three rigs share this test's process: on a loaded machine one can stall past the default 0.25 s reply
        # timeout three times running (seen: the lock-out down for 0.5 s, a block this test counts as wrong);
        # device outages are the subject of other tests, the link's of this one
        for bus in doc["buses"].values():
            bus["timeout"] = 1
        doc["mqtt"] = {"host": broker.host, "port": broker.port, "tls": True, "ca_file": str(broker.ca_file),
                       "username": table, "password_file": str(password_file(tmp, table, broker.passwords[table])),
                       "link_timeout": LINK_TIMEOUT, "authority_keys": [AUTHORITY_KEY]}
        return doc
    return adjust


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def metric(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def sends_of(table: Table) -> dict[int, dict[str, Any]]:
    """seq -> the operation as the table journaled it for sending (kind, linked meter, body)."""
    return {e.result["seq"]: e.body for e in entries(table.link_dir / journal.DB_NAME) if e.kind == LINK_SEND}


def booked_in(table: Table) -> set[str]:
    """The rounds whose booking the table journaled for sending."""
    return {sent["body"]["round_id"] for sent in sends_of(table).values() if sent["kind"] == "book-contributions"}


def op_of(table: str, seq: int, sent: dict[str, Any]) -> bytes:
    return schema.encode(schema.Op(table, seq, sent["kind"], sent["linked"], dict(sent["body"])))


# --- the test ---------------------------------------------------------------------------------------------


@pytest.fixture
def tables():
    made = Tables()
    yield made
    made.close()  # whatever a failed test left running


def test_three_tables_one_linked_meter_through_every_fault(tmp_path, tables):
    require_mosquitto()
    run(_scenario(tmp_path, tables), RUN_DEADLINE)


async def _scenario(tmp: Path, made: Tables) -> None:
    t_begin = time.monotonic()
    log: list[str] = []
    broker = Broker(tmp / "mosquitto", ("authority", *GAMES))
    authority = AuthorityProcess(tmp / "authority", authority_doc(tmp, broker))
    rigs: list[Rig] = []
    monitor: Monitor | None = None
    ts: dict[str, Table] = {}
    try:
        broker.start()
        await authority.start()
        for name in GAMES:
            rig = Rig.from_file(RIG)
            await rig.start()
            rigs.append(rig)
            proc = made.new(rig, tmp / name, supervisors={SUPERVISOR: SECRET}, adjust=table_adjust(tmp, broker, name))
            ts[name] = Table(name, rig, proc, log)
        await asyncio.gather(*(t.proc.start() for t in ts.values()))
        cs, fcp, lir = ts["cs-01"], ts["fcp-02"], ts["lir-03"]
        everyone = tuple(ts)
        await asyncio.gather(*(t.wait_link(False, "the authority heard after the start") for t in ts.values()))
        monitor = Monitor(ts)
        monitor.start()
        t_ready = time.monotonic()

        # -- play, every table at once
        await asyncio.gather(cs.play([1, 3]), fcp.play([2, 4, 7]), lir.play([5]))

        # -- 1. the broker restarts: the rounds just booked are settled while it is away
        await asyncio.gather(cs.bet([2]), fcp.bet([1, 6]), lir.bet([3, 4]))
        await asyncio.gather(*(t.lockout() for t in ts.values()))
        w = monitor.open("broker restart", everyone, reconnect=True)
        await asyncio.to_thread(broker.stop)
        await asyncio.gather(*(t.wait_link(True, "broker stopped") for t in ts.values()))
        await asyncio.gather(*(t.collect() for t in ts.values()))
        await asyncio.gather(*(t.settle() for t in ts.values()))  # the closes wait in the outboxes
        await asyncio.gather(*(t.bet([7], accepted=False) for t in ts.values()))
        monitor.ending(w)
        await asyncio.to_thread(broker.start)
        monitor.back(w)
        await asyncio.gather(*(t.wait_link(False, "broker back") for t in ts.values()))
        await asyncio.gather(cs.play([4, 5]), fcp.play([3]), lir.play([1, 2, 6]))

        # -- 2. the authority killed right after the lock-outs (bookings in flight), started again
        await asyncio.gather(cs.bet([6, 7]), fcp.bet([5]), lir.bet([2, 7]))
        await asyncio.gather(*(t.press() for t in ts.values()))
        w = monitor.open("SIGKILL authority", everyone)
        assert authority.kill()
        await asyncio.gather(*(t.dealing() for t in ts.values()))  # booked in the outbox, whatever the authority
        await asyncio.gather(*(t.wait_link(True, "authority killed") for t in ts.values()))
        await asyncio.gather(*(t.collect() for t in ts.values()))
        await asyncio.gather(*(t.settle() for t in ts.values()))
        await asyncio.gather(*(t.bet([1], accepted=False) for t in ts.values()))
        monitor.ending(w)
        await authority.start()
        monitor.back(w)
        await asyncio.gather(*(t.wait_link(False, "authority back") for t in ts.values()))

        # -- 3. a table killed right after its round was booked; the other two play on, never blocked
        async def kill_and_restart() -> None:
            await fcp.bet([1, 2, 3])
            await fcp.lockout()
            kw = monitor.open("SIGKILL fcp-02", ("fcp-02",), killed=True)
            assert fcp.proc.kill()
            fcp.note("SIGKILL")
            monitor.ending(kw)
            status = await fcp.proc.launch_ready()
            monitor.back(kw)  # from here the table is up again, blocked until it hears the authority
            await fcp.proc.wait_devices_up()
            assert status == f"table fcp-02: round {fcp.rid}", status
            info = await fcp.info()  # resumed: dealing, with exactly its booked wagers
            assert info["id"] == fcp.rid and info["phase"] == "dealing", info
            assert tuple(sorted(fcp.listed(info))) == fcp.rounds[fcp.rid], info
            await fcp.wait_link(False, "fcp-02 restarted")
            await fcp.collect()
            await fcp.settle()

        await asyncio.gather(kill_and_restart(), cs.play([3]), lir.play([4, 5]))

        # -- 4. the broker frozen longer than link_timeout: the wagers acknowledged before stay and are booked
        await asyncio.gather(cs.bet([1, 2]), fcp.bet([4]), lir.bet([6]))
        w = monitor.open("broker frozen", everyone, silent=True)
        broker.pause()
        try:
            await asyncio.gather(*(t.wait_link(True, "broker frozen") for t in ts.values()))
            await asyncio.gather(*(t.bet([5], accepted=False) for t in ts.values()))
            for t in ts.values():  # what was acknowledged before the outage stays a wager, its light lit
                assert set(t.listed(await t.info())) == t.accepted, (t.name, await t.info())
                assert all(SPOT in lit(t.rig, s) for s in t.accepted), (t.name, t.rig.lights())
            t_lock = time.monotonic()
            await asyncio.gather(*(t.lockout() for t in ts.values()))
            took = time.monotonic() - t_lock
            # the booking is durable in the outbox: the round is dealt without waiting for a broker that hangs
            assert took < link_client.PUBLISH_TIMEOUT, f"the lock-outs took {took:.1f} s with the broker frozen"
            log.append(f"lock-outs with the broker frozen: {took:.2f} s")
        finally:
            broker.resume()
            monitor.back(w)
        await asyncio.gather(*(t.wait_link(False, "broker thawed") for t in ts.values()))
        await asyncio.gather(*(t.collect() for t in ts.values()))
        await asyncio.gather(*(t.settle() for t in ts.values()))

        # -- 5. cs-01's operations replayed by a second client logged in as cs-01: twice, out of order, and one far
        #       ahead of its sequence, while the other tables play on (cs-01's daemon is stopped meanwhile: the
        #       broker names each client after its user, so a second client of cs-01 would take its place)
        kw = monitor.open("cs-01 stopped for a replay", ("cs-01",), killed=True)
        await cs.proc.stop()
        monitor.ending(kw)
        await _replay(broker, authority, cs, lir, fcp)
        await cs.proc.launch_ready()
        monitor.back(kw)
        await cs.proc.wait_devices_up()
        await cs.wait_link(False, "cs-01 started again")

        # -- two tables hit the top award within the same second, twice: first claimed at once (the authority's
        #    order decides), while the third table locks out a round; then one after the other with the third
        #    table's booking answered in between (so that the second is paid the reset amount and that booking)
        claims: dict[str, dict[str, Any]] = {}  # claim id -> the claim's answer
        pairs: list[tuple[str, str, int]] = []  # (first claim, second claim, units contributed between, as known)

        async def claim(t: Table, seat: int) -> dict[str, Any]:
            got = await t.proc.control("claim", seat=seat, spot=SPOT, cards=ROYAL, timeout=DEADLINE)
            assert got["status"] == "pending", (t.name, got)
            t.note(f"claim {got['claim_id']}: {got['message']}")
            claims[got["claim_id"]] = {"table": t.name, **got}
            return got

        async def approve_and_settle(*got: dict[str, Any]) -> None:
            approved = await asyncio.gather(*(ts[claims[g["claim_id"]]["table"]].proc.control(
                "approve", claim_id=g["claim_id"], timeout=DEADLINE, **AUTH) for g in got))
            for a in approved:
                assert "approved by floor-1 and paid" in a["message"], a
            await asyncio.gather(*(t.collect() for t in ts.values()))
            await asyncio.gather(*(t.settle() for t in ts.values()))

        await asyncio.gather(cs.bet([2, 5]), fcp.bet([3, 6]), lir.bet([1, 4]))
        await asyncio.gather(cs.lockout(), fcp.lockout())
        await until(lambda: not pending_in(cs.link_dir) and not pending_in(fcp.link_dir), "bookings answered")
        c1, c2, _ = await asyncio.gather(claim(cs, 5), claim(fcp, 6), lir.lockout())
        await approve_and_settle(c1, c2)

        await asyncio.gather(cs.bet([1, 7]), fcp.bet([2]), lir.bet([3, 5, 6]))
        await asyncio.gather(cs.lockout(), fcp.lockout())
        await until(lambda: not pending_in(cs.link_dir) and not pending_in(fcp.link_dir), "bookings answered")
        c3 = await claim(fcp, 2)  # locked at the authority when the claim answers
        await lir.press()
        await until(lambda: lir.rid in booked_in(lir) and not pending_in(lir.link_dir), "lir-03's booking answered")
        c4 = await claim(cs, 7)
        pairs.append((c3["claim_id"], c4["claim_id"], contribution(WAGER, len(lir.rounds[lir.rid]))))
        await lir.dealing()
        await approve_and_settle(c3, c4)
        await asyncio.gather(cs.play([4]), fcp.play([5, 6]), lir.play([2]))  # the reset meter grows again

        # -- everything answered; the monitor's record checked; a clean stop
        await until(lambda: not any(pending_in(t.link_dir) for t in ts.values()), "every outbox answered",
                    timeout=DEADLINE)
        await monitor.stop()
        t_played = time.monotonic()
        monitor.check()
        await asyncio.gather(*(t.proc.stop() for t in ts.values()))
        await authority.stop()
    except BaseException:
        print("\n".join(log[-60:]))
        for t in ts.values():
            print(f"--- {t.name} log (last lines):\n{t.proc.log_tail(25)}\n{t.proc.stderr_tail(10)}")
        print(f"--- authority log (last lines):\n{authority.tail(authority.log_path, 25)}\n"
              f"{authority.tail(authority.stderr_path, 10)}")
        raise
    finally:
        if monitor is not None:
            await monitor.stop()
        for t in ts.values():
            t.proc.close()
        authority.close()
        for rig in rigs:
            await rig.stop()
        broker.stop()

    summary = await _reconcile(authority, ts, claims, pairs)
    print(f"{summary}; played {t_played - t_ready:.1f} s (from the start {t_played - t_begin:.1f} s, with the checks "
          f"{time.monotonic() - t_begin:.1f} s); wagers {sum(len(w) for t in ts.values() for w in t.rounds.values())}, "
          f"rounds {sum(len(t.rounds) for t in ts.values())}, chips refused while the link was down "
          f"{sum(t.rejected for t in ts.values())}; outages (their length) [first blocked, sign first OFFLINE, after "
          f"the start; first clear after the end] (s): {monitor.edges()}")


async def _replay(broker: Broker, authority: AuthorityProcess, cs: Table, *others: Table) -> None:
    sends = sends_of(cs)
    acks = {e.body["seq"]: e.body["entry"] for e in entries(cs.link_dir / journal.DB_NAME) if e.kind == LINK_ACK}
    assert len(acks) >= 8, f"cs-01 has few answered operations to replay: {sorted(acks)}"
    inbox: list[Any] = []

    def on_message(topic: str, payload: bytes) -> None:
        if topic == TOPICS.down("cs-01"):
            inbox.append(schema.decode(topic, payload))

    replayer = MqttLink(broker.settings("cs-01", client_id="cs-01-replay", session_expiry=0),
                        [TOPICS.down("cs-01")])
    task = asyncio.create_task(replayer.run(on_message), name="replayer")
    playing: asyncio.Future | None = None
    try:
        await replayer.wait_connected(DEADLINE)
        before = await asyncio.to_thread(scrape, authority.metrics_url)
        old = sorted(acks)
        replays = [old[4], old[3], old[1], old[4], old[0], old[1]]  # reordered, and some twice
        ahead = max(sends) + 40
        playing = asyncio.ensure_future(asyncio.gather(*(t.play([7]) for t in others)))
        up = TOPICS.up("cs-01")
        await replayer.publish(up, op_of("cs-01", ahead, sends[old[2]]))  # a copy numbered far ahead
        for seq in replays:
            await replayer.publish(up, op_of("cs-01", seq, sends[seq]))
        await playing
        await until(lambda: sum(isinstance(m, schema.Ack) and m.seq in old for m in inbox) >= len(replays)
                    and any(isinstance(m, schema.Expect) for m in inbox),
                    lambda: f"the authority answers every replay: {inbox}")
        for m in inbox:
            if isinstance(m, schema.Ack) and m.seq in acks:  # a repeat: answered with its first outcome
                assert m.entry == acks[m.seq], f"replay of {m.seq} answered with entry {m.entry}, first {acks[m.seq]}"
            if isinstance(m, schema.Expect):
                assert m.next_seq < ahead, m
            assert not isinstance(m, schema.Refused), m
        after = await asyncio.to_thread(scrape, authority.metrics_url)
        repeats = (metric(after, "progressive_link_operations_total", table="cs-01", outcome="repeat")
                   - metric(before, "progressive_link_operations_total", table="cs-01", outcome="repeat"))
        assert repeats >= len(replays), f"{repeats} repeats counted for {len(replays)} replays"
        assert metric(after, "progressive_link_messages_dropped_total", reason="ahead") \
            - metric(before, "progressive_link_messages_dropped_total", reason="ahead") >= 1
        assert metric(after, "progressive_link_messages_dropped_total", reason="stale") == 0
        cs.note(f"replayed {replays} and {ahead}: {len(inbox)} answers, {repeats:g} repeats")
    finally:
        for t in (task, playing):
            if t is not None and not t.done():
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)


async def _reconcile(authority: AuthorityProcess, ts: dict[str, Table], claims: dict[str, dict[str, Any]],
                     pairs: list[tuple[str, str, int]]) -> str:
    # -- the authority's journal, read back
    aj = entries(authority.state_dir / journal.DB_NAME)
    ops: dict[str, dict[int, Entry]] = {t: {} for t in ts}
    for e in aj:
        if e.key.startswith("link:"):
            _, table, seq = e.key.split(":")
            assert int(seq) not in ops[table], f"{e.key} twice in the authority's journal"
            ops[table][int(seq)] = e
    refused = [e for e in aj if e.kind == "link-refused"]
    assert not refused, f"operations refused: {[(e.key, e.body) for e in refused]}"

    # -- each table's link journal, entry by entry, is what the authority applied for it
    for name, t in ts.items():
        report = verify_state_dir(t.link_dir, OutboxReducer())
        assert report.ok, report.summary()
        box = report.state
        assert not box.pending and not box.locks and not box.open_rounds, (name, OutboxReducer().snapshot(box))
        sends = sends_of(t)
        assert sorted(sends) == list(range(1, len(sends) + 1)) == sorted(ops[name]), \
            f"{name}: sent {sorted(sends)}, the authority applied {sorted(ops[name])}"
        acks = {e.body["seq"]: e.body for e in entries(t.link_dir / journal.DB_NAME) if e.kind == LINK_ACK}
        for seq, sent in sends.items():
            applied = ops[name][seq]
            # a payment's signed approval is journaled with it, for the audit
            expected = {"meter": METER, **sent["body"]} | ({"approval": sent["approval"]} if "approval" in sent else {})
            if sent["kind"] == "lock-percent-award":  # the authority gives each lock a nonce of its own
                assert len(applied.body.get("nonce", "")) == 32, applied.body
                expected["nonce"] = applied.body["nonce"]
            assert applied.kind == sent["kind"] and applied.body == expected, \
                f"{name} operation {seq}: sent {sent}, the authority applied {applied.kind} {applied.body}"
            assert acks[seq]["entry"] == applied.seq and acks[seq]["result"] == applied.result, \
                f"{name} operation {seq}: acknowledged {acks[seq]}, journaled at {applied.seq} {applied.result}"
        # every wager the test saw acknowledged is booked once, in its round, and nothing else
        booked = {e.body["round_id"]: tuple(sorted(w["seat"] for w in e.body["wagers"]))
                  for e in ops[name].values() if e.kind == "book-contributions"}
        assert len(booked) == sum(e.kind == "book-contributions" for e in ops[name].values()), f"{name}: a round booked twice"
        for e in ops[name].values():
            if e.kind == "book-contributions":
                assert all(parse_cents(w["amount"], "amount") == WAGER for w in e.body["wagers"]), e.body
        expected = {rid: seats for rid, seats in t.rounds.items() if seats}
        assert booked == expected, f"{name}: the authority booked {booked}, the test acknowledged {expected}"
        closed = {e.body["round_id"] for e in ops[name].values() if e.kind == "close-round"}
        assert closed == set(booked), f"{name}: closed {sorted(closed)}, booked {sorted(booked)}"

    # -- the hits: each takes the whole meter as it stands when locked, in the authority's order: the reset amount
    #    (for the first one, the first reset amount) and what was contributed since the last lock, exactly
    rounds = {rid: seats for t in ts.values() for rid, seats in t.rounds.items()}
    contributed = 0  # meter units, from the wagers the test acknowledged, in the authority's order
    locks: list[tuple[Entry, int]] = []  # (the lock, the award it must take)
    for e in aj:
        if e.kind == "book-contributions":
            contributed += contribution(WAGER, len(rounds[e.body["round_id"]]))
        elif e.kind == "lock-percent-award":
            locks.append((e, units(RESET) + contributed))
            contributed = 0
    assert len(locks) == len(claims) == 4, ([(e.key, e.body) for e, _a in locks], sorted(claims))
    by_claim = {e.body["claim"].rsplit(":", 1)[0]: (e, award) for e, award in locks}
    assert set(by_claim) == set(claims), (sorted(by_claim), sorted(claims))
    for cid, (e, award) in by_claim.items():
        assert e.body["table"] == claims[cid]["table"], (e.body, claims[cid])
        assert parse_cents(e.result["amount"], "amount") == award // UNITS_PER_CENT, (cid, e.result, award)
        assert parse_units(e.result["meter_before"], "meter_before") == award, (cid, e.result, award)
        assert format_dollars_human(award // UNITS_PER_CENT) in claims[cid]["message"], (claims[cid], award)
    gaps = []
    for i in (0, 2):  # two hits within the same second, twice
        (first, _a1), (second, award_second) = locks[i], locks[i + 1]
        gap = (datetime.fromisoformat(second.body["at"]) - datetime.fromisoformat(first.body["at"])).total_seconds()
        assert abs(gap) < 1.0, f"hits {first.body['claim']} and {second.body['claim']} were locked {gap:.3f} s apart"
        gaps.append((first.body["table"], second.body["table"], format_units(award_second - units(RESET)),
                     round(abs(gap), 3)))
    for first_claim, second_claim, between in pairs:  # the pair with a booking answered between the two claims
        assert [by_claim[first_claim][0].seq, by_claim[second_claim][0].seq] == [locks[2][0].seq, locks[3][0].seq]
        assert between > 0 and by_claim[second_claim][1] == units(RESET) + between, (by_claim[second_claim], between)
    pays = [e for e in aj if e.kind == "pay-locked-award"]
    assert sorted(p.body["claim"] for p in pays) == sorted(e.body["claim"] for e, _a in locks)
    awards = sum(award for _e, award in locks)

    # -- offline, as an auditor would read them: the meter, exactly, and the hits in the journal's order
    meters = await _ctl_json("meters", authority.state_dir)
    (m,) = meters
    wagers = sum(len(seats) for seats in rounds.values())
    c_total = contribution(WAGER, wagers)
    seed = units(RESET) * (1 + len(locks))  # the first reset amount, and the reset after each hit
    assert parse_units(m["contributions"], "contributions") == c_total, (m, wagers)
    assert m["qualifying_wagers"] == {"count": wagers, "amount": format_cents(wagers * WAGER)}, m
    assert parse_units(m["meter_awards"], "meter_awards") == awards, m
    assert parse_units(m["seed"], "seed") == seed, m
    assert parse_units(m["current"], "current") == units(RESET) + c_total - awards + units(RESET) * len(locks), m
    assert m["open_rounds"] == [] and m["locked"] == [] and m["voided_rounds"] == 0, m
    hits = [h for h in await _ctl_json("history", authority.state_dir) if h["paid_by"] == "attendant"]
    lock_of = {e.body["claim"]: e for e, _a in locks}
    assert [(h["table"], h["round"], h["seat"], parse_cents(h["amount"], "amount"))
            for h in sorted(hits, key=lambda h: h["number"])] == \
        [(lock_of[p.body["claim"]].body["table"], lock_of[p.body["claim"]].body["round_id"],
          lock_of[p.body["claim"]].body["seat"], parse_cents(lock_of[p.body["claim"]].result["amount"], "amount"))
         for p in pays], (hits, [p.body for p in pays])  # paid, in the order the journal recorded the payments

    # -- every journal passes the audit
    for d in (authority.state_dir, *(t.proc.state_dir for t in ts.values())):
        r = await _ctl("audit", "verify", "--state", str(d), "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, (d.name, r.stdout, r.stderr)
    return (f"meter ${format_cents(parse_units(m['current'], 'current') // UNITS_PER_CENT)}; hits locked within the "
            f"same second [first table, second table, contributed between, seconds apart]: {gaps}")


async def _ctl(*args: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(subprocess.run, [str(BIN / "progressivectl"), *args], capture_output=True,
                                   text=True, timeout=120)


async def _ctl_json(what: str, state_dir: Path) -> Any:
    r = await _ctl(what, "--state", str(state_dir), "--json")
    assert r.returncode == 0, f"progressivectl {what}: {r.returncode}\n{r.stdout}{r.stderr}"
    return json.loads(r.stdout)

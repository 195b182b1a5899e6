"""Link benchmarks: the link authority's throughput against the broker's own delivery rate for the same
messages (same run, same broker), the latency from a table's booking to the authority's commit and to
the new amount at every table of the link, and 1,000 tables at the floor's rate.

    .venv/bin/python bench/bench_link.py             # print the results
    .venv/bin/python bench/bench_link.py --write     # and put them in docs/benchmarks.md ("Linked progressives")
    .venv/bin/python bench/bench_link.py --quick     # a smoke run (under a minute)

Everything goes through one real Mosquitto (tests/support/broker.py: TLS, a password per client, the shipped ACL),
started for the run. The link authority is `progressived --role link --config FILE` in a child process,
started afresh (a new journal) for each measurement. The simulated tables run in this process, the floor's
in child processes.

The workload: each of N tables plays K/2 rounds, one after another; a round is two link operations, the
booking of seven $1 wagers at lock-out (`book-contributions`) and its `close-round` at settlement: K `op`
messages per table, the same bytes (schema.encode(schema.Op(...))) in every measurement. Each table keeps
at most W operations unanswered (W messages unacknowledged in the baseline).

1. Baseline: the broker's delivery rate. Each table is an MqttLink (the link's own transport, as the
   authority's and the tables' own) publishing its K messages with QoS 1 on its own `up` topic, W awaiting
   their PUBACK at a time. A plain subscriber (an MqttLink in a child process, logged in as the
   authority, QoS 1 on `P/tables/+/up`, counting) stands where the authority will stand. Rate: messages
   delivered / (last arrival at the subscriber - first publish). At most N x W messages, and never more
   than 1,000, are on their way to the subscriber (it reports its count): Mosquitto drops QoS 1 messages
   beyond 1,000 queued for a client. The raw tables below keep the same bound on the authority's queue. Beside it, the authority's journal alone (its ledger and reducer in this process, the same
   operations from N concurrent clients, no MQTT).
2. Authority throughput: the same tables send the same operations to the authority, which applies each
   exactly once and durably (journal COMMIT, fsync) before it answers. Rate: operations answered / (last
   answer - first send). Two kinds of table:
   - raw: an MqttLink per table publishing the pre-numbered `op` messages and counting the authority's
     `ack`s (no journal at the table): this isolates the authority;
   - TableLink: the table's own link client with its durable outbox (controller.link.client): each
     operation journaled (fsync) before it is sent, each answer journaled (fsync) when it arrives. On
     this machine the N tables' journals share the authority's disk and CPUs, which a real site's tables,
     each on its own box, do not.
   Exactly once is checked after each run: every table's operations applied once (the authority's
   counters: `applied` = K, nothing dropped), its journal's last sequence number of each table K (next
   expected K + 1), and the meter's contributions exactly those of the bookings sent.
3. Latency, at a moderate load (one booking every 1/RATE s, the M tables in turn, each round's close sent
   after its booking is answered): from the moment the table calls `TableLink.send` (the table daemon
   books at lock-out: outbox journal, fsync, publish) to
   (a) the authority's answer arriving at the table (the `ack`, sent by the authority after its COMMIT);
   (b) the answer journaled in the table's outbox (what `TableLink.answer` returns);
   (c) every one of the M tables holding a meter value that reflects the booking (a retained `meter`
       message whose journal entry is at or after the booking's): the new amount, ready for every sign.
   The figures are the link's only: the table daemon's own lock-out path (button poll, round machine) and
   the sign's bus write are measured by the table benchmark (bench/bench_table.py).

4. The floor: F tables (1,000), each an MQTT session of its own kept open (TLS, its own user), in one child
   process per CPU (`--child-tables`), each booking and closing a round a minute, a paced load on top up to the
   floor's rate (100 operations/s), and every few seconds a hit: a lock and its payment with a supervisor's
   approval signed as the table's pit console signs it. Timed: each operation until its answer's signature and
   digest are verified at the table (ack), and each meter value from the authority's publishing (a timer in its
   process) to the last of the F tables receiving it; the authority's CPU per operation; then a sweep of rates
   for the one at which the ack's p99 passes 20 ms. Then the same again with a fresh authority that publishes each
   meter value at most every `--floor-meter-interval` seconds (its `meter_interval`, 0.25 s) and fresh sessions:
   the floor's rate and the sweep, for what the pace of the meter values costs the acks.

CPU of each process (/proc/PID/stat) over each measurement, and timers around three steps of the
authority's work on each operation (arrival, COMMIT, `ack` publish until its PUBACK), say where the time
goes. --experiment adds, in the same run, the raw throughput and the latency again with TCP_NODELAY forced on
every MQTT client's socket (the link's transport sets it on its own connections; paho-mqtt does not).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

import structlog

from controller.authority.publisher import METER_INTERVAL
from controller.link.mqtt import MqttLink, MqttSettings
from controller.linkproto import schema

SECTION = "## Linked progressives"
COMMAND = ".venv/bin/python bench/bench_link.py --write"
PREFIX = schema.DEFAULT_PREFIX
TOPICS = schema.Topics(PREFIX)
METER = "fchb-link"  # the authority's meter
LOCAL = "fchb"  # the tables' name for it
RESET_CENTS = 1_000_000
RATE = Fraction(15, 100)
WAGER_CENTS = 100
SEATS = 7
AT = datetime.datetime(2026, 11, 30, 1, 2, 3, tzinfo=datetime.UTC)
CLK_TCK = os.sysconf("SC_CLK_TCK")
UNITS_PER_CENT = 10_000
STALL_S = 60.0  # no progress for this long: the run failed
# Mosquitto's queue of QoS 1 messages for one client beyond those in flight (max_queued_messages, not set in the
# shipped mosquitto.conf: 1,000): more on their way to one client are dropped, and a run counting them never ends.
BROKER_QUEUE = 1000


_nodelay = {"on": False, "installed": False}
# The authority's `meter_interval` (--meter-interval) for every authority the benchmark starts but the floor's
# second one; None: not in its file (the default, METER_INTERVAL).
_authority: dict[str, float | None] = {"meter_interval": None}


def nodelay(on: bool) -> None:
    """The experiment: TCP_NODELAY on every MQTT client's socket connected from now on, in this process and
    in the children started from now on (paho-mqtt leaves Nagle's algorithm on; the broker turns it off on
    its side: set_tcp_nodelay in the shipped mosquitto.conf)."""
    import socket

    _nodelay["on"] = on
    os.environ["BENCH_LINK_NODELAY"] = "1" if on else "0"
    if _nodelay["installed"]:
        return
    _nodelay["installed"] = True
    create = socket.create_connection

    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        sock = create(*args, **kwargs)
        if _nodelay["on"]:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    socket.create_connection = create_connection


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


# --- the workload ----------------------------------------------------------------------------------------


def table_ids(n: int) -> tuple[str, ...]:
    return tuple(f"t{i:02d}" for i in range(1, n + 1))


def round_ops(table: str, rounds: range) -> list[tuple[Any, str]]:
    """(meter operation, idempotency key at the table) of `rounds`: a booking and a close each."""
    from controller.meter import ops

    out: list[tuple[Any, str]] = []
    for r in rounds:
        rid = f"{table}-r{r}"
        out.append((ops.BookContributions(rid, table, tuple((s, WAGER_CENTS) for s in range(1, SEATS + 1)), AT),
                    f"{rid}:book:{LOCAL}"))
        out.append((ops.CloseRound(rid, AT), f"{rid}:close:{LOCAL}"))
    return out


def op_payload(table: str, seq: int, op: Any) -> bytes:
    body = op.to_dict()
    body.pop("kind")
    return schema.encode(schema.Op(table, seq, op.kind, METER, body))


def expected_units(bookings: int) -> int:
    total = Fraction(bookings * SEATS * WAGER_CENTS * UNITS_PER_CENT) * RATE
    assert total.denominator == 1
    return int(total)


# --- processes -------------------------------------------------------------------------------------------


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def machine_cpu_s() -> float:
    """CPU seconds every process of the machine has used (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK  # user nice system idle iowait irq softirq steal


def main_thread_cpu_s(pid: int) -> float:
    """CPU seconds of the process' main thread (the event loop's); the rest is its other threads'."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process (the journals' writers too)
    return r.ru_utime + r.ru_stime


class LoadWatch:
    """The 1-minute load average, sampled every second while a run lasts."""

    def __init__(self) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.samples.append(os.getloadavg()[0])

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def settings_doc(s: MqttSettings) -> dict[str, Any]:
    d = asdict(s)
    d["ca_file"] = str(s.ca_file) if s.ca_file else None
    return {k: v for k, v in d.items() if k in ("host", "port", "tls", "ca_file", "username", "password",
                                                 "client_id", "session_expiry", "keepalive")}


def settings_from_doc(d: dict[str, Any]) -> MqttSettings:
    return MqttSettings(**{**d, "ca_file": Path(d["ca_file"]) if d.get("ca_file") else None})


async def start_link(settings: MqttSettings, subscriptions: tuple, on_message) -> tuple[MqttLink, asyncio.Task]:
    mq = MqttLink(settings, subscriptions)
    task = asyncio.create_task(mq.run(on_message))
    await mq.wait_connected(30)
    return mq, task


async def stop_tasks(tasks: list[asyncio.Task]) -> None:
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=30)


# The baseline's subscriber, in a child process: `bench_link.py --child-subscriber` with its settings and the
# number of messages to await on stdin (JSON). It says "ready" once subscribed, then, after the last
# message, the time of the first and the last arrival (time.monotonic: one clock for every process) and its
# own CPU seconds.

async def _subscriber(doc: dict[str, Any]) -> None:
    expect, step = int(doc["expect"]), int(doc["step"])
    count = 0
    first = last = 0.0
    done = asyncio.Event()

    def on_message(_topic: str, _payload: bytes) -> None:
        nonlocal count, first, last
        count += 1
        if count == 1:
            first = time.monotonic()
        if count == expect:
            last = time.monotonic()
            done.set()
        elif count % step == 0:  # the publishers' flow control
            print(json.dumps({"count": count}), flush=True)

    def on_connect() -> None:
        print(json.dumps({"ready": True, "cpu": self_cpu_s()}), flush=True)

    mq = MqttLink(settings_from_doc(doc["settings"]), ((TOPICS.all_up, 1),))
    task = asyncio.create_task(mq.run(on_message, on_connect))
    await done.wait()
    print(json.dumps({"first": first, "last": last, "count": count, "cpu": self_cpu_s()}), flush=True)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Subscriber:
    """The baseline's subscriber: `delivered` follows its count (every `step` messages)."""

    def __init__(self, settings: MqttSettings, expect: int, step: int) -> None:
        self.doc = {"settings": settings_doc(settings), "expect": expect, "step": step}
        self.proc: asyncio.subprocess.Process | None = None
        self.cpu0 = 0.0
        self.delivered = 0
        self.progress = asyncio.Condition()

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--child-subscriber", cwd=str(ROOT),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(self.doc).encode() + b"\n")
        await self.proc.stdin.drain()
        self.proc.stdin.close()
        line = await self._line(30)
        self.cpu0 = line["cpu"]

    async def _line(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError(f"the subscriber exited ({await self.proc.wait()})")
        return json.loads(raw)

    async def follow(self) -> dict[str, Any]:
        """Its counts until the last message; then its result."""
        while True:
            line = await self._line(STALL_S)
            if "count" not in line or "last" in line:
                await asyncio.wait_for(self.proc.wait(), 30)
                return line
            async with self.progress:
                self.delivered = line["count"]
                self.progress.notify_all()

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


# The authority's child: `bench_link.py --child-authority TRACE PROFILE progressived-arguments` runs
# progressived's own main() with timers around three steps of each table operation (the authority's
# Inbox.on_message, OperationSequence.apply and LinkAuthority._reply: a few microseconds per operation), and writes
# their summary to TRACE when it stops. With PROFILE, a cProfile of the event loop's thread (its CPU time, by
# function) goes there too.

def _child_authority(trace: str, profile: str, argv: list[str]) -> int:
    import re

    from controller.authority import authority as A
    from controller.authority.inbox import Inbox
    from controller.authority.sequence import OperationSequence
    from controller.cli import daemon

    arrivals: dict[tuple[str, int], float] = {}
    replied: dict[str, float] = {}
    series: dict[str, list[float]] = {"queued": [], "applied": [], "reply": []}
    seq_of = re.compile(rb'"seq":(\d+)')
    on_message, apply, reply = Inbox.on_message, OperationSequence.apply, A.LinkAuthority._reply

    def timed_on_message(self, topic: str, payload: bytes) -> None:
        parts = self.topics.parse(topic)
        m = seq_of.search(payload)
        if len(parts) == 3 and m is not None:
            arrivals.setdefault((parts[1], int(m.group(1))), time.monotonic())
        on_message(self, topic, payload)

    async def timed_apply(self, op) -> None:
        t1 = time.monotonic()
        replied.pop(op.table, None)
        await apply(self, op)
        t2 = time.monotonic()
        arrived = arrivals.pop((op.table, op.seq), None)
        if arrived is not None and op.table in replied:
            series["queued"].append(t1 - arrived)
            series["applied"].append(t2 - t1 - replied[op.table])
            series["reply"].append(replied[op.table])

    async def timed_reply(self, table: str, msg) -> None:
        t = time.monotonic()
        await reply(self, table, msg)
        replied[table] = time.monotonic() - t

    Inbox.on_message, OperationSequence.apply, A.LinkAuthority._reply = timed_on_message, timed_apply, timed_reply
    from controller.ledger import writer as W
    from controller.ledger.store import SqliteStore

    writer = {"cpu_s": 0.0, "commits": 0, "prepare_cpu_s": 0.0, "write_cpu_s": 0.0}
    writer_run, prepare, append_new = W.Writer._run, W.Writer._prepare, SqliteStore.append_new

    def timed_writer_run(self) -> None:  # the journal writer thread's CPU, taken as it ends
        try:
            writer_run(self)
        finally:
            writer["cpu_s"] += time.thread_time()
            writer["commits"] += self.transactions

    def timed_prepare(self, *args):  # the reducer and the entries' text and hashes, in the writer's thread
        c0 = time.thread_time()
        try:
            return prepare(self, *args)
        finally:
            writer["prepare_cpu_s"] += time.thread_time() - c0

    def timed_append_new(store, rows):  # the INSERT and its COMMIT (SQLite, fsync), in the writer's thread
        c0 = time.thread_time()
        try:
            return append_new(store, rows)
        finally:
            writer["write_cpu_s"] += time.thread_time() - c0

    W.Writer._run, W.Writer._prepare, SqliteStore.append_new = timed_writer_run, timed_prepare, timed_append_new
    from controller.authority.publisher import Publisher

    published: dict[int, float] = {}  # a meter value's journal entry -> when the authority published it
    publish = Publisher.publish

    async def timed_publish(self, topic: str, msg, **kwargs) -> bool:
        if isinstance(msg, schema.MeterValue):
            published.setdefault(msg.entry, time.monotonic())
        return await publish(self, topic, msg, **kwargs)

    Publisher.publish = timed_publish
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile(time.thread_time)
        prof.enable()
    try:
        return daemon.main(argv)
    finally:
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        out: dict[str, Any] = {"ops": len(series["applied"]), "writer": writer, "meters": sorted(published.items())}
        for k, v in series.items():
            if v:
                out[k] = {"mean_ms": statistics.mean(v) * 1e3, "p50_ms": statistics.median(v) * 1e3}
        Path(trace).write_text(json.dumps(out))


def metric_samples(text: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, tuple], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class Authority:
    """`progressived --role link` in a child process, with a journal of its own (a fresh one)."""

    def __init__(self, work: Path, broker: Any, tables: tuple[str, ...], name: str, *, heartbeat: float = 1.0,
                 profile: Path | None = None, protocol: str | None = None, meter_interval: float | None = None) -> None:
        from broker import free_port
        from linkrig import approvers_file, signing_key_file

        self.broker, self.tables, self.name = broker, tables, name
        if meter_interval is None:
            meter_interval = _authority["meter_interval"]
        self.meter_interval = METER_INTERVAL if meter_interval is None else meter_interval
        self.dir = work / f"authority-{name}"
        self.dir.mkdir(parents=True)
        self.state_dir = self.dir / "state"
        self.client_id = f"link-bench-{name}"
        self.metrics_port = free_port()
        password = self.dir / "mqtt-password"
        password.write_text(broker.passwords["authority"] + "\n")
        password.chmod(0o600)
        self.config = self.dir / "authority.toml"
        self.config.write_text("\n".join([
            f'authority = "{self.client_id}"',
            f"state_dir = {json.dumps(str(self.state_dir))}",
            f"tables = {json.dumps(list(tables))}",
            f"heartbeat = {heartbeat}",
            *([f"meter_interval = {meter_interval}"] if meter_interval is not None else []),
            # the approvals and signature a real authority requires (docs/security.md)
            f"approvers_file = {json.dumps(str(approvers_file(self.dir)))}",
            f"signing_key_file = {json.dumps(str(signing_key_file(self.dir)))}",
            "",
            f"[meters.{METER}]",
            f'reset = "{RESET_CENTS // 100}.00"',
            f'rate = "{float(RATE)}"',
            'wager_sizes = ["1.00", "5.00"]',
            "",
            "[mqtt]",
            f'host = "{broker.host}"',
            f"port = {broker.port}",
            "tls = true",
            f"ca_file = {json.dumps(str(broker.ca_file))}",
            'username = "authority"',
            'password_file = "mqtt-password"',
            f'client_id = "{self.client_id}"',
            f'topic_prefix = "{PREFIX}"',
            *([f'protocol = "{protocol}"'] if protocol else []),
            "",
            "[metrics]",
            f'listen = "127.0.0.1:{self.metrics_port}"',
            "",
            "[logging]",
            'format = "json"',
            'level = "info"',
            "",
        ]))
        self.log_path = self.dir / "authority.log"
        self.trace_path = self.dir / "trace.json"
        self.profile = profile
        self.proc: subprocess.Popen | None = None

    async def start(self) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child-authority", str(self.trace_path),
               str(self.profile or ""), "--role", "link", "--config", str(self.config),
               "--socket", str(self.dir / "control.sock")]  # its own: another run's may be listening on the default
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the authority exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            with contextlib.suppress(OSError):
                if self.metric("progressive_link_broker_connected") == 1.0:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the authority did not connect within 30 s:\n{self.log_path.read_text()}")
            await asyncio.sleep(0.05)

    def metrics(self) -> dict[tuple[str, tuple], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return metric_samples(r.read().decode())

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    def cpu(self) -> float:
        assert self.proc is not None
        return proc_cpu_s(self.proc.pid)

    async def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.proc.wait, 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait, 10)
            raise RuntimeError("the authority did not stop on SIGTERM") from None
        if self.proc.returncode != 0:
            raise RuntimeError(f"the authority exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
        # Its MQTT session (kept for an hour) and its retained messages must not reach the next measurement.
        s = self.broker.settings("authority", client_id=self.client_id, session_expiry=0)
        mq, task = await start_link(s, (), lambda _t, _p: None)
        for topic in (TOPICS.meter(METER), TOPICS.status):
            await mq.publish(topic, b"", retain=True)
        await stop_tasks([task])

    def trace(self) -> dict[str, Any]:
        """The timers' summary, written by the child when it stopped."""
        return json.loads(self.trace_path.read_text())

    def journal(self) -> tuple[Any, dict[str, int]]:
        """The linked meter's state in the authority's journal, and its last sequence number of each table."""
        from controller.ledger import Ledger, software_digest
        from controller.ledger.reader import JournalReader
        from controller.link.journal_keys import last_link_seqs
        from controller.round.journal import JournalReducer

        led = Ledger.open(self.state_dir, JournalReducer(), software_digest=software_digest())
        try:
            with JournalReader(led.db_path) as keys:
                return led.state[METER], last_link_seqs(keys)
        finally:
            led.close()


def check_exactly_once(a: Authority, tables: tuple[str, ...], k: int, metrics: dict) -> dict[str, Any]:
    """Every table's K operations applied once; the journal's sequence numbers and the meter's contributions."""
    meter, last = a.journal()
    problems = []
    applied = {t: metrics.get(("progressive_link_operations_total", (("outcome", "applied"), ("table", t))), 0.0)
               for t in tables}
    repeats = sum(v for (n, lab), v in metrics.items()
                  if n == "progressive_link_operations_total" and ("outcome", "repeat") in lab)
    refused = sum(v for (n, lab), v in metrics.items()
                  if n == "progressive_link_operations_total" and ("outcome", "refused") in lab)
    dropped = {dict(lab)["reason"]: v for (n, lab), v in metrics.items()
               if n == "progressive_link_messages_dropped_total" and v}
    if any(v != k for v in applied.values()):
        problems.append(f"applied per table: {sorted(set(applied.values()))}, expected {k}")
    if refused:
        problems.append(f"{refused:g} refused")
    if last != {t: k for t in tables}:
        problems.append(f"journal's last sequence numbers: {sorted(set(last.values()))}, expected {k}")
    want = expected_units(len(tables) * k // 2)
    if meter.contributions != want:
        problems.append(f"contributions {meter.contributions} units, expected {want}")
    if meter.open_rounds:
        problems.append(f"{len(meter.open_rounds)} rounds left open")
    if problems:
        raise AssertionError("not exactly once: " + "; ".join(problems))
    return {"repeats": repeats, "dropped": dropped, "next_seq": k + 1, "contributions": meter.contributions}


class Cpu:
    """CPU seconds of this process, the broker and a child over a measurement."""

    def __init__(self, broker_pid: int, child: Any = None) -> None:
        self.broker_pid, self.child = broker_pid, child
        self.t0 = time.monotonic()
        self.me0, self.me_main0, self.broker0 = self_cpu_s(), main_thread_cpu_s(os.getpid()), proc_cpu_s(broker_pid)
        self.child0 = child.cpu() if child is not None else 0.0
        self.child_main0 = main_thread_cpu_s(child.proc.pid) if child is not None else 0.0

    def stop(self, child_cpu: float | None = None) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        out = {"wall": wall, "tables": self_cpu_s() - self.me0,
               "tables_loop": main_thread_cpu_s(os.getpid()) - self.me_main0,
               "broker": proc_cpu_s(self.broker_pid) - self.broker0, "load": os.getloadavg()[0]}
        if self.child is not None:
            out["child"] = self.child.cpu() - self.child0
            out["child_loop"] = main_thread_cpu_s(self.child.proc.pid) - self.child_main0
        else:
            out["child"] = child_cpu or 0.0
        return out


class Counter:
    """Meter messages the authority publishes (a table's view of P/meters/#), counted by an observer."""

    def __init__(self) -> None:
        self.meters = 0

    def on_message(self, topic: str, payload: bytes) -> None:
        if payload and TOPICS.parse(topic)[:1] == ("meters",) and len(TOPICS.parse(topic)) == 2:
            self.meters += 1


# --- 1: the broker's delivery rate ------------------------------------------------------------------------


async def windowed(payloads: list[bytes], window: int, send) -> None:
    """Send `payloads` in order, at most `window` of them unanswered; `send(i, payload)` returns once the
    message is answered (acknowledged)."""
    sem = asyncio.Semaphore(window)
    tasks = []

    async def one(i: int, p: bytes) -> None:
        try:
            await send(i, p)
        finally:
            sem.release()

    for i, p in enumerate(payloads):
        await sem.acquire()
        tasks.append(asyncio.create_task(one(i, p)))  # started in order: published in order
    await asyncio.gather(*tasks)


async def baseline(broker: Any, tables: tuple[str, ...], payloads: dict[str, list[bytes]], window: int) -> dict:
    """The broker's delivery rate. A PUBACK says the broker has a message, not that it was delivered: with
    nothing else holding them back, the publishers would run ahead of the subscriber, and Mosquitto drops
    QoS 1 messages beyond its queue for a client (max_queued_messages, 1000 by default). So besides the W
    awaiting their PUBACK per table, at most N x W messages are on their way to the subscriber, as in the
    authority runs, where each table has at most W unanswered; and never more than the broker's queue (beyond
    125 tables with W = 8, the dropped messages left the run waiting for them until it timed out)."""
    total = sum(len(p) for p in payloads.values())
    limit = min(len(tables) * window, BROKER_QUEUE)
    sub = Subscriber(broker.settings("bench-subscriber", session_expiry=0), total,
                     max(1, limit // 16))
    links: list[tuple[MqttLink, asyncio.Task]] = []
    rtts: list[float] = []
    follow: asyncio.Task | None = None
    sent = 0
    try:
        await sub.start()
        links = list(await asyncio.gather(*(start_link(broker.settings(t, client_id=f"{t}-base", session_expiry=0),
                                                       (), lambda _t, _p: None) for t in tables)))
        cpu = Cpu(broker.proc.pid)
        t0 = time.monotonic()
        follow = asyncio.create_task(sub.follow())

        async def table(t: str, mq: MqttLink) -> None:
            topic = TOPICS.up(t)

            async def send(_i: int, p: bytes) -> None:
                nonlocal sent
                async with sub.progress:
                    await sub.progress.wait_for(lambda: sent - sub.delivered < limit)
                sent += 1
                s0 = time.monotonic()
                await mq.publish(topic, p, qos=1)
                rtts.append(time.monotonic() - s0)

            await windowed(payloads[t], window, send)

        runs = [asyncio.create_task(table(t, mq)) for t, (mq, _task) in zip(tables, links, strict=True)]
        await watch([*runs], lambda: sub.delivered, "baseline")
        published = time.monotonic()
        res = await asyncio.wait_for(follow, STALL_S)
        used = cpu.stop(res["cpu"] - sub.cpu0)
    finally:
        await stop_tasks([task for _mq, task in links] + ([follow] if follow is not None else []))
        await sub.kill()
    elapsed = res["last"] - t0
    return {"messages": total, "seconds": elapsed, "rate": total / elapsed, "published_s": published - t0,
            "cpu": used, "puback_ms": statistics.median(rtts) * 1e3}


# --- 2: the authority's throughput ------------------------------------------------------------------------


async def raw_tables(work: Path, broker: Any, tables: tuple[str, ...], ops: dict[str, list], window: int,
                     name: str, profile: Path | None, protocol: str | None = None) -> dict:
    """MqttLink tables sending pre-numbered operations and awaiting the authority's acks (the authority's
    MQTT protocol version `protocol`, or its configuration's default)."""
    k = len(next(iter(ops.values())))
    payloads = {t: [op_payload(t, i + 1, op) for i, (op, _key) in enumerate(ops[t])] for t in tables}
    a = Authority(work, broker, tables, name, profile=profile, protocol=protocol)
    links: list[tuple[MqttLink, asyncio.Task]] = []
    waiting: dict[str, dict[int, asyncio.Future]] = {t: {} for t in tables}
    answered = {t: 0 for t in tables}
    odd: list[str] = []
    counter = Counter()
    last_answer = 0.0
    rtts: list[float] = []

    def on_message(t: str):
        def handle(topic: str, payload: bytes) -> None:
            nonlocal last_answer
            msg = schema.decode(topic, payload)
            if isinstance(msg, schema.Ack):
                fut = waiting[t].pop(msg.seq, None)
                if fut is not None and not fut.done():
                    answered[t] += 1
                    last_answer = time.monotonic()
                    fut.set_result(None)
            elif isinstance(msg, schema.Refused | schema.Expect):
                odd.append(f"{t}: {msg}")
        return handle

    try:
        await a.start()
        observer = await start_link(broker.settings("bench-observer", session_expiry=0),
                                    ((f"{PREFIX}/meters/#", 1),), counter.on_message)
        links = list(await asyncio.gather(*(start_link(broker.settings(t, client_id=f"{t}-raw", session_expiry=0),
                                                       ((TOPICS.down(t), 1),), on_message(t)) for t in tables)))
        await asyncio.sleep(0.5)  # the retained meter value delivered to the observer
        meters0 = counter.meters
        cpu = Cpu(broker.proc.pid, a)
        t0 = time.monotonic()
        queue = asyncio.Semaphore(BROKER_QUEUE)

        async def table(t: str, mq: MqttLink) -> None:
            topic = TOPICS.up(t)
            loop = asyncio.get_running_loop()

            async def send(i: int, p: bytes) -> None:
                async with queue:  # no more on their way to the authority than the broker queues for it
                    fut = waiting[t][i + 1] = loop.create_future()
                    s0 = time.monotonic()
                    await mq.publish(topic, p, qos=1)
                    rtts.append(time.monotonic() - s0)
                    await fut

            await windowed(payloads[t], window, send)

        runs = [asyncio.create_task(table(t, mq)) for t, (mq, _task) in zip(tables, links, strict=True)]
        await watch(runs, lambda: sum(answered.values()), "raw tables")
        used = cpu.stop()
        meters = counter.meters - meters0
        metrics = a.metrics()
        await stop_tasks([task for _mq, task in links] + [observer[1]])
        await a.stop()
        if odd:
            raise AssertionError(f"unexpected answers: {odd[:5]}")
        checked = check_exactly_once(a, tables, k, metrics)
    finally:
        await stop_tasks([task for _mq, task in links])
        with contextlib.suppress(Exception):
            await a.stop()
    return {**result("raw", len(tables) * k, last_answer - t0, used, meters, metrics, checked),
            "puback_ms": statistics.median(rtts) * 1e3, "trace": a.trace()}


async def raw_tables_311(work: Path, broker: Any, tables: tuple[str, ...], ops: dict[str, list], window: int,
                         name: str, profile: Path | None) -> dict:
    """raw_tables with the authority on MQTT 3.1.1 (`protocol = "3.1.1"`): no properties on each packet."""
    return await raw_tables(work, broker, tables, ops, window, name, profile, protocol="3.1.1")


async def watch(runs: list[asyncio.Task], progress, what: str) -> None:
    """Wait for `runs`; fail if `progress()` does not move for STALL_S."""
    last, since = -1, time.monotonic()
    while True:
        done, _pending = await asyncio.wait(runs, timeout=1.0)
        if len(done) == len(runs):
            for t in done:
                t.result()
            return
        for t in done:
            if t.exception() is not None:
                for r in runs:
                    r.cancel()
                raise t.exception()
        p = progress()
        if p != last:
            last, since = p, time.monotonic()
        elif time.monotonic() - since > STALL_S:
            for r in runs:
                r.cancel()
            raise RuntimeError(f"{what}: no progress for {STALL_S:g} s at {p} answers")


def result(mode: str, ops: int, seconds: float, cpu: dict, meters: int, metrics: dict, checked: dict) -> dict:
    commit_sum = metrics.get(("progressive_ledger_commit_seconds_sum", ()), 0.0)
    commit_n = metrics.get(("progressive_ledger_commit_seconds_count", ()), 0.0)
    return {"mode": mode, "ops": ops, "seconds": seconds, "rate": ops / seconds, "cpu": cpu,
            "meter_messages": meters, "commit_mean_ms": commit_sum / commit_n * 1e3 if commit_n else None,
            **checked}


def table_mqtt_config(t: str, client_id: str) -> Any:
    from controller.config.model import MqttConfig

    from linkrig import AUTHORITY_KEY

    return MqttConfig(host="127.0.0.1", port=0, tls=True, client_id=client_id, topic_prefix=PREFIX, link_timeout=5.0,
                      authority_keys=(AUTHORITY_KEY,))


class Tables:
    """TableLinks in this process, each with its own link journal."""

    def __init__(self, work: Path, broker: Any, tables: tuple[str, ...], tag: str, *, on_meter=None) -> None:
        from controller.link.client import TableLink

        self.links: dict[str, TableLink] = {}
        for t in tables:
            cid = f"{t}-{tag}"
            self.links[t] = TableLink(t, table_mqtt_config(t, cid), {LOCAL: METER}, work / f"tables-{tag}" / t,
                                      settings=broker.settings(t, client_id=cid, session_expiry=0),
                                      on_meter=(lambda _m, t=t: on_meter(t)) if on_meter else (lambda _m: None))
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(link.open) for link in self.links.values()))

        async def run(link) -> None:
            try:
                await link.run()
            finally:
                link.close()

        self.tasks = [asyncio.create_task(run(link)) for link in self.links.values()]
        deadline = time.monotonic() + 30
        while not all(link.mqtt is not None and link.mqtt.connected and link.alive for link in self.links.values()):
            if time.monotonic() > deadline:
                raise RuntimeError("the tables did not hear the authority within 30 s")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        await stop_tasks(self.tasks)
        self.tasks = []


async def table_links(work: Path, broker: Any, tables: tuple[str, ...], ops: dict[str, list], window: int,
                      name: str, profile: Path | None) -> dict:
    """TableLinks (durable outbox) sending the same operations."""
    k = len(next(iter(ops.values())))
    a = Authority(work, broker, tables, name, profile=profile)
    counter = Counter()
    tl = Tables(work, broker, tables, name)
    answered = 0
    last_answer = 0.0
    observer = None
    sends: list[float] = []
    try:
        await a.start()
        observer = await start_link(broker.settings("bench-observer", session_expiry=0),
                                    ((f"{PREFIX}/meters/#", 1),), counter.on_message)
        await tl.start()
        await asyncio.sleep(0.5)
        meters0 = counter.meters
        cpu = Cpu(broker.proc.pid, a)
        t0 = time.monotonic()

        async def table(t: str) -> None:
            nonlocal answered, last_answer
            link = tl.links[t]
            sem = asyncio.Semaphore(window)
            waits = []

            async def wait(seq: int) -> None:
                nonlocal answered, last_answer
                try:
                    await link.answer(seq, STALL_S)
                    answered += 1
                    last_answer = time.monotonic()
                finally:
                    sem.release()

            for op, key in ops[t]:  # one send after another, as the table daemon sends
                await sem.acquire()
                s0 = time.monotonic()
                seq = await link.send(op, LOCAL, key)
                sends.append(time.monotonic() - s0)
                waits.append(asyncio.create_task(wait(seq)))
            await asyncio.gather(*waits)

        runs = [asyncio.create_task(table(t)) for t in tables]
        await watch(runs, lambda: answered, "TableLink tables")
        used = cpu.stop()
        meters = counter.meters - meters0
        metrics = a.metrics()
        await tl.stop()
        await stop_tasks([observer[1]])
        await a.stop()
        checked = check_exactly_once(a, tables, k, metrics)
    finally:
        await tl.stop()
        if observer is not None:
            await stop_tasks([observer[1]])
        with contextlib.suppress(Exception):
            await a.stop()
    return {**result("tablelink", len(tables) * k, last_answer - t0, used, meters, metrics, checked),
            "send_ms": statistics.median(sends) * 1e3, "trace": a.trace()}


async def journal_alone(work: Path, tables: tuple[str, ...], ops: dict[str, list], name: str) -> dict:
    """The authority's journal without MQTT: its ledger and reducer, in this process, the same operations
    submitted as the authority submits them (one client per table, each awaiting its receipt)."""
    from controller.ledger import Ledger, software_digest
    from controller.ledger.chain import utc_now
    from controller.meter.journal import DEFINE_METER, define_meter_body
    from controller.meter.params import MeterParams
    from controller.round.journal import JournalReducer

    led = Ledger.open(work / f"journal-{name}", JournalReducer(), software_digest=software_digest())
    try:
        params = MeterParams(METER, RESET_CENTS, RATE, (100, 500))
        led.submit(DEFINE_METER, define_meter_body(params, "bench", utc_now()), f"define:{METER}")
        latencies: list[float] = []

        async def client(t: str) -> None:
            for i, (op, _key) in enumerate(ops[t]):
                body = op.to_dict()
                kind = body.pop("kind")
                s0 = time.monotonic()
                await led.submit_async(kind, {"meter": METER, **body}, f"link:{t}:{i + 1}")
                latencies.append(time.monotonic() - s0)

        tx0 = led.transactions
        cpu0, t0 = self_cpu_s(), time.monotonic()
        await asyncio.gather(*(client(t) for t in tables))
        wall, cpu = time.monotonic() - t0, self_cpu_s() - cpu0
        n = len(latencies)
        if led.state[METER].contributions != expected_units(n // 2):
            raise AssertionError("journal alone: contributions")
        return {"ops": n, "rate": n / wall, "cpu": {"wall": wall, "child": cpu, "load": os.getloadavg()[0]},
                "commit_mean_ms":
                statistics.mean(latencies) * 1e3, "per_commit": n / max(1, led.transactions - tx0)}
    finally:
        led.close()


# --- 3: latency ---------------------------------------------------------------------------------------------


async def _polled(done: Callable[[], object], failed: str, timeout: float = 10.0) -> None:
    """Wait until `done()` holds, polling: what it reads has no event to wait on."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(failed)
        await asyncio.sleep(0.05)


async def latency(work: Path, broker: Any, tables: tuple[str, ...], samples: int, rate: float, name: str) -> dict:
    a = Authority(work, broker, tables, name)
    seen: dict[str, list[tuple[float, int]]] = {t: [] for t in tables}  # (arrival, meter value's entry)
    acks: dict[tuple[str, int], tuple[float, int]] = {}  # (table, seq) -> (arrival, authority's entry)
    tl: Tables | None = None

    def on_meter(t: str) -> None:
        v = tl.links[t].values.get(METER)
        if v is not None:
            seen[t].append((time.monotonic(), v.entry))

    try:
        await a.start()
        tl = Tables(work, broker, tables, name, on_meter=on_meter)
        for t, link in tl.links.items():  # the moment each answer arrives, before the table journals it
            down = TOPICS.down(t)
            inner = link._on_message

            def hook(topic: str, payload: bytes, t=t, down=down, inner=inner) -> None:
                if topic == down:
                    d = json.loads(payload)
                    if d.get("type") == "ack":
                        acks[(t, d["seq"])] = (time.monotonic(), d["entry"])
                inner(topic, payload)

            link._on_message = hook
        await tl.start()
        # every table holds this authority's meter (the reset amount)
        await _polled(lambda: all(tl.links[t].values.get(METER) and tl.links[t].values[METER].cents == RESET_CENTS
                                  for t in tables), "the tables did not get the authority's meter")
        locks = {t: asyncio.Lock() for t in tables}
        rows: list[dict] = []
        cpu = Cpu(broker.proc.pid, a)
        start = time.monotonic()

        async def sample(i: int) -> None:
            t = tables[i % len(tables)]
            link = tl.links[t]
            book, close = round_ops(t, range(i + 1, i + 2))
            async with locks[t]:  # a table sends one operation after another
                t0 = time.monotonic()
                seq = await link.send(book[0], LOCAL, book[1])
                sent = time.monotonic()
            await link.answer(seq, STALL_S)
            rows.append({"table": t, "seq": seq, "t0": t0, "sent": sent, "journaled": time.monotonic()})
            async with locks[t]:
                cseq = await link.send(close[0], LOCAL, close[1])
            await link.answer(cseq, STALL_S)

        tasks = []
        for i in range(samples):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(sample(i)))
        await asyncio.gather(*tasks)
        top = max(acks[(r["table"], r["seq"])][1] for r in rows)
        await _polled(lambda: all(seen[t] and seen[t][-1][1] >= top for t in tables),
                      "not every table got the last meter value")
        used = cpu.stop()
        metrics = a.metrics()
        await tl.stop()
        await a.stop()
    finally:
        if tl is not None:
            await tl.stop()
        with contextlib.suppress(Exception):
            await a.stop()
    out = {"tables": len(tables), "samples": len(rows), "rate": rate, "cpu": used, "trace": a.trace()}
    series: dict[str, list[float]] = {"send": [], "ack": [], "journaled": [], "signs": [], "ack_to_signs": []}
    for r in rows:
        ack_at, entry = acks[(r["table"], r["seq"])]
        shown = max(next(at for at, e in seen[t] if e >= entry and at >= r["t0"]) for t in tables)
        series["send"].append(r["sent"] - r["t0"])
        series["ack"].append(ack_at - r["t0"])
        series["journaled"].append(r["journaled"] - r["t0"])
        series["signs"].append(shown - r["t0"])
        series["ack_to_signs"].append(shown - ack_at)
    for k, v in series.items():
        v = sorted(x * 1e3 for x in v)
        out[k] = {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "max": v[-1]}
    commit_sum = metrics.get(("progressive_ledger_commit_seconds_sum", ()), 0.0)
    commit_n = metrics.get(("progressive_ledger_commit_seconds_count", ()), 0.0)
    out["commit_mean_ms"] = commit_sum / commit_n * 1e3 if commit_n else None
    return out


# --- 4: the floor: 1,000 tables, each a session of its own -------------------------------------------------

# The simulated tables of the floor run, in child processes (one per CPU): `bench_link.py --child-tables` with its
# share of the tables on stdin (JSON). Each table is an MqttLink, TLS, its own user and session, subscribed as a
# table daemon's link is (its `down` topic, the meters, the authority's heartbeat and status), kept open for the
# whole run. It says "ready" once every one of its tables holds the authority's meter value; then, for each phase
# line it reads ({"rate": operations/s of the whole floor, "seconds", "hit_s"}), plays the phase and prints what
# it measured; an empty line ends it with the meter values' arrivals by journal entry.

FLOOR_ROUND_S = 60.0  # each table books and closes a round a minute
FLOOR_ACK_MS = 20.0  # the sweep looks for the rate at which the ack's p99 passes this
CONNECTING = 50  # connections opened at once by one child (Mosquitto listens with a backlog of 100)
ENTRY = __import__("re").compile(rb'"entry":(\d+)')


def floor_schedule(tables: list[str], children: int, rate: float, seconds: float, seed: int) -> list[tuple[float, str]]:
    """(offset in s, table) of the rounds this child starts in a phase: each of its tables one round a minute
    (at a phase of its own), and the rest of the floor's `rate` (two operations a round) paced over its tables in
    turn. Pure: the same arguments give the same rounds."""
    import random

    rng = random.Random(seed)
    rounds_s = rate / 2 / children  # this child's share of the floor's rounds per second
    own = min(rounds_s, len(tables) / FLOOR_ROUND_S)  # a round a minute per table, or fewer if the rate is lower
    period = len(tables) / own if own else float("inf")
    out: list[tuple[float, str]] = []
    for t in tables:
        at = rng.uniform(0, period)
        while at < seconds:
            out.append((at, t))
            at += period
    extra = rounds_s - own
    if extra > 0:
        i, at = 0, rng.uniform(0, 1 / extra)
        while at < seconds:
            out.append((at, tables[i % len(tables)]))
            i, at = i + 1, at + 1 / extra
    return sorted(out)


class FloorSession(asyncio.Protocol):
    """A floor table's MQTT 5 session, TLS, kept open: the little of the protocol a table uses (CONNECT with its
    user, SUBSCRIBE QoS 1, PUBLISH QoS 1 both ways with their PUBACKs, PINGREQ), parsed as the bytes arrive on
    asyncio's own TLS. The link's transport (aiomqtt over paho-mqtt) spends about 300 µs of CPU on each message it
    receives; 1,000 tables receiving every meter value, some 18,000 messages a second, would need several CPUs for
    the simulation alone."""

    def __init__(self, settings: MqttSettings, subscriptions: tuple[str, ...], on_message) -> None:
        self.settings, self.subscriptions, self.on_message = settings, subscriptions, on_message
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.next_id = 0
        self.connacked = asyncio.Event()
        self.subscribed = asyncio.Event()
        self.failed: str | None = None

    @staticmethod
    def _varint(n: int) -> bytes:
        out = bytearray()
        while True:
            n, b = n >> 7, n & 0x7F
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    @staticmethod
    def _str(s: str | bytes) -> bytes:
        b = s.encode() if isinstance(s, str) else s
        return len(b).to_bytes(2, "big") + b

    def _send(self, first: int, body: bytes) -> None:
        assert self.transport is not None
        self.transport.write(bytes((first,)) + self._varint(len(body)) + body)

    def _id(self) -> int:
        self.next_id = self.next_id % 65535 + 1
        return self.next_id

    async def connect(self, timeout: float) -> None:
        import ssl

        s = self.settings
        ctx = ssl.create_default_context(cafile=str(s.ca_file))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.create_connection(lambda: self, s.host, s.port, ssl=ctx, server_hostname=s.host),
                               timeout)
        props = b"\x11" + s.session_expiry.to_bytes(4, "big")  # session expiry interval
        var = self._str("MQTT") + bytes((5, 0x80 | 0x40 | 0x02)) + s.keepalive.to_bytes(2, "big") + \
            self._varint(len(props)) + props
        self._send(0x10, var + self._str(s.client_id) + self._str(s.username or "") + self._str(s.password or ""))
        await asyncio.wait_for(self.connacked.wait(), timeout)
        subs = b"".join(self._str(t) + b"\x01" for t in self.subscriptions)
        self._send(0x82, self._id().to_bytes(2, "big") + b"\x00" + subs)
        await asyncio.wait_for(self.subscribed.wait(), timeout)
        if self.failed:
            raise RuntimeError(self.failed)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.failed = self.failed or f"{self.settings.username}: connection lost ({exc})"
        self.connacked.set()
        self.subscribed.set()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 2:
            n = shift = 0
            i = 1
            while True:
                if i >= len(buf):
                    return
                b = buf[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            if len(buf) < i + n:
                return
            first, body = buf[0], bytes(buf[i:i + n])
            del buf[:i + n]
            self._packet(first, body)

    def _packet(self, first: int, body: bytes) -> None:
        kind = first >> 4
        if kind == 3:  # PUBLISH
            n = int.from_bytes(body[:2], "big")
            topic = body[2:2 + n].decode()
            i = 2 + n
            if (first >> 1) & 3:
                assert self.transport is not None
                self.transport.write(b"\x40\x02" + body[i:i + 2])  # PUBACK
                i += 2
            plen = shift = 0
            while True:  # the properties' length (none are read)
                b = body[i]
                i += 1
                plen |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            self.on_message(topic, body[i + plen:])
        elif kind == 2:  # CONNACK
            if body[1] != 0:
                self.failed = f"{self.settings.username}: CONNACK reason {body[1]:#x}"
            self.connacked.set()
        elif kind == 9:  # SUBACK
            if any(c > 2 for c in body[3 + body[2]:]):
                self.failed = f"{self.settings.username}: a subscription refused ({body.hex()})"
            self.subscribed.set()

    def publish(self, topic: str, payload: bytes) -> None:
        """QoS 1; its PUBACK is let go (the answer that matters is the authority's)."""
        if self.failed:
            raise RuntimeError(self.failed)
        self._send(0x32, self._str(topic) + self._id().to_bytes(2, "big") + b"\x00" + payload)

    def unsubscribe(self, topic: str) -> None:
        self._send(0xA2, self._id().to_bytes(2, "big") + b"\x00" + self._str(topic))

    def ping(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"\xc0\x00")

    async def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"\xe0\x00")  # DISCONNECT
            self.transport.close()


class FloorTable:
    """One simulated table of the floor: its session, its operations' numbers, the answers it awaits."""

    def __init__(self, table: str, settings: MqttSettings, verifier: Any, meter_seen: dict[int, list]) -> None:
        self.table, self.settings, self.verifier = table, settings, verifier
        self.seq = 0
        self.lock = asyncio.Lock()  # a table sends one operation after another
        self.waiting: dict[int, tuple[str, asyncio.Future]] = {}  # seq -> (digest, answer)
        self.meter_entry = -1
        self.meter_seen = meter_seen  # entry -> [tables that got it, last arrival], shared by the child's tables
        self.has_meter = asyncio.Event()
        self.odd: list[str] = []
        self.mq: FloorSession | None = None
        self.down = TOPICS.down(table)
        self.meter_topic = TOPICS.meter(METER)

    def on_message(self, topic: str, payload: bytes) -> None:
        if topic == self.meter_topic:
            # the entry only: checking every meter value's signature at every table (Ed25519, ~18,000 a second
            # over the floor) would need more CPU than this machine has; the answers are checked in full
            m = ENTRY.search(payload)
            if m is None:
                return
            now, entry = time.monotonic(), int(m.group(1))
            if entry > self.meter_entry:
                self.meter_entry = entry
                seen = self.meter_seen.setdefault(entry, [0, 0.0])
                seen[0] += 1
                seen[1] = max(seen[1], now)
                self.has_meter.set()
        elif topic == self.down:
            if self.verifier.check(topic, payload) is not None:
                self.odd.append(f"{self.table}: an answer not signed by the authority")
                return
            msg = schema.decode(topic, payload)
            got = self.waiting.get(getattr(msg, "seq", -1))
            if got is None:
                return
            digest, fut = got
            if not isinstance(msg, schema.Ack) or msg.op != digest:
                self.odd.append(f"{self.table}: {msg}")
                return
            del self.waiting[msg.seq]
            if not fut.done():
                fut.set_result((time.monotonic(), msg))

    async def connect(self) -> None:
        self.mq = FloorSession(self.settings, TOPICS.table_subscriptions(self.table), self.on_message)
        await self.mq.connect(60)

    async def send(self, op: Any, approval: dict[str, str] | None = None) -> tuple[float, float, Any]:
        """One operation, once the table's previous one is answered: (sent, answer verified, the Ack)."""
        assert self.mq is not None
        async with self.lock:
            self.seq += 1
            body = op.to_dict()
            body.pop("kind")
            msg = schema.Op(self.table, self.seq, op.kind, METER, body, approval)
            fut = asyncio.get_running_loop().create_future()
            self.waiting[self.seq] = (schema.op_digest(msg), fut)
            t0 = time.monotonic()
            self.mq.publish(TOPICS.up(self.table), schema.encode(msg))
            at, ack = await asyncio.wait_for(fut, STALL_S)
            return t0, at, ack


async def _floor_tables(doc: dict[str, Any]) -> None:
    from controller.linkproto import signing
    from controller.meter import ops

    from linkrig import AUTHORITY_KEY, signed

    verifier = signing.Verifier((AUTHORITY_KEY,))
    meter_seen: dict[int, list] = {}
    base = settings_from_doc(doc["settings"])
    tables = {t: FloorTable(t, MqttSettings(**{**asdict(base), "username": t, "client_id": t, "password": pw}),
                            verifier, meter_seen) for t, pw in doc["tables"].items()}
    names = list(tables)
    opening = asyncio.Semaphore(CONNECTING)

    async def connect(ft: FloorTable) -> None:
        async with opening:
            await ft.connect()

    await asyncio.gather(*(connect(ft) for ft in tables.values()))
    await asyncio.wait_for(asyncio.gather(*(ft.has_meter.wait() for ft in tables.values())), STALL_S)
    print(json.dumps({"ready": True}), flush=True)

    async def ping() -> None:  # each session's keepalive
        while True:
            await asyncio.sleep(base.keepalive / 2)
            for ft in tables.values():
                assert ft.mq is not None
                if ft.mq.failed:
                    raise RuntimeError(ft.mq.failed)  # a session lost fails the run
                ft.mq.ping()

    pings = asyncio.create_task(ping())
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    rounds = 0
    while line := (await reader.readline()).strip():
        phase = json.loads(line)
        if phase.get("unsubscribe"):  # the experiment: no meter values to the tables from now on
            for ft in tables.values():
                assert ft.mq is not None
                ft.mq.unsubscribe(f"{PREFIX}/meters/#")
            await asyncio.sleep(1.0)  # the UNSUBACKs, and the values already on their way
            print(json.dumps({"unsubscribed": True}), flush=True)
            continue
        rows: list[tuple[str, float]] = []  # (kind, ms from sending to the verified answer)
        t_start = time.monotonic()
        cpu0 = self_cpu_s()

        async def play(t: str, n: int, hit: bool, rows: list[tuple[str, float]]) -> None:
            ft = tables[t]
            rid = f"{t}-r{n}"
            book = ops.BookContributions(rid, t, tuple((s, WAGER_CENTS) for s in range(1, SEATS + 1)), AT)
            s0, s1, _ack = await ft.send(book)
            rows.append((book.kind, (s1 - s0) * 1e3))
            if hit:  # a hit, locked, and approved by a supervisor as a table's pit console signs it
                claim = f"{rid}-c1:0"
                lock = ops.LockPercentAward(rid, t, 3, "royal-flush", "10% of meter", Fraction(10), AT, claim)
                s0, s1, ack = await ft.send(lock)
                rows.append((lock.kind, (s1 - s0) * 1e3))
                pay = ops.PayLockedAward(claim, "floor-1", AT)
                s0, s1, _ack = await ft.send(pay, signed(pay, t, locked=ack.result, lock=lock))
                rows.append((pay.kind, (s1 - s0) * 1e3))
            close = ops.CloseRound(rid, AT)
            s0, s1, _ack = await ft.send(close)
            rows.append((close.kind, (s1 - s0) * 1e3))

        plan = floor_schedule(names, doc["children"], phase["rate"], phase["seconds"], doc["seed"] + rounds)
        hit_every = phase["hit_s"] * doc["children"]  # this child's share of the floor's hits
        next_hit = hit_every * (doc["index"] + 0.5) / doc["children"]
        tasks = []
        for offset, t in plan:
            delay = t_start + offset - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            hit = offset >= next_hit
            if hit:
                next_hit += hit_every
            rounds += 1
            tasks.append(asyncio.create_task(play(t, rounds, hit, rows)))
        sent_s = time.monotonic() - t_start
        await asyncio.gather(*tasks)
        print(json.dumps({"rows": rows, "sent_s": sent_s, "seconds": time.monotonic() - t_start,
                          "cpu": self_cpu_s() - cpu0,
                          "odd": [o for ft in tables.values() for o in ft.odd][:5]}), flush=True)
    await asyncio.sleep(0.5)  # the last meter value on its way
    print(json.dumps({"meters": {str(e): v for e, v in meter_seen.items()},
                      "seqs": {t: ft.seq for t, ft in tables.items()}}), flush=True)
    pings.cancel()
    await asyncio.gather(*(ft.mq.close() for ft in tables.values() if ft.mq is not None), return_exceptions=True)


class FloorChild:
    """One child process of simulated floor tables."""

    def __init__(self, index: int, children: int, broker: Any, tables: list[str], floor_tables: int,
                 seed: int) -> None:
        s = broker.settings(tables[0], session_expiry=3600, keepalive=30)
        self.doc = {"index": index, "children": children, "settings": settings_doc(s), "floor_tables": floor_tables,
                    "seed": seed + 1000 * index, "tables": {t: broker.passwords[t] for t in tables}}
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--child-tables", cwd=str(ROOT),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=64 * 1024 * 1024)
        await self.say(self.doc)

    async def say(self, doc: dict[str, Any] | None) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(doc) if doc is not None else "").encode() + b"\n")
        await self.proc.stdin.drain()

    async def line(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError(f"a child of floor tables exited ({await self.proc.wait()})")
        return json.loads(raw)

    def cpu(self) -> float:
        assert self.proc is not None
        return proc_cpu_s(self.proc.pid)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def floor(work: Path, broker: Any, tables: tuple[str, ...], args: argparse.Namespace, *, name: str = "floor",
                meter_interval: float | None = None, unmetered: bool = True) -> dict:
    """The floor run: the tables in `args.children` child processes, the authority's answers and meter values
    timed at its rate (`args.floor_rate`), then a sweep of higher rates until the ack's p99 passes FLOOR_ACK_MS
    (and, with `unmetered`, the floor's rate again with the tables not taking the meter values). The authority
    publishes the meter values at most every `meter_interval` seconds (None: --meter-interval's or its default)."""
    children = max(1, min(args.children, len(tables)))
    a = Authority(work, broker, tables, name, meter_interval=meter_interval)
    kids = [FloorChild(i, children, broker, list(tables[i::children]), len(tables), args.seed)
            for i in range(children)]
    phases: list[dict[str, Any]] = []
    try:
        await a.start()
        c0 = time.monotonic()
        await asyncio.gather(*(k.start() for k in kids))
        await asyncio.gather(*(k.line(STALL_S * 5) for k in kids))  # every table connected, holding the meter
        connect_s = time.monotonic() - c0
        print(f"floor: {len(tables)} tables connected in {connect_s:.1f} s ({children} processes), meter values at "
              f"most every {a.meter_interval * 1e3:g} ms", flush=True)
        plan = [(args.floor_rate, args.floor_seconds, True)] + [(r, args.sweep_seconds, True) for r in args.sweep]
        while plan:
            rate, seconds, meters = plan.pop(0)
            if not meters:
                await asyncio.gather(*(k.say({"unsubscribe": True}) for k in kids))
                await asyncio.gather(*(k.line(STALL_S) for k in kids))
            cpu0 = {"authority": a.cpu(), "broker": proc_cpu_s(broker.proc.pid),
                    "tables": sum(k.cpu() for k in kids), "bench": self_cpu_s(), "machine": machine_cpu_s()}
            t0 = time.monotonic()
            doc = {"rate": rate, "seconds": seconds, "hit_s": args.hit_s}
            await asyncio.gather(*(k.say(doc) for k in kids))
            lines = await asyncio.gather(*(k.line(seconds + STALL_S) for k in kids))
            t1 = time.monotonic()
            cpu = {"authority": a.cpu() - cpu0["authority"], "broker": proc_cpu_s(broker.proc.pid) - cpu0["broker"],
                   "tables": sum(k.cpu() for k in kids) - cpu0["tables"], "load": os.getloadavg()[0],
                   "bench": self_cpu_s() - cpu0["bench"], "machine": machine_cpu_s() - cpu0["machine"]}
            # the other work on the machine meanwhile: what all its processes used, less the run's own
            cpu["others"] = max(0.0, cpu["machine"] - cpu["authority"] - cpu["broker"] - cpu["tables"] - cpu["bench"])
            odd = [o for ln in lines for o in ln["odd"]]
            if odd:
                raise AssertionError(f"floor: unexpected answers: {odd[:5]}")
            rows = [r for ln in lines for r in ln["rows"]]
            acks = sorted(ms for _k, ms in rows)
            pays = sorted(ms for k, ms in rows if k in ("lock-percent-award", "pay-locked-award"))
            sent_s = max(ln["sent_s"] for ln in lines)
            ph = {"rate": rate, "seconds": seconds, "t0": t0, "t1": t1, "ops": len(rows), "sent_s": sent_s,
                  "meters": meters,
                  "achieved": len(rows) / (t1 - t0), "cpu": cpu, "hits": len(pays) // 2,
                  "ack": {"p50": percentile(acks, 0.5), "p99": percentile(acks, 0.99), "max": acks[-1]},
                  "hit_ack": {"p50": percentile(pays, 0.5), "p99": percentile(pays, 0.99)} if pays else None}
            phases.append(ph)
            print(f"floor: {rate:g} ops/s for {seconds:g} s: {ph['ops']} operations ({ph['achieved']:.0f}/s), "
                  f"ack p50 {ph['ack']['p50']:.1f} p99 {ph['ack']['p99']:.1f} ms, {ph['hits']} hits, "
                  f"authority {us_per(cpu['authority'], len(rows)):.0f} µs/op, "
                  f"tables {cpu['tables'] / (t1 - t0):.2f} CPU, meter values to the tables {meters}, "
                  f"broker {cpu['broker'] / (t1 - t0):.2f} CPU, other work {cpu['others'] / (t1 - t0):.2f} CPU, "
                  f"load {cpu['load']:.1f}", flush=True)
            if not meters:
                break
            if len(phases) == 1 and args.sweep and ph["ack"]["p99"] > FLOOR_ACK_MS:  # past it: the sweep goes down
                plan = [(rate / 2, args.sweep_seconds, True), (rate / 4, args.sweep_seconds, True)]
            elif len(phases) > 1 and (ph["ack"]["p99"] > FLOOR_ACK_MS) != (phases[0]["ack"]["p99"] > FLOOR_ACK_MS):
                plan = []  # the sweep found the rate
            if not plan and unmetered and args.unmetered:
                # the experiment: the floor's rate again with the tables no longer taking the meter values
                plan = [(args.floor_rate, args.sweep_seconds, False)]
        await asyncio.gather(*(k.say(None) for k in kids))
        finals = await asyncio.gather(*(k.line(STALL_S) for k in kids))
        metrics = a.metrics()
        await a.stop()
    finally:
        for k in kids:
            await k.kill()
        with contextlib.suppress(Exception):
            await a.stop()
    # Exactly once: every operation a table sent applied once, nothing refused.
    seqs = {t: n for f in finals for t, n in f["seqs"].items()}
    _meter, last = a.journal()
    applied = {t: metrics.get(("progressive_link_operations_total", (("outcome", "applied"), ("table", t))), 0.0)
               for t in tables}
    refused = sum(v for (n, lab), v in metrics.items()
                  if n == "progressive_link_operations_total" and ("outcome", "refused") in lab)
    if refused or any(applied[t] != seqs[t] or last.get(t, 0) != seqs[t] for t in tables if seqs[t]):
        raise AssertionError(f"floor: not exactly once ({refused:g} refused)")
    meter_delays(phases, [f["meters"] for f in finals], a.trace()["meters"], len(tables))
    return {"tables": len(tables), "children": children, "connect_s": connect_s, "phases": phases,
            "meter_interval": a.meter_interval,
            "trace": brief(a.trace()),
            "ops_applied": int(sum(applied.values()))}


def meter_delays(phases: list[dict], seen: list[dict[str, list]], published: list[list], n: int) -> None:
    """Each phase's `meter`: from the authority's publishing of a meter value (`published`: entry, when) to the
    last of the `n` tables holding it (`seen`, of each child: entry -> tables that got it, the last arrival), for
    each value published in the phase; None in a phase whose tables took no meter values."""
    got: dict[int, list] = {}
    for child in seen:
        for e, (count, at) in child.items():
            g = got.setdefault(int(e), [0, 0.0])
            g[0] += count
            g[1] = max(g[1], at)
    for ph in phases:
        if not ph["meters"]:
            ph["meter"] = None
            continue
        delays, partial = [], 0
        for entry, at in published:
            if ph["t0"] <= at <= ph["t1"]:
                count, last_at = got.get(entry, (0, 0.0))
                if count == n:
                    delays.append((last_at - at) * 1e3)
                else:
                    partial += 1
        delays.sort()
        ph["meter"] = {"values": len(delays), "partial": partial, "p50": percentile(delays, 0.5),
                       "p99": percentile(delays, 0.99), "max": delays[-1] if delays else float("nan")}
        print(f"floor: {ph['rate']:g} ops/s: meter to every table p50 {ph['meter']['p50']:.1f} p99 "
              f"{ph['meter']['p99']:.1f} ms over {len(delays)} values ({partial} not at every table)", flush=True)


# --- the run --------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, work: Path) -> dict:
    from broker import start_broker

    tables = table_ids(args.tables)
    lat_sets = [table_ids(m) for m in args.latency_tables]
    users = sorted({*tables, *(t for s in lat_sets for t in s), *table_ids(args.floor_tables), "authority"})
    loads = LoadWatch()
    loads.start()
    # The broker takes the username as the client id (use_username_as_clientid, as shipped): the benchmark's own
    # observer and subscriber are users of their own, or they would take the session of a table or the authority.
    broker = await asyncio.to_thread(start_broker, work / "mosquitto", users, ("bench-observer", "bench-subscriber"))
    from bench_ledger import fsync_ms

    out: dict[str, Any] = {"fsync_ms": fsync_ms(work), "baseline": [], "journal": [], "raw": [], "raw311": [],
                           "tablelink": [], "latency": [],
                           "tables": len(tables), "k": args.ops, "window": args.window, "load_start": os.getloadavg()}
    try:
        ops = {t: round_ops(t, range(1, args.ops // 2 + 1)) for t in tables}
        payloads = {t: [op_payload(t, i + 1, op) for i, (op, _k) in enumerate(ops[t])] for t in tables}
        out["payload_bytes"] = statistics.median(len(p) for t in tables for p in payloads[t][::2])
        prof = Path(args.profile_authority) if args.profile_authority else None
        for r in range(args.rounds):
            b = await baseline(broker, tables, payloads, args.window)
            out["baseline"].append(b)
            print(f"round {r + 1}: baseline {b['rate']:,.0f} messages/s  cpu {fmt_cpu(b)}", flush=True)
            j = await journal_alone(work, tables, ops, f"r{r + 1}")
            out["journal"].append(j)
            print(f"round {r + 1}: journal alone {j['rate']:,.0f} ops/s  cpu {j['cpu']['child']:.1f}s  "
                  f"commit mean {j['commit_mean_ms']:.1f} ms  {j['per_commit']:.1f} ops per COMMIT", flush=True)
            for mode, fn in (("raw", raw_tables), ("raw311", raw_tables_311), ("tablelink", table_links)):
                if mode not in args.modes or (mode == "tablelink" and r >= args.tablelink_rounds):
                    continue
                res = await fn(work, broker, tables, ops, args.window, f"{mode}{r + 1}",
                               prof / f"authority-{mode}{r + 1}.prof" if prof else None)
                out[mode].append(res)
                print(f"round {r + 1}: {mode:>9} {res['rate']:,.0f} ops/s  ratio {res['rate'] / b['rate']:.2f}  "
                      f"cpu {fmt_cpu(res)}  meter messages {res['meter_messages']}  "
                      f"commit mean {res['commit_mean_ms']:.2f} ms  repeats {res['repeats']:g}  "
                      f"trace {json.dumps(brief(res['trace']))}  "
                      f"dropped {res['dropped']}", flush=True)
        for s in lat_sets:
            res = await latency(work, broker, s, args.samples, args.rate, f"lat{len(s)}")
            out["latency"].append(res)
            print_latency(res)
        if args.floor_tables:
            out["floor"] = await floor(work, broker, table_ids(args.floor_tables), args)
            if args.floor_meter_interval:
                out["floor_paced"] = await floor(work, broker, table_ids(args.floor_tables), args, name="floor-paced",
                                                 meter_interval=args.floor_meter_interval, unmetered=False)
        if args.experiment:
            nodelay(True)
            try:
                b = await baseline(broker, tables, payloads, args.window)
                print(f"TCP_NODELAY: baseline {b['rate']:,.0f} messages/s  cpu {fmt_cpu(b)}", flush=True)
                res = await raw_tables(work, broker, tables, ops, args.window, "nodelay", None)
                print(f"TCP_NODELAY: raw {res['rate']:,.0f} ops/s  ratio {res['rate'] / b['rate']:.2f}  "
                      f"cpu {fmt_cpu(res)}  trace {json.dumps(brief(res['trace']))}", flush=True)
                lat = []
                for s in lat_sets:
                    lat.append(await latency(work, broker, s, args.samples, args.rate, f"nodelay{len(s)}"))
                    print_latency(lat[-1], "TCP_NODELAY: ")
                out["nodelay"] = {"baseline": b, "raw": res, "latency": lat}
            finally:
                nodelay(False)
    finally:
        await loads.stop()
        broker.stop()
    out["load_max"] = max(loads.samples)
    out["load_end"] = os.getloadavg()
    return out


def brief(trace: dict) -> dict:
    """The authority's timers as printed: without the time of each meter value it published."""
    return {k: v for k, v in trace.items() if k != "meters"}


def print_latency(res: dict, prefix: str = "") -> None:
    print(f"{prefix}latency, {res['tables']} tables: " + "  ".join(
        f"{k} p50 {res[k]['p50']:.1f} p99 {res[k]['p99']:.1f} ms" for k in ("send", "ack", "journaled", "signs"))
        + f"  trace {json.dumps(brief(res['trace']))}", flush=True)


def fmt_cpu(r: dict) -> str:
    c = r["cpu"]
    who = "subscriber" if "mode" not in r else "authority"
    loop = f" (loop {c['child_loop']:.1f}s)" if "child_loop" in c else ""
    return (f"wall {c['wall']:.1f}s tables {c['tables']:.1f}s (loop {c['tables_loop']:.1f}s) "
            f"broker {c['broker']:.1f}s {who} {c['child']:.1f}s{loop}")


def us_per(cpu_s: float, n: int) -> float:
    return cpu_s / n * 1e6


def render(args: argparse.Namespace, out: dict) -> str:
    today = datetime.date.today().isoformat()
    n, k, w = out["tables"], out["k"], out["window"]
    total = n * k
    rows = []
    for i, b in enumerate(out["baseline"]):
        rows.append(f"| {i + 1} | baseline: broker delivery to a plain subscriber | {b['rate']:,.0f} | 1.00x | "
                    f"{us_per(b['cpu']['child'], total):.0f} | {us_per(b['cpu']['broker'], total):.0f} | "
                    f"{us_per(b['cpu']['tables'], total):.0f} | {b['cpu']['wall']:.1f} | {b['cpu']['load']:.1f} |")
        if i < len(out["journal"]):
            j = out["journal"][i]
            rows.append(f"| {i + 1} | the authority's journal alone, no MQTT | {j['rate']:,.0f} | "
                        f"{j['rate'] / b['rate']:.2f}x | {us_per(j['cpu']['child'], total):.0f} |  |  | "
                        f"{j['cpu']['wall']:.1f} | {j['cpu']['load']:.1f} |")
        for mode, label in (("raw", "authority, raw MQTT tables"),
                            ("raw311", "authority on MQTT 3.1.1, raw MQTT tables"),
                            ("tablelink", "authority, TableLink tables")):
            if i < len(out[mode]):
                r = out[mode][i]
                rows.append(f"| {i + 1} | {label} | {r['rate']:,.0f} | **{r['rate'] / b['rate']:.2f}x** | "
                            f"{us_per(r['cpu']['child'], total):.0f} | {us_per(r['cpu']['broker'], total):.0f} | "
                            f"{us_per(r['cpu']['tables'], total):.0f} | {r['cpu']['wall']:.1f} | "
                            f"{r['cpu']['load']:.1f} |")
    lat_rows = []
    for r in out["latency"]:
        cells = " | ".join(f"{r[k]['p50']:.1f} / {r[k]['p99']:.1f}" for k in ("send", "ack", "journaled", "signs"))
        tr = r["trace"]
        lat_rows.append(f"| {r['tables']} | {r['samples']} | {cells} | {r['ack_to_signs']['p50']:.1f} / "
                        f"{r['ack_to_signs']['p99']:.1f} | {tr['applied']['mean_ms']:.1f} | "
                        f"{tr['reply']['mean_ms']:.1f} | {r['cpu']['load']:.1f} |")
    # a mode may run fewer rounds than the baseline (--tablelink-rounds): each is paired with its round's
    ratios = {m: [r["rate"] / b["rate"] for r, b in zip(out[m], out["baseline"], strict=False)]
              for m in ("raw", "raw311", "tablelink")}
    loads = f"{out['load_start'][0]:.1f} at the start, {out['load_max']:.1f} at most during the run"
    lines = [
        SECTION,
        "",
        f"Measured {today} with Python {platform.python_version()}, Mosquitto {mosquitto_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other work (1-minute load average {loads}; "
        f"median fsync {out['fsync_ms']:.2f} ms), so absolute rates are noisy and the ratios, taken within each "
        "round, are the figures to compare. One Mosquitto with the shipped configuration and ACL (TLS, a "
        "password per client), started for the run; the link authority is `progressived --role link` in a "
        "child process, with a fresh journal for each measurement (its `main()`, run with timers around three "
        "of its steps: a message's arrival, its application, its answer) and what a real authority requires: "
        "its approvers' keys (`approvers_file`: a payment from the linked meter is applied only with a "
        "supervisor's approval that verifies) and its signing key (`signing_key_file`: every answer, meter "
        "value and heartbeat signed with Ed25519). The simulated tables of the rows below are in the "
        "benchmark's process; the TableLink tables check every signature, the raw ones count the answers; "
        "the floor run's tables, in processes of their own, check every answer.",
        "",
        f"Workload: {n} tables, each {k} operations ({k // 2} rounds: the booking of seven $1 wagers, "
        f"{out['payload_bytes']:.0f} bytes, and the round's close), at most {w} unanswered per table; the same "
        f"messages in every row ({total:,} per row). Baseline: each table an MqttLink (the link's own transport, "
        "as the authority's and the tables' own) publishing them with QoS 1 on its `up` topic, a plain "
        "subscriber (an MqttLink in a child process, where the authority stands) counting arrivals on "
        "`P/tables/+/up`: messages delivered end to end per second. A PUBACK only says that the broker has the "
        "message, and Mosquitto drops QoS 1 messages beyond 1,000 queued for a client (`max_queued_messages`, "
        f"not set in the shipped configuration), so the publishers also keep at most {min(n * w, BROKER_QUEUE):,} "
        f"messages ({n} x {w}, at most {BROKER_QUEUE:,}) on their way to the subscriber, the bound that the "
        "tables' windows (and the raw tables' the same cap) put on the authority runs. Authority: "
        "every operation applied exactly once and durably (COMMIT with fsync) before its answer; operations "
        "answered per second. Raw MQTT tables publish the numbered `op` messages and count the `ack`s (no "
        "journal at the table), which isolates the authority; the same with the authority on MQTT 3.1.1 "
        "(`protocol = \"3.1.1\"` in its `[mqtt]`; the tables stay on MQTT 5), where paho-mqtt builds no "
        "properties for each packet; TableLink tables are the tables' own link "
        "client, journaling each operation (fsync) before sending it and each answer when it arrives, all of "
        "them in one process here, on the authority's disk and CPUs. After each authority run: every table's "
        f"operations applied once (`applied` = {k} per table, nothing dropped or refused), the authority's "
        f"next expected sequence number {k + 1} for every table, the meter's contributions exactly those "
        "booked. The journal row is the authority's ledger and reducer alone, in the benchmark's process: the "
        "same operations submitted as the authority submits them (one client per table, each awaiting its "
        "receipt). CPU is microseconds per message of each process over the run (/proc/PID/stat), the tables' "
        "column the benchmark's own process; load is the 1-minute load average at the end of each row's run.",
        "",
        "| round | what | messages/s | vs baseline | subscriber, journal or authority CPU µs/msg | broker µs/msg | "
        "tables µs/msg | wall s | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        goal_text(ratios, out),
        "",
        where_text(out) if out["baseline"] else "",
        "",
        f"Latency at a moderate load: one booking every {1 / args.rate * 1e3:.0f} ms, the tables in turn, each "
        "round's close sent once its booking is answered; TableLink tables, an authority with a fresh journal. "
        "Milliseconds, p50 / p99, from the call of `TableLink.send` (the moment the table daemon books at "
        "lock-out) to: `send` returning (the booking durable in the table's outbox, fsync, and published, its "
        "PUBACK received); the authority's `ack` arriving at the table (the authority sends it after its COMMIT); "
        "the answer journaled in the table's outbox; every table of the link holding a meter value that "
        "reflects the booking (a retained `meter` message of a journal entry at or after the booking's: the new "
        "amount for every sign). The last two columns are the authority's own means per operation: from taking "
        "it up to its COMMIT (checks and journal), and then publishing the `ack` until the broker's PUBACK.",
        "",
        "| tables | samples | send ms | ack ms | answer journaled ms | every table's meter ms | ack to every "
        "table's meter ms | authority: commit, mean ms | authority: ack publish, mean ms | load |",
        "|---:|---:|---|---|---|---|---|---:|---:|---:|",
        *lat_rows,
        "",
        "These figures are the link's only. The table daemon's own path before the booking (the lock-out "
        "button's poll, the round machine) and after the meter value arrives (the sign's write on its bus) are "
        "measured by the table benchmark (\"Lock-out latency\") and add to them; no run here has table daemons "
        "on the rig.",
        "",
        *experiment_text(out),
        *floor_text(args, out),
        f"Reproduce: `{COMMAND}` (`--quick` for a smoke run).",
    ]
    return "\n".join(lines) + "\n"


def floor_text(args: argparse.Namespace, out: dict) -> list[str]:
    """The floor run's paragraphs and table."""
    f = out.get("floor")
    if not f:
        return []
    n, every = f["tables"], f["phases"]
    phases = [ph for ph in every if ph["meters"]]
    unmetered = [ph for ph in every if not ph["meters"]]
    floor_ph = phases[0]
    cpus = os.cpu_count() or 1

    def free(ph: dict) -> float:
        return max(0.0, cpus - ph["cpu"]["others"] / (ph["t1"] - ph["t0"]))

    paced = out.get("floor_paced")
    rows = []
    for run in (f, paced) if paced else (f,):
        interval = f"{run['meter_interval'] * 1e3:g}"
        for ph in run["phases"]:
            hit = f"{ph['hit_ack']['p50']:.1f} / {ph['hit_ack']['p99']:.1f}" if ph["hit_ack"] else ""
            m = ph["meter"]
            shown = (f"{m['p50']:.1f} / **{m['p99']:.1f}** | {m['values']:,}" if m else
                     "none taken: the experiment below |")
            rows.append(f"| {interval} | {ph['rate']:g} | {ph['ops']:,} ({ph['achieved']:.0f}/s) | {ph['hits']} | "
                        f"{ph['ack']['p50']:.1f} / **{ph['ack']['p99']:.1f}** | {hit} | {shown} | "
                        f"{us_per(ph['cpu']['authority'], ph['ops']):,.0f} | "
                        f"{us_per(ph['cpu']['broker'], ph['ops']):,.0f} | "
                        f"{us_per(ph['cpu']['tables'], ph['ops']):,.0f} | {free(ph):.1f} | {ph['cpu']['load']:.1f} |")
    crossing = crossing_text(phases)
    raw = out["raw"]
    vs_raw = ""
    if raw:
        raw_rate = statistics.mean(r["rate"] for r in raw)
        raw_us = statistics.mean(us_per(r["cpu"]["child"], r["ops"]) for r in raw)
        floor_us = us_per(floor_ph["cpu"]["authority"], floor_ph["ops"])
        vs_raw = (f" The floor's rate is {floor_ph['rate'] / raw_rate:.2f}x the authority's rate flat out in the "
                  f"throughput rows above ({raw_rate:,.0f} operations/s from {out['tables']} raw tables, same run), "
                  f"and the authority spent {floor_us:,.0f} µs of CPU per operation on the floor against "
                  f"{raw_us:,.0f} µs flat out ({floor_us / raw_us:.2f}x; the floor's operations include the hits' "
                  "locks and approved payments).")
    free_floor = free(floor_ph)
    per_s = values_per_s(floor_ph)
    fanout = round(per_s * n, -2)
    tr = f["trace"]
    where = ""
    if "applied" in tr:
        where = (f" Over the whole run the authority took {tr['queued']['mean_ms']:.1f} ms on average from an "
                 f"operation's arrival to taking it up and {tr['applied']['mean_ms']:.1f} ms from there to its "
                 "COMMIT: the rest of an ack's time is the broker's and the tables' processes, on the CPUs the "
                 "other work left.")
    if unmetered:
        u = unmetered[0]
        where += (f" Experiment, same run, same sessions: with the tables no longer taking the meter values "
                  f"(unsubscribed from `P/meters/#`), the floor's {u['rate']:g} operations/s again gave ack p50 "
                  f"{u['ack']['p50']:.1f} ms and p99 {u['ack']['p99']:.1f} ms (against {floor_ph['ack']['p50']:.1f} "
                  f"and {floor_ph['ack']['p99']:.1f} ms), the broker {us_per(u['cpu']['broker'], u['ops']):,.0f} µs "
                  f"and the tables {us_per(u['cpu']['tables'], u['ops']):,.0f} µs of CPU per operation (against "
                  f"{us_per(floor_ph['cpu']['broker'], floor_ph['ops']):,.0f} and "
                  f"{us_per(floor_ph['cpu']['tables'], floor_ph['ops']):,.0f}): every meter value goes to all "
                  f"{n:,} tables, about {per_s:.0f} values a second (at most one per {f['meter_interval'] * 1e3:g} ms) "
                  "whatever the rate of operations, which the broker sends and each table process takes in as a "
                  "burst of one message per table.")
    paced_text = ""
    if paced:
        pp = paced["phases"][0]
        pi = paced["meter_interval"]
        paced_text = (
            f"\n\nThe meter values' pace, same run: then a fresh authority publishing each meter value at most every "
            f"{pi * 1e3:g} ms (`meter_interval = {pi:g}` in its file, docs/link-at-scale.md) and {paced['tables']:,} "
            f"fresh sessions (connected in {paced['connect_s']:.0f} s), the floor's {pp['seconds']:g} s and the "
            f"same sweep, the rows marked {pi * 1e3:g} above. At {pp['rate']:g} operations/s: about "
            f"{values_per_s(pp):.0f} values a second (against {per_s:.0f}), {values_per_s(pp) * n:,.0f} deliveries "
            f"a second through the broker (against {per_s * n:,.0f}); ack p50 {pp['ack']['p50']:.1f} ms and p99 "
            f"{pp['ack']['p99']:.1f} ms (against {floor_ph['ack']['p50']:.1f} and {floor_ph['ack']['p99']:.1f}), "
            f"every table's meter p99 {pp['meter']['p99']:.1f} ms (against {floor_ph['meter']['p99']:.1f}: a value "
            f"waits for its pass up to {pi * 1e3:g} ms more, which the p99 from publishing does not count), the "
            f"broker {us_per(pp['cpu']['broker'], pp['ops']):,.0f} µs and the tables "
            f"{us_per(pp['cpu']['tables'], pp['ops']):,.0f} µs of CPU per operation (against "
            f"{us_per(floor_ph['cpu']['broker'], floor_ph['ops']):,.0f} and "
            f"{us_per(floor_ph['cpu']['tables'], floor_ph['ops']):,.0f}), {free(pp):.1f} of the {cpus} CPUs free of "
            f"other work (against {free_floor:.1f}). {crossing_text(paced['phases'])}. One value took "
            f"{pp['meter']['p50']:.1f} ms at the median to reach all {n:,} tables, the {paced['children']} processes of "
            f"simulated tables taking in one message per table each (a real table, on its own box, takes in one): "
            f"an ack that comes during such a burst waits behind it, so fewer values make fewer acks wait but not a "
            f"shorter wait (the ack's p99 {pp['ack']['p99']:.1f} ms, against {pp['ack']['p50']:.1f} at the median).")
    return [
        f"### {n:,} tables at the floor's rate",
        "",
        f"{n:,} simulated tables, in {f['children']} child processes (one per CPU), each an MQTT session of its own "
        "(TLS, its own user and password, the shipped ACL) kept open for the whole run and subscribed as a "
        "table's link is (its `down` topic, the meters, the authority's heartbeat and status); they connected "
        f"in {f['connect_s']:.0f} s, {CONNECTING} at a time per process. Each table books a round (seven $1 "
        f"wagers) and closes it once the booking is answered, a round a minute ({n / FLOOR_ROUND_S * 2:.3g} "
        "operations/s over the floor), and a paced load of more rounds over the tables in turn makes up the "
        f"floor's rate; every {args.hit_s:g} s one round is a hit: a 10% award locked, then paid with a "
        "supervisor's approval signed as a table's pit console signs it (`pay-locked-award`, checked by the "
        "authority against its approvers' keys), then the round closed. A table sends one operation after "
        "another. The authority is the one of the rows above, with its approvers and its signing key, a fresh "
        f"journal; the same authority and the same sessions served the floor's {floor_ph['seconds']:g} s and then "
        f"each rate of the sweep ({args.sweep_seconds:g} s each: higher rates from the lowest until the ack's p99 "
        f"passed {FLOOR_ACK_MS:g} ms, or half and a quarter of the floor's when it was past that already). Ack: from publishing the operation to its answer verified at the table (the "
        "authority's Ed25519 signature and the digest of the operation it names), every operation; the hits' "
        "column the lock and the payment only. Every table's meter: from the authority publishing a meter value "
        "(taken by a timer in its process) to the last of the "
        f"{n:,} tables receiving it, every value published in the phase (the tables read the value's journal "
        f"entry and do not check its signature here: on this machine, checking some {fanout:,.0f} meter values a "
        "second would take more CPU than the run has). After the run: every table's operations applied once, none "
        "refused. CPU per operation of each process over the phase (/proc/PID/stat); free CPUs: the machine's "
        f"{cpus} less what other work used meanwhile (/proc/stat, less the run's own processes).",
        "",
        "| meter values at most every ms | operations/s asked | operations (achieved) | hits | ack p50 / p99 ms | "
        "hits' ack p50 / p99 ms | every table's meter p50 / p99 ms | meter values | authority CPU µs/op | "
        "broker µs/op | tables µs/op | free CPUs | load |",
        "|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"At the floor's {floor_ph['rate']:g} operations/s: ack p99 {floor_ph['ack']['p99']:.1f} ms, every "
        f"table's meter p99 {floor_ph['meter']['p99']:.1f} ms, the authority's CPU "
        f"{us_per(floor_ph['cpu']['authority'], floor_ph['ops']):,.0f} µs per operation "
        f"({floor_ph['cpu']['authority'] / (floor_ph['t1'] - floor_ph['t0']):.0%} of one CPU), with "
        f"{free_floor:.1f} of the machine's {cpus} CPUs free of other work. {crossing}.{vs_raw}{where}{paced_text}",
        "",
    ]


def values_per_s(ph: dict) -> float:
    """Meter values published a second in a phase."""
    return ph["meter"]["values"] / (ph["t1"] - ph["t0"])


def crossing_text(phases: list[dict]) -> str:
    """Where the ack's p99 passed FLOOR_ACK_MS over the `phases` of one floor run (those with the meter values)."""
    phases = [ph for ph in phases if ph["meters"]]
    over = sorted((ph for ph in phases if ph["ack"]["p99"] > FLOOR_ACK_MS), key=lambda p: p["rate"])
    under = sorted((ph for ph in phases if ph["ack"]["p99"] <= FLOOR_ACK_MS), key=lambda p: p["rate"])
    if over and under:
        lower = [p for p in under if p["rate"] < over[0]["rate"]]
        below = lower[-1] if lower else None
        crossing = (f"The ack's p99 passed {FLOOR_ACK_MS:g} ms between {below['rate']:g} and {over[0]['rate']:g} "
                    f"operations/s ({below['ack']['p99']:.1f} ms at {below['rate']:g}/s, {over[0]['ack']['p99']:.1f} "
                    f"ms at {over[0]['rate']:g}/s)" if below is not None else
                    f"The ack's p99 was past {FLOOR_ACK_MS:g} ms at {over[0]['rate']:g} operations/s and within it "
                    "at a higher rate: noise of the machine's other work, no clear rate")
    elif over:
        crossing = (f"The ack's p99 was past {FLOOR_ACK_MS:g} ms at every rate tried, down to {over[0]['rate']:g} "
                    f"operations/s ({over[0]['ack']['p99']:.1f} ms)")
    else:
        crossing = (f"The ack's p99 stayed within {FLOOR_ACK_MS:g} ms up to {phases[-1]['rate']:g} operations/s, "
                    "the sweep's highest rate")
    achieved_short = [ph for ph in phases if ph["achieved"] < ph["rate"] * 0.9]
    if achieved_short:
        short = ", ".join(f"{p['rate']:g}" for p in achieved_short)
        crossing += (f"; at {short} operations/s the tables did not "
                     "reach the rate asked (each table sends one operation after another, and the answers came "
                     "slower)")
    return crossing


def experiment_text(out: dict) -> list[str]:
    x = out.get("nodelay")
    if not x:
        return []
    n, k = out["tables"], out["k"]
    b0 = statistics.mean(r["rate"] for r in out["baseline"])
    r0 = statistics.mean(r["rate"] for r in out["raw"])
    ratio0 = statistics.mean(r["rate"] / b["rate"] for r, b in zip(out["raw"], out["baseline"], strict=False))
    reply0 = statistics.mean(r["trace"]["reply"]["mean_ms"] for r in out["raw"])
    applied0 = statistics.mean(r["trace"]["applied"]["mean_ms"] for r in out["raw"])
    b1, r1 = x["baseline"], x["raw"]
    applied1, reply1 = r1["trace"]["applied"]["mean_ms"], r1["trace"]["reply"]["mean_ms"]
    rows = [
        f"| baseline, messages/s | {b0:,.0f} | {b1['rate']:,.0f} |",
        f"| authority with raw tables, operations/s (vs baseline) | {r0:,.0f} ({ratio0:.2f}x) | "
        f"{r1['rate']:,.0f} ({r1['rate'] / b1['rate']:.2f}x) |",
        f"| authority: ack publish until PUBACK, mean ms (throughput run) | {reply0:.1f} | "
        f"{r1['trace']['reply']['mean_ms']:.1f} |",
        f"| authority: commit, mean ms (throughput run) | {applied0:.1f} | {applied1:.1f} |",
    ]
    load0 = max(r["cpu"]["load"] for r in out["baseline"] + out["raw"] + out["latency"])
    load1 = max(r["cpu"]["load"] for r in [b1, r1, *x["latency"]])
    rows.append(f"| 1-minute load average, highest at the end of a run | {load0:.1f} | {load1:.1f} |")
    for r0l, r1l in zip(out["latency"], x["latency"], strict=True):
        rows.append(f"| latency, {r0l['tables']} tables: the authority's ack publish until PUBACK, mean ms | "
                    f"{r0l['trace']['reply']['mean_ms']:.1f} | {r1l['trace']['reply']['mean_ms']:.1f} |")
        for key, label in (("ack", "ack at the table"), ("signs", "every table's meter")):
            rows.append(f"| latency, {r0l['tables']} tables: {label}, p50 / p99 ms | {r0l[key]['p50']:.1f} / "
                        f"{r0l[key]['p99']:.1f} | {r1l[key]['p50']:.1f} / {r1l[key]['p99']:.1f} |")
    first0, first1 = out["latency"][0], x["latency"][0]
    verdict = ("rose" if r1["rate"] / b1["rate"] > ratio0 * 1.1
               else "did not rise" if r1["rate"] / b1["rate"] >= ratio0 * 0.9 else "fell")
    return [
        "Experiment, same run: TCP_NODELAY. paho-mqtt leaves Nagle's algorithm on for its sockets (the broker "
        "turns it off on its side, `set_tcp_nodelay true`), so a small packet written while an earlier one is "
        "not yet acknowledged by TCP waits for that acknowledgement, which the receiving kernel may delay by up "
        "to 40 ms. The benchmark then set TCP_NODELAY on every MQTT client socket it and its children opened "
        f"(the shipped code does not) and measured again, once, with the same {n} x {k} operations and "
        "samples:",
        "",
        "| | as shipped (mean of the rounds above) | TCP_NODELAY on the clients' sockets |",
        "|---|---:|---:|",
        *rows,
        "",
        f"At the latency runs' moderate load, TCP_NODELAY took the wait for each `ack`'s PUBACK at the authority "
        f"from {first0['trace']['reply']['mean_ms']:.1f} to {first1['trace']['reply']['mean_ms']:.1f} ms, and "
        f"with {first0['tables']} tables the median from a booking to its `ack` at the table from "
        f"{first0['ack']['p50']:.1f} to {first1['ack']['p50']:.1f} ms, to every table's meter from "
        f"{first0['signs']['p50']:.1f} to {first1['signs']['p50']:.1f} ms: most of the link's latency as "
        f"shipped is TCP waiting. The throughput with {n} tables {verdict} ({r0:,.0f} and {r1['rate']:,.0f} "
        f"operations/s, {ratio0:.2f}x and {r1['rate'] / b1['rate']:.2f}x of their own baselines): there each "
        f"operation took {applied1 + reply1:.0f} ms at the authority (commit {applied1:.1f} ms, `ack` publish "
        f"{reply1:.1f} ms) against {applied0 + reply0:.0f} ms as shipped, on CPUs that were busy either way.",
        "",
    ]


def goal_text(ratios: dict[str, list[float]], out: dict) -> str:
    raw = ratios["raw"]
    if not raw:
        return ""

    def span(v: list[float]) -> str:
        return f"{min(v):.2f}x" if len(v) == 1 else f"{min(v):.2f}x to {max(v):.2f}x"

    lo, hi = min(raw), max(raw)
    verdict = "reached" if lo >= 0.5 else ("not reached" if hi < 0.5 else "reached in some rounds only")
    text = (f"Goal (the authority at least half the broker's delivery rate for the same messages): {verdict} "
            f"with raw tables, {span(raw)} of the baseline")
    if ratios["raw311"]:
        text += f" ({span(ratios['raw311'])} with the authority on MQTT 3.1.1)"
    tl = ratios["tablelink"]
    if tl:
        text += f"; with TableLink tables {span(tl)}, the tables' own work running on the same two CPUs"
    return text + "."


def where_text(out: dict) -> str:
    """Where the time goes, from the figures of the run (means over the rounds)."""
    n, k = out["tables"], out["k"]
    total = n * k

    def mean(rows: list[dict], f) -> float:
        return statistics.mean(f(r) for r in rows)

    base, journal, raw, tl = out["baseline"], out["journal"], out["raw"], out["tablelink"]
    sub_us = max(mean(base, lambda r: us_per(r["cpu"]["child"], total)), 1e-3)  # as a_us below: never 0
    b_mean = mean(base, lambda r: r["rate"])
    parts = [f"Where the time goes (means of the rounds). Baseline: Mosquitto spent "
             f"{mean(base, lambda r: us_per(r['cpu']['broker'], total)):.0f} µs of CPU per message, the subscriber "
             f"{sub_us:.0f} µs and the publishing tables {mean(base, lambda r: us_per(r['cpu']['tables'], total)):.0f}"
             " µs: the baseline is the rate of the Python MQTT clients (aiomqtt over paho-mqtt, TLS, MQTT 5), not "
             "of the broker."]
    if journal:
        parts.append(
            f"The authority's journal alone takes {mean(journal, lambda r: r['rate']):,.0f} operations/s from "
            f"{n} concurrent clients ({mean(journal, lambda r: us_per(r['cpu']['child'], r['ops'])):.0f} µs of CPU "
            f"each, {mean(journal, lambda r: r['per_commit']):.1f} per COMMIT, "
            f"{mean(journal, lambda r: r['commit_mean_ms']):.1f} ms from submit to receipt).")
    if raw:
        # a process's CPU is counted in clock ticks: a smoke run too short for one tick reads 0
        a_us = max(mean(raw, lambda r: us_per(r["cpu"]["child"], total)), 1e-3)
        loop_us = mean(raw, lambda r: us_per(r["cpu"]["child_loop"], total))
        busy = mean(raw, lambda r: r["cpu"]["child"] / r["cpu"]["wall"])
        per_table = mean(raw, lambda r: n / r["rate"] * 1e3)
        applied = mean(raw, lambda r: r["trace"]["applied"]["mean_ms"])
        reply = mean(raw, lambda r: r["trace"]["reply"]["mean_ms"])
        queued = mean(raw, lambda r: r["trace"]["queued"]["mean_ms"])
        meters = mean(raw, lambda r: r["meter_messages"] / r["ops"])
        w_us = mean(raw, lambda r: us_per(r["trace"]["writer"]["cpu_s"], total))
        w_prep = mean(raw, lambda r: us_per(r["trace"]["writer"]["prepare_cpu_s"], total))
        w_write = mean(raw, lambda r: us_per(r["trace"]["writer"]["write_cpu_s"], total))
        ops_commit = mean(raw, lambda r: r["ops"] / max(1, r["trace"]["writer"]["commits"]))
        parts.append(
            f"Authority, raw tables: {a_us:.0f} µs of CPU per operation ({loop_us:.0f} µs in the event loop's "
            f"thread: MQTT in and out, decoding and checks; {w_us:.0f} µs in the journal's writer thread, of which "
            f"{w_prep:.0f} µs applying the operation (the meter's rules and invariant, the entry's text and hash) "
            f"and {w_write:.0f} µs writing it ({ops_commit:.1f} operations per COMMIT, SQLite and fsync)), "
            f"{a_us / sub_us:.1f}x the subscriber's per message: it receives the same message, and "
            "also journals it, publishes the `ack` with QoS 1 and handles its PUBACK, and publishes the meter "
            f"({meters:.2f} meter messages per operation). It was busy {busy:.0%} of one CPU over the run"
            + (": not bound by its CPU but by the order of each table's operations. " if busy < 0.7 else ". ")
            + "A table's operations are applied strictly one after "
            f"another, each waiting for its COMMIT ({applied:.1f} ms on average from being taken up, group "
            f"commit with the other tables' operations); its `ack` is published without holding up the next "
            f"({reply:.1f} ms in the chain; the next ones wait {queued:.0f} ms in the table's queue): about "
            f"{n} / {applied / 1e3:.3f} s = {n / (applied / 1e3):,.0f} operations/s with {n} tables sending at once "
            f"({n / per_table * 1e3:,.0f} measured), and the authority's CPU ({a_us:.0f} µs per operation, its "
            f"threads sharing one interpreter lock) allows about {1e6 / a_us:,.0f}/s: "
            f"{min(n / (applied / 1e3), 1e6 / a_us) / b_mean:.2f}x the baseline at best, an estimate, not a "
            "measurement.")
        b_broker = mean(base, lambda r: us_per(r["cpu"]["broker"], total))
        b_tables = mean(base, lambda r: us_per(r["cpu"]["tables"], total))
        r_broker = mean(raw, lambda r: us_per(r["cpu"]["broker"], total))
        r_tables = mean(raw, lambda r: us_per(r["cpu"]["tables"], total))
        budget = (os.cpu_count() or 1) * 1e6 / (b_mean / 2)  # CPU µs the machine has per operation at half rate
        left = budget - r_broker - r_tables
        parts.append(
            f"The authority, the broker and the simulated tables share the machine's {os.cpu_count()} CPUs, which "
            f"the runs keep busy: per operation they used {a_us + r_broker + r_tables:,.0f} µs of CPU together "
            f"(the tables more than in the baseline: each also receives an `ack`), against "
            f"{sub_us + b_broker + b_tables:,.0f} µs per message in the baseline. At half the baseline's rate the "
            f"machine has at most {budget:,.0f} µs of CPU per operation; the broker and the tables take "
            f"{r_broker + r_tables:,.0f} "
            f"of them, leaving the authority {max(left, 0):,.0f} µs, against the {a_us:,.0f} it uses"
            + (f" ({a_us / left:.1f} times as much)" if left > 0 else "")
            + ". Most of the authority's CPU is paho-mqtt's, for two MQTT exchanges per operation (the operation "
            "in, its answer out, each with its PUBACK) where the subscriber has one; the journal takes "
            f"{w_us:,.0f} µs of it. Half the baseline needs an authority that spends about as much on an "
            "operation as the bare subscriber spends on a message: not with this MQTT client in Python, on "
            "this machine.")
    if tl:
        t_us = mean(tl, lambda r: us_per(r["cpu"]["tables"], total))
        t_loop = mean(tl, lambda r: us_per(r["cpu"]["tables_loop"], total))
        fan = mean(tl, lambda r: r["meter_messages"] * n / r["ops"])
        repeats = mean(tl, lambda r: r["repeats"])
        parts.append(
            f"TableLink tables: the tables' process spent {t_us:,.0f} µs of CPU per operation ({t_loop:,.0f} µs "
            "in its event loop, most of it receiving messages: every meter value goes to all "
            f"{n} tables, {fan:.1f} meter messages received per operation here), besides two journal entries with "
            "an fsync each per operation. "
            + (f"The tables fell behind, and a TableLink sends an operation again when it has had no answer "
               f"for 2 s: the authority answered {repeats:,.0f} repeats from its journal (applying "
               "none of them), more load on every process. " if repeats else "")
            + f"A `send` (journal, then publish) took {mean(tl, lambda r: r['send_ms']):.1f} ms at the median.")
    return " ".join(parts)


def mosquitto_version() -> str:
    try:
        from broker import require_mosquitto

        exe = require_mosquitto()[0]
        p = subprocess.run([exe, "-h"], capture_output=True, text=True, timeout=10)
        for word in (p.stdout + p.stderr).split("\n")[0].split():
            if word[:1].isdigit():
                return word
    except Exception:  # noqa: BLE001 - the version is only printed
        pass
    return "?"


def main() -> None:
    if os.environ.get("BENCH_LINK_NODELAY") == "1":
        nodelay(True)
    if sys.argv[1:2] == ["--child-authority"]:
        sys.exit(_child_authority(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if "--child-tables" in sys.argv:
        logging.basicConfig(level=logging.WARNING)
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        asyncio.run(_floor_tables(json.loads(sys.stdin.readline())))
        return
    if "--child-subscriber" in sys.argv:
        logging.basicConfig(level=logging.WARNING)
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        asyncio.run(_subscriber(json.loads(sys.stdin.readline())))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=50, help="simulated tables for the throughput runs")
    ap.add_argument("--ops", type=int, default=60, help="operations per table (even: a booking and a close each)")
    ap.add_argument("--window", type=int, default=8, help="operations a table keeps unanswered at most")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of baseline and authority runs")
    ap.add_argument("--modes", default="raw,raw311,tablelink", help="authority runs: raw, raw311, tablelink")
    ap.add_argument("--tablelink-rounds", type=int, default=1, help="rounds with the TableLink run (the first ones)")
    ap.add_argument("--latency-tables", default="3,20", help="tables of the latency runs, comma-separated")
    ap.add_argument("--samples", type=int, default=200, help="bookings timed in each latency run")
    ap.add_argument("--rate", type=float, default=20.0, help="bookings per second in the latency runs")
    ap.add_argument("--floor-tables", type=int, default=1000,
                    help="tables of the floor run, each a session of its own (0: no floor run)")
    ap.add_argument("--floor-rate", type=float, default=100.0, help="the floor's operations per second")
    ap.add_argument("--floor-seconds", type=float, default=60.0, help="how long the floor run lasts")
    ap.add_argument("--sweep", default="150,200,300,400,600,800",
                    help=f"higher rates, operations/s, tried in turn until the ack's p99 passes {FLOOR_ACK_MS:g} ms "
                    "(half and a quarter of the floor's when it is past that already; empty: no sweep)")
    ap.add_argument("--sweep-seconds", type=float, default=20.0, help="how long each rate of the sweep lasts")
    ap.add_argument("--hit-s", type=float, default=5.0, help="a hit locked and approved every this many seconds")
    ap.add_argument("--unmetered", action=argparse.BooleanOptionalAction, default=True,
                    help="after the sweep, the floor's rate again with the tables not taking the meter values")
    ap.add_argument("--meter-interval", type=float,
                    help="the authority's meter_interval (seconds between two values of a meter) for every "
                    f"authority started but the floor's second one (default: the authority's, {METER_INTERVAL:g})")
    ap.add_argument("--floor-meter-interval", type=float, default=0.25,
                    help="after the floor run, the floor's rate and the sweep again with a fresh authority that "
                    "publishes the meter values at most this often, in seconds (0: not run)")
    ap.add_argument("--children", type=int, default=os.cpu_count() or 1,
                    help="processes of floor tables (one per CPU)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few tables, operations and samples")
    ap.add_argument("--profile-authority", help="write a cProfile of each throughput run's authority into DIR")
    ap.add_argument("--experiment", action="store_true",
                    help="also measure with TCP_NODELAY forced on every client socket")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()
    if args.meter_interval is not None and not 0 < args.meter_interval <= 1.0:
        ap.error("--meter-interval: more than 0 and at most the authority's heartbeat, 1 s")
    if not 0 <= args.floor_meter_interval <= 1.0:
        ap.error("--floor-meter-interval: at most the authority's heartbeat, 1 s (0: not run)")
    _authority["meter_interval"] = args.meter_interval
    if args.quick:
        args.tables, args.ops, args.rounds, args.samples = 10, 40, 1, 40
        args.latency_tables = "3,5"
        args.floor_tables, args.floor_seconds, args.sweep, args.sweep_seconds, args.hit_s = 40, 5.0, "200", 3.0, 1.0
    if args.ops % 2:
        ap.error("--ops: an even number (each round is a booking and a close)")
    args.latency_tables = [int(x) for x in str(args.latency_tables).split(",") if x]
    args.modes = [m for m in args.modes.split(",") if m]
    args.sweep = sorted(float(x) for x in str(args.sweep).split(",") if x)
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.profile_authority:
        Path(args.profile_authority).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-link-"))
    try:
        out = asyncio.run(run(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = render(args, out)
    print()
    print(text)
    if args.write:
        from benchdoc import write_section

        write_section(ROOT / "docs" / "benchmarks.md", SECTION, text)


if __name__ == "__main__":
    main()

"""Table daemon benchmark: lock-out latency on the rig, and the daemon's CPU and memory.

    .venv/bin/python bench/bench_table.py            # print the results
    .venv/bin/python bench/bench_table.py --write    # and put them in docs/benchmarks.md
                                                     # ("Lock-out latency", "Daemon CPU and memory")
    .venv/bin/python bench/bench_table.py --quick    # a smoke run with few samples and short windows

The table is the example Caribbean Stud table (config/tables/caribbean-stud.toml) on the seven-seat rig
(config/hil/caribbean-stud-7.toml): seven seat devices, the lock-out button and the meter sign on one paced
Modbus RTU bus, the shuffler and the shoe on lines of their own. The daemon is `progressived --config FILE`
in a child process (tests/support/tableproc.py writes its configuration for the running rig); the rig runs in this
process. The bus runs at each baud rate asked for (the rig configuration's `baud`, changed in memory; the
table's configuration follows the rig).

Lock-out latency, per round: chips on four seats (the Progressive Payout Wager on each, the Five Card Hand
Bonus on one, so that both meters are booked), their accepted lights awaited on the rig, a random pause of up
to one poll cycle (the press falls anywhere in the cycle), then the lock-out pressed on the rig. Measured
from the press to:

- wagers frozen: the daemon's round machine took the press (its "locked" log line);
- contributions committed: the booking's ledger receipts, durable on disk (its "round booked" log line,
  written after the last receipt and before the round machine is told); the booking on both meters is one
  transaction, one COMMIT (counted from the journal after the run: a batch's entries share one time stamp);
- sign updated: the simulated sign holds the new amounts (the register write reached the device).

Log lines carry the daemon's wall-clock time, compared with this process' wall clock at the press (one
machine, one clock). The round is then settled through the control socket, as `progressivectl settle-round`
does, after the chips are collected. The ratio is against the wire time of one poll cycle of this bus
(every poller read once and one sign update), computed from the frames the drivers plan with the formula
of bench/bench_poll.py: per transaction, (request + reply bytes) x 11 bits / baud + 2 x t3.5.

The daemon's own `progressive_lockout_window_seconds` (from the lock-out read before the press to the wagers
frozen) is read from its /metrics at the end of each baud rate's rounds: its mean is reported beside them.

CPU and memory: the daemon at 19200 baud (`--resources-baud`). Idle (no chips: betting open, the bus read
as fast as it goes) and play (a scripted dealer as hil/dealer.py plays: shuffle, chips on up to four seats,
lock-out, deal, settle, with its pauses: a round every few seconds, nearly all of it betting) are the
figures polled flat out. The realistic mix is whole rounds at a real table's pace: `--betting-s` (30) of
betting with chips placed on one to four seats at random moments within it, the lock-out, `--dealing-s` (60)
of dealing (the chips collected, the cards read by the shoe as the scripted dealer deals them), settled;
`--mix-rounds` of them, CPU and memory over the whole rounds, and CPU by phase. CPU from /proc/PID/stat
(utime + stime over the wall time), memory from /proc/PID/status (VmRSS sampled each second, VmHWM the
peak). The baseline, in the same run: an idle Python process that imports what the daemon imports, for the
memory that is the interpreter's and the libraries' rather than the daemon's own.

The rendered sections keep the figures measured before the bus had its scheduler (BEFORE, 2026-11-30) beside
the new ones, and say whether each goal is met.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

from controller.app.setup import standalone_meters
from controller.config import load_config
from controller.config.credentials import SCRYPT_N, SCRYPT_R
from controller.config.devices import driver_settings
from controller.hands import poker5
from controller.hands.categories import Poker5
from controller.ledger.journal import DB_NAME
from controller.ledger.reader import JournalReader
from drivers.events import ShowAmounts
from drivers.modbus import frames as mb_frames
from drivers.modbus import make_device
from drivers.modbus.core.schedule import Policy
from drivers.modbus.devices import plan_blocks
from hil.rig import Rig
from hil.wire import Direction, frame_silence

import harness
from bench_poll import CHAR_BITS, _cycle_frames, percentile
from harness import SEATS, TABLE, Log, load, ready_child, sign_amounts, sign_matches, table_on, versions
from rigtable import lit, until
from tableproc import TableProcess

LATENCY_SECTION = "## Lock-out latency"
RESOURCES_SECTION = "## Daemon CPU and memory"
COMMAND = ".venv/bin/python bench/bench_table.py --write"
WAGER_SEATS = 4
CPU_GOAL = 3.0  # % of one core, over the realistic mix
RSS_GOAL_MB = 80.0
FROZEN_P99_GOAL = 0.35  # press to wagers frozen, p99, x the cycle's wire time
SIGN_P99_GOAL = 1.0  # press to sign updated, p99, x the cycle's wire time
LATENCY_ROUNDS = 200  # a baud rate: enough that p99 is not simply the slowest round
SLOW_BOOKING_S = 0.1  # a booking (wagers frozen to commits durable) the disk held up, as the commit histogram's 0.1
LATENCY_HEALTH_S = 0.5  # health_interval in the latency runs (the default 2 s only makes each round longer)
# The figures of the sections as measured before the bus had one scheduler (docs/benchmarks.md of that day):
# every poller queued on one lock, first come first served, the lock-out read once a cycle.
BEFORE = "2026-11-30"
LATENCY_BEFORE = {  # baud -> cycle wire ms, lock-out read every ms, rounds, (p50, p99) ms of frozen/booked/sign
    19200: {"wire_ms": 196.5, "lockout_period_ms": 170, "rounds": 40,
            "frozen": (127, 326), "booked": (132, 330), "sign": (188, 380)},
    115200: {"wire_ms": 61.1, "lockout_period_ms": 63, "rounds": 40,
             "frozen": (28, 83), "booked": (34, 90), "sign": (49, 107)},
}
# The figures with two COMMITs a booking, one a meter, each awaited before the next was queued: this section's
# of 2026-12-02 (load average up to 0.4), and a run of the same benchmark with that code on 2026-12-05, just before
# the one-commit figures (load up to 6.9). Date -> baud -> lock-out read every ms, rounds, (p50, p99) ms of
# frozen/booked/sign, the lock-out window's mean, and (when measured) the booking's own (p50, p99) ms: frozen to
# booked.
LATENCY_TWO_COMMITS = {
    "2026-12-02": {
        19200: {"lockout_period_ms": 39, "rounds": 200, "frozen": (27, 57), "booked": (32, 122), "sign": (81, 136),
                "window_mean_ms": 61.2},
        115200: {"lockout_period_ms": 14, "rounds": 200, "frozen": (9, 21), "booked": (13, 77), "sign": (30, 82),
                 "window_mean_ms": 22.9},
    },
    "2026-12-05": {
        19200: {"lockout_period_ms": 37, "rounds": 200, "frozen": (25, 59), "booked": (28, 73), "sign": (78, 125),
                "window_mean_ms": 59.3, "booking": (2.7, 15.6)},
        115200: {"lockout_period_ms": 13, "rounds": 200, "frozen": (7, 17), "booked": (10, 21), "sign": (26, 37),
                 "window_mean_ms": 20.5, "booking": (3.0, 4.4)},
    },
}
RESOURCES_BEFORE = {  # window -> seconds, CPU %, RSS mean and max MB, bus txn/s, bus busy %, CPU ms/txn, rig CPU %
    "idle": {"label": "idle (no chips)", "wall": 20, "cpu_pct": 4.6, "rss_mean": 54.5, "rss_max": 54.6,
             "txn_per_s": 44, "bus_busy_pct": 88, "cpu_ms_per_txn": 1.06, "rig_cpu_pct": 6},
    "play": {"label": "play (10 rounds)", "wall": 30, "cpu_pct": 5.1, "rss_mean": 54.6, "rss_max": 54.6,
             "txn_per_s": 46, "bus_busy_pct": 90, "cpu_ms_per_txn": 1.12, "rig_cpu_pct": 7},
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
# What the daemon imports (controller.cli.daemon and what its start-up imports), nothing started.
BASELINE_IMPORTS = ("controller.cli.daemon", "controller.service.control", "controller.app.dice_table",
                    "controller.app.metrics", "controller.app.table", "controller.config",
                    "controller.config.devices", "controller.ledger", "drivers.modbus", "drivers.line")


def mb(kib: int | float) -> float:
    """kB as /proc reports them (KiB) -> MB (10^6 bytes)."""
    return kib * 1024 / 1e6


# --- the wire time of one poll cycle of this table's bus ----------------------------------------------


def wire_time(frames: list[tuple[int, int]], baud: int) -> float:
    """Seconds of line time for these transactions (request bytes, reply bytes): bench_poll's formula."""
    char = CHAR_BITS / baud
    silence = frame_silence(baud, CHAR_BITS)
    return sum((tx + rx) * char + 2 * silence for tx, rx in frames)


def table_cycle_frames(kind: str | None = None) -> list[tuple[int, int]]:
    """One poll cycle of the table's bus as its drivers plan it: each seat device's and the lock-out's
    read, and one sign update (the amounts of the table's meters, message cleared); `kind`: that kind of
    device's reads only (e.g. "lockout")."""
    cfg = load_config(TABLE)
    bus = SimpleNamespace(serial=True, name="table-bus")  # planning only: nothing is sent
    rtu = mb_frames.Framing.RTU
    out: list[tuple[int, int]] = []
    sign = None
    for spec in driver_settings(cfg).modbus:
        dev = make_device(spec.name, bus, spec.unit, spec.register_map, **spec.options())
        if spec.kind == "sign":
            sign = dev
            continue
        if kind is not None and spec.kind != kind:
            continue
        for block in dev._inputs:
            fc = mb_frames.READ_FC[block.table]
            out.append((mb_frames.request_len(rtu, fc, block.count), mb_frames.response_len(rtu, fc, block.count)))
    assert sign is not None
    if kind is not None:
        return out
    amounts = ShowAmounts(tuple((m.id, 1_000_000) for m in standalone_meters(cfg)))
    for block in plan_blocks(sign._plan(amounts), write=True):
        fc = mb_frames.write_fc(block.table, block.count)
        out.append((mb_frames.request_len(rtu, fc, block.count), mb_frames.response_len(rtu, fc, block.count)))
    return out


def drivers_issue_frames() -> list[tuple[int, int]]:
    """bench_poll's cycle (seat-single maps, three meters on the sign), for reference."""
    return [(len(req), rx) for req, rx in _cycle_frames(0)]


# --- the rig and the daemon ---------------------------------------------------------------------------


def pick_wagers(rng: random.Random, n: int = WAGER_SEATS) -> list[tuple[int, str, int]]:
    seats = sorted(rng.sample(range(1, SEATS + 1), n))
    wagers = [(s, "progressive", rng.choice((100, 500))) for s in seats]
    wagers.append((rng.choice(seats), "five-card-hand-bonus", 100))
    return wagers


async def play_round(rig: Rig, t: TableProcess, log: Log, rng: random.Random, *, wagers: list,
                     jitter: float = 0.0, pause: float = 0.0, cards: bool = False) -> dict:
    """One round on the rig: chips placed and acknowledged, lock-out pressed, the booking and the sign
    awaited, chips collected (cards dealt), settled, lights off. Times in seconds from the press."""
    if cards:
        await rig.shuffle(52)
    for seat, spot, cents in wagers:
        await rig.place_chip(seat, spot, cents)
    await until(lambda: all(spot in lit(rig, seat) for seat, spot, _ in wagers), "accepted lights")
    rid = (await t.control("round"))["id"]
    lockout = rig.simulator("lockout")
    betting0 = time.monotonic()  # betting: the lock-out read at the betting pace
    await asyncio.sleep(pause + rng.uniform(0, jitter))
    sign = rig.simulator("sign")
    before = sign_amounts(rig)
    pressed = time.time()
    # the gaps between the lock-out's reads while betting: a press just after a read waits one of them
    reads = [t for t in lockout.request_times if t >= betting0]
    gaps = [b - a for a, b in pairwise(reads)]
    await rig.press_lockout()
    await sign.wait_until(lambda: sign_amounts(rig) != before, timeout=15)
    shown = time.time()
    for seat, spot, _ in wagers:  # the dealer collects the chips (§ 639a.8(b))
        await rig.remove_chip(seat, spot)
    seen = {seat: rig.simulator(f"seat-{seat}").requests for seat, _, _ in wagers}
    if cards:
        await rig.deal(deal_without_hits(rng, len({seat for seat, _, _ in wagers})))
    # two requests to each seat device after the chips left it: the second follows the first's reply
    await until(lambda: all(rig.simulator(f"seat-{s}").requests >= n + 2 for s, n in seen.items()),
                "chips seen collected")
    await asyncio.sleep(pause)
    await until(lambda: log.when("round booked", rid) is not None, f"{rid} booked in the log")
    frozen, booked = log.when("locked", rid), log.when("round booked", rid)
    await t.control("settle", round_id=rid)
    await until(lambda: not rig.lights()["seats"] and rig.lights()["lockout_lamp"] is False, "lights off")
    if not await sign_matches(rig, t):
        raise RuntimeError(f"{rid}: the sign shows {sign_amounts(rig)}, the meters are "
                           f"{(await t.control('status'))['meters']}")
    if not 0 < frozen - pressed <= booked - pressed <= shown - pressed:
        raise RuntimeError(f"{rid}: times out of order: press {pressed}, frozen {frozen}, booked {booked}, "
                           f"sign {shown}")
    return {"round": rid, "frozen": frozen - pressed, "booked": booked - pressed, "sign": shown - pressed,
            "gaps": gaps}


def deal_without_hits(rng: random.Random, players: int) -> list[int]:
    """The cards of one deal (five to each seat in turn, the dealer last: the order the shoe reads them) in
    which no seat's hand pays the Progressive Payout Wager (paytable D pays three of a kind and better), so
    that no detected hit waits for a floorperson and every round can be settled at once."""
    while True:
        cards = rng.sample(range(52), 5 * (players + 1))
        hands = [cards[i::players + 1] for i in range(players)]
        if all(poker5.category(poker5.evaluate(h)) < Poker5.THREE_OF_A_KIND for h in hands):
            return cards


def bookings_in_one_commit(state_dir: Path, rounds: list[str]) -> tuple[int, int]:
    """Of these rounds' bookings in the journal, how many are one transaction (every meter's entry with one time
    stamp: the writer stamps a batch once, and two COMMITs are never the same microsecond), and how many there
    are."""
    wanted, times = set(rounds), {}
    with JournalReader(state_dir / DB_NAME) as r:
        for rec in r.records():
            rid, booking, _ = rec.key.partition(":book:")
            if booking and rid in wanted:
                times.setdefault(rid, set()).add(rec.time)
    return sum(1 for ts in times.values() if len(ts) == 1), len(times)


def daemon_metric(t: TableProcess, name: str) -> float | None:
    """A sample of the daemon's Prometheus exposition (None if absent)."""
    url = f"http://{t.doc['metrics']['listen']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


# --- 1: lock-out latency -------------------------------------------------------------------------------


async def latency_run(baud: int, rounds: int, warmup: int, seed: int, work: Path) -> dict:
    rng = random.Random(seed + baud)
    cycle = wire_time(table_cycle_frames(), baud)
    # the seats read every LATENCY_HEALTH_S while dealing, so that the chips are seen collected and the next
    # round opens sooner; the betting pace, which a press waits on, is the default
    async with table_on(baud, work / f"latency-{baud}", health_interval=LATENCY_HEALTH_S) as (rig, t):
        log = Log(t.log_path)
        loads = [load()]
        samples = []
        for i in range(warmup + rounds):
            r = await play_round(rig, t, log, rng, wagers=pick_wagers(rng), jitter=cycle)
            if i >= warmup:
                samples.append(r)
            loads.append(load())
        # the lock-out's reads while betting (after the wagers' lights, up to the press): between rounds it
        # is read every health_interval, which says nothing of how soon a press is seen
        gaps = [g * 1e3 for s in samples for g in s["gaps"]]

        def mean_of(name: str) -> float | None:
            total, count = daemon_metric(t, name + "_sum"), daemon_metric(t, name + "_count")
            return total / count * 1e3 if total is not None and count else None

        own_mean = mean_of("progressive_lockout_latency_seconds")
        window_mean = mean_of("progressive_lockout_window_seconds")
        commit_mean = mean_of("progressive_ledger_commit_seconds")
        commits = daemon_metric(t, "progressive_ledger_commit_seconds_count")
        fast = daemon_metric(t, 'progressive_ledger_commit_seconds_bucket{le="0.1"}')
        one_commit, bookings = bookings_in_one_commit(t.state_dir, [s["round"] for s in samples])
    out: dict = {"baud": baud, "rounds": len(samples), "wire_ms": cycle * 1e3, "load": max(loads),
                 "lockout_period_ms": statistics.mean(gaps), "gap_p99_ms": percentile(gaps, 0.99),
                 "gap_max_ms": max(gaps),
                 "own_mean_ms": own_mean, "window_mean_ms": window_mean,
                 "commit_mean_ms": commit_mean, "commits": int(commits or 0),
                 "slow_commits": int((commits or 0) - (fast or 0)),
                 "one_commit": one_commit, "bookings": bookings}
    for k in ("frozen", "booked", "sign"):
        v = [s[k] * 1e3 for s in samples]
        out[k] = {"p50": percentile(v, 0.5), "p99": percentile(v, 0.99), "max": max(v), "mean": statistics.mean(v)}
    out["frozen_to_booked_ms"] = statistics.median(s["booked"] - s["frozen"] for s in samples) * 1e3
    out["frozen_to_booked_p99_ms"] = percentile([(s["booked"] - s["frozen"]) * 1e3 for s in samples], 0.99)
    # press to sign without the booking's own time (frozen to booked: the journal's commits, fsync included), to
    # tell a disk that held a commit up from the bus and the daemon
    no_booking = [(s["sign"] - (s["booked"] - s["frozen"])) * 1e3 for s in samples]
    out["sign_less_booking_p99"] = percentile(no_booking, 0.99)
    out["slow_bookings"] = sum(1 for s in samples if s["booked"] - s["frozen"] > SLOW_BOOKING_S)
    # the rounds that make the sign's p99 (with 200, the slowest three): how many of them a slow booking made
    tail = [s for s in samples if s["sign"] * 1e3 >= out["sign"]["p99"]]
    out["sign_tail"] = len(tail)
    out["sign_tail_slow_bookings"] = sum(1 for s in tail if s["booked"] - s["frozen"] > SLOW_BOOKING_S)
    out["booked_to_sign_ms"] = statistics.median(s["sign"] - s["booked"] for s in samples) * 1e3
    return out


# --- 2: CPU and memory ---------------------------------------------------------------------------------


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def proc_mem_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def bus_line_s(rig: Rig, baud: int) -> tuple[int, float]:
    """Frames to the devices so far (one a transaction), and the line time they and their replies took."""
    s = rig.wire_of("table-bus").stats
    txns = s.frames[Direction.TO_DEVICE]
    total_bytes = sum(s.bytes.values())
    return txns, total_bytes * CHAR_BITS / baud + 2 * txns * frame_silence(baud, CHAR_BITS)


async def window(pid: int, seconds: float, rig: Rig, baud: int) -> dict:
    """CPU of `pid` over `seconds` of wall time, its RSS sampled each second, the bus' occupancy."""
    rss = []
    txn0, line0 = bus_line_s(rig, baud)
    me0 = time.process_time()
    c0, t0 = proc_cpu_s(pid), time.monotonic()
    loads = [load()]
    while (left := t0 + seconds - time.monotonic()) > 0:
        await asyncio.sleep(min(1.0, left))
        rss.append(proc_mem_kib(pid)["VmRSS"])
        loads.append(load())
    c1, t1 = proc_cpu_s(pid), time.monotonic()
    txn1, line1 = bus_line_s(rig, baud)
    wall = t1 - t0
    return {"wall": wall, "cpu_pct": (c1 - c0) / wall * 100, "rss_mean": mb(statistics.mean(rss)),
            "rss_max": mb(max(rss)), "hwm": mb(proc_mem_kib(pid)["VmHWM"]), "load": max(loads),
            "rig_cpu_pct": (time.process_time() - me0) / wall * 100,
            "txn_per_s": (txn1 - txn0) / wall, "bus_busy_pct": (line1 - line0) / wall * 100}


def mark(pid: int, rig: Rig, baud: int) -> dict[str, float]:
    """Where the counters stand: the daemon's CPU seconds, the bus' transactions and line time, our CPU."""
    txns, line = bus_line_s(rig, baud)
    return {"wall": time.monotonic(), "cpu": proc_cpu_s(pid), "txns": txns, "line": line,
            "rig": time.process_time()}


def span(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b[k] - a[k] for k in a}


def rates(spans: list[dict[str, float]]) -> dict[str, float]:
    """CPU %, bus transactions a second and busy % over these stretches of time together."""
    total = {k: sum(s[k] for s in spans) for k in ("wall", "cpu", "txns", "line", "rig")}
    wall = total["wall"]
    return {"wall": wall, "cpu_pct": total["cpu"] / wall * 100, "txn_per_s": total["txns"] / wall,
            "bus_busy_pct": total["line"] / wall * 100, "rig_cpu_pct": total["rig"] / wall * 100}


async def mix_round(rig: Rig, t: TableProcess, log: Log, rng: random.Random, *, betting_s: float,
                    dealing_s: float, phases: dict[str, list], baud: int) -> None:
    """One round at a real table's pace: `betting_s` of betting (the shuffler's count, then chips on one to four
    seats at random moments within it), the lock-out, `dealing_s` from the press to the settlement (the
    chips collected, the cards read by the shoe), settled. The daemon's CPU and the bus by phase."""
    assert t.pid is not None
    start = mark(t.pid, rig, baud)
    t0 = start["wall"]
    await rig.shuffle(52)
    players = sorted(rng.sample(range(1, SEATS + 1), rng.randint(1, WAGER_SEATS)))
    moments = sorted(rng.uniform(0, 0.8 * betting_s) for _ in players)
    for seat, at in zip(rng.sample(players, len(players)), moments, strict=True):
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        await rig.place_chip(seat, "progressive", 100)
    await until(lambda: all("progressive" in lit(rig, s) for s in players), "accepted lights")
    rid = (await t.control("round"))["id"]
    await asyncio.sleep(max(0.0, t0 + betting_s - time.monotonic()))
    locked = mark(t.pid, rig, baud)
    phases["betting"].append(span(start, locked))
    await rig.press_lockout()
    await until(lambda: log.when("round booked", rid) is not None, f"{rid} booked in the log")
    for seat in players:  # the dealer collects the chips (§ 639a.8(b))
        await rig.remove_chip(seat, "progressive")
    seen = {seat: rig.simulator(f"seat-{seat}").requests for seat in players}
    await rig.deal(deal_without_hits(rng, len(players)))
    # two requests to each seat device after the chips left it (read every health_interval while dealing)
    await until(lambda: all(rig.simulator(f"seat-{s}").requests >= n + 2 for s, n in seen.items()),
                "chips seen collected")
    await asyncio.sleep(max(0.0, locked["wall"] + dealing_s - time.monotonic()))
    await t.control("settle", round_id=rid)
    await until(lambda: not rig.lights()["seats"] and rig.lights()["lockout_lamp"] is False, "lights off")
    phases["dealing"].append(span(locked, mark(t.pid, rig, baud)))


async def mix_run(rig: Rig, t: TableProcess, log: Log, rng: random.Random, *, rounds: int, betting_s: float,
                  dealing_s: float, baud: int) -> dict:
    """`rounds` whole rounds at a real table's pace: the daemon's CPU over them and by phase, its RSS sampled
    every second."""
    assert t.pid is not None
    pid = t.pid
    rss: list[int] = []
    loads = [load()]

    async def sample() -> None:
        while True:
            await asyncio.sleep(1.0)
            rss.append(proc_mem_kib(pid)["VmRSS"])
            loads.append(load())

    phases: dict[str, list] = {"betting": [], "dealing": []}
    sampler = asyncio.create_task(sample())
    try:
        first = mark(pid, rig, baud)
        for _ in range(rounds):
            await mix_round(rig, t, log, rng, betting_s=betting_s, dealing_s=dealing_s, phases=phases, baud=baud)
        whole = rates([span(first, mark(pid, rig, baud))])
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    rss.append(proc_mem_kib(pid)["VmRSS"])
    return {**whole, "rss_mean": mb(statistics.mean(rss)), "rss_max": mb(max(rss)), "load": max(loads),
            "rounds": rounds, "betting": rates(phases["betting"]), "dealing": rates(phases["dealing"])}


async def resources_run(baud: int, idle_s: float, play_s: float, seed: int, work: Path, *, mix_rounds: int,
                        betting_s: float, dealing_s: float) -> dict:
    rng = random.Random(seed)
    code = ("import sys\n" + "".join(f"import {m}\n" for m in BASELINE_IMPORTS) +
            "print('READY', flush=True)\nsys.stdin.read()\n")
    bare_code = "import sys\nprint('READY', flush=True)\nsys.stdin.read()\n"
    with ready_child(["-c", code]) as (base, _), ready_child(["-c", bare_code]) as (bare, _):
        async with table_on(baud, work / "resources") as (rig, t):
            assert t.pid is not None
            log = Log(t.log_path)
            await asyncio.sleep(2.0)  # past start-up
            idle = await window(t.pid, idle_s, rig, baud)
            base_mem = proc_mem_kib(base.pid)
            bare_mem = proc_mem_kib(bare.pid)
            stop = asyncio.Event()
            played = 0

            async def dealer() -> None:
                nonlocal played
                while not stop.is_set():
                    players = rng.randint(1, WAGER_SEATS)
                    seats = sorted(rng.sample(range(1, SEATS + 1), players))
                    await play_round(rig, t, log, rng, wagers=[(s, "progressive", 100) for s in seats],
                                     pause=1.0, cards=True)  # hil/dealer.py's pace
                    played += 1

            task = asyncio.create_task(dealer())
            try:
                play = await window(t.pid, play_s, rig, baud)
                rounds_in_window = played
            finally:
                stop.set()
            await task
            mix = await mix_run(rig, t, log, rng, rounds=mix_rounds, betting_s=betting_s, dealing_s=dealing_s,
                                baud=baud)
            end_mem = proc_mem_kib(t.pid)
    return {"bare_rss": mb(bare_mem["VmRSS"]), "baud": baud, "idle": idle, "play": play, "rounds": rounds_in_window,
            "mix": mix, "betting_s": betting_s, "dealing_s": dealing_s,
            "baseline_rss": mb(base_mem["VmRSS"]), "baseline_hwm": mb(base_mem["VmHWM"]),
            "end_rss": mb(end_mem["VmRSS"]), "end_hwm": mb(end_mem["VmHWM"])}


# --- the report -----------------------------------------------------------------------------------------


def _ms(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _ratio(v: float, limit: float) -> str:
    """A ratio to two places, or as many more as it takes not to show the limit itself for another value."""
    for places in range(2, 7):
        text = f"{v:.{places}f}"
        if v == limit or text != f"{limit:.{places}f}":
            return text + "x"
    return text + "x"


def _goal(name: str, limit: float, values: list[tuple[int, float, float]]) -> str:
    """'name at most LIMITx: met at 19,200 baud (0.21x; before 1.66x), ...' from (baud, now, before)."""
    parts = [f"{'met' if now <= limit else 'missed'} at {baud:,} baud ({_ratio(now, limit)}; before {before:.2f}x)"
             for baud, now, before in values]
    return f"{name} at most {limit:g}x the cycle's wire time: " + ", ".join(parts)


def _reference_row(baud: int, label: str, ref: dict, wire_ms: float, window: str) -> str:
    """A row of figures measured on an earlier day (LATENCY_TWO_COMMITS, LATENCY_BEFORE)."""
    return (f"| {baud:,} | {label} | {wire_ms:.1f} | {ref['lockout_period_ms']} | {ref['rounds']} | "
            f"{ref['frozen'][0]} | {ref['frozen'][1]} | {ref['frozen'][1] / wire_ms:.2f}x | {ref['booked'][0]} | "
            f"{ref['booked'][1]} | {ref['booked'][1] / wire_ms:.2f}x | {ref['sign'][0]} | {ref['sign'][1]} | "
            f"{ref['sign'][0] / wire_ms:.2f}x | {ref['sign'][1] / wire_ms:.2f}x | {window} |")


def _booking_compared(r: dict) -> str:
    """The booking's own time in this run, beside the last run with two COMMITs that measured it."""
    now = (f"at {r['baud']:,} baud median {r['frozen_to_booked_ms']:.1f} ms and p99 "
           f"{r['frozen_to_booked_p99_ms']:.1f} ms")
    for day, figures in reversed(LATENCY_TWO_COMMITS.items()):
        c = figures.get(r["baud"], {})
        if "booking" in c:
            return now + f" (two commits, {day}: {c['booking'][0]:.1f} and {c['booking'][1]:.1f} ms)"
    return now


def _reference_rows(baud: int, wire_ms: float) -> list[str]:
    rows = []
    for day, figures in LATENCY_TWO_COMMITS.items():
        c = figures.get(baud)
        if c is not None:  # the same bus and table as now: the same cycle
            rows.append(_reference_row(baud, f"two commits ({day})", c, wire_ms, f"{c['window_mean_ms']:.1f}"))
    b = LATENCY_BEFORE.get(baud)
    if b is not None:
        rows.append(_reference_row(baud, f"before ({BEFORE})", b, b["wire_ms"], ""))
    return rows


def render_latency(results: list[dict], rounds_arg: str) -> str:
    today = harness.today()
    frames = table_cycle_frames()
    ref = drivers_issue_frames()
    rows = []
    for r in results:
        w = r["wire_ms"]
        rows.append(
            f"| {r['baud']:,} | {today} | {w:.1f} | {r['lockout_period_ms']:.0f} | {r['rounds']} | "
            f"{r['frozen']['p50']:.0f} | {r['frozen']['p99']:.0f} | **{_ratio(r['frozen']['p99'] / w, FROZEN_P99_GOAL)}** | "
            f"{r['booked']['p50']:.0f} | {r['booked']['p99']:.0f} | {r['booked']['p99'] / w:.2f}x | "
            f"{r['sign']['p50']:.0f} | {r['sign']['p99']:.0f} | {r['sign']['p50'] / w:.2f}x | "
            f"**{_ratio(r['sign']['p99'] / w, SIGN_P99_GOAL)}** | {_ms(r['window_mean_ms'])} |")
        rows += _reference_rows(r["baud"], w)
    parts = []
    for r in results:
        parts.append(
            f"at {r['baud']:,} baud the press is seen after {r['frozen']['mean']:.0f} ms on average (the lock-out "
            f"is read every {r['lockout_period_ms']:.0f} ms while betting; the daemon's own "
            f"`progressive_lockout_window_seconds`, from the lock-out read before the press to the wagers frozen, "
            f"averages {_ms(r['window_mean_ms'])} ms), the booking is durable a median "
            f"{r['frozen_to_booked_ms']:.1f} ms later (p99 {r['frozen_to_booked_p99_ms']:.1f} ms; the daemon's own `progressive_lockout_latency_seconds`, "
            f"which starts when the press is seen, averages {_ms(r['own_mean_ms'])} ms; a ledger operation "
            f"{_ms(r['commit_mean_ms'])} ms from its submission to its durable receipt; the booking, two of them, "
            f"one COMMIT in {r['one_commit']} of {r['bookings']} rounds) and the sign shows the new amounts a "
            f"median {r['booked_to_sign_ms']:.0f} ms after the booking")
    goals = []
    for name, key, limit in (("press to wagers frozen", "frozen", FROZEN_P99_GOAL),
                             ("press to sign updated", "sign", SIGN_P99_GOAL)):
        values = [(r["baud"], r[key]["p99"] / r["wire_ms"],
                   LATENCY_BEFORE[r["baud"]][key][1] / LATENCY_BEFORE[r["baud"]]["wire_ms"])
                  for r in results if r["baud"] in LATENCY_BEFORE]
        if values:
            goals.append(_goal(name, limit, values))
    lockout_frames = table_cycle_frames("lockout")
    def reply_ms(r: dict) -> float:
        return sum(b for _, b in lockout_frames) * CHAR_BITS / r["baud"] * 1e3

    def slowest(r: dict) -> float:
        """A press just after a lock-out read, in 1 of 100 such presses: seen with the next read's reply."""
        return (r["gap_p99_ms"] + reply_ms(r)) / r["wire_ms"]

    floors = [f"at {r['baud']:,} baud the lock-out was read every {r['lockout_period_ms']:.0f} ms on average while "
              f"betting, 99% of the gaps between two of its reads (measured at the simulated button) at most "
              f"{r['gap_p99_ms']:.0f} ms and the longest {r['gap_max_ms']:.0f} ms, so a press just after a read "
              f"is seen, with the next read's reply ({reply_ms(r):.1f} ms of wire time), up to "
              f"{slowest(r):.2f}x the cycle's wire time after it in 99 of 100 such presses, before the daemon does "
              f"anything; {r['slow_commits']} of the daemon's {r['commits']} ledger operations took over 100 ms "
              "from their submission to their durable receipt (its `progressive_ledger_commit_seconds`; a "
              "round's booking is two of them, the settlement's close two more: an fsync held up by the disk, "
              "which shows in the committed and sign columns when it is a booking's)"
              for r in results]
    seat_frames = table_cycle_frames("seat")[:1]
    # the button is read when the request reaches it: a press just after waits for the rest of that transaction,
    # a seat's, and the next lock-out read's request and reply
    wire_floor = {r["baud"]: ((wire_time(lockout_frames, r["baud"]) + wire_time(seat_frames, r["baud"])) * 1e3
                              + reply_ms(r)) / r["wire_ms"] for r in results}
    wire_floors = ", ".join(f"{wire_floor[r['baud']]:.2f}x the cycle's wire time at {r['baud']:,} baud"
                            for r in results)
    verdict_parts = []
    for r in results:
        p99 = r["frozen"]["p99"] / r["wire_ms"]
        if p99 <= FROZEN_P99_GOAL:
            how = f"met ({_ratio(p99, FROZEN_P99_GOAL)}; the rig's gaps allow {slowest(r):.2f}x)"
        elif slowest(r) > FROZEN_P99_GOAL:
            how = (f"missed ({_ratio(p99, FROZEN_P99_GOAL)}): the rig's gaps between two lock-out reads alone allow "
                   f"{slowest(r):.2f}x, more than {FROZEN_P99_GOAL}x, so presses falling just after a read cannot "
                   "meet it on this rig whatever the daemon does (on the wire alone such a press would be seen "
                   f"{wire_floor[r['baud']]:.2f}x after it)")
        else:
            how = (f"missed ({_ratio(p99, FROZEN_P99_GOAL)}) where the rig's gaps allow {slowest(r):.2f}x: the rest "
                   "lies between the lock-out read's reply and the wagers frozen (the daemon, its process sharing "
                   "2 CPUs with the rig's)")
        verdict_parts.append(f"at {r['baud']:,} baud {how}")
    sign_parts = []
    for r in results:
        p99, less = r["sign"]["p99"] / r["wire_ms"], r["sign_less_booking_p99"] / r["wire_ms"]
        if p99 <= SIGN_P99_GOAL:
            sign_parts.append(f"at {r['baud']:,} baud met ({_ratio(p99, SIGN_P99_GOAL)}; {less:.2f}x without the "
                              "booking's own time)")
        elif less > SIGN_P99_GOAL:
            sign_parts.append(f"at {r['baud']:,} baud missed ({_ratio(p99, SIGN_P99_GOAL)}; {less:.2f}x even "
                              "without each round's booking time: the bus, the rig and the machine's CPUs)")
        elif r["sign_tail_slow_bookings"] == r["sign_tail"]:  # every round that makes the p99 waited on the disk
            sign_parts.append(
                f"at {r['baud']:,} baud missed ({_ratio(p99, SIGN_P99_GOAL)}): of the {r['sign_tail']} slowest rounds "
                f"that make the p99, {r['sign_tail_slow_bookings']} had a booking of over 100 ms from the wagers "
                f"frozen to the commits durable ({r['slow_bookings']} of {r['rounds']} rounds in all); without each "
                f"round's booking time the p99 is {less:.2f}x, so what misses the goal is the time the disk took to "
                "fsync those commits (the sign shows an amount only once it is durable)")
        else:
            sign_parts.append(
                f"at {r['baud']:,} baud missed ({_ratio(p99, SIGN_P99_GOAL)}): without each round's booking time (its "
                f"one commit, durable with an fsync; booked p99 {r['booked']['p99']:.0f} ms after the press) "
                f"the p99 is {less:.2f}x")
    sign_verdicts = "; ".join(sign_parts)
    verdicts = "; ".join(verdict_parts)
    load = max(r["load"] for r in results)
    lines = [
        LATENCY_SECTION,
        "",
        f"Reproduce: `{COMMAND}` (`--quick` for a smoke run with a few rounds).",
        "",
        f"Measured {today} with {versions()} (load average up to {load:.1f} during the run: other work "
        "shared the machine, so p99 in particular is noisy). The example Caribbean Stud table "
        "(config/tables/caribbean-stud.toml) on the seven-seat rig (config/hil/caribbean-stud-7.toml), its one "
        "RS-485 bus run at each baud rate: `progressived --config FILE` in a child process, the rig "
        "(simulated devices, paced PTY wires) in the benchmark's process. Each round: chips on four seats "
        "(the Progressive Payout Wager on each, $1 or $5; the Five Card Hand Bonus on one of them, so both "
        "meters are booked), their accepted lights awaited on the rig, a random pause of up to one cycle, the "
        "lock-out pressed on the rig; then the chips collected and the round settled through the control "
        f"socket (from the lock-out to the settlement the bus reads the seats every {LATENCY_HEALTH_S:g} s, its "
        "`health_interval` set so for these runs: the default 2 s only makes each round longer; the betting "
        "pace, which a press waits on, is the default). Times are from the press to: wagers frozen (the round machine took the press: the daemon's "
        "`locked` log line), contributions committed (every booking's ledger receipt, durable with fsync: "
        "the `round booked` log line) and the sign updated (the simulated sign holds the new amounts); each "
        f"sign was checked against the daemon's meters. Rounds per baud rate: {rounds_arg}, after a warm-up "
        f"round{' (with fewer than 100, p99 is the slowest round)' if int(rounds_arg) < 100 else ''}. "
        "The wire time is one poll cycle of this bus as its drivers plan it: seven seat reads (9 input "
        "registers each: three spots with their amounts), the lock-out's read and one sign update (two "
        f"meters, message cleared), {len(frames)} transactions, {sum(a for a, _ in frames)} request and "
        f"{sum(b for _, b in frames)} reply bytes, with bench_poll's formula: per transaction, (request + "
        "reply bytes) x 11 bits / baud + 2 x t3.5. (The Poll cycle section's cycle, with seat maps of one "
        f"spot, is {wire_time(ref, 19200) * 1e3:.1f} ms at 19,200 baud and {wire_time(ref, 115200) * 1e3:.1f} "
        "ms at 115,200.) The lock-out column is the measured mean time between two reads of the lock-out "
        "while betting (from the wagers' lights to the press); the last column is the mean of the daemon's "
        "own `progressive_lockout_window_seconds` (its /metrics, at the end of the baud rate's rounds). The "
        "rows marked two commits are figures with a booking of two COMMITs (below): this section's of "
        "2026-12-02, and the same benchmark run with that code on 2026-12-05, just before this run; the rows "
        f"marked before ({BEFORE}) those of that day, when the bus had one "
        "lock taken first come first served by every poller and every write, and the lock-out was read once a "
        "cycle.",
        "",
        "| baud | measured | cycle wire time ms | lock-out read every ms | rounds | frozen p50 ms | frozen p99 ms | "
        "frozen p99 / wire | committed p50 ms | committed p99 ms | committed p99 / wire | sign p50 ms | "
        "sign p99 ms | sign p50 / wire | sign p99 / wire | lock-out window mean ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Goals (p99, against the cycle's wire time in the same run): " + "; ".join(goals) + ".",
        "",
        "What bounds them in this run: " + "; ".join(floors) + ".",
        "",
        "So the frozen goal has little room on this rig. On the wire alone, the slowest press (just after the "
        "button was read) waits for the rest of that transaction, a seat read and the next lock-out read: "
        + wire_floors +
        ". The rig adds its own turnaround to every transaction (Poll cycle: even a bare client takes 1.38x "
        "the wire time at 115,200 baud), which is what the gaps between the lock-out's reads hold beyond the "
        "wire's. The frozen goal: " + verdicts + ". The sign goal: " + sign_verdicts + ".",
        "",
        "Where the time goes: " + "; ".join(parts) + ".",
        "",
        "A press waits for the lock-out's next read. The bus's scheduler (docs/register-maps.md, \"Buses\") reads "
        "the lock-out after every other device's read while betting (`lockout_every` = 2 counts reads, not "
        "transactions), so that wait is usually about two transactions and at times a few more (a device's turn "
        "of two requests, writes between), where it was up to a whole cycle before; after the read the daemon "
        "itself, the round machine and one fsynced commit, takes the smallest share. The sign's write goes "
        "before any read waiting for the line.",
        "",
        "One commit a booking: the round's bookings on its two meters (one entry a meter, each naming both) are "
        "queued together and the journal's writer commits them in one transaction, one fsync; before, each was "
        "awaited before the next was queued: two COMMITs a round (the rows marked two commits, measured on this "
        "machine). The booking's own time, from the wagers frozen to both meters' bookings durable, "
        + ", ".join(_booking_compared(r) for r in results) + ": with every fsync answered in a few ms the two "
        "differ by about one commit, within what the shared machine varies from run to run; what one COMMIT "
        "saves is the second wait on a slow fsync. The sign still shows an amount only once it is durable: it is told after the COMMIT that "
        "holds every meter's booking (docs/meters.md). A COMMIT is whole or absent after a crash: the round "
        "booked on both of the journal's meters or on neither; a start still reverses a round found booked on "
        "only some of its meters (a booking the writer took in two batches, or one on a linked meter, which is "
        "in the link's own journal). In this run the journal "
        "holds " + ", ".join(f"{r['one_commit']} of the {r['bookings']} measured bookings at {r['baud']:,} baud"
                              for r in results)
        + " as one transaction (their entries share the batch's one time stamp). A booking now waits for one "
        "fsync, not two, so the disk's slow ones (journal writes of over 100 ms: "
        + ", ".join(f"{r['slow_commits']} of {r['commits']} at {r['baud']:,} baud" for r in results)
        + " in this run, 11 and 3 of 804 on 2026-12-02) hold it up about half as often.",
        "",
        "Two stalls of the booking were found by this benchmark and removed: SQLite's automatic checkpoint, which "
        "folded the WAL into the journal's file inside whichever COMMIT crossed 1,000 pages (~130 ms of one "
        "booking in 40 at 115,200 baud; the daemon now folds it after each booking, docs/meters.md), and Python's "
        "full garbage collection, which walked the whole start-up heap on the event loop (30-95 ms measured, at a "
        "moment set by allocation counts; the daemon now freezes that heap once it is ready, "
        "controller/app/heap.py). What is left in a slow round is the disk's and the machine's own.",
    ]
    return "\n".join(lines) + "\n"


def render_resources(r: dict, idle_s: float, play_s: float) -> str:
    today = harness.today()
    idle, play, mix = r["idle"], r["play"], r["mix"]
    rounds_label = f"{r['rounds']} round{'s' if r['rounds'] != 1 else ''}"
    worst_rss = max(idle["rss_max"], play["rss_max"], mix["rss_max"], r["end_rss"])

    def per_txn(w: dict) -> str:
        return f"{w['cpu_pct'] / 100 / w['txn_per_s'] * 1e3:.2f}" if w["txn_per_s"] else ""

    def row(name: str, when: str, w: dict, *, bold: bool = False, rss: bool = True) -> str:
        cpu = f"**{w['cpu_pct']:.1f}**" if bold else f"{w['cpu_pct']:.1f}"
        rss_mean = f"{w['rss_mean']:.1f}" if rss else ""
        rss_max = (f"**{w['rss_max']:.1f}**" if bold else f"{w['rss_max']:.1f}") if rss else ""
        ms = w.get("cpu_ms_per_txn")  # as printed before; computed for the windows measured now
        ms_text = f"{ms:.2f}" if ms is not None else per_txn(w)
        return (f"| {name} | {when} | {w['wall']:.0f} | {cpu} | {rss_mean} | {rss_max} | {w['txn_per_s']:.0f} | "
                f"{w['bus_busy_pct']:.0f} | {ms_text} | {w['rig_cpu_pct']:.0f} |")

    before = f"before ({BEFORE})"
    mix_name = (f"realistic mix: {mix['rounds']} round{'s' if mix['rounds'] != 1 else ''} of {r['betting_s']:g} s "
                f"betting and {r['dealing_s']:g} s dealing")
    rows = [
        row("idle (no chips), polled flat out", today, idle),
        row(RESOURCES_BEFORE["idle"]["label"], before, RESOURCES_BEFORE["idle"]),
        row(f"play ({rounds_label}), a round every few seconds", today, play),
        row(RESOURCES_BEFORE["play"]["label"], before, RESOURCES_BEFORE["play"]),
        row(mix_name, today, mix, bold=True),
        row("of which betting", today, mix["betting"], rss=False),
        row("of which dealing", today, mix["dealing"], rss=False),
    ]
    load = max(idle["load"], play["load"], mix["load"])
    flat = (f"idle, polled flat out, {idle['cpu_pct']:.1f}%, and play {play['cpu_pct']:.1f}%, against "
            f"{RESOURCES_BEFORE['idle']['cpu_pct']:g}% and {RESOURCES_BEFORE['play']['cpu_pct']:g}% before")
    goal = (f"Goals at {r['baud']:,} baud: CPU over the realistic mix under {CPU_GOAL:g}% of one core: "
            + ("met" if mix["cpu_pct"] < CPU_GOAL else "missed") + f", {mix['cpu_pct']:.2f}%"
            + f" ({flat}); memory under {RSS_GOAL_MB:g} MB: "
            + (f"met, {worst_rss:.1f} MB at most" if worst_rss < RSS_GOAL_MB else f"missed, {worst_rss:.1f} MB")
            + f" in the windows (before: {RESOURCES_BEFORE['play']['rss_max']:g} MB)"
            + (f"; the peak (VmHWM, start-up included) is {r['end_hwm']:.1f} MB: the scrypt hash of a supervisor's "
               f"secret (N = 2^{SCRYPT_N.bit_length() - 1}, r = {SCRYPT_R}) needs {128 * SCRYPT_R * SCRYPT_N >> 20} "
               "MiB while it runs, once at start-up for the decoy and once a check, memory-hard on purpose "
               "(docs/security.md, \"Guessing a supervisor's secret\")"
               if r["end_hwm"] >= RSS_GOAL_MB
               else f", {r['end_hwm']:.1f} MB at the peak (VmHWM, start-up included)")
            + f". The machine was shared (load average up to "
            f"{load:.1f} on {os.cpu_count()} CPUs): CPU figures taken on a quiet machine may differ.")
    idle_per_txn = idle["cpu_pct"] / 100 / idle["txn_per_s"] * 1e3
    lines = [
        RESOURCES_SECTION,
        "",
        f"Reproduce: `{COMMAND}` (the same run as the Lock-out latency section).",
        "",
        f"Measured {today} with {versions()} (load average up to {load:.1f} during the windows: other work "
        f"shared the machine). `progressived --config FILE` in a child process on the seven-seat rig at "
        f"{r['baud']:,} baud, the rig in the benchmark's process. While betting the bus's scheduler reads the "
        "seats and the lock-out as fast as the bus goes (the drivers' default poll intervals, 50 ms, are "
        f"shorter than a cycle); from the lock-out until the next round opens, every `health_interval` "
        f"({Policy().health_interval:g} s). "
        "Idle: no chips on the table, betting open; play: a scripted dealer at the pace of hil/dealer.py (the "
        "shuffler's count, chips on one to four seats, their lights, a 1 s pause, the lock-out, the chips "
        "collected and 5 cards a hand dealt from the shoe, a 1 s pause, settled through the control "
        "socket), a round every few seconds, far faster than a real table deals. Idle is the bus polled flat "
        f"out; so was play in the rows before ({BEFORE}), when every phase was read at the bus's pace; now "
        "play reads it so while betting only. The realistic mix is whole rounds at a real table's "
        f"pace: {r['betting_s']:g} s of betting (the shuffler's count, chips on one to four seats at random "
        f"moments within it, their lights), the lock-out, {r['dealing_s']:g} s from the press to the settlement "
        "(the chips collected, 5 cards a hand read by the shoe as the scripted dealer deals them), settled; "
        "a round every "
        f"{r['betting_s'] + r['dealing_s']:g} s, and its two phases apart. CPU is the daemon's utime + stime "
        "from /proc/PID/stat (every thread) over the window's wall time, in % of one core; RSS is VmRSS from "
        "/proc/PID/status, sampled every second; MB are 10^6 bytes. Windows of "
        f"{idle_s:g} s idle and {play_s:g} s of play, after start-up, then the mix. The bus columns are from "
        "the rig's wire: transactions a second, and the share of the time the line carried their bytes and "
        "silences. The last column is the benchmark's own process (the simulated devices and the wires' relay "
        "threads), for scale.",
        "",
        "| window | measured | seconds | CPU % of one core | RSS mean MB | RSS max MB | bus transactions/s | "
        "bus busy % | CPU ms per transaction | rig CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        goal,
        "",
        f"Memory: peak RSS of the daemon (VmHWM, start-up included) {r['end_hwm']:.1f} MB, RSS at the end "
        f"{r['end_rss']:.1f} MB. Baselines measured beside it: an idle Python process that imports what the "
        f"daemon imports ({', '.join(f'`{m}`' for m in BASELINE_IMPORTS)}) and does nothing else holds "
        f"{r['baseline_rss']:.1f} MB; a bare interpreter {r['bare_rss']:.1f} MB. Nearly all of the daemon's "
        f"memory is the code it imports: its own state (journal connection, meters, drivers, buffers, tasks) "
        f"is about {worst_rss - r['baseline_rss']:.1f} MB.",
        "",
        f"CPU: most of the daemon's time goes with the bus transactions. Idle, with nothing on the table, it "
        f"spends {idle['cpu_pct']:.1f}% of a core, {idle_per_txn:.2f} ms per transaction (pymodbus' client, the "
        f"bus' timing, the drivers' decoding); in play {play['cpu_pct']:.1f}% (its rounds add log lines, the "
        "journal's commits, lights and sign writes and the control socket, and from each lock-out to its settlement the "
        "bus is read every `health_interval`). In the realistic mix the bus is read at the betting pace for "
        f"{r['betting_s']:g} s of every {r['betting_s'] + r['dealing_s']:g}: "
        f"{mix['betting']['cpu_pct']:.1f}% of a core while betting ({mix['betting']['txn_per_s']:.0f} "
        f"transactions a second), {mix['dealing']['cpu_pct']:.1f}% while dealing "
        f"({mix['dealing']['txn_per_s']:.0f} a second), {mix['cpu_pct']:.1f}% over whole rounds. At a faster "
        "baud rate the betting phase makes more transactions a second and costs proportionally more (an "
        "estimate from the CPU per transaction, not measured here); the dealing phase's reads are bounded by "
        "`health_interval` at any baud rate.",
    ]
    return "\n".join(lines) + "\n"


def quick(args: argparse.Namespace) -> None:
    """A smoke run: a few rounds, short windows."""
    args.rounds, args.idle, args.play = 4, 3.0, 6.0
    args.mix_rounds, args.betting_s, args.dealing_s = 2, 4.0, 6.0


def main() -> None:
    ap = harness.parser(__doc__, sections="both sections")
    ap.add_argument("--bauds", default="19200,115200")
    ap.add_argument("--rounds", type=int, default=LATENCY_ROUNDS, help="measured lock-outs per baud rate")
    ap.add_argument("--sections", default="latency,resources",
                    help="which to measure (and write): latency, resources or both")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of idle measured")
    ap.add_argument("--play", type=float, default=30.0, help="seconds of play measured")
    ap.add_argument("--resources-baud", type=int, default=19200)
    ap.add_argument("--mix-rounds", type=int, default=5, help="whole rounds of the realistic mix")
    ap.add_argument("--betting-s", type=float, default=30.0, help="seconds of betting in each round of the mix")
    ap.add_argument("--dealing-s", type=float, default=60.0,
                    help="seconds from the lock-out to the settlement in each round of the mix")
    args = harness.parse(ap, quick)
    if args.mix_rounds < 1 or args.betting_s < 2 or args.dealing_s < 2:
        ap.error("the mix needs a round at least, and 2 s of betting and of dealing at least")
    sections = set(args.sections.split(","))
    if not sections or sections - {"latency", "resources"}:
        ap.error("--sections: latency, resources or both (comma-separated)")
    bauds = [int(b) for b in args.bauds.split(",")]
    for baud in bauds:
        print(f"{baud:>6} baud: cycle wire time {wire_time(table_cycle_frames(), baud) * 1e3:.1f} ms "
              f"(bench_poll's cycle {wire_time(drivers_issue_frames(), baud) * 1e3:.1f} ms)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-table-") as tmp:
        work = Path(tmp)
        latency = []
        for baud in bauds if "latency" in sections else ():
            r = asyncio.run(latency_run(baud, args.rounds, 1, args.seed, work))
            latency.append(r)
            print(f"{baud:>6} baud: " + "  ".join(
                f"{k} p50 {r[k]['p50']:.1f} p99 {r[k]['p99']:.1f} ms" for k in ("frozen", "booked", "sign")) +
                f"  ({r['rounds']} rounds; frozen->booked {r['frozen_to_booked_ms']:.1f} ms "
                f"(p99 {r['frozen_to_booked_p99_ms']:.1f}), daemon's own mean "
                f"{_ms(r['own_mean_ms'])} ms, lock-out window mean {_ms(r['window_mean_ms'])} ms, commit mean "
                f"{_ms(r['commit_mean_ms'], 2)} ms, {r['slow_commits']} of {r['commits']} over 100 ms; "
                f"{r['one_commit']} of {r['bookings']} bookings one COMMIT; lock-out read every "
                f"{r['lockout_period_ms']:.0f} ms while betting)", flush=True)
        res = None
        if "resources" in sections:
            res = asyncio.run(resources_run(args.resources_baud, args.idle, args.play, args.seed, work,
                                            mix_rounds=args.mix_rounds, betting_s=args.betting_s,
                                            dealing_s=args.dealing_s))
        for k, w in () if res is None else (("idle", res["idle"]), ("play", res["play"]), ("mix", res["mix"]),
                     ("  betting", res["mix"]["betting"]), ("  dealing", res["mix"]["dealing"])):
            rss = f"rss {w['rss_mean']:.1f}/{w['rss_max']:.1f} MB  " if "rss_mean" in w else ""
            print(f"{k:>9}: {w['wall']:.0f} s  cpu {w['cpu_pct']:.2f}%  {rss}bus {w['txn_per_s']:.0f} txn/s "
                  f"{w['bus_busy_pct']:.0f}% busy  rig cpu {w['rig_cpu_pct']:.0f}%", flush=True)
        if res is not None:
            print(f"rounds in play window {res['rounds']}; daemon hwm {res['end_hwm']:.1f} MB, end rss "
                  f"{res['end_rss']:.1f} MB; baseline rss {res['baseline_rss']:.1f} MB", flush=True)
    texts = []
    if latency:
        texts.append((LATENCY_SECTION, render_latency(latency, str(args.rounds))))
    if res is not None:
        texts.append((RESOURCES_SECTION, render_resources(res, args.idle, args.play)))
    harness.report(texts, args.write)


if __name__ == "__main__":
    main()

"""The authority's database pair: PostgreSQL with synchronous streaming replication, its failover Patroni's over
etcd, as docs/link-at-scale.md ("For failover to a standby box") sets it up, from config/patroni/patroni.yml.

One etcd member and two Patroni nodes on 127.0.0.1 (tests/support/pgcluster.py), shared by the tests of this file
(one xdist group); each test starts from both nodes up, the standby streaming synchronously. A client always
connects with the one multi-host URL (target_session_attrs=read-write), as the authority does.

- A committed row is on the standby when COMMIT returns (its WAL received there), and readable there.
- The leader's box dies (SIGKILL of Patroni and of every PostgreSQL process): the standby is promoted within
  about ttl (20 s), the URL reaches it unchanged, every row committed before is there, and it commits alone (a
  pair keeps serving with either box lost) until the old leader, started again, rejoins as its synchronous
  standby (pg_rewind); that one is read-only: a session on it cannot write.
- The leader's Patroni hangs while its PostgreSQL runs on: the standby takes over; a session still open on the
  old leader cannot commit (its COMMIT waits: its synchronous standby leads now, and the hung Patroni cannot let
  it go on alone) and, once the box is reset (by its watchdog in production, killed here), fails: never
  acknowledged, and not on the new leader.
- The standby's box dies: the leader's COMMITs wait until Patroni lets it go on alone (a loop or two), then
  commit. If the leader's box dies too, the old standby, started again, is NOT promoted: it lacks what the leader
  acknowledged alone. The pair waits for the leader's box, which leads again with every row.

The failover cycles alternate the two ways of losing the leader, the hung Patroni first (the link's failover test,
tests/system/test_link_failover.py, kills the box): the default run one cycle, longer with PROGRESSIVE_SOAK=1
./test -m soak or PGCLUSTER_FAILOVER_CYCLES=N. Each prints the seconds from the loss of the leader until the other
node accepts writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import soak
from pgcluster import EXPECTED_DCS, NODES, SHIPPED, PgCluster, derive_config, processes_in, running_pgcluster

pytestmark = pytest.mark.xdist_group("pgcluster")

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip: psycopg[binary])")

CYCLES = soak.cycles("PGCLUSTER_FAILOVER_CYCLES", default=1, soak=12)
TTL = EXPECTED_DCS["ttl"]
ROWS = 30  # committed before each failover
ALONE_S = 30.0  # a leader with no standby commits alone within a loop or two of Patroni


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    with running_pgcluster() as c:
        with psycopg.connect(c.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE rows (cycle int, n int, PRIMARY KEY (cycle, n))")
        yield c
    assert not processes_in(c.directory), "processes left running after the cluster's stop"
    assert not c.directory.exists()


@pytest.fixture
def pair(cluster: PgCluster) -> PgCluster:
    """The cluster with both nodes up and the standby streaming synchronously, whatever an earlier test left."""
    cluster.heal()
    return cluster


def insert(url: str, cycle: int, n: int) -> None:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute("INSERT INTO rows VALUES (%s, %s)", (cycle, n))


def rows(dsn: str, cycle: int) -> list[int]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        return [n for (n,) in conn.execute("SELECT n FROM rows WHERE cycle = %s ORDER BY n", (cycle,))]


def port(url: str) -> int:
    """The port of the server a new session of `url` reaches."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        return int(conn.execute("SELECT inet_server_port()").fetchone()[0])


class Commit(threading.Thread):
    """An INSERT and its COMMIT in a session of `dsn` opened beforehand (`opened`), run in a thread: the COMMIT
    may wait. `outcome` is "committed" or the error that ended it."""

    def __init__(self, dsn: str, cycle: int, n: int) -> None:
        super().__init__(daemon=True)
        self.conn: Any = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
        self.cycle, self.n = cycle, n
        self.outcome: str | None = None

    def run(self) -> None:
        try:
            self.conn.execute("INSERT INTO rows VALUES (%s, %s)", (self.cycle, self.n))
            self.outcome = "committed"
        except psycopg.Error as e:
            self.outcome = f"{type(e).__name__}: {e}"
        finally:
            self.conn.close()


def wait_rows(pair: PgCluster, node: str, cycle: int, expected: list[int], timeout: float = 10.0) -> list[int]:
    """The rows of `cycle` on `node`, read there, once they are `expected` (a standby replays a moment after it
    received) or when `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while (found := rows(pair.dsn(node), cycle)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)  # the standby's replay, polled with the deadline above
    return found


def test_a_committed_row_is_on_the_standby(pair: PgCluster) -> None:
    leader, standby = pair.leader(), pair.replica()
    with psycopg.connect(pair.url, autocommit=True) as conn:
        assert conn.execute("SELECT inet_server_port()").fetchone() == (pair.nodes[leader].pg_port,)
        before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        conn.execute("INSERT INTO rows VALUES (-1, 1)")
    # COMMIT returned: the standby has received and flushed the commit's WAL, at once (synchronous_commit = on
    # waits for that, not for the replay)...
    with psycopg.connect(pair.dsn(standby, superuser=True), autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery(), pg_last_wal_receive_lsn() >= %s::pg_lsn",
                            (before,)).fetchone() == (True, True)
        assert conn.execute("SELECT status FROM pg_stat_wal_receiver").fetchall() == [("streaming",)]
    # ...and the row is readable there a moment later.
    assert wait_rows(pair, standby, -1, [1]) == [1]


@soak.mark
@pytest.mark.parametrize("cycle", range(CYCLES))
def test_the_standby_takes_over_when_the_leader_is_lost(pair: PgCluster, cycle: int) -> None:
    how = "patroni hangs" if cycle % 2 == 0 else "box dies"
    old, new = pair.leader(), pair.replica()
    for n in range(ROWS):
        insert(pair.url, cycle, n)
    stray = None
    if how == "box dies":
        pair.kill(old)
    else:
        stray = Commit(pair.dsn(old), cycle, ROWS + 1)  # a session of the old leader, opened while it led
        pair.freeze(old)
    seconds = pair.wait_leader(new)
    print(f"\ncycle {cycle} ({how}): {old} lost -> {new} leads in {seconds:.1f} s (ttl {TTL} s)")
    # The lost leader's key expires ttl after its last renewal (every loop_wait), then the standby promotes
    # itself in a second or two.
    assert TTL - EXPECTED_DCS["loop_wait"] - 1 <= seconds <= TTL + 10, seconds

    # Every row committed before the loss is on the new leader. The URL reaches it unchanged once the old
    # server is gone or demoted: a hung Patroni's server takes sessions until then (whose COMMITs wait, below).
    assert rows(pair.dsn(new), cycle) == list(range(ROWS))
    if stray is None:
        assert port(pair.url) == pair.nodes[new].pg_port

    # The new leader commits alone: a pair keeps serving with one box lost. The old leader's server may still run
    # with a session open (Patroni hung), but its COMMIT waits: its synchronous standby leads now and streams from
    # no one, and its hung Patroni cannot let it go on alone.
    alone = Commit(pair.dsn(new), cycle, ROWS)
    if stray is not None:
        stray.start()
    t0 = time.monotonic()
    alone.start()
    alone.join(ALONE_S)
    assert alone.outcome == "committed", f"the new leader did not commit alone within {ALONE_S} s: {alone.outcome}"
    print(f"cycle {cycle}: the new leader committed alone {time.monotonic() - t0:.1f} s after it led")
    if stray is not None:
        assert stray.is_alive(), f"a COMMIT on the old leader returned after it lost the role: {stray.outcome}"
        # Its watchdog resets the box before the key could expire (here: the box is killed). Thawed instead, the
        # Patroni of Debian 12 (3.0.2) may take the leader key back from the new leader with its stale view
        # (patroni#2689, fixed in 3.0.3): the shipped file requires the watchdog.
        pair.kill(old)
        stray.join(10)
        assert not stray.is_alive()
        assert stray.outcome != "committed", "a COMMIT on the old leader was acknowledged after it lost the role"
    started = time.monotonic()
    pair.restart(old)  # rewound: what the old leader wrote alone (its stray row) is undone, none of it acknowledged
    print(f"cycle {cycle}: {old} rejoined as the synchronous standby {time.monotonic() - started:.1f} s after its start")
    # Every acknowledged row, and only those: the demoted leader's own row was rewound away.
    assert port(pair.url) == pair.nodes[new].pg_port
    assert rows(pair.url, cycle) == list(range(ROWS + 1))

    # The old leader is the synchronous standby now: read-only, every row there.
    assert pair.roles()[old][0] == "sync_standby"
    assert pair.leader() == new
    with psycopg.connect(pair.dsn(old), autocommit=True) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("INSERT INTO rows VALUES (%s, %s)", (cycle, ROWS + 2))
    with pytest.raises(psycopg.OperationalError):  # a read-write session is refused there
        psycopg.connect(pair.dsn(old) + " target_session_attrs=read-write", connect_timeout=5)
    assert wait_rows(pair, old, cycle, list(range(ROWS + 1))) == list(range(ROWS + 1))


def test_with_no_standby_the_leader_goes_on_alone_and_no_stale_node_is_promoted(pair: PgCluster) -> None:
    """The standby's box dies: the leader's COMMIT waits until Patroni lets it go on alone, then commits. Then the
    leader's box dies too: the old standby, back, lacks that row, and is never promoted (only the synchronous
    standby may be): no leader until the leader's box is back, leading with every row; then the pair heals."""
    leader, standby = pair.leader(), pair.replica()
    pair.kill(standby)
    t0 = time.monotonic()
    alone = Commit(pair.url, -2, 1)
    alone.start()
    alone.join(ALONE_S)
    assert alone.outcome == "committed", f"the leader did not go on alone within {ALONE_S} s: {alone.outcome}"
    print(f"\nthe standby lost: the leader committed alone after {time.monotonic() - t0:.1f} s")
    pair.kill(leader)
    pair.start_node(standby)  # the stale standby's box is back; the leader's is not
    deadline = time.monotonic() + TTL + 3 * EXPECTED_DCS["loop_wait"] + 4
    while time.monotonic() < deadline:  # past the dead leader's key expiry: a promotion would show by then
        assert pair.roles().get(standby, ("", ""))[0] != "leader", \
            f"a standby that lacks an acknowledged row was promoted: {pair.roles()}\n{pair.logs()}"
        time.sleep(0.5)  # Patroni's REST API, polled until the deadline above
    pair.start_node(leader)
    seconds = pair.wait_leader(leader)
    print(f"no promotion of the stale standby; the leader's box back and leading {seconds:.1f} s after its loss")
    assert rows(pair.url, -2) == [1]
    pair.wait_rejoined(standby)
    assert wait_rows(pair, standby, -2, [1]) == [1]


def test_an_authority_takes_no_journal_on_the_standby(pair: PgCluster) -> None:
    """A hot standby grants advisory locks too: an authority whose URL leads it to the standby (no
    target_session_attrs=read-write) waits there as a standby, and says why, instead of serving a read-only copy."""
    from controller.ledger import LedgerClosed, pgjournal

    told: list[str] = []
    stop = threading.Event()

    def on_standby(why: str) -> None:
        told.append(why)
        stop.set()

    with pytest.raises(LedgerClosed):
        pgjournal.connect_holding_lock(pair.dsn(pair.replica()), stop=stop, on_standby=on_standby)
    assert told == ["standby: the journal's server is a standby (read-only)"]


def test_the_runbooks_checks_show_the_pair(pair: PgCluster) -> None:
    """What docs/link-at-scale.md has the operator check: `patronictl list` shows a Leader and a Sync Standby on
    one timeline, and Patroni runs with the example's settings (synchronous, strict, pg_rewind, its timings)."""
    listed = pair.patronictl("list", "-f", "json")
    assert listed.returncode == 0, listed.stderr
    members = {m["Member"]: m for m in json.loads(listed.stdout)}
    assert sorted(members) == sorted(NODES)
    assert sorted(m["Role"] for m in members.values()) == ["Leader", "Sync Standby"]
    assert {m["State"] for m in members.values()} <= {"running", "streaming"}
    assert len({m["TL"] for m in members.values()}) == 1
    config = pair.dynamic_config()
    for key, value in EXPECTED_DCS.items():
        assert config[key] == value, key
    assert config["postgresql"]["use_pg_rewind"] is True


def test_the_runbooks_etcd_check(pair: PgCluster) -> None:
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        pytest.skip("etcdctl is not installed (Debian package etcd-client)")
    health = subprocess.run([etcdctl, f"--endpoints={pair.etcd_endpoints}", "endpoint", "health"],
                            capture_output=True, text=True, timeout=30)
    assert health.returncode == 0 and "is healthy" in health.stdout + health.stderr, health.stderr


def test_the_nodes_run_the_shipped_file_with_only_addresses_and_secrets_changed(tmp_path) -> None:
    """derive_config changes the node's name, addresses, ports, directories, passwords and the watchdog (which
    would reset the test machine), nothing else; a shipped file that is not synchronous is refused."""
    shipped = yaml.safe_load(SHIPPED.read_text())
    passwords = {"superuser": "s", "replication": "r", "rewind": "w"}
    derived = derive_config(shipped, name="authority-b", api_port=1, pg_port=2, etcd_hosts="127.0.0.1:3",
                            directory=tmp_path, bin_dir="/bin", passwords=passwords)
    assert derived["bootstrap"] == shipped["bootstrap"]
    assert derived["scope"] == shipped["scope"] and derived["tags"] == shipped["tags"]
    assert derived["watchdog"] == {"mode": "off"} and shipped["watchdog"]["mode"] == "required"
    pg, shipped_pg = derived["postgresql"], shipped["postgresql"]
    assert (pg["listen"], pg["connect_address"], derived["restapi"]["listen"]) == ("127.0.0.1:2",) * 2 + (
        "127.0.0.1:1",)
    assert {k: v["password"] for k, v in pg["authentication"].items()} == passwords
    assert {k: v["username"] for k, v in pg["authentication"].items()} == {
        k: v["username"] for k, v in shipped_pg["authentication"].items()}
    assert pg["pg_hba"][0] == shipped_pg["pg_hba"][0] == "local all all peer"
    assert all(line.endswith(" 127.0.0.1/32 scram-sha-256") for line in pg["pg_hba"][1:])
    not_sync = yaml.safe_load(SHIPPED.read_text())
    not_sync["bootstrap"]["dcs"]["synchronous_mode"] = False
    with pytest.raises(AssertionError, match="synchronous_mode"):
        derive_config(not_sync, name="authority-b", api_port=1, pg_port=2, etcd_hosts="127.0.0.1:3",
                      directory=tmp_path, bin_dir="/bin", passwords=passwords)

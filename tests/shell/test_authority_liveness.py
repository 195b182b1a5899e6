"""Each linked table as the link authority sees it, through a real Mosquitto (TLS, the shipped ACL): online at its
hello, OFFLINE at its MQTT will (killed, frozen) or its goodbye (a clean stop), online again after a restart; its
last operation answered; the authority's read-only control socket and the console's view of it; and an older
authority, which does not know the new `offline` message, not disturbed by it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from controller.authority.authority import LinkAuthority
from controller.config.credentials import PBKDF2_ITERATIONS
from controller.link.client import TableLink
from controller.linkproto import liveness, schema
from controller.meter import ops
from controller.money import format_units
from controller.service.control import ControlClient, ControlError
from controller.service.operations import OPERATIONS
from controller.service.report_files import read_series

from broker import ROOT, running_broker
from consolerig import SECRET, SUPERVISOR, console_process, csrf_of, login_form, self_signed
from linkrig import AT, METER, AuthorityProcess, LinkRig, authority_doc, mqtt_config, supervisors_file
from rigtable import until

TABLES = ("cs-01", "fcp-02")
KEEPALIVE = 2  # the child table's: the broker drops a silent client after 1.5 x keepalive, then sends its will
# Mosquitto 2.0 looks at its clients' keepalives every 5 s (and its loop wakes at least once a second): a silent
# table is OFFLINE at the authority within 1.5 x keepalive + 6 s of its last packet, and a test waits a second more.
FROZEN_BOUND = 1.5 * KEEPALIVE + 7.0
WAIT = 20.0
CHILD = Path(__file__).resolve().parents[1] / "support" / "link_table_child.py"


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (*TABLES, "authority")) as b:
        yield b


class ChildTable:
    """A table's link client in a child process (tests/support/link_table_child.py)."""

    def __init__(self, broker, table: str, state_dir: Path) -> None:
        s = asdict(broker.settings(table, keepalive=KEEPALIVE))
        s["ca_file"] = str(s["ca_file"])
        self.args = [sys.executable, str(CHILD), json.dumps(s), table, str(state_dir)]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.args, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"})
        async with asyncio.timeout(WAIT):
            while (line := await self.proc.stdout.readline()) != b"ready\n":
                assert line, "the child table ended before it was ready"

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self) -> int:
        assert self.proc is not None
        async with asyncio.timeout(WAIT):
            return await self.proc.wait()

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def entry(authority: AuthorityProcess, table: str) -> dict:
    status = await authority.control("status")
    return next(t for t in status["tables"] if t["table"] == table)


async def until_state(authority: AuthorityProcess, table: str, online: bool, why: str) -> float:
    """Wait until the authority shows `table` online (or OFFLINE) for `why`; how long it took."""
    t0 = time.monotonic()
    last: dict = {}

    async def now_so() -> bool:
        last.update(await entry(authority, table))
        return last["online"] is online and last["why"] == liveness.WHY[why]

    async with asyncio.timeout(WAIT):
        while not await now_so():
            await asyncio.sleep(0.05)  # the authority raises no event a test can wait on: ask again
    return time.monotonic() - t0


@contextlib.asynccontextmanager
async def authority_process(tmp_path: Path, broker):
    a = AuthorityProcess(tmp_path / "authority", authority_doc(tmp_path, broker, TABLES))
    try:
        await a.start()
        yield a
    finally:
        if a.running:
            assert await a.stop() == 0
        a.close()


async def test_a_table_online_then_offline_when_killed_frozen_or_stopped_and_back_after_a_restart(tmp_path, broker):
    async with authority_process(tmp_path, broker) as authority:
        first = await entry(authority, "cs-01")
        assert first["online"] is False and first["why"] == liveness.NOT_HEARD and first["last_ack"] is None
        child = ChildTable(broker, "cs-01", tmp_path / "cs-01")
        try:
            await child.start()
            await until_state(authority, "cs-01", True, "hello")
            assert 'progressive_link_table_online{table="cs-01"} 1.0' in await metrics(authority)

            child.signal(signal.SIGKILL)  # no DISCONNECT: the broker sees the socket close and sends the will
            took_killed = await until_state(authority, "cs-01", False, "lost")
            assert took_killed < 1.5 * KEEPALIVE, took_killed
            assert 'progressive_link_table_online{table="cs-01"} 0.0' in await metrics(authority)
            await child.wait()

            await child.start()
            await until_state(authority, "cs-01", True, "hello")

            child.signal(signal.SIGSTOP)  # a cut cable: nothing closes, the broker's keepalive finds it
            took_frozen = await until_state(authority, "cs-01", False, "lost")
            assert 0.5 * KEEPALIVE <= took_frozen <= FROZEN_BOUND, took_frozen
            child.signal(signal.SIGCONT)
            await until_state(authority, "cs-01", True, "hello")  # it finds its connection gone and connects again

            child.signal(signal.SIGTERM)  # a clean stop says so before it disconnects
            took_stopped = await until_state(authority, "cs-01", False, "stopped")
            assert await child.wait() == 0
            assert took_stopped < 2.0, took_stopped
            print(f"OFFLINE at the authority: killed {took_killed:.2f} s, frozen {took_frozen:.2f} s "
                  f"(keepalive {KEEPALIVE} s), stopped {took_stopped:.2f} s")
        finally:
            await child.close()
        assert (await entry(authority, "fcp-02"))["why"] == liveness.NOT_HEARD  # one table says nothing of another


async def metrics(authority: AuthorityProcess) -> str:
    async with aiohttp.ClientSession() as http, http.get(authority.metrics_url, timeout=aiohttp.ClientTimeout(10)) as r:
        return await r.text()


async def test_the_last_answer_advances_and_the_socket_and_the_console_only_read(tmp_path, broker):
    async with authority_process(tmp_path, broker) as authority:
        link = TableLink("fcp-02", mqtt_config("fcp-02"), {"fchb": METER}, tmp_path / "fcp-02",
                         settings=broker.settings("fcp-02"))
        await asyncio.to_thread(link.open)
        task = asyncio.create_task(link.run())
        try:
            await until_state(authority, "fcp-02", True, "hello")
            before = time.time()
            for n in (1, 2):
                seq = await link.send(ops.BookContributions(f"fcp-02-r{n}", "fcp-02", ((1, 100), (3, 500)), AT),
                                      "fchb", f"r{n}:book")
                await link.answer(seq, WAIT)
                t = await entry(authority, "fcp-02")
                assert t["last_ack"]["seq"] == seq == n and t["last_ack"]["outcome"] == "applied", t
                assert t["last_ack"]["at"] >= liveness.iso(before - 1), t
            assert 'progressive_link_table_last_ack_seq{table="fcp-02"} 2.0' in await metrics(authority)

            status = await authority.control("status")
            assert status["role"] == "link-authority" and status["meters"][0]["amount"] == "10001.80"
            head = status["ledger_head_seq"]
            client = ControlClient(authority.socket)
            for op in sorted(set(OPERATIONS) - {"status", "meters", "meter_series", "authenticate"}):
                with pytest.raises(ControlError) as refused:
                    await client.call(op)
                assert refused.value.kind == "unavailable" and "not offered by the link authority" in str(refused.value)
            for op, args in (("pay", {}), ("status", {"supervisor": "floor-1"})):
                with pytest.raises(ControlError) as refused:
                    await client.call(op, **args)
                assert refused.value.kind == "input", refused.value
            with pytest.raises(ControlError) as refused:  # the console's login, at an authority listing nobody
                await client.call("authenticate", supervisor=SUPERVISOR, secret=SECRET)
            assert refused.value.kind == "unavailable" and "\n" not in str(refused.value), refused.value
            assert str(refused.value).startswith("no supervisors are configured at the authority: "), refused.value
            assert [m["meter"] for m in await client.call("meters")] == [METER]
            # the linked meter's plot, from the authority's journal: the reset, then each booking's contributions
            (plot,) = await client.call("meter_series", span="day")
            assert plot["meter"] == METER and plot["closing"] == "10001.80" and plot["opening"] == "10000.00", plot
            state = Path(authority.doc["state_dir"])
            edges = (datetime.fromisoformat(plot["start"]), datetime.fromisoformat(plot["end"]))
            journal, _ = await asyncio.to_thread(read_series, state, *edges)
            read = [[t.isoformat(), format_units(u)] for t, _, u in journal[METER]]
            assert [a for _, a in read] == ["10000.00", "10000.90", "10001.80", "10001.80"], read  # defined, 2 rounds
            assert all(p in read for p in plot["points"]) and plot["points"][-1] == read[-1], (plot, read)
            assert plot["entries"] == 3 and plot["high"] == "10001.80", plot
            assert await client.call("meter_series", span="30d", meter=METER) != []
            assert (await authority.control("status"))["ledger_head_seq"] == head  # nothing asked changed anything
            assert oct(authority.socket.stat().st_mode & 0o777) == "0o660"

            shown = await authority.ctl("status", "--socket", str(authority.socket))
            assert shown.returncode == 0 and "link authority link-1" in shown.stdout, shown
            assert "fcp-02: online" in shown.stdout and "cs-01: OFFLINE" in shown.stdout, shown.stdout

            async with console_process(authority.socket, tmp_path / "console.log") as console:
                async with console.client() as http:
                    html = await until_page(http, console.url, "Linked tables")
                    figure = f'<figure class="plot" data-meter="{METER}" data-span="30d">'
                    plots = await until_page(http, console.url, figure)
                    seq = await link.send(ops.BookContributions("fcp-02-r3", "fcp-02", ((1, 100),), AT), "fchb", "r3:book")
                    await link.answer(seq, WAIT)
                    assert figure in await until_page(http, console.url, "#3 applied")  # kept at the next status
                assert ('data-table="fcp-02" data-state="ok"><header><h3>fcp-02</h3><p class="link up"><b>● online</b>'
                        in html)
                assert ('data-table="cs-01" data-state="down"><header><h3>cs-01</h3><p class="link down"><b>✕ OFFLINE</b>'
                        in html)
                assert "#2 applied" in html and "$10,001.80" in html
                assert "Linked meters over time" in plots and f'data-meter="{METER}" data-span="day"' in plots
                assert "$10,000.00 at the start, $10,001.80 at " in plots, plots  # when, not "now": it lags
                assert "/approve" not in html and "/reject" not in html
                async with console.client() as http:  # a login, at an authority that lists no supervisor
                    async with http.get(console.url + "login") as r:
                        token = csrf_of(await r.text())
                    async with http.post(console.url + "login", headers={"Origin": console.origin},
                                         data={"csrf": token, "supervisor": SUPERVISOR, "secret": SECRET}) as r:
                        said = await r.text()  # the login page again, with why
                assert "not logged in: no supervisors are configured at the authority" in said, said
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            link.close()


ITERATIONS = PBKDF2_ITERATIONS  # the default cost: a check takes the authority a tenth of a second of CPU or more


def cpu_seconds(pid: int) -> float:
    """The CPU time a process used so far, all its threads (utime + stime of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_on_the_network_the_authoritys_console_asks_for_a_login_the_authority_checks(tmp_path, broker):
    """Served with TLS, the authority's console opens its page to a supervisor the authority lists, checked by its
    socket's `authenticate` as a table checks one: a wrong secret and an unknown name refused alike, each counted,
    the unknown name hashed against the decoy (it costs the authority the CPU a real check does); no secret in
    either log; and nothing more on the socket than a login (approve is still not offered)."""
    doc = authority_doc(tmp_path, broker, TABLES)
    doc["supervisors_file"] = str(supervisors_file(tmp_path / "authority-files", {SUPERVISOR: SECRET},
                                                   iterations=ITERATIONS))
    authority = AuthorityProcess(tmp_path / "authority", doc)
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    wrong = "not-the-s3cret"
    try:
        await authority.start()
        tls = ("--tls-cert", str(cert), "--tls-key", str(key))
        async with console_process(authority.socket, tmp_path / "console.log", *tls, tls=True) as console, \
                console.client() as http:
            token, cookie = await login_form(http, console)  # nothing but the login page before a login
            assert "Secure" in cookie

            async def login(name: str, secret: str) -> tuple[str, str, float]:
                """Where the login sends the browser, what the login page then says, and the authority's CPU."""
                pid = authority.pid
                assert pid is not None
                before = cpu_seconds(pid)
                async with http.post(console.url + "login", data={"csrf": token, "supervisor": name, "secret": secret},
                                     headers={"Origin": console.origin}, allow_redirects=False) as r:
                    where = r.headers["Location"]
                used = cpu_seconds(pid) - before
                async with http.get(console.url + "login") as r:
                    return where, await r.text(), used

            async def failures() -> str:
                text = await metrics(authority)
                return next(line for line in text.splitlines() if line.startswith("progressive_auth_failures_total "))

            where, said, unknown_cpu = await login("nobody-here", wrong)
            assert where == "/login" and "not logged in: supervisor name or credential not accepted" in said, said
            assert await failures() == "progressive_auth_failures_total 1.0"
            where, said, wrong_cpu = await login(SUPERVISOR, wrong)  # refused in the same words
            assert where == "/login" and "not logged in: supervisor name or credential not accepted" in said, said
            assert await failures() == "progressive_auth_failures_total 2.0"
            # the unknown name hashed too (the decoy, of the supervisor's cost): its answer cannot tell it apart
            assert wrong_cpu >= 0.05 and unknown_cpu >= 0.5 * wrong_cpu, (wrong_cpu, unknown_cpu)

            where, _said, _cpu = await login(SUPERVISOR, SECRET)
            assert where == "/"
            html = await until_page(http, console.url, "Linked tables")
            assert f"<span>{SUPERVISOR}</span>" in html and "/approve" not in html, html
            assert all(f'data-table="{t}" data-state=' in html for t in TABLES), html
            assert await failures() == "progressive_auth_failures_total 2.0"
            with pytest.raises(ControlError) as refused:  # a right secret opens the page, and moves nothing
                await authority.control("approve", claim_id="cs-01-r1-c1:1", supervisor=SUPERVISOR, secret=SECRET)
            assert refused.value.kind == "unavailable" and "not offered by the link authority" in str(refused.value)
        console_log = (tmp_path / "console.log").read_text()
        assert '"console login"' in console_log
        logs = authority.log_path.read_text() + authority.stderr_path.read_text()
        refusals = [e for e in authority.log_events() if e.get("event") == "control-refused"]
        assert [e["kind"] for e in refusals] == ["auth", "auth", "unavailable"], refusals
        for secret in (SECRET, wrong):
            assert secret not in logs and secret not in console_log
        print(f"the authority's CPU for a wrong secret {wrong_cpu:.2f} s, for an unknown name {unknown_cpu:.2f} s "
              f"(PBKDF2 {ITERATIONS:,})")
    finally:
        if authority.running:
            assert await authority.stop() == 0
        authority.close()


async def until_page(http: aiohttp.ClientSession, url: str, text: str) -> str:
    """The console's page once it shows `text` (the console asks the daemon every 0.5 s)."""
    async with asyncio.timeout(WAIT):
        while True:
            async with http.get(url) as r:
                html = await r.text()
            if text in html:
                return html
            await asyncio.sleep(0.1)  # the page as of now: load it again


async def test_an_older_authority_drops_the_new_message_and_goes_on(tmp_path, broker, monkeypatch):
    """An authority of before `offline` (simulated: its decoding knows no `offline` and its `expect` does not list
    it) counts a table's will as a bad schema and applies everything else as before; a table's clean stop sends it
    nothing."""
    decode = schema.decode

    def older_decode(topic: str, payload: bytes):
        if json.loads(payload).get("type") == "offline":
            raise schema.SchemaError("type", f"{topic}: unknown message type 'offline'")
        return decode(topic, payload)

    monkeypatch.setattr(schema, "decode", older_decode)
    monkeypatch.setattr(schema, "ANNOUNCED", schema.ANNOUNCED - {"offline"})
    rig = LinkRig(tmp_path, broker, TABLES)
    try:
        authority: LinkAuthority = await rig.start_authority()
        bad = authority.metrics.dropped.labels("bad_schema")
        child = ChildTable(broker, "cs-01", tmp_path / "cs-01")
        try:
            await child.start()
            child.signal(signal.SIGKILL)
            await until(lambda: bad._value.get() == 1, "the will dropped as a bad schema")
        finally:
            await child.close()
        link = await rig.start_table("fcp-02")
        seq = await link.send(ops.BookContributions("fcp-02-r1", "fcp-02", ((1, 100),), AT), "fchb", "r1:book")
        await link.answer(seq, WAIT)
        assert authority.liveness.tables["fcp-02"].ack_seq == seq
        await until(lambda: link.approvers is not None, "the authority's expect")
        assert not link.accepts("offline")
        await rig.stop_table("fcp-02")  # no goodbye to an authority that did not list it
        await child.start()  # cs-01 again: the older authority answers it as ever
        await until(lambda: authority.liveness.tables["cs-01"].online, "cs-01 heard again")
        assert bad._value.get() == 1 and authority.ledger is not None and authority.ledger.failed is None
    finally:
        await child.close()
        await rig.close()


def test_an_older_decoder_refuses_offline_by_its_type():
    """The message as an older authority's decoder meets it: an unknown type, a SchemaError (its `bad_schema`)."""
    payload = schema.encode(schema.TableOffline("cs-01", "lost"))
    assert json.loads(payload) == {"v": schema.VERSION, "type": "offline", "table": "cs-01", "reason": "lost"}
    assert schema.decode("t", payload) == schema.TableOffline("cs-01", "lost")
    with pytest.raises(schema.SchemaError) as e:
        schema.decode("t", payload.replace(b'"lost"', b'"gone"'))
    assert e.value.field == "reason"


def test_liveness_is_a_function_of_what_was_heard():
    live = liveness.Liveness(("a", "b"), 100.0)
    assert live.heard("a", "hello", 101.0) and not live.heard("a", "op", 102.0)
    live.answered("a", 5, "applied", 102.0)
    live.answered("a", 4, "applied", 103.0)  # a repeat answered again: not a step back
    assert (live.tables["a"].ack_seq, live.tables["a"].ack_at) == (5, 102.0)
    assert live.offline("a", "lost", 104.0) and not live.offline("a", "stopped", 105.0)
    assert live.tables["a"].why == "lost" and live.tables["a"].since == 104.0
    assert not live.offline("b", "stopped", 106.0) and live.tables["b"].why == "stopped"
    j = liveness.table_json("a", live.tables["a"], (7, "2026-11-30T01:02:03Z"))
    assert j["since"] == "1970-01-01T00:01:44Z" and j["last_ack"] == {"seq": 5, "outcome": "applied",
                                                                        "at": "1970-01-01T00:01:42Z"}


def test_the_authoritys_page_shows_every_table_offline_visibly_and_escaped():
    from controller.console.view import floor

    status = {"role": "link-authority", "authority": "link-1", "version": "1", "broker_connected": True,
              "meters": [{"meter": METER, "amount": "10000.30", "locked": []}],
              "tables": [{"table": "<cs-01>", "online": False, "since": "2026-12-02T01:02:03Z", "why": "stopped cleanly",
                          "last_ack": {"seq": 7, "outcome": "applied", "at": "2026-12-02T01:00:00Z"}}]}
    parts = floor.sections({"status": status}, None)
    assert set(parts) == set(floor.SECTIONS)
    assert "<b>✕ OFFLINE</b>" in parts["tables"] and '<span class="n bad">1</span> OFFLINE' in parts["daemon"]
    assert "&lt;cs-01&gt;" in parts["tables"] and "<cs-01>" not in parts["tables"]
    html = floor.page(parts, csrf="token")
    assert "<h2>Linked tables</h2>" in html and "/approve" not in html and "$10,000.30" in html

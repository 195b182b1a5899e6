"""The daemon's control socket: the server against a small handler, over real Unix sockets, and its client."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.errors import CardError, InputError, RulesError
from controller.service import logs
from controller.service.control import (
    DEFAULT_SOCKET,
    MAX_SOCKET_PATH,
    ControlClient,
    ControlError,
    ControlServer,
    DaemonUnavailable,
    NotAvailable,
    ServerError,
    UnknownOp,
)

WAIT_S = 5.0  # the longest any test waits for something that should happen at once
SECRET = "Tr0ub4dor&3-horse"

OPS: dict[str, dict[str, Any]] = {
    "status": {},
    "round": {},
    "meters": {},
    "history": {},
    "meter_series": {"span": "30d", "meter": "main"},
    "void": {"reason": "misdeal", "supervisor": "ann", "secret": SECRET},
    "settle": {"round_id": "CS-07-r12"},
    "deck_replaced": {"supervisor": "ann", "secret": SECRET},
    "stub_count": {"stub": 40, "dealt": 12},
    "close_table": {"supervisor": "ann", "secret": SECRET},
    "open_table": {"supervisor": "ann", "secret": SECRET},
    "claim": {"seat": 3, "cards": ["AS", "KS", "QS", "JS", "TS"]},
    "approve": {"claim_id": "CS-07-c1", "supervisor": "ann", "secret": SECRET},
    "authenticate": {"supervisor": "ann", "secret": SECRET},
    "reject": {"claim_id": "CS-07-c1", "supervisor": "ann", "secret": SECRET, "reason": "cards fouled"},
}


class Handler:
    """Answers every op of OPS with {"op": op, "amount": "10000.00", "args": <its argument names>};
    `raises[op]` makes an op raise instead; with `gate` set, a call waits for it (`entered` tells it started)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.raises: dict[str, BaseException] = {}
        self.results: dict[str, Any] = {}
        self.gate: asyncio.Event | None = None
        self.entered: asyncio.Event | None = None

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        self.calls.append((op, args))
        if self.entered is not None:
            self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if op in self.raises:
            raise self.raises[op]
        if op in self.results:
            return self.results[op]
        if op not in OPS:
            raise UnknownOp(op)
        return {"op": op, "amount": "10000.00", "args": sorted(args)}


@pytest.fixture
def sock_dir():
    d = tempfile.mkdtemp(prefix="ctl-")
    if len(d) > 60:  # a socket path has at most 107 bytes
        shutil.rmtree(d)
        d = tempfile.mkdtemp(prefix="ctl-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def log():
    buf = io.StringIO()
    logs.configure("json", "debug", buf)
    yield buf
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()
    logging.getLogger().handlers[:] = []


def log_lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


class Raw:
    """A client that sends bytes as given and reads response lines."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, path: Path) -> Raw:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def recv(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), WAIT_S)
        assert line.endswith(b"\n"), line
        return json.loads(line)

    async def ask(self, data: bytes) -> dict[str, Any]:
        await self.send(data)
        return await self.recv()

    async def closed(self) -> bool:
        """True when the server closed the connection (EOF, or a reset after the answer was read)."""
        try:
            return await asyncio.wait_for(self.reader.read(1), WAIT_S) == b""
        except ConnectionResetError:
            return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def server(path: Path, handler: Handler | None = None, **kw: Any) -> ControlServer:
    return ControlServer(path, handler if handler is not None else Handler(), **kw)


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(OPS))
async def test_every_op_round_trips(sock_dir, op):
    path = sock_dir / "c.sock"
    h = Handler()
    async with server(path, h):
        result = await ControlClient(path).call(op, **OPS[op])
        assert result == {"op": op, "amount": "10000.00", "args": sorted(OPS[op])}
        assert h.calls == [(op, OPS[op])]
        raw = await Raw.connect(path)
        resp = await raw.ask(json.dumps({"op": op, "args": OPS[op], "id": 41}).encode() + b"\n")
        assert resp == {"id": 41, "ok": True, "result": result}
        await raw.close()


async def test_requests_on_one_connection_are_answered_in_order(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path):
        raw = await Raw.connect(path)
        await raw.send(b'{"op": "status", "id": 1}\n{"op": "round", "id": "two"}\n{"op": "meters"}\n')
        answers = [await raw.recv() for _ in range(3)]
        assert [(a["id"], a["result"]["op"]) for a in answers] == [(1, "status"), ("two", "round"), (None, "meters")]
        await raw.close()


async def test_a_last_request_without_line_end_is_answered(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path):
        raw = await Raw.connect(path)
        await raw.send(b'{"op": "status", "id": 5}')
        raw.writer.write_eof()
        assert (await raw.recv())["id"] == 5
        assert await raw.closed()
        await raw.close()


# --- errors of the handler -----------------------------------------------------------------------


@pytest.mark.parametrize("exc, kind, field, message", [
    (InputError("seat", "9 is not a seat of table CS-07 (1..7)"), "input", "seat", "9 is not a seat of table CS-07 (1..7)"),
    (CardError("cards[1]", "duplicate card AS"), "input", "cards[1]", "duplicate card AS"),
    (RulesError("round_id", "round CS-07-r11 is not the current round"), "rules", "round_id",
     "round CS-07-r11 is not the current round"),
    (InputError("", "nothing to settle"), "input", None, "nothing to settle"),
    (PermissionError("wrong secret for supervisor 'ann'"), "auth", None, "wrong secret for supervisor 'ann'"),
    (UnknownOp("frobnicate"), "input", "op", "unknown operation 'frobnicate'"),
    (LookupError("frobnicate"), "input", "op", "unknown operation 'frobnicate'"),
    (KeyError("frobnicate"), "input", "op", "unknown operation 'frobnicate'"),
    (NotAvailable(), "unavailable", None, "not available in this version"),
    (NotAvailable("the ledger is starting"), "unavailable", None, "the ledger is starting"),
    (NotImplementedError(), "unavailable", None, "not available in this version"),
])
async def test_errors_map_to_kind_and_field(sock_dir, exc, kind, field, message):
    path = sock_dir / "c.sock"
    h = Handler()
    h.raises["frobnicate"] = exc
    async with server(path, h):
        with pytest.raises(ControlError) as e:
            await ControlClient(path).call("frobnicate", seat=9)
        assert (e.value.kind, e.value.field, e.value.message) == (kind, field, message)
        raw = await Raw.connect(path)
        resp = await raw.ask(b'{"op": "frobnicate", "id": 8}\n')
        assert resp == {"id": 8, "ok": False, "error": message, "field": field, "kind": kind}
        assert (await raw.ask(b'{"op": "status", "id": 9}\n'))["ok"] is True  # the connection goes on
        await raw.close()


@pytest.mark.parametrize("exc", [
    ZeroDivisionError("division by zero"),
    KeyError("seat"),  # a bug deeper down, not an unknown operation
    IndexError("list index out of range"),
    PermissionError(errno.EACCES, "Permission denied", "/var/lib/progressive/journal.db"),  # the OS, not a supervisor
])
async def test_anything_else_is_an_internal_error(sock_dir, exc, log):
    path = sock_dir / "c.sock"
    h = Handler()
    h.raises["void"] = exc
    async with server(path, h):
        with pytest.raises(ControlError) as e:
            await ControlClient(path).call("void", reason="misdeal")
        assert e.value.kind == "internal" and e.value.field is None
        assert type(exc).__name__ in e.value.message and "log" in e.value.message
        assert await ControlClient(path).call("status")  # still serving
    (entry,) = [x for x in log_lines(log) if x["event"] == "control internal error"]
    assert entry["level"] == "error" and entry["op"] == "void"
    assert type(exc).__name__ in entry["traceback"]


@pytest.mark.parametrize("result", [{"amount": Decimal("1.00")}, {"rate": float("nan")}, {1, 2}])
async def test_a_result_that_is_not_json_is_an_internal_error(sock_dir, result):
    path = sock_dir / "c.sock"
    h = Handler()
    h.results["meters"] = result
    async with server(path, h):
        with pytest.raises(ControlError) as e:
            await ControlClient(path).call("meters")
        assert e.value.kind == "internal" and "JSON" in e.value.message
        assert (await ControlClient(path).call("status"))["op"] == "status"


# --- malformed requests --------------------------------------------------------------------------


@pytest.mark.parametrize("line, field, rid, says", [
    (b"{not json\n", None, None, "invalid JSON"),
    (b"[1, 2]\n", None, None, "must be a JSON object"),
    (b'"status"\n', None, None, "must be a JSON object"),
    (b"null\n", None, None, "must be a JSON object"),
    (b"\xff\xfe{}\n", None, None, "UTF-8"),
    (b'{"op": "status", "args": {"n": NaN}}\n', None, None, "NaN"),
    (b'{"args": {}, "id": 3}\n', "op", 3, "missing"),
    (b'{"op": 5, "id": 4}\n', "op", 4, "name of an operation"),
    (b'{"op": ""}\n', "op", None, "name of an operation"),
    (b'{"op": "status", "args": [1], "id": 6}\n', "args", 6, "JSON object"),
    (b'{"op": "status", "verbose": true, "id": 7}\n', "verbose", 7, "unknown field 'verbose'"),
    (b'{"op": "status", "id": true}\n', "id", None, "must be a number"),
    (b'{"op": "status", "id": 1.5}\n', "id", None, "must be a number"),
    (b'{"op": "status", "op": "void"}\n', "op", None, "given twice"),
    (b'{"op": "void", "args": {"reason": "a", "reason": "b"}}\n', "reason", None, "given twice"),
])
async def test_malformed_requests_are_answered_and_the_connection_goes_on(sock_dir, line, field, rid, says):
    path = sock_dir / "c.sock"
    h = Handler()
    async with server(path, h):
        raw = await Raw.connect(path)
        resp = await raw.ask(line)
        assert resp["ok"] is False and resp["kind"] == "input"
        assert resp["field"] == field and resp["id"] == rid
        assert says in resp["error"]
        assert h.calls == []  # the handler never sees a malformed request
        assert await raw.ask(b'{"op": "status", "id": 99}\n') == {
            "id": 99, "ok": True, "result": {"op": "status", "amount": "10000.00", "args": []}}
        await raw.close()


async def test_blank_lines_are_ignored_and_args_default_to_empty(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    async with server(path, h):
        raw = await Raw.connect(path)
        assert (await raw.ask(b'\n  \r\n{"op": "round"}\r\n'))["result"]["op"] == "round"
        assert h.calls == [("round", {})]
        await raw.close()


async def test_an_over_long_line_is_refused_and_the_connection_closed(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    async with server(path, h, max_line=1024):
        # exactly at the limit: served
        head, tail = b'{"op": "claim", "args": {"pad": "', b'"}}'
        at_limit = head + b"x" * (1024 - len(head) - len(tail)) + tail
        assert len(at_limit) == 1024
        raw = await Raw.connect(path)
        assert (await raw.ask(at_limit + b"\n"))["ok"] is True
        await raw.close()
        # one byte more, with and without a line end
        for data in (head + b"x" * (1025 - len(head) - len(tail)) + tail + b"\n", b"y" * 5000):
            raw = await Raw.connect(path)
            resp = await raw.ask(data)
            assert resp["ok"] is False and resp["kind"] == "input" and "longer than 1024 bytes" in resp["error"]
            assert await raw.closed()
            await raw.close()
        assert len(h.calls) == 1
        assert (await ControlClient(path).call("status"))["op"] == "status"  # others still served


async def test_a_slow_client_is_closed_after_the_idle_timeout(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path, idle_timeout=0.2) as srv:
        silent = await Raw.connect(path)
        partial = await Raw.connect(path)
        await partial.send(b'{"op": "sta')
        for raw in (silent, partial):
            resp = await raw.recv()
            assert resp["ok"] is False and "within 0.2 s" in resp["error"]
            assert await raw.closed()
            await raw.close()
        assert (await ControlClient(path).call("status"))["op"] == "status"
        assert srv.idle_timeout == 0.2


async def test_a_slow_client_does_not_hold_up_the_others(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path, idle_timeout=30.0):
        slow = await Raw.connect(path)
        await slow.send(b'{"op": "status", "args": {"x": ')
        for _ in range(3):
            assert (await asyncio.wait_for(ControlClient(path).call("round"), WAIT_S))["op"] == "round"
    assert await slow.closed()  # stop() closed it
    await slow.close()


async def test_too_many_connections_are_refused(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path, max_clients=2) as srv:
        held = [await Raw.connect(path) for _ in range(2)]
        for raw in held:  # answered: both connections are registered
            assert (await raw.ask(b'{"op": "status"}\n'))["ok"] is True
        assert srv.connections == 2
        extra = await Raw.connect(path)
        resp = await extra.recv()
        assert resp["ok"] is False and resp["kind"] == "unavailable" and "too many connections" in resp["error"]
        assert await extra.closed()
        await extra.close()
        assert (await held[0].ask(b'{"op": "round"}\n'))["ok"] is True
        for raw in held:
            await raw.close()


async def test_a_client_that_leaves_before_its_answer_does_not_harm_the_server(sock_dir, log):
    path = sock_dir / "c.sock"
    h = Handler()
    h.gate, h.entered = asyncio.Event(), asyncio.Event()
    async with server(path, h):
        raw = await Raw.connect(path)
        await raw.send(b'{"op": "status"}\n')
        await asyncio.wait_for(h.entered.wait(), WAIT_S)
        await raw.close()
        h.gate.set()
        assert (await ControlClient(path).call("round"))["op"] == "round"
    assert not [x for x in log_lines(log) if x["level"] == "error"]


# --- the socket file -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o660, 0o600])
async def test_socket_mode_and_parent_directory(sock_dir, mode):
    path = sock_dir / "run" / "progressive" / "control.sock"
    old = os.umask(0o077)  # the directory and socket modes must not depend on it
    try:
        async with server(path, mode=mode):
            st = os.stat(path)
            assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == mode
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o750
            assert (await ControlClient(path).call("status"))["op"] == "status"
    finally:
        os.umask(old)
    assert not path.exists(), "stop() removes the socket file"
    assert path.parent.is_dir()


async def test_an_existing_directory_is_left_as_it_is(sock_dir):
    (sock_dir / "run").mkdir(mode=0o755)
    os.chmod(sock_dir / "run", 0o755)
    async with server(sock_dir / "run" / "c.sock"):
        assert stat.S_IMODE(os.stat(sock_dir / "run").st_mode) == 0o755


async def test_a_stale_socket_file_is_replaced(sock_dir):
    path = sock_dir / "c.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a daemon that died without removing its socket
    dead.close()
    with pytest.raises(DaemonUnavailable, match="connection refused"):
        await ControlClient(path).call("status")
    async with server(path):
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert (await ControlClient(path).call("status"))["op"] == "status"


async def test_a_second_server_on_a_live_socket_refuses_to_start(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path):
        inode = os.stat(path).st_ino
        second = server(path)
        with pytest.raises(ServerError, match="another daemon is listening"):
            await second.start()
        assert os.stat(path).st_ino == inode, "the first daemon's socket is left alone"
        assert (await ControlClient(path).call("status"))["op"] == "status"
        await second.stop()  # harmless: it never started


async def test_a_file_that_is_not_a_socket_is_not_replaced(sock_dir):
    path = sock_dir / "c.sock"
    path.write_text("not a socket\n")
    with pytest.raises(ServerError, match="not a socket"):
        await server(path).start()
    assert path.read_text() == "not a socket\n"


async def test_a_socket_path_too_long_is_refused(sock_dir):
    path = sock_dir / ("d" * 60) / ("s" * 60)
    assert len(os.fsencode(path)) > MAX_SOCKET_PATH
    with pytest.raises(ServerError, match="at most 107 bytes"):
        await server(path).start()
    with pytest.raises(ControlError, match="at most 107 bytes"):
        await ControlClient(path).call("status")


# --- stopping ------------------------------------------------------------------------------------


async def test_stop_lets_a_request_being_carried_out_finish(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    h.gate, h.entered = asyncio.Event(), asyncio.Event()
    srv = server(path, h)
    await srv.start()
    idle = await Raw.connect(path)
    call = asyncio.create_task(ControlClient(path).call("void", reason="shoe jam"))
    await asyncio.wait_for(h.entered.wait(), WAIT_S)
    stopping = asyncio.create_task(srv.stop())
    assert await idle.closed(), "an idle connection is closed at once"
    await idle.close()
    assert not path.exists(), "no new client once stopping"
    assert not stopping.done()
    h.gate.set()
    assert (await asyncio.wait_for(call, WAIT_S))["op"] == "void"
    await asyncio.wait_for(stopping, WAIT_S)


async def test_stop_cancels_a_request_that_outlasts_the_grace(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    h.gate, h.entered = asyncio.Event(), asyncio.Event()  # never set
    srv = server(path, h)
    await srv.start()
    call = asyncio.create_task(ControlClient(path).call("status"))
    await asyncio.wait_for(h.entered.wait(), WAIT_S)
    await asyncio.wait_for(srv.stop(grace=0.05), WAIT_S)
    with pytest.raises(DaemonUnavailable, match="closed the connection without answering"):
        await asyncio.wait_for(call, WAIT_S)


# --- secrets -------------------------------------------------------------------------------------


async def test_secrets_never_reach_the_log(sock_dir, log):
    path = sock_dir / "c.sock"
    h = Handler()
    h.raises["void"] = RuntimeError(f"cannot verify {SECRET}")  # a careless message
    h.raises["approve"] = PermissionError(f"secret {SECRET!r} is wrong")
    async with server(path, h):
        c = ControlClient(path)
        assert (await c.call("deck_replaced", supervisor="ann", secret=SECRET))["op"] == "deck_replaced"
        with pytest.raises(ControlError) as e:
            await c.call("void", reason="misdeal", supervisor="ann", secret=SECRET)
        assert e.value.kind == "internal" and SECRET not in str(e.value)
        with pytest.raises(ControlError) as e:
            await c.call("approve", claim_id="c1", supervisor="ann", secret=SECRET)
        assert e.value.kind == "auth" and SECRET not in e.value.message and "<redacted>" in e.value.message
        with pytest.raises(ControlError):
            await c.call("nope", nested={"secret": SECRET})
        raw = await Raw.connect(path)
        for line in (b'{"op": "void", "args": {"secret": "' + SECRET.encode() + b'"}\n',  # unclosed
                     b'{"op": "void", "args": {"secret": "' + SECRET.encode() + b'"}, "x": 1}\n'):
            assert (await raw.ask(line))["ok"] is False
        await raw.close()
    text = log.getvalue()
    assert SECRET not in text
    entries = log_lines(log)
    requests = [x for x in entries if x["event"] == "control request"]
    assert {x["op"] for x in requests} == {"deck_replaced", "void", "approve", "nope"}
    assert all(x["args"].get("secret", x["args"].get("nested", {}).get("secret")) == "<redacted>" for x in requests)
    (internal,) = [x for x in entries if x["event"] == "control internal error"]
    assert "cannot verify <redacted>" in internal["traceback"] and "cannot verify <redacted>" in internal["error"]
    (auth,) = [x for x in entries if x["event"] == "control-refused" and x["kind"] == "auth"]
    assert auth["level"] == "warning" and auth["peer_uid"] == os.getuid()
    assert len([x for x in entries if x["event"] == "control bad request"]) == 2


# --- the client ----------------------------------------------------------------------------------


async def test_client_without_a_daemon(sock_dir):
    with pytest.raises(DaemonUnavailable) as e:
        await ControlClient(sock_dir / "none.sock").call("status")
    assert e.value.reason == "no such socket" and e.value.path.endswith("none.sock")


async def test_client_times_out(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    h.gate = asyncio.Event()
    async with server(path, h):
        with pytest.raises(DaemonUnavailable, match="no answer within 0.2 s"):
            await ControlClient(path, timeout=0.2).call("status")
        h.gate.set()


async def test_client_refuses_an_answer_it_cannot_read(sock_dir):
    path = sock_dir / "c.sock"
    answers = [b"not json\n", b"[]\n", b'{"id": 12345, "ok": true, "result": 1}\n', b"", b'{"id": null, "ok": false}\n']

    async def fake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(answers.pop(0))
        await writer.drain()
        writer.close()

    fake_server = await asyncio.start_unix_server(fake, path=str(path))
    try:
        client = ControlClient(path)
        for says in ("not JSON", "not a response object", "answered request 12345"):
            with pytest.raises(ControlError, match=says) as e:
                await client.call("status")
            assert e.value.kind == "internal"
        with pytest.raises(DaemonUnavailable, match="without answering"):
            await client.call("status")
        with pytest.raises(ControlError) as e:
            await client.call("status")
        assert (e.value.kind, e.value.message, e.value.field) == ("internal", "refused", None)
    finally:
        fake_server.close()
        await fake_server.wait_closed()


async def test_call_sync_is_for_code_without_an_event_loop(sock_dir):
    with pytest.raises(RuntimeError, match="await call"):
        ControlClient(sock_dir / "c.sock").call_sync("status")


def test_call_sync_and_the_socket_path(sock_dir, monkeypatch):
    monkeypatch.delenv("PROGRESSIVE_SOCKET", raising=False)
    assert ControlClient().path == DEFAULT_SOCKET == "/run/progressive/control.sock"
    monkeypatch.setenv("PROGRESSIVE_SOCKET", str(sock_dir / "env.sock"))
    assert ControlClient().path == str(sock_dir / "env.sock")
    assert ControlClient(sock_dir / "given.sock").path == str(sock_dir / "given.sock")
    with pytest.raises(DaemonUnavailable, match="no such socket"):
        ControlClient().call_sync("status")

    async def serve_once() -> Any:
        async with server(sock_dir / "env.sock"):
            return await asyncio.to_thread(ControlClient().call_sync, "round")

    assert asyncio.run(serve_once())["op"] == "round"


def test_server_arguments_are_checked(sock_dir):
    for kw, says in (({"max_line": 10}, "max_line"), ({"idle_timeout": 0}, "idle_timeout"),
                     ({"max_clients": 0}, "max_clients")):
        with pytest.raises(ValueError, match=says):
            server(sock_dir / "c.sock", **kw)


# --- what one client can take ----------------------------------------------------------------------------------


async def test_blank_lines_do_not_keep_a_connection_open(sock_dir):
    """A client that sends only blank lines is closed at the idle timeout, as a silent one is (before, each blank
    line started the timeout again, and 32 such clients held every connection)."""
    path = sock_dir / "c.sock"
    async with server(path, idle_timeout=0.3):
        raw = await Raw.connect(path)
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def babble():
            with contextlib.suppress(ConnectionError):
                while True:
                    await raw.send(b"\n")
                    await asyncio.sleep(0.05)

        task = asyncio.create_task(babble())
        resp = await raw.recv()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert resp["ok"] is False and "within 0.3 s" in resp["error"] and loop.time() - t0 < 1.5
        await raw.close()


async def test_connections_are_capped_per_user(sock_dir):
    path = sock_dir / "c.sock"
    async with server(path, max_clients=10, max_per_uid=2):
        held = [await Raw.connect(path) for _ in range(2)]
        for raw in held:
            assert (await raw.ask(b'{"op": "status"}\n'))["ok"] is True
        extra = await Raw.connect(path)
        resp = await extra.recv()
        assert resp["kind"] == "unavailable" and f"at most 2 for user {os.getuid()}" in resp["error"]
        await extra.close()
        await held[0].close()
        again = await Raw.connect(path)  # one left: a place is free again
        assert (await again.ask(b'{"op": "status"}\n'))["ok"] is True
        for raw in (*held[1:], again):
            await raw.close()


async def test_a_number_too_long_is_a_field_error_answered(sock_dir):
    path = sock_dir / "c.sock"
    h = Handler()
    async with server(path, h):
        raw = await Raw.connect(path)
        resp = await raw.ask(b'{"op": "stub_count", "args": {"stub": ' + b"9" * 5000 + b'}, "id": 7}\n')
        assert resp == {"id": 7, "ok": False, "kind": "input", "field": "stub",
                        "error": "a number of 5000 digits: at most 64"}
        resp = await raw.ask(b'{"op": "claim", "args": {"cards": [1, -' + b"1" * 80 + b'.5]}}\n')
        assert resp["field"] == "cards[1]"
        assert (await raw.ask(b'{"op": "status"}\n'))["ok"] is True  # the connection goes on
        await raw.close()
        assert h.calls == [("status", {})]


async def test_redaction_is_by_key_in_any_case_and_never_mangles_a_message(sock_dir, log):
    path = sock_dir / "c.sock"
    h = Handler()
    h.raises["approve"] = InputError("claim_id", "unknown claim")
    async with server(path, h):
        c = ControlClient(path)
        await c.call("status", Secret=SECRET, nested={"SECRET": SECRET})
        with pytest.raises(ControlError) as e:
            await c.call("approve", claim_id="c1", secret="o")  # too short to be anyone's secret
        assert e.value.message == "unknown claim"  # not "unkn<redacted>wn claim"
    text = log.getvalue()
    assert SECRET not in text
    (request,) = [x for x in log_lines(log) if x["event"] == "control request" and x["op"] == "status"]
    assert request["args"] == {"Secret": "<redacted>", "nested": {"SECRET": "<redacted>"}}


async def test_refusals_flooding_the_log_are_counted_not_logged(sock_dir, log):
    from controller.service.control import LOG_BURST

    path = sock_dir / "c.sock"
    async with server(path):
        raw = await Raw.connect(path)
        for i in range(LOG_BURST * 5):
            assert (await raw.ask(b'{"op": "frobnicate", "id": %d}\n' % i))["ok"] is False  # every one answered
        await raw.close()
        async with asyncio.timeout(WAIT_S):  # the server sees the connection end, and tells the count
            while not any(x["event"] == "control refusals not logged" for x in log_lines(log)):
                await asyncio.sleep(0.01)
    entries = log_lines(log)
    refused = [x for x in entries if x["event"] == "control-refused"]
    (told,) = [x for x in entries if x["event"] == "control refusals not logged"]
    assert len(refused) == LOG_BURST and told["count"] == LOG_BURST * 4


def test_an_argument_an_operation_does_not_take_is_refused():
    from controller.service.operations import OPERATIONS, check_arguments

    check_arguments("void", {"reason": "misdeal", "supervisor": "ann", "secret": SECRET})
    with pytest.raises(InputError) as e:
        check_arguments("void", {"Reason": "misdeal", "supervisor": "ann", "secret": SECRET})
    assert e.value.field == "Reason" and "it takes reason, round_id, secret, supervisor" in e.value.problem
    with pytest.raises(InputError, match="claim does not take 'secret'"):
        check_arguments("claim", {"seat": 3, "cards": [], "secret": SECRET})
    with pytest.raises(LookupError):
        check_arguments("frobnicate", {})
    assert set(OPERATIONS) == set(OPS)  # the ops this test server answers are the daemon's

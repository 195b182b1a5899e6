"""The rig's control socket: JSON lines over a Unix socket, one request per line, one reply per request.

    {"op": "place_chip", "seat": 3, "spot": "progressive"}   ->  {"ok": true, "result": {...}}
    {"op": "place_chip", "seat": 9, "spot": "progressive"}   ->  {"ok": false, "error": "seat 9 ..."}

A request may carry an ``"id"``; the reply echoes it. Every read has a timeout, lines are bounded, and
the socket file is created mode 0600 (the rig can unplug devices: only its owner may drive it).
The operations are listed in OPS and in docs/hil.md.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller.errors import InputError

if TYPE_CHECKING:  # the client half must not pay for importing the rig: the command line starts often
    from hil.rig import Rig

log = structlog.get_logger("hil.control")

MAX_LINE = 64 * 1024
READ_TIMEOUT_S = 60.0  # an idle client is dropped; a script sends its request at once
WRITE_TIMEOUT_S = 10.0
CLIENT_TIMEOUT_S = 15.0  # longer than any action the rig waits on


class RigRefused(RuntimeError):
    """The rig refused a request (``ok: false``)."""


class ControlUnavailable(ConnectionError):
    """No rig answers on that socket."""


class SocketInUse(RuntimeError):
    """The control socket path is taken: a live rig listens there, or it is not a socket."""


class RequestError(ValueError):
    """A request field of the wrong type, missing or unknown."""


def default_socket() -> str:
    """$PROGRESSIVE_HIL_SOCKET, else progressive-hil.sock in $XDG_RUNTIME_DIR (or /tmp)."""
    if env := os.environ.get("PROGRESSIVE_HIL_SOCKET"):
        return env
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return str(Path(base) / "progressive-hil.sock")


# --- request parameters -------------------------------------------------------------------------------


class _Params:
    """Typed reads of one request's fields; a wrong type is a RequestError naming the field."""

    def __init__(self, req: dict[str, Any]) -> None:
        self.req = req
        self.used = {"op", "id"}

    def _get(self, key: str, default: Any, required: bool) -> Any:
        self.used.add(key)
        if key not in self.req or self.req[key] is None:
            if required:
                raise RequestError(f"{key}: is required")
            return default
        return self.req[key]

    def int(self, key: str, default: int | None = None, *, required: bool = True) -> Any:
        v = self._get(key, default, required and default is None)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise RequestError(f"{key}: must be an integer, not {v!r}")
        return v

    def number(self, key: str, default: float | None = None) -> Any:
        v = self._get(key, default, default is None)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise RequestError(f"{key}: must be a number, not {v!r}")
        return v

    def str(self, key: str, default: str | None = None, *, required: bool = True) -> Any:
        v = self._get(key, default, required and default is None)
        if v is not None and not isinstance(v, str):
            raise RequestError(f"{key}: must be a string, not {v!r}")
        return v

    def bool(self, key: builtins.str) -> bool:
        v = self._get(key, None, True)
        if not isinstance(v, bool):
            raise RequestError(f"{key}: must be true or false, not {v!r}")
        return v

    def list(self, key: builtins.str) -> builtins.list[Any]:
        v = self._get(key, None, True)
        if not isinstance(v, list):
            raise RequestError(f"{key}: must be a list, not {v!r}")
        return v

    def hex(self, key: builtins.str) -> bytes:
        v = self.str(key)
        try:
            return bytes.fromhex(v)
        except ValueError:
            raise RequestError(f"{key}: {v!r} is not hex bytes such as \"ff 00 7e\"") from None

    def done(self) -> None:
        extra = sorted(set(self.req) - self.used)
        if extra:
            raise RequestError(f"unknown field(s) {', '.join(extra)} for op {self.req.get('op')!r}")


Handler = Callable[["Rig", _Params], Awaitable[Any]]


async def _place(rig: Rig, p: _Params) -> Any:
    seat, spot = p.int("seat"), p.str("spot")
    amount = p.int("amount_cents", required=False)
    p.done()
    return await rig.place_chip(seat, spot, amount)


async def _remove(rig: Rig, p: _Params) -> Any:
    seat, spot = p.int("seat"), p.str("spot")
    p.done()
    return await rig.remove_chip(seat, spot)


async def _lockout(rig: Rig, p: _Params) -> Any:
    device = p.str("device", required=False)
    p.done()
    return await rig.press_lockout(device)


async def _shuffle(rig: Rig, p: _Params) -> Any:
    count, deck, device = p.int("count"), p.str("deck", required=False), p.str("device", required=False)
    p.done()
    return await rig.shuffle(count, deck, device=device)


async def _shuffle_fault(rig: Rig, p: _Params) -> Any:
    reason, device = p.str("reason"), p.str("device", required=False)
    p.done()
    return await rig.shuffle_fault(reason, device=device)


async def _jam(rig: Rig, p: _Params) -> Any:
    device = p.str("device", required=False)
    p.done()
    return await rig.jam_shoe(device=device)


async def _dispense(rig: Rig, p: _Params) -> Any:
    count, device = p.int("count"), p.str("device", required=False)
    p.done()
    return await rig.dispense(count, device=device)


async def _deal(rig: Rig, p: _Params) -> Any:
    cards, device = p.list("cards"), p.str("device", required=False)
    p.done()
    return await rig.deal(cards, device=device)


async def _roll(rig: Rig, p: _Params) -> Any:
    d1, d2, device = p.int("die1"), p.int("die2"), p.str("device", required=False)
    p.done()
    return await rig.roll(d1, d2, device=device)


async def _sign(rig: Rig, p: _Params) -> Any:
    device = p.str("device", required=False)
    p.done()
    return rig.sign(device)


async def _lights(rig: Rig, p: _Params) -> Any:
    p.done()
    lights = rig.lights()
    lights["seats"] = {str(k): v for k, v in lights["seats"].items()}  # JSON keys are strings anyway
    return lights


async def _status(rig: Rig, p: _Params) -> Any:
    p.done()
    return rig.status()


async def _connections(rig: Rig, p: _Params) -> Any:
    p.done()
    return {name: c.as_dict() for name, c in rig.connections().items()}


async def _unplug(rig: Rig, p: _Params) -> Any:
    name = p.str("name")
    p.done()
    return {"devices": rig.unplug(name)}


async def _replug(rig: Rig, p: _Params) -> Any:
    name = p.str("name")
    p.done()
    return {"devices": rig.replug(name)}


async def _corrupt(rig: Rig, p: _Params) -> Any:
    name, n, direction = p.str("name"), p.int("n", 1), p.str("direction", "to_driver")
    p.done()
    rig.corrupt(name, n, direction)
    return None


async def _drop(rig: Rig, p: _Params) -> Any:
    name, n, direction = p.str("name"), p.int("n", 1), p.str("direction", "to_driver")
    p.done()
    rig.drop(name, n, direction)
    return None


async def _delay(rig: Rig, p: _Params) -> Any:
    name, seconds = p.str("name"), p.number("seconds")
    n, direction = p.int("n", 1), p.str("direction", "to_driver")
    p.done()
    rig.delay(name, seconds, n, direction)
    return None


async def _garbage(rig: Rig, p: _Params) -> Any:
    name, data = p.str("name"), p.hex("hex")
    p.done()
    await rig.garbage(name, data)
    return {"bytes": len(data)}


async def _reboot(rig: Rig, p: _Params) -> Any:
    name = p.str("name")
    p.done()
    rig.reboot(name)
    return None


async def _exception(rig: Rig, p: _Params) -> Any:
    name, code = p.str("name"), p.int("code", required=False)
    p.done()
    rig.exception(name, code)
    return None


async def _mute(rig: Rig, p: _Params) -> Any:
    name, on = p.str("name"), p.bool("on")
    p.done()
    rig.mute(name, on)
    return None


async def _ping(rig: Rig, p: _Params) -> Any:
    p.done()
    return {"table": rig.config.table}


OPS: dict[str, Handler] = {
    "ping": _ping, "status": _status, "connections": _connections,
    "place_chip": _place, "remove_chip": _remove, "press_lockout": _lockout,
    "shuffle": _shuffle, "shuffle_fault": _shuffle_fault, "jam_shoe": _jam, "dispense": _dispense,
    "deal": _deal, "roll": _roll, "sign": _sign, "lights": _lights,
    "unplug": _unplug, "replug": _replug, "corrupt": _corrupt, "drop": _drop, "delay": _delay,
    "garbage": _garbage, "reboot": _reboot, "exception": _exception, "mute": _mute,
}


async def handle(rig: Rig, request: object) -> dict[str, Any]:
    """One request object -> one reply object. Never raises for a bad request."""
    from hil.rig import RigError  # loaded already: a server has a rig

    if not isinstance(request, dict):
        return {"ok": False, "error": "a request is a JSON object such as {\"op\": \"status\"}"}
    reply: dict[str, Any] = {}
    if "id" in request:
        reply["id"] = request["id"]
    op = request.get("op")
    handler = OPS.get(op) if isinstance(op, str) else None
    if handler is None:
        reply.update(ok=False, error=f"unknown op {op!r}; ops: {', '.join(sorted(OPS))}")
        return reply
    try:
        result = await handler(rig, _Params(request))
    except (RigError, RequestError) as e:
        reply.update(ok=False, error=str(e))
    except Exception as e:  # a bug in the rig or a simulator: report it, keep serving
        log.exception("control request failed", op=op)
        reply.update(ok=False, error=f"internal error: {type(e).__name__}: {e}")
    else:
        reply.update(ok=True, result=result)
    return reply


# --- server -------------------------------------------------------------------------------------------


class ControlServer:
    """Serves ``rig`` on a Unix socket at ``path``. ``async with ControlServer(rig, path):``."""

    def __init__(self, rig: Rig, path: str | os.PathLike[str], *, read_timeout: float = READ_TIMEOUT_S,
                 max_line: int = MAX_LINE) -> None:
        self.rig = rig
        self.path = Path(path)
        self.read_timeout = read_timeout
        self.max_line = max_line
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ControlServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        sock = _bind_private(self.path)
        try:
            self._server = await asyncio.start_unix_server(self._client, sock=sock, limit=self.max_line + 1)
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise
        log.info("control socket listening", path=str(self.path))

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # Python 3.11's wait_closed does not wait for open connections: cancel and await them here.
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.wait(self._clients, timeout=WRITE_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Only close() cancels a client. Ending normally keeps 3.11's stream callback from
            # logging the cancellation as an unhandled error.
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                async with asyncio.timeout(self.read_timeout):
                    line = await reader.readline()
            except TimeoutError:
                return  # idle: hang up
            except ValueError:  # longer than max_line: the stream is out of step, answer and hang up
                await self._reply(writer, {"ok": False, "error": f"request longer than {self.max_line} bytes"})
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except (ValueError, RecursionError):
                reply: dict[str, Any] = {"ok": False, "error": "not a JSON object on one line"}
            else:
                reply = await handle(self.rig, request)
            await self._reply(writer, reply)

    async def _reply(self, writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
        writer.write(json.dumps(reply, separators=(",", ":"), default=_json_default).encode() + b"\n")
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await writer.drain()


def _json_default(value: object) -> object:
    # A sign whose scale is a fraction of a cent can show a Fraction of cents: send it exactly, as "n/d".
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def _bind_private(path: Path) -> socket.socket:
    """A listening Unix socket at ``path`` that only this user can connect to.

    The mode is set by umask at bind time, so there is no moment when others could connect.
    A stale socket file (no one listening) is replaced; a live one is left alone."""
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise SocketInUse(f"{path} exists and is not a socket")
        if _alive(path):
            raise SocketInUse(f"another rig is already listening on {path}")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _alive(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


# --- clients ------------------------------------------------------------------------------------------


def _encode(op: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"op": op, **params}, separators=(",", ":")).encode() + b"\n"


def _decode(line: bytes) -> Any:
    if not line.endswith(b"\n"):
        raise ControlUnavailable("the rig closed the connection without a reply")
    reply = json.loads(line)
    if not isinstance(reply, dict):
        raise ControlUnavailable("the rig sent a reply that is not a JSON object")
    if not reply.get("ok"):
        raise RigRefused(str(reply.get("error", "refused")))
    return reply.get("result")


def request(path: str | os.PathLike[str], op: str, *, timeout: float = CLIENT_TIMEOUT_S, **params: Any) -> Any:
    """One request, blocking (the command line). Returns ``result``; raises RigRefused on ``ok: false``."""
    line = _encode(op, params)
    if len(line) > MAX_LINE:  # the rig would refuse it: refused here, before anything is sent
        raise InputError("request", f"{len(line)} bytes; a request is at most {MAX_LINE} bytes")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(os.fspath(path))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise ControlUnavailable(f"no rig is listening on {os.fspath(path)} ({e.strerror})") from None
        s.sendall(line)
        buf = bytearray()
        try:
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > 16 * MAX_LINE:
                    raise ControlUnavailable("the reply is too long")
        except TimeoutError:
            raise ControlUnavailable(f"the rig did not answer within {timeout:g} s") from None
    return _decode(bytes(buf))


async def arequest(path: str | os.PathLike[str], op: str, *, timeout: float = CLIENT_TIMEOUT_S,
                   **params: Any) -> Any:
    """One request from asyncio code (tests, other programs)."""
    async with asyncio.timeout(timeout):
        try:
            reader, writer = await asyncio.open_unix_connection(os.fspath(path), limit=16 * MAX_LINE)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise ControlUnavailable(f"no rig is listening on {os.fspath(path)} ({e.strerror})") from None
        try:
            writer.write(_encode(op, params))
            await writer.drain()
            line = await reader.readline()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
    return _decode(line)

"""The daemon's local control socket, and the client `progressivectl` talks to it with.

A Unix stream socket whose file permissions are the access control (directory 0750, socket 0660, group
``progressive``). JSON lines: one request per line, ``{"op": "status", "args": {...}, "id": N}``, one response
per line, ``{"id": N, "ok": true, "result": ...}`` or ``{"id": N, "ok": false, "error": "...", "field": ...,
"kind": "input|rules|auth|unavailable|internal"}``. Money in results is a decimal string of dollars, never a
float. The protocol and every operation are described in docs/operations.md.

The server knows nothing of tables or rounds: it hands each request to a handler, an object with one
coroutine ``call(op, args)`` that returns a JSON-able result or raises

- ``InputError`` / ``RulesError`` (kind ``input`` / ``rules``, with the error's field),
- ``PermissionError`` (kind ``auth``: a wrong supervisor secret, a supervisor not allowed to do this),
- ``LookupError`` for an unknown operation (kind ``input``, field ``op``; ``UnknownOp`` says so explicitly),
- ``NotAvailable`` or ``NotImplementedError`` (kind ``unavailable``: not offered by this version, or not now),

and anything else is an internal error (kind ``internal``), logged with its traceback. A ``KeyError`` or
``IndexError`` from deeper down is a bug, not an unknown operation, and an ``OSError`` with an errno (a file
the daemon may not open) is not an authorization refusal: both are internal errors.

A request's ``secret`` (a supervisor's secret, at any depth of ``args``, its key in any case) never reaches the
log: arguments are logged with it redacted, and its text (if it is as long as a secret can be) is cut out of
every message and traceback logged or answered.

What one client can take is bounded: at most `max_clients` connections, `max_per_uid` of them per user; a
user's requests, on all its connections, are taken at most REQUESTS_PER_S a second after a burst of
REQUEST_BURST (the rest wait: a flood is paced, not refused); a connection that sends no request within
`idle_timeout` is closed (blank lines do not count as requests); a number of more than MAX_DIGITS digits is
refused as a field error; refusals are logged at most LOG_BURST per LOG_WINDOW seconds per user (the rest
counted, and the count logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import socket
import stat
import struct
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from controller.errors import InputError, RulesError
from controller.service.logs import LogBudget

DEFAULT_SOCKET = "/run/progressive/control.sock"
DEFAULT_LINK_SOCKET = "/run/progressive-link/control.sock"  # the link authority's (read only), beside a table's
SOCKET_ENV = "PROGRESSIVE_SOCKET"
KINDS = ("input", "rules", "auth", "unavailable", "internal")
SECRET_KEYS = frozenset({"secret"})  # compared in lower case
REDACTED = "<redacted>"
MIN_SECRET_CHARS = 8  # a supervisor's secret is at least this long (controller.config.credentials)
MAX_DIGITS = 64  # a number in a request: no argument needs more
REQUESTS_PER_S, REQUEST_BURST = 20.0, 40  # a user's requests are answered at most this fast (after a burst)
LOG_BURST, LOG_WINDOW = 20, 10.0  # refusals logged per user and window; the rest counted
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with the terminating NUL
MAX_RESPONSE = 16 * 1024 * 1024  # what the client accepts in one answer line
_REQUEST_KEYS = ("op", "args", "id")
_MAX_OP = 64
_MAX_ID = 128


# The peer of the request a handler is answering (pid, uid, gid: SO_PEERCRED), for what it decides by user.
# Read-only: the default is one object shared by every context.
PEER: contextvars.ContextVar[Mapping[str, int]] = contextvars.ContextVar("control_peer", default=MappingProxyType({}))


# --- errors --------------------------------------------------------------------------------------


class ControlError(Exception):
    """The daemon refused or failed a request (a response with ``ok: false``).

    Not the link's `controller.linkproto.schema.Refused`: this is any failed answer on the control socket, of
    any ``kind`` (bad input, the rules, authentication, unavailable, internal), raised to the one who asked; that
    is one message of the link protocol, the authority's final refusal of one numbered operation by the rules,
    which a table's outbox keeps and its session turns into `LinkRefused`."""

    def __init__(self, kind: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.kind = kind
        self.message = message
        self.field = field


class DaemonUnavailable(Exception):
    """No daemon answered on the socket: missing, refused, closed without an answer, or too slow."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class NotAvailable(Exception):
    """Raised by a handler for an operation this daemon does not offer (yet), or cannot carry out now."""

    def __init__(self, message: str = "not available in this version") -> None:
        super().__init__(message)


class UnknownOp(LookupError):
    """Raised by a handler for an operation it does not know."""


class ServerError(RuntimeError):
    """The control socket cannot be set up: in use by another daemon, or its path is not a socket."""


class Handler(Protocol):
    async def call(self, op: str, args: dict[str, Any]) -> Any: ...


def socket_path(given: str | os.PathLike[str] | None = None) -> str:
    """The socket to use: the one given, else $PROGRESSIVE_SOCKET, else the default."""
    if given is not None and str(given):
        return str(given)
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET


# --- secrets -------------------------------------------------------------------------------------


def _is_secret_key(k: object) -> bool:
    return isinstance(k, str) and k.lower() in SECRET_KEYS


def _secrets_in(value: Any, out: list[str] | None = None) -> list[str]:
    """The secrets in `value` long enough to be one: a shorter text is no secret anyone holds, and cutting it out
    of messages would mangle them (a secret "o" in "unknown")."""
    out = [] if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            if _is_secret_key(k):
                if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS:
                    out.append(v)
            else:
                _secrets_in(v, out)
    elif isinstance(value, list):
        for v in value:
            _secrets_in(v, out)
    return out


def redact(value: Any) -> Any:
    """`value` with every entry named in SECRET_KEYS (in any case) replaced, at any depth."""
    if isinstance(value, dict):
        return {k: (REDACTED if _is_secret_key(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _scrub(text: str, secrets: list[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


# --- requests ------------------------------------------------------------------------------------


class _BadRequest(Exception):
    def __init__(self, field: str | None, message: str, rid: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.rid = rid


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _BadRequest(k, f"{k!r} is given twice")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise _BadRequest(None, f"invalid JSON: {name} is not a number JSON allows")


class _Huge:
    """A number with more digits than MAX_DIGITS, found where it stands after the parse (to name its field)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-+"))


def _int(text: str) -> Any:
    return _Huge(text) if len(text) > MAX_DIGITS else int(text)


def _float(text: str) -> Any:
    return _Huge(text) if len(text) > MAX_DIGITS else float(text)


def _huge_at(value: Any, path: str = "") -> tuple[str, _Huge] | None:
    """The field of the first number too long in `value`, as `args.stub` or `args.cards[2]`."""
    if isinstance(value, _Huge):
        return path, value
    if isinstance(value, dict):
        for k, v in value.items():
            found = _huge_at(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _huge_at(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _parse_request(line: bytes) -> tuple[Any, str, dict[str, Any]]:
    """(id, op, args) of one request line; _BadRequest naming the field otherwise."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _BadRequest(None, "a request must be UTF-8 text") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_int=_int,
                         parse_float=_float)
    except json.JSONDecodeError as e:
        raise _BadRequest(None, f"invalid JSON at column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise _BadRequest(None, "invalid JSON: nested too deeply") from None
    huge = _huge_at(doc)
    if huge is not None:
        path, number = huge
        rid = doc.get("id") if isinstance(doc, dict) and not isinstance(doc.get("id"), _Huge) else None
        raise _BadRequest(path.removeprefix("args.") or None,
                          f"a number of {number.digits} digits: at most {MAX_DIGITS}", rid)
    if not isinstance(doc, dict):
        raise _BadRequest(None, f"a request must be a JSON object like {{\"op\": \"status\", \"args\": {{}}, "
                                f"\"id\": 1}}, not {type(doc).__name__ if doc is not None else 'null'}")
    rid = doc.get("id")
    if not (rid is None or (isinstance(rid, int) and not isinstance(rid, bool))
            or (isinstance(rid, str) and len(rid) <= _MAX_ID)):
        raise _BadRequest("id", f"must be a number, a string of at most {_MAX_ID} characters or null")
    unknown = [k for k in doc if k not in _REQUEST_KEYS]
    if unknown:
        raise _BadRequest(unknown[0], f"unknown field {unknown[0]!r} (a request has op, args and id)", rid)
    op = doc.get("op")
    if op is None:
        raise _BadRequest("op", "is missing: the operation to carry out, e.g. \"status\"", rid)
    if not isinstance(op, str) or not op or len(op) > _MAX_OP:
        raise _BadRequest("op", f"must be the name of an operation (a string of 1..{_MAX_OP} characters)", rid)
    args = doc.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _BadRequest("args", "must be a JSON object of the operation's arguments", rid)
    return rid, op, args


def _dump(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")


def _error(rid: Any, kind: str, message: str, field: str | None) -> dict[str, Any]:
    return {"id": rid, "ok": False, "error": message, "field": field, "kind": kind}


# --- server --------------------------------------------------------------------------------------


class _Conn:
    __slots__ = ("task", "busy", "uid")

    def __init__(self, task: asyncio.Task[Any], uid: int | None) -> None:
        self.task = task
        self.busy = False
        self.uid = uid


class _Pace:
    """A token bucket per user: `wait(uid)` returns at once while the user has requests to spend, else when the
    next one is due."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens: dict[int | None, tuple[float, float]] = {}  # uid -> (tokens, when)

    async def wait(self, uid: int | None) -> None:
        now = self._clock()
        tokens, then = self._tokens.get(uid, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate) - 1.0
        self._tokens[uid] = (tokens, now)
        if tokens < 0:  # spent ahead: this request waits its turn
            await asyncio.sleep(-tokens / self.rate)


class ControlServer:
    """The control socket of a running daemon. One task per connection; requests on a connection are
    answered in order. ``stop()`` lets requests being carried out finish (up to `grace` seconds)."""

    def __init__(self, path: str | os.PathLike[str], handler: Handler, *, mode: int = 0o660,
                 max_line: int = 65536, idle_timeout: float = 30.0, max_clients: int = 32,
                 max_per_uid: int = 8) -> None:
        import structlog

        if max_line < 64:
            raise ValueError("max_line: must be at least 64 bytes")
        if idle_timeout <= 0:
            raise ValueError("idle_timeout: must be more than 0 seconds")
        if max_clients < 1:
            raise ValueError("max_clients: must be at least 1")
        if max_per_uid < 1:
            raise ValueError("max_per_uid: must be at least 1")
        self.path = Path(path)
        self.handler = handler
        self.mode = mode
        self.max_line = max_line
        self.idle_timeout = idle_timeout
        self.max_clients = max_clients
        self.max_per_uid = max_per_uid
        self._log = structlog.get_logger("control")
        self._budget = LogBudget(LOG_BURST, LOG_WINDOW)
        self._pace = _Pace(REQUESTS_PER_S, REQUEST_BURST)
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[asyncio.Task[Any], _Conn] = {}
        self._inode: tuple[int, int] | None = None
        self._closing = False

    @property
    def connections(self) -> int:
        return len(self._conns)

    async def __aenter__(self) -> ControlServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- set-up and tear-down --

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the control server is already started")
        path = self.path
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ServerError(f"{path}: a Unix socket path has at most {MAX_SOCKET_PATH} bytes")
        if not path.parent.exists():
            path.parent.mkdir(mode=0o750, parents=True)
            os.chmod(path.parent, 0o750)  # mkdir's mode is masked by the umask
        self._remove_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound = False
        try:
            sock.bind(str(path))
            bound = True
            # Before listen(): nobody can connect while the mode is still the umask's.
            os.chmod(path, self.mode)
            st = os.stat(path)
            self._inode = (st.st_dev, st.st_ino)
            self._closing = False
            self._server = await asyncio.start_unix_server(self._accept, sock=sock, limit=self.max_line)
        except BaseException:
            sock.close()
            if bound:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            self._inode = None
            raise
        self._log.info("control listening", path=str(path), mode=f"{self.mode:04o}")

    def _remove_stale(self) -> None:
        """Remove the socket file of a daemon that died; refuse if one is listening on it."""
        path = str(self.path)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ServerError(f"{path} exists and is not a socket: refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(2.0)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)
            self._log.info("control stale socket removed", path=path)
            return
        except FileNotFoundError:
            return
        except TimeoutError:
            raise ServerError(f"{path}: a process is listening on it (busy): is another daemon running?") from None
        except OSError as e:
            raise ServerError(f"{path}: cannot tell whether another daemon is listening: {e.strerror or e}") from None
        finally:
            probe.close()
        raise ServerError(f"{path}: another daemon is listening on it")

    async def stop(self, grace: float = 5.0) -> None:
        """Stop listening, close idle connections, let requests being carried out finish (at most `grace`
        seconds, then cancel them), and remove the socket file."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        self._unlink()
        for conn in list(self._conns.values()):
            if not conn.busy:
                conn.task.cancel()
        tasks = list(self._conns)
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
        await server.wait_closed()
        self._log.info("control stopped", path=str(self.path))

    def _unlink(self) -> None:
        """Remove the socket file if it is still ours (not one a later daemon bound)."""
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            self._log.warning("control socket not removed", path=str(self.path), error=e.strerror or str(e))
        self._inode = None

    # -- connections --

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closing:
            writer.close()
            return
        peer = _peer(writer)
        uid = peer.get("peer_uid")
        mine = sum(1 for c in self._conns.values() if c.uid == uid)
        if len(self._conns) >= self.max_clients or mine >= self.max_per_uid:
            limit = (f"at most {self.max_clients}" if len(self._conns) >= self.max_clients
                     else f"at most {self.max_per_uid} for user {uid}")
            if self._budget.take(uid) is not None:
                self._log.warning("control too many connections", limit=limit, **peer)
            await self._send(writer, _error(None, "unavailable", f"too many connections ({limit}): try again", None))
            await self._close(writer)
            return
        conn = _Conn(task, uid)
        self._conns[task] = conn
        try:
            await self._serve(conn, reader, writer, peer)
        except asyncio.CancelledError:
            pass  # stop(): the connection closes below
        except (ConnectionError, BrokenPipeError):
            self._log.debug("control client gone", **peer)
        except Exception as e:  # noqa: BLE001 - never let one connection take the server down; no traceback:
            # the request's secret may be in it (requests are scrubbed in _internal, which knows the secrets)
            self._log.error("control connection failed", error=f"{type(e).__name__}: {e}", **peer)
        finally:
            del self._conns[task]
            if not any(c.uid == uid for c in self._conns.values()):
                owed = self._budget.owed(uid)
                if owed:
                    self._log.warning("control refusals not logged", count=owed, **peer)
            await self._close(writer)

    async def _serve(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     peer: dict[str, int]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.idle_timeout  # for the next request: blank lines do not move it
        while not self._closing:
            try:
                line = await asyncio.wait_for(reader.readuntil(b"\n"), max(0.0, deadline - loop.time()))
            except TimeoutError:
                self._log.info("control idle timeout", seconds=self.idle_timeout, **peer)
                await self._send(writer, _error(None, "input", f"no complete request line within "
                                                               f"{self.idle_timeout:g} s: closing", None))
                return
            except asyncio.LimitOverrunError:
                self._log.warning("control line too long", limit=self.max_line, **peer)
                await self._send(writer, _error(None, "input", f"request line longer than {self.max_line} bytes: "
                                                               f"closing", None))
                await self._discard(reader, writer)
                return
            except asyncio.IncompleteReadError as e:
                if not e.partial.strip():
                    return  # the client is done
                line = e.partial  # a last request without its line end: answer it, then close
            if not line.strip():
                continue
            await self._pace.wait(conn.uid)
            conn.busy = True  # stop() lets the request finish and its answer go out
            try:
                if not await self._send(writer, await self._answer(line, peer)):
                    return
            finally:
                conn.busy = False
            deadline = loop.time() + self.idle_timeout
            if line[-1:] != b"\n":
                return

    async def _answer(self, line: bytes, peer: dict[str, int]) -> dict[str, Any] | bytes:
        try:
            rid, op, args = _parse_request(line)
        except _BadRequest as e:
            skipped = self._budget.take(peer.get("peer_uid"))
            if skipped is not None:
                self._log.info("control bad request", field=e.field, error=e.message, not_logged_before=skipped,
                               **peer)
            return _error(e.rid, "input", e.message, e.field)
        secrets = _secrets_in(args)
        self._log.debug("control request", op=op, id=rid, args=redact(args), **peer)
        token = PEER.set(peer)
        try:
            result = await self.handler.call(op, args)
        except asyncio.CancelledError:
            raise
        except RulesError as e:
            return self._refused(rid, op, "rules", e.problem, e.field or None, secrets, peer)
        except InputError as e:
            return self._refused(rid, op, "input", e.problem, e.field or None, secrets, peer)
        except PermissionError as e:
            if e.errno is not None:  # the OS refused the daemon something: a fault, not a refusal
                return self._internal(rid, op, e, secrets, peer)
            message = str(e) or "not permitted"
            return self._refused(rid, op, "auth", message, getattr(e, "field", None), secrets, peer)
        except (NotAvailable, NotImplementedError) as e:
            return self._refused(rid, op, "unavailable", str(e) or "not available in this version", None, secrets,
                                 peer)
        except LookupError as e:
            if isinstance(e, (KeyError, IndexError)) and not (isinstance(e, KeyError) and e.args == (op,)):
                return self._internal(rid, op, e, secrets, peer)
            return self._refused(rid, op, "input", f"unknown operation {op!r}", "op", secrets, peer)
        except Exception as e:  # noqa: BLE001 - answered "internal", logged with its traceback (scrubbed)
            return self._internal(rid, op, e, secrets, peer)
        finally:
            PEER.reset(token)
        try:
            return _dump({"id": rid, "ok": True, "result": result})
        except (TypeError, ValueError) as e:
            return self._internal(rid, op, e, secrets, peer, "the result cannot be sent as JSON")

    def _refused(self, rid: Any, op: str, kind: str, message: str, field: str | None, secrets: list[str],
                 peer: dict[str, int]) -> dict[str, Any]:
        message = _scrub(message, secrets)
        skipped = self._budget.take(peer.get("peer_uid"))
        if skipped is not None:
            log = self._log.warning if kind == "auth" else self._log.info
            log("control-refused", op=op, id=rid, kind=kind, field=field, error=message, not_logged_before=skipped,
                **peer)
        return _error(rid, kind, message, field)

    def _internal(self, rid: Any, op: str, e: BaseException, secrets: list[str], peer: dict[str, int],
                  what: str = "") -> dict[str, Any]:
        tb = _scrub("".join(traceback.format_exception(e)), secrets)
        self._log.error("control internal error", op=op, id=rid, error=_scrub(f"{type(e).__name__}: {e}", secrets),
                        what=what or None, traceback=tb, **peer)
        return _error(rid, "internal", f"internal error in the daemon ({what or type(e).__name__}); its log has the "
                                       f"details", None)

    async def _send(self, writer: asyncio.StreamWriter, response: dict[str, Any] | bytes) -> bool:
        """Write one response line; False when the client is gone or does not read."""
        try:
            writer.write(response if isinstance(response, bytes) else _dump(response))
            await asyncio.wait_for(writer.drain(), self.idle_timeout)
        except TimeoutError:
            self._log.info("control client not reading", seconds=self.idle_timeout)
            return False
        except (ConnectionError, BrokenPipeError):
            return False
        return True

    async def _discard(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """After refusing an over-long line: end our side, then read what the client still sends (briefly)
        so that closing does not reset the connection before the client read the answer."""
        budget = 16 * self.max_line
        with contextlib.suppress(TimeoutError, OSError):
            if writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(min(self.idle_timeout, 1.0)):
                while budget > 0:
                    chunk = await reader.read(65536)
                    if not chunk:
                        return
                    budget -= len(chunk)

    @staticmethod
    async def _close(writer: asyncio.StreamWriter) -> None:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 1.0)


def _peer(writer: asyncio.StreamWriter) -> dict[str, int]:
    """The client's process and user (SO_PEERCRED, Linux), for the log."""
    sock = writer.get_extra_info("socket")
    opt = getattr(socket, "SO_PEERCRED", None)
    if sock is None or opt is None:
        return {}
    try:
        pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError:
        return {}
    return {"peer_pid": pid, "peer_uid": uid, "peer_gid": gid}


# --- client --------------------------------------------------------------------------------------


class ControlClient:
    """Talks to a running daemon: one connection per call."""

    def __init__(self, path: str | os.PathLike[str] | None = None, timeout: float = 10.0) -> None:
        self.path = socket_path(path)
        self.timeout = timeout
        self._next_id = 0

    async def call(self, op: str, **args: Any) -> Any:
        """The result of `op`; ControlError when the daemon refuses or fails, DaemonUnavailable when no
        daemon answers."""
        self._next_id += 1
        rid = self._next_id
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            raise ControlError("input", f"a Unix socket path has at most {MAX_SOCKET_PATH} bytes", self.path)
        line = _dump({"op": op, "args": args, "id": rid})
        try:
            async with asyncio.timeout(self.timeout):
                answer = await self._exchange(line)
        except TimeoutError:
            raise DaemonUnavailable(self.path, f"no answer within {self.timeout:g} s") from None
        except FileNotFoundError:
            raise DaemonUnavailable(self.path, "no such socket") from None
        except ConnectionRefusedError:
            raise DaemonUnavailable(self.path, "connection refused: nothing is listening on it") from None
        except PermissionError:
            raise ControlError("auth", "permission denied: only members of the socket's group (progressive) may "
                                       "talk to the daemon", self.path) from None
        except OSError as e:
            raise DaemonUnavailable(self.path, e.strerror or str(e)) from None
        return _result(answer, rid)

    async def _exchange(self, line: bytes) -> bytes:
        reader, writer = await asyncio.open_unix_connection(self.path, limit=MAX_RESPONSE)
        try:
            writer.write(line)
            await writer.drain()
            try:
                return await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                raise DaemonUnavailable(self.path, "the daemon closed the connection without answering") from None
            except asyncio.LimitOverrunError:
                raise ControlError("internal", f"the daemon's answer is longer than {MAX_RESPONSE} bytes") from None
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def call_sync(self, op: str, **args: Any) -> Any:
        """`call` for code without an event loop (the command line)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.call(op, **args))
        raise RuntimeError("call_sync() inside a running event loop: await call() instead")


def _result(answer: bytes, rid: int) -> Any:
    try:
        doc = json.loads(answer)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ControlError("internal", f"the daemon's answer is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ok"), bool):
        raise ControlError("internal", "the daemon's answer is not a response object")
    if doc.get("id") not in (rid, None):
        raise ControlError("internal", f"the daemon answered request {doc.get('id')!r}, not {rid}")
    if doc["ok"]:
        return doc.get("result")
    kind, field, message = doc.get("kind"), doc.get("field"), doc.get("error")
    raise ControlError(kind if isinstance(kind, str) and kind in KINDS else "internal",
                       message if isinstance(message, str) and message else "refused",
                       field if isinstance(field, str) and field else None)


__all__ = ["DEFAULT_LINK_SOCKET", "DEFAULT_SOCKET", "KINDS", "LOG_BURST", "LOG_WINDOW", "MAX_DIGITS", "MAX_RESPONSE",
           "MAX_SOCKET_PATH", "MIN_SECRET_CHARS", "PEER", "REDACTED", "REQUESTS_PER_S", "REQUEST_BURST", "SECRET_KEYS",
           "SOCKET_ENV", "ControlClient", "ControlError", "ControlServer", "DaemonUnavailable", "Handler",
           "NotAvailable", "ServerError", "UnknownOp", "redact", "socket_path"]

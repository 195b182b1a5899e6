"""`progressive-console`: the pit's web console, a process of its own that talks to the table daemon over its
control socket (the daemon gains no network listener). docs/console.md says how to run it and what it shows;
docs/security.md its threat model.

One poller asks the daemon (`status`, `round`, `history`) every POLL_S, and `meter_series` (the plots) every
SERIES_S, and wakes the open pages' event streams (SSE) when something changed: the daemon is asked the same
however many pages are open. Approve, reject and the
login forward the supervisor's name and secret once to the daemon, which checks them (off its loop, throttled);
the console checks no credential itself and keeps none. Its access log names method, path and status, never a
query string or a body.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import importlib.resources
import json
import secrets
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ..app.auth import WINDOW_S, Guesses
from ..app.control import ControlClient, ControlError, DaemonUnavailable, socket_path
from ..exits import EXIT_BAD_INPUT
from . import page

log = structlog.get_logger("console")

DEFAULT_LISTEN = "127.0.0.1:8480"
POLL_S = 0.5  # the daemon is asked this often: a change is on the page within 1 s
ASK_TIMEOUT_S = 5.0  # one request to the daemon (approve waits for the payout's journal entries)
SERIES_S = 60.0  # the plots are asked this often (the daemon reads its journal for them at most once a minute)
SERIES_RETRY_S = 5.0  # ... or this soon again while the daemon does not answer
SERIES_TIMEOUT_S = 150.0  # the daemon reads up to 30 days of journal for an answer (its own limit is 120 s)
SPANS = ("day", "30d")
ACTION_TIMEOUT_S = 30.0
KEEPALIVE_S = 15.0  # an event stream with nothing new gets a comment this often (proxies, dead tablets)
WRITE_TIMEOUT_S = 10.0
LOGIN_S = 8 * 3600  # a login lasts a shift
ANONYMOUS_S = 3600  # a session without a login (its CSRF token): renewed at every page
MAX_SESSIONS = 256
MAX_STREAMS = 32
MAX_BODY = 16 * 1024
# Wrong secrets (login, approve, reject) from one address within controller.app.auth.WINDOW_S before the console
# locks that address out for a whole WINDOW_S: fewer than the daemon's USER_LIMIT (5) in its window, so that one
# address guessing cannot lock the console's own user out of the daemon for everyone. Secrets go through the
# console one at a time, so a burst from one address is counted before its next guess is sent.
SECRET_LIMIT = 3
COOKIE = "pit_session"


# --- the daemon, asked once for every page -------------------------------------------------------------


class Poller:
    """The daemon's last answers, asked every POLL_S (at once after `kick`), the plots' series every SERIES_S (on a
    connection of their own: a long read of the journal holds up no other answer); `wait` returns at the next
    change."""

    def __init__(self, client: ControlClient, interval: float = POLL_S, series_client: ControlClient | None = None,
                 series_interval: float = SERIES_S) -> None:
        self.client = client
        self.interval = interval
        self.series_client = series_client or client
        self.series_interval = series_interval
        self.series: dict[str, Any] | None = None  # span -> the meter_series answer, or {"error": why}
        self.snapshot: dict[str, Any] | None = None
        self.down: str | None = "not asked yet"
        self.version = 0
        self._changed = asyncio.Event()
        self._kick = asyncio.Event()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._series_loop(), name="series")
            while True:
                await self.poll()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._kick.wait()
                self._kick.clear()

    async def _series_loop(self) -> None:
        while True:
            answered = await self.poll_series()
            await asyncio.sleep(self.series_interval if answered else SERIES_RETRY_S)

    async def poll_series(self) -> bool:
        """Ask the daemon for the plots' series (every span); whether it answered (a refusal is an answer)."""
        try:
            series: dict[str, Any] = {span: await self.series_client.call("meter_series", span=span)
                                      for span in SPANS}
        except DaemonUnavailable:
            return False  # the status poll says so on the page
        except ControlError as e:
            series = {"error": str(e)}
        if series != self.series:
            self.series = series
            if self.snapshot is not None:
                self.snapshot = {**self.snapshot, "series": series}
            self.wake()
        return True

    async def poll(self) -> None:
        snapshot, down = self.snapshot, None
        try:
            status = await self.client.call("status")
            if page.is_authority(status):  # its status holds all it shows, beside the plots
                snapshot = {"status": status, "series": self.series}
            else:
                snapshot = {"status": status, **{op: await self.client.call(op) for op in ("round", "history")}}
                snapshot["series"] = self.series
            if isinstance(snapshot["status"], dict):  # changes at every answer: not a change to show
                snapshot["status"].pop("uptime_seconds", None)
        except DaemonUnavailable as e:
            down = e.reason
        except ControlError as e:
            down = f"it refused: {e}"
        if (snapshot, down) != (self.snapshot, self.down):
            if down != self.down:
                log.info("console daemon answering" if down is None else "console daemon not answering",
                         reason=down)
            self.snapshot, self.down = snapshot, down
            self.wake()

    def kick(self) -> None:
        self._kick.set()

    def wake(self) -> None:
        """Wake every waiting event stream: to send what changed, or to end when the console stops."""
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, version: int, timeout: float) -> int:
        """The version after `version` (at once if there is one), or `version` after `timeout` seconds."""
        if self.version == version:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()
        return self.version


# --- sessions ------------------------------------------------------------------------------------------


@dataclass
class Session:
    csrf: str
    expires: float  # time.monotonic()
    supervisor: str | None = None  # who logged in (with a login required)
    flash: str | None = None


@dataclass
class Sessions:
    """In memory only: a restart of the console logs everyone out."""

    clock: Callable[[], float] = time.monotonic
    table: dict[str, Session] = field(default_factory=dict)

    def get(self, sid: str | None) -> Session | None:
        s = self.table.get(sid) if sid else None
        if s is not None and s.expires <= self.clock():
            del self.table[sid]  # type: ignore[arg-type]
            return None
        return s

    def new(self, supervisor: str | None = None) -> tuple[str, Session]:
        now = self.clock()
        if len(self.table) >= MAX_SESSIONS:
            for sid in [k for k, v in self.table.items() if v.expires <= now]:
                del self.table[sid]
        if len(self.table) >= MAX_SESSIONS:  # the anonymous one that ends soonest makes room
            anonymous = [k for k, v in self.table.items() if v.supervisor is None] or list(self.table)
            del self.table[min(anonymous, key=lambda k: self.table[k].expires)]
        s = Session(secrets.token_urlsafe(32), now + (LOGIN_S if supervisor else ANONYMOUS_S), supervisor)
        sid = secrets.token_urlsafe(32)
        self.table[sid] = s
        return sid, s

    def end(self, sid: str | None) -> None:
        if sid:
            self.table.pop(sid, None)


# --- the application -----------------------------------------------------------------------------------


@dataclass
class Console:
    poller: Poller
    client: ControlClient
    port: int
    tls: bool
    static: dict[str, tuple[bytes, str]]
    sessions: Sessions = field(default_factory=Sessions)
    # locked for the daemon's whole window: SECRET_LIMIT a window from one address stays under its USER_LIMIT
    guesses: Guesses = field(default_factory=lambda: Guesses(SECRET_LIMIT, time.monotonic, lock_s=WINDOW_S))
    # one secret at a time through the console: a burst from one address is counted before its next is sent
    secret_turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    streams: int = 0

    @property
    def login_required(self) -> bool:
        return self.tls  # served beyond the box itself (TLS is required there): a supervisor logs in

    def origin(self, request: web.Request) -> str:
        return f"{'https' if self.tls else 'http'}://{request.host}"

    def session(self, request: web.Request) -> tuple[str | None, Session | None]:
        sid = request.cookies.get(COOKIE)
        return sid, self.sessions.get(sid)

    def set_cookie(self, response: web.StreamResponse, sid: str, session: Session) -> None:
        response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", secure=self.tls, path="/",
                            max_age=int(session.expires - self.sessions.clock()))


SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _refuse(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


def _secure(response: web.StreamResponse, tls: bool) -> None:
    for k, v in SECURITY_HEADERS.items():
        response.headers.setdefault(k, v)
    if tls:
        response.headers.setdefault("Strict-Transport-Security", "max-age=31536000")


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> web.StreamResponse:
    """What every request passes: no secret in a URL, the box's own name on loopback, a login where required,
    and the security headers on every answer."""
    console: Console = request.app["console"]
    session = console.session(request)[1]
    if page.secret_in_query(request.query.keys()):
        response: web.StreamResponse = _refuse(400, "a secret is never sent in a URL: use the page's form")
    elif not console.tls and not page.host_allowed(request.headers.get("Host"), console.port):
        response = _refuse(421, "this console answers only to its own address on this box")
    elif (console.login_required and not request.path.startswith(("/static/", "/login"))
          and (session is None or session.supervisor is None)):
        response = (_see_other("/login") if request.method == "GET" and request.path == "/"
                    else _refuse(403, "log in first"))
    else:
        try:
            response = await handler(request)
        except web.HTTPException as e:
            _secure(e, console.tls)
            raise
    _secure(response, console.tls)
    return response


async def _posted(request: web.Request) -> tuple[str, Session, dict[str, str]] | web.Response:
    """(session id, session, form) of a POST that came from the console's own page with its session's token
    (CSRF); the refusal otherwise."""
    console: Console = request.app["console"]
    sid, session = console.session(request)
    if not page.same_origin(request.headers.get("Origin"), request.headers.get("Referer"), console.origin(request)):
        return _refuse(403, "refused: the form did not come from this console's page")
    form = await request.post()
    token = form.get("csrf")
    if sid is None or session is None or not isinstance(token, str) or not hmac.compare_digest(token, session.csrf):
        return _refuse(403, "refused: the page's form is out of date (reload the page)")
    return sid, session, {k: v for k, v in form.items() if isinstance(v, str)}


def _html(request: web.Request, render: Callable[[Console, Session, str | None], str]) -> web.Response:
    """A page for the request's session (a new one if it has none), with the message of its last action, once."""
    console: Console = request.app["console"]
    sid, session = console.session(request)
    if sid is None or session is None:
        sid, session = console.sessions.new()
    elif session.supervisor is None:
        session.expires = console.sessions.clock() + ANONYMOUS_S  # renewed at every page, as ANONYMOUS_S says
    flash, session.flash = session.flash, None
    response = web.Response(text=render(console, session, flash), content_type="text/html")
    console.set_cookie(response, sid, session)
    return response


def _console_page(console: Console, session: Session, flash: str | None) -> str:
    parts = page.sections(console.poller.snapshot, console.poller.down, session.csrf, session.supervisor)
    return page.page(parts, csrf=session.csrf, flash=flash, supervisor=session.supervisor,
                     logout=console.login_required)


async def index(request: web.Request) -> web.Response:
    return _html(request, _console_page)


async def events(request: web.Request) -> web.StreamResponse:
    """The page's event stream: every section at once, then the sections that changed, within POLL_S of the
    daemon's change."""
    console: Console = request.app["console"]
    _sid, session = console.session(request)
    if session is None:
        return _refuse(403, "no session: reload the page")
    if console.streams >= MAX_STREAMS:
        return _refuse(503, f"at most {MAX_STREAMS} pages open at once")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
    console.streams += 1
    try:
        await response.prepare(request)
        await _write(response, b"retry: 1000\n\n")
        sent: dict[str, str] = {}
        version = -1
        while not console.closing.is_set() and console.sessions.get(request.cookies.get(COOKIE)) is session:
            if version != console.poller.version:
                version = console.poller.version
                parts = page.sections(console.poller.snapshot, console.poller.down, session.csrf, session.supervisor)
                changed = {k: v for k, v in parts.items() if sent.get(k) != v}
                sent.update(changed)
                if changed:
                    await _write(response, f"event: update\ndata: {json.dumps(changed)}\n\n".encode())
            elif await console.poller.wait(version, KEEPALIVE_S) == version and not console.closing.is_set():
                await _write(response, b": still here\n\n")
        if not console.closing.is_set():
            await _write(response, b"event: ended\ndata: {}\n\n")
    except (ConnectionError, TimeoutError):
        pass  # the page went away
    finally:
        console.streams -= 1
    return response


async def _write(response: web.StreamResponse, data: bytes) -> None:
    async with asyncio.timeout(WRITE_TIMEOUT_S):
        await response.write(data)


async def _forward(request: web.Request, op: str, args: dict[str, str]) -> Any:
    """`op` with a supervisor's name and secret, sent once to the daemon (which checks them); wrong secrets
    counted per address, and an address locked out is refused here without asking the daemon. ControlError or
    DaemonUnavailable when not done."""
    console: Console = request.app["console"]
    remote = ("address", request.remote)
    async with console.secret_turn:
        return await _forward_in_turn(console, request, remote, op, args)


async def _forward_in_turn(console: Console, request: web.Request, remote: tuple[str, str | None], op: str,
                           args: dict[str, str]) -> Any:
    left = console.guesses.locked_for(remote)
    if left:
        raise ControlError("auth", f"too many wrong secrets from this address: try again in {left:.0f} s")
    try:
        result = await console.client.call(op, **args)
    except ControlError as e:
        # the daemon's own lock-out is not this address's guess (a supervisor trying meanwhile is not counted)
        guess = e.kind == "auth" and "too many wrong secrets" not in str(e)
        if guess and console.guesses.wrong(remote):
            log.error("console secret guesses: address locked out", remote=request.remote, limit=SECRET_LIMIT,
                      seconds=WINDOW_S)
        log.warning("console action refused", op=op, claim=args.get("claim_id"), supervisor=args.get("supervisor"),
                    remote=request.remote, kind=e.kind, error=str(e))
        raise
    except DaemonUnavailable as e:
        log.warning("console action not done", op=op, claim=args.get("claim_id"), reason=e.reason)
        raise
    console.guesses.right(remote)
    log.info("console action done", op=op, claim=args.get("claim_id"), supervisor=args.get("supervisor"),
             remote=request.remote)
    return result


async def _act(request: web.Request, op: str, fields: tuple[str, ...]) -> web.StreamResponse:
    """Approve or reject: the form's claim, supervisor and secret forwarded once to the daemon, which decides."""
    console: Console = request.app["console"]
    got = await _posted(request)
    if isinstance(got, web.Response):
        return got
    _sid, session, form = got
    claim = form.get("claim_id", "")
    try:
        result = await _forward(request, op, {k: form.get(k, "") for k in fields})
    except ControlError as e:
        session.flash = f"{op} of {claim} refused: {e}"
    except DaemonUnavailable as e:
        session.flash = f"{op} of {claim} not done: the daemon is not answering ({e.reason})"
    else:
        message = result.get("message") if isinstance(result, dict) else None
        session.flash = message if isinstance(message, str) else f"{claim}: {op} done"
    console.poller.kick()
    return _see_other("/")


async def approve(request: web.Request) -> web.StreamResponse:
    return await _act(request, "approve", ("claim_id", "supervisor", "secret"))


async def reject(request: web.Request) -> web.StreamResponse:
    return await _act(request, "reject", ("claim_id", "supervisor", "secret", "reason"))


async def login_form(request: web.Request) -> web.Response:
    return _html(request, lambda _console, session, flash: page.login_page(csrf=session.csrf, message=flash))


async def login(request: web.Request) -> web.StreamResponse:
    """A supervisor's name and secret, checked by the daemon (`authenticate`); then a new session (its id and
    token made afresh: one planted before the login is worth nothing)."""
    console: Console = request.app["console"]
    got = await _posted(request)
    if isinstance(got, web.Response):
        return got
    sid, session, form = got
    try:
        result = await _forward(request, "authenticate", {"supervisor": form.get("supervisor", ""),
                                                          "secret": form.get("secret", "")})
    except (ControlError, DaemonUnavailable) as e:
        session.flash = f"not logged in: {e}"
        return _see_other("/login")
    console.sessions.end(sid)
    new_sid, new = console.sessions.new(supervisor=str(result.get("supervisor")))
    log.info("console login", remote=request.remote, supervisor=new.supervisor)
    response = _see_other("/")
    console.set_cookie(response, new_sid, new)
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    console: Console = request.app["console"]
    got = await _posted(request)
    if isinstance(got, web.Response):
        return got
    console.sessions.end(got[0])
    response = _see_other("/login")
    response.del_cookie(COOKIE, path="/")
    return response


async def static(request: web.Request) -> web.Response:
    console: Console = request.app["console"]
    found = console.static.get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()
    body, kind = found
    return web.Response(body=body, content_type=kind, headers={"Cache-Control": "no-cache"})


class AccessLog(AbstractAccessLogger):
    """Method, path (never the query string), status and time: no body, no cookie, no header."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        log.info("console request", method=request.method, path=request.path, status=response.status,
                 remote=request.remote, ms=round(time * 1000, 1))


def application(console: Console) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app["console"] = console
    app.router.add_get("/", index)
    app.router.add_get("/events", events)
    app.router.add_post("/approve", approve)
    app.router.add_post("/reject", reject)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/static/{name}", static)
    return app


def static_files() -> dict[str, tuple[bytes, str]]:
    here = importlib.resources.files(__package__)
    return {name: (here.joinpath(name).read_bytes(), kind)
            for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css"))}


# --- the process ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    socket: str
    host: str
    port: int
    tls: ssl.SSLContext | None
    log_format: str
    log_level: str


def options(argv: list[str] | None) -> Options:
    """The command line, checked: SystemExit(2) after one line naming the argument at fault."""
    p = argparse.ArgumentParser(prog="progressive-console", description="The pit's web console (docs/console.md).")
    p.add_argument("--socket", help="the daemon's control socket (default: $PROGRESSIVE_SOCKET, else "
                                    "/run/progressive/control.sock)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT to serve on (default {DEFAULT_LISTEN}); "
                                                            "a host beyond loopback needs --tls-cert and --tls-key")
    p.add_argument("--tls-cert", help="the server's certificate chain (PEM): serves HTTPS, with a supervisor's login")
    p.add_argument("--tls-key", help="the certificate's private key (PEM)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    a = p.parse_args(argv)

    def bad(line: str) -> SystemExit:
        print(f"progressive-console: {line}", file=sys.stderr)
        return SystemExit(EXIT_BAD_INPUT)

    try:
        host, port = page.parse_listen(a.listen)
    except ValueError as e:
        raise bad(f"--listen: {e}") from None
    if bool(a.tls_cert) != bool(a.tls_key):
        raise bad("--tls-cert and --tls-key go together")
    if not page.is_loopback(host) and not a.tls_cert:
        raise bad(f"--listen {a.listen}: not a loopback address: on the network the console needs --tls-cert and "
                  "--tls-key (and then asks for a supervisor's login)")
    context = None
    if a.tls_cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(a.tls_cert, a.tls_key)
        except (OSError, ssl.SSLError) as e:
            raise bad(f"--tls-cert {a.tls_cert} / --tls-key {a.tls_key}: cannot be loaded: "
                      f"{getattr(e, 'strerror', None) or e}") from None
    return Options(socket_path(a.socket), host, port, context, a.log_format, a.log_level)


async def serve(opts: Options) -> int:
    client = ControlClient(opts.socket, timeout=ASK_TIMEOUT_S)
    actions = ControlClient(opts.socket, timeout=ACTION_TIMEOUT_S)
    poller = Poller(client, series_client=ControlClient(opts.socket, timeout=SERIES_TIMEOUT_S))
    static = await asyncio.to_thread(static_files)
    console = Console(poller, actions, opts.port, opts.tls is not None, static)
    runner = web.AppRunner(application(console), access_log_class=AccessLog, handle_signals=False,
                           shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, opts.host, opts.port, ssl_context=opts.tls)
        try:
            await site.start()
        except OSError as e:
            print(f"progressive-console: --listen {opts.host}:{opts.port}: {e.strerror or e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        log.info("console serving", url=f"{'https' if opts.tls else 'http'}://{opts.host}:{opts.port}/",
                 socket=opts.socket, login=console.login_required)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with asyncio.TaskGroup() as tg:
            polling = tg.create_task(poller.run(), name="poller")
            await stop.wait()
            console.closing.set()
            poller.wake()
            polling.cancel()
        log.info("console stopped")
        return 0
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    from ..app import logs

    opts = options(argv)
    logs.configure(opts.log_format, opts.log_level)  # type: ignore[arg-type]
    return asyncio.run(serve(opts))


__all__ = ["Console", "Poller", "Session", "Sessions", "application", "main", "options", "serve"]

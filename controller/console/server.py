"""`progressive-console`: the pit's web console, a process of its own that talks to the table daemon over its
control socket (the daemon gains no network listener). docs/console.md says how to run it and what it shows;
docs/security.md its threat model.

One poller asks the daemon (`status`, `round`, `history`) every POLL_S, and `meter_series` (the plots) every
SERIES_S, and wakes the open pages' event streams (SSE) when something changed: the daemon is asked the same
however many pages are open. Approve, reject and the
login forward the supervisor's name and secret once to the daemon, which checks them (off its loop, throttled);
the console checks no credential itself and keeps none, and keeps nothing for a visitor who has not logged in
(the forms' tokens are signed, `Signer`). Its access log names method, path and status, never a
query string or a body.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import importlib.resources
import json
import re
import secrets
import signal
import socket
import ssl
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from controller.console import gate
from controller.console.view import floor, page
from controller.exits import EXIT_BAD_INPUT
from controller.service import sdlisten
from controller.service.auth import WINDOW_S, Guesses
from controller.service.control import ControlClient, ControlError, DaemonUnavailable, socket_path
from controller.service.logs import Format, KeyedBudget, LogBudget

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
GONE_S = 1.0  # an event stream sees this soon that its page went away, and frees its place under the caps
WRITE_TIMEOUT_S = 10.0
LOGIN_S = 8 * 3600  # a login lasts a shift
CSRF_S = 3600  # a form's token lasts this long (an open page's event stream ends before, and the page reloads)
MAX_SESSIONS = 256  # logins (each made only after the daemon accepted a secret)
MAX_STREAMS = 32
MAX_STREAMS_PER_ADDRESS = 8
MAX_BODY = 16 * 1024
BODY_S = 5.0  # a form's body arrives within this after its head
FLASH_S = 60  # an action's answer waits this long for the next page
MAX_FLASH = 1000  # characters of it
# Wrong secrets (login, approve, reject) from one address within controller.service.auth.WINDOW_S before the console
# locks that address out for a whole WINDOW_S: fewer than the daemon's USER_LIMIT (5) in its window, so that one
# address guessing cannot lock the console's own user out of the daemon for everyone. Secrets go through the
# console one at a time, so a burst from one address is counted before its next guess is sent.
SECRET_LIMIT = 3
COOKIE = "pit_session"
FLASH_COOKIE = "pit_flash"
COOKIE_VALUE = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


# --- the daemon, asked once for every page -------------------------------------------------------------


class Poller:
    """The daemon's last answers, asked every POLL_S (at once after `kick`), the plots' series every SERIES_S (on a
    connection of their own: a long read of the journal holds up no other answer); `wait` returns at the next
    change."""

    def __init__(self, client: ControlClient, interval: float = POLL_S, series_client: ControlClient | None = None,
                 series_interval: float = SERIES_S) -> None:
        self.client = client
        self.interval = interval
        self.unshown = LogBudget(1, 10.0)  # answers a section could not show: once per kind of error and 10 s
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
            if floor.is_authority(status):  # its status holds all it shows, beside the plots
                snapshot = {"status": status, "series": self.series}
            else:
                snapshot = {"status": status, "round": await self.client.call("round"),
                            "history": await self.client.call("history", kinds=True)}
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
    supervisor: str  # who logged in
    expires: float  # time.monotonic()


@dataclass
class Sessions:
    """Supervisors' logins, in memory only: a restart of the console logs everyone out. A visitor who has not
    logged in has no entry here (their forms' tokens are signed, `Signer`): only a login, which the daemon
    accepted, makes one."""

    clock: Callable[[], float] = time.monotonic
    table: dict[str, Session] = field(default_factory=dict)

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        s = self.table.get(sid)
        if s is not None and s.expires <= self.clock():
            del self.table[sid]
            return None
        return s

    def new(self, supervisor: str) -> tuple[str, Session]:
        now = self.clock()
        for sid in [k for k, v in self.table.items() if v.expires <= now]:
            del self.table[sid]
        if len(self.table) >= MAX_SESSIONS:  # the login that ends soonest makes room
            del self.table[min(self.table, key=lambda k: self.table[k].expires)]
        s = Session(supervisor, now + LOGIN_S)
        sid = secrets.token_urlsafe(32)
        self.table[sid] = s
        return sid, s

    def end(self, sid: str | None) -> None:
        if sid:
            self.table.pop(sid, None)


class Signer:
    """The forms' CSRF tokens and an action's one-time answer, signed instead of stored: nothing is kept per
    visitor, so a flood of visitors pushes no one's token out. Each is bound to the browser's session cookie (a
    visitor's random value, or a login's id): one fetched with another cookie is worth nothing. The key is made
    at start: a restart makes every open form out of date."""

    def __init__(self, key: bytes | None = None, clock: Callable[[], float] = time.monotonic,
                 lifetime: float = CSRF_S) -> None:
        self._key = key or secrets.token_bytes(32)
        self.clock, self.lifetime = clock, lifetime

    def _mac(self, *fields: str) -> str:
        return hmac.new(self._key, "\n".join(fields).encode(), hashlib.sha256).hexdigest()

    def token(self, binding: str) -> str:
        """`issued.nonce.mac`: issued (whole seconds of the clock) and a random nonce, under the key."""
        issued, nonce = str(int(self.clock())), secrets.token_urlsafe(12)
        return f"{issued}.{nonce}.{self._mac('csrf', binding, issued, nonce)}"

    def valid(self, binding: str, token: str) -> bool:
        parts = token.split(".") if len(token) <= 128 else []
        if len(parts) != 3 or not (parts[0].isascii() and parts[0].isdigit()):  # "²" is a digit to isdigit()
            return False
        age = self.clock() - int(parts[0])
        return 0 <= age <= self.lifetime and _same(parts[2], self._mac("csrf", binding, *parts[:2]))

    def flash(self, binding: str, text: str) -> str:
        data = base64.urlsafe_b64encode(text[:MAX_FLASH].encode()).decode().rstrip("=")
        return f"{data}.{self._mac('flash', binding, data)}"

    def read_flash(self, binding: str, value: str | None) -> str | None:
        data, _, mac = (value or "").partition(".")
        if not data or not _same(mac, self._mac("flash", binding, data)):
            return None
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode(errors="replace")


def _same(given: str, mac: str) -> bool:
    """compare_digest on bytes: on a str it raises TypeError if the text typed is not ASCII."""
    return hmac.compare_digest(given.encode(errors="replace"), mac.encode())


# --- the application -----------------------------------------------------------------------------------


@dataclass
class Console:
    poller: Poller
    client: ControlClient
    port: int
    tls: bool
    static: dict[str, tuple[bytes, str]]
    login_always: bool = False  # a supervisor logs in on loopback too (a box with several local accounts)
    sessions: Sessions = field(default_factory=Sessions)
    signer: Signer = field(default_factory=Signer)
    # locked for the daemon's whole window: SECRET_LIMIT a window from one address stays under its USER_LIMIT
    guesses: Guesses = field(default_factory=lambda: Guesses(SECRET_LIMIT, time.monotonic, lock_s=WINDOW_S))
    # one secret at a time through the console: a burst from one address is counted before its next is sent
    secret_turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    streams: int = 0
    streams_from: Counter[str] = field(default_factory=Counter)  # open event streams per client address

    @property
    def login_required(self) -> bool:
        return self.tls or self.login_always  # beyond the box itself (TLS is required there) a supervisor logs in

    def origin(self, request: web.Request) -> str:
        return f"{'https' if self.tls else 'http'}://{request.host}"

    def session(self, request: web.Request) -> tuple[str | None, Session | None]:
        """The browser's session cookie (what its tokens are bound to), and its login if it is one."""
        sid = request.cookies.get(COOKIE)
        if sid is None or not COOKIE_VALUE.fullmatch(sid):
            return None, None
        return sid, self.sessions.get(sid)

    def set_cookie(self, response: web.StreamResponse, sid: str, session: Session | None) -> None:
        """A login's cookie lasts as long as it does; a visitor's until the browser closes."""
        max_age = None if session is None else int(session.expires - self.sessions.clock())
        response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", secure=self.tls, path="/",
                            max_age=max_age)

    def set_flash(self, response: web.StreamResponse, sid: str, text: str) -> None:
        """An action's answer, for the next page of this browser only (signed: another port of this host, which
        shares its cookies, cannot plant one)."""
        response.set_cookie(FLASH_COOKIE, self.signer.flash(sid, text), httponly=True, samesite="Strict",
                            secure=self.tls, path="/", max_age=FLASH_S)


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
          and session is None):
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


async def _posted(request: web.Request) -> tuple[str, Session | None, dict[str, str]] | web.Response:
    """(session cookie, its login if any, form) of a POST that came from the console's own page with a token
    bound to that cookie (CSRF); the refusal otherwise."""
    console: Console = request.app["console"]
    sid, session = console.session(request)
    if not page.same_origin(request.headers.get("Origin"), request.headers.get("Referer"), console.origin(request)):
        return _refuse(403, "refused: the form did not come from this console's page")
    try:
        async with asyncio.timeout(BODY_S):
            form = await request.post()
    except TimeoutError:
        return _refuse(408, f"refused: the form's body did not arrive within {BODY_S:.0f} s")
    except (ValueError, LookupError):  # no multipart boundary, an unknown charset ...
        return _refuse(400, "refused: the form's body could not be read (send it from the console's page)")
    token = form.get("csrf")
    if sid is None or not isinstance(token, str) or not console.signer.valid(sid, token):
        return _refuse(403, "refused: the page's form is out of date (reload the page)")
    return sid, session, {k: v for k, v in form.items() if isinstance(v, str)}


Render = Callable[[Console, str | None, str, str | None], str]  # (console, supervisor, csrf token, flash) -> HTML


def _html(request: web.Request, render: Render) -> web.Response:
    """A page with a fresh token bound to the browser's session cookie (a new random one if it has none), and
    the answer of its last action, once."""
    console: Console = request.app["console"]
    sid, session = console.session(request)
    if sid is None:
        sid = secrets.token_urlsafe(32)
    flash = console.signer.read_flash(sid, request.cookies.get(FLASH_COOKIE))
    supervisor = session.supervisor if session else None
    response = web.Response(text=render(console, supervisor, console.signer.token(sid), flash),
                            content_type="text/html")
    console.set_cookie(response, sid, session)
    if FLASH_COOKIE in request.cookies:
        response.del_cookie(FLASH_COOKIE, path="/")
    return response


def _parts(poller: Poller, csrf: str, supervisor: str | None) -> tuple[dict[str, str], bool]:
    """The page's sections, and whether they are the floor's (a link authority answers)."""
    snapshot = poller.snapshot
    if snapshot is not None and floor.is_authority(snapshot["status"]):
        errors: list[str] = []
        parts = floor.sections(snapshot, poller.down, datetime.now(UTC), errors)
        _log_unshown(poller, errors)
        return parts, True
    errors = []
    parts = page.sections(snapshot, poller.down, csrf, supervisor, errors)
    _log_unshown(poller, errors)
    return parts, False


def _log_unshown(poller: Poller, errors: list[str]) -> None:
    """An answer of the daemon a section could not show: logged once per kind of error and 10 s, not per page."""
    for error in errors:
        skipped = poller.unshown.take(error.partition(":")[0])
        if skipped is not None:
            log.error("the daemon's answer cannot be shown", error=error, not_logged_before=skipped)


def _console_page(console: Console, supervisor: str | None, csrf: str, flash: str | None) -> str:
    parts, is_floor = _parts(console.poller, csrf, supervisor)
    if is_floor:
        authority, zone = floor.identity(console.poller.snapshot)
        return floor.page(parts, csrf=csrf, flash=flash, supervisor=supervisor, logout=console.login_required,
                          authority=authority, zone=zone)
    table, zone = page.identity(console.poller.snapshot)
    return page.page(parts, csrf=csrf, flash=flash, supervisor=supervisor, logout=console.login_required,
                     table=table, zone=zone)


async def index(request: web.Request) -> web.Response:
    return _html(request, _console_page)


async def events(request: web.Request) -> web.StreamResponse:
    """The page's event stream: every section at once, then the sections that changed, within POLL_S of the
    daemon's change."""
    console: Console = request.app["console"]
    sid, session = console.session(request)
    if sid is None:
        return _refuse(403, "no session: reload the page")
    address = request.remote or "?"
    if console.streams >= MAX_STREAMS:
        return _refuse(503, f"at most {MAX_STREAMS} pages open at once: try again shortly")
    if console.streams_from[address] >= MAX_STREAMS_PER_ADDRESS:
        return _refuse(429, f"at most {MAX_STREAMS_PER_ADDRESS} pages open from one address: close some")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **SECURITY_HEADERS})
    csrf = console.signer.token(sid)
    ends = console.signer.clock() + console.signer.lifetime - KEEPALIVE_S  # before its forms' token is out of date
    supervisor = session.supervisor if session else None
    console.streams += 1
    console.streams_from[address] += 1
    try:
        await response.prepare(request)
        await _write(response, b"retry: 1000\n\n")
        sent: dict[str, str] = {}
        version, written = -1, time.monotonic()
        while (not console.closing.is_set() and console.signer.clock() < ends
               and (session is None or console.sessions.get(sid) is session)
               and request.transport is not None and not request.transport.is_closing()):
            if version != console.poller.version:
                version = console.poller.version
                parts = _parts(console.poller, csrf, supervisor)[0]
                changed = {k: v for k, v in parts.items() if sent.get(k) != v}
                sent.update(changed)
                if changed:
                    await _write(response, f"event: update\ndata: {json.dumps(changed)}\n\n".encode())
                    written = time.monotonic()
            elif (await console.poller.wait(version, GONE_S) == version and not console.closing.is_set()
                  and time.monotonic() - written >= KEEPALIVE_S):
                await _write(response, b": still here\n\n")
                written = time.monotonic()
        if not console.closing.is_set():
            await _write(response, b"event: ended\ndata: {}\n\n")  # the page reloads: a fresh token, or the login
    except (ConnectionError, TimeoutError):
        pass  # the page went away
    finally:
        console.streams -= 1
        console.streams_from[address] -= 1
        if console.streams_from[address] <= 0:
            del console.streams_from[address]
    return response


async def _write(response: web.StreamResponse, data: bytes) -> None:
    async with asyncio.timeout(WRITE_TIMEOUT_S):
        await response.write(data)


async def _forward(request: web.Request, op: str, args: dict[str, str]) -> Any:
    """`op` with a supervisor's name and secret, sent once to the daemon (which checks them); wrong secrets
    counted per address, and an address locked out is refused here without asking the daemon. ControlError or
    DaemonUnavailable when not done."""
    console: Console = request.app["console"]
    remote = ("address", page.client_address(request.remote))
    async with console.secret_turn:
        return await _forward_in_turn(console, request, remote, op, args)


def _typed(name: str | None) -> str | None:
    """A refused supervisor name as a fingerprint: what was typed may be a secret in the wrong field."""
    if name is None:
        return None
    return f"sha256:{hashlib.sha256(name.encode(errors='replace')).hexdigest()[:8]}/{len(name)}"


async def _forward_in_turn(console: Console, request: web.Request, remote: tuple[str, str | None], op: str,
                           args: dict[str, str]) -> Any:
    left = console.guesses.locked_for(remote)
    if left:
        raise ControlError("auth", f"too many wrong secrets from this address: try again in {left:.0f} s")
    console.guesses.take(remote)  # counted before it is sent; given back unless it was a wrong secret
    guess = False
    try:
        result = await console.client.call(op, **args)
    except ControlError as e:
        # the daemon's own lock-out is not this address's guess (a supervisor trying meanwhile is not counted)
        guess = e.kind == "auth" and "too many wrong secrets" not in str(e)
        log.warning("console action refused", op=op, claim=args.get("claim_id"),
                    supervisor=_typed(args.get("supervisor")),
                    remote=request.remote, kind=e.kind, error=str(e))
        raise
    except DaemonUnavailable as e:
        log.warning("console action not done", op=op, claim=args.get("claim_id"), reason=e.reason)
        raise
    finally:
        if not guess:
            console.guesses.give_back(remote)
        elif console.guesses.wrong(remote):
            log.error("console secret guesses: address locked out", remote=request.remote, limit=SECRET_LIMIT,
                      seconds=WINDOW_S)
    log.info("console action done", op=op, claim=args.get("claim_id"), supervisor=args.get("supervisor"),
             remote=request.remote)
    return result


FIELD_WORDS = {"supervisor": "the supervisor's name", "secret": "the secret", "reason": "the reason"}


def refusal(e: ControlError) -> str:
    """The daemon's refusal in the page's words: the field it names as the form labels it; none for the claim or
    round the page itself sent ("round_id: CS-07-r5-c1 awaits a supervisor's approval" named a field nobody typed)."""
    if e.field in ("claim_id", "round_id"):
        return e.message
    return f"{FIELD_WORDS[e.field]}: {e.message}" if e.field in FIELD_WORDS else str(e)


async def _act(request: web.Request, op: str, fields: tuple[str, ...]) -> web.StreamResponse:
    """Approve or reject: the form's claim, supervisor and secret forwarded once to the daemon, which decides."""
    console: Console = request.app["console"]
    got = await _posted(request)
    if isinstance(got, web.Response):
        return got
    sid, _session, form = got
    claim = form.get("claim_id") or form.get("round_id") or ""
    try:
        if op == "void" and form.get("round_id") != _current_round(console):
            # the daemon voids its current round: a form of a round since settled must not void the next one
            raise ControlError("rules", f"round {form.get('round_id')} is no longer the current round "
                                        f"({_current_round(console)}): nothing voided")
        result = await _forward(request, op, {k: form.get(k, "") for k in fields})
    except ControlError as e:
        flash = f"{op} of {claim} refused: {refusal(e)}"
    except DaemonUnavailable as e:
        flash = f"{op} of {claim} not done: the daemon is not answering ({e.reason})"
    else:
        message = result.get("message") if isinstance(result, dict) else None
        flash = message if isinstance(message, str) else f"{claim}: {op} done"
    console.poller.kick()
    response = _see_other("/")
    console.set_flash(response, sid, flash)
    return response


def _current_round(console: Console) -> str | None:
    status = (console.poller.snapshot or {}).get("status") or {}
    found = status.get("round") if isinstance(status, dict) else None
    return found.get("id") if isinstance(found, dict) else None


async def approve(request: web.Request) -> web.StreamResponse:
    return await _act(request, "approve", ("claim_id", "supervisor", "secret"))


async def reject(request: web.Request) -> web.StreamResponse:
    return await _act(request, "reject", ("claim_id", "supervisor", "secret", "reason"))


async def settle(request: web.Request) -> web.StreamResponse:
    """The round settled by a supervisor (`progressivectl settle` with a credential): the daemon says whether it
    may be (a claim still open, a detected hit not claimed, a void asked for are its refusals)."""
    return await _act(request, "settle", ("round_id", "supervisor", "secret"))


async def void(request: web.Request) -> web.StreamResponse:
    """The round voided by a supervisor (`progressivectl void`): the daemon voids the form's round only if it is
    still its current one once the secret is checked (the console's view may be a poll behind)."""
    return await _act(request, "void", ("round_id", "reason", "supervisor", "secret"))


async def login_form(request: web.Request) -> web.Response:
    return _html(request, lambda console, _supervisor, csrf, flash: page.login_page(
        csrf=csrf, message=flash, table=page.identity(console.poller.snapshot)[0]))


async def login(request: web.Request) -> web.StreamResponse:
    """A supervisor's name and secret, checked by the daemon (`authenticate`); then a new session (its id and
    token made afresh: one planted before the login is worth nothing)."""
    console: Console = request.app["console"]
    got = await _posted(request)
    if isinstance(got, web.Response):
        return got
    sid, _session, form = got
    try:
        result = await _forward(request, "authenticate", {"supervisor": form.get("supervisor", ""),
                                                          "secret": form.get("secret", "")})
    except (ControlError, DaemonUnavailable) as e:
        refused = _see_other("/login")
        console.set_flash(refused, sid, f"not logged in: {e}")
        return refused
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


ACCESS_LINES = (60, 10.0)  # a client address's access lines at most (a page, its files and its stream: a few)
ACCESS_LINES_ALL = 600  # and all addresses' together in that time: a flood of requests does not flood the log
PATH_CHARS = 200


class AccessLog(AbstractAccessLogger):
    """Method, path (never the query string; cut to PATH_CHARS), status and time: no body, no cookie, no header.
    Budgeted per address and in all; a line says how many of its address's were not logged before it. (aiohttp
    makes one of these per connection: the budgets are the class's.)"""

    budget = KeyedBudget(*ACCESS_LINES, overall=ACCESS_LINES_ALL)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        remote = request.remote or "?"
        held = AccessLog.budget.take(remote)
        if held is None:
            return
        path = request.path if len(request.path) <= PATH_CHARS else request.path[:PATH_CHARS] + "..."
        log.info("console request", method=request.method, path=path, status=response.status, remote=remote,
                 ms=round(time * 1000, 1), **({"not_logged_before": held} if held else {}))


def application(console: Console) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app["console"] = console
    app.router.add_get("/", index)
    app.router.add_get("/events", events)
    app.router.add_post("/approve", approve)
    app.router.add_post("/reject", reject)
    app.router.add_post("/settle", settle)
    app.router.add_post("/void", void)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/static/{name}", static)
    return app


def static_files() -> dict[str, tuple[bytes, str]]:
    here = importlib.resources.files(__package__)
    return {name: (here.joinpath(name).read_bytes(), kind)
            for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css"),
                               ("floor.css", "text/css"), ("plots.css", "text/css"))}


# --- the process ---------------------------------------------------------------------------------------


Listener = socket.socket  # (Options.socket is the control socket's path)


@dataclass(frozen=True)
class Options:
    socket: str
    host: str
    port: int
    tls: ssl.SSLContext | None
    log_format: Format
    log_level: str
    login_always: bool = False
    sock: Listener | None = None  # inherited from systemd (socket activation): host and port are its own


def options(argv: list[str] | None) -> Options:
    """The command line, checked: SystemExit(2) after one line naming the argument at fault."""
    p = argparse.ArgumentParser(prog="progressive-console", description="The pit's web console (docs/console.md).")
    p.add_argument("--socket", help="the daemon's control socket (default: $PROGRESSIVE_SOCKET, else "
                                    "/run/progressive/control.sock)")
    p.add_argument("--listen", help=f"HOST:PORT to serve on (default {DEFAULT_LISTEN}, or the socket systemd "
                                    "passed); a host beyond loopback needs --tls-cert and --tls-key")
    p.add_argument("--login", choices=("auto", "always"), default="auto",
                   help="auto: a supervisor logs in when the console is served with TLS; always: on loopback too")
    p.add_argument("--tls-cert", help="the server's certificate chain (PEM): serves HTTPS, with a supervisor's login")
    p.add_argument("--tls-key", help="the certificate's private key (PEM)")
    p.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                   help="auto: JSON lines unless standard error is a terminal; json; console: lines for people")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                   help="the least severe lines written (default info)")
    a = p.parse_args(argv)

    def bad(line: str) -> SystemExit:
        print(f"progressive-console: {line}", file=sys.stderr)
        return SystemExit(EXIT_BAD_INPUT)

    try:
        host, port = page.parse_listen(a.listen or DEFAULT_LISTEN)
    except ValueError as e:
        raise bad(f"--listen: {e}") from None
    sock = _inherited(bad)
    if sock is not None:
        got_host, got_port = sock.getsockname()[:2]
        if a.listen is not None and (host, port) != (got_host, got_port):
            sock.close()
            raise bad(f"--listen {a.listen}: the socket systemd passed listens on {got_host}:{got_port} (its "
                      "ListenStream=): say the address there only")
        host, port = got_host, got_port
    where = a.listen or f"{host}:{port}"
    if bool(a.tls_cert) != bool(a.tls_key):
        raise bad("--tls-cert and --tls-key go together")
    if not page.is_loopback(host) and not a.tls_cert:
        raise bad(f"--listen {where}: not a loopback address: on the network the console needs --tls-cert and "
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
    return Options(socket_path(a.socket), host, port, context, a.log_format, a.log_level,
                   login_always=a.login == "always", sock=sock)


def _inherited(bad: Callable[[str], SystemExit]) -> socket.socket | None:
    """The one listening TCP socket systemd passed (progressive-console.socket), or None when started without."""
    try:
        fds = sdlisten.listen_fds()
        if len(fds) > 1:
            raise ValueError(f"LISTEN_FDS={len(fds)}: the console serves one socket (one ListenStream=)")
        return sdlisten.tcp_listener(fds[0]) if fds else None
    except ValueError as e:
        raise bad(f"the socket systemd passed: {e}") from None


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port): OSError when the address is taken or not this box's."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family)


async def serve(opts: Options) -> int:
    client = ControlClient(opts.socket, timeout=ASK_TIMEOUT_S)
    actions = ControlClient(opts.socket, timeout=ACTION_TIMEOUT_S)
    poller = Poller(client, series_client=ControlClient(opts.socket, timeout=SERIES_TIMEOUT_S))
    static = await asyncio.to_thread(static_files)
    console = Console(poller, actions, opts.port, opts.tls is not None, static, login_always=opts.login_always)
    runner = web.AppRunner(application(console), access_log_class=AccessLog, handle_signals=False,
                           shutdown_timeout=2.0, logger=gate.ServerLog(), **gate.HANDLER_ARGS)
    await runner.setup()
    try:
        sock = opts.sock
        if sock is None:
            try:
                sock = await asyncio.to_thread(_bind, opts.host, opts.port)
            except OSError as e:
                print(f"progressive-console: --listen {opts.host}:{opts.port}: {e.strerror or e}", file=sys.stderr)
                return EXIT_BAD_INPUT
        site = gate.GatedSite(runner, sock, ssl_context=opts.tls)
        await site.start()
        log.info("console serving", url=site.name, socket=opts.socket, login=console.login_required,
                 inherited=opts.sock is not None)
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
    from controller.service import logs

    opts = options(argv)
    logs.configure(opts.log_format, opts.log_level)
    return asyncio.run(serve(opts))


__all__ = ["Console", "Poller", "Session", "Sessions", "Signer", "application", "main", "options", "serve"]

"""Supervisors' secrets checked as an attacker in the socket group would wish they were not: off the event loop,
one at a time, at the same cost for a name that is not a supervisor's, and with wrong guesses throttled.

- A check runs in a thread of its own (scrypt or PBKDF2 takes a good part of a second), at the lowest CPU
  priority (nice 19): the event loop, the devices' polls and the watchdog go first. Checks queue one behind the
  other, at most QUEUE waiting; more are answered at once as busy, with nothing hashed. Checks of one name run
  one after the other.
- An unknown name is checked against a made-up credential of the same kind and cost as the supervisors', so
  its answer takes as long as a known name's: names cannot be probed by the time an answer takes.
- A name is taken in its NFKC form (controller.config.names), as the supervisors' names were read.
- Guesses are counted per user (the peer's uid on the control socket) and per supervisor name, each BEFORE it is
  hashed (a place taken in the window, given back when the secret is right): at most USER_LIMIT of one user and
  NAME_LIMIT at one name (from any users) are hashed within WINDOW_S, however many are sent at once. Reaching
  the limit locks that user, or that name, out for LOCK_S, and the guesses stay in the window after it: a check
  is refused at once, with nothing hashed, until the lock-out has ended and the oldest guess is WINDOW_S old.
  Each lock-out is an alert: an error in the log (`supervisor secret guesses: locked out`) and
  `progressive_auth_lockouts_total{scope}`; every wrong guess counts in `progressive_auth_failures_total`.
  A right secret clears no count: wrong guesses fall out of the window only with time. A name locked out by
  someone guessing it is a denial of service to that supervisor (docs/security.md): the alert says who guessed.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import os
import queue
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import structlog
from prometheus_client import CollectorRegistry, Counter

from controller.config.credentials import Credential, hash_credential, parse_credential, verify_credential
from controller.config.model import Supervisor
from controller.config.names import normal
from controller.linkproto.approval import approval_key
from controller.service.control import NotAvailable

log = structlog.get_logger("control")
T = TypeVar("T")

QUEUE = 8  # checks waiting for the hashing thread at most
USER_LIMIT = 5  # wrong guesses of one user within WINDOW_S before it is locked out
NAME_LIMIT = 10  # wrong guesses for one supervisor name within WINDOW_S before it is locked out
WINDOW_S = 600.0
LOCK_S = 300.0
MAX_SECRET = 1024  # characters: no secret is longer, and hashing a longer one would cost more


class AuthMetrics:
    """The checks' counters, in a daemon's registry (a table's, a link authority's)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter("progressive_auth_failures_total",
                                "Supervisor secrets not accepted (wrong, unknown name, malformed)", registry=registry)
        self.lockouts = Counter("progressive_auth_lockouts_total",
                                "Lock-outs after too many wrong supervisor secrets, by what was locked out",
                                ["scope"], registry=registry)


class Guesses:
    """Wrong guesses by key within a window, and the lock-outs they earned. A guess takes its place in the window
    before it is checked (`take`): guesses sent at once are counted as they arrive, not after their hashes, so no
    more than `limit` are ever checked in a window; a right one gives its place back (`give_back`)."""

    def __init__(self, limit: int, clock: Callable[[], float], *, lock_s: float = LOCK_S,
                 window_s: float = WINDOW_S) -> None:
        self.limit = limit
        self.lock_s = lock_s
        self.window_s = window_s
        self._clock = clock
        self._seen: dict[object, deque[float]] = {}  # the times of the wrong guesses, and of those being checked
        self._checking: collections.Counter[object] = collections.Counter()  # of those, how many are being checked
        self._locked: dict[object, float] = {}  # key -> until

    def locked_for(self, key: object) -> float:
        """Seconds before `key` may have a guess checked (0: now). A lock-out does not clear the window: when it
        ends, the guesses that earned it still hold their places until they are `window_s` old."""
        now = self._clock()
        left = self._locked.get(key, now) - now
        if left <= 0:
            self._locked.pop(key, None)
        seen = self._window(key, now)
        if len(seen) >= self.limit:
            # the place that frees first: the oldest wrong guess's (one being checked frees it within seconds)
            wrong = len(seen) - self._checking[key]
            frees = seen[0] + self.window_s - now if wrong else 1.0
            left = max(left, frees, 1.0)
        return max(left, 0.0)

    def take(self, key: object) -> bool:
        """A place in the window for a guess about to be checked; False when there is none (nothing counted)."""
        if self.locked_for(key):
            return False
        self._seen.setdefault(key, deque()).append(self._clock())
        self._checking[key] += 1
        return True

    def give_back(self, key: object) -> None:
        """The guess `take` counted was right: it is not a wrong guess."""
        self._done(key)
        seen = self._seen.get(key)
        if seen:
            seen.pop()  # a place, not a moment: the newest goes (the oldest keeps the window's age)
            if not seen:
                del self._seen[key]

    def wrong(self, key: object) -> bool:
        """The guess `take` counted was wrong: it keeps its place; True when it locks `key` out."""
        self._done(key)
        now = self._clock()
        if len(self._window(key, now)) - self._checking[key] >= self.limit and self._locked.get(key, now) <= now:
            self._locked[key] = now + self.lock_s
            return True
        return False

    def _done(self, key: object) -> None:
        self._checking[key] -= 1
        if self._checking[key] <= 0:
            del self._checking[key]

    def _window(self, key: object, now: float) -> deque[float]:
        seen = self._seen.get(key)
        if seen is None:
            return deque()
        while seen and now - seen[0] > self.window_s and len(seen) > self._checking[key]:
            seen.popleft()
        if not seen:
            del self._seen[key]  # a guesser's made-up names are forgotten with time
        return seen


class SupervisorCheck:
    def __init__(self, supervisors: Iterable[Supervisor], metrics: AuthMetrics, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._supervisors = {normal(s.name): s.credential for s in supervisors}
        self._metrics = metrics
        self._users = Guesses(USER_LIMIT, clock)
        self._names = Guesses(NAME_LIMIT, clock)
        self._pool = HashingThread()
        self._waiting = 0
        self._turns: dict[str, asyncio.Lock] = {}  # a name's checks run one after the other
        self._at_name: collections.Counter[str] = collections.Counter()  # checks waiting for or in a name's turn
        self._decoy = self._pool.submit(_decoy, list(self._supervisors.values()))  # made off the event loop

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def check(self, name: object, secret: object, uid: int | None) -> str:
        """The supervisor's name if `secret` is theirs; PermissionError otherwise (NotAvailable when too many
        checks wait)."""
        return (await self.check_and_derive(name, secret, uid, derive=False))[0]

    async def check_and_derive(self, name: object, secret: object, uid: int | None, *,
                               derive: bool = True) -> tuple[str, bytes | None]:
        """`check`, and with `derive` the supervisor's approval key (controller.linkproto.approval), made from the
        secret in the same thread right after it was found right (the secret is never kept)."""
        if isinstance(name, str):
            name = normal(name)  # as the supervisors' names were read: a look-alike form is the same name
        self._refuse_locked(name, uid)
        if not isinstance(name, str) or not isinstance(secret, str) or not 0 < len(secret) <= MAX_SECRET:
            self._take(name, uid)
            self._settle(name, uid, False, "malformed")
            raise PermissionError("supervisor name or credential not accepted")
        if self._waiting >= QUEUE:
            raise NotAvailable("supervisor checks are busy: try again")
        credential = self._supervisors.get(name)
        self._waiting += 1
        self._at_name[name] += 1
        try:
            # one check of a name at a time: the next is let in knowing the last one's answer
            async with self._turns.setdefault(name, asyncio.Lock()):
                self._refuse_locked(name, uid)
                self._take(name, uid)  # counted before it is hashed; given back if it is right
                ok, loop = False, asyncio.get_running_loop()
                try:
                    against = credential if credential is not None else await asyncio.wrap_future(self._decoy)
                    ok = await loop.run_in_executor(self._pool, verify_credential, secret, against)
                    ok = ok and credential is not None
                finally:  # a check cut short counts as the wrong guess it may have been
                    self._settle(name, uid, ok, "unknown name" if credential is None else "wrong secret")
                derived: bytes | None = None
                if ok and derive:
                    derived = await loop.run_in_executor(self._pool, approval_key, name, secret)
        finally:
            self._waiting -= 1
            self._at_name[name] -= 1
            if not self._at_name[name]:
                del self._at_name[name], self._turns[name]
        if not ok:
            raise PermissionError("supervisor name or credential not accepted")
        # a right secret clears no count: wrong guesses fall out of the window only with time, so guesses between
        # the logins of a secret one knows still add up (the name's own too: it sums every user's guesses at it)
        return name, derived

    def _scopes(self, name: object, uid: int | None) -> tuple[tuple[object, Guesses, str, str], ...]:
        key = name if isinstance(name, str) or name is None else repr(name)[:64]  # a JSON list is no dict key
        return ((("uid", uid), self._users, "user", f"user {uid}"),
                (("name", key), self._names, "name", f"supervisor {key!r}"))

    def _refuse_locked(self, name: object, uid: int | None) -> None:
        for key, guesses, _scope, who in self._scopes(name, uid):
            left = guesses.locked_for(key)
            if left:
                raise PermissionError(f"too many wrong secrets for {who}: try again in {left:.0f} s")

    def _take(self, name: object, uid: int | None) -> None:
        """A place in both windows (none was locked just before, with no await between)."""
        for key, guesses, _scope, _who in self._scopes(name, uid):
            taken = guesses.take(key)
            assert taken, key

    def _settle(self, name: object, uid: int | None, ok: bool, why: str) -> None:
        if ok:
            for key, guesses, _scope, _who in self._scopes(name, uid):
                guesses.give_back(key)
            return
        self._metrics.failures.inc()
        for key, guesses, scope, _who in self._scopes(name, uid):
            if guesses.wrong(key):
                self._metrics.lockouts.labels(scope).inc()
                log.error("supervisor secret guesses: locked out", scope=scope, peer_uid=uid,
                          supervisor=name if isinstance(name, str) else repr(name)[:64], seconds=guesses.lock_s,
                          limit=guesses.limit, last=why)


class HashingThread(concurrent.futures.Executor):
    """One daemon thread at the lowest priority that runs the checks in turn. Not a ThreadPoolExecutor: the
    interpreter joins those at exit, so a stop right after start-up waited for the decoy's hash, which a busy box
    gives a nice-19 thread little CPU for (over 20 s seen); a hash abandoned at exit holds nothing."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]
                                      | None] = queue.SimpleQueue()
        self._closed = False
        threading.Thread(target=self._run, name="secret-check", daemon=True).start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        if self._closed:
            raise RuntimeError("the secret checks are closed")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._work.put((future, functools.partial(fn, **kwargs) if kwargs else fn, args))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        self._work.put(None)  # the thread ends after the check it is in; the ones waiting are cancelled

    def _run(self) -> None:
        _lowest_priority()
        while (item := self._work.get()) is not None:
            future, fn, args = item
            if self._closed:  # closed: what still waits is cancelled, not hashed
                future.cancel()
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - the caller gets it through the future
                future.set_exception(e)


def _lowest_priority() -> None:
    """This thread yields the CPU to the event loop's (Linux: a thread's nice value is its own)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _decoy(credentials: Iterable[Credential]) -> Credential:
    """A credential nobody knows the secret of, of the kind and cost of the first supervisor's (the default
    scheme's without one): checking a secret against it takes as long as against a real one."""
    model = next(iter(credentials), None)
    secret = secrets.token_urlsafe(24)
    if model is None:
        return parse_credential(hash_credential(secret))
    if model.scheme == "scrypt":
        return parse_credential(hash_credential(secret, "scrypt", n=model.n, r=model.r, p=model.p))
    return parse_credential(hash_credential(secret, model.scheme, iterations=model.iterations))


__all__ = ["LOCK_S", "NAME_LIMIT", "QUEUE", "USER_LIMIT", "WINDOW_S", "AuthMetrics", "Guesses", "SupervisorCheck"]

"""How the console's HTTP server meets its connections: the one place that reaches past aiohttp's application
API (tests/shell/test_console.py::test_slow_and_crowding_clients_are_cut_off checks each of these against a real server
and fails if aiohttp changes under them).

- A time for a request's head. aiohttp has no timer of its own for the request line and headers, but its
  keep-alive timer starts when the connection is made and again after each answer, is not pushed back by
  bytes arriving, and closes the connection if no whole request head has arrived by then: with HEAD_S as
  `keepalive_timeout`, a client that trickles its headers is dropped HEAD_S after it connected (or after its
  last answer). A request's body is read under a timeout by the handler itself (server.BODY_S).
- Connections per client address, and in all, counted when the TCP connection is made, before any TLS
  handshake: one over either cap is answered 503 in one line (closed at once under TLS) before aiohttp sees it.
  A counted connection's TLS handshake then gets HEAD_S (asyncio's default is 60 s).
- Refused connections are logged once per address in REFUSAL_LOG_S, and at most REFUSAL_LINES in that time in all.
- aiohttp's own server log (a request it could not parse, a handler's error) goes through ServerLog: a bad
  request is one budgeted line without the request's text, which may hold a supervisor's secret.

aiohttp's `handler_cancellation` stays off: a handler that sent a supervisor's secret to the daemon runs to its
end even if the browser goes away, so that a wrong secret is always counted against its address.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from controller.service.logs import KeyedBudget, LogBudget

log = structlog.get_logger("console")

HEAD_S = 5.0  # a request line and headers arrive within this, and an idle kept-alive connection is closed after it
MAX_PER_ADDRESS = 24  # connections from one address (a browser opens 6 to a site, plus a page's event stream)
MAX_CONNECTIONS = 256
EARLY_BYTES = 64 * 1024  # a request's head and a form's body arriving before the hand-over (more is dropped)
REFUSAL_LOG_S = 10.0  # a refused connection is logged once in this, per address, with how many were not
REFUSAL_LINES = 20  # refused connections logged in REFUSAL_LOG_S from all addresses together
BAD_REQUEST_LINES = 20  # requests aiohttp could not parse, logged in REFUSAL_LOG_S

# AppRunner's keyword arguments for the handler of each connection
# (a body left unread after a refusal is drained for lingering_time, then the connection closed)
HANDLER_ARGS: dict[str, Any] = {"keepalive_timeout": HEAD_S, "lingering_time": 1.0, "max_line_size": 8190,
                                "max_field_size": 8190, "max_headers": 64}


def _refusal(text: str) -> bytes:
    body = (text + "\n").encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


class Connections:
    """Open connections counted per client address (decided in connection_made, before any await)."""

    def __init__(self, per_address: int = MAX_PER_ADDRESS, total: int = MAX_CONNECTIONS) -> None:
        self.per_address, self.total = per_address, total
        self.open: Counter[str] = Counter()
        self.count = 0  # sum of open's values, kept rather than summed for every connection
        # a flood of connections must not flood the log too, nor one from many addresses
        self.refusals = KeyedBudget(1, REFUSAL_LOG_S, overall=REFUSAL_LINES)

    def log_refusal(self, address: str, reason: str) -> None:
        held = self.refusals.take(address)
        if held is not None:
            log.warning("console connection refused", remote=address, reason=reason,
                        **({"not_logged_before": held} if held else {}))

    def take(self, address: str) -> str | None:
        """None, the connection counted; else why it is refused."""
        if self.count >= self.total:
            return f"at most {self.total} connections at once: try again shortly"
        if self.open[address] >= self.per_address:
            return f"at most {self.per_address} connections from one address: close some pages"
        self.open[address] += 1
        self.count += 1
        return None

    def give_back(self, address: str) -> None:
        self.open[address] -= 1
        self.count -= 1
        if self.open[address] <= 0:
            del self.open[address]


class _Gate(asyncio.Protocol):
    """Counts the connection in, upgrades it to TLS if the console serves TLS, then hands every event of the
    transport to aiohttp's own handler."""

    def __init__(self, inner: Callable[[], asyncio.Protocol], connections: Connections,
                 tls: ssl.SSLContext | None, handshakes: set[asyncio.Task[None]]) -> None:
        self._make_inner, self._connections, self._tls, self._handshakes = inner, connections, tls, handshakes
        self._inner: asyncio.Protocol | None = None
        self._address: str | None = None
        # what the TLS layer delivers before the handshake's task has handed the connection over (a client sends
        # its request right behind its last handshake message): kept for aiohttp's handler, not dropped
        self._early: list[bytes] = []
        self._early_eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        refused = self._connections.take(address)
        assert isinstance(transport, asyncio.Transport)
        if refused is not None:
            self._connections.log_refusal(address, refused)
            if self._tls is None:  # a TLS client could not read a plain answer
                transport.write(_refusal(refused))
            transport.close()
            return
        self._address = address
        if self._tls is None:
            self._hand_over(transport)
            return
        transport.pause_reading()  # the ClientHello waits for the handshake
        task = asyncio.get_running_loop().create_task(self._handshake(transport, self._tls))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, transport: asyncio.Transport, tls: ssl.SSLContext) -> None:
        try:
            secure = await asyncio.get_running_loop().start_tls(transport, self, tls, server_side=True,
                                                                ssl_handshake_timeout=HEAD_S)
        except (OSError, TimeoutError, ssl.SSLError, ConnectionError) as e:
            # start_tls closed the transport: a client that did not finish its handshake in time, or not TLS
            log.debug("console TLS handshake not done", remote=self._address, error=type(e).__name__)
            self.connection_lost(None)
            return
        if secure is None or self._address is None:  # closed meanwhile
            return
        self._hand_over(secure)

    def _hand_over(self, transport: asyncio.BaseTransport) -> None:
        inner = self._inner = self._make_inner()
        inner.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            inner.data_received(data)
        if self._early_eof and not inner.eof_received():
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)
        elif self._address is not None and sum(map(len, self._early)) + len(data) <= EARLY_BYTES:
            self._early.append(data)

    def eof_received(self) -> bool | None:
        if self._inner is None:
            self._early_eof = True  # told to the handler after what came before it
            return None
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is not None:
            self._connections.give_back(self._address)
            self._address = None
        if self._inner is not None:
            self._inner.connection_lost(exc)


class GatedSite(web.BaseSite):
    """web.SockSite with the gate in front of aiohttp's handler and HEAD_S for a TLS handshake."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, *, ssl_context: ssl.SSLContext | None = None,
                 connections: Connections | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._sock = sock
        self.connections = connections or Connections()
        host, port = sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        self._name = f"{'https' if ssl_context else 'http'}://{host}:{port}/"

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        handshakes: set[asyncio.Task[None]] = set()  # held here so that none is collected while it runs
        # no ssl= here: asyncio would call connection_made only after the handshake, past the caps
        self._server = await loop.create_server(  # BaseSite.stop() closes what is kept here
            lambda: _Gate(server, self.connections, self._ssl_context, handshakes), sock=self._sock)


class ServerLog(logging.Logger):
    """aiohttp's server logger for the console: a request aiohttp could not parse is one budgeted line naming
    the address, the status and the kind of fault, never the request's text (its body may hold a supervisor's
    secret); an error of the console's own code keeps its traceback; aiohttp's debug lines are dropped."""

    def __init__(self) -> None:
        super().__init__("console.server")
        self.budget = LogBudget(BAD_REQUEST_LINES, REFUSAL_LOG_S)

    def debug(self, *args: Any, **kw: Any) -> None:
        pass

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            held = self.budget.take(None)
            if held is not None:
                log.warning("console bad request", remote=args[0] if args else "?", status=exc_info.code,
                            fault=type(exc_info).__name__, **({"not_logged_before": held} if held else {}))
            return
        log.error("console request failed", remote=args[0] if args else None, exc_info=exc_info)


__all__ = ["BAD_REQUEST_LINES", "EARLY_BYTES", "HANDLER_ARGS", "HEAD_S", "MAX_CONNECTIONS", "MAX_PER_ADDRESS",
           "REFUSAL_LINES", "REFUSAL_LOG_S", "Connections", "GatedSite", "ServerLog"]

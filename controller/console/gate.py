"""How the console's HTTP server meets its connections: the one place that reaches past aiohttp's application
API (tests/test_console.py::test_slow_and_crowding_clients_are_cut_off checks each of these against a real server
and fails if aiohttp changes under them).

- A time for a request's head. aiohttp has no timer of its own for the request line and headers, but its
  keep-alive timer starts when the connection is made and again after each answer, is not pushed back by
  bytes arriving, and closes the connection if no whole request head has arrived by then: with HEAD_S as
  `keepalive_timeout`, a client that trickles its headers is dropped HEAD_S after it connected (or after its
  last answer). A request's body is read under a timeout by the handler itself (server.BODY_S).
- A TLS handshake gets HEAD_S too (asyncio's default is 60 s).
- Connections per client address, and in all: one over either cap is answered 503 in one line and closed
  before aiohttp sees it.

aiohttp's `handler_cancellation` stays off: a handler that sent a supervisor's secret to the daemon runs to its
end even if the browser goes away, so that a wrong secret is always counted against its address.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from ..app.logs import LogBudget

log = structlog.get_logger("console")

HEAD_S = 5.0  # a request line and headers arrive within this, and an idle kept-alive connection is closed after it
MAX_PER_ADDRESS = 24  # connections from one address (a browser opens 6 to a site, plus a page's event stream)
MAX_CONNECTIONS = 256
REFUSAL_LOG_S = 10.0  # a refused connection is logged once in this, per address, with how many were not

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
        self.refusals = LogBudget(1, REFUSAL_LOG_S)  # a flood of connections must not flood the log too

    def take(self, address: str) -> str | None:
        """None, the connection counted; else why it is refused."""
        if sum(self.open.values()) >= self.total:
            return f"at most {self.total} connections at once: try again shortly"
        if self.open[address] >= self.per_address:
            return f"at most {self.per_address} connections from one address: close some pages"
        self.open[address] += 1
        return None

    def give_back(self, address: str) -> None:
        self.open[address] -= 1
        if self.open[address] <= 0:
            del self.open[address]


class _Gate(asyncio.Protocol):
    """Counts the connection in, then hands every event of the transport to aiohttp's own handler."""

    def __init__(self, inner: Callable[[], asyncio.Protocol], connections: Connections) -> None:
        self._make_inner, self._connections = inner, connections
        self._inner: asyncio.Protocol | None = None
        self._address: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        refused = self._connections.take(address)
        if refused is not None:
            held = self._connections.refusals.take(address)
            if held is not None:
                log.warning("console connection refused", remote=address, reason=refused,
                            **({"not_logged_before": held} if held else {}))
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(_refusal(refused))
            transport.close()
            return
        self._address = address
        self._inner = self._make_inner()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

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
        self._server = await loop.create_server(  # BaseSite.stop() closes what is kept here
            lambda: _Gate(server, self.connections), sock=self._sock, ssl=self._ssl_context,
            ssl_handshake_timeout=HEAD_S if self._ssl_context else None)

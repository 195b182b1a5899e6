"""Where the table's journal is anchored (controller.ledger.anchor), and when.

At start, before the table does anything, the journal must hold its anchor: a journal rolled back or rewritten
is refused, with what was found (AnchorError: progressived exits 1, its reason on standard error and in the log).
A missing anchor (the first start of this version, or the file deleted) is an alert, not a refusal: a new one is
written, and the alert says to compare the journal's head with the last anchor sent off the box.

Then the head is anchored: at start, after each payout (the claim desk tells), every ANCHOR_S while the journal
grows, and at close; each time to the anchor file (written off the event loop), in the log (`journal anchor`),
in the metrics (`progressive_ledger_head_seq`, `progressive_ledger_anchor_seq`), to the link authority where the
table has one (it keeps the last, and sends it back at each connection: a journal that no longer holds it is an
alert) and, where configured, to a remote syslog (RFC 5424 over UDP): an anchor off the box is what a restore of
the anchor file with the journal cannot undo. `progressivectl audit verify --expect-head SEQ:HASH` checks a journal against any anchor.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.ledger import Ledger
from controller.ledger.anchor import Anchor, AnchorError, check_anchor, load_key, read_anchor, write_anchor
from controller.ledger.chain import format_time, utc_now

log = structlog.get_logger("table")

ANCHOR_S = 60.0  # while the journal grows, its head is anchored at least this often


class AnchorMetrics:
    """The anchor's metrics, in a daemon's registry (a table's, a link authority's)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ledger_head = Gauge("progressive_ledger_head_seq", "The journal's head: its last entry's number",
                                 registry=registry)
        self.anchor_seq = Gauge("progressive_ledger_anchor_seq", "The last entry anchored (outside the journal)",
                                registry=registry)
        self.anchor_problems = Counter("progressive_ledger_anchor_problems_total",
                                       "Anchors of the journal found missing at a start, or not matching it",
                                       ["problem"], registry=registry)
        self.off_box = Gauge("progressive_ledger_anchor_off_box",
                             "1 when the journal's head is anchored off the box (to a link authority or a remote "
                             "syslog); 0: a rollback of the state and anchor directories together cannot be noticed",
                             registry=registry)


class Anchoring:
    def __init__(self, ledger: Ledger[Any], path: Path, key_file: Path | None, *, table: str,
                 metrics: AnchorMetrics, syslog: tuple[str, int] | None = None,
                 send: Callable[[Anchor], None] | None = None) -> None:
        self.ledger = ledger
        self.path = Path(path)
        self.key_file = key_file
        self.key: bytes | None = None  # read by check()
        self.table = table  # the journal's owner, as the syslog line names it (a table, or a link authority)
        self.metrics = metrics
        self.syslog = syslog
        self.send = send  # off the box through the table's link (to the link authority), or None
        metrics.off_box.set(0 if syslog is None and send is None else 1)
        self.last: Anchor | None = None
        self._sock: socket.socket | None = None
        self._syslog_addr: tuple[int, Any] | None = None  # (family, address): resolved off the event loop
        self._syslog_failed = False
        self._writing = asyncio.Lock()
        self._compared: Anchor | None = None  # the authority's anchor compared last
        # Only a journal that passed check() is anchored: the anchor of a journal refused at start (rolled back,
        # rewritten, its anchor missing) written at its close would let the next start take it.
        self.checked = False

    # --- at start ------------------------------------------------------------------------------------

    def check(self) -> None:
        """The journal holds its anchor, or AnchorError says why not (blocking: from a thread, before the
        journal's first new entry other than the ledger's own self-check)."""
        if self.key_file is not None:
            self.key = load_key(self.key_file)
        self._resolve_syslog()
        anchor = read_anchor(self.path, self.key)
        if anchor is None:
            if self.ledger.engine == "postgresql":
                # The journal is shared by the authorities that may take it over: this box anchors it from now on.
                log.warning("journal anchor: none on this box yet, the journal is on PostgreSQL", anchor=str(self.path))
                self.checked = True
                return
            if self.ledger.startup.created:
                log.info("journal anchor: none yet, the journal is new", anchor=str(self.path))
                self.checked = True
                return
            # Deleting the anchor must not be a way past it: a journal with entries and no anchor is refused until
            # a person compares it with the last anchor off the box and writes its anchor again.
            self.metrics.anchor_problems.labels("missing").inc()
            state = self.ledger.db_path.parent
            raise AnchorError(
                f"{state}: the journal holds entries but its anchor {self.path} is missing (deleted, lost, or the "
                "journal was copied here): compare the journal with the last anchor sent off the box, then write "
                f"its anchor again with the daemon stopped: progressivectl audit anchor --state {state} --anchor "
                f"{self.path}" + (f" --key-file {self.key_file}" if self.key_file else "") + " --expect-head SEQ:HASH")
        problem = check_anchor(self.ledger.journal, anchor)
        if problem is not None:
            raise AnchorError(f"{self.ledger.db_path.parent}: {problem}; the anchor is {self.path} (if the journal "
                              "was put back on purpose, keep the anchor's file aside and start again)")
        self.last = anchor
        self.checked = True

    # --- anchoring -----------------------------------------------------------------------------------

    async def anchor(self, why: str) -> None:
        """Anchor the head, if it moved since the last anchor."""
        async with self._writing:
            head = self.ledger.head
            if not self.checked or (self.last is not None and self.last.seq == head.seq):
                return
            anchor = Anchor.of(head, self.key)
            await asyncio.to_thread(write_anchor, self.path, anchor)
            self._anchored(anchor, why)

    def anchor_now(self, why: str) -> None:
        """The same, blocking (at close, when the journal is closed)."""
        head = self.ledger.head
        if not self.checked or (self.last is not None and self.last.seq == head.seq):
            return
        anchor = Anchor.of(head, self.key)
        write_anchor(self.path, anchor)
        self._anchored(anchor, why)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(ANCHOR_S)
            if self.syslog is not None and self._syslog_addr is None:
                await asyncio.to_thread(self._resolve_syslog)  # a name that did not resolve: tried again
            await self.anchor_or_alert("every minute")

    def _resolve_syslog(self) -> None:
        """The remote syslog's address, resolved once (blocking: DNS; from a thread). A failure is logged and the
        anchors are not sent until it resolves (tried again every minute)."""
        if self.syslog is None:
            return
        host, port = self.syslog
        try:
            family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        except (OSError, UnicodeError) as e:
            if not self._syslog_failed:
                log.error("the remote syslog's name does not resolve: anchors are not sent to it",
                          syslog=f"{host}:{port}", error=str(e))
            self._syslog_failed = True
            return
        self._syslog_addr = (family, addr)

    async def anchor_or_alert(self, why: str) -> None:
        """anchor(), where an anchor file that cannot be written (a full disk) is an alert: the table plays on."""
        try:
            await self.anchor(why)
        except OSError as e:
            self.metrics.anchor_problems.labels("not written").inc()
            log.error("journal anchor not written", anchor=str(self.path), error=e.strerror or str(e), why=why)

    def _anchored(self, anchor: Anchor, why: str) -> None:
        self.last = anchor
        self.metrics.ledger_head.set(anchor.seq)
        self.metrics.anchor_seq.set(anchor.seq)
        log.info("journal anchor", seq=anchor.seq, hash=anchor.hash, at=anchor.at, why=why, keyed=anchor.mac is not None)
        if self.syslog is not None:
            self._send(anchor)
        if self.send is not None:
            self.send(anchor)

    async def compare(self, theirs: Anchor) -> None:
        """The authority's copy of this journal's anchor, at each connection: an alert when the journal does not
        hold it (rolled back or rewritten since it was sent). Each anchor is compared once (the authority sends it
        again with each answer to a hello)."""
        if theirs == self._compared:
            return
        self._compared = theirs
        if self.key is not None and not theirs.signed_with(self.key):
            # Not made here: sent by someone with the table's MQTT credentials (or the broker) as the table's.
            self.metrics.anchor_problems.labels("forged").inc()
            log.error("the link authority holds an anchor of this journal that is not signed with the journal key: "
                      "ignored (planted by someone with this table's MQTT credentials, or by the broker)",
                      seq=theirs.seq, hash=theirs.hash, at=theirs.at)
            return
        problem = await asyncio.to_thread(check_anchor, self.ledger.db_path, theirs)
        if problem is None:
            log.debug("journal anchor at the link authority matches", seq=theirs.seq)
            return
        self.metrics.anchor_problems.labels("authority").inc()
        log.error("the link authority's anchor of this journal does not match it", problem=problem, seq=theirs.seq,
                  hash=theirs.hash, at=theirs.at)

    def _send(self, anchor: Anchor) -> None:
        """One RFC 5424 line to the remote syslog (UDP, local0.notice); a failure is logged, once per outage."""
        assert self.syslog is not None
        if self._syslog_addr is None:
            self.metrics.anchor_problems.labels("not sent").inc()
            return  # its name did not resolve (logged once)
        family, addr = self._syslog_addr
        line = (f"<133>1 {format_time(utc_now())} {socket.gethostname()} progressived {os.getpid()} anchor - "
                f"table={self.table} seq={anchor.seq} hash={anchor.hash} at={anchor.at}"
                + (f" mac={anchor.mac}" if anchor.mac else ""))
        try:
            if self._sock is None or self._sock.family != family:
                if self._sock is not None:
                    self._sock.close()
                self._sock = socket.socket(family, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            self._sock.sendto(line.encode(), addr)  # a numeric address: no lookup on the event loop
            self._syslog_failed = False
        except OSError as e:
            if not self._syslog_failed:
                log.error("journal anchor not sent to the remote syslog", syslog=f"{self.syslog[0]}:{self.syslog[1]}",
                          error=e.strerror or str(e))
            self._syslog_failed = True

    def json(self) -> dict[str, Any] | None:
        return None if self.last is None else {**self.last.to_json(), "file": str(self.path)}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


__all__ = ["ANCHOR_S", "AnchorMetrics", "Anchoring"]

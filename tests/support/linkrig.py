"""A link in the test process: a real Mosquitto (TLS, the shipped ACL), a link authority and table links.

Used by the link tests; the authority and each table run as tasks that a test can stop and start again
over the same state directories, as a restart would. `AuthorityProcess` runs the authority as a child process
instead (`progressived --role link`), for the tests that kill it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client import CollectorRegistry

from controller.authority.authority import LinkAuthority
from controller.config.authority import AuthorityConfig
from controller.config.credentials import PBKDF2, hash_credential
from controller.config.model import MqttConfig, StandaloneMeter
from controller.link.client import TableLink
from controller.linkproto import approval, signing
from controller.meter.params import MeterParams
from controller.money import UNITS_PER_CENT, parse_cents

from broker import Broker
from rigtable import until
from tableproc import TEST_PBKDF2_ITERATIONS, TableProcess

PREFIX = "progressive/v1"
METER = "fchb-link"
RESET = 1_000_000  # cents: $10,000
RATE = Fraction(15, 100)
AT = datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)
# The supervisors who approve payments from the linked meter (name -> secret), as the tables' files list them.
APPROVERS = {"floor-1": "s3cret-floor", "floor-2": "s3cret-floor-2"}


# The link authority's signing key in these tests, and the line the tables trust it by: the same in every process of
# a test (its child tables and authorities), so made from a fixed seed, as no real key ever is.
SIGNING_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"the tests' link authority").digest())
SIGNING_PEM = SIGNING_KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
AUTHORITY_KEY = signing.format_public(SIGNING_KEY.public_key())


def units(cents: int) -> int:
    """Meter units of `cents`."""
    return cents * UNITS_PER_CENT


def contribution(wager_cents: int, wagers: int) -> int:
    """Meter units that `wagers` wagers of `wager_cents` add to METER at RATE, exactly."""
    c = Fraction(units(wager_cents)) * RATE * wagers
    assert c.denominator == 1
    return int(c)


def signing_key_file(directory: Path) -> Path:
    """The authority's signing key file, as `progressivectl link-key` writes it (readable by its owner only)."""
    p = Path(directory) / "link-signing.pem"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(SIGNING_PEM)
    p.chmod(0o600)
    return p


@functools.cache
def approval_keys() -> dict[str, bytes]:
    """The authority's approvers: each supervisor's approval key (a tenth of a second each: made once)."""
    return {name: approval.approval_key(name, secret) for name, secret in APPROVERS.items()}


def approvers_file(directory: Path) -> Path:
    """The authority's approvers file, as `progressivectl approval-key` makes its entries, readable by its owner
    only."""
    p = Path(directory) / "approvers.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(f'[[approvers]]\nname = "{n}"\napproval_key = "{approval.encode_key(k)}"\n\n'
                         for n, k in approval_keys().items()), encoding="utf-8")
    p.chmod(0o600)
    return p


def supervisors_file(directory: Path, supervisors: dict[str, str], *,
                     iterations: int = TEST_PBKDF2_ITERATIONS) -> Path:
    """A supervisors file (name -> secret, each hashed with PBKDF2 at `iterations`), readable by its owner only, as
    a table's is installed."""
    p = Path(directory) / "supervisors.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(f'[[supervisors]]\nname = "{n}"\n'
                         f'credential = "{hash_credential(s, PBKDF2, iterations=iterations)}"\n\n'
                         for n, s in supervisors.items()), encoding="utf-8")
    p.chmod(0o600)
    return p


def password_file(directory: Path, user: str, password: str) -> Path:
    p = directory / f"{user}.password"
    p.write_text(password + "\n", encoding="utf-8")
    p.chmod(0o600)
    return p


def authority_doc(tmp: Path, broker: Broker, tables: tuple[str, ...]) -> dict[str, Any]:
    """The configuration of an AuthorityProcess of the one linked meter METER for `tables`, on `broker`."""
    return {
        "authority": "link-1",
        "state_dir": str(tmp / "authority" / "state"),
        "tables": list(tables),
        "heartbeat": Decimal("0.2"),
        "meters": {METER: {"reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00", "5.00"]}},
        "mqtt": {"host": broker.host, "port": broker.port, "tls": True, "ca_file": str(broker.ca_file),
                 "username": "authority",
                 "password_file": str(password_file(tmp, "authority", broker.passwords["authority"]))},
        "metrics": {"listen": "127.0.0.1:0"},
        "logging": {"format": "json", "level": "info"},
        "approvers_file": str(approvers_file(tmp / "authority-files")),
        "signing_key_file": str(signing_key_file(tmp / "authority-files")),
    }


def signed(op: Any, table: str, linked: str = METER, supervisor: str | None = None,
           locked: dict | None = None, lock: Any = None) -> dict[str, str]:
    """The approval of payment `op` by its `approved_by` (or `supervisor`'s key), as a table signs it; a payment of a
    locked award names the lock's terms (`lock`: the LockPercentAward sent) with the number, nonce and amount the
    authority's answer to it gave (`locked`: its result)."""
    body = op.to_dict()
    body.pop("kind")
    if op.kind == "pay-locked-award":
        result = locked or {}
        number, nonce = result.get("lock", 0), result.get("nonce", "")
        if lock is not None:
            body.update(approval.lock_terms(lock, number, nonce, parse_cents(result.get("amount", "0"), "amount")))
        else:
            body["lock"], body["nonce"] = number, nonce
    return approval.sign(approval_keys()[supervisor or body["approved_by"]], op.kind, table, linked, body)


def mqtt_config(client_id: str, link_timeout: float = 2.0) -> MqttConfig:
    return MqttConfig(host="127.0.0.1", port=0, tls=True, client_id=client_id, topic_prefix=PREFIX,
                      link_timeout=link_timeout, authority_keys=(AUTHORITY_KEY,))


def authority_config(state_dir: Path, tables: tuple[str, ...], *, heartbeat: float = 0.2,
                     ceiling_cents: int | None = None) -> AuthorityConfig:
    params = MeterParams(METER, RESET, RATE, (100, 500), ceiling_cents=ceiling_cents)
    return AuthorityConfig(source=state_dir / "authority.toml", authority="link-1", state_dir=state_dir,
                           tables=tables, meters={METER: StandaloneMeter(METER, params)},
                           mqtt=mqtt_config("authority"), heartbeat=heartbeat, approvers=approval_keys(),
                           signing_key=SIGNING_KEY)


class LinkRig:
    def __init__(self, tmp: Path, broker: Broker, tables: tuple[str, ...], *, link_timeout: float = 2.0,
                 heartbeat: float = 0.2) -> None:
        self.tmp, self.broker, self.tables = tmp, broker, tables
        self.cfg = authority_config(tmp / "authority", tables, heartbeat=heartbeat)
        self.link_timeout = link_timeout
        self.authority: LinkAuthority | None = None
        self.links: dict[str, TableLink] = {}
        self.alive_changes: dict[str, list[bool]] = {t: [] for t in tables}
        self._tasks: dict[str, asyncio.Task] = {}

    async def start_authority(self) -> LinkAuthority:
        a = LinkAuthority(self.cfg, settings=self.broker.settings("authority"), registry=CollectorRegistry())
        self.authority = a
        self._tasks["authority"] = asyncio.create_task(a.run(), name="authority")
        await until(lambda: a.ready.is_set() and a.mqtt is not None and a.mqtt.connected, "authority connected")
        return a

    async def stop_authority(self) -> None:
        await self._stop("authority")
        self.authority = None

    async def start_table(self, table: str, meter: str = "fchb") -> TableLink:
        link = TableLink(table, mqtt_config(table, self.link_timeout), {meter: METER}, self.tmp / table,
                         settings=self.broker.settings(table), on_alive=self.alive_changes[table].append)
        await asyncio.to_thread(link.open)
        self.links[table] = link
        self._tasks[table] = asyncio.create_task(self._run_table(link), name=f"table:{table}")
        await until(lambda: link.opened.is_set(), f"{table} link running")
        return link

    async def _run_table(self, link: TableLink) -> None:
        try:
            await link.run()
        finally:
            link.close()

    async def stop_table(self, table: str) -> None:
        await self._stop(table)
        self.links.pop(table, None)

    async def _stop(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 60)

    async def close(self) -> None:
        for name in list(self._tasks):
            await self._stop(name)

    def meter(self) -> Any:
        assert self.authority is not None and self.authority.ledger is not None
        return self.authority.ledger.state[METER]

    async def all_answered(self, timeout: float = 20.0) -> None:
        await until(lambda: all(link.ledger is not None and not link.outbox.pending for link in self.links.values()),
                    "every table's outbox answered", timeout)


# --- the link authority as a child process ---------------------------------------------------------------


class AuthorityProcess(TableProcess):
    """The link authority (`progressived --role link --config FILE`) in a child process, with its own directory:
    configuration (written from `doc`, a TOML document as tableproc.dump_toml takes it), journal (`state_dir`),
    log (`log_path`: its JSON lines, every start appended) and stderr. A TableProcess but for its command line
    (its control socket reads only): `start()` waits for READY=1 on its notify socket, `kill()` is SIGKILL, `stop()` SIGTERM
    and a clean exit."""

    CONFIG_NAME = "authority.toml"

    def __init__(self, directory: Path, doc: dict[str, Any], *, name: str = "authority") -> None:
        super().__init__(directory, doc, name=name)

    def arguments(self) -> list[str]:
        return ["--role", "link", "--config", str(self.config_path), "--socket", str(self.socket)]

    async def start(self, *, devices_up: bool = False) -> str:
        return await super().start(devices_up=devices_up)  # an authority has no devices

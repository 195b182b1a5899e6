"""The link authority's control socket (controller/authority/handlers.py): one handler per operation it declares
(AUTHORITY_OPERATIONS), a request checked before any handler runs, a table's operation refused by name, and a
supervisor's clearing of a planted anchor: its arguments checked before the secret is, on a real journal."""

from __future__ import annotations

from typing import Any

import pytest

from controller.authority import handlers
from controller.authority.table_anchors import AnchorKeeper
from controller.errors import InputError
from controller.service.control import NotAvailable, UnknownOp
from controller.service.operations import AUTHORITY_OPERATIONS, OPERATIONS
from controller.service.views import meter_json

from authority_journal import TABLES, journal, parts
from linkrig import METER


class Authority:
    """What the handlers ask of the authority; the supervisors' check records who asked."""

    def __init__(self, ledger: Any) -> None:
        self.tables = TABLES
        self.ledger = ledger
        self.series = None
        metrics, notes = parts()
        self.keeper = AnchorKeeper(ledger, TABLES, metrics, notes) if ledger is not None else None
        self.asked: list[dict[str, Any]] = []

    def status(self) -> dict[str, Any]:
        return {"role": "link-authority"}

    async def supervisor(self, args: dict[str, Any]) -> str:
        self.asked.append(args)
        if args.get("secret") != "s3cret":
            raise PermissionError("not a supervisor's secret")
        return str(args["supervisor"])


def test_every_declared_operation_has_one_handler_and_no_handler_is_undeclared():
    assert set(handlers.AUTHORITY) == set(AUTHORITY_OPERATIONS)


@pytest.mark.parametrize("op", sorted(set(OPERATIONS) - set(AUTHORITY_OPERATIONS)))
async def test_a_tables_operation_is_refused_by_name(op):
    with pytest.raises(NotAvailable, match=f"^{op}: not offered by the link authority: its socket answers status, "):
        await handlers.call(Authority(None), op, {})


async def test_an_unknown_operation_or_argument_is_refused_before_any_handler(tmp_path):
    with journal(tmp_path) as led:
        d = Authority(led)
        with pytest.raises(UnknownOp):
            await handlers.call(d, "reboot", {})
        with pytest.raises(InputError) as err:
            await handlers.call(d, "authenticate", {"supervisor": "floor-1", "secret": "s3cret", "Seat": 5})
        assert err.value.field == "Seat" and d.asked == []
        assert await handlers.call(d, "meters", {}) == [meter_json(led.state[METER])]
        assert await handlers.call(d, "authenticate", {"supervisor": "floor-1", "secret": "s3cret"}) == \
            {"supervisor": "floor-1"}


async def test_nothing_is_answered_while_the_journal_is_not_open():
    with pytest.raises(NotAvailable, match="not running its journal"):
        await handlers.call(Authority(None), "status", {})


@pytest.mark.parametrize("args, field", [
    ({"table": "lir-03", "seq": 5}, "table"), ({"table": 7, "seq": 5}, "table"),
    ({"table": "cs-01", "seq": True}, "seq"), ({"table": "cs-01", "seq": 0}, "seq"),
    ({"table": "cs-01", "seq": 2**63}, "seq"), ({"table": "cs-01"}, "seq")])
async def test_a_clearing_names_a_table_and_an_entry_before_the_secret_is_checked(tmp_path, args, field):
    with journal(tmp_path) as led:
        d = Authority(led)
        with pytest.raises(InputError) as err:
            await handlers.call(d, "clear_anchor", {**args, "supervisor": "floor-1", "secret": "wrong"})
        assert err.value.field == field and d.asked == []


async def test_a_clearing_is_a_supervisors_and_of_what_is_kept_aside(tmp_path):
    with journal(tmp_path) as led:
        d = Authority(led)
        with pytest.raises(PermissionError):
            await handlers.call(d, "clear_anchor", {"table": "cs-01", "seq": 5, "supervisor": "floor-1",
                                                    "secret": "wrong"})
        with pytest.raises(InputError, match="no anchor of table cs-01 is kept aside: nothing to clear"):
            await handlers.call(d, "clear_anchor", {"table": "cs-01", "seq": 5, "supervisor": "floor-1",
                                                    "secret": "s3cret"})
        assert len(d.asked) == 2

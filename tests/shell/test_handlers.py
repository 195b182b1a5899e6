"""The control socket's operations as the daemons answer them (controller/app/handlers.py, TableShell.call): every
declared operation has exactly one handler at each kind of table, a request is checked against its declaration
before any handler runs, and the card table's operations are refused at a dice table by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.app import handlers
from controller.app.shell import TableShell
from controller.config import load_config
from controller.errors import InputError
from controller.service.control import NotAvailable
from controller.service.operations import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("table", [handlers.CARD_TABLE, handlers.DICE_TABLE], ids=["card", "dice"])
def test_every_declared_operation_has_one_handler_and_no_handler_is_undeclared(table):
    assert set(table) == set(OPERATIONS)


def test_the_tables_share_the_handlers_that_are_the_same():
    for op in ("status", "round", "authenticate"):
        assert handlers.CARD_TABLE[op] is handlers.DICE_TABLE[op]


class _Shell(TableShell):
    """A table shell (no device) whose handlers record what reached them."""

    def __init__(self) -> None:
        super().__init__(load_config(ROOT / "config" / "tables" / "hot-roller-craps.toml"), {})
        self.reached: list[tuple[str, dict[str, Any]]] = []

        async def record(d: _Shell, args: dict[str, Any]) -> Any:
            d.reached.append(("claim", args))
            return {"ok": True}
        self.handlers = {**handlers.DICE_TABLE, "claim": record}


async def test_call_checks_the_arguments_before_the_handler_runs():
    d = _Shell()
    with pytest.raises(InputError, match="claim does not take 'Seat'") as err:
        await d.call("claim", {"Seat": 5})
    assert err.value.field == "Seat" and d.reached == []
    assert await d.call("claim", {"seat": 5}) == {"ok": True}
    assert d.reached == [("claim", {"seat": 5})]


async def test_an_unknown_operation_is_a_lookup_error():
    with pytest.raises(LookupError):
        await _Shell().call("reboot", {})


async def test_a_declared_operation_without_a_handler_is_a_lookup_error():
    d = _Shell()
    d.handlers = {}
    with pytest.raises(LookupError):
        await d.call("status", {})


@pytest.mark.parametrize("op", handlers.CARD_TABLE_OPS)
async def test_a_card_table_operation_at_a_dice_table_is_refused_by_name(op):
    with pytest.raises(NotAvailable, match=f"^{op}: not at a dice table \\(Hot Roller Craps\\)"):
        await handlers.DICE_TABLE[op](_Shell(), {})


async def test_a_dice_table_has_no_meter_and_refuses_a_wrong_span():
    d = _Shell()
    assert await d.call("meters", {}) == [] and await d.call("history", {}) == []
    with pytest.raises(InputError) as err:
        await d.call("meter_series", {"span": "fortnight"})
    assert err.value.field == "span"

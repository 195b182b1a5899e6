"""The meters through the durable ledger: bad input gets a clear error and writes nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction

import pytest

from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.meter import BookContributions, PayPercentAward, params_from_dict
from controller.meter_ledger import MetersReducer, define_meter_body, op_body

AT = datetime(2026, 11, 29, 21, 0, tzinfo=timezone.utc)
PARAMS = {"meter_id": "fchb", "reset": "10000.00", "rate": "0.10", "wager_sizes": ["1.00", "5.00"]}


@pytest.fixture
def ledger(tmp_path):
    led = Ledger.open(tmp_path / "state", MetersReducer(), software_digest="sha256:test")
    led.submit("define-meter", define_meter_body(params_from_dict(PARAMS, "params"), "tech", AT), key="def")
    yield led
    led.close()


def _refused(ledger, kind, body, field):
    before = ledger.head.seq
    with pytest.raises((InputError, RulesError)) as e:
        ledger.submit(kind, body, key=f"bad:{field}:{kind}")
    assert ledger.head.seq == before, "a refused operation writes nothing"
    assert field in e.value.field or field in str(e.value)
    return e.value


def _book(wagers):
    body = op_body("fchb", BookContributions("r1", "t1", ((1, 100),), AT))
    body["wagers"] = wagers
    return body


@pytest.mark.parametrize(
    ("wagers", "field"),
    [
        ([[1, "-1.00"]], "wagers"),  # negative
        ([[1, "0.00"]], "wagers"),  # zero
        ([[1, "1.005"]], "wagers"),  # sub-cent
        ([[1, "2.00"]], "wagers"),  # not an accepted wager size
    ],
)
def test_bad_wager_is_refused_and_nothing_written(ledger, wagers, field):
    _refused(ledger, "book-contributions", _book(wagers), field)


@pytest.mark.parametrize(("key", "value"), [("rate", "1.00"), ("rate", "0"), ("rate", "-0.1"), ("reset", "9999.99")])
def test_bad_parameters_are_refused_and_nothing_written(ledger, key, value):
    params = dict(PARAMS, meter_id="other", **{key: value})
    body = {"params": params, "set_by": "tech", "at": AT.isoformat()}
    _refused(ledger, "define-meter", body, key)


def test_award_on_an_unknown_meter_is_refused(ledger):
    op = PayPercentAward("r1", "t1", 1, "royal-flush", "100% of meter", Fraction(100), AT, "floor 1")
    body = op_body("no-such-meter", op)
    err = _refused(ledger, op.kind, body, "meter")
    assert "no-such-meter" in str(err)


def test_a_good_operation_is_durable_and_idempotent(ledger):
    op = BookContributions("r1", "t1", ((1, 100), (2, 500)), AT)
    first = ledger.submit(op.kind, op_body("fchb", op), key="t1:r1:book")
    again = ledger.submit(op.kind, op_body("fchb", op), key="t1:r1:book")
    assert again.seq == first.seq and ledger.head.seq == first.seq
    assert ledger.state["fchb"].contributions == 600 * 1000  # 10% of $6.00 in meter units

"""The meters through the durable ledger: bad input gets a clear error and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

import pytest

from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.meter import BookContributions, PayPercentAward, params_from_dict
from controller.meter.journal import define_meter_body, op_body
from controller.round.journal import JournalReducer

AT = datetime(2026, 11, 29, 21, 0, tzinfo=UTC)
PARAMS = {"meter_id": "fchb", "reset": "10000.00", "rate": "0.10", "wager_sizes": ["1.00", "5.00"]}


@pytest.fixture
def ledger(tmp_path):
    led = Ledger.open(tmp_path / "state", JournalReducer(), software_digest="sha256:test")
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


# --- the reducer's fast paths must not weaken a check ----------------------------------------------------


def _two_meter_state():
    from controller.ledger.chain import canonical_body
    from controller.meter import CloseRound

    r = JournalReducer()
    st = r.initial()
    for mid in ("fchb", "other"):
        body = define_meter_body(params_from_dict({**PARAMS, "meter_id": mid}, "params"), "tech", AT)
        st, _ = r.apply(st, "define-meter", canonical_body(body)[1])
    for n in (1, 2):
        st, _ = r.apply(st, "book-contributions",
                        canonical_body(op_body("fchb", BookContributions(f"t1-r{n}", "t1", ((1, 100), (2, 500)), AT)))[1])
    st, _ = r.apply(st, "close-round", canonical_body(op_body("fchb", CloseRound("t1-r1", AT)))[1])
    return r, st


def test_check_still_checks_a_state_that_apply_did_not_make():
    from types import MappingProxyType

    from controller.meter.state import InvariantViolation, with_maps

    r, st = _two_meter_state()
    r.check(st)  # every meter state came out of apply
    broken = with_maps(st["fchb"], current=st["fchb"].current + 1)  # one unit more than the books explain
    with pytest.raises(InvariantViolation, match="meter fchb"):
        r.check(MappingProxyType({**st, "fchb": broken}))
    stray = with_maps(st["other"], recent_rounds=("t1-r2",))  # an open round of `fchb`? no: of `other`, none
    r.check(MappingProxyType({**st, "other": stray}))
    looped = with_maps(st["fchb"], recent_rounds=(*st["fchb"].recent_rounds, "t1-r2"))  # open and closed at once
    with pytest.raises(InvariantViolation, match="recent_rounds"):
        r.check(MappingProxyType({**st, "fchb": looped}))


def test_with_maps_is_replace_and_keeps_the_round_set_only_while_it_holds():
    from dataclasses import replace

    from controller.meter.state import with_maps

    _r, st = _two_meter_state()
    s = st["fchb"]
    assert s.recent_rounds == ("t1-r1",) and s.recent_set == frozenset({"t1-r1"})
    same = with_maps(s, current=s.current + 5, contributions=s.contributions + 5)
    assert same == replace(s, current=s.current + 5, contributions=s.contributions + 5)
    assert same.recent_set == frozenset({"t1-r1"})
    moved = with_maps(s, recent_rounds=("t1-r1", "t1-r9"))
    assert moved.recent_set == frozenset({"t1-r1", "t1-r9"})  # not the cached set of `s`
    assert s.open_rounds["t1-r2"].wager_cents == 600 and s.open_rounds["t1-r2"].seats == frozenset({1, 2})
    with pytest.raises(TypeError, match="no field 'curent'"):
        with_maps(s, curent=1)


def test_parsed_amounts_are_remembered_per_number_of_places():
    from controller.money import parse_cents, parse_units

    assert parse_cents("1.50", "a") == 150 and parse_cents("1.50", "a") == 150
    assert parse_units("1.50", "a") == 1_500_000  # same text, other unit
    assert parse_cents(" 2.00", "a") == 200
    from controller import money

    padded = " " * 1000 + "3.00"
    assert parse_cents(padded, "a") == 300 and (padded, 2) not in money._PARSED  # long texts are not kept
    for bad in ("1.505", "-1.00", "x"):
        for _ in range(2):  # a refusal is never remembered as a value
            with pytest.raises(InputError, match="wager"):
                parse_cents(bad, "wager")

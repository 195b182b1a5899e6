"""Polled states -> events: any sequence of polls gives a consistent event stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drivers.modbus.core.edges import PressCounter, Removed, RisingEdge, Sensed, WagerEdges

KEYS = [(1, "progressive"), (2, "progressive"), (2, "bonus")]
STATE = st.tuples(st.booleans(), st.sampled_from([None, 500, 2500]))
POLL = st.fixed_dictionaries({k: STATE for k in KEYS})
# None stands for a failed poll: the driver does not call the edge detector at all
POLLS = st.lists(st.one_of(st.none(), POLL), max_size=40)


def _replay(polls):
    edges: WagerEdges = WagerEdges()
    stream = []
    for poll in polls:
        if poll is not None:
            stream.extend(edges.update(poll))
    return edges, stream


@given(POLLS)
def test_events_are_consistent(polls):
    edges, stream = _replay(polls)
    present: dict = {}
    for ev in stream:
        if isinstance(ev, Sensed):
            assert ev.key not in present, "two Sensed without a Removed between"
            present[ev.key] = ev.amount_cents
        else:
            assert isinstance(ev, Removed)
            assert ev.key in present, "Removed without a preceding Sensed"
            del present[ev.key]
    # the stream tells exactly the last polled state
    last = next((p for p in reversed(polls) if p is not None), None)
    expected = {} if last is None else {k: a for k, (on, a) in last.items() if on}
    assert present == expected == edges.present


@given(POLLS)
def test_failed_polls_change_nothing(polls):
    assert _replay(polls)[1] == _replay([p for p in polls if p is not None])[1]


@given(POLL, st.integers(1, 5))
def test_a_repeated_state_raises_nothing(poll, repeats):
    edges: WagerEdges = WagerEdges()
    first = edges.update(poll)
    assert len(first) == sum(on for on, _ in poll.values())  # present at first contact: reported once
    for _ in range(repeats):
        assert edges.update(poll) == []


def test_an_outage_in_between():
    key = (1, "progressive")
    edges: WagerEdges = WagerEdges()
    assert edges.update({key: (False, None)}) == []
    # placed and removed while the device was down: the driver polled nothing in between
    assert edges.update({key: (False, None)}) == []
    # placed while down and still there: reported once
    assert edges.update({key: (True, 500)}) == [Sensed(key, 500)]
    assert edges.update({key: (True, 500)}) == []
    # a new amount under the same chip stack
    assert edges.update({key: (True, 2500)}) == [Removed(key), Sensed(key, 2500)]


@given(st.lists(st.integers(0, 8), max_size=60), st.sampled_from([16, 32]), st.integers(0, 70000))
def test_counter_reports_every_press(steps, bits, start):
    counter = PressCounter(bits=bits)
    value = start % (1 << bits)
    assert counter.update(value) == (0, 0)  # the baseline
    for step in steps:
        value = (value + step) % (1 << bits)  # wraps around like the device's register
        assert counter.update(value) == (step, 0)
    assert counter.resets == 0


def test_counter_reset_cap_and_resync():
    c = PressCounter(bits=16, max_presses=8)
    c.update(500)
    assert c.update(2) == (2, 0) and c.resets == 1  # power-on: counting from zero again
    assert c.update(3) == (1, 0)
    assert c.update(30) == (8, 19)  # at most 8 reported per reading
    c.resync()
    assert c.update(40) == (0, 0)  # after an outage: a new baseline, nothing invented
    assert c.update(0xFFFF) == (8, 0xFFFF - 40 - 8)


def test_momentary_rising_edges():
    e = RisingEdge()
    assert [e.update(v) for v in (True, True, False, True, True, False, False, True)] == [
        False, False, False, True, False, False, False, True]  # held at first contact: not a press
    e.resync()
    assert e.update(True) is False

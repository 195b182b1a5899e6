"""Line protocol messages and the sequence/ACK state machine (pure: no port, no event loop)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import parse_card
from controller.errors import InputError
from drivers.events import (
    CardDealt,
    CardsDispensed,
    DiceRolled,
    LockoutPressed,
    SetAcceptedLight,
    SetLockoutLamp,
    SetWinLight,
    ShoeJam,
    ShowAmounts,
    ShowMessage,
    ShuffleFault,
    ShufflerCount,
    SignMessage,
    WagerRemoved,
    WagerSensed,
)
from drivers.line.core.frame import Decoder, Frame, encode
from drivers.line.core.protocol import (
    NAK_ARGS,
    NAK_RANGE,
    NAK_SYNTAX,
    NAK_UNKNOWN,
    PROTOCOL_VERSION,
    Ack,
    ArgError,
    Hello,
    Link,
    Nak,
    Ping,
    Role,
    Status,
    from_wire,
    to_wire,
)

DEV = "shoe-1"

EVENTS = [
    WagerSensed(DEV, 3, "main", 2500),
    WagerSensed(DEV, 7, "progressive"),
    WagerRemoved(DEV, 3, "main"),
    LockoutPressed(DEV),
    ShufflerCount(DEV, 52),
    ShufflerCount(DEV, 312, "B"),
    ShuffleFault(DEV, "door open"),
    CardsDispensed(DEV, 41),
    ShoeJam(DEV),
    CardDealt(DEV, parse_card("AS")),
    CardDealt(DEV, parse_card("TD")),
    DiceRolled(DEV, 6, 1),
    Status("OK"),
    Status("FAULT", "door open"),
    Hello(PROTOCOL_VERSION, "SHOE", "5F3A9C21"),
]

COMMANDS = [
    SetAcceptedLight(2, "main", True),
    SetAcceptedLight(2, "main", False),
    SetWinLight(5, True),
    SetLockoutLamp(True),
    SetLockoutLamp(False),
    ShowAmounts((("MEGA", 12_500_000), ("MINI", 250_000))),
    ShowAmounts(()),
    ShowMessage(SignMessage.WIN, "T12", 3, 12_500_000),
    ShowMessage(SignMessage.PENDING),
    ShowMessage(SignMessage.OFFLINE),
    ShowMessage(SignMessage.CLOSED, table="T12"),
    Ping(),
    Hello(PROTOCOL_VERSION, "CONTROLLER", "A1B2C3D4"),
]


def through_wire(msg, role):
    verb, args = to_wire(msg)
    (frame,) = Decoder().feed(encode(5, verb, args))
    assert isinstance(frame, Frame)
    return from_wire(frame.verb, frame.args, role=role, device=DEV)


@pytest.mark.parametrize("event", EVENTS, ids=repr)
def test_every_event_round_trips(event):
    assert through_wire(event, Role.CONTROLLER) == event


@pytest.mark.parametrize("command", COMMANDS, ids=repr)
def test_every_command_round_trips(command):
    assert through_wire(command, Role.DEVICE) == command


@given(st.integers(1, 99), st.from_regex(r"[A-Za-z0-9_.\-]{1,24}", fullmatch=True),
       st.none() | st.integers(0, 999_999_999_999))
def test_wager_round_trips(seat, spot, cents):
    ev = WagerSensed(DEV, seat, spot, cents)
    assert through_wire(ev, Role.CONTROLLER) == ev


@given(st.integers(0, 51))
def test_every_card_round_trips(card):
    assert through_wire(CardDealt(DEV, card), Role.CONTROLLER) == CardDealt(DEV, card)


def test_money_is_integer_cents_on_the_wire():
    assert to_wire(WagerSensed(DEV, 1, "main", 2500)) == ("WAGER", ("1", "main", "2500"))
    with pytest.raises(ArgError) as e:
        to_wire(WagerSensed(DEV, 1, "main", 25.0))  # type: ignore[arg-type]
    assert e.value.field == "amount_cents"
    with pytest.raises(ArgError) as e:
        from_wire("WAGER", ("1", "main", "25.00"), role=Role.CONTROLLER, device=DEV)
    assert (e.value.field, e.value.code) == ("amount_cents", NAK_SYNTAX)


@pytest.mark.parametrize("verb, args, seats, field, code", [
    ("WAGER", ("9", "main"), 7, "seat", NAK_RANGE),
    ("WAGER", ("0", "main"), None, "seat", NAK_RANGE),
    ("WAGER", ("x", "main"), None, "seat", NAK_SYNTAX),
    ("WAGER", ("1", "ma/in"), None, "spot", NAK_SYNTAX),
    ("WAGER", ("1",), None, "args", NAK_ARGS),
    ("WAGER", ("1", "main", "5", "6"), None, "args", NAK_ARGS),
    ("WAGER", ("1", "main", "-5"), None, "amount_cents", NAK_SYNTAX),
    ("CARD", ("ZZ",), None, "card", NAK_UNKNOWN),
    ("CARD", ("1S",), None, "card", NAK_UNKNOWN),
    ("COUNT", ("12x",), None, "count", NAK_SYNTAX),
    ("COUNT", ("10000",), None, "count", NAK_RANGE),
    ("DISPENSED", ("1e3",), None, "count", NAK_SYNTAX),
    ("DICE", ("0", "3"), None, "die1", NAK_RANGE),
    ("DICE", ("3", "7"), None, "die2", NAK_RANGE),
    ("JAM", ("now",), None, "args", NAK_ARGS),
    ("SHUFFLEFAULT", (), None, "reason", NAK_ARGS),
    ("FROB", (), None, "verb", NAK_UNKNOWN),
    ("PING", (), None, "verb", NAK_UNKNOWN),  # a controller's verb, sent by a device
    ("ACCEPTLIGHT", ("1", "main", "1"), None, "verb", NAK_UNKNOWN),
    ("HELLO", ("2", "SHOE", "AB"), None, "version", NAK_UNKNOWN),
    ("HELLO", ("1", "shoe", "AB"), None, "kind", NAK_SYNTAX),
])
def test_controller_refuses_naming_the_field(verb, args, seats, field, code):
    with pytest.raises(ArgError) as e:
        from_wire(verb, args, role=Role.CONTROLLER, device=DEV, seats=seats)
    assert (e.value.field, e.value.code) == (field, code)
    assert isinstance(e.value, InputError)


@pytest.mark.parametrize("verb, args, seats, field, code", [
    ("ACCEPTLIGHT", ("5", "main", "1"), 4, "seat", NAK_RANGE),
    ("ACCEPTLIGHT", ("1", "main", "on"), None, "on", NAK_SYNTAX),
    ("WINLIGHT", ("1",), None, "args", NAK_ARGS),
    ("AMOUNTS", ("MEGA:100",), None, "amounts[0]", NAK_SYNTAX),
    ("AMOUNTS", ("MEGA=1", "MINI=1.5"), None, "amounts[1]", NAK_SYNTAX),
    ("MESSAGE", ("HELLO",), None, "message", NAK_UNKNOWN),
    ("MESSAGE", ("WIN", "table=T1", "seat=3"), None, "args", NAK_ARGS),
    ("MESSAGE", ("PENDING", "colour=red"), None, "colour", NAK_UNKNOWN),
    ("MESSAGE", ("PENDING", "seat=1", "seat=2"), None, "seat", NAK_SYNTAX),
    ("WAGER", ("1", "main"), None, "verb", NAK_UNKNOWN),  # a device's verb, sent by a controller
])
def test_device_refuses_naming_the_field(verb, args, seats, field, code):
    with pytest.raises(ArgError) as e:
        from_wire(verb, args, role=Role.DEVICE, seats=seats)
    assert (e.value.field, e.value.code) == (field, code)


@pytest.mark.parametrize("msg, field", [
    (SetWinLight(8, True), "seat"),
    (SetAcceptedLight(1, "two words", True), "spot"),
    (ShowAmounts((("MEGA", -1),)), "amounts[0]"),
    (ShowAmounts((("MEGA", 10.5),)), "amounts[0]"),  # type: ignore[arg-type]
    (ShowMessage(SignMessage.WIN, "T1", 3), "message"),
    (ShuffleFault(DEV, "  "), "reason"),
    (ShuffleFault(DEV, "a*b"), "reason"),
    (CardDealt(DEV, 52), "card"),
    (DiceRolled(DEV, 0, 1), "die1"),
])
def test_to_wire_refuses_naming_the_field(msg, field):
    with pytest.raises(ArgError) as e:
        to_wire(msg, seats=6)
    assert e.value.field == field


# --- the sequence / ACK state machine -----------------------------------------------------------


def frame(seq, verb, *args):
    (f,) = Decoder().feed(encode(seq, verb, args))
    return f


def hello(seq, boot):
    return frame(seq, "HELLO", PROTOCOL_VERSION, "SHOE", boot)


def test_new_frame_is_acked_and_a_repeat_acked_again_not_applied():
    link = Link(Role.CONTROLLER, device=DEV)
    r1 = link.receive(frame(4, "CARD", "AS"))
    assert r1.message == CardDealt(DEV, parse_card("AS")) and r1.reply == encode(4, "ACK")
    r2 = link.receive(frame(4, "CARD", "AS"))
    assert r2.duplicate and r2.message is None and r2.reply == r1.reply
    r3 = link.receive(frame(5, "CARD", "AS"))  # the same card again, but a new frame: a new event
    assert r3.message == r1.message and not r3.duplicate


def test_a_refused_frame_gets_the_same_nak_when_repeated_and_is_never_applied():
    link = Link(Role.CONTROLLER, device=DEV, seats=6)
    r1 = link.receive(frame(9, "WAGER", "8", "main"))
    assert r1.message is None and r1.error is not None and r1.reply == encode(9, "NAK", ("seat", "RANGE"))
    r2 = link.receive(frame(9, "WAGER", "8", "main"))
    assert r2.duplicate and r2.reply == r1.reply and r2.message is None


def test_ack_and_nak_answer_our_frames_and_are_never_answered():
    link = Link(Role.DEVICE)
    assert link.receive(frame(3, "ACK")).answer == Ack(3)
    r = link.receive(frame(3, "NAK", "seat", "RANGE"))
    assert r.answer == Nak(3, "seat", "RANGE") and r.reply is None
    bad = link.receive(frame(3, "ACK", "extra"))
    assert bad.answer is None and bad.reply is None and bad.error is not None


def test_outgoing_numbers_wrap_after_9999():
    link = Link(Role.DEVICE, tx_seq=9998)
    seqs = [link.next_frame(Status())[0] for _ in range(3)]
    assert seqs == [9998, 9999, 0]


def test_reboot_starts_the_numbering_afresh():
    """A rebooted device's first frames reuse numbers; its new boot id keeps them from being repeats."""
    link = Link(Role.CONTROLLER, device=DEV)
    first = link.receive(hello(0, "AAAA"))
    assert isinstance(first.message, Hello) and not first.rebooted  # first contact is not a reboot
    assert link.receive(frame(1, "CARD", "AS")).message is not None
    # Reboot: HELLO 0000 and then CARD 0001 again, a different card.
    r = link.receive(hello(0, "BBBB"))
    assert r.rebooted and r.previous_boot == "AAAA" and isinstance(r.message, Hello)
    r = link.receive(frame(1, "CARD", "KD"))
    assert r.message == CardDealt(DEV, parse_card("KD")) and not r.duplicate
    # A retransmitted HELLO of the same boot is a repeat.
    assert link.receive(frame(1, "CARD", "KD")).duplicate


def test_same_boot_hello_is_not_a_reboot():
    link = Link(Role.CONTROLLER, device=DEV)
    link.receive(hello(0, "AAAA"))
    link.receive(frame(1, "CARD", "AS"))
    again = link.receive(hello(2, "AAAA"))  # answering a controller's reconnect
    assert not again.rebooted and isinstance(again.message, Hello)
    assert link.receive(hello(2, "AAAA")).duplicate


@given(st.lists(st.integers(0, 3), max_size=40))
def test_exactly_once_under_any_pattern_of_lost_acks(pattern):
    """A sender that repeats each frame until it is acknowledged; ACKs lost at random: every frame
    is applied once, in order."""
    tx = Link(Role.DEVICE)
    rx = Link(Role.CONTROLLER, device=DEV)
    applied = []
    for i, lost_acks in enumerate(pattern):
        seq, data = tx.next_frame(DiceRolled(DEV, 1 + i % 6, 1))
        (f,) = Decoder().feed(data)
        for _ in range(lost_acks + 1):
            r = rx.receive(f)
            if r.message is not None:
                applied.append(r.message)
            assert r.reply == encode(seq, "ACK")
    assert applied == [DiceRolled(DEV, 1 + i % 6, 1) for i in range(len(pattern))]

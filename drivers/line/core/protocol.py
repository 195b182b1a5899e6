"""Messages of the line protocol and the sequence/acknowledgement state of one end. Pure, no I/O.

Frames (drivers.line.core.frame) carry a verb and arguments; this module turns them into messages and back:

- the shared vocabulary of drivers.events (events device -> controller, commands controller -> device);
- link messages: ``Hello`` (who I am, and "I (re)started"), ``Ping`` (controller heartbeat),
  ``Status`` (device heartbeat), ``Ack`` / ``Nak`` (answers, never answered themselves).

``Link`` is the state machine of one end (sans I/O, like h11): it numbers outgoing frames, and for each
incoming frame says what it means, what to answer, and whether it is new or a repeat already applied.
The driver and the device simulator both drive a ``Link``; docs/line-protocol.md is the specification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from controller.cards import card_str, parse_card
from controller.errors import CardError, InputError
from drivers.events import (
    CardDealt,
    CardsDispensed,
    Command,
    DiceRolled,
    Event,
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
from drivers.line.core.frame import MAX_FRAME, SEQ_MODULO, Frame, FrameEncodeError, check_arg, encode

PROTOCOL_VERSION = "1"
CONTROLLER_KIND = "CONTROLLER"  # the kind a controller announces in its HELLO

# --- verbs (spec §4) ----------------------------------------------------------------------------
# link, both directions
HELLO = "HELLO"  # HELLO <version> <kind> <boot-id>
ACK = "ACK"  # ACK, with the acknowledged frame's sequence number
NAK = "NAK"  # NAK <field> <code>, likewise
# heartbeats
PING = "PING"  # controller -> device, when it has sent nothing for a heartbeat interval
STATUS = "STATUS"  # device -> controller, STATUS <state> [<detail>...]
# events, device -> controller
WAGER = "WAGER"  # WAGER <seat> <spot> [<cents>]
UNWAGER = "UNWAGER"  # UNWAGER <seat> <spot>
LOCKOUT = "LOCKOUT"  # lock-out pressed, "no more bets" (639a.2(c), 667a.2(c))
COUNT = "COUNT"  # COUNT <cards> [<deck>]: shuffler count after a shuffle (667a.5(b))
SHUFFLEFAULT = "SHUFFLEFAULT"  # SHUFFLEFAULT <reason>...
DISPENSED = "DISPENSED"  # DISPENSED <cards>: shoe count since the last shuffle (667a.13(d)-(e))
JAM = "JAM"  # shoe jam (667a.13)
CARD = "CARD"  # CARD <card>, e.g. CARD AS
DICE = "DICE"  # DICE <die1> <die2>
# commands, controller -> device
ACCEPTLIGHT = "ACCEPTLIGHT"  # ACCEPTLIGHT <seat> <spot> <0|1>
WINLIGHT = "WINLIGHT"  # WINLIGHT <seat> <0|1>
LOCKLAMP = "LOCKLAMP"  # LOCKLAMP <0|1>
AMOUNTS = "AMOUNTS"  # AMOUNTS [<meter>=<cents>]...
MESSAGE = "MESSAGE"  # MESSAGE <WIN|PENDING|OFFLINE|CLOSED> [table=<t>] [seat=<n>] [cents=<n>]

# --- NAK codes (spec §5) ------------------------------------------------------------------------
NAK_UNKNOWN = "UNKNOWN"  # unknown verb, card, message, key or protocol version
NAK_RANGE = "RANGE"  # a number outside its range (seat, die, count)
NAK_SYNTAX = "SYNTAX"  # not a number, not a token, not 0/1
NAK_ARGS = "ARGS"  # wrong number of arguments (field "args"), or a required one missing

# --- argument bounds (spec §4) ------------------------------------------------------------------
MAX_SEAT = 99  # when the table's seat count is not configured
MAX_CENTS = 999_999_999_999  # 12 digits: money is integer cents, never a decimal point
MAX_CARD_COUNT = 9999
MAX_TEXT_WORDS = 12  # reason/detail text
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]{1,24}")  # spot, deck, meter id, table
_KIND = re.compile(r"[A-Z][A-Z0-9_]{0,15}")  # device kind, status state
_BOOT_ID = re.compile(r"[A-Za-z0-9]{1,16}")


class ArgError(InputError):
    """A frame whose verb or arguments are wrong. ``code`` is the NAK code sent back."""

    def __init__(self, field: str, problem: str, code: str) -> None:
        super().__init__(field, problem)
        self.code = code


class Role(StrEnum):
    CONTROLLER = "controller"
    DEVICE = "device"


@dataclass(frozen=True, slots=True)
class Hello:
    version: str
    kind: str
    boot_id: str


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Status:
    state: str = "OK"
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Ack:
    seq: int


@dataclass(frozen=True, slots=True)
class Nak:
    seq: int
    field: str
    code: str


Message = Hello | Ping | Status | Event | Command

# --- argument parsing ---------------------------------------------------------------------------


def _nargs(args: tuple[str, ...], lo: int, hi: int | None = None) -> None:
    hi = lo if hi is None else hi
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ArgError("args", f"{len(args)} arguments, expected {want}", NAK_ARGS)


def _uint(text: str, field: str, lo: int, hi: int) -> int:
    # Digits only: no sign, no decimal point, no exponent (money is integer cents).
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise ArgError(field, f"{text!r} is not a whole number", NAK_SYNTAX)
    value = int(text)
    if not lo <= value <= hi:
        raise ArgError(field, f"{value} is outside {lo}..{hi}", NAK_RANGE)
    return value


def _seat(text: str, seats: int | None, field: str = "seat") -> int:
    return _uint(text, field, 1, seats or MAX_SEAT)


def _token(text: str, field: str) -> str:
    if not _TOKEN.fullmatch(text):
        raise ArgError(field, f"{text!r} is not a name of 1-24 letters, digits, '_', '.', '-'", NAK_SYNTAX)
    return text


def _flag(text: str, field: str = "on") -> bool:
    if text not in ("0", "1"):
        raise ArgError(field, f"{text!r} is not 0 or 1", NAK_SYNTAX)
    return text == "1"


def _text(words: tuple[str, ...], field: str) -> str:
    if not 1 <= len(words) <= MAX_TEXT_WORDS:
        raise ArgError(field, f"1 to {MAX_TEXT_WORDS} words required", NAK_ARGS)
    return " ".join(words)


def _words(text: str, field: str) -> list[str]:
    """Free text as frame arguments: one per word."""
    words = text.split()
    if not 1 <= len(words) <= MAX_TEXT_WORDS:
        raise ArgError(field, f"{text!r}: 1 to {MAX_TEXT_WORDS} words required", NAK_ARGS)
    for w in words:
        try:
            check_arg(w, field)
        except FrameEncodeError as e:
            raise ArgError(field, e.problem, NAK_SYNTAX) from None
    return words


def _check_seat_out(seat: object, seats: int | None, field: str = "seat") -> str:
    if not isinstance(seat, int) or isinstance(seat, bool) or not 1 <= seat <= (seats or MAX_SEAT):
        raise ArgError(field, f"{seat!r} is not a seat 1..{seats or MAX_SEAT}", NAK_RANGE)
    return str(seat)


def _check_uint_out(value: object, field: str, hi: int) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= hi:
        raise ArgError(field, f"{value!r} is not a whole number 0..{hi}", NAK_RANGE)
    return str(value)


def _check_token_out(text: object, field: str) -> str:
    if not isinstance(text, str):
        raise ArgError(field, f"{text!r} is not a string", NAK_SYNTAX)
    return _token(text, field)


# --- messages -> (verb, args) -------------------------------------------------------------------


def _amounts_out(amounts: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    args = []
    for i, pair in enumerate(amounts):
        try:
            meter, cents = pair
        except (TypeError, ValueError):
            raise ArgError(f"amounts[{i}]", f"{pair!r} is not (meter_id, cents)", NAK_SYNTAX) from None
        meter = _check_token_out(meter, f"amounts[{i}]")
        args.append(f"{meter}={_check_uint_out(cents, f'amounts[{i}]', MAX_CENTS)}")
    return tuple(args)


def _message_out(msg: ShowMessage, seats: int | None) -> tuple[str, ...]:
    table, seat, amount = msg.table, msg.seat, msg.amount_cents
    try:
        message = SignMessage(msg.message)
    except ValueError:
        raise ArgError("message", f"{msg.message!r} is not a sign message", NAK_UNKNOWN) from None
    if message is SignMessage.WIN and (table is None or seat is None or amount is None):
        raise ArgError("message", "WIN needs table, seat and amount", NAK_ARGS)
    args = [message.value]
    if table is not None:
        args.append(f"table={_check_token_out(table, 'table')}")
    if seat is not None:
        args.append(f"seat={_check_seat_out(seat, seats)}")
    if amount is not None:
        args.append(f"cents={_check_uint_out(amount, 'amount_cents', MAX_CENTS)}")
    return tuple(args)


# C901: one case a message of the protocol, a flat table
def to_wire(msg: Message, *, seats: int | None = None) -> tuple[str, tuple[str, ...]]:  # noqa: C901
    """The verb and arguments of a message. Raises ArgError (an InputError) naming the field for a
    message the protocol cannot carry (seat out of range, a float for cents, a name with spaces)."""
    match msg:
        case Hello(version, kind, boot_id):
            if not _KIND.fullmatch(kind):
                raise ArgError("kind", f"{kind!r} is not A-Z, 0-9, _ (at most 16)", NAK_SYNTAX)
            if not _BOOT_ID.fullmatch(boot_id):
                raise ArgError("boot_id", f"{boot_id!r} is not 1-16 letters or digits", NAK_SYNTAX)
            return HELLO, (version, kind, boot_id)
        case Ping():
            return PING, ()
        case Status(state, detail):
            if not _KIND.fullmatch(state):
                raise ArgError("state", f"{state!r} is not A-Z, 0-9, _", NAK_SYNTAX)
            return STATUS, (state, *(_words(detail, "detail") if detail else ()))
        case WagerSensed(_, seat, spot, amount):
            args = [_check_seat_out(seat, seats), _check_token_out(spot, "spot")]
            if amount is not None:
                args.append(_check_uint_out(amount, "amount_cents", MAX_CENTS))
            return WAGER, tuple(args)
        case WagerRemoved(_, seat, spot):
            return UNWAGER, (_check_seat_out(seat, seats), _check_token_out(spot, "spot"))
        case LockoutPressed():
            return LOCKOUT, ()
        case ShufflerCount(_, count, deck):
            args = [_check_uint_out(count, "count", MAX_CARD_COUNT)]
            if deck is not None:
                args.append(_check_token_out(deck, "deck"))
            return COUNT, tuple(args)
        case ShuffleFault(_, reason):
            return SHUFFLEFAULT, tuple(_words(reason, "reason"))
        case CardsDispensed(_, count):
            return DISPENSED, (_check_uint_out(count, "count", MAX_CARD_COUNT),)
        case ShoeJam():
            return JAM, ()
        case CardDealt(_, card):
            if not isinstance(card, int) or isinstance(card, bool) or not 0 <= card <= 51:
                raise ArgError("card", f"{card!r} is not a card 0..51", NAK_UNKNOWN)
            return CARD, (card_str(card),)
        case DiceRolled(_, die1, die2):
            for name, d in (("die1", die1), ("die2", die2)):
                if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= 6:
                    raise ArgError(name, f"{d!r} is not a die face 1..6", NAK_RANGE)
            return DICE, (str(die1), str(die2))
        case SetAcceptedLight(seat, spot, on):
            return ACCEPTLIGHT, (_check_seat_out(seat, seats), _check_token_out(spot, "spot"), "1" if on else "0")
        case SetWinLight(seat, on):
            return WINLIGHT, (_check_seat_out(seat, seats), "1" if on else "0")
        case SetLockoutLamp(on):
            return LOCKLAMP, ("1" if on else "0",)
        case ShowAmounts(amounts):
            return AMOUNTS, _amounts_out(amounts)
        case ShowMessage():
            return MESSAGE, _message_out(msg, seats)
    raise ArgError("message", f"{type(msg).__name__} is not a message of the line protocol", NAK_UNKNOWN)


# --- (verb, args) -> messages -------------------------------------------------------------------


def decode_hello(args: tuple[str, ...]) -> Hello:
    _nargs(args, 3)
    version, kind, boot_id = args
    if version != PROTOCOL_VERSION:
        raise ArgError("version", f"protocol version {version!r}, this end speaks {PROTOCOL_VERSION}", NAK_UNKNOWN)
    if not _KIND.fullmatch(kind):
        raise ArgError("kind", f"{kind!r} is not A-Z, 0-9, _ (at most 16)", NAK_SYNTAX)
    if not _BOOT_ID.fullmatch(boot_id):
        raise ArgError("boot_id", f"{boot_id!r} is not 1-16 letters or digits", NAK_SYNTAX)
    return Hello(version, kind, boot_id)


def _decode_event(verb: str, args: tuple[str, ...], device: str, seats: int | None) -> Message:
    if verb == WAGER:
        _nargs(args, 2, 3)
        amount = _uint(args[2], "amount_cents", 0, MAX_CENTS) if len(args) == 3 else None
        return WagerSensed(device, _seat(args[0], seats), _token(args[1], "spot"), amount)
    if verb == UNWAGER:
        _nargs(args, 2)
        return WagerRemoved(device, _seat(args[0], seats), _token(args[1], "spot"))
    if verb == LOCKOUT:
        _nargs(args, 0)
        return LockoutPressed(device)
    if verb == COUNT:
        _nargs(args, 1, 2)
        deck = _token(args[1], "deck") if len(args) == 2 else None
        return ShufflerCount(device, _uint(args[0], "count", 0, MAX_CARD_COUNT), deck)
    if verb == SHUFFLEFAULT:
        return ShuffleFault(device, _text(args, "reason"))
    if verb == DISPENSED:
        _nargs(args, 1)
        return CardsDispensed(device, _uint(args[0], "count", 0, MAX_CARD_COUNT))
    if verb == JAM:
        _nargs(args, 0)
        return ShoeJam(device)
    if verb == CARD:
        _nargs(args, 1)
        try:
            return CardDealt(device, parse_card(args[0], "card"))
        except CardError as e:
            raise ArgError("card", e.problem, NAK_UNKNOWN) from None
    if verb == DICE:
        _nargs(args, 2)
        return DiceRolled(device, _uint(args[0], "die1", 1, 6), _uint(args[1], "die2", 1, 6))
    if verb == STATUS:
        _nargs(args, 1, 1 + MAX_TEXT_WORDS)
        if not _KIND.fullmatch(args[0]):
            raise ArgError("state", f"{args[0]!r} is not A-Z, 0-9, _", NAK_SYNTAX)
        return Status(args[0], " ".join(args[1:]) or None)
    raise ArgError("verb", f"{verb!r} is not a verb a device sends", NAK_UNKNOWN)


def _decode_message_args(args: tuple[str, ...], seats: int | None) -> ShowMessage:
    _nargs(args, 1, 4)
    try:
        message = SignMessage(args[0])
    except ValueError:
        raise ArgError("message", f"{args[0]!r} is not one of WIN PENDING OFFLINE CLOSED", NAK_UNKNOWN) from None
    found: dict[str, str] = {}
    for arg in args[1:]:
        key, eq, value = arg.partition("=")
        if not eq or not value:
            raise ArgError("args", f"{arg!r} is not key=value", NAK_SYNTAX)
        if key not in ("table", "seat", "cents"):
            raise ArgError(key if _TOKEN.fullmatch(key) else "args", f"unknown key {key!r}", NAK_UNKNOWN)
        if key in found:
            raise ArgError(key, "given twice", NAK_SYNTAX)
        found[key] = value
    table = _token(found["table"], "table") if "table" in found else None
    seat = _seat(found["seat"], seats) if "seat" in found else None
    cents = _uint(found["cents"], "cents", 0, MAX_CENTS) if "cents" in found else None
    if message is SignMessage.WIN and (table is None or seat is None or cents is None):
        raise ArgError("args", "WIN needs table=, seat= and cents=", NAK_ARGS)
    return ShowMessage(message, table, seat, cents)


def _decode_command(verb: str, args: tuple[str, ...], seats: int | None) -> Message:
    if verb == ACCEPTLIGHT:
        _nargs(args, 3)
        return SetAcceptedLight(_seat(args[0], seats), _token(args[1], "spot"), _flag(args[2]))
    if verb == WINLIGHT:
        _nargs(args, 2)
        return SetWinLight(_seat(args[0], seats), _flag(args[1]))
    if verb == LOCKLAMP:
        _nargs(args, 1)
        return SetLockoutLamp(_flag(args[0]))
    if verb == AMOUNTS:
        amounts = []
        for i, arg in enumerate(args):
            meter, eq, cents = arg.partition("=")
            if not eq:
                raise ArgError(f"amounts[{i}]", f"{arg!r} is not meter=cents", NAK_SYNTAX)
            amounts.append((_token(meter, f"amounts[{i}]"), _uint(cents, f"amounts[{i}]", 0, MAX_CENTS)))
        return ShowAmounts(tuple(amounts))
    if verb == MESSAGE:
        return _decode_message_args(args, seats)
    if verb == PING:
        _nargs(args, 0)
        return Ping()
    raise ArgError("verb", f"{verb!r} is not a verb a controller sends", NAK_UNKNOWN)


def from_wire(verb: str, args: tuple[str, ...], *, role: Role, device: str = "", seats: int | None = None) -> Message:
    """The message a frame carries, as received by ``role``. Raises ArgError naming the field."""
    if verb == HELLO:
        return decode_hello(args)
    if role is Role.CONTROLLER:
        return _decode_event(verb, args, device, seats)
    return _decode_command(verb, args, seats)


# --- sequence and acknowledgement state ---------------------------------------------------------


def next_seq(seq: int) -> int:
    return (seq + 1) % SEQ_MODULO


def ack_frame(seq: int) -> bytes:
    return encode(seq, ACK)


def nak_frame(seq: int, field: str, code: str) -> bytes:
    # The field must travel as one argument; our own field names always do.
    safe = field if _TOKEN.fullmatch(field.replace("[", "").replace("]", "")) else "args"
    return encode(seq, NAK, (safe, code))


@dataclass
class Received:
    """What one incoming frame means for this end.

    ``message``: new, to be applied now (exactly once). ``reply``: the ACK/NAK frame to write back
    (also for a repeat). ``answer``: an ACK/NAK of one of our frames. ``duplicate``: a repeat of the
    frame applied last, not to be applied again. ``error``: why the frame was refused (NAKed).
    ``rebooted``: a HELLO with a boot id other than the one we knew (``previous_boot``).
    """

    message: Message | None = None
    reply: bytes | None = None
    answer: Ack | Nak | None = None
    duplicate: bool = False
    error: ArgError | None = None
    rebooted: bool = False
    previous_boot: str | None = None


@dataclass
class Link:
    """One end of a connection: outgoing numbering and what the peer's frames mean.

    Stop-and-wait: each end has at most one unacknowledged frame of its own at a time, so the
    receiver only has to remember the sequence number it applied last (and the answer it gave) to
    recognise a retransmission. A HELLO with a new boot id starts the peer's numbering afresh.
    """

    role: Role
    device: str = ""
    seats: int | None = None
    max_frame: int = MAX_FRAME
    tx_seq: int = 0
    peer_boot: str | None = None
    last_seq: int | None = None
    last_reply: bytes | None = field(default=None, repr=False)

    def next_frame(self, msg: Message) -> tuple[int, bytes]:
        """A new sequence number and the frame for ``msg``; retransmissions reuse both."""
        verb, args = to_wire(msg, seats=self.seats)
        seq = self.tx_seq
        data = encode(seq, verb, args, max_frame=self.max_frame)
        self.tx_seq = next_seq(seq)
        return seq, data

    def next_raw(self, verb: str, args: tuple[str, ...] = ()) -> tuple[int, bytes]:
        """Like next_frame for a verb and arguments as they are (test rigs: unknown verbs, bad args)."""
        seq = self.tx_seq
        data = encode(seq, verb, args, max_frame=self.max_frame)
        self.tx_seq = next_seq(seq)
        return seq, data

    def refuse(self, seq: int, field: str, code: str) -> bytes:
        """Answer the frame just received with a NAK after all (a device that decoded a command it
        does not implement); a retransmission then gets the same NAK."""
        reply = nak_frame(seq, field, code)
        self._answer(seq, reply)
        return reply

    def forget_peer(self) -> None:
        self.peer_boot = None
        self.last_seq = None
        self.last_reply = None

    def _answer(self, seq: int, reply: bytes) -> None:
        self.last_seq = seq
        self.last_reply = reply

    def receive(self, frame: Frame) -> Received:
        if frame.verb == ACK:
            if frame.args:
                return Received(error=ArgError("args", "ACK takes no arguments", NAK_ARGS))
            return Received(answer=Ack(frame.seq))
        if frame.verb == NAK:
            if len(frame.args) != 2:
                return Received(error=ArgError("args", "NAK takes a field and a code", NAK_ARGS))
            return Received(answer=Nak(frame.seq, frame.args[0], frame.args[1]))

        rebooted, previous = False, self.peer_boot
        if frame.verb == HELLO:
            try:
                hello = decode_hello(frame.args)
            except ArgError as e:
                reply = nak_frame(frame.seq, e.field, e.code)
                self._answer(frame.seq, reply)
                return Received(reply=reply, error=e)
            if hello.boot_id != self.peer_boot:
                # A new boot (or first contact): its numbering owes nothing to the old one.
                rebooted = self.peer_boot is not None
                self.peer_boot = hello.boot_id
                self.last_seq = None
                self.last_reply = None

        if frame.seq == self.last_seq:
            return Received(duplicate=True, reply=self.last_reply)
        try:
            msg = from_wire(frame.verb, frame.args, role=self.role, device=self.device, seats=self.seats)
        except ArgError as e:
            reply = nak_frame(frame.seq, e.field, e.code)
            self._answer(frame.seq, reply)
            return Received(reply=reply, error=e)
        reply = ack_frame(frame.seq)
        self._answer(frame.seq, reply)
        return Received(message=msg, reply=reply, rebooted=rebooted, previous_boot=previous)


__all__ = ["ACCEPTLIGHT", "ACK", "AMOUNTS", "CARD", "CONTROLLER_KIND", "COUNT", "DICE", "DISPENSED", "HELLO", "JAM",
           "LOCKLAMP", "LOCKOUT", "MAX_CARD_COUNT", "MAX_CENTS", "MAX_SEAT", "MAX_TEXT_WORDS", "MESSAGE", "NAK",
           "NAK_ARGS", "NAK_RANGE", "NAK_SYNTAX", "NAK_UNKNOWN", "PING", "PROTOCOL_VERSION", "SHUFFLEFAULT", "STATUS",
           "UNWAGER", "WAGER", "WINLIGHT", "Ack", "ArgError", "Hello", "Link", "Message", "Nak", "Ping", "Received",
           "Role", "Status", "ack_frame", "decode_hello", "from_wire", "nak_frame", "next_seq", "to_wire"]

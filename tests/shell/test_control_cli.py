"""`progressivectl` talking to a running daemon, against a control server running in a thread of the test with a
handler of canned answers: most through `ctl.main(argv)` in this process, the contract tests (marked
`process=True`, and the terminal prompt) through the installed command as a child process."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from controller.errors import InputError, RulesError
from controller.ledger import Ledger, verify_state_dir
from controller.meter import BookContributions, CloseRound, PayFixedAward, PayPercentAward, params_from_dict
from controller.meter.journal import define_meter_body, op_body
from controller.round.journal import JournalReducer
from controller.service.control import ControlServer, NotAvailable, UnknownOp
from controller.service.views import hit_json, meter_json

from ctlrun import run_ctl

CTL = Path(sys.executable).parent / "progressivectl"
AT = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
WAIT_S = 10.0
SECRET = "c0rrect-h0rse-battery"

WRONG_MODEL = ("seat-3 (bus table-bus, unit 3) reports model 'PJ-LOCKOUT-1' at input_register 4096-4103; "
               "expected model 'PJ-SEAT-1' (map seat-single.toml)")
STATUS = {
    "table": "CS-07",
    "game": "caribbean-stud",
    "version": "0.1.0",
    "round": {"id": "CS-07-r12", "phase": "betting"},
    "blocks": [{"block": "stub", "sources": ["start-up"]}],
    "seats_disabled": [{"seat": 3, "device": "seat-3", "reason": "no answer within 0.5 s"}],
    "devices": [
        {"id": "seat-1", "kind": "seat", "model": "PJ-SEAT-1", "identity": "checked", "up": True, "errors": 0,
         "last_error": None},
        {"id": "seat-3", "kind": "seat", "model": "PJ-SEAT-1", "identity": WRONG_MODEL, "up": False, "errors": 4,
         "last_error": "no answer within 0.5 s"},
        {"id": "sign", "kind": "sign", "model": "sign-led", "identity": "not checked: the map has no identity block",
         "up": True, "errors": 1, "last_error": None},
    ],
    "meters": [{"meter": "main", "amount": "10234.56"}, {"meter": "bonus", "amount": "10000.00"}],
    "ledger_head_seq": 1234,
    "ledger_head_hash": "3f2a" + "0" * 56 + "9c41",
    "anchor": {"seq": 1230, "hash": "ab" * 32, "at": "2026-12-01T09:14:03.118Z", "mac": "cd" * 32,
               "file": "/var/lib/progressive-anchor/anchor"},
    "uptime_seconds": 93784,
}

ROUND = {
    "id": "CS-07-r12",
    "phase": "dealing",
    "wagers": [
        {"seat": 1, "spot": "progressive", "amount": "1.00"},
        {"seat": 3, "spot": "progressive", "amount": "5.00"},
        {"seat": 3, "spot": "five-card-hand-bonus", "amount": "1.00"},
    ],
    "not_recognized": 2,
}


class Handler:
    """The daemon's side: canned answers for the reads, a message for each action; `raises[op]` refuses."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.raises: dict[str, BaseException] = {}
        self.reads: dict[str, Any] = {"status": STATUS, "round": ROUND, "meters": [], "history": []}

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        self.calls.append((op, args))
        if op in self.raises:
            raise self.raises[op]
        if op in self.reads:
            return self.reads[op]
        if op in ACTIONS:
            return {"message": f"{op} done", "op": op, "amount": "10000.00"}
        raise UnknownOp(op)


ACTIONS = {"void", "settle", "deck_replaced", "stub_count", "close_table", "open_table", "claim", "approve", "reject"}


class Daemon:
    """A control server in a thread with its own event loop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handler = Handler()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="control-server", daemon=True)
        self.server = ControlServer(path, self.handler)

    def __enter__(self) -> Daemon:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(WAIT_S)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(WAIT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        self.loop.close()


def short_dir() -> Path:
    d = tempfile.mkdtemp(prefix="ctl-")
    if len(d) > 60:  # a socket path has at most 107 bytes
        shutil.rmtree(d)
        d = tempfile.mkdtemp(prefix="ctl-", dir="/tmp")
    return Path(d)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory) -> Path:
    """A journal with two meters; the first paid two hits."""
    path = tmp_path_factory.mktemp("state") / "progressive"
    ledger = Ledger.open(path, JournalReducer(), software_digest="sha256:test")
    try:
        for meter_id, rate in (("cs-1", "0.15"), ("cs-bonus", "0.2")):
            params = params_from_dict({"meter_id": meter_id, "reset": "10000.00", "rate": rate,
                                       "reserve_rate": "0.05", "wager_sizes": ["1.00", "5.00"]}, "params")
            ledger.submit("define-meter", define_meter_body(params, "slot-tech 4411", AT), key=f"define:{meter_id}")
        ops = [
            BookContributions("r1", "table-3", ((7, 500), (4, 100), (1, 100)), AT),
            PayFixedAward("r1", "table-3", 4, "four-of-a-kind", "300 for 1", 30_000, "table", AT + timedelta(minutes=1),
                          "floor 1207"),
            PayPercentAward("r1", "table-3", 7, "royal-flush", "100% of meter", Fraction(100),
                            AT + timedelta(minutes=2), "floor 1207"),
            CloseRound("r1", AT + timedelta(minutes=3)),
        ]
        for i, op in enumerate(ops):
            ledger.submit(op.kind, op_body("cs-1", op), key=f"table-3:{i}")
    finally:
        ledger.close()
    return path


@pytest.fixture(scope="module")
def daemon_rows(state_dir) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a daemon holding this journal answers to "meters" and "history"."""
    report = verify_state_dir(state_dir, JournalReducer())
    assert report.ok
    meters = [meter_json(report.state[m]) for m in sorted(report.state)]
    hits = [hit_json(m, h) for m in sorted(report.state) for h in report.state[m].history]
    assert len(meters) == 2 and len(hits) == 2
    return meters, list(reversed(hits))  # the daemon's order does not matter: the command sorts


@pytest.fixture(scope="module")
def daemon():
    d = short_dir()
    try:
        with Daemon(d / "control.sock") as running:
            yield running
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def live(daemon) -> Daemon:
    daemon.handler.reset()
    return daemon


@pytest.fixture(autouse=True, scope="module")
def _server_logs_elsewhere():
    """The control server runs in a thread of this process and logs with structlog to standard output, which the
    in-process runs below capture as the command's own: its lines go nowhere while this module runs."""
    import structlog

    saved = structlog.get_config()
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    yield
    structlog.configure(**saved)


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
        process: bool = False) -> subprocess.CompletedProcess[str]:
    return run_ctl(*args, stdin=stdin, env=env, process=process)


def ctl(d: Daemon, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run(*args, "--socket", str(d.path), **kw)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def one_line_error(proc: subprocess.CompletedProcess[str], status: int) -> str:
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and lines[0].startswith("progressivectl: ")
    return lines[0]


@pytest.fixture
def secret_file(tmp_path) -> Path:
    f = tmp_path / "secret"
    f.write_text(SECRET + "\n")
    os.chmod(f, 0o600)
    return f


# --- status and round ----------------------------------------------------------------------------


def test_status_for_people(live):
    assert ok(ctl(live, "status", process=True)) == (
        "table CS-07: caribbean-stud, up 1d 02:03:04 (progressived 0.1.0)\n"
        "round CS-07-r12: betting\n"
        "wagering: DISABLED: stub (start-up)\n"
        "seats disabled: 3 (seat-3 down: no answer within 0.5 s)\n"
        "devices: 2 up, 1 down\n"
        "  device  kind  model      identity     state  errors  last error\n"
        "  seat-1  seat  PJ-SEAT-1  checked      up          0\n"
        "  seat-3  seat  PJ-SEAT-1  FAILED       DOWN        4  no answer within 0.5 s\n"
        "  sign    sign  sign-led   not checked  up          1\n"
        f"  seat-3: {WRONG_MODEL}\n"
        "meters:\n"
        "  main   $10234.56\n"
        "  bonus  $10000.00\n"
        "ledger: head seq 1234 3f2a" + "0" * 56 + "9c41\n"
        "anchor: seq 1230 at 2026-12-01T09:14:03.118Z (keyed)\n"
    )
    assert live.handler.calls == [("status", {})]


def test_status_when_all_is_well(live):
    live.handler.reads["status"] = {**STATUS, "blocks": [], "seats_disabled": [], "devices": [], "meters": [],
                                    "round": None, "uptime_seconds": 59}
    out = ok(ctl(live, "status"))
    assert "up 00:00:59" in out and "round: none" in out and "wagering: enabled" in out
    assert "seats disabled" not in out
    assert "devices: 0 up, 0 down" in out and "meters: none" in out


def test_status_json(live):
    assert json.loads(ok(ctl(live, "status", "--json"))) == STATUS


def test_round_for_people_and_json(live):
    assert ok(ctl(live, "round")) == (
        "round CS-07-r12: dealing\n"
        "  seat  spot                  amount\n"
        "     1  progressive            $1.00\n"
        "     3  progressive            $5.00\n"
        "     3  five-card-hand-bonus   $1.00\n"
        "3 wagers accepted, $7.00\n"
        "not recognized: 2\n"
    )
    assert json.loads(ok(ctl(live, "round", "--json"))) == ROUND
    live.handler.reads["round"] = {"id": "CS-07-r13", "phase": "betting", "wagers": [], "not_recognized": 0}
    assert ok(ctl(live, "round")) == "round CS-07-r13: betting\nno wagers accepted\nnot recognized: 0\n"


def test_an_answer_the_command_cannot_read_is_reported(live):
    live.handler.reads["meters"] = {"not": "a list"}
    line = one_line_error(ctl(live, "meters"), 1)
    assert "meters: the daemon's answer is not understood" in line


# --- meters and history: live the same as offline ------------------------------------------------


@pytest.mark.parametrize("args", [(), ("--json",), ("--meter", "cs-bonus"), ("--meter", "cs-1", "--json")])
def test_meters_live_print_what_the_offline_command_prints(live, state_dir, daemon_rows, args):
    live.handler.reads["meters"] = daemon_rows[0]
    offline = ok(run("meters", "--state", str(state_dir), *args))
    assert ok(ctl(live, "meters", *args)) == offline
    shown = {m for m in ("cs-1", "cs-bonus") if m in offline}
    assert shown == ({args[args.index("--meter") + 1]} if "--meter" in args else {"cs-1", "cs-bonus"})
    assert live.handler.calls == [("meters", {})]


@pytest.mark.parametrize("args", [(), ("--json",), ("--limit", "1"), ("--limit", "1", "--json"), ("--limit", "5"),
                                  ("--meter", "cs-1", "--limit", "1"), ("--meter", "cs-bonus", "--json")])
def test_history_live_prints_what_the_offline_command_prints(live, state_dir, daemon_rows, args):
    live.handler.reads["meters"], live.handler.reads["history"] = daemon_rows
    offline = ok(run("history", "--state", str(state_dir), *args))
    assert ok(ctl(live, "history", *args)) == offline
    if "--json" in args:
        hits = json.loads(offline)
        assert len(hits) == (0 if "cs-bonus" in args else 1 if "1" in args else 2)
    else:
        assert offline.count("\n") == (1 if "1" in args else 2)


def test_history_limit_keeps_the_most_recent(state_dir):
    (hit,) = json.loads(ok(run("history", "--state", str(state_dir), "--limit", "1", "--json")))
    assert hit["hand"] == "royal-flush"


@pytest.mark.parametrize("command", ["meters", "history"])
def test_unknown_meter_is_refused_live_as_offline(live, state_dir, daemon_rows, command):
    live.handler.reads["meters"], live.handler.reads["history"] = daemon_rows
    offline = one_line_error(run(command, "--state", str(state_dir), "--meter", "nope"), 2)
    assert one_line_error(ctl(live, command, "--meter", "nope"), 2) == offline
    assert offline == "progressivectl: --meter: unknown meter 'nope'; defined: cs-1, cs-bonus"


@pytest.mark.parametrize("args, field", [
    (("history", "--limit", "0"), "--limit"),
    (("history", "--limit", "x"), "--limit"),
    (("status", "--timeout", "0"), "--timeout"),
    (("status", "--timeout", "soon"), "--timeout"),
])
def test_bad_options_are_refused_before_asking(live, args, field):
    assert one_line_error(ctl(live, *args), 2).startswith(f"progressivectl: {field}: ")
    assert live.handler.calls == []


def test_state_and_socket_do_not_go_together(live, state_dir):
    line = one_line_error(ctl(live, "meters", "--state", str(state_dir)), 2)
    assert line.startswith("progressivectl: --socket: cannot be used with --state")


# --- actions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, op, args", [
    (["void", "--reason", "misdeal", "--supervisor", "ann"], "void",
     {"supervisor": "ann", "secret": SECRET, "reason": "misdeal"}),
    (["void", "--reason", "misdeal", "--round", "CS-07-r12", "--supervisor", "ann"], "void",
     {"supervisor": "ann", "secret": SECRET, "reason": "misdeal", "round_id": "CS-07-r12"}),
    (["settle-round", "CS-07-r12"], "settle", {"round_id": "CS-07-r12"}),
    (["deck-replaced", "--supervisor", "ann"], "deck_replaced", {"supervisor": "ann", "secret": SECRET}),
    (["stub-count", "40"], "stub_count", {"stub": 40}),
    (["stub-count", "40", "--dealt", "12"], "stub_count", {"stub": 40, "dealt": 12}),
    (["stub-count", "35", "--dealt", "17", "--supervisor", "ann"], "stub_count",
     {"stub": 35, "dealt": 17, "supervisor": "ann", "secret": SECRET}),
    (["settle-round", "CS-07-r12", "--supervisor", "ann"], "settle",
     {"round_id": "CS-07-r12", "supervisor": "ann", "secret": SECRET}),
    (["close-table", "--supervisor", "ann"], "close_table", {"supervisor": "ann", "secret": SECRET}),
    (["open-table", "--supervisor", "ann"], "open_table", {"supervisor": "ann", "secret": SECRET}),
    (["claim", "3", "AS", "KS", "QS", "JS", "TS"], "claim", {"seat": 3, "cards": ["AS", "KS", "QS", "JS", "TS"]}),
    (["claim", "4", "2H", "5H", "9H", "JH", "KH", "--spot", "five-card-hand-bonus"], "claim",
     {"seat": 4, "cards": ["2H", "5H", "9H", "JH", "KH"], "spot": "five-card-hand-bonus"}),
    (["claim", "dealer", "9D", "8D", "7D", "6D", "5D"], "claim",
     {"seat": "dealer", "cards": ["9D", "8D", "7D", "6D", "5D"]}),
    (["claim", "Dealer", "--spot", "five-card-hand-bonus-dealer", "9D", "8D", "7D", "6D", "5D"], "claim",
     {"seat": "dealer", "cards": ["9D", "8D", "7D", "6D", "5D"], "spot": "five-card-hand-bonus-dealer"}),
    (["approve", "CS-07-c1", "--supervisor", "ann"], "approve",
     {"supervisor": "ann", "secret": SECRET, "claim_id": "CS-07-c1"}),
    (["reject", "CS-07-c1", "--supervisor", "ann", "--reason", "fouled hand"], "reject",
     {"supervisor": "ann", "secret": SECRET, "claim_id": "CS-07-c1", "reason": "fouled hand"}),
])
def test_each_action_sends_its_op(live, secret_file, argv, op, args):
    extra = ["--secret-file", str(secret_file)] if "--supervisor" in argv else []
    assert ok(ctl(live, *argv, *extra)) == f"{op} done\n"
    assert live.handler.calls == [(op, args)]
    as_json = json.loads(ok(ctl(live, *argv, *extra, "--json")))
    assert as_json == {"message": f"{op} done", "op": op, "amount": "10000.00"}


CLAIMED = {
    "message": "claim CS-07-r1-c1: the dealer's hand 9D 8D 7D 6D 5D: seat 5 straight-flush 10% of meter (1 of 2 "
               "shares) = $500.03: awaiting a supervisor's approval (progressivectl approve CS-07-r1-c1)",
    "claim_id": "CS-07-r1-c1", "draws": {"magic_card": "8D", "lucky_seat": "dealer"}, "status": "pending",
}


@pytest.mark.parametrize("draws, line", [
    ({"magic_card": "8D", "lucky_seat": "dealer"},
     "drawn at lock-out: Magic Card 8D, Lucky Bonus the dealer's position"),
    ({"magic_card": "QC", "lucky_seat": 3}, "drawn at lock-out: Magic Card QC, Lucky Bonus seat 3"),
    ({"magic_card": None, "lucky_seat": None}, "drawn at lock-out: Magic Card none, Lucky Bonus none"),
    (None, None),  # a wager without Magic Card and Lucky Bonus: its answer has no draws
])
def test_claim_prints_the_draws_of_the_round(live, draws, line):
    answer = {k: v for k, v in CLAIMED.items() if k != "draws"} | ({"draws": draws} if draws is not None else {})
    live.handler.reads["claim"] = answer
    argv = ["claim", "dealer", "9D", "8D", "7D", "6D", "5D"]
    assert ok(ctl(live, *argv)).splitlines() == [CLAIMED["message"], *([line] if line else [])]
    assert json.loads(ok(ctl(live, *argv, "--json"))) == answer  # --json: the daemon's whole answer, as for any action


def test_secret_from_standard_input(live):
    ok(ctl(live, "void", "--reason", "shoe jam", "--supervisor", "ann", stdin="from-stdin pw\r\nsecond line\n",
           process=True))
    assert live.handler.calls == [("void", {"supervisor": "ann", "secret": "from-stdin pw", "reason": "shoe jam"})]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_secret_file_others_may_read_is_refused(live, secret_file, mode):
    os.chmod(secret_file, mode)
    line = one_line_error(ctl(live, "deck-replaced", "--supervisor", "ann", "--secret-file", str(secret_file)), 2)
    assert line.startswith("progressivectl: --secret-file: ") and f"mode {mode:04o}" in line and "chmod 600" in line
    assert SECRET not in line
    assert live.handler.calls == []


@pytest.mark.parametrize("content, stdin, field", [
    (None, "", "secret"),  # nothing on standard input
    (None, "\n", "secret"),  # an empty line
    ("", None, "--secret-file"),
    ("\nsecret on the second line\n", None, "--secret-file"),
])
def test_a_missing_secret_is_refused(live, tmp_path, content, stdin, field):
    argv = ["open-table", "--supervisor", "ann"]
    if content is not None:
        f = tmp_path / "secret"
        f.write_text(content)
        os.chmod(f, 0o600)
        argv += ["--secret-file", str(f)]
    assert one_line_error(ctl(live, *argv, stdin=stdin), 2).startswith(f"progressivectl: {field}: ")
    assert live.handler.calls == []


def test_a_secret_file_that_cannot_be_read(live, tmp_path):
    line = one_line_error(ctl(live, "open-table", "--supervisor", "ann", "--secret-file", str(tmp_path / "no")), 2)
    assert line.startswith("progressivectl: --secret-file: ") and "cannot read" in line


def test_secret_prompt_on_a_terminal(live):
    argv = [str(CTL), "close-table", "--supervisor", "ann", "--socket", str(live.path)]
    pid, fd = pty.fork()
    if pid == 0:  # the child: progressivectl on a terminal
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    out = b""
    try:
        deadline = time.monotonic() + WAIT_S
        while b"Secret of supervisor ann: " not in out:
            out += _read_pty(fd, deadline)
        os.write(fd, b"typed-secret\n")
        while True:
            chunk = _read_pty(fd, deadline)
            if not chunk:
                break
            out += chunk
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert b"close_table done" in out and b"typed-secret" not in out  # not echoed
    assert live.handler.calls == [("close_table", {"supervisor": "ann", "secret": "typed-secret"})]


def _read_pty(fd: int, deadline: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    assert ready, "progressivectl did not answer on its terminal in time"
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the child closed the terminal
        return b""


def test_the_secret_is_never_printed(live, secret_file):
    live.handler.raises["approve"] = PermissionError("wrong secret for supervisor 'ann'")
    proc = ctl(live, "approve", "CS-07-c1", "--supervisor", "ann", "--secret-file", str(secret_file))
    assert SECRET not in proc.stdout + proc.stderr
    assert one_line_error(proc, 2) == "progressivectl: approve: wrong secret for supervisor 'ann'"


# --- refusals and failures -----------------------------------------------------------------------


@pytest.mark.parametrize("argv, exc, status, line", [
    (["settle-round", "CS-07-r11"], RulesError("round_id", "round CS-07-r11 is not the current round CS-07-r12"),
     2, "progressivectl: ROUND_ID: round CS-07-r11 is not the current round CS-07-r12"),
    (["stub-count", "40", "--dealt", "11"], RulesError("dealt", "40 + 11 is not 52: the round is voided"),
     2, "progressivectl: --dealt: 40 + 11 is not 52: the round is voided"),
    (["claim", "9", "AS"], InputError("seat", "9 is not a seat of table CS-07 (1..7)"),
     2, "progressivectl: SEAT: 9 is not a seat of table CS-07 (1..7)"),
    (["claim", "3", "AH", "KH", "QH", "JH", "AH"], InputError("cards[4]", "duplicate card AH (already at cards[0])"),
     2, "progressivectl: CARDS[4]: duplicate card AH (already at cards[0])"),
    (["settle-round", "CS-07-r12"], InputError("", "the round has open claims"),
     2, "progressivectl: settle-round: the round has open claims"),
    (["claim", "3", "AS"], NotAvailable(), 1, "progressivectl: claim: not available in this version"),
    (["claim", "3", "AS", "--spot", "bonus"], InputError("spot", "'bonus' is not a progressive wager spot of table "
                                                                 "CS-07"),
     2, "progressivectl: --spot: 'bonus' is not a progressive wager spot of table CS-07"),
    (["claim", "dealer", "AS"], RulesError("seat", "no seat has an accepted Five Card Hand Bonus Wager on the "
                                                   "dealer's hand in round CS-07-r1"),
     2, "progressivectl: SEAT: no seat has an accepted Five Card Hand Bonus Wager on the dealer's hand in round "
        "CS-07-r1"),
    (["round"], NotAvailable("the table is starting up"), 1, "progressivectl: round: the table is starting up"),
    (["settle-round", "CS-07-r12"], UnknownOp("settle"), 2,
     "progressivectl: settle-round: unknown operation 'settle' (the daemon does not offer this command: is it an "
     "older version?)"),
    (["status"], ZeroDivisionError("boom"), 1,
     "progressivectl: status: the daemon failed: internal error in the daemon (ZeroDivisionError); its log has the "
     "details"),
])
def test_refusals_and_failures(live, argv, exc, status, line):
    op = {"settle-round": "settle", "stub-count": "stub_count"}.get(argv[0], argv[0])
    live.handler.raises[op] = exc
    assert one_line_error(ctl(live, *argv), status) == line
    assert one_line_error(ctl(live, *argv, "--json"), status) == line
    assert [c[0] for c in live.handler.calls] == [op, op]


@pytest.mark.parametrize("argv, field", [
    (["stub-count", "x"], "STUB"),
    (["stub-count", "53"], "STUB"),
    (["stub-count", "-1"], "STUB"),
    (["stub-count", "40", "--dealt", "many"], "--dealt"),
    (["claim", "0", "AS"], "SEAT"),
    (["claim", "the-dealer", "AS"], "SEAT"),
    (["claim", "3", "AS", "--spot", " "], "--spot"),
    (["void", "--reason", " ", "--supervisor", "ann"], "--reason"),
])
def test_bad_arguments_are_refused_without_asking(live, argv, field):
    assert one_line_error(ctl(live, *argv, stdin="pw\n"), 2).startswith(f"progressivectl: {field}: ")
    assert live.handler.calls == []


def test_missing_required_options(live):
    line = one_line_error(ctl(live, "void", "--supervisor", "ann", process=True), 2)
    assert "--reason" in line


# --- no daemon -----------------------------------------------------------------------------------


def test_daemon_not_running(tmp_path):
    path = tmp_path / "none.sock"
    for proc in (run("status", "--socket", str(path), process=True),
                 run("status", env={"PROGRESSIVE_SOCKET": str(path)}),
                 run("meters", "--socket", str(path)), run("settle-round", "CS-07-r1", "--socket", str(path))):
        line = one_line_error(proc, 1)
        assert str(path) in line and "the daemon is not running, or the socket path is wrong" in line
        assert "--socket PATH" in line and "PROGRESSIVE_SOCKET" in line


def test_a_socket_nobody_listens_on():
    d = short_dir()
    try:
        path = d / "dead.sock"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.close()
        line = one_line_error(run("status", "--socket", str(path)), 1)
        assert "connection refused" in line and "the daemon is not running" in line
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_socket_from_the_environment(live):
    out = ok(run("round", "--json", env={"PROGRESSIVE_SOCKET": str(live.path)}))
    assert json.loads(out) == ROUND
    # --socket wins over the environment
    proc = run("round", "--json", "--socket", str(live.path), env={"PROGRESSIVE_SOCKET": "/nonexistent/control.sock"})
    assert json.loads(ok(proc)) == ROUND


def test_the_default_socket_is_named_in_the_help():
    from controller.service.control import DEFAULT_SOCKET, SOCKET_ENV

    help_text = ok(run("status", "--help"))
    assert DEFAULT_SOCKET in help_text and SOCKET_ENV in help_text


def test_settle_with_a_round_id_points_to_settle_round(tmp_path):
    line = one_line_error(run("settle", "CS-07-r12"), 2)
    assert "progressivectl settle-round CS-07-r12" in line

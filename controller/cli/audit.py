"""`progressivectl audit verify` and `audit anchor`, and `meters` and `history` with `--state`: read a state
directory with no daemon running.

Everything here reads a copy of the journal read-only through the full audit (chain from the first
entry, integrity, the invariant after every entry), so what it prints is what the journal proves.
Exit status: 0 sound; 1 the journal is damaged (the first bad entry is named); 2 bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli.common import (
    EXIT_DAMAGED,
    Parser,
    dump_json,
    no_such_meter,
    show_hits,
    show_meters,
    state_or_journal,
)
from controller.errors import InputError

if TYPE_CHECKING:
    from controller.ledger import Report
    from controller.meter import MeterState


def add_parsers(sub: Any) -> None:
    a = sub.add_parser("audit", help="audit a state directory")
    asub = a.add_subparsers(dest="audit_command", required=True, parser_class=Parser)
    v = asub.add_parser("verify", help="verify the journal's chain, integrity and invariant (exit 1 if damaged)")
    v.add_argument("--state", required=True, type=state_or_journal,
                   help="state directory (or a copy of it), or the URL of a link authority's journal on PostgreSQL")
    v.add_argument("--json", action="store_true", help="the verdict and every finding as JSON, for scripts")
    v.add_argument("--expect-head", metavar="SEQ:HASH",
                   help="an anchor of the journal (from the log, the syslog or the link authority): the journal "
                        "must hold it, else it was rolled back or rewritten (exit 1)")
    v.set_defaults(handler=lambda args: cmd_verify(args.state, args.json, args.expect_head))
    an = asub.add_parser("anchor", help="write the journal's anchor again, for its head as the audit finds it "
                                        "(the daemon stopped; after a key is set or changed, or an anchor lost)")
    an.add_argument("--state", required=True, type=Path, help="the table's state directory")
    an.add_argument("--anchor", required=True, type=Path, help="the anchor file ([anchor] file)")
    an.add_argument("--key-file", type=Path, help="the journal key ([anchor] key_file), if the table has one")
    an.add_argument("--expect-head", metavar="SEQ:HASH",
                    help="the last anchor sent off the box: the journal must hold it, else nothing is written")
    an.set_defaults(handler=lambda args: cmd_anchor(args.state, args.anchor, args.key_file, args.expect_head))


def _audit(state_dir: Path | str) -> Report:
    from controller.ledger import verify_state_dir

    if isinstance(state_dir, str):  # a link authority's journal on PostgreSQL: its meters
        from controller.round.journal import JournalReducer

        return verify_state_dir(state_dir, JournalReducer())
    if not state_dir.exists():
        raise InputError("--state", f"{state_dir} does not exist")
    try:
        return verify_state_dir(state_dir, _reducer_for(state_dir))
    except PermissionError:
        raise InputError("--state", f"{state_dir}: permission denied: the journal is the daemon's user's only "
                                    "(run this as root, or as that user)") from None


def _reducer_for(state_dir: Path) -> Any:
    """The meters, or a table's link journal (its outbox of operations on linked meters, `<state>/link`),
    told apart by what the journal holds."""
    from controller.ledger import journal
    from controller.ledger.reader import JournalReader
    from controller.link.outbox import LINK_SEND, OutboxReducer
    from controller.round.journal import JournalReducer

    db = state_dir / journal.DB_NAME
    if db.exists():
        try:
            with JournalReader(db) as reader:
                outbox = reader.has_kind(LINK_SEND)
        except Exception:  # noqa: BLE001 - a damaged file: the audit itself says what is wrong with it
            outbox = False
        if outbox:
            return OutboxReducer()
    return JournalReducer()


def _meters_journal(report: Report, state_dir: Path) -> None:
    from controller.link.outbox import Outbox

    if isinstance(report.state, Outbox):
        raise InputError("--state", f"{state_dir} is a table's link journal (operations on linked meters): the "
                                    "meters are the link authority's; give its state directory")


def _damaged(report: Report) -> int:
    print(f"progressivectl: {report.summary()}", file=sys.stderr)
    return EXIT_DAMAGED


def parse_head(text: str) -> tuple[int, str]:
    """`SEQ:HASH` (an anchor of the journal: controller.ledger.anchor), as --expect-head takes it."""
    seq, _, digest = text.partition(":")
    if not (seq.isascii() and seq.isdigit()) or len(seq) > 19 or not 1 <= int(seq) < 2**63 or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InputError("--expect-head", f"must be SEQ:HASH (an entry number and its 64 hex digits), not {text!r}")
    return int(seq), digest


def cmd_verify(state_dir: Path | str, as_json: bool, expect_head: str | None = None) -> int:
    expected = parse_head(expect_head) if expect_head is not None else None
    report = _audit(state_dir)
    if expected is not None and report.ok:
        from controller.ledger import journal
        from controller.ledger.anchor import Anchor, check_anchor
        from controller.ledger.verify import Problem

        db = state_dir if isinstance(state_dir, str) else state_dir / journal.DB_NAME
        problem = check_anchor(db, Anchor(expected[0], expected[1], ""))
        if problem is not None:  # a sound chain, but not the journal that was anchored
            report.ok = False
            report.problems.append(Problem(None, f"--expect-head: {problem}"))
    if as_json:
        out = {
            "path": report.path,
            "ok": report.ok,
            "entries": report.entries,
            "head_seq": report.head_seq,
            "head_hash": report.head_hash,
            "checkpoints": report.checkpoints,
            "snapshots_checked": report.snapshots_checked,
            "first_bad_seq": report.first_bad_seq,
            "problems": [{"seq": p.seq, "problem": str(p)} for p in report.problems],
            "integrity": report.integrity,
            "self_checks": report.self_checks,
        }
        dump_json(out)
        return 0 if report.ok else EXIT_DAMAGED
    if not report.ok:
        return _damaged(report)
    print(report.summary())
    return 0


def cmd_anchor(state_dir: Path, anchor_file: Path, key_file: Path | None, expect_head: str | None) -> int:
    """Write the journal's anchor for its head as the full audit finds it (signed with the key when given): after
    a journal key is set or changed, or when the daemon refused a journal whose anchor is missing. The daemon must
    be stopped (the journal then does not move). With --expect-head, only if the journal holds that anchor."""
    from controller.ledger import journal
    from controller.ledger.anchor import Anchor, AnchorError, check_anchor, load_key, write_anchor
    from controller.ledger.ledger import Head

    expected = parse_head(expect_head) if expect_head is not None else None
    try:
        key = load_key(key_file) if key_file is not None else None
    except AnchorError as e:
        raise InputError("--key-file", str(e)) from None
    report = _audit(state_dir)
    if not report.ok:
        return _damaged(report)
    if expected is not None:
        problem = check_anchor(state_dir / journal.DB_NAME, Anchor(expected[0], expected[1], ""))
        if problem is not None:
            print(f"progressivectl: --expect-head: {problem}; no anchor written", file=sys.stderr)
            return EXIT_DAMAGED
    anchor = Anchor.of(Head(report.head_seq, report.head_hash), key)
    try:
        write_anchor(anchor_file, anchor)
    except OSError as e:
        raise InputError("--anchor", f"{anchor_file}: cannot write it: {e.strerror or e}") from None
    print(f"{anchor_file}: anchored entry {anchor.seq} {anchor.hash}" + (" (keyed)" if key else ""))
    return 0


def _select(meters: Mapping[str, MeterState], meter_id: str | None) -> list[str]:
    if meter_id is None:
        return sorted(meters)
    if meter_id not in meters:
        raise no_such_meter(meter_id, meters)
    return [meter_id]


def cmd_meters(state_dir: Path, as_json: bool, meter_id: str | None) -> int:
    from controller.service.views import meter_json

    report = _audit(state_dir)
    if not report.ok:
        return _damaged(report)
    _meters_journal(report, state_dir)
    return show_meters([meter_json(report.state[m]) for m in _select(report.state, meter_id)], as_json)


def cmd_history(state_dir: Path, as_json: bool, meter_id: str | None, limit: int | None = None) -> int:
    from controller.service.views import hit_json

    report = _audit(state_dir)
    if not report.ok:
        return _damaged(report)
    _meters_journal(report, state_dir)
    hits = [hit_json(m, h) for m in _select(report.state, meter_id) for h in report.state[m].history]
    return show_hits(hits, as_json, limit)


__all__ = ["add_parsers", "cmd_anchor", "cmd_history", "cmd_meters", "cmd_verify", "parse_head"]

"""`progressivectl check-config`, `hash-credential`, `approval-key` and `link-key`: a table's or a link authority's
configuration checked, the supervisors' entries made for it, and the authority's signing key. Exit status: 0 done (a sound file, perhaps with
warnings); 2 bad input or a file with problems."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from controller.cli.common import dump_json, read_secret
from controller.errors import InputError
from controller.exits import EXIT_BAD_INPUT


def add_parsers(sub: Any) -> None:
    k = sub.add_parser("check-config",
                       help="check a table's or a link authority's configuration file (exit 0 sound, 2 problems)")
    k.add_argument("file", type=Path, help="the TOML configuration of a table or of a link authority")
    k.add_argument("--json", action="store_true", help="every problem and warning as JSON, for scripts")
    k.set_defaults(handler=_cmd_check_config)

    x = sub.add_parser("hash-credential",
                       help="hash a supervisor's secret for the configuration (read from the terminal or stdin)")
    x.add_argument("--scheme", choices=["scrypt", "pbkdf2_sha256"], default="scrypt",
                   help="the hash: scrypt (the default), or pbkdf2_sha256 where a faster check is needed")
    x.set_defaults(handler=_cmd_hash_credential)

    y = sub.add_parser("approval-key",
                       help="a supervisor's approval key for a link authority's approvers file (the secret read "
                            "from the terminal or stdin)")
    y.add_argument("name", help="the supervisor's name, as in the tables' supervisors files")
    y.set_defaults(handler=_cmd_approval_key)

    z = sub.add_parser("link-key",
                       help="make a link authority's signing key (a new file, readable by its owner only) and print "
                            "the public key the tables list in [mqtt] authority_keys; with --public, print the public "
                            "key of an existing file")
    z.add_argument("file", type=Path, help="the authority's signing_key_file")
    z.add_argument("--public", action="store_true", help="read the existing file; write nothing")
    z.set_defaults(handler=_cmd_link_key)


def _cmd_check_config(args: argparse.Namespace) -> int:
    from controller.config import ConfigError, load_config
    from controller.config.authority import is_authority_config, load_authority_config

    name = str(args.file)
    authority = is_authority_config(args.file)  # `authority = ...` at the top instead of `table = ...`
    try:
        cfg = load_authority_config(args.file) if authority else load_config(args.file)
    except ConfigError as e:
        if args.json:
            dump_json({"file": name, "ok": False, "problems": [p.to_dict() for p in e.problems],
                       "warnings": [w.to_dict() for w in e.warnings], "summary": None})
        else:
            for p in e.problems:
                print(p.line(name), file=sys.stderr)
            _print_warnings(name, e.warnings)
        return EXIT_BAD_INPUT
    summary = cfg.summary()
    if args.json:
        return dump_json({"file": name, "ok": True, "problems": [], "warnings": [w.to_dict() for w in cfg.warnings],
                          "summary": summary})
    _print_warnings(name, cfg.warnings)  # sound, but not as it should stay: exit 0, a line each on stderr
    if authority:
        _print_authority_summary(name, summary)
        return 0
    wagers = ", ".join(f"{w} ({v['paytable']}" + (f", meter {v['meter']})" if v["meter"] else ")")
                       for w, v in summary["wagers"].items())
    meters = ", ".join(
        f"{m} (linked to {v['linked']})" if "linked" in v else f"{m} (reset {v['reset']}, rate {v['rate']})"
        for m, v in summary["meters"].items()
    ) or "none"
    devs = summary["devices"]
    kinds = ", ".join(f"{n} {k}" for k, n in devs["by_kind"].items())
    print(f"{name}: sound")
    places = "wager positions" if summary["dice"] else "seats"
    print(f"table {summary['table']}: {summary['game_title']} ({summary['game']}), {summary['seats']} {places}")
    print(f"wagers: {wagers}")
    print(f"meters: {meters}")
    print(f"devices: {devs['total']} ({kinds}) on {devs['buses']} bus(es)")
    return 0


def _print_warnings(name: str, warnings: Any) -> None:
    for w in warnings:
        print(w.line(name, warning=True), file=sys.stderr)


def _print_authority_summary(name: str, summary: dict[str, Any]) -> None:
    meters = ", ".join(f"{m} (reset {v['reset']}, rate {v['rate']})" for m, v in summary["meters"].items())
    q = summary["mqtt"]
    broker = (f"{q['host']}:{q['port']}, MQTT {q['protocol']}, " + ("TLS" if q["tls"] else "no TLS")
              + f", client id {q['client_id']}")
    if q["username"]:
        broker += f", user {q['username']}"
    tables = summary["tables"]
    print(f"{name}: sound")
    print(f"link authority {summary['authority']}: {len(tables)} table(s): {', '.join(tables)}")
    print(f"meters: {meters}")
    print(f"broker: {broker}")


def _cmd_hash_credential(args: argparse.Namespace) -> int:
    from controller.config import CredentialError, hash_credential

    try:
        print(hash_credential(read_secret("Secret: ", confirm=True), args.scheme))
    except CredentialError as e:
        raise InputError("secret", str(e)) from None
    return 0


def _cmd_link_key(args: argparse.Namespace) -> int:
    import os

    from controller.linkproto import signing

    path: Path = args.file
    if args.public:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise InputError("file", f"{path}: cannot read it: {e.strerror or e}") from None
        try:
            key = signing.load_private_pem(data)
        except ValueError as e:
            raise InputError("file", f"{path}: {e}") from None
    else:
        pem = signing.new_private_pem()
        try:  # never over a key in use: the tables would stop trusting the authority at once
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise InputError("file", f"{path} exists: a signing key is never overwritten (--public prints its "
                                     "public key; a new key goes in a new file, docs/operations.md)") from None
        except OSError as e:
            raise InputError("file", f"{path}: cannot create it: {e.strerror or e}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
            f.flush()
            os.fsync(f.fileno())
        key = signing.load_private_pem(pem)
    print(f'authority_keys = ["{signing.format_public(key.public_key())}"]')
    return 0


def _cmd_approval_key(args: argparse.Namespace) -> int:
    from controller.config.names import normal, refusal
    from controller.linkproto.approval import approval_key, encode_key

    name = normal(args.name)  # the key is made from the name as the tables compare it
    if (why := refusal(name)) is not None:
        raise InputError("name", f"must be the supervisor's name as the tables list it: {why}")
    secret = read_secret(f"Secret of supervisor {name}: ", confirm=True)
    key = encode_key(approval_key(name, secret))
    print(f"[[approvers]]\nname = {json.dumps(name)}\napproval_key = \"{key}\"")
    return 0


__all__ = ["add_parsers"]

"""`progressivectl check-config` and `progressivectl hash-credential` as technicians and scripts use them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_config import CREDENTIAL, TABLES, base, write

from controller.cli import ctl
from controller.config import check_config, parse_credential, verify_credential

from ctlrun import run_ctl

CTL = Path(sys.executable).parent / "progressivectl"


def run(*args: str, stdin: str | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    return run_ctl(*args, stdin=stdin, process=process)


def broken(tmp_path: Path) -> Path:
    doc = base()
    doc["meters"]["main"]["reset"] = "5000.00"
    doc["devices"]["sign"]["bus"] = "tabel-bus"
    doc["seets"] = 6
    doc["anchor"] = {"syslog": "127.0.0.1:514"}  # anchored off the box: the problems alone
    path = write(tmp_path, doc)
    path.chmod(0o600)  # as installed: its supervisors' hashes are the daemon's user's alone (no warning)
    return path


def test_sound_file_exits_0_with_a_summary(capsys):
    path = str(TABLES / "caribbean-stud.toml")
    assert ctl.main(["check-config", path]) == 0
    out, err = capsys.readouterr()
    # The example holds (placeholder) hashes inline: a checkout readable by all is warned about, and sound. It has
    # no linked meter and no remote syslog: nothing off the box would notice a rollback, which is warned about too.
    exposed = (TABLES / "caribbean-stud.toml").stat().st_mode & 0o077
    assert [line.split(": ")[1:3] for line in err.splitlines()] == \
        ([["warning", "supervisors"]] if exposed else []) + [["warning", "anchor.syslog"]]
    lines = out.splitlines()
    assert lines[0] == f"{path}: sound"
    assert lines[1] == "table CS-07: Caribbean Stud Poker (caribbean-stud), 7 seats"
    assert lines[2].startswith("wagers: progressive (caribbean-stud-progressive-d, meter main), five-card-hand-bonus")
    assert lines[3].startswith("meters: main (reset 10000.00, rate 0.15)")
    assert lines[4] == "devices: 11 (7 seat, 1 lockout, 1 sign, 2 card-counter) on 1 bus(es)"


def test_problems_exit_2_one_line_each(tmp_path, capsys):
    path = broken(tmp_path)
    assert ctl.main(["check-config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == len(check_config(path)) == 3
    assert f"{path}: meters.main.reset: $5,000.00 is below the $10,000 floor (§ 667a.12(d)(3), " in lines[1]
    assert all(line.startswith(f"{path}: ") and "(hint: " in line for line in lines)
    # in the order of the file: the misspelt top-level key is written before the [meters] and [devices] tables
    assert [line.split(": ")[1] for line in lines] == ["seets", "meters.main.reset", "devices.sign.bus"]


def test_json_with_problems(tmp_path, capsys):
    path = broken(tmp_path)
    assert ctl.main(["check-config", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    doc = json.loads(out)
    assert doc["ok"] is False and doc["summary"] is None and doc["file"] == str(path)
    assert [p["path"] for p in doc["problems"]] == ["seets", "meters.main.reset", "devices.sign.bus"]
    assert set(doc["problems"][0]) == {"path", "message", "hint"}
    assert doc["problems"][0]["hint"].startswith("did you mean 'seats'?")


def test_json_when_sound(capsys):
    assert ctl.main(["check-config", str(TABLES / "flop-poker.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["problems"] == []
    s = doc["summary"]
    assert (s["game"], s["seats"], s["table"]) == ("flop-poker", 6, "FP-01")
    assert s["meters"]["main"]["reset"] == "10000.00" and s["meters"]["main"]["wager_sizes"] == ["1.00", "5.00"]
    assert s["cards"] == {"source": "shoe", "shuffler": "counting", "stub_count_every": None, "two_decks": True}
    assert s["devices"]["by_kind"] == {"seat": 6, "lockout": 1, "sign": 1, "card-counter": 2}


def test_unreadable_file(tmp_path, capsys):
    assert ctl.main(["check-config", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"{tmp_path / 'nope.toml'}: cannot read the configuration")


def test_installed_command_exit_statuses(tmp_path):
    ok = run("check-config", str(TABLES / "hot-roller-craps.toml"))
    assert ok.returncode == 0, ok.stderr
    assert "Hot Roller Craps (hot-roller-craps), 4 wager positions" in ok.stdout
    bad = run("check-config", str(broken(tmp_path)), process=True)  # the contract: the installed command
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 3 and "Traceback" not in bad.stderr


# --- hash-credential ----------------------------------------------------------------------------------


def test_hash_credential_from_stdin_round_trip():
    secret = "correct horse battery staple"
    proc = run("hash-credential", stdin=secret + "\n")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("scrypt$") and len(proc.stdout.splitlines()) == 1
    assert secret not in proc.stdout + proc.stderr
    assert verify_credential(secret, line)
    assert not verify_credential(secret + "!", line)
    assert not verify_credential(secret.upper(), line)


def test_hash_credential_pbkdf2_and_crlf():
    proc = run("hash-credential", "--scheme", "pbkdf2_sha256", stdin="another secret\r\n")
    assert proc.returncode == 0, proc.stderr
    cred = parse_credential(proc.stdout.strip())
    assert cred.scheme == "pbkdf2_sha256" and cred.iterations == 600_000
    assert verify_credential("another secret", cred)
    assert not verify_credential("another secret\r", cred)


def test_hash_credential_refuses_a_short_secret():
    proc = run("hash-credential", stdin="short\n")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "progressivectl: secret: the secret is shorter than 8 characters"


def test_the_printed_hash_is_accepted_by_the_configuration(tmp_path):
    proc = run("hash-credential", stdin="the pit boss's passphrase\n")
    doc = base()
    doc["supervisors"] = [{"name": "Pit Boss", "credential": proc.stdout.strip()},
                          {"name": "Shift Manager", "credential": CREDENTIAL}]
    assert check_config(write(tmp_path, doc)) == []

"""The link authority's configuration: the shipped example is sound with its files in place; every kind of
mistake is reported at its TOML path with a hint, as for a table; `progressivectl check-config` tells an
authority's file from a table's."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from datetime import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from test_config import CREDENTIAL, TABLES, dumps

from controller.authority.publisher import METER_INTERVAL
from controller.cli import ctl
from controller.config import ConfigError, Problem, StandaloneMeter
from controller.config.authority import (
    AuthorityConfig,
    check_authority_config,
    is_authority_config,
    load_authority_config,
)
from controller.link.mqtt import MqttSettings

from linkrig import approval_keys, approvers_file, signing_key_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "link" / "authority.toml"
CTL = Path(sys.executable).parent / "progressivectl"


def install(tmp_path: Path, source: Path = EXAMPLE) -> Path:
    """The example as installed: its CA certificate and password file beside it (the password file
    readable by its owner only)."""
    target = tmp_path / source.name
    shutil.copyfile(source, target)
    (tmp_path / "ca.crt").write_text("x\n")
    (tmp_path / "mqtt-password").write_text("x\n")
    (tmp_path / "mqtt-password").chmod(0o600)
    approvers_file(tmp_path)
    signing_key_file(tmp_path)
    return target


def base() -> dict[str, Any]:
    return {
        "authority": "link-1",
        "state_dir": "state",
        "tables": ["cs-01", "fcp-02"],
        "meters": {"fchb-link": {"reset": "10000.00", "rate": "0.15", "wager_sizes": ["1.00"]}},
        "mqtt": {"host": "link.casino.example", "username": "authority"},
        "approvers_file": "approvers.toml",
        "signing_key_file": "link-signing.pem",
        "anchor": {"syslog": "logs.casino.example:514"},  # off the box: no warning (test_anchor.py)
    }


def write(tmp_path: Path, doc: dict[str, Any] | str, name: str = "link.toml") -> Path:
    if not (tmp_path / "approvers.toml").exists():
        approvers_file(tmp_path)
    if not (tmp_path / "link-signing.pem").exists():
        signing_key_file(tmp_path)
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else dumps(doc), encoding="utf-8")
    return p


def problems(tmp_path: Path, doc: dict[str, Any] | str) -> list[Problem]:
    return check_authority_config(write(tmp_path, doc))


def one(found: list[Problem], path: str) -> Problem:
    """The one problem found, which must be at `path`."""
    assert [p.path for p in found] == [path], "\n".join(map(str, found))
    assert found[0].hint, found[0]
    return found[0]


def broken(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(base())
    for k, v in changes.items():
        if v is None:
            del doc[k]
        else:
            doc[k] = v
    return doc


# --- the example -------------------------------------------------------------------------------------


def test_the_example_is_sound_once_installed(tmp_path):
    path = install(tmp_path)
    assert check_authority_config(path) == []
    cfg = load_authority_config(path)
    assert isinstance(cfg, AuthorityConfig)
    assert cfg.source == path.resolve()
    assert cfg.authority == "link-1"
    assert cfg.tables == ("cs-01", "fcp-02", "lir-03")
    assert cfg.state_dir == Path("/var/lib/progressive-link")
    assert cfg.approvers == approval_keys()
    assert cfg.heartbeat == 1.0 and cfg.table_timeout is None
    assert list(cfg.meters) == ["fchb-link"]
    m = cfg.meters["fchb-link"]
    assert isinstance(m, StandaloneMeter) and not m.linked
    assert (m.params.reset_cents, m.params.rate, m.params.wager_sizes) == (1_000_000, Fraction(15, 100), (100,))
    q = cfg.mqtt
    assert (q.host, q.port, q.tls, q.client_id, q.username) == ("link.casino.example", 8883, True, "link-1", "authority")
    assert q.ca_file == tmp_path / "ca.crt" and q.password_file == tmp_path / "mqtt-password"
    assert (cfg.metrics.host, cfg.metrics.port) == ("127.0.0.1", 9465)
    assert (cfg.logging.format, cfg.logging.level) == ("json", "info")


def test_the_example_in_place_lacks_only_the_sites_files():
    # ca.crt and mqtt-password are the site's own: not shipped, and reported missing until installed.
    found = check_authority_config(EXAMPLE)
    assert [p.path for p in found] == ["approvers_file", "signing_key_file", "mqtt.ca_file", "mqtt.password_file"]
    assert all("no such file" in p.message for p in found)


def test_the_example_of_the_documentation_is_sound(tmp_path):
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("## The link authority"):]
    example = section[section.index("```toml\n") + len("```toml\n"):section.index("\n```\n", section.index("```toml"))]
    (tmp_path / "mqtt").mkdir()
    for name in ("ca.pem", "authority-password"):
        (tmp_path / "mqtt" / name).write_text("x\n")
        (tmp_path / "mqtt" / name).chmod(0o600)
    signing_key_file(tmp_path)
    cfg = load_authority_config(write(tmp_path, example.replace("/etc/progressive/", f"{tmp_path}/")))
    assert cfg.authority == "link-1" and list(cfg.meters) == ["fchb-link"]


def test_a_minimal_file_takes_the_defaults(tmp_path):
    cfg = load_authority_config(write(tmp_path, base()))
    assert cfg.state_dir == tmp_path / "state"  # relative to the file
    assert cfg.heartbeat == 1.0 and cfg.description == ""
    assert cfg.meter_interval == METER_INTERVAL == 0.05  # the publisher's own pace: a small link sees no change
    assert cfg.mqtt.client_id == "link-1" and cfg.mqtt.port == 8883 and cfg.mqtt.tls


def test_the_gaming_day_of_the_plots_is_a_tables_report_section_without_its_dir(tmp_path):
    assert load_authority_config(write(tmp_path, base())).report.day_starts == time(6, 0)
    cfg = load_authority_config(write(tmp_path, broken(report={"day_starts": "08:00", "time_zone": "Europe/Paris"})))
    assert (cfg.report.day_starts, cfg.report.time_zone) == (time(8, 0), "Europe/Paris")
    assert "no gaming day report" in one(problems(tmp_path, broken(report={"dir": "reports"})), "report.dir").message
    one(problems(tmp_path, broken(report={"time_zone": "Mars/Olympus"})), "report.time_zone")


def test_a_table_file_is_not_an_authority_file(tmp_path):
    assert is_authority_config(EXAMPLE)
    assert not is_authority_config(TABLES / "caribbean-stud.toml")
    assert not is_authority_config(tmp_path / "nope.toml")
    assert not is_authority_config(write(tmp_path, "authority = \n"))


# --- every kind of problem, at its path ----------------------------------------------------------------


def test_missing_authority(tmp_path):
    p = one(problems(tmp_path, broken(authority=None)), "authority")
    assert p.message == "is required" and "authority =" in p.hint


@pytest.mark.parametrize("value", ["link 1", "-link", "x" * 33, ""])
def test_bad_authority_id(tmp_path, value):
    p = one(problems(tmp_path, broken(authority=value)), "authority")
    assert "is not an authority id" in p.message and "1 to 32" in p.hint


def test_authority_id_not_a_string(tmp_path):
    assert "must be a string" in one(problems(tmp_path, broken(authority=7)), "authority").message


def test_tables_required(tmp_path):
    assert one(problems(tmp_path, broken(tables=None)), "tables").message == "is required"


def test_no_tables(tmp_path):
    p = one(problems(tmp_path, broken(tables=[])), "tables")
    assert "no table" in p.message and "tables = [" in p.hint


def test_tables_not_an_array(tmp_path):
    assert "must be an array" in one(problems(tmp_path, broken(tables="cs-01")), "tables").message


def test_duplicate_table(tmp_path):
    p = one(problems(tmp_path, broken(tables=["cs-01", "fcp-02", "cs-01"])), "tables[2]")
    assert "'cs-01' is already listed (tables[0])" in p.message and "once" in p.hint


def test_bad_table_ids_each_at_its_index(tmp_path):
    found = problems(tmp_path, broken(tables=["cs 01", "fcp-02", 3]))
    assert [p.path for p in found] == ["tables[0]", "tables[2]"]
    assert "is not a table id" in found[0].message and "must be a table id" in found[1].message


def test_the_authority_is_not_one_of_its_tables(tmp_path):
    p = one(problems(tmp_path, broken(tables=["cs-01", "link-1"])), "tables[1]")
    assert "the authority's own id" in p.message


def test_reset_under_the_floor_on_a_linked_meter(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"]["reset"] = "5000.00"
    p = one(problems(tmp_path, doc), "meters.fchb-link.reset")
    assert "$5,000.00 is below the $10,000 floor" in p.message and "10000.00" in p.hint


def test_every_meter_problem_at_once(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"].update(rate="1.5", ceiling="9000.00", history_size=3)
    doc["meters"]["fchb-link"]["reset"] = "5000.00"
    paths = [p.path for p in problems(tmp_path, doc)]
    assert {"meters.fchb-link.reset", "meters.fchb-link.rate", "meters.fchb-link.history_size"} <= set(paths)


def test_money_is_never_a_float(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"]["reset"] = Decimal("10000.0")
    assert "TOML float" in one(problems(tmp_path, doc), "meters.fchb-link.reset").message


def test_linked_in_an_authority_meter(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"]["linked"] = "other"
    p = one(problems(tmp_path, doc), "meters.fchb-link.linked")
    assert "an authority owns its meters" in p.message and "remove linked" in p.hint


def test_a_linked_only_meter_is_also_missing_its_parameters(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"] = {"linked": "other"}
    paths = [p.path for p in problems(tmp_path, doc)]
    assert paths[0] == "meters.fchb-link.linked"
    assert {"meters.fchb-link.reset", "meters.fchb-link.rate", "meters.fchb-link.wager_sizes"} <= set(paths)


def test_unknown_meter_key_hints_the_meter_keys(tmp_path):
    doc = base()
    doc["meters"]["fchb-link"]["resett"] = "10000.00"
    p = one(problems(tmp_path, doc), "meters.fchb-link.resett")
    assert p.message == "unknown key" and p.hint.startswith("did you mean 'reset'?") and "linked" not in p.hint


def test_bad_meter_id_and_no_meter(tmp_path):
    doc = base()
    doc["meters"] = {"FCHB": doc["meters"]["fchb-link"]}
    assert "not a valid meter id" in one(problems(tmp_path, doc), "meters.FCHB").message
    assert "no meter" in one(problems(tmp_path, broken(meters={})), "meters").message
    assert one(problems(tmp_path, broken(meters=None)), "meters").message == "is required"


def test_missing_mqtt(tmp_path):
    p = one(problems(tmp_path, broken(mqtt=None)), "mqtt")
    assert p.message == "is required" and "[mqtt]" in p.hint


def test_tls_false_to_a_remote_broker(tmp_path):
    doc = base()
    doc["mqtt"]["tls"] = False
    p = one(problems(tmp_path, doc), "mqtt.tls")
    assert "must be encrypted" in p.message
    doc["mqtt"]["host"] = "127.0.0.1"
    assert load_authority_config(write(tmp_path, doc)).mqtt.port == 1883


def test_mqtt_checks_are_the_tables(tmp_path):
    doc = base()
    doc["mqtt"] = {"host": "link.casino.example", "password": "s3cret-s3cret", "password_file": "missing"}
    found = problems(tmp_path, doc)
    assert [p.path for p in found] == ["mqtt.password", "mqtt.username", "mqtt.password_file"]
    assert "never written" in found[0].message
    assert found[1].hint == 'username = "authority"'


def test_link_timeout_is_a_tables_setting(tmp_path):
    doc = base()
    doc["mqtt"]["link_timeout"] = 5
    assert "a table's setting" in one(problems(tmp_path, doc), "mqtt.link_timeout").message


def test_the_mqtt_protocol_is_set_as_a_tables(tmp_path):
    doc = base()
    assert load_authority_config(write(tmp_path, doc)).mqtt.protocol == "5"  # the default
    doc["mqtt"]["protocol"] = "3.1.1"
    cfg = load_authority_config(write(tmp_path, doc))
    assert MqttSettings.from_config(cfg.mqtt).protocol == "3.1.1"
    doc["mqtt"]["protocol"] = 5
    assert one(problems(tmp_path, doc), "mqtt.protocol").message == 'must be "5" or "3.1.1", not the integer 5'


def test_the_client_id_is_not_a_tables(tmp_path):
    doc = base()
    doc["mqtt"]["client_id"] = "cs-01"
    assert "disconnect each other" in one(problems(tmp_path, doc), "mqtt.client_id").message


@pytest.mark.parametrize("key", ["table", "seets", "wagers"])
def test_unknown_key(tmp_path, key):
    doc = base()
    doc[key] = 6
    p = one(problems(tmp_path, doc), key)
    assert p.message == "unknown key" and "tables" in p.hint


def test_unknown_key_suggests_the_closest(tmp_path):
    doc = base()
    doc["heartbeet"] = 1
    assert one(problems(tmp_path, doc), "heartbeet").hint.startswith("did you mean 'heartbeat'?")


@pytest.mark.parametrize("value", [0, Decimal("0.05"), 61, Decimal("60.5")])
def test_heartbeat_out_of_range(tmp_path, value):
    p = one(problems(tmp_path, broken(heartbeat=value)), "heartbeat")
    assert "must be from 0.1 to 60 seconds" in p.message


@pytest.mark.parametrize("value", [Decimal("0.1"), 60, Decimal("2.5")])
def test_heartbeat_in_range(tmp_path, value):
    assert load_authority_config(write(tmp_path, broken(heartbeat=value))).heartbeat == float(value)


def test_heartbeat_not_a_number(tmp_path):
    assert "write it without quotes" in one(problems(tmp_path, broken(heartbeat="1")), "heartbeat").hint
    assert "must be a number" in one(problems(tmp_path, broken(heartbeat=True)), "heartbeat").message


@pytest.mark.parametrize(("value", "heartbeat"), [(Decimal("0.25"), None), (1, None), (Decimal("0.001"), None),
                                                 (Decimal("2.5"), Decimal("2.5"))])
def test_meter_interval_up_to_the_heartbeat(tmp_path, value, heartbeat):
    doc = broken(meter_interval=value) if heartbeat is None else broken(meter_interval=value, heartbeat=heartbeat)
    cfg = load_authority_config(write(tmp_path, doc))
    assert cfg.meter_interval == float(value)
    assert cfg.summary()["meter_interval"] == float(value)


@pytest.mark.parametrize(("value", "heartbeat", "why"), [
    (0, None, "not 0"), (Decimal("-0.25"), None, "not -0.25"), (Decimal("1.5"), None, "the heartbeat (1 s), not 1.5"),
    (Decimal("0.5"), Decimal("0.25"), "the heartbeat (0.25 s), not 0.5")])
def test_meter_interval_out_of_range(tmp_path, value, heartbeat, why):
    doc = broken(meter_interval=value) if heartbeat is None else broken(meter_interval=value, heartbeat=heartbeat)
    p = one(problems(tmp_path, doc), "meter_interval")
    assert p.message.startswith("must be more than 0 and at most the heartbeat") and p.message.endswith(why)
    assert "0.25 on hundreds of tables" in p.hint


def test_meter_interval_not_a_number(tmp_path):
    assert "write it without quotes" in one(problems(tmp_path, broken(meter_interval="0.25")), "meter_interval").hint
    assert "must be a number" in one(problems(tmp_path, broken(meter_interval=False)), "meter_interval").message
    nan = "meter_interval = nan\n" + dumps(base())
    assert "must be a number" in one(problems(tmp_path, nan), "meter_interval").message


def test_state_dir(tmp_path):
    assert one(problems(tmp_path, broken(state_dir=None)), "state_dir").message == "is required"
    (tmp_path / "afile").write_text("")
    assert "not a directory" in one(problems(tmp_path, broken(state_dir="afile")), "state_dir").message


def test_metrics_and_logging_are_checked(tmp_path):
    found = problems(tmp_path, broken(metrics={"listen": "nowhere"}, logging={"format": "xml"}))
    assert [p.path for p in found] == ["metrics.listen", "logging.format"]


def test_all_problems_at_once_in_the_files_order(tmp_path):
    doc = {"seets": 1, "authority": "link 1", "tables": ["a", "a"], "heartbeat": 0,
           "meters": {"m": {"reset": "1.00", "rate": "0.1", "wager_sizes": ["1.00"], "linked": "x"}},
           "state_dir": "state"}
    found = problems(tmp_path, doc)
    assert [p.path for p in found] == ["seets", "authority", "tables[1]", "heartbeat", "meters.m.linked",
                                       "meters.m.reset", "mqtt", "approvers_file", "signing_key_file"]
    with pytest.raises(ConfigError) as e:
        load_authority_config(write(tmp_path, doc))
    assert e.value.problems == found
    assert str(e.value).splitlines()[1].startswith(f"{tmp_path / 'link.toml'}: authority: ")


def test_the_supervisors_of_the_console_s_login_are_read_as_a_table_s(tmp_path):
    """[[supervisors]] or supervisors_file, by a table's own checks, with its warning for hashes others can read;
    optional at the authority (nobody logs in to its console without them)."""
    assert load_authority_config(write(tmp_path, base())).supervisors == ()
    sup = tmp_path / "supervisors.toml"
    sup.write_text(dumps({"supervisors": [{"name": "Pit Boss", "credential": CREDENTIAL}]}), encoding="utf-8")
    sup.chmod(0o600)
    in_file = write(tmp_path, broken(supervisors_file="supervisors.toml"))
    cfg = load_authority_config(in_file)
    assert [s.name for s in cfg.supervisors] == ["Pit Boss"] and cfg.warnings == ()
    assert cfg.summary()["supervisors"] == 1
    sup.chmod(0o640)
    (w,) = load_authority_config(in_file).warnings
    assert w.path == "supervisors_file" and "holds the supervisors' credential hashes and can be read by its group " \
        "(mode 0640)" in w.message and "chmod 0600" in w.hint, w
    inline = write(tmp_path, broken(supervisors=[{"name": "Pit Boss", "credential": CREDENTIAL}]), "inline.toml")
    inline.chmod(0o644)
    (w,) = load_authority_config(inline).warnings
    assert w.path == "supervisors" and "supervisors_file" in w.hint, w
    both = broken(supervisors_file="supervisors.toml", supervisors=[{"name": "Pit Boss", "credential": CREDENTIAL}])
    assert "both list supervisors" in one(problems(tmp_path, both), "supervisors_file").message
    bad = broken(supervisors=[{"name": "Pit Boss", "credential": "letmein-please"}])
    found = one(problems(tmp_path, bad), "supervisors[0].credential")
    assert "letmein-please" not in found.line()  # a credential that may be a password is never repeated


def test_unreadable_and_malformed(tmp_path):
    p = one(check_authority_config(tmp_path / "nope.toml"), "")
    assert p.message.startswith("cannot read") and "link authority" in p.hint
    assert check_authority_config(write(tmp_path, 'authority = "a"\ntables = [\n'))[0].path.startswith("line ")


# --- progressivectl check-config -------------------------------------------------------------------------


def test_check_config_sound_authority(tmp_path, capsys):
    path = str(install(tmp_path))
    assert ctl.main(["check-config", path]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        f"{path}: sound",
        "link authority link-1: 3 table(s): cs-01, fcp-02, lir-03",
        "meters: fchb-link (reset 10000.00, rate 0.15)",
        "broker: link.casino.example:8883, MQTT 5, TLS, client id link-1, user authority",
    ]


def test_check_config_authority_json(tmp_path, capsys):
    assert ctl.main(["check-config", str(install(tmp_path)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["problems"] == []
    s = doc["summary"]
    assert (s["authority"], s["tables"], s["heartbeat"]) == ("link-1", ["cs-01", "fcp-02", "lir-03"], 1.0)
    assert s["meters"]["fchb-link"]["reset"] == "10000.00" and s["meters"]["fchb-link"]["rate"] == "0.15"
    assert s["meters"]["fchb-link"]["wager_sizes"] == ["1.00"]
    assert s["mqtt"] == {"host": "link.casino.example", "port": 8883, "tls": True, "client_id": "link-1",
                         "username": "authority", "topic_prefix": "progressive/v1", "protocol": "5"}


def test_check_config_authority_with_problems(tmp_path, capsys):
    doc = base()
    doc["meters"]["fchb-link"]["reset"] = "5000.00"
    doc["tables"] = ["cs-01", "cs-01"]
    path = write(tmp_path, doc)
    assert ctl.main(["check-config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["tables[1]", "meters.fchb-link.reset"]
    assert all(line.startswith(f"{path}: ") and "(hint: " in line for line in lines)
    assert "$5,000.00 is below the $10,000 floor" in lines[1]
    assert ctl.main(["check-config", str(path), "--json"]) == 2
    doc_out = json.loads(capsys.readouterr().out)
    assert doc_out["ok"] is False and [p["path"] for p in doc_out["problems"]] == ["tables[1]", "meters.fchb-link.reset"]


def test_installed_command_on_an_authority_file(tmp_path):
    ok = subprocess.run([str(CTL), "check-config", str(install(tmp_path))], capture_output=True, text=True,
                        timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "link authority link-1" in ok.stdout
    bad = subprocess.run([str(CTL), "check-config", str(EXAMPLE)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert [line.split(": ")[1] for line in bad.stderr.splitlines()] == ["approvers_file", "signing_key_file",
                                                                         "mqtt.ca_file", "mqtt.password_file"]


def test_a_table_file_is_still_checked_as_a_table(capsys):
    assert ctl.main(["check-config", str(TABLES / "flop-poker.toml")]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("table FP-01: ")


def test_look_alike_approvers_are_refused_naming_the_file_and_both(tmp_path):
    """Two approvers whose names read alike (a Cyrillic "о", or one skeleton under UTS #39): refused in one line
    naming the approvers file and both names (before, each was an approver of its own)."""
    key = '"approval-key$' + "11" * 32 + '"'
    approvers = tmp_path / "approvers.toml"
    approvers.touch(mode=0o600)
    for look_alike, says in (("fl\u043eor-1", "U+043E CYRILLIC SMALL LETTER O"),
                             ("fl00r-1", "'fl00r-1' reads as 'flOOr-1' (approvers[0])")):
        first = "flOOr-1" if look_alike == "fl00r-1" else "floor-1"
        approvers.write_text(f'[[approvers]]\nname = "{first}"\napproval_key = {key}\n'
                             f'[[approvers]]\nname = "{look_alike}"\napproval_key = {key}\n', encoding="utf-8")
        p = one(problems(tmp_path, base()), "approvers_file")
        assert p.message.startswith("approvers.toml: approvers[1].name: ") and says in p.message, p.message
    approvers.write_text(f'[[approvers]]\nname = "\uff46loor-1"\napproval_key = {key}\n', encoding="utf-8")
    assert list(load_authority_config(write(tmp_path, base())).approvers) == ["floor-1"]  # in its NFKC form


# --- the journal on PostgreSQL -------------------------------------------------------------------------


def test_the_journal_is_in_sqlite_unless_a_postgresql_url_is_given(tmp_path):
    assert load_authority_config(write(tmp_path, base())).journal is None
    url = "postgresql://progressive@db1:5432,db2:5432/progressive?target_session_attrs=read-write"
    cfg = load_authority_config(write(tmp_path, {**base(), "journal": url}))
    assert cfg.journal == url and cfg.warnings == ()


@pytest.mark.parametrize(("value", "says"), [
    (5, "must be a PostgreSQL URL (postgresql://...) in quotes, not the integer 5"),
    ("/var/lib/journal.sqlite3", "must be a PostgreSQL URL"),
    ("postgresql://progressive:secret@db1/progressive", "carries a password: keep it in libpq's passfile"),
    ("postgresql://progressive@db1/progressive?password=secret", "carries a password"),
    ("postgresql://progressive@db1/progressive?target_sessions_attrs=read-write", "libpq can read"),
    ("postgresql://progressive@db1/progressive?sslpassword=secret", "carries a password"),
    # libpq's own message would quote the part it could not read: here, a password
    ("postgresql://progressive:secret%ZZ@db1/progressive", "libpq can read"),
])
def test_a_wrong_journal_is_one_line_naming_the_field(tmp_path, value, says):
    p = one(problems(tmp_path, {**base(), "journal": value}), "journal")
    assert says in p.message and "secret" not in p.message and "target_session_attrs=read-write" in p.hint


def test_a_journal_url_that_would_not_follow_a_failover_is_a_warning(tmp_path):
    cfg = load_authority_config(write(tmp_path, {**base(), "journal": "postgresql://progressive@db1,db2/progressive"}))
    (w,) = cfg.warnings
    assert w.path == "journal" and "target_session_attrs=read-write" in w.message

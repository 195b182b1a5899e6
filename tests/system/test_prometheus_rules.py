"""The alerting rules (config/prometheus/) and the dashboard (config/grafana/): promtool checks the rules and runs their
unit tests; every expression parses and names only metrics the daemons export."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from controller.app.metrics import Metrics
from controller.authority.metrics import AuthorityMetrics

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "prometheus" / "progressive-rules.yml"
RULE_TESTS = sorted((ROOT / "config" / "prometheus" / "tests").glob("*.yml"))
DASHBOARD = ROOT / "config" / "grafana" / "progressive-table.json"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"),
                                    reason="promtool is not installed (CI installs Debian's prometheus for it)")

# PromQL words that are not metric names: operators, modifiers and the functions' names (followed by "(").
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
            "inf", "nan"}


def exported() -> set[str]:
    """Every series name the table daemon and the link authority export, from their registries."""
    names = {"up"}  # Prometheus' own, per scrape target
    table = Metrics("t1")
    table.percent_award_chances({})  # a card table's (counted from its paytables)
    for registry in (table.registry, AuthorityMetrics().registry):
        for family in registry.collect():
            if family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
            else:
                names.add(family.name)
            names.update(s.name for s in family.samples)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: strings, label matchers, ranges and label lists taken out first."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    e = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+\w+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", e):
        if m.group(2) is None and m.group(1).lower() not in KEYWORDS:
            names.add(m.group(1))
    return names


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def grafana_free(expr: str) -> str:
    """The expression as Grafana sends it: its variables replaced by values."""
    return (expr.replace("$__rate_interval", "5m").replace("$instance", "cs7:9464").replace("$link", "link:9465"))


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@needs_promtool
def test_promtool_checks_the_rules():
    r = promtool("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


@needs_promtool
def test_the_rules_unit_tests_pass():
    r = promtool("test", "rules", *map(str, RULE_TESTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(RULE_TESTS), r.stdout


def test_every_alert_has_a_firing_and_a_quiet_case():
    alerts = {r["alert"] for r in rules() if "alert" in r}
    firing, quiet = set(), set()
    for f in RULE_TESTS:
        for t in yaml.safe_load(f.read_text())["tests"]:
            for a in t["alert_rule_test"]:
                (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
    assert alerts - firing == set() and alerts - quiet == set(), (alerts - firing, alerts - quiet)


def test_every_alert_says_what_to_do():
    for r in rules():
        if "alert" in r:
            assert "for" in r and r["labels"]["severity"] in ("warning", "critical"), r["alert"]
            assert r["annotations"]["summary"] and len(r["annotations"]["description"]) > 80, r["alert"]


@needs_promtool
def test_a_changed_threshold_fails_the_unit_tests(tmp_path):
    """The unit tests can fail: with the lock-out threshold at 500 ms instead of 250 ms the slow lock-out is quiet."""
    text = RULES.read_text()
    assert "p99_1h > 0.25)" in text
    (tmp_path / "progressive-rules.yml").write_text(text.replace("p99_1h > 0.25)", "p99_1h > 0.5)"))
    (tmp_path / "tests").mkdir()
    for f in RULE_TESTS:
        shutil.copy(f, tmp_path / "tests" / f.name)
    r = promtool("test", "rules", *(f.name for f in RULE_TESTS), cwd=tmp_path / "tests")
    assert r.returncode != 0
    assert "ProgressiveLockoutSlow" in r.stdout + r.stderr


def test_rules_name_only_exported_metrics():
    recorded = {r["record"] for r in rules() if "record" in r}
    known = exported() | recorded
    for r in rules():
        assert metric_names(r["expr"]) - known == set(), r.get("alert") or r.get("record")


def test_the_name_check_would_catch_a_wrong_name():
    assert metric_names('rate(progressive_lockout_latency_second_bucket{le="0.5"}[5m]) > bool 1') \
        - exported() == {"progressive_lockout_latency_second_bucket"}


def test_dashboard_structure():
    d = json.loads(DASHBOARD.read_text())
    assert d["schemaVersion"] >= 39
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"table", "instance", "link"} <= set(variables)
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        if p["type"] != "row":
            assert p["targets"] and p["datasource"]["uid"] == "${datasource}", p["title"]
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), p["title"]


# An aggregation in a query and what it keeps: one that drops `instance` sums the tables chosen into one series.
AGGREGATION = re.compile(r"\b(?:sum|max|min|avg|count)\s*(?:by\s*\(([^)]*)\))?\s*\(")


def test_dashboard_asks_for_its_data_source_and_tells_tables_apart():
    """Imported, the dashboard asks for the Prometheus data source (`__inputs`), and every series of one table (its
    meters, round, blocks, devices, lock-out, journal) names its table: with several tables chosen, two tables'
    `main` meters or `seat-3` devices are not two lines each unnamed."""
    d = json.loads(DASHBOARD.read_text())
    (ds,) = d["__inputs"]
    assert (ds["type"], ds["pluginId"]) == ("datasource", "prometheus")
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["current"]["value"] == "${" + ds["name"] + "}"
    per_table = 0
    for p in d["panels"]:
        for t in p.get("targets", []):
            kept = [[x.strip() for x in by.split(",")] for by in AGGREGATION.findall(t["expr"])]
            if '"$instance"' in t["expr"] and all("instance" in by for by in kept):  # one series a table
                assert "{{table}}" in t["legendFormat"] and "group_left (table)" in t["expr"], (p["title"], t)
                per_table += 1
            if "{{meter}}" in t.get("legendFormat", "") and '"$instance"' in t["expr"]:
                assert "{{table}}" in t["legendFormat"], t  # never a table's meter summed with another's
    assert per_table >= 20, per_table


def test_dashboard_names_only_exported_metrics():
    known = exported() | {r["record"] for r in rules() if "record" in r}
    for expr in dashboard_exprs():
        names = metric_names(grafana_free(expr))
        assert names and names - known == set(), expr


@needs_promtool
def test_dashboard_expressions_parse(tmp_path):
    """Each panel's query, its Grafana variables filled in, as a recording rule: promtool parses it."""
    exprs = dashboard_exprs()
    group = {"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": grafana_free(e)}
                                             for i, e in enumerate(exprs)]}
    f = tmp_path / "dashboard.yml"
    f.write_text(yaml.safe_dump({"groups": [group]}))
    r = promtool("check", "rules", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in r.stdout

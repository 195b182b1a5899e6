"""The example Alertmanager configuration (config/alertmanager/alertmanager.yml) on Debian's real Alertmanager: amtool
checks it and routes every alert of the rules to its receiver; a pulled cable's alerts, exactly as the rules' unit
test (config/prometheus/tests/pulled-cable.yml) expects them to fire, are posted to a running Alertmanager, which
holds back the nine devices' and seven seats' alerts behind the bus's and notifies the bus alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tableproc import free_port

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "alertmanager" / "alertmanager.yml"
RULES = ROOT / "config" / "prometheus" / "progressive-rules.yml"
PULLED_CABLE = ROOT / "config" / "prometheus" / "tests" / "pulled-cable.yml"
AMTOOL = shutil.which("amtool")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
WAIT_S = 20.0

pytestmark = pytest.mark.skipif((AMTOOL is None or ALERTMANAGER is None) and not os.environ.get("CI"),
                                reason="Debian's prometheus-alertmanager is not installed (CI installs it)")

SECURITY = {"ProgressiveHitsBeyondOdds", "ProgressiveLinkHitsBeyondOdds", "ProgressiveLinkAnomaly",
            "ProgressiveLinkForgedMessage", "ProgressiveLedgerAnchorProblem", "ProgressiveSecretGuessing"}


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert AMTOOL is not None
    return subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=30)


def alerts_of_the_rules() -> dict[str, str]:
    """Each alert of the rules and its severity."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r["labels"]["severity"] for g in groups for r in g["rules"] if "alert" in r}


def pulled_cable_alerts() -> list[dict[str, str]]:
    """The labels of every alert the rules fire on a pulled cable (their unit test's expectation)."""
    test = yaml.safe_load(PULLED_CABLE.read_text())["tests"][0]
    return [{"alertname": case["alertname"], **{k: str(v) for k, v in exp["exp_labels"].items()}}
            for case in test["alert_rule_test"] for exp in case.get("exp_alerts") or []]


def test_amtool_checks_the_configuration():
    r = amtool("check-config", str(CONFIG))
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    assert "4 inhibit rules" in r.stdout


def test_every_alert_reaches_the_people_who_act_on_it():
    alerts = alerts_of_the_rules()
    assert "ProgressiveBusDown" in alerts and alerts.keys() >= SECURITY
    for name, severity in alerts.items():
        want = "surveillance" if name in SECURITY else {"critical": "slot-tech-pager", "warning": "floor"}[severity]
        r = amtool("config", "routes", "test", f"--config.file={CONFIG}", f"alertname={name}",
                   f"severity={severity}", "table=CS-07")
        assert r.returncode == 0 and r.stdout.split() == [want], (name, r.stdout, r.stderr)


def test_the_pulled_cable_test_fires_one_bus_nine_devices_and_seven_seats():
    names = [a["alertname"] for a in pulled_cable_alerts()]
    assert (names.count("ProgressiveBusDown"), names.count("ProgressiveDeviceDown"),
            names.count("ProgressiveSeatDisabled")) == (1, 9, 7)


class _Hook(BaseHTTPRequestHandler):
    received: list[dict] = []
    arrived = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append({"path": self.path, **json.loads(body)})
        type(self).arrived.set()
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _for_the_test(hook: str) -> str:
    """The example, its routes and inhibitions as they are, its receivers posting to `hook`, and its waits short."""
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["receivers"] = [{"name": r["name"], "webhook_configs": [{"url": f"{hook}/{r['name']}"}]}
                        for r in cfg["receivers"]]
    cfg["route"]["group_wait"] = "1s"
    for route in cfg["route"]["routes"]:
        route.pop("group_wait", None)
    return yaml.safe_dump(cfg)


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_a_pulled_cable_is_one_notification_on_a_real_alertmanager(tmp_path):
    _Hook.received, _Hook.arrived = [], threading.Event()
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    (tmp_path / "am.yml").write_text(_for_the_test(f"http://127.0.0.1:{hook.server_port}"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    assert ALERTMANAGER is not None
    proc = subprocess.Popen([ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}",
                             f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:  # its readiness endpoint, until it answers
            try:
                urllib.request.urlopen(f"{base}/-/ready", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        fired = pulled_cable_alerts()
        body = json.dumps([{"labels": labels, "annotations": {"summary": labels["alertname"]}} for labels in fired])
        req = urllib.request.Request(f"{base}/api/v2/alerts", data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).close()

        assert _Hook.arrived.wait(WAIT_S), "no notification"
        first = _Hook.received[0]
        assert first["path"] == "/slot-tech-pager"
        assert [a["labels"]["alertname"] for a in first["alerts"]] == ["ProgressiveBusDown"]
        assert first["groupLabels"] == {"table": "CS-07", "bus": "table-bus"}

        state = _get(f"{base}/api/v2/alerts")
        assert isinstance(state, list) and len(state) == len(fired) == 17
        bus = next(a for a in state if a["labels"]["alertname"] == "ProgressiveBusDown")
        assert bus["status"]["state"] == "active"
        held = [a for a in state if a is not bus]
        assert all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"] == [bus["fingerprint"]]
                   for a in held), [(a["labels"], a["status"]) for a in held]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        hook.shutdown()
        hook.server_close()

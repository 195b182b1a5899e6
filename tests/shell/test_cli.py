"""progressivectl as other tools use it: the installed command, JSON in and out, exit statuses."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cli import ctl

from ctlrun import run_ctl

CTL = Path(sys.executable).parent / "progressivectl"
DAEMON = Path(sys.executable).parent / "progressived"
ROOT = Path(__file__).resolve().parents[2]

ROUND = {
    "game": "caribbean-stud",
    "wager": "progressive",
    "paytable": "caribbean-stud-progressive-d",
    "meter": {"amount": "25000.00", "reset": "10000.00"},
    "seats": [
        {"seat": 1, "wager": "1.00", "folded": False, "cards": ["AS", "KS", "QS", "JS", "TS"]},
        {"seat": 3, "wager": "5.00", "folded": False, "cards": ["9D", "8D", "7D", "6D", "5D"]},
    ],
    "dealer": {"cards": ["2C", "3C", "4D", "9H", "QC"]},
}


def run(*args: str, stdin: str | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    return run_ctl(*args, stdin=stdin, process=process)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], field: str) -> None:
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert field in lines[0]


def test_settle_from_stdin():
    proc = run("settle", "-", stdin=json.dumps(ROUND), process=True)  # the contract: the installed command
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    awards = [(a["seat"], a["kind"], a["hand"], a["amount"], a["paid_by"]) for a in out["awards"]]
    assert awards == [
        (3, "paytable", "straight-flush", "2500.00", "attendant"),  # 10% of $25,000.00
        (3, "envy", "royal-flush", "5000.00", "table"),
        (1, "paytable", "royal-flush", "22500.00", "attendant"),
        (1, "envy", "straight-flush", "300.00", "table"),
    ]
    assert out["meter"] == {"before": "25000.00", "after": "10000.00", "seeded": "10000.00"}


def test_settle_from_file(tmp_path):
    f = tmp_path / "round.json"
    f.write_text(json.dumps(ROUND))
    proc = run("settle", str(f))
    assert proc.returncode == 0 and json.loads(proc.stdout)["awards"]


def test_settle_bad_card_is_one_line_naming_the_field():
    bad = json.loads(json.dumps(ROUND))
    bad["seats"][1]["cards"][2] = "ZZ"
    assert_one_line_error(run("settle", "-", stdin=json.dumps(bad)), "seats[1].cards[2]")


def test_settle_invalid_json_names_line_and_column():
    proc = run("settle", "-", stdin='{"game": "caribbean-stud",\n  "wager": }')
    assert_one_line_error(proc, "line 2")


def test_settle_missing_file():
    assert_one_line_error(run("settle", "no-such-round.json"), "no-such-round.json")


def test_settle_unknown_paytable():
    bad = dict(ROUND, paytable="caribbean-stud-progressive-z")
    assert_one_line_error(run("settle", "-", stdin=json.dumps(bad)), "caribbean-stud-progressive-z")


def test_bad_arguments_exit_2_one_line():
    assert_one_line_error(run("odds", "--game", "caribbean-stud"), "arguments")
    assert_one_line_error(run("frobnicate"), "arguments")


def test_odds_json_caribbean_stud_paytable_d():
    proc = run(
        "odds", "--game", "caribbean-stud", "--wager", "progressive",
        "--paytable", "caribbean-stud-progressive-d", "--meter", "10000.00", "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["total"] == 2_598_960
    outcomes = {o["hand"]: o for o in out["outcomes"]}
    assert outcomes["royal-flush"]["count"] == 4
    assert outcomes["straight-flush"]["count"] == 36
    assert outcomes["three-of-a-kind"]["count"] == 54_912
    assert "break_even_meter" in out and "return" in out


def test_odds_text_for_people():
    proc = run("odds", "--game", "flop-poker", "--wager", "three-card-bonus", "--paytable", "flop-poker-three-card-bonus")
    assert proc.returncode == 0, proc.stderr
    assert "mini-royal" in proc.stdout and "22100" in proc.stdout.replace(",", "")


def test_odds_unknown_wager_names_it():
    proc = run("odds", "--game", "flop-poker", "--wager", "progressive", "--paytable", "flop-poker-progressive-a")
    assert_one_line_error(proc, "--wager")


def test_paytables_lists_every_builtin_and_loaded():
    proc = run("paytables", "--json", "--paytable-dir", str(ROOT / "config" / "paytables"))
    assert proc.returncode == 0, proc.stderr
    ids = {t["id"] for t in json.loads(proc.stdout)}
    for expected in (
        "caribbean-stud-progressive-a", "caribbean-stud-progressive-e", "five-card-hand-bonus",
        "four-card-poker-bad-beat-a", "four-card-poker-bad-beat-b", "flop-poker-progressive-a",
        "flop-poker-progressive-b", "flop-poker-flop-wager", "flop-poker-three-card-bonus",
        "hot-roller-a", "hot-roller-b", "props-and-hops",
    ):
        assert expected in ids
    assert len(ids) >= 16  # and the four example files
    text = run("paytables")
    assert text.returncode == 0 and "caribbean-stud-progressive-d" in text.stdout


def test_daemon_refuses_a_missing_configuration(tmp_path):
    proc = subprocess.run([str(DAEMON), "--config", str(tmp_path / "none.toml")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "none.toml" in proc.stderr


# Parser robustness: whatever JSON arrives, the answer is a settlement or one line of bad input.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6)
    | st.sampled_from(["AS", "10h", "caribbean-stud", "progressive", "1.00", "10000.00", "dealer"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["game", "wager", "paytable", "meter", "seats", "cards", "seat", "amount", "reset",
                         "dealer", "community", "wagers", "folded", "magic_card", "lucky_seat", "x"]),
        inner, max_size=6),
    max_leaves=20,
)


def _mutate(base: dict, path: list, value) -> dict:
    doc = json.loads(json.dumps(base))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        json_values,
        st.tuples(
            st.sampled_from([["game"], ["meter"], ["meter", "amount"], ["seats"], ["seats", 0], ["seats", 0, "cards"],
                             ["seats", 1, "seat"], ["seats", 0, "wager"], ["dealer"], ["dealer", "cards"],
                             ["paytable"], ["magic_card"], ["lucky_seat"]]),
            json_values,
        ).map(lambda pv: _mutate(ROUND, *pv)),
    )
)
def test_settle_never_crashes_on_arbitrary_json(monkeypatch, capsys, doc):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(doc)))
    status = ctl.main(["settle", "-"])
    out, err = capsys.readouterr()
    assert status in (0, 2), err
    if status == 2:
        assert len(err.strip().splitlines()) == 1 and out == ""
    else:
        json.loads(out)


def test_check_paytable_linked_caribbean_stud_639a_12_d_3():
    """§ 639a.12(d)(3): Paytables A, B, C and E may not be selected for a linked progressive."""
    for letter in "abce":
        proc = run("check-paytable", "--game", "caribbean-stud", "--wager", "progressive",
                   "--paytable", f"caribbean-stud-progressive-{letter}", "--linked")
        assert_one_line_error(proc, "639a.12(d)(3)")
    ok = run("check-paytable", "--game", "caribbean-stud", "--wager", "progressive",
             "--paytable", "caribbean-stud-progressive-d", "--linked", "--wager-sizes", "1.00,5.00")
    assert ok.returncode == 0 and "may be selected" in ok.stdout


def test_check_paytable_envy_must_cover_every_wager_size():
    proc = run("check-paytable", "--game", "caribbean-stud", "--wager", "progressive",
               "--paytable", "caribbean-stud-progressive-d", "--wager-sizes", "1.00,2.00,5.00")
    assert_one_line_error(proc, "$2.00")


def test_settle_refuses_a_paytable_the_rules_forbid(tmp_path):
    """A copy of Paytable D that pays a pair is not a paytable the regulations print."""
    text = (ROOT / "controller" / "paytables" / "builtin" / "caribbean-stud-progressive-d.toml").read_text()
    text = text.replace('id = "caribbean-stud-progressive-d"', 'id = "house-d"')
    f = tmp_path / "house-d.toml"
    f.write_text(text.replace('award = "9 for 1"', 'award = "10 for 1"'))
    doc = dict(ROUND, paytable=str(f))
    assert_one_line_error(run("settle", "-", stdin=json.dumps(doc)), "paytable")


def test_settle_on_a_fifo_or_a_device_is_refused_not_read(tmp_path, capsys):
    """The JSON file of `settle` is read as the configuration files are: a FIFO would hang it, /dev/zero would
    exhaust its memory; each is refused by kind, in one line naming the argument."""
    import os

    from controller.cli import ctl

    fifo = tmp_path / "round.json"
    os.mkfifo(fifo)
    for name, kind in ((str(fifo), "named pipe"), ("/dev/zero", "character device")):
        assert ctl.main(["settle", name]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"progressivectl: {name}: cannot read: ") and kind in err and "Traceback" not in err

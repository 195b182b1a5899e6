"""The meter's operations keep their JSON form and their refusals exactly, case by recorded case.

Each operation's ``to_dict()`` is journaled and hash-chained, and a replay runs ``from_dict`` on every entry: a
key moved, a value spelled differently, or a bad operation refused with another field or message changes what the
journal holds or what a reader is told. ``meter_ops_golden.jsonl.gz`` holds cases recorded from the operations as
they were written before their fields were declared as a table: constructor calls and dicts, valid ones (drawn by
hypothesis) and invalid ones (every field of a valid operation given each value of a pool of bad ones, every pair
of fields made bad at once, which decides which error comes first, keys missing, unknown keys, the wrong kind,
under a field prefix and without). Each case must still give what it recorded: the repr (every attribute as
normalised), the dict as JSON in its own key order, and for a refusal the exception's type, field and message.

Regenerate the file only when a change of the journal's form is meant: ``python -m tests.core.test_meter_ops_codec``.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import pytest

from controller.errors import InputError
from controller.meter import OPS, MeterParams, op_from_dict, params_from_dict, params_to_dict
from controller.meter.ops import CENTS, MOMENT, POSITIVE, TEXT, TEXT_OR_EMPTY, Field, Operation, Relation

GOLDEN = Path(__file__).with_name("meter_ops_golden.jsonl.gz")
UTC = UTC
AT = datetime(2025, 1, 31, 21, 5, tzinfo=UTC)
PREFIXES = ("", "entries[3].op")

# --- a JSON form for the arguments of a case (constructor arguments are not all JSON) ---------------------------


def enc(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"$float": repr(v)}
    if isinstance(v, tuple):
        return {"$tuple": [enc(x) for x in v]}
    if isinstance(v, list):
        return [enc(x) for x in v]
    if isinstance(v, dict):
        return {"$dict": [[enc(k), enc(x)] for k, x in v.items()]}
    if isinstance(v, datetime):
        return {"$dt": v.isoformat()}
    if isinstance(v, Fraction):
        return {"$frac": [v.numerator, v.denominator]}
    if isinstance(v, Decimal):
        return {"$dec": str(v)}
    if isinstance(v, MeterParams):
        return {"$params": params_to_dict(v)}
    raise TypeError(f"no JSON form for {v!r}")


def dec(v: Any) -> Any:
    if isinstance(v, list):
        return [dec(x) for x in v]
    if not isinstance(v, dict):
        return v
    (tag, x), = v.items()
    if tag == "$float":
        return float(x)
    if tag == "$tuple":
        return tuple(dec(y) for y in x)
    if tag == "$dict":
        return {dec(k): dec(y) for k, y in x}
    if tag == "$dt":
        return datetime.fromisoformat(x)
    if tag == "$frac":
        return Fraction(*x)
    if tag == "$dec":
        return Decimal(x)
    if tag == "$params":
        return params_from_dict(x)
    raise ValueError(f"unknown tag {tag}")


def outcome(make: Callable[[], Any]) -> dict[str, Any]:
    """What a case gives now: the operation's repr and JSON, or the refusal."""
    try:
        op = make()
    except InputError as e:
        return {"error": [type(e).__name__, e.field, e.problem]}
    except Exception as e:
        return {"crash": [type(e).__name__, str(e)]}
    d = op.to_dict()
    out = {"repr": repr(op), "json": json.dumps(d)}
    back = outcome_of_reading(lambda: type(op).from_dict(d) == op == op_from_dict(json.loads(out["json"])))
    if back is not True:
        out["read_back"] = back  # written, yet not read back as it was: recorded, to stay as it is
    return out


def outcome_of_reading(read: Callable[[], bool]) -> Any:
    try:
        return read()
    except InputError as e:
        return [type(e).__name__, e.field, e.problem]


def arguments(case: dict[str, Any], cases: list[dict[str, Any]]) -> Any:
    """A case's arguments: its own, or another case's edited (a key set in place or first, or dropped)."""
    if "args" in case:
        return dec(case["args"])
    args = dict(arguments(cases[case["from"]], cases))
    for op, key, *value in case["edit"]:
        if op == "set":
            args[key] = dec(value[0])
        elif op == "first":
            args = {key: dec(value[0]), **{k: v for k, v in args.items() if k != key}}
        else:
            del args[key]
    return args


def run(case: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, Any]:
    """What the case gives now, in the form recorded (an edited case's operation as a digest: it is a twin)."""
    cls = OPS[case["kind"]] if "kind" in case else None
    args = arguments(case, cases)
    if case["via"] == "new":
        assert cls is not None
        out = outcome(lambda: cls(**args))
    elif case["via"] == "dict":
        assert cls is not None
        out = outcome(lambda: cls.from_dict(args, case["prefix"]))
    else:
        out = outcome(lambda: op_from_dict(args, case["prefix"]))
    if "from" in case and "repr" in out:
        out = {"digest": hashlib.sha256(json.dumps(out).encode()).hexdigest()[:32]}
    return out


def golden() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    return golden()


def test_the_golden_cases_cover_every_operation_every_way(cases: list[dict[str, Any]]) -> None:
    seen = {(c.get("kind"), c["via"], "error" in c["out"]) for c in cases}
    for kind in OPS:
        for via in ("new", "dict"):
            assert (kind, via, False) in seen and (kind, via, True) in seen, (kind, via)
    assert (None, "any", True) in seen and len(cases) > 5000


@pytest.mark.parametrize("kind", [*OPS, None])
def test_every_case_gives_what_it_gave_before(cases: list[dict[str, Any]], kind: str | None) -> None:
    mine = [c for c in cases if c.get("kind") == kind]
    assert mine
    wrong = [(c, got) for c in mine if (got := run(c, cases)) != c["out"]]
    assert not wrong, "\n".join(f"{c['via']} {c.get('prefix', '')!r} {arguments(c, cases)!r}\n  was {c['out']}\n  now {got}"
                                for c, got in wrong[:5]) + f"\n({len(wrong)} of {len(mine)} cases differ)"


def test_a_changed_answer_is_caught(cases: list[dict[str, Any]]) -> None:
    """The comparison sees a change of one character in a JSON form, and of a message."""
    ok = next(c for c in cases if "json" in c["out"])
    assert run({**ok, "out": {}}, cases) == ok["out"]
    assert run(ok, cases) != {**ok["out"], "json": ok["out"]["json"].replace('"at"', '"at "')}
    bad = next(c for c in cases if "error" in c["out"])
    assert run(bad, cases) != {"error": [*bad["out"]["error"][:2], bad["out"]["error"][2] + "."]}


# --- a new operation is its fields ----------------------------------------------------------------------------


def _below_a_limit(op: Any) -> None:
    if op.cents > 100_000 and op.note == "":
        raise InputError("note", "a tip above $1,000.00 says why")


@dataclass(frozen=True)
class Tip(Operation):  # not an operation of the meter: only the table's
    kind: ClassVar[str] = "tip"
    cents: int
    at: datetime
    note: str = ""
    seat: int = 1

    FIELDS: ClassVar[tuple[Field | Relation, ...]] = (
        Field("cents", CENTS, "amount"),
        Field("at", MOMENT),
        Field("note", TEXT_OR_EMPTY, optional=True, omit=lambda v: v == ""),
        Relation(_below_a_limit),
        Field("seat", POSITIVE, optional=True),
    )


def test_a_new_operation_is_its_fields_and_its_relations() -> None:
    tip = Tip(500, AT)
    assert json.dumps(tip.to_dict()) == '{"kind": "tip", "amount": "5.00", "at": "2025-01-31T21:05:00+00:00", "seat": 1}'
    big = Tip(200_000, AT, "a royal flush", 3)
    assert list(big.to_dict()) == ["kind", "amount", "at", "note", "seat"]
    assert Tip.from_dict(json.loads(json.dumps(big.to_dict()))) == big
    assert Tip.from_dict({"kind": "tip", "amount": "5.00", "at": "2025-01-31T21:05:00+00:00"}) == tip
    refusals = [
        (lambda: Tip(0, AT), "cents", "must be more than zero, not 0"),
        (lambda: Tip(200_000, AT), "note", "a tip above $1,000.00 says why"),
        (lambda: Tip(200_000, AT, seat=0), "note", "a tip above $1,000.00 says why"),  # in the order of FIELDS
        (lambda: Tip(500, AT, seat=0), "seat", "must be at least 1, not 0"),
        (lambda: Tip.from_dict({"kind": "tip", "amount": "0.00", "at": "2025-01-31T21:05:00+00:00"}, "op"),
         "op.amount", "must be more than zero, not 0"),  # the constructor's "cents", named by its key
        (lambda: Tip.from_dict({"kind": "tip", "at": "x", "amount": "x"}, "op"), "op.amount",
         "'x' is not a decimal amount of dollars such as \"10000.00\""),  # read in the order of FIELDS, not of the dict
        (lambda: Tip.from_dict({"kind": "tip", "amount": "5.00"}, "op"), "op.at", "is required"),
        (lambda: Tip.from_dict({"kind": "tip", "amount": "5.00", "at": "2025-01-31T21:05:00+00:00", "x": 1}, "op"),
         "op.x", "unknown key; expected one of amount, at, kind, note, seat"),
        (lambda: Tip.from_dict({"kind": "top-up"}), "kind", "is 'top-up', expected 'tip'"),
    ]
    for make, field, problem in refusals:
        with pytest.raises(InputError) as e:
            make()
        assert (e.value.field, e.value.problem) == (field, problem)


def test_fields_that_are_not_the_class_s_are_refused_when_it_is_declared() -> None:
    with pytest.raises(TypeError, match=r"FIELDS name \['at'\], the class declares \['cents', 'at'\]"):
        class Missing(Operation):
            kind: ClassVar[str] = "missing"
            cents: int
            at: datetime
            FIELDS: ClassVar[tuple[Field | Relation, ...]] = (Field("at", MOMENT),)
    with pytest.raises(TypeError, match="a key that may be left out must be optional"):
        class Unreadable(Operation):
            kind: ClassVar[str] = "unreadable"
            note: str
            FIELDS: ClassVar[tuple[Field | Relation, ...]] = (Field("note", TEXT, omit=lambda v: not v),)


# --- how the golden file was made (run as a module) ------------------------------------------------------------

PARAMS = MeterParams("main", 1_000_000, Fraction(3, 20), (500, 2500), Fraction(1, 50), 5_000_000, 50)

# Values that are wrong somewhere (and right elsewhere): each is given to every field of a valid operation.
NEW_POOL: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 51, 52, 10**20, 1.5, float("nan"),
    "", " ", "x", " x", "x ", "a b", "a\tb", "\x00", "é", "x" * 100, "x" * 101, "y" * 500, "y" * 501,
    "100% of meter", "12.5% of meter", "500 for 1", "$1,000", "50.5", "1/3", "0", "-0.000125", "AS",
    "table", "attendant", "AH KH QH JH TH", "AH-KH", "x" * 65, "0123456789abcdef" * 2, "0123456789ABCDEF" * 2,
    [], [1], [0, 0], [1, 0], ["a"], ["b", "a", "a"], [""], [(1, 500)], ((1, 500), (2, 2500)), ((1, 500), (1, 500)),
    ((0, 500),), ((1, 0),), ((1, -5),), ((1, 5.0),), ((True, 500),), ((1, True),), ((1, 500, 3),), ((1, 500), "x"),
    (1,), ((),), {"a": 1}, Fraction(0), Fraction(1, 3), Fraction(25, 2), Fraction(100), Fraction(101), Fraction(-1),
    Decimal("12.5"), Decimal("NaN"), Decimal("Infinity"), datetime(2025, 1, 31, 21, 5), AT,
    datetime(2025, 6, 1, 8, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-7, minutes=-30))), PARAMS,
)

# The same for the JSON form: each is given to every key of a valid operation's dict.
DICT_POOL: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 51, 52, 1.5, "", " ", "x", " x", "x ", "a b", "a\tb", "\x00", "x" * 101,
    "y" * 501, "100% of meter", "12.5% of meter", "500 for 1", "12.50", "12.5", "12.505", "-12.50", "0.00",
    "0.000125", "-0.000125", "1e3", "1/3", "100/0", "0", "101", "AS", "as", "10h", "X9", "table", "attendant",
    "2025-01-31T21:05:00", "2025-01-31T21:05:00+00:00", "2025-13-01T00:00:00+00:00", "0123456789abcdef" * 2,
    "AH KH QH JH TH", [], [1], [0, 0], [1, 0], [-1], [True], ["0"], ["a"], ["b", "a", "a"], [""], ["a b"], [1, "x"],
    [{"seat": 1, "amount": "5.00"}], [{"seat": 1, "amount": "5.00"}, {"seat": 1, "amount": "25.00"}],
    [{"seat": 1}], [{"seat": 1, "amount": "5.00", "x": 1}], [{"seat": "1", "amount": "5.00"}],
    [{"seat": 0, "amount": "5.00"}], [{"seat": 1, "amount": "0.00"}], [{"seat": 1, "amount": "-5.00"}],
    [{"seat": True, "amount": "5.00"}], [{"seat": 1, "amount": 5}], [{"seat": 1, "amount": "5.001"}], [[1, "5.00"]],
    [{"seat": 1, "amount": "5.00"}, 7], {}, {"x": 1}, params_to_dict(PARAMS),
    {**params_to_dict(PARAMS), "reset": "1.00"}, {**params_to_dict(PARAMS), "rate": 0.15},
)


def strategies() -> dict[str, Any]:
    """Valid values of each operation's arguments (the bad ones come from the pools)."""
    from hypothesis import strategies as st

    ident = st.from_regex(r"[A-Za-z0-9._:#-]{1,24}", fullmatch=True)
    text = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ,.'!é-]{0,40}[A-Za-z0-9.]", fullmatch=True)
    offsets = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
    moment = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                          timezones=st.builds(timezone, offsets) | st.just(UTC))
    seat = st.integers(1, 9)
    cents = st.integers(1, 10**9)
    money_of = st.sampled_from([500, 2500, 10000, 1])
    wagers = st.lists(st.tuples(st.integers(1, 7), money_of), min_size=1, max_size=8).map(tuple)

    @st.composite
    def book(draw: Any) -> dict[str, Any]:
        w = draw(wagers)
        kw: dict[str, Any] = {"round_id": draw(ident), "table": draw(ident), "wagers": w, "at": draw(moment)}
        if draw(st.booleans()):
            kw["magic_card"] = draw(st.integers(0, 51))
        if draw(st.booleans()):
            kw["lucky_seat"] = draw(st.integers(0, 7))
        if draw(st.booleans()):
            kw["on_dealer"] = tuple(draw(st.permutations(range(len(w))))[:draw(st.integers(0, len(w)))])
        if draw(st.booleans()):
            kw["round_meters"] = tuple(draw(st.lists(ident, max_size=3)))
        return kw

    percents = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal(100), places=4)

    @st.composite
    def percent_award(draw: Any, last: str) -> dict[str, Any]:
        p = draw(percents)
        given = draw(st.sampled_from([Fraction(p), p, str(p), int(p) if p == int(p) else Fraction(p)]))
        award = draw(st.sampled_from([f"{p.normalize():f}% of meter", f"{p}% OF METER", f" {p}%  of the meter", "500 for 1"]))
        kw: dict[str, Any] = {"round_id": draw(ident), "table": draw(ident), "seat": draw(seat), "hand": draw(text),
                              "award": award, "percent": given, "at": draw(moment), last: draw(ident if last == "claim" else text)}
        if draw(st.booleans()):
            kw["shares"] = draw(st.integers(1, 7))
        return kw

    @st.composite
    def lock(draw: Any) -> dict[str, Any]:
        kw = draw(percent_award("claim"))
        if draw(st.booleans()):
            kw["nonce"] = draw(st.text("0123456789abcdef", min_size=32, max_size=32) )
        if draw(st.booleans()):
            kw["cards"] = draw(st.sampled_from(["AH KH QH JH TH", "2C 3D 4S 5H 7C", "AH", ""]) )
        return kw

    fixed_awards = st.sampled_from(["500 for 1", "30 to 1", "3 to 2", "$1,000", "Envy Bonus", "Lucky Bonus"])
    params = st.builds(MeterParams, meter_id=st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
                       reset_cents=st.integers(1_000_000, 10**9), rate=st.sampled_from([Fraction(3, 20), Fraction(1, 5)]),
                       wager_sizes=st.lists(st.integers(1, 10**5), min_size=1, max_size=4, unique=True).map(tuple))
    return {
        "book-contributions": book(),
        "void-round": st.fixed_dictionaries({"round_id": ident, "at": moment, "reason": text}),
        "pay-percent-award": percent_award("approved_by"),
        "pay-fixed-award": st.fixed_dictionaries({
            "round_id": ident, "table": ident, "seat": seat, "hand": text | st.just(""), "award": fixed_awards,
            "cents": cents, "paid_by": st.sampled_from(["table", "attendant"]), "at": moment,
            "approved_by": text}),
        "top-up": st.fixed_dictionaries({"cents": cents, "at": moment, "who": text, "reason": text}),
        "adjust": st.fixed_dictionaries({"units": st.integers(-10**12, 10**12), "reason": text, "credential": text,
                                         "at": moment}),
        "change-params": st.fixed_dictionaries({"params": params, "who": text, "at": moment}),
        "close-round": st.fixed_dictionaries({"round_id": ident, "at": moment}),
        "lock-percent-award": lock(),
        "pay-locked-award": st.fixed_dictionaries({"claim": ident, "approved_by": text, "at": moment}),
        "release-locked-award": st.fixed_dictionaries({"claim": ident, "rejected_by": text, "reason": text,
                                                       "at": moment}),
    }


def draws(strategy: Any, n: int) -> list[dict[str, Any]]:
    from hypothesis import Phase, given, settings

    out: list[dict[str, Any]] = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate])
    @given(strategy)
    def collect(kw: dict[str, Any]) -> None:
        out.append(kw)

    collect()
    return out


def is_error(c: dict[str, Any]) -> bool:
    return "error" in c["out"] or "crash" in c["out"]


def new_edited(case: Callable[..., dict[str, Any]], kind: str, names: list[str],
               base: int) -> Iterator[dict[str, Any]]:
    """Every field of the constructor's case `base` given every bad value, alone and in pairs."""
    first_bad: dict[str, Any] = {}
    for f in names:
        for v in NEW_POOL:
            c = case(kind, "new", None, base=base, edit=(("set", f, v),))
            yield c
            if is_error(c):
                first_bad.setdefault(f, v)
    for i, f in enumerate(first_bad):
        for g in list(first_bad)[i + 1:]:
            yield case(kind, "new", None, base=base, edit=(("set", f, first_bad[f]), ("set", g, first_bad[g])))


def dict_edited(case: Callable[..., dict[str, Any]], cases: list[dict[str, Any]], kind: str,
                base: int) -> Iterator[dict[str, Any]]:
    """The dict of case `base` with each key dropped, given every bad value, alone and in pairs, and with
    keys it does not have."""
    d = dec(cases[base]["args"])
    prefix = cases[base]["prefix"]

    def edited(*edit: tuple[Any, ...]) -> dict[str, Any]:
        return case(kind, "dict", None, prefix, base, edit)

    first_bad = {}
    for k in d:
        yield edited(("drop", k))
        for v in DICT_POOL:
            c = edited(("set", k, v))
            yield c
            if is_error(c):
                first_bad.setdefault(k, v)
    for i, k in enumerate(first_bad):
        for j in list(first_bad)[i + 1:]:
            yield edited(("set", k, first_bad[k]), ("set", j, first_bad[j]))
            yield edited(("drop", j), ("set", k, first_bad[k]), ("set", j, first_bad[j]))  # j after k
    for extra in ("amount", "cents", "x", "shares", "nonce", "cards", "magic_card", "on_dealer"):
        yield edited(("set", extra, d.get(extra, "1")))
        yield edited(("first", extra, "1"))  # an unknown key met first
        yield edited(("first", extra, "1"), ("drop", "at"))
    for other in OPS:
        yield edited(("set", "kind", other))


def generate() -> Iterator[dict[str, Any]]:
    cases: list[dict[str, Any]] = []

    def case(kind: str | None, via: str, args: Any, prefix: str = "", base: int | None = None,
             edit: tuple[tuple[Any, ...], ...] = ()) -> dict[str, Any]:
        c: dict[str, Any] = {"via": via}
        if base is None:
            c["args"] = enc(args)
        else:
            c["from"] = base
            c["edit"] = [[op, key, *(enc(v) for v in value)] for op, key, *value in edit]
        if kind is not None:
            c["kind"] = kind
        if via != "new":
            c["prefix"] = prefix
        c["out"] = run(c, cases)
        cases.append(c)
        return c

    for kind, strategy in strategies().items():
        names = [f.name for f in dataclasses.fields(OPS[kind])]
        drawn = draws(strategy, 60)
        valid = []  # (index of the constructor's case, index of the dict's)
        for kw in drawn:
            c = case(kind, "new", kw)
            yield c
            if not is_error(c):
                d = json.loads(c["out"]["json"])
                valid.append((len(cases) - 1, len(cases)))
                yield case(kind, "dict", d, PREFIXES[len(valid) % 2])
                yield case(None, "any", d, PREFIXES[len(valid) % 2])
        assert len(valid) >= 10, kind
        for base, _ in valid[:2]:
            yield from new_edited(case, kind, names, base)
        by_keys = sorted(valid, key=lambda v: len(dec(cases[v[1]]["args"])))
        for _, base in (by_keys[-1], by_keys[0]):  # the fullest dict and the sparsest
            yield from dict_edited(case, cases, kind, base)
        for prefix in PREFIXES:
            for d in (None, [], "x", 1, {}, {"kind": kind}, {"kind": None}):
                yield case(kind, "dict", d, prefix)
    for prefix in PREFIXES:
        for d in (None, [], "x", 1, {}, {"kind": None}, {"kind": 1}, {"kind": "pay-award"}, {"kind": "Adjust"},
                  {"kind": "adjust"}, {"kind": "adjust", "amount": "1.00"}):
            yield case(None, "any", d, prefix)


if __name__ == "__main__":
    n = 0
    with GOLDEN.open("wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as z:  # the same bytes each time
        for c in generate():
            z.write((json.dumps(c, ensure_ascii=True, separators=(",", ":")) + "\n").encode())
            n += 1
    print(f"{n} cases written to {GOLDEN.name}", file=sys.stderr)

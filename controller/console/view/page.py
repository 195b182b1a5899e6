"""The console's pages as pure functions of what the daemon answered (`status`, `round`, `history`, and
`meter_series` for the plots) and of the
session (its CSRF token, its supervisor): no I/O here. Every text from the daemon is HTML-escaped.

A page is a list of sections, each rendered on its own (`sections`), so that the server can push only the
sections that changed to an open page. A new section is one more entry of SECTIONS and one more function."""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from html import escape
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.errors import InputError
from controller.games import GAMES
from controller.hands.categories import Four, Poker5, Three
from controller.money import format_units, parse_units
from controller.positions import DEALER
from controller.round import payout_kind as kinds

SECTIONS = ("claims", "daemon", "meters", "round", "devices", "seats", "history", "plots")  # a pending claim first
HISTORY_SHOWN = 25  # the hit history's last entries on the page (the regulations ask for at least the last 25)
LOOPBACK_NAMES = frozenset({"localhost"})


# --- the listening address ---------------------------------------------------------------------------


def parse_listen(text: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT` (an IPv6 host in brackets); ValueError saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:8480)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{text!r}: the port {port_text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"{text!r}: the port must be 1..65535")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from the box itself (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


LOOPBACK = "loopback"


def client_address(remote: str | None) -> str:
    """The client a wrong secret is counted against: its address, with every loopback address one client
    (127.0.0.0/8, ::1 and ::ffff:127.x.y.z all come from the box itself: a local user could pick another per
    guess)."""
    if not remote:
        return "?"
    try:
        ip = ipaddress.ip_address(remote)
    except ValueError:
        return remote
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return LOOPBACK if ip.is_loopback else str(ip)


def host_allowed(host_header: str | None, port: int) -> bool:
    """On loopback without TLS, a request must name the box itself in its Host header: a web site that points its
    own name at 127.0.0.1 (DNS rebinding) cannot read the page from a browser on the box."""
    if not host_header:
        return False
    try:
        host, got = parse_listen(host_header)
    except ValueError:
        return False
    return got == port and is_loopback(host)


# --- requests ------------------------------------------------------------------------------------------


def secret_in_query(keys: Iterable[str]) -> bool:
    """Whether a query string carries a secret (which would then be in every log and history on its way)."""
    return any(k.lower() in ("secret", "password") for k in keys)


def same_origin(origin: str | None, referer: str | None, expected: str) -> bool:
    """A POST comes from the console's own page: its Origin (or, without one, its Referer's origin) is
    `expected` (scheme://host[:port]). Neither given: refused."""
    if origin and origin != "null":
        return origin == expected
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}" == expected
    return False


# --- money ---------------------------------------------------------------------------------------------


CENT = Decimal("0.01")


def dollars(amount: object) -> str:
    """A decimal string of dollars from the daemon ("10000.00") as the sign reads it: $10,000.00."""
    if not isinstance(amount, str):
        return "—"
    try:
        value = Decimal(amount)
    except InvalidOperation:
        return escape(amount)
    if not value.is_finite():
        return escape(amount)
    return f"${value.quantize(CENT, rounding=ROUND_FLOOR):,}"  # parts of a cent are not shown: the sign floors them


# --- the casino's clock ----------------------------------------------------------------------------------


def zone_of(status: Mapping[str, Any] | None) -> tzinfo:
    """The casino's time zone (the table's `[report] time_zone`, in its status); UTC when it says none."""
    name = status.get("time_zone") if isinstance(status, Mapping) else None
    if isinstance(name, str):
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(name)
    return UTC


def local_time(value: object, zone: tzinfo, *, date: bool = True, today: datetime | None = None) -> str:
    """An ISO 8601 moment from the daemon in the casino's time, to the second, with the zone's abbreviation
    ("2026-12-05 10:41:07 EST"), its date left out when `today` is its day; what is not a moment, escaped as it
    came."""
    if not isinstance(value, str) or not value:
        return "—"
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return escape(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(zone)
    if today is not None:
        date = today.astimezone(zone).date() != moment.date()
    return escape(moment.strftime("%Y-%m-%d %H:%M:%S %Z" if date else "%H:%M:%S %Z"))


def identity(snapshot: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(table id, time zone name) of a table's last snapshot, for the page's title and clock."""
    status = snapshot.get("status") if isinstance(snapshot, Mapping) else None
    if not isinstance(status, Mapping) or status.get("role") == "link-authority":  # the floor names itself
        return None, None
    table, zone = status.get("table"), status.get("time_zone")
    return (table if isinstance(table, str) else None), (zone if isinstance(zone, str) else None)


# --- words for people ------------------------------------------------------------------------------------


def _e(value: object) -> str:
    return escape("" if value is None else str(value))


def hand_name(label: object) -> str:
    """A hand's label as people say it: "royal-flush" -> "Royal flush"."""
    text = str(label or "").replace("-", " ").strip()
    return escape(text[:1].upper() + text[1:]) if text else "—"


SUITS = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}


def cards_text(cards: object) -> str:
    """ "AS KS TH" -> "A♠ K♠ 10♥" (the suit's symbol and its letter's colour are not the only sign: the rank and
    symbol read in any colour)."""
    if not isinstance(cards, str):
        return ""
    out = []
    for c in cards.split():
        rank, suit = c[:-1], c[-1:].upper()
        out.append(f"{'10' if rank.upper() == 'T' else rank}{SUITS.get(suit, suit)}")
    return escape(" ".join(out))


def seats_text(seats: Iterable[int]) -> str:
    """[1, 2, 3, 5] -> "seats 1-3 and 5"; [4] -> "seat 4"."""
    ordered = sorted(set(seats))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(f"{ordered[i]}-{ordered[j]}" if j > i + 1 else
                    f"{ordered[i]}, {ordered[j]}" if j == i + 1 else str(ordered[i]))
        i = j + 1
    if not runs:
        return ""
    listed = runs[0] if len(runs) == 1 else ", ".join(runs[:-1]) + " and " + runs[-1]
    return ("seat " if len(ordered) == 1 else "seats ") + listed


def and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def _titles(status: Mapping[str, Any]) -> dict[str, str]:
    """spot -> the wager's configured title ("Progressive Payout Wager"); the dealer's-hand spot of a wager too."""
    out: dict[str, str] = {}
    for w in status.get("wagers") or []:
        if isinstance(w, Mapping) and isinstance(w.get("spot"), str) and w.get("title"):
            out[w["spot"]] = str(w["title"])
            out[f'{w["spot"]}-dealer'] = f'{w["title"]} (dealer\'s hand)'
    return out


def spot_name(status: Mapping[str, Any], spot: object) -> str:
    return escape(_titles(status).get(str(spot), str(spot or "")))


def meter_title(status: Mapping[str, Any], meter: object) -> str | None:
    """A meter as the configuration names it: the title of the wager that feeds it (status `wagers`)."""
    titles = [str(w["title"]) for w in status.get("wagers") or []
              if isinstance(w, Mapping) and w.get("meter") == meter and w.get("title")]
    return " / ".join(titles) if titles else None


def meter_name(status: Mapping[str, Any], meter: object) -> str:
    """A meter as the configuration names it, else its id."""
    return _e(meter_title(status, meter) or meter)


MONEY = re.compile(r"\$([0-9][0-9,]*(?:\.[0-9]+)?)")


CARDS = re.compile(r"\b[2-9TJQKA][SHDC](?: [2-9TJQKA][SHDC])+\b")  # a hand's cards as the daemon writes them
HAND_LABELS = sorted({c.label for kind in (Poker5, Three, Four) for c in kind if "-" in c.label}, key=len, reverse=True)
HANDS = re.compile(r"\b(?:" + "|".join(map(re.escape, HAND_LABELS)) + r")\b")
WAGER_WORDS = {"envy bonus": "Envy Bonus", "magic card": "Magic Card", "lucky bonus": "Lucky Bonus"}
WAGER_RE = re.compile(r"\b(?:" + "|".join(WAGER_WORDS) + r")\b")


def money_words(text: str) -> str:
    """The daemon's words, escaped, as the page says them: every amount as the page shows money ($10001.05 ->
    $10,001.05), a hand's cards with their suits (AS KS -> A♠ K♠), a hand's label in words (royal-flush -> Royal
    flush) and the payouts' names as the regulations write them (envy bonus -> Envy Bonus)."""
    text = CARDS.sub(lambda m: cards_text(m.group(0)), escape(text))
    text = HANDS.sub(lambda m: hand_name(m.group(0)), text)
    text = WAGER_RE.sub(lambda m: WAGER_WORDS[m.group(0)], text)
    return MONEY.sub(lambda m: dollars(m.group(1).replace(",", "")), text)


def game_title(game: object) -> str:
    """A game's name as the regulations title it ("caribbean-stud" -> "Caribbean Stud Poker"); else as it came."""
    found = GAMES.get(game) if isinstance(game, str) else None
    return escape(found.title) if found else _e(game)


# --- sections ------------------------------------------------------------------------------------------


def _daemon(status: Mapping[str, Any] | None, down: str | None) -> str:
    if status is None:
        return (f'<p class="alarm"><span class="icon" aria-hidden="true">✖</span> The daemon is not answering '
                f'({_e(down)}). This page shows what it knew last and reconnects by itself.</p>')
    zone = zone_of(status)
    zone_name = status.get("time_zone") or "UTC"
    return (f'<p class="ident">Table <b>{_e(status.get("table"))}</b> · {game_title(status.get("game"))} · controller '
            f'{_e(status.get("version"))} · times in {_e(zone_name)} '
            f'({_e(datetime.now(UTC).astimezone(zone).strftime("%Z"))})</p>')


def _meters(status: Mapping[str, Any]) -> str:
    rows = []
    for m in status.get("meters") or []:
        linked = (f' <small class="linked">linked: {_e(m.get("linked"))}</small>' if m.get("linked") else "")
        named = meter_title(status, m.get("meter"))
        title = (f'<span class="title">{_e(named)}</span><small class="id">meter {_e(m.get("meter"))}'
                 f'</small>' if named else f'<span class="title">{_e(m.get("meter"))}</span>')
        known = m.get("amount") is not None
        amount = dollars(m.get("amount")) if known else "✖ OFFLINE"
        rows.append(f'<div class="meter"><span class="name">{title}{linked}</span>'
                    f'<span class="amount{"" if known else " offline"}" data-meter="{_e(m.get("meter"))}">{amount}'
                    '</span></div>')
    blocks = status.get("blocks") or []
    link = status.get("link")
    out = []
    if isinstance(link, Mapping) and not link.get("up"):
        heard = link.get("heard_seconds_ago")
        since = f"not heard for {_e(heard)} s" if heard is not None else "not heard since the start"
        out.append(f'<p class="alarm link-offline"><span class="icon" aria-hidden="true">✖</span> Link to the '
                   f'authority OFFLINE ({since}): the linked meters show OFFLINE.</p>')
    if blocks:
        out.append('<p class="alarm"><span class="icon" aria-hidden="true">✖</span> Progressive wagering is '
                   'DISABLED: the sign shows OFFLINE.</p>')
    return "".join(out) + ("".join(rows) or "<p>No meter.</p>")


BLOCKS = {"deck": "the deck (a count other than 52)", "stub": "the stub count is due", "device": "a device is down",
          "link": "the link authority is not heard", "closed": "the table is closed"}
PHASES = {"betting": "BETTING open", "dealing": "DEALING · no more bets"}


def _supervisor_form(action: str, csrf: str, supervisor: str | None, hidden: Mapping[str, object], button: str,
                     *, reason: bool = False) -> str:
    fields = "".join(f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">' for k, v in hidden.items())
    why = '<label>Reason <input name="reason" required></label>' if reason else ""
    return (f'<form method="post" action="/{action}" class="{action}"><input type="hidden" name="csrf" '
            f'value="{_e(csrf)}">{fields}{_credential_fields(supervisor)}{why}'
            f'<button type="submit" class="{action}">{button}</button></form>')


def _round(status: Mapping[str, Any], rnd: Mapping[str, Any], csrf: str = "", supervisor: str | None = None) -> str:
    r = status.get("round") or {}
    phase = str(r.get("phase") or "")
    wagers = rnd.get("wagers") or []
    total = sum((Decimal(w["amount"]) for w in wagers if isinstance(w, Mapping) and _is_amount(w.get("amount"))),
                Decimal(0))
    out = [f'<p class="round">Round <b>{_e(r.get("id"))}</b></p><p><b class="phase phase-{_e(phase)}">'
           f'{_e(PHASES.get(phase, phase.upper()))}</b></p>',
           f'<p>Wagers accepted: <b class="num">{len(wagers)}</b>, <b class="num">{dollars(str(total))}</b></p>']
    blocks = status.get("blocks") or []
    if blocks:
        out.append('<ul class="blocks">' + "".join(
            f'<li><span class="icon" aria-hidden="true">✖</span> Blocked: '
            f'{_e(BLOCKS.get(str(b.get("block")), b.get("block")))} '
            f'<small>({_e(", ".join(map(str, b.get("sources") or [])))})</small></li>' for b in blocks) + "</ul>")
    else:
        out.append('<p class="ok"><span class="icon" aria-hidden="true">✔</span> No block: progressive wagering '
                   'enabled.</p>')
    off = [s for s in status.get("seats_disabled") or [] if isinstance(s, Mapping) and isinstance(s.get("seat"), int)]
    if off:
        devices = sorted({str(s.get("device")) for s in off})
        why = (f'{_e(devices[0])} is down: {_e(cause(off[0].get("reason")))}' if len(devices) == 1 else
               f"their wagering devices are down ({_e(and_list(devices))})")
        out.append(f'<p class="alarm"><span class="icon" aria-hidden="true">✖</span> '
                   f'{seats_text(s["seat"] for s in off).capitalize()} DISABLED: {why}</p>')
    if rnd.get("void_requested"):
        out.append(f'<p class="alarm">A void is asked for: {_e(rnd.get("void_requested"))}</p>')
    if csrf and phase in PHASES:
        if phase == "dealing":
            out.append('<details class="act" id="act-settle"><summary>Settle the round…</summary>'
                       + _supervisor_form("settle", csrf, supervisor, {"round_id": r.get("id")}, "Settle round")
                       + "</details>")
        out.append('<details class="act" id="act-void"><summary>Void the round…</summary>'
                   + _supervisor_form("void", csrf, supervisor, {"round_id": r.get("id")}, "Void round", reason=True)
                   + "<p><small>Every wager of the round is returned; a claim awaiting approval is voided with it."
                   "</small></p></details>")
    return "".join(out)


def _is_amount(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return Decimal(value).is_finite()
    except InvalidOperation:
        return False


def _seats(status: Mapping[str, Any], rnd: Mapping[str, Any]) -> str:
    """The seat map: each seat's wagers and whether their lights are on, its win light, whether its wagering is
    disabled and whether a claim of it awaits a supervisor; in words and icons, colour only on top."""
    count = status.get("seats")
    wagered: dict[int, list[Mapping[str, Any]]] = {}
    for w in rnd.get("wagers") or []:
        if isinstance(w, Mapping) and isinstance(w.get("seat"), int):
            wagered.setdefault(w["seat"], []).append(w)
    found = status.get("lights")
    lights: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    lit = {(a.get("seat"), spot) for a in lights.get("accepted") or [] if isinstance(a, Mapping)
           for spot in a.get("spots") or []}
    wins = set(lights.get("win") or [])
    disabled = {s["seat"]: s for s in status.get("seats_disabled") or [] if isinstance(s, Mapping)
                and isinstance(s.get("seat"), int)}
    pending: dict[int, str] = {}
    for c in rnd.get("claims") or []:
        if isinstance(c, Mapping) and c.get("status") == "pending":
            seats = {p.get("seat") for p in c.get("payouts") or [] if isinstance(p, Mapping)
                     and (c.get("seat") == DEALER or p.get("seat") == c.get("seat"))} or {c.get("seat")}
            for s in seats:
                if isinstance(s, int):
                    pending[s] = str(c.get("claim_id"))
    numbers = (list(range(1, count + 1)) if isinstance(count, int) and 0 < count <= 12 else
               sorted(set(wagered) | set(disabled) | set(pending) | {w for w in wins if isinstance(w, int)}))
    if not numbers:
        return "<p>No seat reported.</p>"
    tiles = []
    for n in numbers:
        classes, notes = ["seat"], []
        if n in pending:
            classes.append("claim")
            notes.append('<li class="claim"><span class="icon" aria-hidden="true">★</span> CLAIM PENDING</li>')
        if n in wins:
            classes.append("win")
            notes.append('<li class="win"><span class="icon" aria-hidden="true">✦</span> Win light on</li>')
        if n in disabled:
            classes.append("disabled")
            notes.append(f'<li class="disabled"><span class="icon" aria-hidden="true">✖</span> DISABLED '
                         f'<small>({_e(disabled[n].get("device"))} down)</small></li>')
        bets = []
        for w in wagered.get(n, []):
            on = (n, w.get("spot")) in lit
            bets.append(f'<li class="bet {"lit" if on else "unlit"}"><span class="icon" aria-hidden="true">'
                        f'{"●" if on else "○"}</span> {spot_name(status, w.get("spot"))} '
                        f'<b class="num">{dollars(w.get("amount"))}</b> <small>light {"on" if on else "off"}</small>'
                        '</li>')
        if bets:
            classes.append("wagered")
        body = "".join(bets) or '<li class="none">No wager</li>'
        tiles.append(f'<div class="{" ".join(classes)}" data-seat="{n}"><h3>Seat {n}</h3>'
                     f'<ul>{"".join(notes)}{body}</ul></div>')
    return f'<div class="seatmap">{"".join(tiles)}</div>'


UNIT = re.compile(r"\bunit \d+(?: function \d+)?:\s*")


NO_REPLY = re.compile(r"no usable reply after (\d+) attempt\(s\) \(([^()]*)\)")
FAILURES = {"timeout": "timed out"}


def _no_reply(m: re.Match[str]) -> str:
    n, kinds = int(m.group(1)), dict.fromkeys(k.strip() for k in m.group(2).split(",") if k.strip())
    tries = "1 try" if n == 1 else f"{n} tries"
    return f"no usable reply in {tries} ({', '.join(FAILURES.get(k, k) for k in kinds)})"


def cause(error: object) -> str:
    """A device's error without its unit and function, in words: the devices of one cable share it ("unit 3
    function 3: no usable reply after 3 attempt(s) (timeout, timeout, timeout)" -> "no usable reply in 3 tries
    (timed out)")."""
    return NO_REPLY.sub(_no_reply, UNIT.sub("", str(error or "")).strip())


KINDS = {"lockout": "lock-out", "sign": "sign", "card-counter": "card counter", "dice": "dice entry"}


def _device_words(d: Mapping[str, Any]) -> str:
    return _e(KINDS.get(str(d.get("kind")), d.get("kind"))) if d.get("kind") != "card-counter" else _e(d.get("id"))


def _problems(devices: list[Mapping[str, Any]], zone: tzinfo) -> list[str]:
    """The devices down, one line a cause: a bus whose every device is down is one unplugged cable (or one dead
    adapter); other devices each on a line."""
    by_bus: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for d in devices:
        if d.get("bus"):
            by_bus.setdefault((str(d.get("bus")), str(d.get("port") or "")), []).append(d)
    lines: list[str] = []
    grouped: set[int] = set()
    for (bus, port), on_bus in sorted(by_bus.items()):
        down = [d for d in on_bus if d.get("up") is False]
        if not down or len(down) < len(on_bus) or len(on_bus) < 2:
            continue
        grouped.update(id(d) for d in down)
        since = min((str(d.get("since")) for d in down if d.get("since")), default=None)
        seats = [int(d.get("id", "").rpartition("-")[2]) for d in down if d.get("kind") == "seat"
                 and str(d.get("id", "")).rpartition("-")[2].isdigit()]
        others = [_device_words(d) for d in down if d.get("kind") != "seat"]
        if any(d.get("kind") == "seat" for d in down) and len(seats) != sum(1 for d in down if d.get("kind") == "seat"):
            others = [_e(d.get("id")) for d in down if d.get("kind") == "seat"] + others
            seats = []
        what = and_list(([seats_text(seats)] if seats else []) + others)
        reasons = sorted({cause(d.get("last_error")) for d in down if d.get("last_error")})
        lines.append(f'bus <b>{_e(bus)}</b> ({_e(port)}) down since {local_time(since, zone, date=False)}: '
                     f'{what} unreachable' + (f' <small>({_e("; ".join(reasons))})</small>' if reasons else ""))
    for d in devices:
        if d.get("up") is False and id(d) not in grouped:
            where = f' on bus {_e(d.get("bus"))}' if d.get("bus") else (f' ({_e(d.get("port"))})' if d.get("port")
                                                                         else "")
            lines.append(f'<b>{_e(d.get("id"))}</b>{where} down since {local_time(d.get("since"), zone, date=False)}'
                         + (f': {_e(d.get("last_error"))}' if d.get("last_error") else ""))
    return lines


def _model(d: Mapping[str, Any]) -> str:
    """A device's model; when the device answered as another model (or refused to say), a ✖ and, on a tap, what it
    said."""
    model = f'<small>{_e(d.get("model") or "—")}</small>'
    identity = d.get("identity")
    if not isinstance(identity, str) or identity == "checked" or identity.startswith("not checked"):
        return model
    return (f'<details data-key="id-{_e(d.get("id"))}"><summary>{model} <span class="icon" aria-hidden="true">✖'
            f'</span> <b>identity failed</b></summary><small>{_e(identity)}</small></details>')


def _devices(status: Mapping[str, Any]) -> str:
    zone = zone_of(status)
    devices = [d for d in status.get("devices") or [] if isinstance(d, Mapping)]
    problems = _problems(devices, zone)
    head = ("".join(f'<p class="alarm problem"><span class="icon" aria-hidden="true">✖</span> {line}</p>'
                    for line in problems) if problems else
            '<p class="ok"><span class="icon" aria-hidden="true">✔</span> Every device answers.</p>')
    rows = []
    for d in devices:
        up = d.get("up")
        state = ('<span class="icon" aria-hidden="true">✔</span> up' if up else
                 '<span class="icon" aria-hidden="true">✖</span> <b>DOWN</b>' if up is False else "not heard yet")
        outages = _e(d.get("errors") or 0)
        if d.get("last_error"):
            outages = (f'<details data-key="err-{_e(d.get("id"))}"><summary>{outages}</summary><small>last error: {_e(d.get("last_error"))}</small>'
                       '</details>')
        since = local_time(d.get("since"), zone, date=False).rpartition(" ")[0] or "—"
        rows.append(f'<tr class="{"up" if up else "down"}" data-device="{_e(d.get("id"))}"><td>{_e(d.get("id"))}'
                    f'<div class="model">{_model(d)}</div></td><td class="state">{state}</td>'
                    f'<td class="time">{since}</td><td class="num">{outages}</td></tr>')
    abbreviation = datetime.now(UTC).astimezone(zone).strftime("%Z")
    table = ('<table class="devices"><thead><tr><th>Device <small>(model)</small></th><th>State</th>'
             f'<th>Since ({_e(abbreviation)})</th><th class="num">Outages</th></tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>')
    if problems or any(d.get("errors") for d in devices) or not devices:
        return head + table
    # all well since the start: the pit needs one line; each device is a tap away
    return (head + f'<details data-key="devices"><summary>{len(devices)} devices: '
            f'{_e(", ".join(str(d.get("id")) for d in devices))}</summary>{table}</details>')


def _hidden(csrf: str, claim_id: object) -> str:
    return (f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
            f'<input type="hidden" name="claim_id" value="{_e(claim_id)}">')


def _credential_fields(supervisor: str | None) -> str:
    return (f'<label>Supervisor <input name="supervisor" autocomplete="username" required '
            f'value="{_e(supervisor or "")}"></label>'
            '<label>Secret <input name="secret" type="password" autocomplete="current-password" required></label>')


def payout_title(p: Mapping[str, Any]) -> str:
    """What a payout is, for people: the jackpot (a percentage of the meter), an Envy Bonus, the Magic Card, the
    Lucky Bonus, or a fixed award of the paytable (controller.round.payout_kind)."""
    return kinds.TITLES[kinds.payout_kind(p.get("award"), p.get("kind"))]


def _payouts(c: Mapping[str, Any]) -> str:
    rows = []
    for p in c.get("payouts") or []:
        if not isinstance(p, Mapping):
            continue
        hand = hand_name(p.get("hand")) if p.get("hand") else "—"
        if p.get("kind") == "envy":
            hand += f' <small>at {_e(p.get("hand_of"))}</small>'
        elif p.get("hand_of") == DEALER:
            hand += " <small>(dealer's hand)</small>"
        shared = f' <small>1 of {_e(p.get("shared_by"))} shares</small>' if (p.get("shared_by") or 1) != 1 else ""
        rows.append(f'<tr class="payout kind-{_e(p.get("kind"))}"><td>Seat {_e(p.get("seat"))}</td>'
                    f'<td><b>{payout_title(p)}</b></td><td>{hand}</td><td>{_e(p.get("award"))}{shared}</td>'
                    f'<td class="num amount">{dollars(p.get("amount"))}</td></tr>')
    if not rows:
        return f'<p class="hand">{_e(c.get("description"))}</p>'
    return ('<table class="payouts"><thead><tr><th>Seat</th><th>Payout</th><th>Hand</th><th>Award</th>'
            f'<th class="num">Amount</th></tr></thead><tbody>{"".join(rows)}</tbody>'
            f'<tfoot><tr><th colspan="4">Total the supervisor approves</th>'
            f'<td class="num amount total">{dollars(c.get("total"))}</td></tr></tfoot></table>')


def claim_on(c: Mapping[str, Any], status: Mapping[str, Any], sep: str, seat_word: str = "Seat") -> str:
    """Whose hand and which wager a claim is on: "Seat 4 · Progressive Payout Wager"; on the dealer's hand the
    wager's title when it says so already ("Five Card Hand Bonus Wager (dealer's hand)"), not the hand twice."""
    spot = spot_name(status, c.get("spot"))
    if c.get("seat") == DEALER:
        return spot if "dealer" in spot.lower() else f"the dealer's hand{sep}{spot}"
    return f"{seat_word} {_e(c.get('seat'))}{sep}{spot}"


STATUS_WORDS = {"paid": ("✔", "PAID"), "rejected": ("✖", "REJECTED"), "voided": ("✖", "VOIDED"),
                "refused": ("✖", "REFUSED"), "paying": ("…", "BEING PAID"), "locking": ("…", "LOCKING at the authority")}


def _claims(rnd: Mapping[str, Any], csrf: str, supervisor: str | None, status: Mapping[str, Any] | None = None) -> str:
    status = status or {}
    claims = [c for c in rnd.get("claims") or [] if isinstance(c, Mapping)]
    pending = [c for c in claims if c.get("status") == "pending"]
    out = []
    for c in pending:
        cid = c.get("claim_id")
        hand = next((hand_name(p.get("hand")) for p in c.get("payouts") or []
                     if isinstance(p, Mapping) and p.get("kind") == "paytable"), "")
        total = dollars(c.get("total")) if c.get("total") else dollars(c.get("amount"))
        # a percentage of a meter is a jackpot; a fixed or odds award (four of a kind, 300 for 1) is an award
        jackpot = any(kinds.payout_kind(p.get("award"), p.get("kind")) == kinds.JACKPOT
                      for p in c.get("payouts") or [c] if isinstance(p, Mapping))
        out.append(
            f'<article class="claim" id="claim-{_e(cid)}" data-claim="{_e(cid)}">'
            f'<p class="badge"><span class="icon" aria-hidden="true">⚠</span> '
            f'{"JACKPOT" if jackpot else "AWARD"} CLAIM · AWAITING A SUPERVISOR'
            f'<span class="amount total">{total}</span></p>'
            f'<h3>{claim_on(c, status, " · ")} · {hand} <span class="cards">'
            f'{cards_text(c.get("cards"))}</span> <small>claim {_e(cid)}, by the {_e(c.get("claimed_by"))}</small>'
            f'</h3>{_payouts(c)}'
            f'<div class="decide"><form method="post" action="/approve" class="approve">{_hidden(csrf, cid)}'
            f'{_credential_fields(supervisor)}<button type="submit" class="approve">✔ Approve {total}</button></form>'
            f'<form method="post" action="/reject" class="reject">{_hidden(csrf, cid)}'
            f'{_credential_fields(supervisor)}<label>Reason <input name="reason" required></label>'
            f'<button type="submit" class="reject">✖ Reject</button></form></div></article>')
    if not pending:
        out.append('<p class="quiet">No claim awaits a supervisor.</p>')
    done = [c for c in claims if c.get("status") != "pending"]
    if done:
        items = []
        for c in done:
            icon, word = STATUS_WORDS.get(str(c.get("status")), ("", str(c.get("status")).upper()))
            n = len(c.get("payouts") or [])
            by = c.get("by")
            # paid by the table, a claim's `by` is who claimed it: no supervisor approved it
            by_words = "the table (no supervisor needed)" if by == c.get("claimed_by") else _e(by)
            items.append(f'<li class="{_e(c.get("status"))}"><span class="icon" aria-hidden="true">{icon}</span> '
                         f'<b>{_e(word)}</b>{" by " + by_words if by else ""}: {claim_on(c, status, ", ", "seat")}, '
                         f'<b class="num">{dollars(c.get("total") or c.get("amount"))}</b>'
                         f'{f" ({n} payouts)" if n > 1 else ""} <small>claim {_e(c.get("claim_id"))}</small></li>')
        out.append(f'<ul class="done">{"".join(items)}</ul>')
    return "".join(out)


HIT_KINDS = {"envy": "Envy Bonus", "jackpot": "Jackpot", "award": "Award"}


def approval(who: object) -> str:
    """Who approved a hit. One the table paid on the dealer's claim is journaled as approved by the dealer: no
    supervisor was needed (nor asked)."""
    return "no supervisor needed" if who == "dealer" else f"approved by {_e(who or '—')}"


def _history(history: list[Mapping[str, Any]], status: Mapping[str, Any] | None = None) -> str:
    status = status or {}
    zone = zone_of(status)
    shown = sorted(history, key=lambda h: str(h.get("time") or ""), reverse=True)[:HISTORY_SHOWN]
    if not shown:
        return "<p>No hit yet.</p>"
    rows = []
    for h in shown:
        kind = h.get("kind")
        what = HIT_KINDS.get(str(kind), "Jackpot" if kinds.is_percent(h.get("award")) else "Award")  # from an older daemon
        hand = hand_name(h.get("hand")) + (" <small>(another player's hand)</small>" if kind == "envy" else "")
        award = "" if str(h.get("award") or "").startswith("$") else f'<small>{_e(h.get("award"))}</small>'
        moment = local_time(h.get("time"), zone)
        day, _, clock = moment.partition(" ")
        rows.append(
            f'<tr class="hit kind-{_e(kind)}"><td class="time">{clock or day}<small>{day if clock else ""} · round '
            f'{_e(h.get("round"))}</small></td>'
            f'<td>{meter_name(status, h.get("meter"))} <small>#{_e(h.get("number"))}</small></td>'
            f'<td class="num">{_e(h.get("seat"))}</td><td><b>{_e(what)}</b> {award}'
            f'<br>{hand}</td><td class="num amount">{dollars(h.get("amount"))}</td>'
            f'<td>{_e(h.get("paid_by"))}<small>{approval(h.get("approved_by"))}</small></td></tr>')
    return ('<table class="history"><thead><tr><th>Time</th><th>Meter</th><th class="num">Seat</th><th>Payout</th>'
            '<th class="num">Amount</th><th>Paid by</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


# span -> (the plot's heading, what the plot is over)
PLOTS = {"day": ("The gaming day so far", "the gaming day so far"),
         "30d": ("The last 30 gaming days", "the last 30 gaming days")}
PW, PH, LEFT, RIGHT, TOP, BOTTOM = 720, 260, 124, 16, 16, 52  # the plot's box and its margins (pixels)
LABEL_GAP = 20  # pixels between the high's and the low's labels at least (their text is 14 px high)
US = timedelta(microseconds=1)


def plot_svg(label: str, points: list[tuple[datetime, int]], end: datetime, zone: tzinfo) -> str:
    """A meter's amounts ((time, meter units) in order, up to `end`) as an inline SVG step line, its axes scaled to
    the data (from the first point to `end`; from the low to the high) and labelled (amounts as the sign reads
    them, times in the casino's zone). Integer pixels from the exact amounts: no float. "" without a point."""
    if not points:
        return ""
    first = min(points[0][0], end)
    lo, hi = min(v for _, v in points), max(v for _, v in points)
    pad = max((hi - lo) // 10, 100 * 10_000)  # a tenth of the range above and below, at least a dollar
    lo_axis, hi_axis = max(lo - pad, 0), hi + pad
    span_v, span_us = hi_axis - lo_axis, max((end - first) // US, 1)
    x0, x1, y0, y1 = LEFT, PW - RIGHT, PH - BOTTOM, TOP

    def x(t: datetime) -> int:
        return x0 + (x1 - x0) * min(max((t - first) // US, 0), span_us) // span_us

    def y(v: int) -> int:
        return y0 - (y0 - y1) * (v - lo_axis) // span_v

    path: list[str] = []
    last_y = None
    for t, v in points:
        if last_y is not None:
            path.append(f"{x(t)},{last_y}")
        last_y = y(v)
        path.append(f"{x(t)},{last_y}")
    path.append(f"{x1},{last_y}")
    fmt = ("%b %d" if end - first > timedelta(days=2) else "%H:%M" if end - first > timedelta(hours=2)
           else "%H:%M:%S")
    ticks_x = [first, first + (end - first) // 2, end]
    at = {v: y(v) for v in (lo, hi)}
    if hi != lo and at[lo] - at[hi] < LABEL_GAP:  # a small change: its two labels apart, not one over the other
        mid = (at[lo] + at[hi]) // 2
        at = {lo: mid + LABEL_GAP // 2, hi: mid - LABEL_GAP // 2}
    grid = "".join(f'<line class="grid" x1="{x0}" y1="{y(v)}" x2="{x1}" y2="{y(v)}"/>'
                   f'<text class="tick" x="{x0 - 8}" y="{at[v] + 5}" text-anchor="end">'
                   f'{dollars(format_units(v))}</text>' for v in sorted({lo, hi}))
    xt = "".join(f'<line class="tickmark" x1="{x(t)}" y1="{y0}" x2="{x(t)}" y2="{y0 + 6}"/>'
                 f'<text class="tick" x="{x(t)}" y="{y0 + 22}" text-anchor="{a}">'
                 f'{escape(t.astimezone(zone).strftime(fmt))}</text>'
                 for t, a in zip(ticks_x, ("start", "middle", "end"), strict=True))
    zone_name = escape(end.astimezone(zone).strftime("%Z"))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {PW} {PH}" role="img" aria-label="{escape(label)}">'
            f'<title>{escape(label)}</title>{grid}'
            f'<line class="axis" x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}"/>'
            f'<line class="axis" x1="{x0}" y1="{y1}" x2="{x0}" y2="{y0}"/>{xt}'
            f'<polyline fill="none" stroke-width="3" points="{" ".join(path)}"/>'
            f'<text class="axis-label" x="{(x0 + x1) // 2}" y="{PH - 6}" text-anchor="middle">time ({zone_name})</text>'
            f'<text class="axis-label" x="16" y="{(y0 + y1) // 2}" text-anchor="middle" '
            f'transform="rotate(-90 16 {(y0 + y1) // 2})">meter ($)</text></svg>')


def _plot(m: Mapping[str, Any], span: str, zone: tzinfo = UTC, name: str | None = None) -> str:
    """One meter's plot over `span` from its `meter_series` answer; a line saying so when the answer is not one."""
    heading, over = PLOTS[span]
    try:
        points = [(datetime.fromisoformat(t), parse_units(a, "points")) for t, a in m["points"]]
        end = datetime.fromisoformat(m["end"])
        label = (f"{name or 'meter ' + str(m['meter'])} over {over}: {dollars(m.get('opening'))} at the start, "
                 f"{dollars(m.get('closing'))} at the end, high {dollars(m.get('high'))}, low {dollars(m.get('low'))}")
        svg = plot_svg(label, points, end, zone)
    except (KeyError, TypeError, ValueError, InputError) as e:
        return f"<p>{_e(heading)}: not shown (the daemon's answer is not a series: {_e(e)}).</p>"
    at = local_time(m.get("end"), zone, date=span != "day")
    return (f'<figure class="plot" data-meter="{_e(m["meter"])}" data-span="{_e(span)}">'
            f'<figcaption><b>{_e(heading)}</b>: {dollars(m.get("opening"))} at the start, '
            f'{dollars(m.get("closing"))} at {at}; high {dollars(m.get("high"))}, low {dollars(m.get("low"))}; '
            f'{_e(m.get("entries"))} change{"" if m.get("entries") == 1 else "s"}</figcaption>{svg}</figure>')


def _plots(series: Mapping[str, Any] | None, status: Mapping[str, Any] | None = None) -> str:
    """Each meter's plots, over the gaming day so far and over the last 30 gaming days (`meter_series`)."""
    if series is None:
        return "<p>Waiting for the daemon's series (asked once a minute).</p>"
    if series.get("error"):
        return f'<p class="alarm">The plots are not available: {_e(series["error"])}</p>'
    status = status or {}
    zone = zone_of(status)
    by_meter: dict[str, dict[str, Mapping[str, Any]]] = {}
    for span in PLOTS:
        for m in series.get(span) or []:
            if isinstance(m, Mapping):
                by_meter.setdefault(str(m.get("meter")), {})[span] = m
    if not by_meter:
        return "<p>No meter in the journal.</p>"
    return ('<p class="quiet">From the journal, asked once a minute: up to 2 minutes behind the meters above.</p>'
            + "".join(f'<h3>{meter_name(status, meter)}</h3><div class="plots">'
                      + "".join(_plot(spans[span], span, zone, meter_title(status, meter)) for span in PLOTS
                                if span in spans) + "</div>"
                      for meter, spans in sorted(by_meter.items())))


def sections(snapshot: Mapping[str, Any] | None, down: str | None, csrf: str,
             supervisor: str | None = None, errors: list[str] | None = None) -> dict[str, str]:
    """Each section's inner HTML: from the last `snapshot` ({"status", "round", "history"}, and "series": span ->
    the `meter_series` answer, or {"error": why}); `down` says why the daemon does not answer now (the last
    snapshot stays shown, marked by the daemon section). A link authority's page is floor.py's."""
    daemon = shown(lambda: _daemon(snapshot.get("status") if snapshot and down is None else None, down), errors)
    if snapshot is None:
        waiting = "<p>Waiting for the daemon.</p>"
        return {"daemon": daemon, **{name: waiting for name in SECTIONS if name != "daemon"}}
    status, rnd, history = snapshot["status"], snapshot["round"], snapshot["history"]
    return {
        "claims": shown(lambda: _claims(rnd, csrf, supervisor, status), errors),
        "daemon": daemon,
        "meters": shown(lambda: _meters(status), errors),
        "round": shown(lambda: _round(status, rnd, csrf, supervisor), errors),
        "seats": shown(lambda: _seats(status, rnd), errors),
        "devices": shown(lambda: _devices(status), errors),
        "history": shown(lambda: _history(history, status), errors),
        "plots": shown(lambda: _plots(snapshot.get("series"), status), errors),
    }


def shown(render: Callable[[], str], errors: list[str] | None) -> str:
    """A section, or one line saying it cannot be shown: an answer of the wrong shape (a daemon of another
    version, a fault) costs that section, never the page. What went wrong is added to `errors` for the log."""
    try:
        return render()
    except Exception as e:  # noqa: BLE001 - any shape of answer; the caller logs it
        if errors is not None:
            errors.append(f"{type(e).__name__}: {e}")
        return ('<p class="alarm">✖ This part of the daemon\'s answer cannot be shown (a daemon of another version?): '
                'the console\'s log says why.</p>')


TITLES = {"daemon": "Controller", "meters": "Meters", "round": "Round", "seats": "Seats", "devices": "Devices",
          "claims": "Claims awaiting a supervisor", "history": "Hit history", "plots": "Meters over time"}


def _head(title: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_e(title)}</title><link rel="stylesheet" href="/static/console.css"><link rel="stylesheet" href="/static/plots.css">'
            '<script src="/static/console.js" defer></script></head>')


def _clock(zone: str | None) -> str:
    if not zone:
        return ""
    tz = zone_of({"time_zone": zone})
    now = datetime.now(UTC).astimezone(tz).strftime("%H:%M:%S %Z")
    return f'<time id="clock" data-zone="{_e(zone)}" title="the casino\'s time ({_e(zone)})">{_e(now)}</time>'


def logout_form(supervisor: str | None, csrf: str) -> str:
    """The header's "Log out" with the supervisor's name (a page served behind a login)."""
    return (f'<form method="post" action="/logout" class="logout"><span>{_e(supervisor)}</span>'
            f'<input type="hidden" name="csrf" value="{_e(csrf)}"><button type="submit">Log out</button></form>')


def sections_html(parts: Mapping[str, str], order: Iterable[str], titles: Mapping[str, str]) -> str:
    """Each section in `order`, titled, its inner HTML in the element the event stream replaces (its id)."""
    return "".join(f'<section class="s-{name}"><h2>{titles[name]}</h2><div id="{name}">{parts[name]}</div></section>'
                   for name in order)


def page(parts: Mapping[str, str], *, csrf: str, flash: str | None = None, supervisor: str | None = None,
         logout: bool = False, table: str | None = None, zone: str | None = None) -> str:
    """The whole console page: every section, the message of the last action, a logout button when logged in; the
    table's id in the title and the casino's clock in the header."""
    who = logout_form(supervisor, csrf) if logout else ""
    note = f'<p class="flash" id="flash" role="status">{money_words(flash)}</p>' if flash else ""
    body = sections_html(parts, SECTIONS, TITLES)
    name = f"{table} · Pit console" if table else "Pit console"
    return (_head(name) + f'<body><header><h1>{_e(name)}</h1>{_clock(zone)}<span id="live">connecting…</span>'
            f'{who}</header>{note}<main>{body}</main></body></html>')


def login_page(*, csrf: str, message: str | None = None, table: str | None = None) -> str:
    note = f'<p class="flash" role="status">{_e(message)}</p>' if message else ""
    name = f"{table} · Pit console" if table else "Pit console"
    return (_head(f"{name}: log in") + f'<body><header><h1>{_e(name)}</h1></header><main class="login"><section>'
            f'<h2>Log in as a supervisor{" of table " + _e(table) if table else ""}</h2>{note}'
            f'<form method="post" action="/login" class="login">'
            f'<input type="hidden" name="csrf" value="{_e(csrf)}">{_credential_fields(None)}'
            '<button type="submit">Log in</button></form></section></main></body></html>')


__all__ = ["SECTIONS", "cards_text", "dollars", "hand_name", "host_allowed", "identity", "is_loopback", "local_time",
           "login_page", "logout_form", "page", "parse_listen", "payout_title", "plot_svg", "same_origin", "seats_text",
           "secret_in_query", "sections", "sections_html", "shown", "zone_of"]

"""[wagers]: the wagers offered, their meters and their paytables."""

from __future__ import annotations

import difflib
from typing import Any

from controller.config import schema
from controller.config.check import Checker
from controller.config.check_devices import SHIPPED_PAYTABLES
from controller.config.fields import did_you_mean
from controller.config.model import WagerConfig
from controller.errors import InputError
from controller.games import Wager
from controller.paytables import builtin_paytables, check_paytable_for, load_paytable
from controller.paytables.model import Paytable
from controller.tomlfile.problems import join


class WagerChecks(Checker):
    """Each wager of [wagers], after the meters: `wagers` by id."""

    def _wager_meter(self, at: str, w: Wager, meter: str | None, used: dict[str, str]) -> bool:
        """Whether the wager at `at` has the meter its kind needs, one no other wager has (`used`: meter -> the
        wager's path, this one's added)."""
        if w.progressive and meter is None:
            self.add(join(at, "meter"), f"is required: the {w.title} is paid from a progressive meter",
                     'meter = "main", and define it in [meters.main]')
            return False
        if not w.progressive and meter is not None:
            self.add(join(at, "meter"), f"the {w.title} is not a progressive wager and has no meter",
                     "remove meter")
            return False
        if meter is not None:
            if meter not in self.meter_linked and meter not in self.meters:
                known = ", ".join(self.meters) or "none is defined"
                self.add(join(at, "meter"), f"no meter {meter!r} is defined",
                         f"define [meters.{meter}] or use one of the meters: {known}")
                return False
            if meter in used:
                self.add(join(at, "meter"), f"meter {meter!r} is already the meter of {used[meter]}",
                         "each progressive wager has a meter of its own")
                return False
            used[meter] = at
        return True

    def _wagers(self, wagers: dict[str, Any], allow_examples: bool) -> None:
        g = self.game
        if not wagers:
            self.add("wagers", "no wager is offered", '[wagers.progressive] with paytable = "..."')
        used: dict[str, str] = {}
        for wid, raw in wagers.items():
            at = join("wagers", wid)
            self.wagers[wid] = None
            w = None
            if g is not None:
                w = g.wagers.get(wid)
                if w is None:
                    self.add(at, f"{g.title} has no wager {wid!r}",
                             did_you_mean(wid, g.wagers).replace("keys allowed here", "its wagers"))
            body = self.table(raw, at, f'[wagers.{wid}] with paytable = "..."')
            if body is None:
                continue
            m = self.validate(schema.WagerModel, body, at, hints={
                "paytable": 'paytable = "caribbean-stud-progressive-d" (a built-in id) or the path of a paytable file'})
            if m is None or w is None or g is None:
                continue
            meter = m.meter
            if not self._wager_meter(at, w, meter, used):
                continue
            pt = self._paytable(m.paytable, join(at, "paytable"))
            if pt is None:
                continue
            linked = self.meter_linked.get(meter, False) if meter else False
            mc = self.meters.get(meter) if meter else None
            sizes = mc.wager_sizes if mc is not None else ()
            if self._select(pt, m.paytable, wid, join(at, "paytable"), linked=linked, sizes=(),
                            allow_examples=allow_examples) and sizes:
                # The rules may need a row for each wager size (an Envy Bonus table): that is the meter's
                # wager_sizes to fix, or the paytable.
                self._select(pt, m.paytable, wid, join("meters", meter or "", "wager_sizes"), linked=linked,
                             sizes=sizes, allow_examples=allow_examples)
            self.wagers[wid] = WagerConfig(wid, w, pt, m.paytable, meter)
        if all(v is not None for v in self.wagers.values()):
            wanted = {w.meter for w in self.wagers.values() if w is not None and w.meter}
            for mid in self.meter_linked:
                if mid not in wanted:
                    self.add(join("meters", mid), "no wager uses this meter",
                             f'remove it, or set meter = "{mid}" on the progressive wager it belongs to')

    def _paytable(self, ref: str, at: str) -> Paytable | None:
        if "/" in ref or "\\" in ref or ref.endswith(".toml"):
            p = self.usable_path(ref, at)
            if p is None:
                return None
            try:
                return load_paytable(p)
            except InputError as e:
                self.add(at, str(e).replace(str(p), ref),
                         "a paytable file's path is relative to this configuration file; "
                         "docs/paytables.md describes the format")
                return None
        builtin = builtin_paytables()
        if ref in builtin:
            return builtin[ref]
        shipped = sorted(p.stem for p in SHIPPED_PAYTABLES.glob("*.toml"))
        if ref in shipped:  # an example paytable file of the package, by name: an example copied anywhere finds it
            try:
                return load_paytable(SHIPPED_PAYTABLES / f"{ref}.toml")
            except InputError as e:
                self.add(at, str(e), "the package's example paytable: install the package again")
                return None
        close = difflib.get_close_matches(ref, [*builtin, *shipped], n=1, cutoff=0.6)
        self.add(at, f"unknown paytable {ref!r}",
                 (f"did you mean {close[0]!r}? " if close else "") + "`progressivectl paytables` lists the built-in "
                 f"ids; the package's example paytables are named as their files in {SHIPPED_PAYTABLES}; a paytable "
                 "file of your own is given by its path, e.g. \"paytables/NAME.toml\" (relative to this file)")
        return None

    def _select(self, pt: Paytable, ref: str, wid: str, at: str, *, linked: bool, sizes: tuple[int, ...],
                allow_examples: bool) -> bool:
        g = self.game
        assert g is not None
        try:
            check_paytable_for(pt, g.id, wid, linked=linked, wager_sizes=sizes, allow_examples=allow_examples)
        except InputError as e:
            if pt.example and not allow_examples:
                hint = ("use the paytable of the Rules Submission; allow_example_paytables = true is for "
                        "test tables only")
            elif sizes:
                hint = "offer only wager sizes the paytable has rows for, or use a paytable that has rows for them"
            else:
                hint = (f"`progressivectl check-paytable --game {g.id} --wager {wid} --paytable {ref}"
                        + (" --linked" if linked else "") + "` explains; `progressivectl paytables` lists them")
            self.add(at, e.problem, hint)
            return False
        return True


__all__ = ["WagerChecks"]

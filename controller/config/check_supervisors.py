"""[[supervisors]] or supervisors_file: who validates a progressive payout, with a credential."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.config import schema
from controller.config.check import Checker, readable_by_others
from controller.config.credentials import CredentialError, parse_credential
from controller.config.fields import show
from controller.config.model import Supervisor
from controller.config.names import DistinctNames, normal, refusal
from controller.tomlfile.files import show_path
from controller.tomlfile.problems import Problems, join

HASHES = ("the supervisors' credential hashes",
          "whoever reads a hash can guess at the secret offline, where no lock-out stops them")
SUPERVISOR_SOURCE = "§ 639a.11(c)(5)(iii)"  # a floorperson or above validates a progressive payout


class SupervisorChecks(Checker):
    """[[supervisors]], in this file or in the supervisors file: `supervisors`."""

    def _supervisor_source(self, doc: Mapping[str, Any], source: Path, source_stat: os.stat_result | None) -> None:
        """The supervisors: [[supervisors]] in this file, or the file `supervisors_file` names (kept from the
        socket's group: this file is theirs to read, the credential hashes are not)."""
        if "supervisors_file" not in doc:
            raw = doc.get("supervisors")
            self._supervisors(raw)
            if isinstance(raw, list) and raw and source_stat is not None:
                where = source.resolve()
                if (exposed := readable_by_others(where, source_stat, *HASHES)) is not None:
                    message, hint = exposed
                    self.warnings.add("supervisors", message, f"{hint}; or move the [[supervisors]] entries to a "
                                      "supervisors_file that only the daemon's user can read (docs/operations.md)")
            return
        ref = doc["supervisors_file"]
        at = "supervisors_file"
        if "supervisors" in doc:
            self.add(at, "and [[supervisors]] in this file both list supervisors: one or the other",
                     "keep the supervisors in the supervisors file only (readable by the daemon's user only), and "
                     "remove the [[supervisors]] entries from this file")
            return
        if not isinstance(ref, str) or not ref.strip():
            self.add(at, f"must be the path of a file, not {show(ref)}",
                     'supervisors_file = "supervisors.toml": [[supervisors]] entries, in a file only the daemon reads')
            return
        got = self.sub_toml(ref, at, "the supervisors file")
        if got is None:
            return
        path, read, sub_doc = got
        # The file's problems at supervisors_file, the path inside it in the message (as a register map's).
        outer, self.problems = self.problems, Problems()
        try:
            for key in sub_doc:
                if key != "supervisors":
                    self.add(key, "unknown key", "a supervisors file holds [[supervisors]] entries only")
            self._supervisors(sub_doc.get("supervisors"))
        finally:
            inner, self.problems = self.problems, outer
        for p in inner.items:
            self.add(at, f"{show_path(ref)}: {p.path}: {p.message}", p.hint)
        listed = sub_doc.get("supervisors")
        if isinstance(listed, list) and listed and (exposed := readable_by_others(path, read.stat, *HASHES)):
            self.warnings.add(at, *exposed)

    def _supervisors_required(self) -> bool:
        """Whether at least one supervisor must be listed: at a table with a meter (a link authority's login
        is optional)."""
        return bool(self.meter_linked)

    def _supervisors(self, raw: object) -> None:
        if raw is None:
            if self._supervisors_required():
                self.add("supervisors", "is required: a floorperson or above validates each progressive payout "
                         f"({SUPERVISOR_SOURCE})",
                         '[[supervisors]] with name = "..." and credential = the line `progressivectl '
                         'hash-credential` prints')
            return
        if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
            self.add("supervisors", f"must be an array of tables ([[supervisors]]), not {show(raw)}",
                     '[[supervisors]] name = "..." credential = "scrypt$..."')
            return
        if not raw and self._supervisors_required():
            self.add("supervisors", f"no supervisor: a floorperson or above validates each progressive payout "
                     f"({SUPERVISOR_SOURCE})", "add a [[supervisors]] entry")
        names = DistinctNames()
        for i, entry in enumerate(raw):
            at = join("supervisors", i)
            cred_raw = entry.get("credential")
            # The credential is checked by parse_credential alone: pydantic would quote a wrong value in
            # its message, and the value may be a password.
            shape = {k: ("-" if k == "credential" else v) for k, v in entry.items()}
            m = self.validate(schema.SupervisorModel, shape, at, hints={
                "name": 'name = "J. Smith"',
                "credential": "credential = the line `progressivectl hash-credential` prints"})
            if m is None:
                continue
            name = normal(m.name)
            if (why := refusal(name) or names.clash(name, at)) is not None:
                self.add(join(at, "name"), why, "list each supervisor once, under a name no other reads as")
                continue
            try:
                cred = parse_credential(cred_raw)
            except CredentialError as e:
                self.add(join(at, "credential"), e.message, e.hint)
                continue
            self.supervisors.append(Supervisor(name, cred))


__all__ = ["HASHES", "SUPERVISOR_SOURCE", "SupervisorChecks"]

"""[anchor]: where the journal's head is anchored, with which key, and the remote syslog."""

from __future__ import annotations

import os
from pathlib import Path

from controller.config import schema
from controller.config.check import Checker, host_port, valid_host
from controller.config.model import AnchorConfig
from controller.tomlfile.files import kind_of, probe, show_path


class AnchorChecks(Checker):
    """[anchor], after state_dir: `anchor`."""

    def _anchor(self, raw: object, state_dir: Path | None) -> None:
        """[anchor]: where the journal's head is anchored (controller.service.anchoring), with which key, and the
        remote syslog it is also sent to."""
        m = self.section(raw, "anchor", '[anchor] key_file = "journal.key"', schema.AnchorModel)
        if m is None:
            return
        file = key_file = None
        syslog = None
        ok = True
        if m.file is not None:
            file = self.usable_path(m.file, "anchor.file")
            ok = file is not None
            if file is not None and state_dir is not None and _inside(file, state_dir):
                ok = False
                self.add("anchor.file", f"{show_path(m.file)} is inside state_dir: a copy of the state directory "
                         "put back would bring back its old anchor with it",
                         "leave it out (the default is beside state_dir, in STATE_DIR-anchor/), or give a path "
                         "outside state_dir")
            elif file is not None and isinstance(st := probe(file), os.stat_result) \
                    and (kind := kind_of(st.st_mode)) is not None:
                ok = False
                self.add("anchor.file", f"{show_path(m.file)}: it is {kind}, not a regular file",
                         "the anchor is a small file the daemon writes")
        if m.key_file is not None:
            key_file = self.secret_file(m.key_file, "anchor.key_file", "the journal key", minimum=32)
            ok = ok and key_file is not None
            if key_file is not None and state_dir is not None and _inside(key_file, state_dir):
                ok = False
                self.add("anchor.key_file", f"{show_path(m.key_file)} is inside state_dir: whoever copies the "
                         "state directory would have the key", "keep the key in /etc/progressive, mode 0400")
        if m.syslog is not None:
            syslog = host_port(m.syslog)
            if syslog is None or not valid_host(syslog[0]):
                ok = False
                self.add("anchor.syslog", f"{m.syslog!r} is not host:port",
                         'syslog = "logs.casino.example:514" (RFC 5424 over UDP)')
        if ok:
            self.anchor = AnchorConfig(file, key_file, syslog)

    def _anchor_off_box(self, linked: bool, *, authority: bool = False) -> None:
        """A warning when nothing keeps the journal's head off the box: a copy of the state directory put back with
        the anchor directory of the same time is then a journal that holds its anchor, and nobody can tell."""
        if linked or self.anchor.syslog is not None or any(p.path.startswith("anchor") for p in self.problems.items):
            return
        where = "the link authority's journal is anchored off its box only" if authority else \
            "this table has no linked meter, so its journal is anchored off the box only"
        self.warnings.add("anchor.syslog", "no anchor off the box: a rollback of the state directory and the anchor "
                          f"directory together cannot be noticed ({where} by a remote syslog)",
                          '[anchor] syslog = "logs.casino.example:514", a collector this box cannot write back to '
                          "(docs/security.md)")


def _inside(path: Path, directory: Path) -> bool:
    """Whether `path` is `directory` or under it (symbolic links resolved where they exist)."""
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):
        return path.is_relative_to(directory)


__all__ = ["AnchorChecks"]

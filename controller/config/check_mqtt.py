"""[mqtt]: the broker through which a linked meter's authority is reached."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from controller.config import schema
from controller.config.check import Checker, readable_by_others, valid_host
from controller.config.model import MqttConfig
from controller.linkproto import signing
from controller.tomlfile.files import MAX_CONFIG_BYTES, MAX_SECRET_BYTES, FileRefused, kind_of, limit_text, probe
from controller.tomlfile.problems import join

_CLIENT_ID = re.compile(r"[A-Za-z0-9._-]+")
_TOPIC = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*")


class MqttChecks(Checker):
    """[mqtt], after the meters (a linked meter needs it): `mqtt`."""

    def _mqtt(self, raw: object, table: str | None) -> None:
        if raw is None:
            for mid, linked in self.meter_linked.items():
                if linked:
                    self.add(join("meters", mid, "linked"), "a linked meter needs the [mqtt] section: its link "
                             "authority is reached over MQTT",
                             '[mqtt] with host = "...", or make the meter the table\'s own (reset, rate, ...)')
            return
        m = self.section(raw, "mqtt", '[mqtt] host = "broker.example"', schema.MqttModel, hints={
            "host": 'host = "link.casino.example": the MQTT broker of the link authority'})
        if m is None:
            return
        ok = self._mqtt_settings_agree(m)
        files: dict[str, Path | None] = {}
        for k in ("ca_file", "cert_file", "key_file", "password_file"):
            text = getattr(m, k)
            if text is None:
                files[k] = None
                continue
            files[k], usable = self._mqtt_file(k, text)
            ok = usable and ok
        client_id = m.client_id or table or ""
        if m.client_id is not None and not _CLIENT_ID.fullmatch(m.client_id):
            ok = False
            self.add("mqtt.client_id", f"{m.client_id!r} is not a client id", "letters, digits, '.', '_' and '-'")
        if not _TOPIC.fullmatch(m.topic_prefix):
            ok = False
            self.add("mqtt.topic_prefix", f"{m.topic_prefix!r} is not a topic prefix",
                     "words of letters, digits, '_' and '-' joined by '/', no wildcards, no leading or trailing '/'")
        keys = self._authority_keys(m.authority_keys)
        if keys is None:
            ok = False
        if not ok or not client_id:
            return
        port = m.port if m.port is not None else (8883 if m.tls else 1883)
        self.mqtt = MqttConfig(
            host=m.host, port=port, tls=m.tls, client_id=client_id, topic_prefix=m.topic_prefix,
            link_timeout=float(m.link_timeout), protocol=m.protocol, ca_file=files["ca_file"],
            cert_file=files["cert_file"], key_file=files["key_file"], username=m.username,
            password_file=files["password_file"], authority_keys=keys or (),
        )

    def _mqtt_settings_agree(self, m: schema.MqttModel) -> bool:
        """A host; TLS off only to this machine and then no TLS files; a certificate with its key; a username with
        a password file."""
        ok = True
        if not valid_host(m.host):
            ok = False
            self.add("mqtt.host", f"{m.host!r} is not a host name or IP address")
        if not m.tls:
            if not _is_loopback(m.host):
                ok = False
                self.add("mqtt.tls", "is false, but the broker is not on this machine: the link carries the "
                         "meters' money and must be encrypted", "tls = true (the default)")
            for k in ("ca_file", "cert_file", "key_file"):
                if getattr(m, k) is not None:
                    ok = False
                    self.add(join("mqtt", k), "is a TLS setting, but tls = false", f"remove {k} or set tls = true")
        if (m.cert_file is None) != (m.key_file is None):
            ok = False
            have, lack = ("cert_file", "key_file") if m.key_file is None else ("key_file", "cert_file")
            self.add(join("mqtt", lack), f"is required with {have}: a client certificate comes with its key",
                     "set both cert_file and key_file, or neither")
        if m.password_file is not None and m.username is None:
            ok = False
            self.add("mqtt.username", "is required with password_file", 'username = "table-cs-07"')
        return ok

    def _mqtt_file(self, k: str, text: str) -> tuple[Path | None, bool]:
        """The path of [mqtt]'s file `k`, and whether the file is usable: there, regular, not too long, and a
        secret readable by no one else."""
        at = join("mqtt", k)
        p = self.usable_path(text, at)
        if p is None:
            return None, False
        st = probe(p)
        where = "the path is absolute or relative to this configuration file"
        if st is None or isinstance(st, FileRefused):
            self.add(at, f"{text}: no such file" if st is None else f"{text}: {st.reason}", where)
            return p, False
        if (kind := kind_of(st.st_mode)) is not None:
            self.add(at, f"{text}: it is {kind}, not a regular file", where)
            return p, False
        limit = MAX_SECRET_BYTES if k == "password_file" else MAX_CONFIG_BYTES
        if st.st_size > limit:
            self.add(at, f"{text}: it is {st.st_size:,} bytes, more than the {limit_text(limit)} such a file may "
                     "have", where)
            return p, False
        if k in ("key_file", "password_file"):
            what = "the client certificate's private key" if k == "key_file" else "the MQTT password"
            if (exposed := readable_by_others(p, st, what)) is not None:
                self.add(at, *exposed)  # a secret in clear, unlike a hash: refused, not only warned about
                return p, False
        return p, True

    def _authority_keys(self, listed: list[str] | None) -> tuple[str, ...] | None:
        """A table's `authority_keys`: required with a linked meter (the table acts only on what the authority
        signed); None after a problem."""
        hint = ('authority_keys = ["ed25519:..."]: the line `progressivectl link-key` printed when the authority\'s '
                "signing key was made (docs/operations.md)")
        if listed is None:
            if any(self.meter_linked.values()):
                self.add("mqtt.authority_keys", "is required with a linked meter: the table acts only on messages "
                         "the link authority signed", hint)
                return None
            return ()
        if not listed:
            self.add("mqtt.authority_keys", "must list at least one key", hint)
            return None
        ok = True
        for i, text in enumerate(listed):
            try:
                signing.parse_public(text)
            except ValueError as e:
                ok = False
                self.add(join("mqtt", "authority_keys", i), str(e), hint)
        return tuple(listed) if ok else None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["MqttChecks"]

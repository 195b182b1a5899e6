"""The link authority's signature on everything it says (docs/link-protocol.md, "Signatures").

A table acts on the authority's answers: an `ack` of a lock tells it the amount a supervisor approves, a `refused`
ends a claim, a meter value goes on every sign. The broker and anyone holding a table's MQTT password can publish
on the topics a table reads, so every message the authority publishes carries an Ed25519 signature over the topic
it is published on and the whole payload, and a table acts only on what verifies under a key its configuration
lists (`[mqtt] authority_keys`). The cryptography is PyCA's; nothing here is home-made but the framing.

Pure: keys and bytes in, bytes or a verdict out. Key files are read by the configuration's loader.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

DOMAIN = b"progressive-link/2\n"  # a signature of this protocol is never one of anything else
PUBLIC_PREFIX = "ed25519:"  # how a table's configuration writes an authority's public key
SIG = "sig"  # the payload's field that carries the signature: {"kid": ..., "ed25519": ...}


def key_id(public: Ed25519PublicKey) -> str:
    """A short name of a public key (16 hex digits of its SHA-256): which key signed, during a rotation."""
    return hashlib.sha256(_raw(public)).hexdigest()[:16]


def format_public(public: Ed25519PublicKey) -> str:
    """The line a table's configuration takes: `ed25519:` and the key's 64 hex digits."""
    return PUBLIC_PREFIX + _raw(public).hex()


def parse_public(text: object) -> Ed25519PublicKey:
    """An authority's public key as `format_public` wrote it; ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.startswith(PUBLIC_PREFIX):
        raise ValueError(f"must be {PUBLIC_PREFIX!r} and 64 hex digits, as `progressivectl link-key` prints it")
    try:
        raw = bytes.fromhex(text.removeprefix(PUBLIC_PREFIX))
    except ValueError:
        raise ValueError("is not a public key: its hex digits are damaged") from None
    if len(raw) != 32:
        raise ValueError(f"is not an Ed25519 public key: {len(raw)} bytes, not 32")
    return Ed25519PublicKey.from_public_bytes(raw)


def new_private_pem() -> bytes:
    """A new signing key, PKCS#8 PEM (what `openssl genpkey -algorithm ed25519` writes too)."""
    return Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption())


def load_private_pem(data: bytes) -> Ed25519PrivateKey:
    """The signing key in a PEM file's bytes; ValueError when it is not an unencrypted Ed25519 private key."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (TypeError, ValueError) as e:  # TypeError: encrypted, without a password
        raise ValueError(f"is not an unencrypted PEM private key ({str(e).splitlines()[0][:80]})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"holds a {type(key).__name__.removesuffix('PrivateKey')} key, not an Ed25519 one")
    return key


def canonical(obj: Mapping[str, Any]) -> bytes:
    """The one byte form of a JSON object that is signed and digested (keys sorted, no spaces)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _signed_bytes(topic: str, obj: Mapping[str, Any]) -> bytes:
    return DOMAIN + topic.encode() + b"\n" + canonical(obj)


class Signer:
    """The authority's side: seals each payload for the topic it is published on."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public = private.public_key()
        self.kid = key_id(self.public)

    def seal(self, topic: str, payload: bytes) -> bytes:
        """`payload` (one JSON object, as schema.encode writes it) with its signature for `topic`."""
        obj = json.loads(payload)
        sig = self._private.sign(_signed_bytes(topic, obj)).hex()
        return canonical({**obj, SIG: {"kid": self.kid, "ed25519": sig}})


class Verifier:
    """A table's side: the authority's public keys it trusts (more than one during a rotation)."""

    def __init__(self, keys: Iterable[Ed25519PublicKey | str]) -> None:
        parsed = [parse_public(k) if isinstance(k, str) else k for k in keys]
        self._keys = {key_id(k): k for k in parsed}

    def check(self, topic: str, payload: bytes) -> str | None:
        """Why `payload` on `topic` is not the authority's own (a problem to refuse it with), or None when it is."""
        try:
            obj = json.loads(payload)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return "not JSON"
        if not isinstance(obj, dict):
            return "not a JSON object"
        sig = obj.pop(SIG, None)
        if not isinstance(sig, dict) or not isinstance(sig.get("kid"), str) or not isinstance(sig.get("ed25519"), str):
            return "carries no signature of the link authority"
        key = self._keys.get(sig["kid"])
        if key is None:
            return f"signed with key {sig['kid'][:16]!r}, which is not in authority_keys"
        try:
            key.verify(bytes.fromhex(sig["ed25519"]), _signed_bytes(topic, obj))
        except (ValueError, InvalidSignature):
            return "its signature does not verify (forged, changed, or moved from another topic)"
        return None


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


__all__ = ["PUBLIC_PREFIX", "Signer", "Verifier", "canonical", "format_public", "key_id", "load_private_pem",
           "new_private_pem", "parse_public"]

"""Supervisor credentials: salted, slow hashes only; never a password in the configuration.

Two formats, both from the standard library (hashlib), salt and hash in base64 without padding:

    scrypt$<n>$<r>$<p>$<salt>$<hash>                 hashlib.scrypt, n a power of two
    pbkdf2_sha256$<iterations>$<salt>$<hash>         hashlib.pbkdf2_hmac("sha256", ...)

`hash_credential` makes one (``progressivectl hash-credential`` prints it), `parse_credential` checks
one from a configuration file, `verify_credential` compares a secret with one in constant time
(hmac.compare_digest). No message here ever repeats the text it was given: it may be a password.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import unicodedata
from dataclasses import dataclass

SCRYPT = "scrypt"
PBKDF2 = "pbkdf2_sha256"
SCHEMES = (SCRYPT, PBKDF2)

# Defaults: OWASP Password Storage Cheat Sheet. For scrypt its equivalent setting N=2^15, r=8, p=3 (32 MiB
# instead of the 128 MiB of N=2^17, p=1: a table controller is a small box); PBKDF2-HMAC-SHA256 600,000.
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 3
PBKDF2_ITERATIONS = 600_000
# What a configuration may hold at least (older or smaller boxes) and at most (a typo, or a denial of
# service at verification).
MIN_SCRYPT_N = 2**14
MAX_SCRYPT_N = 2**20
MIN_SCRYPT_R = 8
MAX_SCRYPT_R = 32
MAX_SCRYPT_P = 16
MIN_PBKDF2_ITERATIONS = 100_000
MAX_PBKDF2_ITERATIONS = 10_000_000
SALT_BYTES = 16
HASH_BYTES = 32
MIN_SECRET_CHARS = 8

# Other hash formats people paste: named so the message can say what they are.
_FOREIGN = (
    (re.compile(r"\$2[abxy]?\$"), "bcrypt"),
    (re.compile(r"\$argon2(id|i|d)\$"), "argon2"),
    (re.compile(r"\$[156]\$"), "crypt(3)"),
    (re.compile(r"(pbkdf2_sha1|pbkdf2_sha512|bcrypt|bcrypt_sha256|argon2|sha1|md5|sha256|sha512)\$"), None),
)
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{32,128}")
_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_INT = re.compile(r"[1-9][0-9]{0,9}")


class CredentialError(ValueError):
    """A credential hash that cannot be used. The message never contains the text given."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


HINT = "store only a hash: run `progressivectl hash-credential`, type the secret, and paste the line it prints"


@dataclass(frozen=True)
class Credential:
    scheme: str
    salt: bytes
    digest: bytes
    n: int = 0
    r: int = 0
    p: int = 0
    iterations: int = 0

    def encode(self) -> str:
        s, h = _b64(self.salt), _b64(self.digest)
        if self.scheme == SCRYPT:
            return f"{SCRYPT}${self.n}${self.r}${self.p}${s}${h}"
        return f"{PBKDF2}${self.iterations}${s}${h}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str, what: str, scheme: str) -> bytes:
    if not _B64.fullmatch(text):
        raise CredentialError(f"the {what} of this {scheme} hash is not base64", HINT)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise CredentialError(f"the {what} of this {scheme} hash is not base64", HINT) from None


def _int(text: str, what: str, scheme: str) -> int:
    if not _INT.fullmatch(text):
        raise CredentialError(f"the {what} of this {scheme} hash is not a whole number", HINT)
    return int(text)


def _normal(secret: str) -> bytes:
    # One spelling per secret, whatever keyboard or input method typed it.
    return unicodedata.normalize("NFC", secret).encode("utf-8")


def _scrypt(secret: bytes, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    maxmem = 2 * 128 * r * (n + p) + 2**20
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, dklen=length, maxmem=maxmem)


def _pbkdf2(secret: bytes, salt: bytes, iterations: int, length: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret, salt, iterations, dklen=length)


def hash_credential(
    secret: str,
    scheme: str = SCRYPT,
    *,
    n: int = SCRYPT_N,
    r: int = SCRYPT_R,
    p: int = SCRYPT_P,
    iterations: int = PBKDF2_ITERATIONS,
) -> str:
    """The hash of `secret` with a fresh random salt, in the format `parse_credential` reads."""
    if not isinstance(secret, str) or not secret:
        raise CredentialError("the secret is empty")
    if len(secret) < MIN_SECRET_CHARS:
        raise CredentialError(f"the secret is shorter than {MIN_SECRET_CHARS} characters")
    salt = secrets.token_bytes(SALT_BYTES)
    if scheme == SCRYPT:
        cred = Credential(SCRYPT, salt, b"", n=n, r=r, p=p)
        _check_cost(cred)
        digest = _scrypt(_normal(secret), salt, n, r, p, HASH_BYTES)
        return Credential(SCRYPT, salt, digest, n=n, r=r, p=p).encode()
    if scheme == PBKDF2:
        cred = Credential(PBKDF2, salt, b"", iterations=iterations)
        _check_cost(cred)
        return Credential(PBKDF2, salt, _pbkdf2(_normal(secret), salt, iterations, HASH_BYTES),
                          iterations=iterations).encode()
    raise CredentialError(f"unknown scheme {scheme!r}; schemes: {', '.join(SCHEMES)}")


def _check_cost(c: Credential) -> None:
    if c.scheme == SCRYPT:
        if c.n & (c.n - 1) or not MIN_SCRYPT_N <= c.n <= MAX_SCRYPT_N:
            raise CredentialError(
                f"scrypt n = {c.n} must be a power of two from {MIN_SCRYPT_N} to {MAX_SCRYPT_N}", HINT)
        if not MIN_SCRYPT_R <= c.r <= MAX_SCRYPT_R:
            raise CredentialError(f"scrypt r = {c.r} must be {MIN_SCRYPT_R} to {MAX_SCRYPT_R}", HINT)
        if not 1 <= c.p <= MAX_SCRYPT_P:
            raise CredentialError(f"scrypt p = {c.p} must be 1 to {MAX_SCRYPT_P}", HINT)
    elif not MIN_PBKDF2_ITERATIONS <= c.iterations <= MAX_PBKDF2_ITERATIONS:
        raise CredentialError(
            f"pbkdf2_sha256 with {c.iterations} iterations: use {MIN_PBKDF2_ITERATIONS:,} to "
            f"{MAX_PBKDF2_ITERATIONS:,} (fewer is too fast to guess against)", HINT)


def parse_credential(text: object) -> Credential:
    """A credential hash from a configuration file; CredentialError if it is anything else, above all
    if it looks like a plain password."""
    if not isinstance(text, str):
        raise CredentialError("must be a credential hash string", HINT)
    if not text:
        raise CredentialError("is empty", HINT)
    scheme, sep, rest = text.partition("$")
    if not sep or scheme not in SCHEMES:
        for pattern, name in _FOREIGN:
            if m := pattern.match(text):
                what = name or m.group(1)
                raise CredentialError(
                    f"is a {what} hash, which this controller does not read; supported: {', '.join(SCHEMES)}", HINT)
        if _HEX_DIGEST.fullmatch(text):
            raise CredentialError("looks like an unsalted digest, which is as good as a plain password", HINT)
        raise CredentialError(
            "is not a credential hash: it looks like a plain password, which must never be stored in the "
            "configuration", HINT)
    parts = rest.split("$")
    if scheme == SCRYPT:
        if len(parts) != 5:
            raise CredentialError("is not a whole scrypt hash (scrypt$n$r$p$salt$hash)", HINT)
        n, r, p = (_int(parts[i], what, SCRYPT) for i, what in enumerate(("n", "r", "p")))
        salt, digest = _unb64(parts[3], "salt", SCRYPT), _unb64(parts[4], "hash", SCRYPT)
        cred = Credential(SCRYPT, salt, digest, n=n, r=r, p=p)
    else:
        if len(parts) != 3:
            raise CredentialError("is not a whole pbkdf2_sha256 hash (pbkdf2_sha256$iterations$salt$hash)", HINT)
        iterations = _int(parts[0], "iteration count", PBKDF2)
        salt, digest = _unb64(parts[1], "salt", PBKDF2), _unb64(parts[2], "hash", PBKDF2)
        cred = Credential(PBKDF2, salt, digest, iterations=iterations)
    _check_cost(cred)
    if len(cred.salt) < SALT_BYTES:
        raise CredentialError(f"the salt is {len(cred.salt)} bytes; at least {SALT_BYTES}", HINT)
    if len(cred.digest) < 16:
        raise CredentialError(f"the hash is {len(cred.digest)} bytes; at least 16", HINT)
    return cred


def verify_credential(secret: str, encoded: str | Credential) -> bool:
    """Whether `secret` is the one `encoded` was made from. The comparison is constant-time
    (hmac.compare_digest). CredentialError if `encoded` is not a usable hash."""
    cred = encoded if isinstance(encoded, Credential) else parse_credential(encoded)
    data = _normal(secret) if isinstance(secret, str) else b""
    if cred.scheme == SCRYPT:
        computed = _scrypt(data, cred.salt, cred.n, cred.r, cred.p, len(cred.digest))
    else:
        computed = _pbkdf2(data, cred.salt, cred.iterations, len(cred.digest))
    return hmac.compare_digest(computed, cred.digest)


__all__ = ["HASH_BYTES", "HINT", "MAX_PBKDF2_ITERATIONS", "MAX_SCRYPT_N", "MAX_SCRYPT_P", "MAX_SCRYPT_R",
           "MIN_PBKDF2_ITERATIONS", "MIN_SCRYPT_N", "MIN_SCRYPT_R", "MIN_SECRET_CHARS", "PBKDF2", "PBKDF2_ITERATIONS",
           "SALT_BYTES", "SCHEMES", "SCRYPT", "SCRYPT_N", "SCRYPT_P", "SCRYPT_R", "Credential", "CredentialError",
           "hash_credential", "parse_credential", "verify_credential"]

"""Supervisor credentials: salted slow hashes, verified in constant time; anything else is refused."""

from __future__ import annotations

import hmac
import unicodedata
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.config import (
    CredentialError,
    hash_credential,
    parse_credential,
    verify_credential,
)
from controller.config import credentials as creds

FAST = {"n": 2**14, "r": 8, "p": 1}  # the smallest cost accepted: fast tests


def test_scrypt_round_trip():
    h = hash_credential("a good long secret", **FAST)
    assert h.startswith("scrypt$16384$8$1$")
    assert verify_credential("a good long secret", h)
    assert not verify_credential("a good long secreT", h)
    assert not verify_credential("", h)


def test_pbkdf2_round_trip():
    h = hash_credential("a good long secret", "pbkdf2_sha256", iterations=100_000)
    assert h.startswith("pbkdf2_sha256$100000$")
    assert verify_credential("a good long secret", h)
    assert not verify_credential("a good long secret ", h)


def test_default_cost():
    c = parse_credential(hash_credential("a good long secret"))
    assert (c.scheme, c.n, c.r, c.p, len(c.salt), len(c.digest)) == ("scrypt", 2**15, 8, 3, 16, 32)


def test_same_secret_different_salt():
    a, b = hash_credential("a good long secret", **FAST), hash_credential("a good long secret", **FAST)
    assert a != b and parse_credential(a).salt != parse_credential(b).salt


def test_comparison_is_hmac_compare_digest():
    h = hash_credential("a good long secret", **FAST)
    with mock.patch.object(creds.hmac, "compare_digest", wraps=hmac.compare_digest) as spy:
        assert verify_credential("a good long secret", h) is True
        assert verify_credential("wrong secret!", h) is False
    assert spy.call_count == 2
    computed, stored = spy.call_args_list[0].args
    assert isinstance(computed, bytes) and stored == parse_credential(h).digest


def test_unicode_secret_is_normalized():
    composed = "caf\u00e9 au lait"
    h = hash_credential(composed, **FAST)
    assert verify_credential(unicodedata.normalize("NFD", composed), h)


@pytest.mark.parametrize("secret", ["", "1234567"])
def test_short_secret_refused(secret):
    with pytest.raises(CredentialError):
        hash_credential(secret, **FAST)


@pytest.mark.parametrize(("text", "words"), [
    ("hunter2hunter2", "plain password"),
    ("scrypt", "plain password"),
    ("$2b$12$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01", "bcrypt"),
    ("$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2g", "argon2"),
    ("md5$abc$def", "md5"),
    ("5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", "unsalted digest"),
    ("scrypt$16384$8$1$c2FsdA", "not a whole scrypt hash"),
    ("scrypt$16384$8$x$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "p of this scrypt hash is not a whole number"),
    ("scrypt$16384$8$1$not*base64$aGFzaA", "salt of this scrypt hash is not base64"),
    ("scrypt$1000$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA", "power of two"),
    ("pbkdf2_sha256$1000$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaA", "too fast to guess against"),
    ("pbkdf2_sha256$600000$c2FsdA$aGFzaGhhc2hoYXNoaGFzaA", "salt is 4 bytes"),
])
def test_not_a_usable_hash(text, words):
    with pytest.raises(CredentialError) as e:
        parse_credential(text)
    assert words in e.value.message
    assert text not in e.value.message and text not in e.value.hint


def test_verify_refuses_a_malformed_hash_instead_of_answering():
    with pytest.raises(CredentialError):
        verify_credential("anything at all", "hunter2hunter2")


@settings(max_examples=15, deadline=None)
@given(secret=st.text(min_size=8, max_size=40).filter(lambda s: "\x00" not in s), other=st.text(max_size=40))
def test_round_trip_any_secret(secret, other):
    h = hash_credential(secret, "pbkdf2_sha256", iterations=100_000)
    assert verify_credential(secret, h)
    if unicodedata.normalize("NFC", other) != unicodedata.normalize("NFC", secret):
        assert not verify_credential(other, h)
    assert parse_credential(h).encode() == h

"""Publisher keys (pipeline/kafka/signing.py): signing and checking records (pure logic)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from pipeline.domain.errors import BrainstreamError, ConfigError
from pipeline.kafka.io import OWN_HEADERS, dead_letter_headers
from pipeline.kafka.signing import (
    H_KEY_ID,
    H_SIGNATURE,
    PublisherKeys,
    Signer,
    signed_message,
    signer_for,
)
from pipeline.settings import Settings

NS_A, NS_B, OPEN = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
SECRET_A, SECRET_B = b"secret-of-key-a-0123456789", b"secret-of-key-b-0123456789"
KEYS = PublisherKeys({"a": SECRET_A, "b": SECRET_B},
                     {"a": frozenset({NS_A}), "b": frozenset({NS_B})})
SIGN_A = Signer("a", SECRET_A)
VALUE = b'{"type": "brainstream.object.put"}'


def _code(refusal: BrainstreamError | None) -> str | None:
    return None if refusal is None else refusal.code


def test_a_record_signed_with_a_key_of_its_namespace_passes() -> None:
    headers = SIGN_A.sign(b"k", VALUE, [("trace", b"1")])
    assert [name for name, _ in headers] == ["trace", H_KEY_ID, H_SIGNATURE]
    assert KEYS.refusal(NS_A, b"k", headers, VALUE) is None


def test_open_namespaces_take_anything() -> None:
    assert KEYS.refusal(OPEN, b"k", [], VALUE) is None
    assert KEYS.refusal(OPEN, b"k", [(H_KEY_ID, b"a"), (H_SIGNATURE, b"junk")], VALUE) is None


@pytest.mark.parametrize("headers", [
    [],
    [(H_KEY_ID, b"a")],
    [(H_SIGNATURE, b"0" * 64)],
    [(H_KEY_ID, b"nobody"), (H_SIGNATURE, b"0" * 64)],
    [(H_KEY_ID, b"a"), (H_SIGNATURE, b"0" * 64)],
], ids=["unsigned", "key id only", "signature only", "unknown key", "wrong signature"])
def test_a_protected_namespace_refuses_records_not_signed_by_its_key(
        headers: list[tuple[str, bytes]]) -> None:
    refusal = KEYS.refusal(NS_A, b"k", headers, VALUE)
    assert _code(refusal) == "unauthorized_namespace"
    assert refusal is not None and refusal.field == "namespace"


def test_a_valid_signature_of_another_namespace_s_key_is_refused() -> None:
    headers = Signer("b", SECRET_B).sign(b"k", VALUE)
    assert KEYS.refusal(NS_B, b"k", headers, VALUE) is None
    refusal = KEYS.refusal(NS_A, b"k", headers, VALUE)
    assert refusal is not None and "not bound" in refusal.message


def test_a_second_signature_header_is_refused() -> None:
    headers = SIGN_A.sign(b"k", VALUE)
    assert _code(KEYS.refusal(NS_A, b"k", [*headers, headers[-1]], VALUE)) == \
        "unauthorized_namespace"


@pytest.mark.parametrize("change", ["value", "key", "null key", "header value", "header added",
                                    "header dropped", "repeated header order"])
def test_any_change_after_signing_breaks_the_signature(change: str) -> None:
    original = [("a", b"1"), ("x", b"first"), ("x", b"second")]
    headers = SIGN_A.sign(b"k", VALUE, original)
    key, value = b"k", VALUE
    signed = headers[-2:]
    if change == "value":
        value = VALUE.replace(b"put", b"PUT")
    elif change == "key":
        key = b"k2"
    elif change == "null key":
        key = None
    elif change == "header value":
        headers = [("a", b"2"), *headers[1:]]
    elif change == "header added":
        headers = [("b", b""), *headers]
    elif change == "header dropped":
        headers = headers[1:]
    else:
        headers = [("a", b"1"), ("x", b"second"), ("x", b"first"), *signed]
    assert _code(KEYS.refusal(NS_A, key, headers, value)) == "unauthorized_namespace"


def test_distinct_headers_may_be_reordered() -> None:
    headers = SIGN_A.sign(b"k", VALUE, [("a", b"1"), ("b", b"2")])
    assert KEYS.refusal(NS_A, b"k", list(reversed(headers)), VALUE) is None


def test_a_dead_lettered_then_re_driven_record_still_verifies() -> None:
    headers = SIGN_A.sign(b"k", VALUE, [("trace", b"1")])
    letter = dead_letter_headers(BrainstreamError("boom"), topic="t", partition=1, offset=2,
                                 event_id="e", original=headers)
    redriven = [(name, raw) for name, raw in letter if name not in OWN_HEADERS]
    assert KEYS.refusal(NS_A, b"k", redriven, VALUE) is None


def test_re_signing_replaces_an_earlier_signature() -> None:
    first = SIGN_A.sign(b"k", VALUE)
    again = Signer("b", SECRET_B).sign(b"k", VALUE, first)
    assert [name for name, _ in again] == [H_KEY_ID, H_SIGNATURE]
    assert KEYS.refusal(NS_B, b"k", again, VALUE) is None


headers_st = st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=4)


@given(key=st.one_of(st.none(), st.binary(max_size=16)), headers=headers_st,
       value=st.binary(max_size=64), flip=st.integers(min_value=0))
def test_signed_records_verify_and_flipped_values_do_not(
        key: bytes | None, headers: list[tuple[str, bytes]], value: bytes, flip: int) -> None:
    signed = SIGN_A.sign(key, value, headers)
    assert KEYS.refusal(NS_A, key, signed, value) is None
    if value:
        at = flip % len(value)
        tampered = value[:at] + bytes([value[at] ^ 1]) + value[at + 1:]
        assert KEYS.refusal(NS_A, key, signed, tampered) is not None


@given(a=st.tuples(st.one_of(st.none(), st.binary(max_size=6)), headers_st,
                   st.binary(max_size=6)),
       b=st.tuples(st.one_of(st.none(), st.binary(max_size=6)), headers_st,
                   st.binary(max_size=6)))
def test_the_signed_message_tells_records_apart(
        a: tuple[bytes | None, list[tuple[str, bytes]], bytes],
        b: tuple[bytes | None, list[tuple[str, bytes]], bytes]) -> None:
    def canonical(r: tuple[bytes | None, list[tuple[str, bytes]], bytes]) -> object:
        return r[0], sorted(r[1], key=lambda h: h[0]), r[2]

    if canonical(a) != canonical(b):
        assert signed_message("a", *a) != signed_message("a", *b)


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_publisher_keys_come_from_a_json_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAINSTREAM_PUBLISHER_KEYS",
                       f'{{"a": {{"secret": "{SECRET_A.decode()}", "namespaces": ["{NS_A}"]}}}}')
    keys = PublisherKeys.from_settings(_settings())
    assert keys.secrets == {"a": SECRET_A} and keys.bound == {"a": frozenset({NS_A})}
    assert "secret-of" not in repr(_settings())  # a secret never reaches a log line


@pytest.mark.parametrize("keys", [
    {"a": {"secret": "short", "namespaces": [str(NS_A)]}},
    {"a": {"secret": SECRET_A.decode(), "namespaces": []}},
    {"a b": {"secret": SECRET_A.decode(), "namespaces": [str(NS_A)]}},
], ids=["short secret", "no namespace", "bad key id"])
def test_bad_publisher_keys_are_refused(keys: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        _settings(publisher_keys=keys)


def test_the_publisher_s_signer_from_settings() -> None:
    keyed = _settings(publisher_keys={"a": {"secret": SECRET_A.decode(),
                                            "namespaces": [str(NS_A)]}})
    assert signer_for(keyed) is None  # no key id: unsigned
    assert signer_for(keyed, "a") == SIGN_A  # the secret of PUBLISHER_KEYS
    own = _settings(publish_key_id="b", publish_key_secret=SECRET_B.decode())
    assert signer_for(own) == Signer("b", SECRET_B)
    with pytest.raises(ConfigError):
        signer_for(_settings(), "a")

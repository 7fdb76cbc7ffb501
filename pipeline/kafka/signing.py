"""Publisher keys: HMAC-SHA256 signatures over Kafka records, bound to namespaces (pure logic).

An event names its own namespace, so on a topic shared by many publishers anyone who can write
to it could write into any tenant. A publisher holding a key signs each record it sends; the
consumer checks the signature before applying the event. A namespace bound to any key accepts
only records signed with one of its keys; every other namespace stays open, as before keys
existed.

The signature covers the record's key, its headers (all but the two signature headers) and its
value, so nothing a reader acts on can change without breaking it. Headers are signed sorted by
name, the values of a repeated name in their own order: a copy may reorder distinct headers, but
not the values of one name, whose order can change what a reader takes. Dead letters and their
re-drive keep every signed header and drop only their own (`pipeline.kafka.io.OWN_HEADERS`), and
a replay reads the records as they are, so a re-driven or replayed record still verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipeline.domain.errors import ConfigError, UnauthorizedNamespace
from pipeline.kafka.settings import KafkaSettings

H_KEY_ID = "brainstream.publisher.key"
H_SIGNATURE = "brainstream.publisher.signature"
SIGNATURE_HEADERS = frozenset({H_KEY_ID, H_SIGNATURE})
# Names the scheme and its version, so a MAC made for anything else never verifies here.
_DOMAIN = b"brainstream.publisher.signature/v1\n"

Headers = Iterable[tuple[str, bytes]]


def _field(data: bytes) -> bytes:
    # Length-prefixed: no two different records encode to the same bytes.
    return len(data).to_bytes(8, "big") + data


def signed_message(key_id: str, key: bytes | None, headers: Headers, value: bytes) -> bytes:
    """The bytes a signature covers: the key id, the record key (a null key differs from an
    empty one), the headers but the signature's own in canonical order, and the value."""
    signed = sorted(((name, raw) for name, raw in headers if name not in SIGNATURE_HEADERS),
                    key=lambda header: header[0])  # stable: a repeated name keeps its order
    parts = [_DOMAIN, _field(key_id.encode()),
             b"\x00" if key is None else b"\x01" + _field(key),
             len(signed).to_bytes(8, "big")]
    for name, raw in signed:
        parts += [_field(name.encode("utf-8", "surrogatepass")), _field(raw)]
    parts.append(_field(value))
    return b"".join(parts)


def signature(secret: bytes, key_id: str, key: bytes | None, headers: Headers,
              value: bytes) -> bytes:
    """The hex HMAC-SHA256 of the record with `secret`, as carried in `H_SIGNATURE`."""
    mac = hmac.new(secret, signed_message(key_id, key, headers, value), hashlib.sha256)
    return mac.hexdigest().encode()


@dataclass(frozen=True)
class Signer:
    """Signs records with one publisher key."""

    key_id: str
    secret: bytes = field(repr=False)

    def sign(self, key: bytes | None, value: bytes, headers: Headers = ()
             ) -> list[tuple[str, bytes]]:
        """`headers` (minus any earlier signature) followed by this key's signature headers."""
        kept = [(name, raw) for name, raw in headers if name not in SIGNATURE_HEADERS]
        mac = signature(self.secret, self.key_id, key, kept, value)
        return [*kept, (H_KEY_ID, self.key_id.encode()), (H_SIGNATURE, mac)]


def signer_for(settings: KafkaSettings, key_id: str | None = None) -> Signer | None:
    """The signer of a publisher: the key id given, else the settings' `PUBLISH_KEY_ID`; its
    secret from `PUBLISH_KEY_SECRET`, else the key's own in `PUBLISHER_KEYS`. None when no key
    id is given: records are sent unsigned."""
    key_id = key_id or settings.publish_key_id
    if key_id is None:
        return None
    secret: str | None = None
    if settings.publish_key_secret is not None:
        secret = settings.publish_key_secret.get_secret_value()
    elif key_id in settings.publisher_keys:
        secret = settings.publisher_keys[key_id].secret.get_secret_value()
    if secret is None:
        raise ConfigError(f"publisher key {key_id!r} has no secret: set "
                          "BRAINSTREAM_PUBLISH_KEY_SECRET", field="publish_key_secret")
    return Signer(key_id, secret.encode())


@dataclass(frozen=True)
class PublisherKeys:
    """The keys the consumer checks records against: secrets, and the namespaces of each."""

    secrets: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    bound: Mapping[str, frozenset[uuid.UUID]] = field(default_factory=dict)
    privileged: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: KafkaSettings) -> PublisherKeys:
        """The keys of `PUBLISHER_KEYS`."""
        keys = settings.publisher_keys
        return cls({k: v.secret.get_secret_value().encode() for k, v in keys.items()},
                   {k: frozenset(v.namespaces) for k, v in keys.items()},
                   frozenset(k for k, v in keys.items() if v.privileged))

    def is_privileged(self, namespace: uuid.UUID, key: bytes | None, headers: Headers,
                      value: bytes) -> bool:
        """Whether the record is signed, verifiably, by a key flagged `privileged` and bound
        to `namespace` (what the `system` metadata key of a message needs)."""
        if not self.privileged:
            return False
        headers = list(headers)
        ids = [raw for name, raw in headers if name == H_KEY_ID]
        macs = [raw for name, raw in headers if name == H_SIGNATURE]
        if len(ids) != 1 or len(macs) != 1:
            return False
        key_id = ids[0].decode("utf-8", "replace")
        if key_id not in self.privileged or namespace not in self.bound.get(key_id, ()):
            return False
        mac = signature(self.secrets[key_id], key_id, key, headers, value)
        return hmac.compare_digest(mac, macs[0])

    def refusal(self, namespace: uuid.UUID, key: bytes | None, headers: Headers,
                value: bytes) -> UnauthorizedNamespace | None:
        """Why the record may not write into `namespace`, or None when it may."""
        if not any(namespace in spaces for spaces in self.bound.values()):
            return None  # an open namespace: signed or not, as before keys existed
        headers = list(headers)
        ids = [raw for name, raw in headers if name == H_KEY_ID]
        macs = [raw for name, raw in headers if name == H_SIGNATURE]
        if not ids and not macs:
            return _refused(f"namespace {namespace} accepts only events signed with a "
                            "publisher key; the record is not signed")
        if len(ids) != 1 or len(macs) != 1:
            return _refused(f"the record carries {len(ids)} key id(s) and {len(macs)} "
                            "signature(s); exactly one of each is accepted")
        key_id = ids[0].decode("utf-8", "replace")
        secret = self.secrets.get(key_id)
        if secret is None:
            return _refused(f"unknown publisher key {key_id[:64]!r}")
        if not hmac.compare_digest(signature(secret, key_id, key, headers, value), macs[0]):
            return _refused(f"the signature of publisher key {key_id!r} does not match the "
                            "record (changed after signing, or signed with another secret)")
        if namespace not in self.bound[key_id]:
            return _refused(f"publisher key {key_id!r} is not bound to namespace {namespace}")
        return None


def _refused(message: str) -> UnauthorizedNamespace:
    return UnauthorizedNamespace(message, field="namespace")

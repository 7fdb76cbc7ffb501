"""API keys and what each may do (`API_KEYS`): a key has a name, scopes per namespace and an
operator flag.

Scopes are ordered, each implying those before it: `read` (every read endpoint), `write`
(publish events without `version`, write conversation memory, expand recipes), `admin` (entity
curation, setting `version` on published events). `operator` is not a namespace's: it opens the
cross-tenant operator status. The shorthand `"<secret>": ["<ns>", ...]` is a read key on each
namespace, named after a hash of its secret.

A key's secret is the JSON object's key and is never repeated in an error: a bad entry is named
by its position and, when it has one, its name.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Scope = Literal["read", "write", "admin"]
# In order: each implies those before it.
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
# A key's name is printed, logged, and becomes the `source` of the events it publishes
# (`api:<name>`) and the `decided_by` of its curation: a short plain token.
KEY_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
SOURCE_PREFIX = "api:"


def key_source(name: str) -> str:
    """The CloudEvents `source` of what the key `name` publishes through the API."""
    return SOURCE_PREFIX + name


# A key's share of the API unless its record says otherwise: requests in flight across the API's
# processes (enough for an explorer's or an agent's parallel calls), and publishes a second
# (events, messages, entity decisions; a burst of one second's worth). Raise them on the record
# of a trusted batch caller, not for every key.
MAX_IN_FLIGHT = 8
PUBLISH_RATE = 50.0


def shorthand_name(secret: str) -> str:
    """The name of a key given in the shorthand: `key-` and the first 8 hex digits of the
    SHA-256 of its secret (stable, and says nothing usable about the secret)."""
    return "key-" + hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def implied(scopes: list[Scope] | tuple[Scope, ...] | frozenset[Scope]) -> tuple[Scope, ...]:
    """The scopes granted by `scopes`: each one and every scope below it, in order."""
    top = max((SCOPES.index(s) for s in scopes), default=-1)
    return SCOPES[:top + 1]


class ApiKey(BaseModel):
    """One API key's record (the secret is its key in `API_KEYS`, not part of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="1-64 of A-Z a-z 0-9 . _ -; unique among the keys")
    scopes: dict[uuid.UUID, list[Scope]] = Field(
        default_factory=dict, description="namespace -> scopes (read < write < admin)")
    operator: bool = Field(default=False, description="may read the cross-tenant operator "
                                                      "status")
    max_in_flight: int = Field(default=MAX_IN_FLIGHT, ge=1, le=10_000,
                               description="requests in flight across the API's processes")
    publish_rate: float = Field(default=PUBLISH_RATE, gt=0, le=100_000,
                                description="publishes a second (a burst of one second's worth)")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not KEY_NAME.match(value):
            raise ValueError("a name is 1-64 characters of A-Z a-z 0-9 . _ -")
        return value

    @field_validator("scopes")
    @classmethod
    def _some_scope(cls, value: dict[uuid.UUID, list[Scope]]) -> dict[uuid.UUID, list[Scope]]:
        for namespace, scopes in value.items():
            if not scopes:
                raise ValueError(f"namespace {namespace} has no scope (give read, write or "
                                 "admin, or leave the namespace out)")
        return value

    @property
    def namespaces(self) -> list[uuid.UUID]:
        """The namespaces the key is bound to, as configured."""
        return list(self.scopes)

    @property
    def source(self) -> str:
        """The CloudEvents `source` of the events this key publishes through the API."""
        return key_source(self.name)

    def granted(self, namespace: uuid.UUID) -> tuple[Scope, ...]:
        """The scopes the key holds on `namespace` (implied ones included; none: unbound)."""
        return implied(self.scopes.get(namespace, ()))

    def allows(self, namespace: uuid.UUID, scope: Scope) -> bool:
        """Whether the key holds `scope` (or one above it) on `namespace`."""
        return scope in self.granted(namespace)


def _entry(position: int, secret: object, value: object) -> ApiKey:
    """One entry of API_KEYS as a record (`ValueError` naming it by position and name)."""
    if isinstance(value, ApiKey):
        return value
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError(f"key {position}: the key (the secret) is empty")
    name = value.get("name") if isinstance(value, dict) else shorthand_name(secret)
    where = f"key {position} ({name!r})" if isinstance(name, str) else f"key {position}"
    if secret != secret.strip():
        raise ValueError(f"{where}: the key (the secret) has leading or trailing spaces")
    raw: Any = value
    if isinstance(value, list):  # the shorthand: read on each namespace
        raw = {"scopes": {ns: ["read"] for ns in value}}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: give a list of namespaces or an object "
                         "{name, scopes, operator}")
    raw = {"name": shorthand_name(secret), **raw}
    try:
        return ApiKey.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        at = ".".join(str(step) for step in error["loc"] if step != "[key]")
        message = str(error["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{where}: {at + ': ' if at else ''}{message}") from None


def parse_api_keys(value: object) -> dict[str, ApiKey]:
    """API_KEYS (already decoded from JSON) as secret -> record: the full form or the
    shorthand per key; names unique. Records already parsed pass as they are."""
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object of key -> its record")
    keys = {secret: _entry(position, secret, entry)
            for position, (secret, entry) in enumerate(value.items(), start=1)}
    seen: dict[str, int] = {}
    for position, key in enumerate(keys.values(), start=1):
        if key.name in seen:
            raise ValueError(f"key {position} ({key.name!r}): the name is also key "
                             f"{seen[key.name]}'s; names must be unique")
        seen[key.name] = position
    return keys

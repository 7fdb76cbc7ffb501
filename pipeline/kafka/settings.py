"""The Kafka side's settings: the topics the pipeline owns, the size of one event, and the
publisher keys that sign events."""

from __future__ import annotations

import re
import uuid

from pydantic import BaseModel, Field, SecretStr, field_validator

from pipeline.domain.setting_values import parse_json_object
from pipeline.services.settings import StackSettings

# A publisher key id travels in a record header and in log lines: plain, short text.
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


class PublisherKey(BaseModel):
    """One publisher key (pipeline/kafka/signing.py): the HMAC secret its holder signs events
    with, and the namespaces whose events it may sign."""

    # 16 characters at least: a shorter HMAC secret could be guessed offline from one record.
    secret: SecretStr = Field(min_length=16)
    namespaces: list[uuid.UUID] = Field(min_length=1)
    # Conversation memory: a privileged key may write the top-level `system` metadata key of a
    # message (messages.add, message.metadata) in its namespaces; others are dead-lettered
    # `privileged_key_required`.
    privileged: bool = False


class KafkaSettings(StackSettings):
    """Topics, event size, publisher keys (with the stack group: where Kafka is)."""

    # The embedded broker's store writes each partition of a produce request apart, so one
    # partition is the fastest on one machine; a partition is the unit of parallel consumption.
    topic_partitions: int = Field(
        default=1, ge=1, le=256, description="Partitions of the input and dead-letter topics, "
        "set when the topics are first created. Raise it to N before the first start to run N "
        "consumers.")
    topic_changes_partitions: int = Field(
        default=1, ge=1, le=256, description="Partitions of the changes topic. Raise it for "
        "N parallel subscribers of the changes.")
    topic_events: str = Field(default="brainstream.events", description="The input topic. "
                              "Change it to share a Kafka cluster between deployments.")
    topic_dlq: str = Field(default="brainstream.events.dlq", description="The dead-letter "
                           "topic. Change it as TOPIC_EVENTS.")
    topic_changes: str = Field(default="brainstream.changes", description="The topic of what "
                               "became visible. Change it as TOPIC_EVENTS.")
    max_event_bytes: int = Field(
        default=1_000_000, ge=1024, description="The largest event (record) accepted; larger "
        "ones are dead-lettered `payload_too_large`. Raise it (with the broker's limit) for large "
        "documents.")
    publisher_keys: dict[str, PublisherKey] = Field(
        default_factory=dict, description="JSON: key id -> {secret, namespaces, privileged}. A "
        "namespace bound to a key accepts only events signed by one of its keys. Set it before "
        "other teams publish.")
    publish_key_id: str | None = Field(
        default=None, description="The key `brainstream publish` signs with. Set it on a "
        "publisher's machine.")
    publish_key_secret: SecretStr | None = Field(
        default=None, min_length=16, description="That key's secret (without it, the key's own "
        "from PUBLISHER_KEYS). Set it on a publisher's machine that lacks PUBLISHER_KEYS.")

    @field_validator("publisher_keys", mode="before")
    @classmethod
    def _publisher_keys_json(cls, value: object) -> object:
        return parse_json_object(value)

    @field_validator("publisher_keys")
    @classmethod
    def _plain_key_ids(cls, value: dict[str, PublisherKey]) -> dict[str, PublisherKey]:
        bad = [key_id for key_id in value if not KEY_ID_PATTERN.fullmatch(key_id)]
        if bad:
            raise ValueError(f"key id {bad[0]!r} must be 1-64 letters, digits, '.', '_' or '-'")
        return value

"""The size limits of an event's fields, enforced by the models (hence by `parse_event`) and
published in the JSON Schemas (`maxLength`, `maxItems`, `maxProperties`).

They are part of the event contract, not settings: a publisher validates against the committed
JSON Schemas, so the consumer must not accept more than they say. Lengths count characters
(code points), as JSON Schema does. Each is written down in docs/operations.md
("Limits: events"); the whole record is bounded besides by the `max_event_bytes` setting.
"""

from __future__ import annotations

from typing import Final

# Envelope. `id` and `source` together key the processed-event ledger's btree index, whose rows
# must stay under about 2,700 bytes: 256 characters each is at most 2,048 bytes of UTF-8.
EVENT_ID_MAX: Final = 256
EVENT_SOURCE_MAX: Final = 256
EVENT_SUBJECT_MAX: Final = 1024
# `version` is stored in a bigint column: a larger one would pass the schema and fail the write.
VERSION_MAX: Final = 2**63 - 1
MEDIA_TYPE_MAX: Final = 256  # datacontenttype, and a put's content_type

# An object put. Generous beside the datasets (a SciFact title is at most 300 characters, a
# LoCoMo session summary 1,423); content is bounded in practice by `max_event_bytes`.
TITLE_MAX: Final = 2_000
SUMMARY_MAX: Final = 20_000
CONTENT_MAX: Final = 10_000_000
PROPERTIES_MAX: Final = 256  # keys per object (each key is at most 63 characters, its pattern)
PROPERTY_STRING_MAX: Final = 10_000  # a string value, alone or in a list
PROPERTY_LIST_MAX: Final = 1_000  # items of a list value

# A delete by source or filter (schemas/deletes.py): the objects one event soft-deletes, at most.
# Each costs its rows' updates, an outbox row and a lexical re-sync in the consumer's transaction;
# 10,000 keeps one such event to about a second of the batch, so it cannot stall the consumer.
DELETE_MAX: Final = 10_000

# A link put's metadata (relation types are at most 63 characters, their pattern).
NOTE_MAX: Final = 10_000
LINK_LABEL_MAX: Final = 256  # status, role

# Conversation memory (issue 12). A session id and a user id are the publisher's names; a message
# is one chat turn (a LoCoMo turn is at most ~1,500 characters), a summary a few paragraphs.
SESSION_ID_MAX: Final = 256
USER_ID_MAX: Final = 256
ROLE_MAX: Final = 64
MESSAGE_CONTENT_MAX: Final = 100_000
SUMMARY_CONTENT_MAX: Final = 100_000
MESSAGES_PER_EVENT: Final = 100  # messages of one messages.add
METADATA_KEYS_MAX: Final = 256  # top-level keys of a session's or message's metadata
METADATA_KEY_MAX: Final = 256  # characters of one metadata key

# A curator's decision on two entities (schemas/entities.py): who decided (a curator's name).
DECIDED_BY_MAX: Final = 256

# Caller-supplied structure of an object put (schemas/payloads.py, pipeline/domain/structure.py):
# a CRM record or a code file names tens of things; 500 bounds one put's entity write-back.
STRUCTURE_ENTITIES_MAX: Final = 500
STRUCTURE_RELATIONS_MAX: Final = 500
STRUCTURE_SPANS_MAX: Final = 100  # spans of one supplied entity
STRUCTURE_NAME_MAX: Final = 200  # an entity's name, a relation's predicate
STRUCTURE_LABEL_MAX: Final = 64

-- Conversation memory joins the entity layer: the entities the memory extractor finds in a
-- message (pipeline/memory/extraction.py) are resolved to the namespace's entities (the same
-- name in a conversation and a document is one entity) and their spans kept here.
--
-- A table of its own, not `mentions`: a message is no `objects` row (its key is (namespace,
-- uuid), its life the session's: hidden with it, purged with it), and `mentions`' foreign key,
-- extraction state, recount triggers and counters all belong to objects. Messages do not
-- count in `entities.part_count` nor in CO_OCCURS weights: those drive PPR's seed weights and
-- hub rule over documents, and a chat naming "Caroline" a thousand times must not make her a
-- hub of the documents nor change a document-only answer. The readers that cross from a
-- conversation to documents (paths; resolve's evidence) read this table beside `mentions`,
-- joined to live messages of live sessions, so a hidden message counts for nothing without a
-- recount, and a purged one cascades away.
CREATE TABLE message_mentions (
    namespace_id uuid NOT NULL,
    message_uuid uuid NOT NULL,
    start_pos    integer NOT NULL CHECK (start_pos >= 0),
    end_pos      integer NOT NULL,
    entity_id    uuid NOT NULL REFERENCES entities (id),
    label        text NOT NULL,
    text         text NOT NULL,   -- the span of the message's content as written
    PRIMARY KEY (namespace_id, message_uuid, start_pos, end_pos),
    FOREIGN KEY (namespace_id, message_uuid) REFERENCES messages (namespace_id, uuid)
        ON DELETE CASCADE,
    CHECK (end_pos > start_pos)
);

CREATE INDEX message_mentions_entity ON message_mentions (entity_id, message_uuid);

-- Messages extracted before this migration: their entities extraction runs again (the
-- extractor is the entity layer's, idempotent per message), which now writes this table.
UPDATE message_extraction SET status = 'pending', lease_until = NULL, attempts = 0,
       updated_at = now()
WHERE extractor = 'entities' AND status = 'done';

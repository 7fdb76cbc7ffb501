-- The source of truth: kinds, objects (first-class objects and their parts), links, the outbox
-- that drives the graph projection, and the ledger of processed events.

CREATE TABLE object_kinds (
    kind       text PRIMARY KEY,
    spec       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE objects (
    id              uuid PRIMARY KEY,
    namespace_id    uuid NOT NULL,
    kind            text NOT NULL,
    title           text,
    summary         text,
    properties      jsonb NOT NULL DEFAULT '{}'::jsonb,
    content         text,
    content_type    text,
    -- a row with parent_id is a part (a chunk) of that parent; position orders the parts
    parent_id       uuid REFERENCES objects (id) ON DELETE CASCADE,
    position        integer CHECK (position IS NULL OR position >= 0),
    -- true for parts the pipeline cut from the parent's content (replaced on re-chunk);
    -- explicit parts, sent with their parent_id, are false and kept as sent
    chunked         boolean NOT NULL DEFAULT false,
    embedding       vector({{EMBEDDING_DIM}}),
    -- hash of the index text the embedding must reflect, and of the text it was computed from:
    -- when they agree the object is embedded and an unchanged put is not re-embedded
    index_text_hash text,
    embedded_hash   text,
    embed_status    text NOT NULL DEFAULT 'pending'
                    CHECK (embed_status IN ('pending', 'done', 'failed')),
    embed_attempts  integer NOT NULL DEFAULT 0,
    embed_error     text,
    -- a worker that claimed this row for embedding holds it until then (no lock while embedding)
    embed_lease_until timestamptz,
    -- the optional CloudEvents `version` of the event that wrote this row (older events are no-ops)
    source_version  bigint,
    event_id        text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz,
    lexical         tsvector GENERATED ALWAYS AS (
                        setweight(to_tsvector('english', coalesce(title, '')), 'A')
                        || setweight(to_tsvector('english', coalesce(summary, '')), 'B')
                        || setweight(to_tsvector('english', coalesce(content, '')), 'C')
                    ) STORED,
    CHECK (parent_id IS NULL OR parent_id <> id)
);

CREATE INDEX objects_ns_kind ON objects (namespace_id, kind) WHERE deleted_at IS NULL;
CREATE INDEX objects_parent ON objects (parent_id, position) WHERE parent_id IS NOT NULL;
CREATE INDEX objects_ns_updated ON objects (namespace_id, updated_at);
CREATE INDEX objects_ns_created ON objects (namespace_id, created_at);
CREATE INDEX objects_properties ON objects USING gin (properties jsonb_path_ops);
CREATE INDEX objects_lexical ON objects USING gin (lexical);
CREATE INDEX objects_title_trgm ON objects USING gin (title gin_trgm_ops);
CREATE INDEX objects_content_trgm ON objects USING gin (content gin_trgm_ops);
CREATE INDEX objects_embedding ON objects USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
CREATE INDEX objects_embed_pending ON objects (updated_at) WHERE embed_status = 'pending';
CREATE INDEX objects_deleted ON objects (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE links (
    namespace_id   uuid NOT NULL,
    from_id        uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    to_id          uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    relation_type  text NOT NULL CHECK (relation_type ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'),
    meta           jsonb NOT NULL DEFAULT '{}'::jsonb,
    source_version bigint,
    event_id       text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    PRIMARY KEY (from_id, relation_type, to_id)
);

CREATE INDEX links_to ON links (to_id, relation_type);
CREATE INDEX links_ns_type ON links (namespace_id, relation_type) WHERE deleted_at IS NULL;

-- Transactional outbox: written in the same transaction as the rows it describes; a relay applies
-- each entry to the graph idempotently and marks it done.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    namespace_id uuid NOT NULL,
    aggregate_id uuid NOT NULL,
    op           text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    done_at      timestamptz
);

CREATE INDEX outbox_pending ON outbox (available_at, id) WHERE done_at IS NULL;
CREATE INDEX outbox_aggregate ON outbox (aggregate_id, id) WHERE done_at IS NULL;

-- Exactly-once effect: an event id is applied at most once per (namespace, source).
CREATE TABLE processed_events (
    namespace_id uuid NOT NULL,
    source       text NOT NULL,
    event_id     text NOT NULL,
    event_type   text NOT NULL,
    outcome      text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, source, event_id)
);

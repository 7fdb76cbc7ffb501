-- Conversation memory (issue 12): sessions, their messages, their summaries, and the durable state
-- of the work done on them after commit (per-message extractors, one summariser per session).
-- Written by the memory events (pipeline/ingest/memory.py); read by api/routes/memory.py and the
-- memory search. Every table is per namespace: a session, message or summary never spans tenants.

-- One session per namespace and publisher-given `session_id`. `id` is derived from both
-- (pipeline/memory/model.py: session_key), so a replay rebuilds the same ids and the Kafka record
-- key of every event about the session is the same.
CREATE TABLE sessions (
    id            uuid PRIMARY KEY,
    namespace_id  uuid NOT NULL,
    session_id    text NOT NULL,
    user_id       text,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- the seq of the newest message (0: none yet); the next message gets last_seq + 1
    last_seq      bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    -- the summary point: messages with seq > summary_seq are not folded into a summary yet.
    -- A revived session starts past its hidden messages (summary_seq = last_seq).
    summary_seq   bigint NOT NULL DEFAULT 0 CHECK (summary_seq >= 0),
    summary_uuid  uuid,           -- the latest summary (summaries.uuid), NULL when none
    event_id      text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    UNIQUE (namespace_id, session_id),
    CHECK (summary_seq <= last_seq)
);

CREATE INDEX sessions_ns_user ON sessions (namespace_id, user_id, session_id)
    WHERE deleted_at IS NULL;
CREATE INDEX sessions_deleted ON sessions (deleted_at) WHERE deleted_at IS NOT NULL;

-- One row per message, keyed by the publisher's uuid within the namespace (idempotent adds).
-- `seq` is the arrival order within the session. A message is hidden (deleted_at) with its
-- session, and stays hidden when the session is revived by a later session.put.
CREATE TABLE messages (
    namespace_id  uuid NOT NULL,
    uuid          uuid NOT NULL,
    session_pk    uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq           bigint NOT NULL CHECK (seq > 0),
    role          text NOT NULL,
    content       text NOT NULL,
    -- the publisher's metadata; the top-level `system` key is written only by the pipeline's
    -- extractors and privileged publishers (entities with spans live under system.entities)
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    token_count   integer CHECK (token_count IS NULL OR token_count >= 0),
    embedding     vector({{EMBEDDING_DIM}}),
    event_id      text,
    created_at    timestamptz NOT NULL,          -- the publisher's (else the event's time)
    received_at   timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    lexical       tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    PRIMARY KEY (namespace_id, uuid),
    UNIQUE (session_pk, seq)
);

-- GET memory and the paged message list read (session_pk, seq) backwards or forwards.
CREATE INDEX messages_session_live ON messages (session_pk, seq) WHERE deleted_at IS NULL;
CREATE INDEX messages_ns_created ON messages (namespace_id, created_at);
CREATE INDEX messages_lexical ON messages USING gin (lexical);
CREATE INDEX messages_metadata ON messages USING gin (metadata jsonb_path_ops);
CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
CREATE INDEX messages_deleted ON messages (deleted_at) WHERE deleted_at IS NOT NULL;

-- The per-message state of each extractor (pipeline/memory/model.py: MESSAGE_EXTRACTORS: token,
-- embed, entities), one narrow row per (message, extractor) so claiming never rewrites a wide
-- message row. Written `pending` in the transaction that adds the message; an extractor claims
-- pending rows with a lease, writes its result and marks them done (or failed after its retries,
-- with the error; dead-lettered by the extractor).
CREATE TABLE message_extraction (
    namespace_id  uuid NOT NULL,
    message_uuid  uuid NOT NULL,
    extractor     text NOT NULL,
    session_pk    uuid NOT NULL,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'done', 'failed')),
    attempts      integer NOT NULL DEFAULT 0,
    lease_until   timestamptz,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, message_uuid, extractor),
    FOREIGN KEY (namespace_id, message_uuid) REFERENCES messages (namespace_id, uuid)
        ON DELETE CASCADE
);

CREATE INDEX message_extraction_pending ON message_extraction (extractor, created_at)
    WHERE status = 'pending';
CREATE INDEX message_extraction_session ON message_extraction (session_pk)
    WHERE status = 'pending';

-- Summaries of a session: the content folds every message up to `recent_message_uuid` (the
-- summary point, whose seq is `recent_seq`). Written by the summariser (`source` summariser) or
-- by a brainstream.summary.put event (`external`). The latest is sessions.summary_uuid.
-- Small in number, so their embedding state sits on the row.
CREATE TABLE summaries (
    namespace_id        uuid NOT NULL,
    uuid                uuid NOT NULL,
    session_pk          uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    content             text NOT NULL,
    recent_message_uuid uuid NOT NULL,
    recent_seq          bigint NOT NULL CHECK (recent_seq > 0),
    token_count         integer CHECK (token_count IS NULL OR token_count >= 0),
    embedding           vector({{EMBEDDING_DIM}}),
    embed_status        text NOT NULL DEFAULT 'pending'
                        CHECK (embed_status IN ('pending', 'done', 'failed')),
    embed_attempts      integer NOT NULL DEFAULT 0,
    embed_lease_until   timestamptz,
    embed_error         text,
    source              text NOT NULL CHECK (source IN ('summariser', 'external')),
    event_id            text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz,
    lexical             tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    PRIMARY KEY (namespace_id, uuid)
);

CREATE INDEX summaries_session ON summaries (session_pk, recent_seq) WHERE deleted_at IS NULL;
CREATE INDEX summaries_lexical ON summaries USING gin (lexical);
CREATE INDEX summaries_embedding ON summaries USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
CREATE INDEX summaries_embed_pending ON summaries (updated_at) WHERE embed_status = 'pending';

-- One summariser at a time per session: `pending` is set by every messages.add (in its
-- transaction); the summariser claims the row with a lease, folds what is past the window,
-- and clears `pending` unless new messages arrived meanwhile (`requests` moved on).
CREATE TABLE session_summariser (
    session_pk    uuid PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    namespace_id  uuid NOT NULL,
    pending       boolean NOT NULL DEFAULT true,
    requests      bigint NOT NULL DEFAULT 1,     -- +1 per messages.add that asked for a run
    requested_at  timestamptz NOT NULL DEFAULT now(),
    lease_until   timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    error         text,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX session_summariser_pending ON session_summariser (requested_at) WHERE pending;

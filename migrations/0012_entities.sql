-- The entity layer: what the content names (entities), the names it goes by (aliases), where it is
-- named (mentions), how entities relate (entity_edges), the merges that joined two (entity_merges),
-- and the per-row state of the extraction stage (entity_extraction). Postgres is the truth; the
-- graph gets entity nodes, MENTIONS and entity edges through the outbox. Every table is per
-- namespace: an entity never spans tenants.

-- One entity per namespace and normalised name (pipeline/entities/names.py: `normalise`). Its id
-- is derived from (namespace, norm) when it is first seen, so a replay rebuilds the same ids. A
-- merged entity keeps its row (history, and its id keeps resolving) with `merged_into` set; its
-- mentions, aliases and edges move to the survivor.
CREATE TABLE entities (
    id           uuid PRIMARY KEY,
    namespace_id uuid NOT NULL,
    name         text NOT NULL,   -- display name: the surface form first seen (or chosen on merge)
    norm         text NOT NULL,   -- normalised name
    label        text NOT NULL,   -- NAME, ACRONYM, IDENTIFIER, QUANTITY, QUOTED; spaCy: PERSON, ORG...
    -- live rows (not deleted) that mention it: the seed weight and the hub rule of PPR read it
    part_count   integer NOT NULL DEFAULT 0 CHECK (part_count >= 0),
    -- the name's embedding (the pipeline's embedder), for the resolver's last layer; filled by
    -- the extraction stage, NULL until then
    embedding    vector({{EMBEDDING_DIM}}),
    merged_into  uuid REFERENCES entities (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (merged_into IS NULL OR merged_into <> id)
);

CREATE UNIQUE INDEX entities_ns_norm ON entities (namespace_id, norm) WHERE merged_into IS NULL;
CREATE INDEX entities_norm_trgm ON entities USING gin (norm gin_trgm_ops);
CREATE INDEX entities_ns_count ON entities (namespace_id, part_count DESC) WHERE merged_into IS NULL;
CREATE INDEX entities_embedding ON entities USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);

-- Other names of an entity: every surface form seen (`surface`), the names of entities merged
-- into it (`merge`), names an operator added (`manual`), aliases an extractor stated (`extractor`).
CREATE TABLE entity_aliases (
    namespace_id uuid NOT NULL,
    norm         text NOT NULL,
    alias        text NOT NULL,
    entity_id    uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    source       text NOT NULL CHECK (source IN ('surface', 'merge', 'manual', 'extractor')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, norm, entity_id)
);

CREATE INDEX entity_aliases_entity ON entity_aliases (entity_id);
CREATE INDEX entity_aliases_norm_trgm ON entity_aliases USING gin (norm gin_trgm_ops);

-- Where an entity is named: a span [start_pos, end_pos) of one field of one row (a part's
-- content; a root's title, summary, or its content when it has no parts). Replaced as a whole
-- for a row each time the row is extracted again.
CREATE TABLE mentions (
    row_id       uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    field        text NOT NULL CHECK (field IN ('title', 'summary', 'content')),
    start_pos    integer NOT NULL CHECK (start_pos >= 0),
    end_pos      integer NOT NULL,
    namespace_id uuid NOT NULL,
    entity_id    uuid NOT NULL REFERENCES entities (id),
    label        text NOT NULL,
    text         text NOT NULL,   -- the span as written
    PRIMARY KEY (row_id, field, start_pos, end_pos),
    CHECK (end_pos > start_pos)
);

CREATE INDEX mentions_entity ON mentions (entity_id, row_id);

-- Entity-to-entity edges. CO_OCCURS: named in the same row, weight = rows naming both, evidence =
-- some of those rows. RELATES: an extracted triple (predicate), evidence = the rows that state it.
-- POSSIBLY_SAME: the resolver could not decide; status held (undecided), verified (a person said
-- yes: the merge follows) or refused (a person said no: never proposed again). Stored once per
-- unordered pair for the symmetric types (from_id < to_id).
CREATE TABLE entity_edges (
    namespace_id uuid NOT NULL,
    from_id      uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    to_id        uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    edge_type    text NOT NULL CHECK (edge_type IN ('CO_OCCURS', 'RELATES', 'POSSIBLY_SAME')),
    predicate    text NOT NULL DEFAULT '',
    weight       real NOT NULL DEFAULT 0,
    status       text CHECK (status IS NULL OR status IN ('held', 'verified', 'refused')),
    confidence   real,
    method       text,            -- POSSIBLY_SAME: the resolver layer that proposed it
    evidence     uuid[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (from_id, edge_type, predicate, to_id),
    CHECK (from_id <> to_id),
    CHECK ((edge_type = 'POSSIBLY_SAME') = (status IS NOT NULL))
);

CREATE INDEX entity_edges_to ON entity_edges (to_id, edge_type);
CREATE INDEX entity_edges_ns_type ON entity_edges (namespace_id, edge_type);

-- The history of merges (automatic at >= the merge threshold, or verified by a person); `undone_at`
-- when an operator split them again.
CREATE TABLE entity_merges (
    id           bigserial PRIMARY KEY,
    namespace_id uuid NOT NULL,
    from_id      uuid NOT NULL REFERENCES entities (id),
    into_id      uuid NOT NULL REFERENCES entities (id),
    confidence   real NOT NULL,
    method       text NOT NULL,
    decided_by   text NOT NULL,   -- 'resolver' or the person (API key name / operator) who verified
    note         text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    undone_at    timestamptz
);

CREATE INDEX entity_merges_ns ON entity_merges (namespace_id, created_at);

-- The extraction stage's per-row state, kept narrow so claiming never rewrites a wide objects
-- row. A row is pending when its text changed since it was last extracted (`text_hash` is the
-- row's index_text_hash, `extracted_hash` what the mentions reflect); the trigger below keeps it.
CREATE TABLE entity_extraction (
    row_id         uuid PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    namespace_id   uuid NOT NULL,
    root_id        uuid NOT NULL,
    text_hash      text,
    extracted_hash text,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'done', 'failed')),
    attempts       integer NOT NULL DEFAULT 0,
    lease_until    timestamptz,
    error          text,
    extractor      text,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX entity_extraction_pending ON entity_extraction (updated_at) WHERE status = 'pending';

-- A row's text changed (or the row is new): its extraction is pending again. Deletion is not a
-- change of text: readers and PPR join mentions to live rows, and the relay drops a deleted
-- object's MENTIONS with its node.
CREATE FUNCTION brainstream_extraction_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_extraction (row_id, namespace_id, root_id, text_hash, status)
    VALUES (NEW.id, NEW.namespace_id, coalesce(NEW.parent_id, NEW.id), NEW.index_text_hash,
            'pending')
    ON CONFLICT (row_id) DO UPDATE
        SET text_hash = EXCLUDED.text_hash, status = 'pending', attempts = 0, error = NULL,
            updated_at = now()
        WHERE entity_extraction.extracted_hash IS DISTINCT FROM EXCLUDED.text_hash;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_extraction_sync
    AFTER INSERT OR UPDATE OF index_text_hash ON objects
    FOR EACH ROW EXECUTE FUNCTION brainstream_extraction_sync();

-- Rows written before this migration: pending, for the backfill (`brainstream entities
-- backfill`, or the sweep) to extract.
INSERT INTO entity_extraction (row_id, namespace_id, root_id, text_hash, status)
SELECT id, namespace_id, coalesce(parent_id, id), index_text_hash, 'pending'
FROM objects WHERE deleted_at IS NULL;

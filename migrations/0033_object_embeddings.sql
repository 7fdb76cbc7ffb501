-- Lean writes (issue 13, item 2): a row's embedding and its embedding work state move out of the
-- wide `objects` row into a narrow table of their own. Before, the embedding worker's claim (a
-- lease) and its write-back (vector, hash, status) each rewrote the whole wide row through every
-- index of `objects` (trigram and full-text GINs, the HNSW index among them), and fired its row
-- triggers; now they rewrite a row of a few columns with three small indexes besides the HNSW
-- one. Each index generation is a database of its own, so one row per object suffices.
--
-- `index_text_hash` is the text this row must reflect (copied from `objects` by the triggers
-- below, in the writing transaction), so the worker's write-back is a compare-and-set on the row
-- it updates: a put that changed the text meanwhile wins and the row stays pending.

CREATE TABLE object_embeddings (
    id                uuid PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE,
    namespace_id      uuid NOT NULL,
    -- the aggregate the row belongs to (its parent, or itself): a root goes to the graph once
    -- it and all its parts are embedded
    root_id           uuid NOT NULL,
    index_text_hash   text,
    embedding         vector({{EMBEDDING_DIM}}),
    -- the index text hash the embedding was computed from, and the embedder that computed it
    embedded_hash     text,
    model             text,
    embed_status      text NOT NULL DEFAULT 'pending'
                      CHECK (embed_status IN ('pending', 'done', 'failed')),
    embed_attempts    integer NOT NULL DEFAULT 0,
    embed_error       text,
    -- a worker that claimed this row holds it until then (no lock while embedding); the claim
    -- changes no indexed column, so it is a HOT update
    embed_lease_until timestamptz,
    -- when the row last became pending: claims take the oldest first
    queued_at         timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80);

INSERT INTO object_embeddings (id, namespace_id, root_id, index_text_hash, embedding,
                               embedded_hash, embed_status, embed_attempts, embed_error,
                               embed_lease_until, queued_at)
SELECT id, namespace_id, coalesce(parent_id, id), index_text_hash, embedding, embedded_hash,
       embed_status, embed_attempts, embed_error, embed_lease_until, updated_at
FROM objects;

CREATE INDEX object_embeddings_hnsw ON object_embeddings USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
-- the claim: the oldest pending rows
CREATE INDEX object_embeddings_pending ON object_embeddings (queued_at, id)
    WHERE embed_status = 'pending';
-- the write-back's "is this root complete?" and the claim of given roots
CREATE INDEX object_embeddings_pending_root ON object_embeddings (root_id)
    WHERE embed_status = 'pending';

-- A new row is pending. One statement trigger: a COPY of many rows costs one INSERT.
CREATE FUNCTION brainstream_embedding_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO object_embeddings (id, namespace_id, root_id, index_text_hash)
    SELECT id, namespace_id, coalesce(parent_id, id), index_text_hash FROM new_rows;
    RETURN NULL;
END
$$;

-- A put (or a parent's new title) wrote the row again: pending unless the stored embedding is
-- already of this text (an unchanged put is not re-embedded; a failed row is tried again); the
-- attempts and error start over when the text changed. A write that changes nothing here
-- leaves the narrow row alone.
CREATE FUNCTION brainstream_embedding_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO object_embeddings AS e (id, namespace_id, root_id, index_text_hash)
    VALUES (NEW.id, NEW.namespace_id, coalesce(NEW.parent_id, NEW.id), NEW.index_text_hash)
    ON CONFLICT (id) DO UPDATE SET
        namespace_id = EXCLUDED.namespace_id,
        root_id = EXCLUDED.root_id,
        index_text_hash = EXCLUDED.index_text_hash,
        embed_status = CASE WHEN e.embedding IS NOT NULL
                             AND e.embedded_hash = EXCLUDED.index_text_hash
                            THEN 'done' ELSE 'pending' END,
        embed_attempts = CASE WHEN e.index_text_hash IS DISTINCT FROM EXCLUDED.index_text_hash
                              THEN 0 ELSE e.embed_attempts END,
        embed_error = CASE WHEN e.index_text_hash IS DISTINCT FROM EXCLUDED.index_text_hash
                           THEN NULL ELSE e.embed_error END,
        queued_at = CASE WHEN e.embed_status = 'pending' THEN e.queued_at ELSE now() END
    WHERE e.namespace_id IS DISTINCT FROM EXCLUDED.namespace_id
       OR e.root_id IS DISTINCT FROM EXCLUDED.root_id
       OR e.index_text_hash IS DISTINCT FROM EXCLUDED.index_text_hash
       OR e.embed_status = 'failed'
       OR (e.embed_status = 'pending' AND e.embedding IS NOT NULL
           AND e.embedded_hash = EXCLUDED.index_text_hash);
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_embedding_insert AFTER INSERT ON objects
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_embedding_new();
CREATE TRIGGER objects_embedding_sync
    AFTER UPDATE OF index_text_hash, parent_id, namespace_id ON objects
    FOR EACH ROW EXECUTE FUNCTION brainstream_embedding_sync();

DROP INDEX objects_embedding;
DROP INDEX objects_embed_pending;
ALTER TABLE objects DROP COLUMN embedding, DROP COLUMN embedded_hash, DROP COLUMN embed_status,
    DROP COLUMN embed_attempts, DROP COLUMN embed_error, DROP COLUMN embed_lease_until;

-- Entity name vectors get a dimension of their own, `{{NAME_EMBEDDING_DIM}}`: the model of
-- ENTITY_NAME_EMBEDDER (the static embedder by default), which need not be the passages' model.
-- Names are two to five words; with MiniLM for passages, embedding each new name with MiniLM was
-- 8.0 of the 61 CPU-seconds bench/ingest.py's MiniLM pipeline spent on 200 SciFact documents,
-- and bench/resolution.py measures the resolver on static name vectors. A database whose names
-- were embedded by another model (of another dimension) loses those vectors here;
-- `brainstream entities backfill` embeds every name left without one.
DROP INDEX IF EXISTS entities_embedding;
ALTER TABLE entities ALTER COLUMN embedding TYPE vector({{NAME_EMBEDDING_DIM}})
    USING CASE WHEN vector_dims(embedding) = {{NAME_EMBEDDING_DIM}}
               THEN embedding::vector({{NAME_EMBEDDING_DIM}}) END;
CREATE INDEX entities_embedding ON entities USING hnsw (embedding vector_cosine_ops)
    WITH (m = 8, ef_construction = 64);
INSERT INTO brainstream_meta (key, value) VALUES ('name_embedding_dim', '{{NAME_EMBEDDING_DIM}}')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now();

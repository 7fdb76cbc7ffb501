-- Entity name vectors move to a narrow table of their own, written by the proposal pass, not by
-- the extraction stage (issue 11: extraction never the ingest bottleneck). Inserting each new
-- entity with its vector put the HNSW insert inside extraction's write-back: on 300 SciFact
-- documents (847 parts, 2,568 new entities; bench/extractprofile.py --skip-pass) the entity
-- INSERT took 2.3-2.6 s of the stage's 7.7-8.6 s, and without the vectors the stage ran in
-- 5.7-5.9 s with 44 % less Postgres CPU. The pass is the vectors' reader (its last layer); it
-- now embeds the names it is about to examine (pipeline/entities/name_vectors.py), after a
-- burst's extraction has drained. `entities` also loses its widest column: a recount of
-- `part_count` rewrote the vector with the row.
--
-- Rows of merged entities stay (a merge can be read back); every reader joins `entities` for
-- `merged_into IS NULL`. Deleting an entity deletes its vector.
CREATE TABLE entity_name_vectors (
    entity_id    uuid PRIMARY KEY REFERENCES entities (id) ON DELETE CASCADE,
    namespace_id uuid NOT NULL,
    embedding    vector({{NAME_EMBEDDING_DIM}}) NOT NULL
);

INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding)
SELECT id, namespace_id, embedding FROM entities WHERE embedding IS NOT NULL;

-- 0038's parameters: m 8 keeps recall@5 0.993 at ef_search 100 for half the insert time.
CREATE INDEX entity_name_vectors_embedding ON entity_name_vectors
    USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 64);

DROP INDEX IF EXISTS entities_embedding;
ALTER TABLE entities DROP COLUMN embedding;

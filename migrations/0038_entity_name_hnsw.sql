-- The name vectors' HNSW index with 8 links per node instead of 16 (issue 13: publish-to-indexed
-- at half load). Inserting each new entity's name vector was the largest single cost of
-- Postgres during a steady stream: on the 30-second static run at half load, the extraction
-- write-back's entity INSERT took 11.5 s of Postgres time (pg_stat_statements), and the relay's
-- reads waited behind it. Measured on the 3,294 name vectors of one SciFact namespace (inserted
-- into copies, 170 per statement; exact kNN as the truth, 400 queries):
--
--   m, ef_construction | insert s | recall@5 at ef_search 40 / 100 / 200
--   16, 64 (before)    |   4.91   | 1.000 / 1.000 / 1.000
--    8, 64 (now)       |   2.24   | 0.986 / 0.993 / 0.995
--    8, 32             |   1.92   | 0.944 / 0.973 / 0.983
--   12, 40             |   3.01   | 0.978 / 0.988 / 0.995
--
-- The resolver searches with ef_search 100 at least (pipeline/stores/postgres/resolution.py).
DROP INDEX IF EXISTS entities_embedding;
CREATE INDEX entities_embedding ON entities USING hnsw (embedding vector_cosine_ops)
    WITH (m = 8, ef_construction = 64);

-- Extensions the schema relies on: pgvector (dense vectors, HNSW), pg_trgm (near-spellings, codes),
-- btree_gin (mixed GIN indexes on namespace + properties).
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Facts about this database that the settings must agree with (the embedding dimension).
CREATE TABLE brainstream_meta (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO brainstream_meta (key, value) VALUES ('embedding_dim', '{{EMBEDDING_DIM}}');

-- Vectors are reused by (namespace, text hash, model key) (pipeline/embedding/reuse.py): a text a
-- model embedded once is not embedded again by it in the same namespace, by the write path, a
-- replay (which looks in the live generation's database too), `reembed` or the memory extractors.
-- Each vector stays on the row it belongs to, so a reuse index costs a few bytes a row, not a
-- second copy of the vector, and deleting the row (purge) deletes what could be reused.
--
-- `model` now holds the model key (`minilm:<digest of its identity>`); rows written before hold
-- the bare embedder name, which no key equals: they are never reused, and are re-embedded once
-- by the next replay or `reembed`.

-- objects: `embedded_hash` is the index text hash the vector was computed from
CREATE INDEX object_embeddings_reuse ON object_embeddings (namespace_id, embedded_hash)
    WHERE embedding IS NOT NULL;

-- messages: the hash of the dense text (the message with the turns before it) and the model key
ALTER TABLE messages ADD COLUMN embedded_hash text, ADD COLUMN model text;
CREATE INDEX messages_reuse ON messages (namespace_id, embedded_hash)
    WHERE embedding IS NOT NULL;

-- entity names: the hash of the name as embedded and the model key
ALTER TABLE entity_name_vectors ADD COLUMN name_hash text, ADD COLUMN model text;
CREATE INDEX entity_name_vectors_reuse ON entity_name_vectors (namespace_id, name_hash);

-- The dense channel walks the HNSW graph of searchable rows only (issue 40). An object with
-- visible parts is never searchable itself (its parts are), but its own row's vector (title,
-- summary, first 2,000 characters: what `similar_to` searches with) sat in the graph, and it is
-- close to queries by construction: a third of the nearest rows at 100k parts were such objects,
-- so every search's walk went on past them, twice the work of a walk that meets none (EXPLAIN:
-- 152 rows walked for 100, 3.8 ms of 4.1). The index now holds the rows without live parts;
-- `has_live_parts`, kept by the triggers below in the writing transaction, says which.

ALTER TABLE object_embeddings ADD COLUMN has_live_parts boolean NOT NULL DEFAULT false;

UPDATE object_embeddings e SET has_live_parts = true
WHERE e.root_id = e.id
  AND EXISTS (SELECT 1 FROM objects c WHERE c.parent_id = e.id AND c.deleted_at IS NULL);

DROP INDEX object_embeddings_hnsw;
CREATE INDEX object_embeddings_hnsw ON object_embeddings USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE NOT has_live_parts;

-- Whether each of these objects has a part that is not deleted, written where it changed.
CREATE FUNCTION brainstream_live_parts(parents uuid[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE object_embeddings e SET has_live_parts = x.live
    FROM (SELECT p.id, EXISTS (SELECT 1 FROM objects c
                               WHERE c.parent_id = p.id AND c.deleted_at IS NULL) AS live
          FROM unnest(parents) AS p(id)) AS x
    WHERE e.id = x.id AND e.has_live_parts IS DISTINCT FROM x.live
$$;

-- A new object's row says at once whether it has live parts: a put writes an object and its
-- parts in one statement, so its row is written once, never updated to say so (an update of the
-- flag is not HOT: it is the index's predicate).
CREATE OR REPLACE FUNCTION brainstream_embedding_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO object_embeddings (id, namespace_id, root_id, index_text_hash, has_live_parts)
    SELECT n.id, n.namespace_id, coalesce(n.parent_id, n.id), n.index_text_hash,
           CASE WHEN n.parent_id IS NULL THEN EXISTS (
               SELECT 1 FROM objects c WHERE c.parent_id = n.id AND c.deleted_at IS NULL)
           ELSE false END
    FROM new_rows n;
    RETURN NULL;
END
$$;

-- New parts of an object written before: it has live parts now. Named to run after
-- `objects_embedding_insert` (statement triggers of one event run by name).
CREATE FUNCTION brainstream_live_parts_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM brainstream_live_parts(array_agg(DISTINCT parent_id)) FROM new_rows
    WHERE parent_id IS NOT NULL AND deleted_at IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_embedding_parts_insert AFTER INSERT ON objects
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_live_parts_new();

-- A part deleted or revived (soft), or moved: its parents again.
CREATE FUNCTION brainstream_live_parts_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM brainstream_live_parts(array_remove(ARRAY[OLD.parent_id, NEW.parent_id], NULL));
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_embedding_parts_update AFTER UPDATE OF deleted_at, parent_id ON objects
    FOR EACH ROW WHEN ((OLD.parent_id IS NOT NULL OR NEW.parent_id IS NOT NULL)
                       AND ((OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL)
                            OR OLD.parent_id IS DISTINCT FROM NEW.parent_id))
    EXECUTE FUNCTION brainstream_live_parts_changed();

-- Parts deleted for good (a shortened document's chunks, a purge): their parents again.
CREATE FUNCTION brainstream_live_parts_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM brainstream_live_parts(array_agg(DISTINCT parent_id)) FROM old_rows
    WHERE parent_id IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_embedding_parts_delete AFTER DELETE ON objects
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_live_parts_gone();

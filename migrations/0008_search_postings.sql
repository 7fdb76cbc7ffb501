-- BM25 postings: one row per (searchable row, lexeme) with the term frequency and the row's
-- length, kept by triggers in the writing transaction. The lexical channel sums BM25 over the
-- postings of the query terms (index-only scans) instead of reading each matching row's tsvector
-- from the heap: at 100k parts a query with common words matched tens of thousands of rows, and
-- reading them cost 0.3-2 s. Document frequency is a count over the same postings.
--
-- A row has postings exactly while it is searchable: visible, and either a part (of a visible
-- parent in its namespace) or a first-class object without visible parts. A trigger keeps that
-- true when a row's text or visibility changes, and re-syncs the parent when one of its parts
-- appears, disappears or changes visibility. Each row's postings have their own keys, so
-- concurrent writers never wait on each other here.

CREATE TABLE search_postings (
    namespace_id uuid     NOT NULL,
    lexeme       text     NOT NULL,
    row_id       uuid     NOT NULL,
    tf           smallint NOT NULL,
    doc_len      integer  NOT NULL,
    PRIMARY KEY (namespace_id, lexeme, row_id) INCLUDE (tf, doc_len)
);

CREATE FUNCTION brainstream_searchable(r objects) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT r.deleted_at IS NULL AND CASE
        WHEN r.parent_id IS NOT NULL THEN EXISTS (
            SELECT 1 FROM objects p WHERE p.id = r.parent_id
              AND p.namespace_id = r.namespace_id AND p.deleted_at IS NULL)
        ELSE NOT EXISTS (
            SELECT 1 FROM objects c WHERE c.parent_id = r.id
              AND c.namespace_id = r.namespace_id AND c.deleted_at IS NULL)
    END
$$;

-- Drop the postings `r` may have (by its lexemes: the primary key finds them), then add them
-- back when it is searchable now.
CREATE FUNCTION brainstream_postings_sync(old_row objects, new_row objects) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF old_row.id IS NOT NULL THEN
        DELETE FROM search_postings
        WHERE namespace_id = old_row.namespace_id
          AND lexeme = ANY(tsvector_to_array(old_row.lexical)) AND row_id = old_row.id;
    END IF;
    IF new_row.id IS NOT NULL AND brainstream_searchable(new_row) THEN
        INSERT INTO search_postings (namespace_id, lexeme, row_id, tf, doc_len)
        SELECT new_row.namespace_id, u.lexeme, new_row.id,
               least(coalesce(array_length(u.positions, 1), 1), 32767), new_row.doc_len
        FROM unnest(new_row.lexical) AS u
        ON CONFLICT DO NOTHING;
    END IF;
END
$$;

CREATE FUNCTION brainstream_postings_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    parent objects;
    parent_key uuid;
BEGIN
    -- new text for the vocabulary (pipeline.vocab moves it in)
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND OLD.lexical IS DISTINCT FROM NEW.lexical) THEN
        INSERT INTO search_vocab_pending (row_id) VALUES (NEW.id);
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM brainstream_postings_sync(NULL, NEW);
        parent_key := NEW.parent_id;
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM brainstream_postings_sync(OLD, NEW);
        parent_key := coalesce(NEW.parent_id, OLD.parent_id);
        IF OLD.parent_id IS DISTINCT FROM NEW.parent_id AND OLD.parent_id IS NOT NULL THEN
            SELECT * INTO parent FROM objects WHERE id = OLD.parent_id;
            IF FOUND THEN PERFORM brainstream_postings_sync(parent, parent); END IF;
        END IF;
    ELSE
        PERFORM brainstream_postings_sync(OLD, NULL);
        parent_key := OLD.parent_id;
    END IF;
    IF parent_key IS NOT NULL AND (TG_OP <> 'UPDATE'
            OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at
            OR OLD.parent_id IS DISTINCT FROM NEW.parent_id) THEN
        SELECT * INTO parent FROM objects WHERE id = parent_key;
        IF FOUND THEN PERFORM brainstream_postings_sync(parent, parent); END IF;
    END IF;
    -- a first-class object's parts follow its visibility
    IF TG_OP = 'UPDATE' AND NEW.parent_id IS NULL
            AND OLD.deleted_at IS DISTINCT FROM NEW.deleted_at THEN
        PERFORM brainstream_postings_sync(c, c) FROM objects c WHERE c.parent_id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_postings_insert AFTER INSERT ON objects
    FOR EACH ROW EXECUTE FUNCTION brainstream_postings_trigger();
CREATE TRIGGER objects_postings_delete AFTER DELETE ON objects
    FOR EACH ROW EXECUTE FUNCTION brainstream_postings_trigger();
CREATE TRIGGER objects_postings_update AFTER UPDATE ON objects
    FOR EACH ROW WHEN (OLD.lexical IS DISTINCT FROM NEW.lexical
                       OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at
                       OR OLD.parent_id IS DISTINCT FROM NEW.parent_id
                       OR OLD.namespace_id IS DISTINCT FROM NEW.namespace_id)
    EXECUTE FUNCTION brainstream_postings_trigger();

-- Backfill: the rows searchable now.
INSERT INTO search_postings (namespace_id, lexeme, row_id, tf, doc_len)
SELECT o.namespace_id, u.lexeme, o.id, least(coalesce(array_length(u.positions, 1), 1), 32767),
       o.doc_len
FROM objects o, unnest(o.lexical) AS u
WHERE brainstream_searchable(o);

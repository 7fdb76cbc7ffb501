-- One row's BM25 postings, written once. Until now the SQL that turns a row into its postings
-- stood in four places (the trigger's sync and the backfill in 0008, the benchmark's bulk
-- rebuild, the recovery recipe in docs/operations.md); now the trigger, the benchmark and the
-- recipe all call `brainstream_row_postings`, and a bulk rebuild is `brainstream_rebuild_postings`.
--
-- 0008 itself stays as it was: applied migrations are checksummed (pipeline/ops/migrations.py),
-- so editing that file would make every existing database refuse to migrate. Its backfill ran
-- once and keeps its own copy; the functions it defined are replaced here.

-- The postings of `r` as it is, searchable or not (the callers decide): one per lexeme, tf = the
-- number of its positions (a lexeme stored without positions counts once; capped to fit smallint).
-- LANGUAGE sql, IMMUTABLE (it reads nothing but its argument) and not STRICT: the planner inlines
-- it into the calling query, so a bulk rebuild costs what the hand-written join cost.
CREATE FUNCTION brainstream_row_postings(r objects) RETURNS SETOF search_postings
LANGUAGE sql IMMUTABLE AS $$
    SELECT r.namespace_id, u.lexeme, r.id,
           least(coalesce(array_length(u.positions, 1), 1), 32767)::smallint, r.doc_len
    FROM unnest(r.lexical) AS u
$$;

-- Drop the postings `r` may have (by its lexemes: the primary key finds them), then add them
-- back when it is searchable now. Same behaviour as in 0008, the insert through the function.
CREATE OR REPLACE FUNCTION brainstream_postings_sync(old_row objects, new_row objects)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF old_row.id IS NOT NULL THEN
        DELETE FROM search_postings
        WHERE namespace_id = old_row.namespace_id
          AND lexeme = ANY(tsvector_to_array(old_row.lexical)) AND row_id = old_row.id;
    END IF;
    IF new_row.id IS NOT NULL AND brainstream_searchable(new_row) THEN
        INSERT INTO search_postings (namespace_id, lexeme, row_id, tf, doc_len)
        SELECT p.namespace_id, p.lexeme, p.row_id, p.tf, p.doc_len
        FROM brainstream_row_postings(new_row) AS p
        ON CONFLICT DO NOTHING;
    END IF;
END
$$;

-- Rebuild the postings of one namespace (or of all, when `ns` is NULL) from the rows searchable
-- now: after a bulk load that bypassed the trigger, or to repair drift. Returns the number of
-- postings inserted. The SHARE ROW EXCLUSIVE lock lets searches read the old postings meanwhile
-- but holds writers' triggers until the rebuild commits, so no write slips between the delete
-- and the insert (a writer that went first is waited for, one that comes later re-syncs its row
-- on top of the rebuilt postings).
CREATE FUNCTION brainstream_rebuild_postings(ns uuid DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    inserted bigint;
BEGIN
    LOCK TABLE search_postings IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM search_postings WHERE ns IS NULL OR namespace_id = ns;
    INSERT INTO search_postings (namespace_id, lexeme, row_id, tf, doc_len)
    SELECT p.namespace_id, p.lexeme, p.row_id, p.tf, p.doc_len
    FROM objects o, brainstream_row_postings(o) AS p
    WHERE (ns IS NULL OR o.namespace_id = ns) AND brainstream_searchable(o);
    GET DIAGNOSTICS inserted = ROW_COUNT;
    RETURN inserted;
END
$$;

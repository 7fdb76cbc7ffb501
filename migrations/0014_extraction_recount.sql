-- What the extraction stage (pipeline/entities/stage.py) needs beyond 0012: an entity's
-- `part_count` and its co-occurrence weights count LIVE rows only, so they must be recomputed
-- when a row is soft-deleted or revived (its text did not change: 0012's trigger does not fire)
-- and when a row is hard-deleted (stale chunks of a shorter put, purge), which cascades its
-- mentions away. The stage does the recount; these triggers only record that one is due.

-- A soft-deleted or revived row: its mentions stay, but what they count for changed.
ALTER TABLE entity_extraction ADD COLUMN recount boolean NOT NULL DEFAULT false;
-- How many triples the row's last extraction stated: re-extracting it must withdraw them from
-- the RELATES edges' evidence, and the common case (none) then skips that scan.
ALTER TABLE entity_extraction ADD COLUMN triples integer NOT NULL DEFAULT 0;

CREATE INDEX entity_extraction_recount ON entity_extraction (row_id) WHERE recount;

CREATE FUNCTION brainstream_extraction_recount() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE entity_extraction SET recount = true
    WHERE row_id = NEW.id AND NOT recount AND extracted_hash IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_extraction_recount
    AFTER UPDATE OF deleted_at ON objects
    FOR EACH ROW WHEN (OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
    EXECUTE FUNCTION brainstream_extraction_recount();

-- A hard-deleted row's former mentions, per entity with their count (the stage ranks a row's
-- entities by it to pick the ones that count for co-occurrence), until the stage recounts the
-- entities and pairs they touched. No foreign keys: the row and maybe its root are gone.
CREATE TABLE entity_recount (
    row_id       uuid NOT NULL,
    root_id      uuid NOT NULL,
    namespace_id uuid NOT NULL,
    entity_id    uuid NOT NULL,
    mentions     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (row_id, entity_id)
);

CREATE FUNCTION brainstream_mentions_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_recount (row_id, root_id, namespace_id, entity_id, mentions)
    SELECT OLD.id, coalesce(OLD.parent_id, OLD.id), OLD.namespace_id, m.entity_id, count(*)
    FROM mentions m WHERE m.row_id = OLD.id
    GROUP BY m.entity_id
    ON CONFLICT (row_id, entity_id) DO NOTHING;
    RETURN OLD;
END
$$;

-- BEFORE: the mentions are still there to read (the foreign key's cascade removes them after).
CREATE TRIGGER objects_mentions_gone
    BEFORE DELETE ON objects
    FOR EACH ROW EXECUTE FUNCTION brainstream_mentions_gone();

-- 0012's trigger leaves `text_hash` alone when the new hash equals the extracted one: a row
-- whose text changed and then changed back before the stage ran kept the intermediate hash and
-- status pending, so the stage's compare-and-set (text_hash = the hash it read) never matched
-- and the row stayed pending forever. Now the hash always follows the row, and a text that is
-- back to what the mentions reflect is done without extracting it again. As before, a re-put
-- of the text the mentions reflect changes nothing, and one of a failed row's text retries it.
CREATE OR REPLACE FUNCTION brainstream_extraction_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_extraction (row_id, namespace_id, root_id, text_hash, status)
    VALUES (NEW.id, NEW.namespace_id, coalesce(NEW.parent_id, NEW.id), NEW.index_text_hash,
            'pending')
    ON CONFLICT (row_id) DO UPDATE
        SET text_hash = EXCLUDED.text_hash,
            status = CASE WHEN entity_extraction.extracted_hash IS NOT DISTINCT FROM
                                   EXCLUDED.text_hash THEN 'done' ELSE 'pending' END,
            attempts = 0, error = NULL, updated_at = now()
        WHERE entity_extraction.extracted_hash IS DISTINCT FROM EXCLUDED.text_hash
           OR entity_extraction.text_hash IS DISTINCT FROM EXCLUDED.text_hash;
    RETURN NULL;
END
$$;

-- Caller-supplied structure (an object put's `entities` and `relations`) and RELATES facts over
-- time.
--
-- `row_structure`: what a put says each of its rows (the object, the parts its content is cut
-- into, or an explicit part) mentions and states, as pipeline/domain/structure.py places it. A row
-- with one is extracted from it instead of by the extractor. Its digest is part of the row's
-- extraction hash (`brainstream_extraction_hash`), so a put that changes only the structure makes
-- the row pending, and the stage's compare-and-set covers both. The put writes it before the
-- object rows (the trigger reads it), hence the deferred foreign key.
CREATE TABLE row_structure (
    row_id       uuid PRIMARY KEY REFERENCES objects (id) ON DELETE CASCADE
                 DEFERRABLE INITIALLY DEFERRED,
    namespace_id uuid NOT NULL,
    structure    jsonb NOT NULL,
    digest       text NOT NULL
);

CREATE FUNCTION brainstream_extraction_hash(row_id uuid, index_text_hash text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT index_text_hash || coalesce('+' || (SELECT s.digest FROM row_structure s
                                               WHERE s.row_id = $1), '')
$$;

CREATE OR REPLACE FUNCTION brainstream_extraction_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_extraction (row_id, namespace_id, root_id, text_hash, status)
    VALUES (NEW.id, NEW.namespace_id, coalesce(NEW.parent_id, NEW.id),
            brainstream_extraction_hash(NEW.id, NEW.index_text_hash), 'pending')
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

-- RELATES facts a put states, with time. One row per stated fact: (subject, predicate, object)
-- stated by `row_id`, holding in the world from `valid_from` (NULL: always) until `valid_to`
-- (NULL: still), believed from `recorded_at` (the put's record time, so a replay writes the same)
-- until `invalidated_at` (a put of the same object that no longer states it, or its deletion).
-- Never updated otherwise: a changed fact is a new row. The write path names the entities by
-- (name, label); the extraction stage fills `subject_id` / `object_id` when it resolves them (a
-- merge moves them to the survivor). A predicate the catalog (`relation_types`) marks functional
-- holds one object per subject at a time: a later `valid_from` cuts the earlier fact there, at
-- read time, so any arrival order gives the same timeline.
CREATE TABLE entity_facts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace_id   uuid NOT NULL,
    root_id        uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE
                   DEFERRABLE INITIALLY DEFERRED,
    put_id         uuid NOT NULL,  -- the object the put wrote: the root, or an explicit part
    row_id         uuid NOT NULL,  -- the stating row (a part cut again later may be gone)
    subject_name   text NOT NULL,
    subject_label  text NOT NULL,
    predicate      text NOT NULL,  -- normalised, as RELATES edges
    object_name    text NOT NULL,
    object_label   text NOT NULL,
    subject_id     uuid,
    object_id      uuid,
    valid_from     timestamptz,
    valid_to       timestamptz,
    recorded_at    timestamptz NOT NULL,
    recorded_by    text NOT NULL,
    invalidated_at timestamptz,
    invalidated_by text,
    CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to > valid_from),
    CHECK ((invalidated_at IS NULL) = (invalidated_by IS NULL))
);

CREATE INDEX entity_facts_put ON entity_facts (put_id) WHERE invalidated_at IS NULL;
CREATE INDEX entity_facts_row ON entity_facts (row_id);
CREATE INDEX entity_facts_subject ON entity_facts (namespace_id, subject_id, predicate);
CREATE INDEX entity_facts_object ON entity_facts (namespace_id, object_id);
CREATE INDEX entity_facts_root ON entity_facts (root_id);

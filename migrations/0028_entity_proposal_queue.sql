-- The proposal pass's queue (pipeline/entities/merging.py): the live entities it has not
-- examined yet. It replaces 0013's `entities.proposed_at` and its partial index
-- `entities_unproposed`: marking a new entity examined was an update of a column that index's
-- predicate named, so a non-HOT update that re-inserted the entity into every index of
-- `entities` (the HNSW index of name vectors and two trigram GIN indexes among them). The pass
-- now deletes the entity's queue row and leaves the entity's row alone.
CREATE TABLE entity_proposal_queue (
    entity_id    uuid PRIMARY KEY REFERENCES entities (id) ON DELETE CASCADE,
    namespace_id uuid NOT NULL,
    created_at   timestamptz NOT NULL
);

-- Every writer of entities fills the queue (extraction's write-back, tests, benchmarks), in the
-- transaction that creates them: an entity is never created without its pass being due.
-- Entities inserted already merged are not queued.
CREATE FUNCTION brainstream_queue_proposals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_proposal_queue (entity_id, namespace_id, created_at)
    SELECT id, namespace_id, created_at FROM new_entities WHERE merged_into IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER entities_queue_proposals AFTER INSERT ON entities
    REFERENCING NEW TABLE AS new_entities
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_queue_proposals();

INSERT INTO entity_proposal_queue (entity_id, namespace_id, created_at)
SELECT id, namespace_id, created_at FROM entities
WHERE proposed_at IS NULL AND merged_into IS NULL;

DROP INDEX entities_unproposed;
ALTER TABLE entities DROP COLUMN proposed_at;

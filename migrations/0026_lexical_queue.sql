-- The lexical index's queue (pipeline/lexical/): the roots whose Tantivy documents must be
-- re-synced, enqueued in the writing transaction by statement triggers on `objects`, so a row is
-- queued exactly when it commits (at the consumer's commit, not after embedding) and by every
-- path that writes rows (puts, deletes, purges, tenant moves, bulk loads). A row names a root
-- (an object without parent: the aggregate whose parts, or itself, are the searchable rows), not
-- a delta: the writer re-reads the root's current state, so applying it twice changes nothing.
-- The writer deletes the rows it applied after its index commit; this table holds only work.
-- Apart from `outbox` so the graph's relay, its backlog and its tests never see these rows.

CREATE TABLE lexical_queue (
    id           bigserial   PRIMARY KEY,
    namespace_id uuid        NOT NULL,
    root_id      uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per (namespace, root) a statement touched: a put of 50 parts is one row, not 51.
CREATE FUNCTION brainstream_lexical_enqueue_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_queue (namespace_id, root_id)
    SELECT DISTINCT namespace_id, coalesce(parent_id, id) FROM new_rows;
    RETURN NULL;
END
$$;

CREATE FUNCTION brainstream_lexical_enqueue_old() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_queue (namespace_id, root_id)
    SELECT DISTINCT namespace_id, coalesce(parent_id, id) FROM old_rows;
    RETURN NULL;
END
$$;

-- An update matters when what the index holds changed: the analysed text, visibility, the
-- owner, or what filters judge (the promoted object's kind, title, times, properties). An
-- embedding written back changes none of these and queues nothing.
CREATE FUNCTION brainstream_lexical_enqueue_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_queue (namespace_id, root_id)
    SELECT DISTINCT r.namespace_id, r.root
    FROM old_rows o JOIN new_rows n ON n.id = o.id,
         LATERAL (VALUES (o.namespace_id, coalesce(o.parent_id, o.id)),
                         (n.namespace_id, coalesce(n.parent_id, n.id))) AS r(namespace_id, root)
    WHERE o.lexical IS DISTINCT FROM n.lexical
       OR o.deleted_at IS DISTINCT FROM n.deleted_at
       OR o.parent_id IS DISTINCT FROM n.parent_id
       OR o.namespace_id IS DISTINCT FROM n.namespace_id
       OR o.kind IS DISTINCT FROM n.kind
       OR o.title IS DISTINCT FROM n.title
       OR o.content IS DISTINCT FROM n.content
       OR o.properties IS DISTINCT FROM n.properties
       OR o.created_at IS DISTINCT FROM n.created_at
       OR o.updated_at IS DISTINCT FROM n.updated_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_lexical_insert AFTER INSERT ON objects
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_lexical_enqueue_new();
CREATE TRIGGER objects_lexical_delete AFTER DELETE ON objects
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_lexical_enqueue_old();
CREATE TRIGGER objects_lexical_update AFTER UPDATE ON objects
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_lexical_enqueue_changed();

-- Backfill: every root there is now, so an index built after this migration holds the rows
-- written before it.
INSERT INTO lexical_queue (namespace_id, root_id)
SELECT namespace_id, id FROM objects WHERE parent_id IS NULL;

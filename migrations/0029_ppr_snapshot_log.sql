-- The change log the API processes' in-memory PPR snapshots tail (pipeline/retrieval/
-- ppr_snapshots.py): which keys of the walked entity layer a committed statement touched, so a
-- snapshot re-reads only those (never the namespace) to stay fresh. Filled by statement-level
-- triggers (one log row per statement and namespace, whatever the writer: extraction's
-- write-back, merges, decisions, deletes, tests, benchmarks); pruned by the sweep.
--
-- kind: 'row'    mentions of these rows changed (insert, delete, a merge moving them);
--       'object' these objects' deleted state changed, or they were deleted (their parts' too);
--       'entity' these entities were created or their part_count / merged_into changed;
--       'edge'   walkable edges (RELATES, POSSIBLY_SAME) touching these entities changed;
--       'truncate' one of those tables was truncated (namespace_id nil, ids empty): every
--                snapshot is dropped and built again.
-- xid: the writing transaction. A reader that saw the log in a snapshot whose xmin was X has
-- seen every row of a transaction below X (finished then); rows it did not see have xid >= X,
-- whatever their commit order (seq alone cannot say: a lower seq may commit later).
CREATE TABLE ppr_snapshot_log (
    seq          bigserial PRIMARY KEY,
    xid          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    namespace_id uuid NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('row', 'object', 'entity', 'edge', 'truncate')),
    ids          uuid[] NOT NULL,
    logged_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX ppr_snapshot_log_xid ON ppr_snapshot_log (xid);

-- The sweep's record of the oldest running transaction over time: the log is pruned below the
-- xmin it saw at least the retention ago, so a pruned row was visible to every reader for that
-- long (a reader that has not read for longer rebuilds instead).
CREATE TABLE ppr_snapshot_horizons (
    observed_at  timestamptz PRIMARY KEY,
    horizon      xid8 NOT NULL   -- the oldest running transaction then
);

CREATE FUNCTION brainstream_log_mentions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'row', array_agg(DISTINCT row_id) FROM new_mentions
        GROUP BY namespace_id;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'row', array_agg(DISTINCT row_id) FROM old_mentions
        GROUP BY namespace_id;
    ELSE
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'row', array_agg(DISTINCT row_id)
        FROM (SELECT namespace_id, row_id FROM new_mentions
              UNION SELECT namespace_id, row_id FROM old_mentions) AS m
        GROUP BY namespace_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER mentions_log_insert AFTER INSERT ON mentions
    REFERENCING NEW TABLE AS new_mentions
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_mentions();
CREATE TRIGGER mentions_log_delete AFTER DELETE ON mentions
    REFERENCING OLD TABLE AS old_mentions
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_mentions();
CREATE TRIGGER mentions_log_update AFTER UPDATE ON mentions
    REFERENCING OLD TABLE AS old_mentions NEW TABLE AS new_mentions
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_mentions();

-- Only a change of the deleted state (or parent) matters to the walk. A row trigger with a column
-- list: the write path's other updates of objects (embeddings, index text) do not fire it at all,
-- where a statement trigger would copy every updated row (vectors included) into transition
-- tables. Hard deletes (a shortened document's chunks) log once per statement.
CREATE FUNCTION brainstream_log_object() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
    VALUES (NEW.namespace_id, 'object', ARRAY[NEW.id]);
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_log_update AFTER UPDATE OF deleted_at, parent_id ON objects
    FOR EACH ROW WHEN ((OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL)
                       OR OLD.parent_id IS DISTINCT FROM NEW.parent_id)
    EXECUTE FUNCTION brainstream_log_object();

CREATE FUNCTION brainstream_log_objects_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
    SELECT namespace_id, 'object', array_agg(id) FROM old_objects GROUP BY namespace_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER objects_log_delete AFTER DELETE ON objects
    REFERENCING OLD TABLE AS old_objects
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_objects_deleted();

CREATE FUNCTION brainstream_log_entities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'entity', array_agg(id) FROM new_entities GROUP BY namespace_id;
    ELSE
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT n.namespace_id, 'entity', array_agg(n.id)
        FROM new_entities n JOIN old_entities o ON o.id = n.id
        WHERE n.part_count <> o.part_count OR n.merged_into IS DISTINCT FROM o.merged_into
        GROUP BY n.namespace_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER entities_log_insert AFTER INSERT ON entities
    REFERENCING NEW TABLE AS new_entities
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_entities();
CREATE TRIGGER entities_log_update AFTER UPDATE ON entities
    REFERENCING OLD TABLE AS old_entities NEW TABLE AS new_entities
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_entities();

-- CO_OCCURS edges (recounted by every write-back) are never walked: they log nothing.
CREATE FUNCTION brainstream_log_edges() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'edge', array_agg(DISTINCT e)
        FROM new_edges, LATERAL (VALUES (from_id), (to_id)) AS v(e)
        WHERE edge_type <> 'CO_OCCURS' GROUP BY namespace_id;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'edge', array_agg(DISTINCT e)
        FROM old_edges, LATERAL (VALUES (from_id), (to_id)) AS v(e)
        WHERE edge_type <> 'CO_OCCURS' GROUP BY namespace_id;
    ELSE
        INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
        SELECT namespace_id, 'edge', array_agg(DISTINCT e)
        FROM (SELECT * FROM new_edges UNION ALL SELECT * FROM old_edges) AS x,
             LATERAL (VALUES (from_id), (to_id)) AS v(e)
        WHERE edge_type <> 'CO_OCCURS' GROUP BY namespace_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER entity_edges_log_insert AFTER INSERT ON entity_edges
    REFERENCING NEW TABLE AS new_edges
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_edges();
CREATE TRIGGER entity_edges_log_delete AFTER DELETE ON entity_edges
    REFERENCING OLD TABLE AS old_edges
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_edges();
CREATE TRIGGER entity_edges_log_update AFTER UPDATE ON entity_edges
    REFERENCING OLD TABLE AS old_edges NEW TABLE AS new_edges
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_edges();

CREATE FUNCTION brainstream_log_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)
    VALUES ('00000000-0000-0000-0000-000000000000', 'truncate', '{}');
    RETURN NULL;
END
$$;

CREATE TRIGGER mentions_log_truncate AFTER TRUNCATE ON mentions
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_truncate();
CREATE TRIGGER objects_log_truncate AFTER TRUNCATE ON objects
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_truncate();
CREATE TRIGGER entities_log_truncate AFTER TRUNCATE ON entities
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_truncate();
CREATE TRIGGER entity_edges_log_truncate AFTER TRUNCATE ON entity_edges
    FOR EACH STATEMENT EXECUTE FUNCTION brainstream_log_truncate();

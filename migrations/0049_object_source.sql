-- The CloudEvents `source` of the put that last wrote a row (pipeline/ingest/objects.py), so an
-- operator can soft-delete every object one publisher put (`brainstream.objects.soft_delete`,
-- pipeline/ingest/deletes.py). A re-put by another publisher takes the object over.
ALTER TABLE objects ADD COLUMN source text;

-- Rows written before: a first-class object takes the source of the ledger's put of the event
-- that last wrote it, when exactly one source sent an event of that id in its namespace (event
-- ids are unique per source only). Others (the ledger does not say, or says two) keep NULL: no
-- delete by source matches them until they are put again or a replay rewrites them (a replay
-- applies every put, with its source). Parts are never matched by source: they go with their
-- parent.
UPDATE objects o SET source = pe.source
FROM (SELECT namespace_id, event_id, min(source) AS source FROM processed_events
      WHERE event_type = 'brainstream.object.put'
      GROUP BY namespace_id, event_id HAVING count(*) = 1) pe
WHERE o.parent_id IS NULL AND o.namespace_id = pe.namespace_id AND o.event_id = pe.event_id;

-- A delete by source finds the live first-class objects of one publisher, at most a cap at a
-- time, without reading the namespace's other objects.
CREATE INDEX objects_ns_source ON objects (namespace_id, source, id)
    WHERE parent_id IS NULL AND deleted_at IS NULL;

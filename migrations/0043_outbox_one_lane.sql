-- The graph no longer holds the entity layer (docs/architecture.md, "The graph holds objects and
-- links"): nothing enqueues `entity_sync` or `mentions_sync` rows, so the relay has one lane.
-- Their pending rows are discarded (marked done unapplied, as the relay marks one a worker of an
-- older version enqueues during an upgrade; `brainstream purge` deletes them with the other done
-- rows), and the two lane indexes of 0040 become one index of the due rows, walked in id order by
-- the one claim (pipeline/outbox/store.py: claim_due). `brainstream migrate` also deletes the
-- NamedEntity nodes and their edges from every generation's graph (prepare_graph).
UPDATE outbox SET done_at = now()
    WHERE done_at IS NULL AND op IN ('entity_sync', 'mentions_sync');
DROP INDEX IF EXISTS outbox_due_objects;
DROP INDEX IF EXISTS outbox_due_others;
CREATE INDEX outbox_due ON outbox (id) WHERE done_at IS NULL AND failed_at IS NULL;

-- Each relay lane claims its oldest due rows by walking an index of its own rows in id order
-- (pipeline/outbox/store.py: claim_due). `outbox_pending` was on (available_at, id) for every
-- op: a claim ordered by id with its lane as a filter read every due row of both lanes and
-- sorted them, so a backlog of the entity lane (7-8 entity syncs per document) was scanned on
-- each claim of the object lane. In bench/ingest.py's half-load phase the claim took 13 ms a
-- call (442 calls, 5.8 s of Postgres), the second statement of the phase. Each row is in one
-- of the two indexes, as it was in the one before; the backlog counts read `outbox_aggregate`.
DROP INDEX IF EXISTS outbox_pending;
CREATE INDEX outbox_due_objects ON outbox (id)
    WHERE done_at IS NULL AND failed_at IS NULL AND op IN ('node_sync', 'edge_sync');
CREATE INDEX outbox_due_others ON outbox (id)
    WHERE done_at IS NULL AND failed_at IS NULL AND op NOT IN ('node_sync', 'edge_sync');

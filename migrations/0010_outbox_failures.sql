-- The outbox gets what the embedding queue has: a row the graph keeps refusing (not an outage:
-- the row's own fault) counts `failures`, is tried again with back-off, and after
-- BRAINSTREAM_RELAY_MAX_ATTEMPTS is `failed` (failed_at) and dead-lettered with its reason, so
-- the rows behind it keep flowing. `brainstream dlq retry` re-queues it.
ALTER TABLE outbox ADD COLUMN failures integer NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN failed_at timestamptz;

-- The relay claims rows neither done nor failed.
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox (available_at, id) WHERE done_at IS NULL AND failed_at IS NULL;

-- A deferred event keeps its record's time, so when it applies later its writes (and the link
-- versions it records, migration 0050) are stamped with the time it was published at, as when a
-- replay applies it at once: the history comes out the same. NULL: a record without a time (and
-- the rows parked before this column), applied at the transaction's time as before.
ALTER TABLE deferred_events ADD COLUMN record_time timestamptz;

-- A link's id (pipeline/domain/links.py: a name-based UUID of from, type and to), so
-- `GET /v1/links/{link_id}/history` finds the link by an index. The write path sets it on every
-- link event; a link last written before is found by `GET /v1/links/history?from=&type=&to=`
-- until its next event (Postgres computes no name-based UUID without an extension).
ALTER TABLE links ADD COLUMN link_id uuid;
CREATE UNIQUE INDEX links_link_id ON links (link_id);

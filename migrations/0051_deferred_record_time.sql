-- A deferred event keeps its record's time, so when it applies later its writes (and the link
-- versions it records, migration 0050) are stamped with the time it was published at, as when a
-- replay applies it at once: the history comes out the same. NULL: a record without a time (and
-- the rows parked before this column), applied at the transaction's time as before.
ALTER TABLE deferred_events ADD COLUMN record_time timestamptz;

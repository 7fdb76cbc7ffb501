"""The write path's SQL: the event store (one transaction per batch), the object upsert, the
processed-event ledger and the kind catalog."""

-- A `where` on properties judges promoted objects (never parts): its semi-join reads the
-- namespace's live roots (pipeline/retrieval/store/filters.py), a few thousand rows beside a
-- hundred thousand parts, which without this index are found by reading every row of the
-- namespace.
CREATE INDEX objects_ns_roots ON objects (namespace_id) WHERE parent_id IS NULL AND deleted_at IS NULL;

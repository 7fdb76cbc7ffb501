-- The lexical index becomes a replica per read host (pipeline/lexical/replica.py): the queue of
-- 0026 becomes a change log that every replica follows from its own cursor, so a row is no
-- longer deleted when one writer applied it, but pruned once every live replica passed it.
--
-- A replica cannot follow `id` order: ids are taken at insert and committed out of order, so a
-- follower reading "id > last" would skip a row whose transaction commits later with a smaller
-- id. Each row records its transaction's id instead (`xid`, the top-level transaction's even
-- inside a savepoint), and a follower applies only rows of transactions below the oldest one
-- still running (`pg_snapshot_xmin(pg_current_snapshot())`): that set is closed, no row can
-- join it later, so its cursor (xid, id) never skips one.

ALTER TABLE lexical_queue RENAME TO lexical_log;
ALTER SEQUENCE lexical_queue_id_seq RENAME TO lexical_log_id_seq;
ALTER INDEX lexical_queue_pkey RENAME TO lexical_log_pkey;
-- Rows queued before this migration: every replica builds itself from Postgres on its first
-- start (there is no replica state yet), which covers them.
TRUNCATE lexical_log;
ALTER TABLE lexical_log ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX lexical_log_cursor ON lexical_log (xid, id);

CREATE OR REPLACE FUNCTION brainstream_lexical_enqueue_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_log (namespace_id, root_id)
    SELECT DISTINCT namespace_id, coalesce(parent_id, id) FROM new_rows;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION brainstream_lexical_enqueue_old() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_log (namespace_id, root_id)
    SELECT DISTINCT namespace_id, coalesce(parent_id, id) FROM old_rows;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION brainstream_lexical_enqueue_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_log (namespace_id, root_id)
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

-- The replicas following this database's log: one row per host's data directory, its cursor
-- (every log row at or below it is in that replica's index) and when it last reported. The log
-- is pruned below the smallest cursor of the replicas seen lately; one that comes back after
-- its rows were pruned builds itself again from Postgres.
CREATE TABLE lexical_replicas (
    replica     text        PRIMARY KEY,
    host        text        NOT NULL,
    data_dir    text        NOT NULL,
    cursor_xid  xid8        NOT NULL,
    cursor_id   bigint      NOT NULL DEFAULT 0,
    built_at    timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- Where pruning stopped: rows below `below` are gone, so a replica whose cursor is below it
-- missed some and must build itself again. One row.
CREATE TABLE lexical_log_pruned (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    below xid8    NOT NULL DEFAULT '0'
);
INSERT INTO lexical_log_pruned DEFAULT VALUES;

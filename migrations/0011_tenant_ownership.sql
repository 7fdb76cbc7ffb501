-- What one tenant could do to another's data (issue 10, items 7 and 8).

-- Expand recipes per namespace. A row with a namespace is that tenant's, registered through the
-- API and seen by it alone; a row without one is an operator default, read-only to every tenant.
-- The recipes registered before this migration (by whichever key: nothing recorded whose) were
-- used by every tenant, so they become defaults: every tenant keeps seeing them, none can change
-- them any more.
ALTER TABLE expand_recipes ADD COLUMN namespace_id uuid;
ALTER TABLE expand_recipes DROP CONSTRAINT expand_recipes_pkey;
CREATE UNIQUE INDEX expand_recipes_default ON expand_recipes (name) WHERE namespace_id IS NULL;
CREATE UNIQUE INDEX expand_recipes_tenant ON expand_recipes (namespace_id, name)
    WHERE namespace_id IS NOT NULL;

-- Part rows taken over across namespaces. Before part ids were derived within the namespace, a
-- tenant could put an object under the id a part of another tenant's object would get; the
-- part's upsert then overwrote that row with the part's text and kept the squatter's namespace,
-- so the squatter's vocabulary (what the trigram channel matches query words against) learnt
-- the other tenant's words. A part always has its parent's
-- namespace (the write path checks it), so a part of another namespace than its parent's is such
-- a row: it goes back to its parent's namespace (its text is the parent's).
CREATE TEMP TABLE brainstream_taken_over AS
SELECT c.id, c.parent_id, c.namespace_id AS squatter, p.namespace_id AS owner
FROM objects c JOIN objects p ON p.id = c.parent_id
WHERE c.namespace_id <> p.namespace_id;

-- The postings trigger gives the row its postings in the owner's namespace.
UPDATE objects o SET namespace_id = t.owner
FROM brainstream_taken_over t WHERE o.id = t.id;

-- The parent's postings: whether it is searchable itself depends on its visible parts.
SELECT brainstream_postings_sync(p, p) FROM objects p
WHERE p.id IN (SELECT parent_id FROM brainstream_taken_over);

-- The owner's vocabulary gets the rows' words (the refresher moves them in); the squatter's
-- loses every word no row of its namespace holds any more.
INSERT INTO search_vocab_pending (row_id) SELECT id FROM brainstream_taken_over;
DELETE FROM search_vocab v
WHERE v.namespace_id IN (SELECT squatter FROM brainstream_taken_over)
  AND NOT EXISTS (SELECT 1 FROM search_postings s
                  WHERE s.namespace_id = v.namespace_id AND s.lexeme = v.lexeme);

-- The graph may still hold the row as the squatter's node (it was a first-class object before
-- it was overwritten): the relay re-syncs it, and a part has no node.
INSERT INTO outbox (namespace_id, aggregate_id, op)
SELECT owner, id, 'node_sync' FROM brainstream_taken_over;

DROP TABLE brainstream_taken_over;

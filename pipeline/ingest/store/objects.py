"""The write path's object upsert (`PgEventStore.upsert_objects`, ingest/store/events.py)."""

from __future__ import annotations

from pipeline.postgres.timing import EVENT_TIME

# All the rows of one put (or of a run of puts: pipeline/ingest/bulk.py) in one statement: one
# round trip, and the statement triggers on `objects` (the embedding rows, the lexical queue) run
# once per statement instead of once per row. The
# rows come as parallel arrays, inserted in their order; a put never holds one id twice (a
# statement cannot update a row twice). A row's `at` is its event's time when rows of several
# events go together; NULL: the event time set for the statement.
UPSERT_OBJECTS = f"""
INSERT INTO objects (id, namespace_id, kind, title, summary, properties, content, content_type,
                     parent_id, position, chunked, context_title, index_text_hash,
                     source_version, event_id, source, created_at, updated_at)
SELECT r.id, r.namespace_id, r.kind, r.title, r.summary, r.properties, r.content,
       r.content_type, r.parent_id, r.position, r.chunked, r.context_title, r.index_text_hash,
       r.source_version, r.event_id, r.source, coalesce(r.at, {EVENT_TIME}),
       coalesce(r.at, {EVENT_TIME})
FROM unnest(%(id)s::uuid[], %(namespace_id)s::uuid[], %(kind)s::text[], %(title)s::text[],
            %(summary)s::text[], %(properties)s::jsonb[], %(content)s::text[],
            %(content_type)s::text[], %(parent_id)s::uuid[], %(position)s::integer[],
            %(chunked)s::boolean[], %(context_title)s::text[], %(index_text_hash)s::text[],
            %(source_version)s::bigint[], %(event_id)s::text[], %(source)s::text[],
            %(at)s::timestamptz[])
     WITH ORDINALITY AS r(id, namespace_id, kind, title, summary, properties, content,
                          content_type, parent_id, position, chunked, context_title,
                          index_text_hash, source_version, event_id, source, at, n)
ORDER BY r.n
ON CONFLICT (id) DO UPDATE SET
    kind = EXCLUDED.kind, title = EXCLUDED.title, summary = EXCLUDED.summary,
    properties = EXCLUDED.properties, content = EXCLUDED.content,
    content_type = EXCLUDED.content_type, parent_id = EXCLUDED.parent_id,
    position = EXCLUDED.position, chunked = EXCLUDED.chunked,
    context_title = EXCLUDED.context_title,
    -- the embedding state follows in `object_embeddings` (migration 0033's trigger): an
    -- unchanged index text keeps its embedding, no re-embed
    index_text_hash = EXCLUDED.index_text_hash,
    source_version = coalesce(EXCLUDED.source_version, objects.source_version),
    event_id = EXCLUDED.event_id,
    source = EXCLUDED.source,
    updated_at = EXCLUDED.updated_at,
    deleted_at = NULL
-- a row of another namespace is never taken over: it is left as it is and its id not returned
WHERE objects.namespace_id = EXCLUDED.namespace_id
RETURNING id
"""

OBJECT_COLUMNS = ("id", "namespace_id", "kind", "title", "summary", "properties", "content",
                   "content_type", "parent_id", "position", "chunked", "context_title",
                   "index_text_hash", "source_version", "event_id", "source", "at")

# A version of each object named (migration 0050's object_versions), as its row now is: after
# the put, delete or revival that changed it, stamped with the row's own time (`updated_at`, the
# event's), so a replay writes the same rows. Seqs go on per object; an object is named once.
RECORD_OBJECT_VERSIONS = """
INSERT INTO object_versions (object_id, seq, namespace_id, change, event_id, source,
                             event_version, kind, title, properties, index_text_hash,
                             recorded_at)
SELECT o.id, coalesce((SELECT max(v.seq) FROM object_versions v WHERE v.object_id = o.id), 0) + 1,
       o.namespace_id, e.change, e.event_id, o.source, e.version, o.kind, o.title, o.properties,
       o.index_text_hash, o.updated_at
FROM unnest(%(id)s::uuid[], %(change)s::text[], %(event)s::text[], %(version)s::bigint[])
     AS e(id, change, event_id, version)
JOIN objects o ON o.id = e.id
"""

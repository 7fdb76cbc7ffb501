-- Time and truth (issue 38): what held in the world when (valid time) and what the system believed
-- when (system time), for links, and the versions of every object.
--
-- A link's history is a list of versions. A version says "from `valid_from` (NULL: always) until
-- `valid_to` (NULL: still) the link held (`state` holds) with this `meta`", or, for a delete,
-- "from `valid_from` on it did not hold" (`state` ended, `valid_to` NULL). A version is believed
-- from `recorded_at` (the time of the event's record, so a replay writes the same times) until
-- `invalidated_at` (NULL: still believed), when an event changed what the system believes about
-- that stretch of time: a later put supersedes it, an earlier-dated put arriving late cuts it, a
-- delete ends it, a retraction withdraws it. A version is never updated except to set
-- `invalidated_at` / `invalidated_by`; the changed belief is a new version. Purge erases the rows
-- with their link (ON DELETE CASCADE from objects, as `links`).
--
-- The versions of one group are recomputed from its assertions (pipeline/domain/validity.py): a
-- relation type the catalog marks functional groups by (from_id, relation_type), at most one
-- target holding at any time; any other groups by the link (from_id, relation_type, to_id). One
-- group's events share a record key (the from id), so they are applied in one order everywhere.
-- `asserted_to` keeps the valid_to the event stated (the effective `valid_to` may be earlier: the
-- group's next assertion starts there), so a late assertion can recompute the group.
CREATE TABLE link_versions (
    namespace_id   uuid NOT NULL,
    from_id        uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    relation_type  text NOT NULL,
    to_id          uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    seq            integer NOT NULL CHECK (seq >= 1),   -- per link, in the order written
    state          text NOT NULL CHECK (state IN ('holds', 'ended')),
    meta           jsonb NOT NULL DEFAULT '{}'::jsonb,
    valid_from     timestamptz,
    valid_to       timestamptz,
    asserted_to    timestamptz,
    recorded_at    timestamptz NOT NULL,
    recorded_by    text NOT NULL,                        -- the event (source and id) that wrote it
    change         text NOT NULL CHECK (change IN ('put', 'delete', 'cut', 'retract', 'backfill')),
    invalidated_at timestamptz,
    invalidated_by text,
    PRIMARY KEY (from_id, relation_type, to_id, seq),
    CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to > valid_from),
    CHECK (state = 'holds' OR valid_to IS NULL),
    CHECK ((invalidated_at IS NULL) = (invalidated_by IS NULL))
);

-- As-of reads of what is believed now (the default `known_at`) from either end, and of what was
-- believed at an earlier time (every version of the node's links, by recorded time).
CREATE INDEX link_versions_from_now ON link_versions (from_id, relation_type)
    WHERE invalidated_at IS NULL AND state = 'holds';
CREATE INDEX link_versions_to_now ON link_versions (to_id, relation_type)
    WHERE invalidated_at IS NULL AND state = 'holds';
CREATE INDEX link_versions_to ON link_versions (to_id, relation_type);
CREATE INDEX link_versions_ns_type ON link_versions (namespace_id, relation_type);

-- Every link written before keeps one version: it held from always, until its deletion if it was
-- deleted, believed since it was written.
INSERT INTO link_versions (namespace_id, from_id, relation_type, to_id, seq, state, meta,
                           valid_from, valid_to, asserted_to, recorded_at, recorded_by, change)
SELECT namespace_id, from_id, relation_type, to_id, 1, 'holds', meta, NULL,
       CASE WHEN deleted_at > created_at THEN deleted_at END,
       CASE WHEN deleted_at > created_at THEN deleted_at END,
       created_at, coalesce(event_id, ''), 'backfill'
FROM links;

-- Relation types of the catalog (`relations:` in kinds.yaml, `brainstream kinds apply`): a
-- description, and whether the type is functional (one target per source at a time, e.g.
-- `ceo_of`, `located_in`). Global like `object_kinds`; an undeclared type is not functional.
CREATE TABLE relation_types (
    relation_type text PRIMARY KEY CHECK (relation_type ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'),
    spec          jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The versions of an object: one row per put or delete that changed it (a duplicate event, an
-- older version ignored, changes nothing), with the event that made it and what it said. Content
-- is not copied (the current row holds it); its hash says whether it changed.
CREATE TABLE object_versions (
    object_id       uuid NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    seq             integer NOT NULL CHECK (seq >= 1),
    namespace_id    uuid NOT NULL,
    change          text NOT NULL CHECK (change IN ('put', 'delete', 'revive', 'backfill')),
    event_id        text NOT NULL,
    source          text,
    event_version   bigint,
    kind            text NOT NULL,
    title           text,
    properties      jsonb NOT NULL DEFAULT '{}'::jsonb,
    index_text_hash text,
    recorded_at     timestamptz NOT NULL,
    PRIMARY KEY (object_id, seq)
);

-- Objects written before keep one version, as they are now.
INSERT INTO object_versions (object_id, seq, namespace_id, change, event_id, source,
                             event_version, kind, title, properties, index_text_hash, recorded_at)
SELECT id, 1, namespace_id, 'backfill', coalesce(event_id, ''), source, source_version, kind,
       title, properties, index_text_hash, updated_at
FROM objects WHERE parent_id IS NULL;

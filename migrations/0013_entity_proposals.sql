-- Entity resolution (pipeline/entities/merging.py): which live entities the proposal pass has
-- not examined yet. An entity is examined once, when new; a person's later decisions (verify,
-- refuse, merge through the API) need no pass.
ALTER TABLE entities ADD COLUMN proposed_at timestamptz;

CREATE INDEX entities_unproposed ON entities (created_at)
    WHERE proposed_at IS NULL AND merged_into IS NULL;

-- The entities merged into one: a merge re-points them to the survivor, and the self-reference
-- of `merged_into` is checked against them whenever an entity row goes (without it, each check
-- scans the table).
CREATE INDEX entities_merged_into ON entities (merged_into) WHERE merged_into IS NOT NULL;

-- The resolver's lookups (pipeline/stores/postgres/resolution.py), per namespace: trigram and
-- prefix matches on names and aliases inside the namespace (btree_gin puts the namespace in the
-- trigram index: 0012's indexes on `norm` alone make every tenant's near names a recheck), and
-- the initials of multi-word names, for acronyms ("nasa" finds "national aeronautics and space
-- administration"; with the stop words kept, "dod" finds "department of defense").
CREATE FUNCTION brainstream_initials(norm text, skip_stop boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT regexp_replace(
        btrim(CASE WHEN skip_stop THEN regexp_replace(norm,
            '(^| )(of|and|the|for|in|on|at|to|de|du|des|la|le|von|van|der|y|et|und)(?= |$)',
            '', 'g') ELSE norm END),
        '([^ ])[^ ]*( +|$)', '\1', 'g')
$$;

CREATE INDEX entities_ns_norm_trgm ON entities USING gin (namespace_id, norm gin_trgm_ops)
    WHERE merged_into IS NULL;
CREATE INDEX entity_aliases_ns_norm_trgm ON entity_aliases
    USING gin (namespace_id, norm gin_trgm_ops);
CREATE INDEX entities_ns_initials ON entities (namespace_id, brainstream_initials(norm, true))
    WHERE merged_into IS NULL AND norm LIKE '% %';
CREATE INDEX entities_ns_initials_all ON entities
    (namespace_id, brainstream_initials(norm, false))
    WHERE merged_into IS NULL AND norm LIKE '% %';

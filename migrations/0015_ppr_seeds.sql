-- PPR retrieval (issue 11, item 4): what its seed lookup and its walk need beyond 0012.

-- The fold layer of seed matching: a query n-gram that matches no entity's normalised name or
-- alias is compared with `fold` (pipeline/entities/names.py: accents and punctuation dropped)
-- of the entities' names. This is the same fold in SQL, immutable so an index can hold it;
-- unaccent's rules and Python's NFKD agree on Latin accents (the fallback's purpose), and where
-- they differ a name is only not found by this layer.
CREATE EXTENSION IF NOT EXISTS unaccent;

CREATE FUNCTION brainstream_name_fold(name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN btrim(regexp_replace(public.unaccent('public.unaccent'::regdictionary, name),
                            '[^0-9a-z]+', ' ', 'g'));

CREATE INDEX entities_ns_fold ON entities (namespace_id, brainstream_name_fold(norm))
    WHERE merged_into IS NULL;

-- The walk from rows to the entities they name reads mentions by row (the primary key's
-- (row_id, field, ...) prefix serves it); from entities to rows, mentions_entity
-- (entity_id, row_id). Entity edges by either end: the primary key (from_id, ...) and
-- entity_edges_to. Nothing more is needed for those.

-- find_exact's property arm ("a top-level property value, or a list element, equal to the query
-- as text") read every parent object of the namespace through jsonb_each: a sequential scan, the
-- whole of find_exact's time at 100k parts (p95 74 ms, 141 ms of one plan under load) and ten
-- times that at 1M. The values it compares, as one text array per parent, indexed by GIN: the
-- arm becomes `property_texts(properties) && needles`, an index lookup.
--
-- Only values of at most 256 characters are indexed (a GIN entry has a size limit, and a
-- property string may be 10,000 characters); a longer query takes the old scan
-- (pipeline/stores/postgres/search_sql.py, `EXACT_PROPERTY_MAX`).
CREATE FUNCTION property_texts(p jsonb) RETURNS text[]
-- COST: it runs jsonb_each twice and aggregates, per row; the planner should rather use the
-- index than evaluate it on each of a namespace's rows
LANGUAGE sql IMMUTABLE PARALLEL SAFE COST 1000 AS $$
    SELECT coalesce(array_agg(DISTINCT v), '{}'::text[]) FROM (
        SELECT e.value #>> '{}' AS v FROM jsonb_each(p) AS e
        WHERE jsonb_typeof(e.value) IN ('string', 'number', 'boolean')
        UNION ALL
        SELECT x #>> '{}' FROM jsonb_each(p) AS e,
            jsonb_array_elements(CASE jsonb_typeof(e.value) WHEN 'array' THEN e.value
                                 ELSE '[]'::jsonb END) AS x
        WHERE jsonb_typeof(x) IN ('string', 'number', 'boolean')
    ) AS s WHERE length(v) <= 256
$$;

CREATE INDEX objects_property_texts ON objects USING gin (property_texts(properties))
    WHERE parent_id IS NULL AND deleted_at IS NULL;

-- A property value as an instant (pipeline/retrieval/store/matchset.py: date facets and sorting
-- by a datetime property): an ISO-8601 extended date or date-time string, UTC when it names no
-- offset; NULL for anything else, never an error (a facet or sort over many objects must not
-- fail on one odd value). Not inlined (its FROM), so CASE guards the date arithmetic.
CREATE FUNCTION brainstream_instant(value text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE
        WHEN m IS NULL OR m[1]::int = 0 THEN NULL
        WHEN m[3]::int > extract(day FROM make_date(m[1]::int, m[2]::int, 1)
                                 + interval '1 month - 1 day')::int THEN NULL
        ELSE (make_timestamp(m[1]::int, m[2]::int, m[3]::int, coalesce(m[4]::int, 0),
                             coalesce(m[5]::int, 0), coalesce(m[6]::float8, 0))
              AT TIME ZONE 'UTC')
             - CASE WHEN m[8] IS NULL THEN interval '0'
                    ELSE (m[8] || (m[9]::int * 60 + coalesce(m[10]::int, 0))
                          || ' minutes')::interval END
    END
    FROM regexp_match(value, '^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])'
                             '(?:[T ]([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d(?:\.\d{1,6})?))?)?'
                             '(Z|([+-])(\d{2}):?(\d{2})?)?$') AS m
$$;

-- Search support. A part's lexical text includes its parent's title (as its embedding text does),
-- and every row records its length in tokens, which BM25's length normalization needs.

ALTER TABLE objects ADD COLUMN context_title text;

CREATE FUNCTION brainstream_token_count(doc tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0)::integer
    FROM unnest(doc)
$$;

CREATE FUNCTION brainstream_lexical(title text, context_title text, summary text, content text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, coalesce(context_title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, coalesce(summary, '')), 'B')
        || setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'C')
$$;

DROP INDEX objects_lexical;
ALTER TABLE objects DROP COLUMN lexical;
ALTER TABLE objects ADD COLUMN lexical tsvector
    GENERATED ALWAYS AS (brainstream_lexical(title, context_title, summary, content)) STORED;
ALTER TABLE objects ADD COLUMN doc_len integer
    GENERATED ALWAYS AS (brainstream_token_count(
        brainstream_lexical(title, context_title, summary, content))) STORED;
CREATE INDEX objects_lexical ON objects USING gin (lexical);

-- Per-namespace corpus statistics for BM25 (document count and mean length) are computed on
-- demand and cached by the API; this index keeps that aggregate an index-only scan.
CREATE INDEX objects_ns_doclen ON objects (namespace_id, doc_len) WHERE deleted_at IS NULL;

-- The vocabulary of each namespace: every lexeme of `objects.lexical`, with a trigram index.
-- The trigram channel matches query words that the corpus does not know (misspellings, variant
-- codes) against it, then finds the rows holding the near words through their postings:
-- pg_trgm's documented way to fuzzy-match full text, where comparing the query with every row's
-- content costs seconds at 100k parts.
--
-- Writers do not insert into it: concurrent transactions inserting the same new lexemes in
-- different orders could deadlock. The postings trigger (next migration) queues each row whose
-- text changed in `search_vocab_pending` (a plain heap insert: nothing to conflict on), and
-- `pipeline.vocab.refresh_vocab`, run by the worker's sweep, one at a time, moves the queued
-- rows' lexemes in. Lexemes are never removed: a stale word matches no visible row.
CREATE TABLE search_vocab (
    namespace_id uuid NOT NULL,
    lexeme       text NOT NULL,
    PRIMARY KEY (namespace_id, lexeme)
);
CREATE INDEX search_vocab_trgm ON search_vocab USING gin (lexeme gin_trgm_ops);

CREATE TABLE search_vocab_pending (
    row_id uuid NOT NULL
);

INSERT INTO search_vocab (namespace_id, lexeme)
SELECT DISTINCT o.namespace_id, l FROM objects o, unnest(tsvector_to_array(o.lexical)) AS l;

-- The vocabulary of each namespace: every lexeme of `objects.lexical`, with a trigram index.
-- The trigram channel matches query words that the corpus does not know (misspellings, variant
-- codes) against it, then finds the rows holding the near words through the `lexical` GIN index:
-- pg_trgm's documented way to fuzzy-match full text, where comparing the query with every row's
-- content costs seconds at 100k parts. Filled asynchronously (`pipeline.vocab.refresh_vocab`,
-- run by the worker's sweep) rather than by a trigger: concurrent write transactions inserting
-- the same new lexemes in different orders could deadlock. Lexemes are never removed: a stale
-- word matches no visible row.
CREATE TABLE search_vocab (
    namespace_id uuid NOT NULL,
    lexeme       text NOT NULL,
    PRIMARY KEY (namespace_id, lexeme)
);
CREATE INDEX search_vocab_trgm ON search_vocab USING gin (lexeme gin_trgm_ops);

-- How far the vocabulary has been refreshed (objects.updated_at, the writing transaction's time).
CREATE TABLE search_vocab_state (
    id           integer PRIMARY KEY CHECK (id = 1),
    refreshed_to timestamptz  -- NULL: never refreshed
);
INSERT INTO search_vocab_state VALUES (1, NULL);

CREATE INDEX objects_updated ON objects (updated_at);

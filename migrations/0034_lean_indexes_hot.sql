-- Lean writes (issue 13, item 2), after 0033 moved the embeddings out of `objects`.
--
-- No query searches `objects.content` by trigram (the trigram channel matches the vocabulary,
-- `search_vocab`; exact matching and the title filter use `objects_title_trgm`), yet every part's
-- content fed this GIN index on each insert: the costliest index of the write path for nothing.
-- The list of every index of the written tables, with the query that uses each, is in
-- docs/parts/lean-writes.md.
DROP INDEX objects_content_trgm;

-- The extraction stage's claim and release only set `lease_until`, which no index holds: with
-- room left in each page the new version fits beside the old one and the update is HOT (no new
-- entry in the table's indexes). Packed pages (the default fillfactor 100) made most of them
-- non-HOT. A claim takes a batch of the oldest rows (64 by default), which sit together: half
-- of each page is kept free so every one of them finds room (at 80 only about a quarter did).
ALTER TABLE entity_extraction SET (fillfactor = 50);
-- The same for the embedding worker's claim on `object_embeddings` (0033 kept 20% free).
ALTER TABLE object_embeddings SET (fillfactor = 50);

-- Extraction's cost (issue 11): the proposal pass reads the trigram indexes of entity names
-- and aliases right after the extraction stage wrote thousands of them. With GIN's default
-- `fastupdate`, new entries wait in the index's pending list until a vacuum or the list's size
-- limit moves them into the tree, and every trigram search reads the whole pending list: on
-- 600 SciFact documents (4,498 new names, about 150 pending pages per index) each lookup of the
-- pass cost ten times what it cost once the list was empty, and the pass's Postgres CPU fell
-- from 22.5 to 5.7 s without it (docs/parts/extraction-cost.md). Entries now go straight into
-- the tree as they are written; the writes cost a little more, the reads never degrade.
ALTER INDEX entities_norm_trgm SET (fastupdate = off);
ALTER INDEX entities_ns_norm_trgm SET (fastupdate = off);
ALTER INDEX entity_aliases_norm_trgm SET (fastupdate = off);
ALTER INDEX entity_aliases_ns_norm_trgm SET (fastupdate = off);
-- What already waits in the lists goes into the trees now, not at the next vacuum.
SELECT gin_clean_pending_list(i::regclass) FROM unnest(ARRAY['entities_norm_trgm',
    'entities_ns_norm_trgm', 'entity_aliases_norm_trgm', 'entity_aliases_ns_norm_trgm']) AS i;

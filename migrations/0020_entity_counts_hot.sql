-- Entity extraction speed (pipeline/entities/writeback.py). Every write-back batch recounts the
-- `part_count` of the entities its rows name. While `part_count` was indexed
-- (entities_ns_count), each recount was a non-HOT update: a new entry in all ten indexes of the
-- table, the HNSW index of name embeddings and two trigram GIN indexes among them, which made
-- the recount the stage's costliest step. No query reads that index (they filter by namespace
-- and name, or by id, and read part_count from the row), so it goes, and free space is kept in
-- each page so the updated version fits beside the old one (the HOT condition).
DROP INDEX entities_ns_count;
ALTER TABLE entities SET (fillfactor = 70);
-- CO_OCCURS weights and evidence are rewritten by every batch that touches a pair: the same.
ALTER TABLE entity_edges SET (fillfactor = 80);

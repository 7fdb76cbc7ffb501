-- The proposal pass reads its queue oldest first, a page at a time (pipeline/entities/store/
-- merges.py: claim_unproposed; name_vectors.py: queued_page, from the last entity of the page
-- before). Without an index in that order each read hashed the whole queue and all live
-- entities to keep 200: about 5 ms a page on a burst's 9,500 new entities, and a burst's queue
-- is read once a page of names to embed and twice a round.
CREATE INDEX entity_proposal_queue_order ON entity_proposal_queue (created_at, entity_id);

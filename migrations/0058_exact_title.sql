-- find_exact's title arm (an object whose title equals the query, ignoring case) looked titles
-- up through the trigram index (`objects_title_trgm`): a whole title is dozens of trigrams, each
-- a posting list to intersect (0.9 ms of a 1.7 ms statement at 100k parts). An equality is a
-- btree lookup; parts never match it (their object's title does), so they are left out.
CREATE INDEX objects_title_lower ON objects (namespace_id, lower(title)) WHERE parent_id IS NULL;

-- The proposal pass of entity resolution (pipeline/entities/merging.py): which live entities it
-- has not examined yet. An entity is examined once, when new; a person's later decisions
-- (verify, refuse, merge through the API) need no pass.
ALTER TABLE entities ADD COLUMN proposed_at timestamptz;

CREATE INDEX entities_unproposed ON entities (created_at)
    WHERE proposed_at IS NULL AND merged_into IS NULL;

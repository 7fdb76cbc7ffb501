-- Curators' decisions on entities (issue 11 review): `brainstream.entity.decision` events
-- (schemas/entities.py), recorded by the consumer and applied once both entities exist
-- (pipeline/entities/decisions.py). The API applies its own at once and publishes them, so a
-- replay into a new generation records them again from the topic and applies them after
-- extraction has re-derived the entities. No foreign key to entities: a decision arrives before
-- its entities in a replay and waits for them.
CREATE TABLE entity_decisions (
    namespace_id uuid NOT NULL,
    source       text NOT NULL,   -- the event's source and id: one decision per event
    event_id     text NOT NULL,
    seq          bigserial,       -- the order decisions are applied in (arrival)
    decision     text NOT NULL CHECK (decision IN ('merge', 'verify', 'refuse')),
    from_id      uuid NOT NULL,
    to_id        uuid NOT NULL,
    decided_by   text NOT NULL,
    note         text,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'applied', 'failed')),
    error        text,            -- failed: the error code (entity_merged: refused too late)
    result       jsonb,           -- applied: what the merge changed (the API's answer)
    created_at   timestamptz NOT NULL DEFAULT now(),
    applied_at   timestamptz,
    PRIMARY KEY (namespace_id, source, event_id)
);

CREATE INDEX entity_decisions_pending ON entity_decisions (seq) WHERE status = 'pending';

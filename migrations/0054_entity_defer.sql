-- A curator may put a possibly-same pair off: the `defer` decision (schemas/entities.py). The pair
-- stays undecided (walked like a held one, refreshed by the proposal pass, decidable at any time)
-- but leaves the curator's queue of held pairs for its own list, status `deferred`, until a
-- verify or refuse decides it. A defer is an event like the other decisions, so a replay repeats
-- it.
ALTER TABLE entity_decisions DROP CONSTRAINT entity_decisions_decision_check;
ALTER TABLE entity_decisions ADD CONSTRAINT entity_decisions_decision_check
    CHECK (decision IN ('merge', 'verify', 'refuse', 'defer'));

ALTER TABLE entity_edges DROP CONSTRAINT entity_edges_status_check;
ALTER TABLE entity_edges ADD CONSTRAINT entity_edges_status_check
    CHECK (status IS NULL OR status IN ('held', 'verified', 'refused', 'deferred'));

-- The curator's queue pages a namespace's pairs of one status, most confident first.
CREATE INDEX entity_edges_possibly_same ON entity_edges (namespace_id, status,
                                                         (coalesce(confidence, 0)) DESC,
                                                         from_id, to_id)
    WHERE edge_type = 'POSSIBLY_SAME';

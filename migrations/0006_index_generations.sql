-- Index generations (`brainstream replay`): each generation is a database on this server plus a
-- FalkorDB graph and a consumer group; exactly one is active, and every reader and writer follows
-- it. The table is read only in the base database (generation 1); other generations' databases get
-- the same (empty) table because they run the same migrations. Generation 1 is implicit until the
-- first replay records it, so existing deployments keep working unchanged.
CREATE TABLE index_generations (
    id             integer PRIMARY KEY CHECK (id >= 1),
    dbname         text NOT NULL UNIQUE,
    graph_name     text NOT NULL UNIQUE,
    consumer_group text NOT NULL UNIQUE,
    embedder       text NOT NULL,
    embedding_dim  integer NOT NULL,
    state          text NOT NULL
                   CHECK (state IN ('building', 'active', 'retired', 'failed', 'dropped')),
    -- the replay markers: generation id and the offset of each partition's marker record
    marker         jsonb NOT NULL DEFAULT '{}'::jsonb,
    since          timestamptz,
    -- set once the replay committed the generation's consumer-group offsets: only then may the
    -- live consumer join that group (before, it would start from the beginning)
    handoff_at     timestamptz,
    note           text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    activated_at   timestamptz,
    retired_at     timestamptz,
    dropped_at     timestamptz
);

-- At most one active generation: the switch is one transaction that retires the old row and
-- activates the new one.
CREATE UNIQUE INDEX index_generations_one_active ON index_generations ((true))
    WHERE state = 'active';

-- Events that cannot apply *yet*: a link whose endpoint's put is on another partition and has not
-- been consumed. They wait here (bounded by BRAINSTREAM_DEFER_SECONDS) instead of being
-- dead-lettered at once; later events about the same link queue behind them, in order.
CREATE TABLE deferred_events (
    id              bigserial PRIMARY KEY,
    namespace_id    uuid NOT NULL,
    source          text NOT NULL,
    event_id        text NOT NULL,
    wait_key        text NOT NULL,
    topic           text NOT NULL,
    partition       integer NOT NULL,
    "offset"        bigint NOT NULL,
    record_key      bytea,
    record_value    bytea NOT NULL,
    record_headers  jsonb NOT NULL DEFAULT '[]'::jsonb,
    reason_code     text NOT NULL,
    reason          text NOT NULL,
    reason_field    text,
    first_seen      timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, source, event_id)
);

CREATE INDEX deferred_events_due ON deferred_events (next_attempt_at, id);
CREATE INDEX deferred_events_wait_key ON deferred_events (wait_key, id);

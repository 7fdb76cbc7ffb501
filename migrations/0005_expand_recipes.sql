-- Named expand templates registered through the API (settings can name more).
CREATE TABLE expand_recipes (
    name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z][A-Za-z0-9_-]{0,62}$'),
    spec       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

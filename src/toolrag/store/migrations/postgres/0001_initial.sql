-- Tools as they are now, one row per name. `seq` is the registry generation of the row's last change.
CREATE TABLE tools (
    name TEXT PRIMARY KEY,
    definition JSON NOT NULL,          -- the Tool as JSON (not JSONB: key order is part of a schema)
    content_hash TEXT NOT NULL,
    version INTEGER NOT NULL,
    active BOOLEAN NOT NULL,
    source TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    seq BIGINT NOT NULL
);
CREATE INDEX tools_seq ON tools(seq);

-- Every version of every tool, the full state kept.
CREATE TABLE tool_versions (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    definition JSON NOT NULL,
    content_hash TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (name, version)
);

-- Vectors keyed by model and text hash. The column has no fixed dimension so that two models can live side by
-- side during a migration; each model gets its own partial HNSW index on a cast to its dimension.
CREATE TABLE embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector vector NOT NULL,
    PRIMARY KEY (model, text_hash)
);

CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO meta(key, value) VALUES ('generation', '0');

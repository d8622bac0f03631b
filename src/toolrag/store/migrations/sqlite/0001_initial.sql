-- Tools as they are now, one row per name. `seq` is the registry generation of the row's last change.
CREATE TABLE tools (
    name TEXT PRIMARY KEY,
    definition TEXT NOT NULL,          -- the Tool as JSON
    content_hash TEXT NOT NULL,
    version INTEGER NOT NULL,
    active INTEGER NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX tools_seq ON tools(seq);

-- Every version of every tool, the full state kept.
CREATE TABLE tool_versions (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    definition TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (name, version)
);

-- Vectors keyed by model and text hash: a text that did not change is never embedded again.
CREATE TABLE embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
);

CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO meta(key, value) VALUES ('generation', '0');

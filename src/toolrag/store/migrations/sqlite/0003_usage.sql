-- Usage monitoring: every retrieval with the tools it chose, and every tool call.
CREATE TABLE retrievals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    session TEXT,
    principal TEXT,
    request TEXT,                      -- as configured: the text, a redacted text, or NULL (hash only)
    request_hash TEXT NOT NULL,
    chosen INTEGER NOT NULL,           -- tools returned (0: nothing passed the threshold)
    step TEXT                          -- how the shortlist was found, when not by the plain search
);
CREATE INDEX retrievals_at ON retrievals(at);
CREATE INDEX retrievals_session ON retrievals(session);

CREATE TABLE retrieval_results (
    retrieval_id INTEGER NOT NULL REFERENCES retrievals(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    rank INTEGER NOT NULL,
    score REAL NOT NULL,
    dense REAL NOT NULL
);
CREATE INDEX retrieval_results_tool ON retrieval_results(tool);
CREATE INDEX retrieval_results_retrieval ON retrieval_results(retrieval_id);

CREATE TABLE calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    session TEXT,
    principal TEXT,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    injected INTEGER NOT NULL           -- was the tool in the shortlist the model saw
);
CREATE INDEX calls_at ON calls(at);
CREATE INDEX calls_tool ON calls(tool);

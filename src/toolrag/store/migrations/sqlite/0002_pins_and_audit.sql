-- Approved content of tools imported from MCP servers (tool pinning), and quarantined new versions.
CREATE TABLE pins (
    tool TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    approved_hash TEXT,                -- NULL: never approved
    pending_hash TEXT,                 -- a version waiting for approval, NULL when none
    pending TEXT,                      -- that version's Tool JSON
    findings TEXT NOT NULL,            -- JSON list of why the pending version was flagged
    updated_at TEXT NOT NULL
);
CREATE INDEX pins_server ON pins(server);

-- Append-only record of imports, changes, approvals and refusals.
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    action TEXT NOT NULL,
    tool TEXT,
    server TEXT,
    principal TEXT,
    detail TEXT NOT NULL
);

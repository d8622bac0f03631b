-- Upstream MCP servers an operator switched off (`toolrag mcp disable`): a row per disabled server, dropped when it is
-- enabled again. While a server has a row, the gateway lists none of its tools and refuses calls to them.
CREATE TABLE upstream_switches (
    server TEXT PRIMARY KEY,
    disabled_by TEXT,
    disabled_at TEXT NOT NULL,
    reason TEXT
);

-- What a group of tools is for (an MCP server, a category), in words: search ranks groups as a whole too.
CREATE TABLE tool_groups (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

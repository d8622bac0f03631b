-- Group descriptions waiting for an admin while the registry's `text_review` setting is on (`tool_groups` keeps the
-- live one serving), and the description an admin rejected, which proposing again leaves out until lifted.
CREATE TABLE group_reviews (
    name TEXT PRIMARY KEY,
    pending TEXT,                      -- the proposed description, NULL when nothing waits
    proposed_by TEXT,
    origin TEXT,                       -- import, cli or python
    proposed_at TEXT NOT NULL,
    rejected_hash TEXT                 -- SHA-256 of the rejected description
);

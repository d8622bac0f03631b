-- Group descriptions waiting for an admin while the registry's `text_review` setting is on (`tool_groups` keeps the
-- live one serving), and the description an admin rejected, which proposing again leaves out until lifted.
CREATE TABLE IF NOT EXISTS group_reviews (
    name TEXT PRIMARY KEY,
    pending TEXT,
    proposed_by TEXT,
    origin TEXT,
    proposed_at TIMESTAMPTZ NOT NULL,
    rejected_hash TEXT
);

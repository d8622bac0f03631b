-- Description and schema changes of catalog tools waiting for an admin (the registry's `text_review` setting, kept in
-- `meta`): a row per tool. The live version keeps serving while `pending_hash` is set; `rejected_hash` is the text an
-- admin rejected, which an import or edit proposing it again leaves out until the rejection is lifted.
CREATE TABLE text_reviews (
    tool TEXT PRIMARY KEY,
    pending_hash TEXT,                 -- the proposed text's hash, NULL when nothing waits
    pending TEXT,                      -- JSON of the proposed description, input_schema, output_schema, annotations
    findings TEXT NOT NULL,            -- JSON list of what the poisoning checks found in it
    proposed_by TEXT,
    origin TEXT,                       -- import, api, console, cli or python
    proposed_at TEXT NOT NULL,
    rejected_hash TEXT
);

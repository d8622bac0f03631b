-- Description and schema changes of catalog tools waiting for an admin (the registry's `text_review` setting, kept in
-- `meta`): a row per tool. The live version keeps serving while `pending_hash` is set; `rejected_hash` is the text an
-- admin rejected, which an import or edit proposing it again leaves out until the rejection is lifted.
CREATE TABLE IF NOT EXISTS text_reviews (
    tool TEXT PRIMARY KEY,
    pending_hash TEXT,
    pending JSON,
    findings JSON NOT NULL,
    proposed_by TEXT,
    origin TEXT,
    proposed_at TIMESTAMPTZ NOT NULL,
    rejected_hash TEXT
);

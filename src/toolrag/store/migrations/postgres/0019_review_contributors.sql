-- Everyone whose proposed part of a tool's change still waits (`proposed_by` is the latest writer): under two-person
-- review none of them may approve it. JSON list of names.
ALTER TABLE text_reviews ADD COLUMN IF NOT EXISTS contributors JSON NOT NULL DEFAULT '[]';

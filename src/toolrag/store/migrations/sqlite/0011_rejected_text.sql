-- The upstream text an admin rejected, by content hash: a sync that lists it again leaves the tool out without
-- quarantining it again, until an admin lifts the rejection or the server publishes other text.
ALTER TABLE pins ADD COLUMN rejected_hash TEXT;

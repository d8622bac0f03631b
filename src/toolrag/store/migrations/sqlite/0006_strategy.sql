-- Which strategy served each search: 'retrieval' (the best tools) or 'all' (the principal's whole catalog fit the
-- token budget). From this version on, retrieval_results.score is the tool's estimated probability of relevance.
ALTER TABLE retrievals ADD COLUMN strategy TEXT NOT NULL DEFAULT 'retrieval';

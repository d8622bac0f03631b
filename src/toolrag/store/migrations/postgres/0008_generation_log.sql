-- A random token per generation: a process that kept its in-memory index of generation G (snapshot/) can tell
-- whether this registry passed through that same G, and not a copy of it that diverged, before reusing it.
CREATE TABLE generation_log (
    generation BIGINT PRIMARY KEY,
    token TEXT NOT NULL
);
INSERT INTO generation_log(generation, token)
SELECT value::bigint, md5(random()::text || clock_timestamp()::text) FROM meta WHERE key = 'generation';

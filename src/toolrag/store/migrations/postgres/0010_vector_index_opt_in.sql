-- The per-model HNSW indexes of `embeddings` are kept only by stores that ask for them (`vector_index=hnsw` in the
-- store URL): no search reads them (the in-memory snapshot, and past `SearchConfig.ann_min_tools` search/ann.py's
-- graph, answer every search), while each one slows every write. They go here; a store that keeps one builds its
-- model's again when it opens the registry.
DO $$
DECLARE
    found RECORD;
BEGIN
    FOR found IN
        SELECT indexname FROM pg_indexes
        WHERE schemaname = current_schema() AND indexname LIKE 'embeddings\_hnsw\_%'
    LOOP
        EXECUTE format('DROP INDEX %I', found.indexname);
    END LOOP;
END
$$;

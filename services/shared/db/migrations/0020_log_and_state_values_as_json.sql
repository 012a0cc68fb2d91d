-- The embedded store's log values and stage state values as `json`, not `jsonb` (as migration 0016 did for the payload
-- tables): a record or an entry is written whole and read back whole, by offset or by key. jsonb parsed each value
-- into its binary form on insert and formatted it back to text on every read; json checks the text and keeps it, and
-- a reader takes it as text and parses it itself (stream/embedded/log.ts, table-store.ts): off the store's thread.
-- On PGlite only, the embedded default, one process with no older version beside it. On Postgres the columns stay
-- jsonb, so that pods of the previous version keep working during a rolling upgrade (docs/operations.md: migrations
-- only add); the code reads and writes both types (the erasure's matches cast to jsonb, privacy/erasure-steps.ts).
DO $$
BEGIN
  IF version() LIKE '%PGlite%' THEN
    ALTER TABLE log_records ALTER COLUMN value TYPE json USING value::json;
    ALTER TABLE state_store ALTER COLUMN value TYPE json USING value::json;
  END IF;
END
$$;

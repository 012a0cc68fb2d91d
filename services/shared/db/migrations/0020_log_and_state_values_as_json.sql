-- The embedded log's values and the stages' state values as `json`, not `jsonb` (as migration 0016 did for the payload
-- tables): a record or an entry is written whole and read back whole, by offset or by key. jsonb parsed each value
-- into its binary form on insert and formatted it back to text on every read; json checks the text and keeps it, and
-- a reader takes it as text and parses it itself (stream/embedded/log.ts, table-store.ts): off the embedded store's
-- thread. The erasure's matches cast the log's values (privacy/erasure-steps.ts).
ALTER TABLE log_records ALTER COLUMN value TYPE json USING value::json;
ALTER TABLE state_store ALTER COLUMN value TYPE json USING value::json;

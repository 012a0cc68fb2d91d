-- The embedded log's values as `json`, not `jsonb` (as migration 0016 did for the payload tables): a record is written
-- once and read back whole, by offset. jsonb parsed each value into its binary form on insert and formatted it back
-- to text on every read; json checks the text and keeps it, and a reader can take it as text and parse it itself
-- (stream/embedded/log.ts: off the embedded store's thread). The erasure's matches cast it (privacy/erasure-steps.ts).
ALTER TABLE log_records ALTER COLUMN value TYPE json USING value::json;

-- Payloads that are written once per conversion and only ever read back whole: `json` instead of `jsonb`. jsonb parses
-- each value into its binary form on insert and formats it back to text on select; json checks the text and keeps it.
-- On Postgres 15, a batch of "why this field" rows (two ~1.2 KB documents each) upserts in 45 µs a row instead of 78.
-- Erasures match on the records' identifiers with jsonb operators: they cast these columns (privacy/erasure-steps.ts).
-- The rewrite of each table takes its lock for as long as it holds rows: all of them are kept days, not months.
ALTER TABLE conversion_explanations ALTER COLUMN record TYPE json USING record::json,
                                    ALTER COLUMN explanation TYPE json USING explanation::json;
ALTER TABLE forward_outbox ALTER COLUMN record TYPE json USING record::json;
ALTER TABLE destination_outbox ALTER COLUMN record TYPE json USING record::json;
ALTER TABLE deliveries ALTER COLUMN payload TYPE json USING payload::json,
                       ALTER COLUMN record TYPE json USING record::json,
                       ALTER COLUMN platform_answer TYPE json USING platform_answer::json;

-- The gateway request id of each queued conversion, so the forwarder's log line for the batch that sends it names the
-- requests its events came in (docs/operations.md, "Logs"). NULL for rows queued before this column existed.
ALTER TABLE forward_outbox ADD COLUMN request_id text;

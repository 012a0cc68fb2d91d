-- Delivery records: one row per conversion and destination ('tiktok' for the workspace's first TikTok destination,
-- else destinations.id), rewritten on every attempt: the payload as sent, the platform's answer for that event, the
-- match keys it carried and their score. `record` is the conversion as the outbox held it: what an erasure matches
-- on and what a redrive of a delivery that never reached a dead letter files again.
CREATE TABLE deliveries (
  id                bigserial PRIMARY KEY,
  workspace_id      text NOT NULL,
  destination_id    text NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('tiktok', 'meta', 'google')),
  -- The ledger id (test conversions carry a `test:` prefix, as in the outbox and the sent ledger).
  event_id          text NOT NULL,
  outcome           text NOT NULL CHECK (outcome IN ('sent', 'refused', 'retrying', 'dead')),
  attempts          integer NOT NULL DEFAULT 0,
  payload           jsonb,
  record            jsonb NOT NULL,
  platform_answer   jsonb,
  match_keys        jsonb NOT NULL DEFAULT '[]'::jsonb,
  match_quality     double precision NOT NULL DEFAULT 0,
  first_attempt_at  timestamptz NOT NULL DEFAULT now(),
  attempted_at      timestamptz NOT NULL DEFAULT now(),
  sent_at           timestamptz,
  UNIQUE (workspace_id, destination_id, event_id)
);
CREATE INDEX deliveries_workspace ON deliveries (workspace_id, id);
CREATE INDEX deliveries_age ON deliveries (attempted_at);

-- Replay jobs (services/replay): a workspace's accepted events received in [range_from, range_to) run again through
-- enrichment and forwarding. `cursor` is where the job stands in the log (embedded: the next offset of
-- events.deduped; Kafka: the next offset per partition) and is written in the same transaction as the conversions
-- the job filed into the outbox, so a job resumed after a crash neither skips nor repeats. A worker holds a job by
-- its lease (lease_owner, lease_until); a lease not renewed in time lets another worker resume the job.
CREATE TABLE replay_jobs (
  id                   text PRIMARY KEY,
  workspace_id         text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  range_from           timestamptz NOT NULL,
  range_to             timestamptz NOT NULL,
  dry_run              boolean NOT NULL,
  resend               boolean NOT NULL,
  status               text NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  error                text,
  -- Where reading starts and ends ({partition: offset}), fixed when the job starts; `cursor` moves between them.
  start_positions      jsonb,
  end_positions        jsonb,
  cursor               jsonb,
  events_read          bigint NOT NULL DEFAULT 0,
  conversions_built    bigint NOT NULL DEFAULT 0,
  conversions_sent     bigint NOT NULL DEFAULT 0,
  skipped_already_sent bigint NOT NULL DEFAULT 0,
  dropped              jsonb NOT NULL DEFAULT '{}'::jsonb,
  lease_owner          text,
  lease_until          timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  started_at           timestamptz,
  finished_at          timestamptz
);
CREATE INDEX replay_jobs_pending ON replay_jobs (created_at) WHERE status IN ('queued', 'running');
CREATE INDEX replay_jobs_workspace ON replay_jobs (workspace_id, created_at);

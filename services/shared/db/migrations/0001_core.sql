-- Workspaces, API keys and the audit log.
CREATE TABLE workspaces (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  plan        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored (unique, the lookup path) and a short display start.
CREATE TABLE api_keys (
  id             text PRIMARY KEY,
  workspace_id   text NOT NULL REFERENCES workspaces(id),
  key_hash       text NOT NULL UNIQUE,
  display_start  text NOT NULL,
  mode           text NOT NULL CHECK (mode IN ('live', 'test')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  revoked_at     timestamptz
);
CREATE INDEX api_keys_workspace ON api_keys (workspace_id);

CREATE TABLE audit_log (
  id            bigserial PRIMARY KEY,
  at            timestamptz NOT NULL DEFAULT now(),
  workspace_id  text,
  actor         text NOT NULL,
  action        text NOT NULL,
  detail        jsonb NOT NULL DEFAULT '{}'
);

-- The embedded runtime's log: every topic as rows ordered by offset. Appends to one topic are serialised by an
-- advisory lock so that commit order equals offset order (a reader never skips a late-committing lower offset).
CREATE TABLE log_records (
  topic        text NOT NULL,
  "offset"     bigserial,
  key          text NOT NULL,
  value        jsonb NOT NULL,
  appended_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (topic, "offset")
);

-- Committed position of each consumer group (stage) per topic; written in the same transaction as its outputs.
CREATE TABLE consumer_offsets (
  group_id   text NOT NULL,
  topic      text NOT NULL,
  "offset"   bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, topic)
);

-- State stores of the embedded runtime (e.g. dedupe's first-seen markers), written in the stage's transaction.
-- On Kafka the same stores live in memory, restored from their compacted changelog topics.
CREATE TABLE state_store (
  store       text NOT NULL,
  key         text NOT NULL,
  value       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (store, key)
);
CREATE INDEX state_store_age ON state_store (store, updated_at);

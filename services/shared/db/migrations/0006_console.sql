-- The workspace settings console (issue 11): people, their sessions, key metadata, what a workspace sends, and the
-- activity counts the console charts.

-- API keys get a name and a last-used time (written at most once a minute per key per process, not per request).
ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- Console users. The email is stored lower-cased; only a bcrypt hash of the password is kept.
CREATE TABLE console_users (
  id             text PRIMARY KEY,
  email          text NOT NULL UNIQUE,
  password_hash  text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);

-- A user's role in a workspace. A user sees exactly the workspaces listed here.
CREATE TABLE workspace_members (
  workspace_id  text NOT NULL REFERENCES workspaces(id),
  user_id       text NOT NULL REFERENCES console_users(id),
  role          text NOT NULL CHECK (role IN ('owner', 'member')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX workspace_members_user ON workspace_members (user_id);

-- Console sessions (server side, so signing out or removing a user ends them on every replica). The cookie carries
-- a signed random id; only its SHA-256 is the key here.
CREATE TABLE console_sessions (
  sid_hash    text PRIMARY KEY,
  data        jsonb NOT NULL,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- The event names each workspace has sent, with counts (the Forwarding page's picker). Flushed in batches by the
-- gateway every few seconds, never one write per request.
CREATE TABLE workspace_event_names (
  workspace_id  text NOT NULL,
  name          text NOT NULL,
  count         bigint NOT NULL DEFAULT 0,
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, name)
);

-- Hourly activity per workspace: kind delivered | test_delivered | failed (key: platform code) | dropped (key:
-- reason). Written in the same transaction as the outcome where there is one.
CREATE TABLE activity_counts (
  workspace_id  text NOT NULL,
  hour          timestamptz NOT NULL,
  kind          text NOT NULL,
  key           text NOT NULL DEFAULT '',
  n             bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (workspace_id, hour, kind, key)
);

-- Which sent conversions were test events (the Activity page lists what the platform received in test mode).
ALTER TABLE forward_sent ADD COLUMN test_event_code text NOT NULL DEFAULT '';
ALTER TABLE forward_sent ADD COLUMN platform_event text;
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, at);

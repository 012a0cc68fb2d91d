-- Destinations beyond the workspace's first TikTok one (which stays forwarding_setups + connections): each with its
-- kind, setup, connection, send lease and backoff, its own outbox and sent ledger.
CREATE TABLE destinations (
  id                 text PRIMARY KEY,
  workspace_id       text NOT NULL REFERENCES workspaces(id),
  kind               text NOT NULL CHECK (kind IN ('tiktok', 'meta', 'google')),
  name               text NOT NULL,
  setup              jsonb NOT NULL,
  status             text NOT NULL DEFAULT 'disconnected' CHECK (status IN ('connected', 'needs_reauth', 'disconnected')),
  status_reason      text,
  account_id         text,
  access_token_enc   text,
  -- Kinds with OAuth refresh (google): the refresh token, sealed like the access token.
  refresh_token_enc  text,
  access_expires_at  timestamptz,
  generation         integer NOT NULL DEFAULT 0,
  connected_at       timestamptz,
  send_lease_owner   text,
  send_lease_until   timestamptz,
  send_failures      integer NOT NULL DEFAULT 0,
  send_not_before    timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX destinations_workspace ON destinations (workspace_id);

CREATE TABLE destination_outbox (
  id               bigserial PRIMARY KEY,
  destination_id   text NOT NULL REFERENCES destinations(id) ON DELETE CASCADE,
  workspace_id     text NOT NULL,
  event_id         text NOT NULL,
  event_source_id  text NOT NULL,
  test_event_code  text NOT NULL DEFAULT '',
  record           jsonb NOT NULL,
  received_at      timestamptz NOT NULL,
  enqueued_at      timestamptz NOT NULL DEFAULT now(),
  attempts         integer NOT NULL DEFAULT 0,
  request_id       text,
  UNIQUE (destination_id, event_id)
);
CREATE INDEX destination_outbox_batch ON destination_outbox (destination_id, event_source_id, test_event_code, id);

CREATE TABLE destination_sent (
  destination_id  text NOT NULL REFERENCES destinations(id) ON DELETE CASCADE,
  event_id        text NOT NULL,
  sent_at         timestamptz NOT NULL DEFAULT now(),
  request_id      text,
  PRIMARY KEY (destination_id, event_id)
);
CREATE INDEX destination_sent_age ON destination_sent (sent_at);

CREATE TABLE destination_oauth_states (
  state_hash      text PRIMARY KEY,
  destination_id  text NOT NULL REFERENCES destinations(id) ON DELETE CASCADE,
  redirect_uri    text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz,
  -- SHA-256 of the random value the connecting browser holds in a cookie (set by /oauth/destination/start)
  binding_hash    text
);

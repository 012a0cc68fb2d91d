-- The ad-platform connection's OAuth state and tokens (docs/platform.md, docs/decisions-platform.md).
-- Tokens are AES-256-GCM ciphertexts in the form `<key id>:<base64(iv | tag | ciphertext)>`: the key id beside
-- each ciphertext lets CREDENTIALS_KEY rotate while old rows stay readable.

-- generation: bumped by every successful connect; work started under an older generation (a refresh, a flip to
-- needs_reauth, a send backoff) never overwrites the newer connection.
ALTER TABLE connections ADD COLUMN generation integer NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN advertiser_ids jsonb NOT NULL DEFAULT '[]';
ALTER TABLE connections ADD COLUMN scope jsonb NOT NULL DEFAULT '[]';
ALTER TABLE connections ADD COLUMN access_token_enc text;
ALTER TABLE connections ADD COLUMN refresh_token_enc text;
-- NULL access_expires_at: the token does not expire and is never refreshed.
ALTER TABLE connections ADD COLUMN access_expires_at timestamptz;
ALTER TABLE connections ADD COLUMN refresh_expires_at timestamptz;
-- When the refresher should renew the access token: ahead of expiry, or later after a transient failure.
ALTER TABLE connections ADD COLUMN refresh_due_at timestamptz;
ALTER TABLE connections ADD COLUMN refresh_failures integer NOT NULL DEFAULT 0;
-- Row lease: one refresh per connection at a time across replicas (works on PGlite and Postgres alike).
ALTER TABLE connections ADD COLUMN refresh_lease_owner text;
ALTER TABLE connections ADD COLUMN refresh_lease_until timestamptz;
-- Row lease of the sender: one replica sends a connection's batches at a time, so a batch is never on the wire twice.
ALTER TABLE connections ADD COLUMN send_lease_owner text;
ALTER TABLE connections ADD COLUMN send_lease_until timestamptz;
-- Per-connection retry backoff of the sender: one slow account never stalls the others.
ALTER TABLE connections ADD COLUMN send_failures integer NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN send_not_before timestamptz;
ALTER TABLE connections ADD COLUMN connected_at timestamptz;
ALTER TABLE connections ADD COLUMN last_refreshed_at timestamptz;
-- Why the connection is in its status (e.g. the platform code that forced needs_reauth). Never a token.
ALTER TABLE connections ADD COLUMN status_reason text;
CREATE INDEX connections_refresh_due ON connections (refresh_due_at) WHERE status = 'connected';

-- One-time OAuth `state` values. Only the SHA-256 of the state is stored; the PKCE verifier is encrypted.
CREATE TABLE oauth_states (
  state_hash         text PRIMARY KEY,
  workspace_id       text NOT NULL REFERENCES workspaces(id),
  flow_id            text NOT NULL,
  code_verifier_enc  text NOT NULL,
  redirect_uri       text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  used_at            timestamptz,
  -- connected | superseded | denied | failed
  outcome            text
);
CREATE INDEX oauth_states_open ON oauth_states (workspace_id) WHERE used_at IS NULL;
CREATE INDEX oauth_states_age ON oauth_states (created_at);

-- Conversions waiting to be sent, per connection (= workspace). Rows of a connection in needs_reauth, or of a
-- workspace not connected yet, stay here (parked) until it connects. test_event_code '' means none.
CREATE TABLE forward_outbox (
  id               bigserial PRIMARY KEY,
  workspace_id     text NOT NULL,
  event_id         text NOT NULL,
  event_source     text NOT NULL,
  event_source_id  text NOT NULL,
  test_event_code  text NOT NULL DEFAULT '',
  record           jsonb NOT NULL,
  received_at      timestamptz NOT NULL,
  enqueued_at      timestamptz NOT NULL DEFAULT now(),
  attempts         integer NOT NULL DEFAULT 0,
  UNIQUE (workspace_id, event_id)
);
CREATE INDEX forward_outbox_batch ON forward_outbox (workspace_id, event_source, event_source_id, test_event_code, id);
CREATE INDEX forward_outbox_age ON forward_outbox (enqueued_at);

-- The sent ledger: what the platform accepted, per (connection, event_id). Kept longer than the platform's 48 h
-- dedup window (FORWARDER_LEDGER_RETENTION_HOURS) so a restart, retry or replay never sends a conversion twice.
CREATE TABLE forward_sent (
  workspace_id  text NOT NULL,
  event_id      text NOT NULL,
  sent_at       timestamptz NOT NULL DEFAULT now(),
  request_id    text,
  PRIMARY KEY (workspace_id, event_id)
);
CREATE INDEX forward_sent_age ON forward_sent (sent_at);

-- Revocations requested at disconnect that the platform has not confirmed yet (best effort, retried with backoff).
-- The access token stays here, encrypted, only until the platform confirms or the token expires.
CREATE TABLE platform_revocations (
  id                bigserial PRIMARY KEY,
  workspace_id      text NOT NULL,
  access_token_enc  text NOT NULL,
  token_expires_at  timestamptz,
  attempts          integer NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  last_error        text,
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX platform_revocations_due ON platform_revocations (next_attempt_at);

-- Privacy (issue 15, docs/privacy.md): erasure jobs and their redaction list, consent withdrawal on the identity
-- graph, the "why this field" records of forwarded conversions, and the indexes retention deletes by.

-- A per-workspace secret salt: identifiers of an erasure are kept only as HMAC-SHA256(salt, class + value), so the
-- audit record and the redaction list never hold them in clear, and two workspaces' lists cannot be compared.
CREATE TABLE privacy_salts (
  workspace_id  text PRIMARY KEY,
  salt          text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- Erasure jobs (POST /admin/v1/workspaces/{ws}/erasures). `pending` holds the request's identifiers in clear only
-- until the job has run (then NULL); `subject` is the audit form (salted hashes, by class).
CREATE TABLE erasures (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL,
  status        text NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
  requested_at  timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz,
  finished_at   timestamptz,
  attempts      integer NOT NULL DEFAULT 0,
  pending       jsonb,
  subject       jsonb NOT NULL,
  removed       jsonb NOT NULL DEFAULT '{}',
  error         text
);
CREATE INDEX erasures_queue ON erasures (requested_at) WHERE status IN ('queued', 'running');
CREATE INDEX erasures_age ON erasures (requested_at);

-- The redaction list: every identifier an erasure removed from the graph (the whole cluster), salted-hashed.
-- Replays and exports of the raw log (which Kafka cannot rewrite) skip envelopes received before erased_at that
-- carry one of them (services/enrich/identity/erasure-filter.ts).
CREATE TABLE erased_identifiers (
  workspace_id  text NOT NULL,
  id_hash       text NOT NULL,
  erased_at     timestamptz NOT NULL,
  erasure_id    text NOT NULL,
  PRIMARY KEY (workspace_id, id_hash)
);
CREATE INDEX erased_identifiers_erasure ON erased_identifiers (erasure_id);

-- Consent withdrawal: the receive time of the newest event of the cluster that withheld ad_user_data / ad_storage.
-- An identifier last seen (by a consenting event) before the cluster's newest withdrawal is not offered again.
ALTER TABLE identity_nodes ADD COLUMN ad_user_data_withdrawn_at timestamptz;
ALTER TABLE identity_nodes ADD COLUMN ad_storage_withdrawn_at timestamptz;
CREATE INDEX identity_nodes_age ON identity_nodes (last_seen_at);
CREATE INDEX identity_edges_age ON identity_edges (last_seen_at);
CREATE INDEX identity_edges_a ON identity_edges (workspace_id, a_kind, a_value);
CREATE INDEX identity_edges_b ON identity_edges (workspace_id, b_kind, b_value);

-- Why each user field of a forwarded conversion went (GET /admin/v1/workspaces/{ws}/conversions/{event_id}),
-- written by enrich with the conversion, kept CONVERSION_EXPLANATION_RETENTION_DAYS.
CREATE TABLE conversion_explanations (
  workspace_id  text NOT NULL,
  key_mode      text NOT NULL CHECK (key_mode IN ('live', 'test')),
  event_id      text NOT NULL,
  record        jsonb NOT NULL,
  explanation   jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, key_mode, event_id)
);
CREATE INDEX conversion_explanations_age ON conversion_explanations (created_at);

CREATE INDEX audit_log_age ON audit_log (at);

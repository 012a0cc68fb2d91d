-- The identity graph (enrich). Scoped by workspace and key mode: test-mode traffic has a graph of its own and never
-- links with or enriches live traffic. Times are the gateway's receive times of the events that wrote them.

-- One node per identifier. cluster_id labels the connected component the node belongs to (relabelled on merge).
-- page_location / user_agent: the last seen session data of a web event that carried this node, so that a server
-- event of the same person can take page.url and user.user_agent through the graph.
CREATE TABLE identity_nodes (
  workspace_id   text NOT NULL,
  key_mode       text NOT NULL CHECK (key_mode IN ('live', 'test')),
  kind           text NOT NULL,
  value          text NOT NULL,
  cluster_id     text NOT NULL,
  first_seen_at  timestamptz NOT NULL,
  last_seen_at   timestamptz NOT NULL,
  page_location  text,
  user_agent     text,
  page_seen_at   timestamptz,
  PRIMARY KEY (workspace_id, key_mode, kind, value)
);
CREATE INDEX identity_nodes_cluster ON identity_nodes (workspace_id, key_mode, cluster_id, kind);

-- Identifiers seen together in one event (the evidence of a cluster). (a, b) in canonical order.
CREATE TABLE identity_edges (
  workspace_id   text NOT NULL,
  key_mode       text NOT NULL CHECK (key_mode IN ('live', 'test')),
  a_kind         text NOT NULL,
  a_value        text NOT NULL,
  b_kind         text NOT NULL,
  b_value        text NOT NULL,
  first_seen_at  timestamptz NOT NULL,
  last_seen_at   timestamptz NOT NULL,
  PRIMARY KEY (workspace_id, key_mode, a_kind, a_value, b_kind, b_value)
);

-- Conversion-level dedup before forwarding: the first conversion per (workspace, mode, event_id) wins. source is
-- the input record that claimed it, so a replay of that same record (Kafka, after a crash) is not taken for a
-- duplicate. Rows older than the window are purged by enrich.
CREATE TABLE conversion_ids (
  workspace_id   text NOT NULL,
  key_mode       text NOT NULL CHECK (key_mode IN ('live', 'test')),
  event_id       text NOT NULL,
  source         text NOT NULL,
  first_seen_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, key_mode, event_id)
);
CREATE INDEX conversion_ids_age ON conversion_ids (first_seen_at);

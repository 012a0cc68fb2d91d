-- A workspace's forwarding setup (PUT /admin/v1/workspaces/{ws}/forwarding): which events become conversions.
CREATE TABLE forwarding_setups (
  workspace_id       text PRIMARY KEY REFERENCES workspaces(id),
  event_source       text NOT NULL,
  event_source_id    text NOT NULL,
  pii_mode           text NOT NULL CHECK (pii_mode IN ('hashed', 'none')),
  click_window_days  integer NOT NULL CHECK (click_window_days BETWEEN 1 AND 90),
  test_event_code    text,
  -- [{"name": "purchase", "platform_event": "CompletePayment"}, ...]
  events             jsonb NOT NULL,
  updated_at         timestamptz NOT NULL DEFAULT now()
);

-- The workspace's ad-platform connection. The OAuth/token columns are added by the forwarder's migrations; the
-- time zone is what enrich needs (conversion_date_time is expressed in the ad account's time zone).
CREATE TABLE connections (
  workspace_id   text PRIMARY KEY REFERENCES workspaces(id),
  status         text NOT NULL CHECK (status IN ('connected', 'needs_reauth', 'disconnected')),
  advertiser_id  text,
  time_zone      text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

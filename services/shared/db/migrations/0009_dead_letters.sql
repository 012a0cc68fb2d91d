-- Dead letters, queryable per workspace on both runtimes (issue 10): one row per record a stage or the forwarder could
-- not process, written in the same database transaction that produces the letter (the batch's transaction; the
-- forwarder's rejection transaction). The topics events.dlq / conversions.dlq keep their letters as before; this
-- table is what the admin API lists, redrives and discards.
--
-- A row is keyed by the letter's ORIGIN (topic, stage, workspace, origin): a stage letter by the record's key (the
-- same record redriven and failing again meets its own row), a forwarder letter by its ledger event id. `source` is
-- where it failed last (topic/partition/offset, or the platform request): a batch processed again after a crash
-- (Kafka) writes the same source and changes nothing, a new failure raises `attempts`.
-- Personal data: the envelope or conversion is in `value`; erasure deletes rows by workspace_id and event_id.
CREATE TABLE dead_letters (
  seq             bigserial UNIQUE,
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL,
  stage           text NOT NULL,
  topic           text NOT NULL,
  origin          text NOT NULL,
  source          text NOT NULL,
  event_id        text,
  reason          text NOT NULL,
  error           text,
  attempts        integer NOT NULL DEFAULT 1,
  -- dead: waiting for an operator; redriven: sent back through its stage (a new failure makes it dead again).
  status          text NOT NULL DEFAULT 'dead',
  -- The sender's event name behind a forwarder letter, when the setup of the time tells it (redrive remaps it).
  source_event    text,
  value           jsonb NOT NULL,
  first_failed_at timestamptz NOT NULL,
  last_failed_at  timestamptz NOT NULL,
  redriven_at     timestamptz,
  UNIQUE (topic, stage, workspace_id, origin)
);
CREATE INDEX dead_letters_workspace ON dead_letters (workspace_id, status, seq);
CREATE INDEX dead_letters_stage ON dead_letters (stage, status, first_failed_at);
CREATE INDEX dead_letters_event ON dead_letters (workspace_id, event_id);

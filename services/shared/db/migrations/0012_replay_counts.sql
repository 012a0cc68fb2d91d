-- Replay counts named for what became of each conversion: `conversions_sent` now counts only what was queued for
-- a live connection; what waits for the workspace to connect is `conversions_parked`, and what an earlier run
-- already left waiting in the outbox is `skipped_already_queued` (it used to sit in `dropped`, though nothing is lost).
ALTER TABLE replay_jobs ADD COLUMN conversions_parked bigint NOT NULL DEFAULT 0;
ALTER TABLE replay_jobs ADD COLUMN skipped_already_queued bigint NOT NULL DEFAULT 0;

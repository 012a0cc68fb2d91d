/** Replay metrics (docs/operations.md): bounded labels only, no job or workspace label. */
import { Counter, Gauge } from 'prom-client';
import type { Db } from '../shared/db/db.js';
import { registry } from '../shared/metrics.js';
import { ReplayRepo, viewOf } from './jobs.js';

export const replaysRunning = new Gauge({
  name: 'replays_running',
  help: 'Replay jobs this process is running now',
  registers: [registry],
});

export const replayEventsRead = new Counter({
  name: 'replay_events_read_total',
  help: "Events of the replayed workspaces' ranges read again by replay jobs",
  registers: [registry],
});

export const replayConversions = new Counter({
  name: 'replay_conversions_total',
  help: 'Conversions of replay jobs by outcome: built, sent (queued for a live connection), parked (queued until the workspace connects), skipped_already_sent, skipped_already_queued',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const replayJobs = new Gauge({
  name: 'replay_jobs',
  help: 'Replay jobs not yet ended, of every workspace, by status (queued, running); read from the database at scrape time',
  labelNames: ['status'] as const,
  registers: [registry],
});

export const replaySlowestProgress = new Gauge({
  name: 'replay_slowest_progress_ratio',
  help: 'Progress (0..1, as GET …/replays/{id} reports it) of the least advanced replay job not yet ended; 1 when none is queued or running',
  registers: [registry],
});

/** The scrape-time replay gauges (shared/metrics-scrape.ts calls it with the service's database). */
export async function readReplayGauges(db: Db): Promise<void> {
  const outstanding = (await new ReplayRepo(db).active()).map(viewOf);
  replayJobs.set({ status: 'queued' }, outstanding.filter((j) => j.status === 'queued').length);
  replayJobs.set({ status: 'running' }, outstanding.filter((j) => j.status === 'running').length);
  replaySlowestProgress.set(Math.min(1, ...outstanding.map((j) => j.progress)));
}

/** Replay metrics (docs/operations.md): bounded labels only, no job or workspace label. */
import { Counter, Gauge } from 'prom-client';
import { registry } from '../shared/metrics.js';

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
  help: 'Conversions of replay jobs by outcome: built, sent (filed for sending), skipped_already_sent',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

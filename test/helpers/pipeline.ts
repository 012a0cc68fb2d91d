/** Helpers for tests that run the whole service: wait for the stages to drain, then read topics from its store. */
import { join } from 'node:path';
import { openPglite } from '../../services/shared/db/pglite.js';
import type { AdminClient } from './admin-client.js';

export interface PipelineStatus {
  topics: Array<{ topic: string; end_offset: number }>;
  consumers: Array<{ group: string; topic: string; offset: number; lag: number }>;
}

export async function pipelineStatus(admin: AdminClient): Promise<PipelineStatus> {
  const r = await admin.call('GET', '/admin/v1/pipeline');
  if (r.status !== 200) throw new Error(`pipeline status: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The stages and their inputs, as in services/compose/pipeline.ts. */
export const STAGES = [
  { group: 'dedupe', topic: 'events.raw' },
  { group: 'enrich', topic: 'events.deduped' },
  // The graph sink: the identity graph's queryable tables are current once it has drained too.
  { group: 'identity-sink', topic: 'identity.graph-changes' },
] as const;

/**
 * Waits until every stage has consumed its whole input. One status read is one database snapshot, and a stage
 * commits its outputs with its offset, so "all lags 0" in one read means the pipeline is drained.
 */
export async function waitForDrain(admin: AdminClient, timeoutMs = 60_000): Promise<PipelineStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await pipelineStatus(admin);
    const drained = STAGES.every(({ group, topic }) => {
      const end = s.topics.find((t) => t.topic === topic)?.end_offset ?? 0;
      const c = s.consumers.find((x) => x.group === group && x.topic === topic);
      return end === 0 || (c !== undefined && c.lag === 0);
    });
    if (drained) return s;
    if (Date.now() > deadline) throw new Error(`pipeline not drained within ${timeoutMs} ms: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Reads a topic from a stopped service's embedded store (PGlite is single-process: stop the service first). */
export async function readTopic<V = any>(dataDir: string, topic: string): Promise<Array<{ key: string; value: V }>> {
  const db = await openPglite(join(dataDir, 'db'));
  try {
    const r = await db.query<{ key: string; value: V }>('SELECT key, value FROM log_records WHERE topic = $1 ORDER BY "offset"', [topic]);
    return r.rows;
  } finally {
    await db.close();
  }
}

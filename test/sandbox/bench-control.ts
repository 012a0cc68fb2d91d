import type { FastifyInstance } from 'fastify';
import { CONTROL_PREFIX } from './control.js';
import type { SandboxState } from './state.js';

/**
 * A control route for the benchmarks (bench/pipeline.ts): what arrived, compactly and in pages, so a run of 100,000
 * conversions can be correlated by event_id without shipping every whole record.
 *
 * `GET /_control/bench/received?after=<n>&limit=<m>` → `{total, next, items: [[event_id, received_at_ms], …]}`: the
 * received records from position `after` (0-based, arrival order), at most `limit` (default 10,000, max 50,000).
 */
export function registerBenchControlRoutes(app: FastifyInstance, state: SandboxState): void {
  app.get(`${CONTROL_PREFIX}/bench/received`, async (request) => {
    const q = request.query as Record<string, string | undefined>;
    const after = Math.max(0, Number(q.after ?? 0) || 0);
    const limit = Math.min(50_000, Math.max(1, Number(q.limit ?? 10_000) || 10_000));
    const slice = state.received.slice(after, after + limit);
    return {
      total: state.received.length,
      next: after + slice.length,
      items: slice.map((e) => [e.record.event_id, Date.parse(e.received_at)]),
    };
  });
}

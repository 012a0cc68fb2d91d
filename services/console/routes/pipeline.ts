/**
 * Admin API: where each stage of the embedded runtime stands, `GET /admin/v1/pipeline`. For operators (is a stage
 * behind?) and for tests that wait for the pipeline to drain. Read in ONE statement, so the numbers are one
 * consistent snapshot: a stage at the end of its input has also written everything that input produced.
 */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../shared/db/db.js';
import { toNumber } from '../../shared/db/db.js';
import { Topics } from '../../shared/topics.js';

export interface PipelineStatus {
  /** Last offset of each topic (0: empty). Offsets are positions, not counts. */
  readonly topics: Array<{ topic: string; end_offset: number }>;
  /** Each consumer group's committed offset and how many records of its topic lie after it. */
  readonly consumers: Array<{ group: string; topic: string; offset: number; lag: number }>;
}

export function pipelineRoutes(app: FastifyInstance, deps: { db: Db }): void {
  app.get('/admin/v1/pipeline', async (): Promise<PipelineStatus> => {
    const r = await deps.db.query<{ topic: string; end_offset: unknown; group_id: string | null; offset: unknown; lag: unknown }>(
      `SELECT t.topic, COALESCE((SELECT max(l."offset") FROM log_records l WHERE l.topic = t.topic), 0) AS end_offset,
              c.group_id, c."offset",
              (SELECT count(*) FROM log_records l WHERE l.topic = t.topic AND l."offset" > c."offset") AS lag
       FROM unnest($1::text[]) AS t(topic) LEFT JOIN consumer_offsets c ON c.topic = t.topic
       ORDER BY t.topic, c.group_id`,
      [Object.values(Topics)],
    );
    const topics = new Map<string, number>();
    const consumers: PipelineStatus['consumers'] = [];
    for (const row of r.rows) {
      topics.set(row.topic, toNumber(row.end_offset));
      if (row.group_id !== null) {
        consumers.push({ group: row.group_id, topic: row.topic, offset: toNumber(row.offset), lag: toNumber(row.lag) });
      }
    }
    return { topics: [...topics].map(([topic, end_offset]) => ({ topic, end_offset })), consumers };
  });
}

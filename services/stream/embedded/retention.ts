/**
 * Retention for the embedded log, as Kafka's `retention.ms` does it: records older than their topic's retention
 * are deleted, consumed or not (a stage that lags by a week loses what Kafka would lose). Deletes walk the oldest
 * rows by primary key in chunks, so a purge never scans a whole topic nor holds the store for long. Compacted
 * topics (the dedupe changelog) are not stored in the embedded log; state lives in state_store.
 */
import type { Db } from '../../shared/db/db.js';
import type { Logger } from '../../shared/logger.js';
import { TOPIC_SPECS, type TopicSpec } from '../../shared/topics.js';

const CHUNK = 5_000;

export function retentionMs(spec: TopicSpec): number | undefined {
  const v = spec.config['retention.ms'];
  return v === undefined ? undefined : Number(v);
}

/** Deletes expired records of every topic with a retention (default: TOPIC_SPECS). Returns how many were deleted. */
export async function purgeExpired(db: Db, now = Date.now(), specs: readonly TopicSpec[] = TOPIC_SPECS): Promise<number> {
  let total = 0;
  for (const spec of specs) {
    const ms = retentionMs(spec);
    if (ms === undefined) continue;
    const cutoff = new Date(now - ms).toISOString();
    for (;;) {
      const r = await db.query<{ n: unknown }>(
        `WITH oldest AS (SELECT "offset" FROM log_records WHERE topic = $1 ORDER BY "offset" LIMIT ${CHUNK}),
              gone AS (DELETE FROM log_records l USING oldest o
                       WHERE l.topic = $1 AND l."offset" = o."offset" AND l.appended_at < $2 RETURNING 1)
         SELECT count(*) AS n FROM gone`,
        [spec.name, cutoff],
      );
      const n = Number(r.rows[0]?.n ?? 0);
      total += n;
      if (n < CHUNK) break;
    }
  }
  return total;
}

/** Purges every `intervalMs` (default hourly) until stopped. */
export function startRetention(db: Db, logger: Logger, specs: readonly TopicSpec[] = TOPIC_SPECS, intervalMs = 3_600_000): { stop(): void } {
  const timer = setInterval(() => {
    purgeExpired(db, Date.now(), specs)
      .then((n) => n > 0 && logger.info({ deleted: n }, 'embedded log retention: deleted expired records'))
      .catch((err: unknown) => logger.warn({ err }, 'embedded log retention failed; will retry'));
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

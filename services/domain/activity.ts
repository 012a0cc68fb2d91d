/**
 * Hourly activity counts per workspace (table activity_counts), what the console's Activity page charts:
 * conversions delivered (and test events), failures by platform code, drops by reason. Written where the outcome
 * is decided, in the same transaction when there is one, as ONE statement per batch.
 */
import type { Sql } from '../shared/db/db.js';

export type ActivityKind = 'delivered' | 'test_delivered' | 'failed' | 'dropped';

export interface ActivityCount {
  readonly workspaceId: string;
  readonly kind: ActivityKind;
  /** The platform code for `failed`, the reason for `dropped`, '' otherwise. */
  readonly key?: string;
  readonly n: number;
}

export async function recordActivity(sql: Sql, counts: readonly ActivityCount[], at: Date = new Date()): Promise<void> {
  const live = counts.filter((c) => c.n > 0);
  if (live.length === 0) return;
  await sql.query(
    `INSERT INTO activity_counts AS a (workspace_id, hour, kind, key, n)
     SELECT w, date_trunc('hour', $5::timestamptz), k, key, n
     FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS t(w, k, key, n)
     ON CONFLICT (workspace_id, hour, kind, key) DO UPDATE SET n = a.n + EXCLUDED.n`,
    [live.map((c) => c.workspaceId), live.map((c) => c.kind), live.map((c) => c.key ?? ''), live.map((c) => c.n), at.toISOString()],
  );
}

/**
 * Conversion-level dedup on event_id, before forwarding: the first conversion per (workspace, key mode, event_id)
 * is claimed in conversion_ids, later ones are dropped. This is what catches endpoint B's repeats without an
 * Idempotency-Key (same payload, same derived id). The claim remembers the input record that made it, so the
 * replay of that very record (the Kafka runtime writes this on a pool, before its offset commit) emits again
 * rather than losing the conversion; the forwarder's sent ledger absorbs that repeat.
 */
import type { Sql } from '../shared/db/db.js';
import type { GraphScope } from './identity/graph-repo.js';

export async function claimEventId(sql: Sql, scope: GraphScope, eventId: string, source: string, at: number): Promise<boolean> {
  const inserted = await sql.query(
    `INSERT INTO conversion_ids (workspace_id, key_mode, event_id, source, first_seen_at) VALUES ($1, $2, $3, $4, $5::timestamptz)
     ON CONFLICT (workspace_id, key_mode, event_id) DO NOTHING RETURNING event_id`,
    [scope.workspaceId, scope.keyMode, eventId, source, new Date(at).toISOString()],
  );
  if (inserted.rows.length > 0) return true;
  const prior = await sql.query<{ source: string }>(
    'SELECT source FROM conversion_ids WHERE workspace_id = $1 AND key_mode = $2 AND event_id = $3',
    [scope.workspaceId, scope.keyMode, eventId],
  );
  return prior.rows[0]?.source === source;
}

/** Forgets claims older than the window (bounded table), in chunks. Returns how many went. */
export async function purgeConversionIds(sql: Sql, olderThanMs: number, chunk = 5_000): Promise<number> {
  const r = await sql.query<{ event_id: string }>(
    `DELETE FROM conversion_ids WHERE (workspace_id, key_mode, event_id) IN (
       SELECT workspace_id, key_mode, event_id FROM conversion_ids
       WHERE first_seen_at < now() - $1::double precision * interval '1 millisecond' LIMIT $2)
     RETURNING event_id`,
    [olderThanMs, chunk],
  );
  return r.rows.length;
}

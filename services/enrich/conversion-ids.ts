/**
 * Conversion-level dedup on event_id, before forwarding: the first conversion per (workspace, key mode, event_id)
 * is claimed in conversion_ids, later ones are dropped. This is what catches endpoint B's repeats without an
 * Idempotency-Key (same payload, same derived id). The claim remembers the input record that made it, so the
 * replay of that very record (the Kafka runtime writes this on a pool, before its offset commit) emits again
 * rather than losing the conversion; the forwarder's sent ledger absorbs that repeat.
 */
import type { Sql } from '../shared/db/db.js';
import type { GraphScope } from './identity/graph-repo.js';

export interface Claim {
  readonly scope: GraphScope;
  readonly eventId: string;
  /** The input record that claims it (topic/partition/offset). */
  readonly source: string;
  readonly at: number;
}

/**
 * Claims the event ids in order, for a whole batch in one statement (two when some were claimed before): true where
 * the claim is this record's, by a first insert or by this very record before (a replay). Within the batch, the
 * first of two records with one id wins, as one record at a time would.
 */
export async function claimEventIds(sql: Sql, claims: readonly Claim[]): Promise<boolean[]> {
  if (claims.length === 0) return [];
  const keyOf = (w: string, m: string, e: string): string => `${w}\n${m}\n${e}`;
  const inserted = await sql.query<{ workspace_id: string; key_mode: string; event_id: string; source: string }>(
    `INSERT INTO conversion_ids (workspace_id, key_mode, event_id, source, first_seen_at)
     SELECT w, m, e, s, at FROM jsonb_to_recordset($1::jsonb) AS t(w text, m text, e text, s text, at timestamptz)
     ON CONFLICT (workspace_id, key_mode, event_id) DO NOTHING
     RETURNING workspace_id, key_mode, event_id, source`,
    [
      JSON.stringify(
        claims.map((c) => ({ w: c.scope.workspaceId, m: c.scope.keyMode, e: c.eventId, s: c.source, at: new Date(c.at).toISOString() })),
      ),
    ],
  );
  const owner = new Map(inserted.rows.map((r) => [keyOf(r.workspace_id, r.key_mode, r.event_id), r.source]));
  const earlier = claims.filter((c) => !owner.has(keyOf(c.scope.workspaceId, c.scope.keyMode, c.eventId)));
  if (earlier.length > 0) {
    const prior = await sql.query<{ workspace_id: string; key_mode: string; event_id: string; source: string }>(
      `SELECT c.workspace_id, c.key_mode, c.event_id, c.source FROM conversion_ids c
       JOIN unnest($1::text[], $2::text[], $3::text[]) AS t(w, m, e) ON c.workspace_id = t.w AND c.key_mode = t.m AND c.event_id = t.e`,
      [earlier.map((c) => c.scope.workspaceId), earlier.map((c) => c.scope.keyMode), earlier.map((c) => c.eventId)],
    );
    for (const r of prior.rows) owner.set(keyOf(r.workspace_id, r.key_mode, r.event_id), r.source);
  }
  return claims.map((c) => owner.get(keyOf(c.scope.workspaceId, c.scope.keyMode, c.eventId)) === c.source);
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

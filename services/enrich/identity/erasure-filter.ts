/**
 * The redaction list of erasures (docs/privacy.md, "Erasure"): every identifier an erasure removed, kept only as
 * HMAC-SHA256 with the workspace's secret salt (privacy_salts), with the time of the erasure request. An envelope
 * received up to that time that carries one of them belongs to an erased person: the replay job and the export route
 * skip it (the Kafka raw topic cannot be rewritten), and enrich drops it (an event in flight at the erasure never
 * re-links what was erased). An event received after the erasure that brings the identifiers again is new data.
 *
 * Two ways to ask, one rule:
 *  - `ErasureFilter.load(sql, workspaceId)` then `filter.matches(envelope)`: for a job that reads many envelopes of
 *    one workspace (replay, export); loads the workspace's list once.
 *  - `erasedEnvelopes(sql, envelopes)`: set-based, one or two statements for a batch of any workspaces (enrich).
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../shared/envelope.js';
import { identifierNodesOf } from './identifiers.js';
import type { GraphKind, GraphNode } from './kinds.js';

/** The class an identifier is hashed under: the two email kinds are one class, as are the two phone kinds. */
const CLASS: Readonly<Record<GraphKind, string>> = {
  user_id: 'user',
  email_sha256: 'email',
  email_canonical_sha256: 'email',
  phone_e164_sha256: 'phone',
  phone_numeric_sha256: 'phone',
  client_id: 'client',
  session_id: 'session',
  ttclid: 'ttclid',
  organization: 'organization',
};

/** HMAC-SHA256(salt, class \n value), hex: the only form in which an erased identifier is kept. */
export const saltedHash = (salt: string, n: GraphNode): string => createHmac('sha256', salt).update(`${CLASS[n.kind]}\n${n.value}`).digest('hex');

/** The workspace's salt, created on first use (an upsert: two callers at once get the same one). */
export async function workspaceSalt(sql: Sql, workspaceId: string): Promise<string> {
  await sql.query('INSERT INTO privacy_salts (workspace_id, salt) VALUES ($1, $2) ON CONFLICT (workspace_id) DO NOTHING', [
    workspaceId,
    randomBytes(32).toString('hex'),
  ]);
  const r = await sql.query<{ salt: string }>('SELECT salt FROM privacy_salts WHERE workspace_id = $1', [workspaceId]);
  return r.rows[0]!.salt;
}

export class ErasureFilter {
  private constructor(
    private readonly workspaceId: string,
    private readonly salt: string | null,
    /** id_hash → erased_at (epoch ms). */
    private readonly erased: ReadonlyMap<string, number>,
  ) {}

  /** The workspace's whole redaction list (one statement). */
  static async load(sql: Sql, workspaceId: string): Promise<ErasureFilter> {
    const r = await sql.query<{ salt: string; id_hash: string | null; erased_at: number | null }>(
      `SELECT s.salt, e.id_hash, (extract(epoch from e.erased_at) * 1000)::float8 AS erased_at
       FROM privacy_salts s LEFT JOIN erased_identifiers e ON e.workspace_id = s.workspace_id WHERE s.workspace_id = $1`,
      [workspaceId],
    );
    const erased = new Map<string, number>();
    for (const row of r.rows) if (row.id_hash !== null) erased.set(row.id_hash, Number(row.erased_at));
    return new ErasureFilter(workspaceId, r.rows[0]?.salt ?? null, erased);
  }

  /** How many identifiers the list holds. */
  get size(): number {
    return this.erased.size;
  }

  /** The envelope belongs to an erased person: received no later than an erasure of one of its identifiers. */
  matches(e: EventEnvelope): boolean {
    if (this.salt === null || this.erased.size === 0 || e.workspace_id !== this.workspaceId) return false;
    return identifierNodesOf(e).some((n) => {
      const at = this.erased.get(saltedHash(this.salt!, n));
      return at !== undefined && e.received_at <= at;
    });
  }
}

/** The envelopes (of any workspaces) that belong to an erased person, set-based: for enrich's batches. */
export async function erasedEnvelopes(sql: Sql, envelopes: readonly EventEnvelope[]): Promise<boolean[]> {
  const out = envelopes.map(() => false);
  if (envelopes.length === 0) return out;
  // Usually empty: only workspaces that ever erased someone have a salt with a list.
  const salts = await sql.query<{ workspace_id: string; salt: string }>(
    `SELECT s.workspace_id, s.salt FROM privacy_salts s
     WHERE s.workspace_id = ANY($1::text[]) AND EXISTS (SELECT 1 FROM erased_identifiers e WHERE e.workspace_id = s.workspace_id)`,
    [[...new Set(envelopes.map((e) => e.workspace_id))]],
  );
  if (salts.rows.length === 0) return out;
  const saltOf = new Map(salts.rows.map((r) => [r.workspace_id, r.salt]));
  const asked: Array<{ i: number; workspace_id: string; id_hash: string; received_at: number }> = [];
  envelopes.forEach((e, i) => {
    const salt = saltOf.get(e.workspace_id);
    if (salt) for (const n of identifierNodesOf(e)) asked.push({ i, workspace_id: e.workspace_id, id_hash: saltedHash(salt, n), received_at: e.received_at });
  });
  if (asked.length === 0) return out;
  const hit = await sql.query<{ i: number }>(
    `SELECT DISTINCT t.i FROM jsonb_to_recordset($1::jsonb) AS t(i int, workspace_id text, id_hash text, received_at float8)
     JOIN erased_identifiers e ON e.workspace_id = t.workspace_id AND e.id_hash = t.id_hash
     WHERE to_timestamp(t.received_at / 1000.0) <= e.erased_at`,
    [JSON.stringify(asked)],
  );
  for (const row of hit.rows) out[Number(row.i)] = true;
  return out;
}

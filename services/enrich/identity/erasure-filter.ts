/**
 * The redaction list of erasures (docs/privacy.md, "Erasure"): every identifier an erasure removed, kept only as
 * HMAC-SHA256 with the workspace's secret salt, with the time of the erasure request. An envelope received up to that
 * time that carries one of them belongs to an erased person: replay and export skip it (the Kafka raw topic cannot be
 * rewritten) and enrich drops it, so an event in flight at the erasure never re-links what was erased; one received
 * after the erasure is new data. `ErasureFilter.load` suits a job reading many envelopes of one workspace;
 * `erasedEnvelopes` and `erasedConversions` are set-based, for a batch of any workspaces.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { ConversionReady, PlatformEventRecord } from '../../domain/conversion.js';
import type { Sql } from '../../shared/db/db.js';
import type { EventEnvelope } from '../../domain/envelope.js';
import { sha256Hex } from '../../shared/ids.js';
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
  fbclid: 'fbclid',
  gclid: 'gclid',
  gbraid: 'gbraid',
  wbraid: 'wbraid',
  organization: 'organization',
};

/** An identifier as the redaction list knows it: its class and value. */
export interface Mark {
  readonly cls: string;
  readonly value: string;
}

/**
 * The marks of graph nodes. A user id also gives its `external_id` mark (the SHA-256 a platform record carries), so
 * a conversion built before an erasure is recognised by the hashed user id too.
 */
export function marksOf(nodes: readonly GraphNode[]): Mark[] {
  return nodes.flatMap((n) => [
    { cls: CLASS[n.kind], value: n.value },
    ...(n.kind === 'user_id' ? [{ cls: 'external_id', value: sha256Hex(n.value) }] : []),
  ]);
}

/** The marks of a platform record: its hashed emails, phones and user ids, and its click id. */
export function recordMarks(record: PlatformEventRecord): Mark[] {
  const u = record.user ?? {};
  return [
    ...(u.email ?? []).map((value) => ({ cls: 'email', value })),
    ...(u.phone ?? []).map((value) => ({ cls: 'phone', value })),
    ...(u.external_id ?? []).map((value) => ({ cls: 'external_id', value })),
    ...(u.ttclid ? [{ cls: 'ttclid', value: u.ttclid }] : []),
  ];
}

/** HMAC-SHA256(salt, class \n value), hex: the only form in which an erased identifier is kept. */
export const saltedHash = (salt: string, m: Mark): string => createHmac('sha256', salt).update(`${m.cls}\n${m.value}`).digest('hex');

/** Advisory lock class of erasures (the second key is the workspace's hash). */
const ERASURE_LOCK_CLASS = 7_313;

/**
 * An erasure job holds its workspace's erasure lock exclusively until its transaction ends; the checks below hold it
 * shared until theirs ends. So a batch either ran wholly before the erasure (which then removes what it wrote), or
 * checks the redaction list after the erasure committed: nothing slips in between the check and the write.
 */
export async function lockForErasure(sql: Sql, workspaceId: string): Promise<void> {
  await sql.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ERASURE_LOCK_CLASS, workspaceId]);
}

async function holdAgainstErasures(sql: Sql, workspaceIds: readonly string[]): Promise<void> {
  await sql.query(
    `SELECT pg_advisory_xact_lock_shared($1, h) FROM (SELECT DISTINCT hashtext(w) AS h FROM unnest($2::text[]) AS w ORDER BY 1) AS s`,
    [ERASURE_LOCK_CLASS, workspaceIds],
  );
}

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
    return marksOf(identifierNodesOf(e)).some((m) => {
      const at = this.erased.get(saltedHash(this.salt!, m));
      return at !== undefined && e.received_at <= at;
    });
  }
}

/** The envelopes (of any workspaces) that belong to an erased person, set-based: for enrich's batches. */
export function erasedEnvelopes(sql: Sql, envelopes: readonly EventEnvelope[]): Promise<boolean[]> {
  return erased(
    sql,
    envelopes.map((e) => ({ workspaceId: e.workspace_id, receivedAt: e.received_at, marks: () => marksOf(identifierNodesOf(e)) })),
  );
}

/**
 * The conversions built from an erased person's events before the erasure, set-based: for the forwarder's intake (on
 * Kafka a conversion can be on conversions.ready, not yet filed, while the erasure runs).
 */
export function erasedConversions(sql: Sql, conversions: readonly ConversionReady[]): Promise<boolean[]> {
  return erased(
    sql,
    conversions.map((c) => ({ workspaceId: c.workspace_id, receivedAt: c.received_at, marks: () => recordMarks(c.record) })),
  );
}

/**
 * One rule for both: received no later than an erasure of one of its marks, in its workspace. Holds the workspaces'
 * erasure locks shared until the caller's transaction ends.
 */
async function erased(
  sql: Sql,
  items: ReadonlyArray<{ readonly workspaceId: string; readonly receivedAt: number; marks(): Mark[] }>,
): Promise<boolean[]> {
  const out = items.map(() => false);
  if (items.length === 0) return out;
  const workspaces = [...new Set(items.map((i) => i.workspaceId))];
  await holdAgainstErasures(sql, workspaces);
  // Usually empty: only workspaces that ever erased someone have a salt with a list.
  const salts = await sql.query<{ workspace_id: string; salt: string }>(
    `SELECT s.workspace_id, s.salt FROM privacy_salts s
     WHERE s.workspace_id = ANY($1::text[]) AND EXISTS (SELECT 1 FROM erased_identifiers e WHERE e.workspace_id = s.workspace_id)`,
    [workspaces],
  );
  if (salts.rows.length === 0) return out;
  const saltOf = new Map(salts.rows.map((r) => [r.workspace_id, r.salt]));
  const asked: Array<{ i: number; workspace_id: string; id_hash: string; received_at: number }> = [];
  items.forEach((item, i) => {
    const salt = saltOf.get(item.workspaceId);
    if (salt) for (const m of item.marks()) asked.push({ i, workspace_id: item.workspaceId, id_hash: saltedHash(salt, m), received_at: item.receivedAt });
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

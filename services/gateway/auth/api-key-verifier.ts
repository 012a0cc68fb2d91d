/**
 * Verifies bearer API keys by hash lookup. Outcomes are values (unkey's model). Lookups are cached for at most
 * CACHE_TTL_MS, so a revoked key answers 401 within that time on every replica without any notification channel.
 */
import { LRUCache } from 'lru-cache';
import { hashApiKey, looksLikeApiKey } from '../../domain/api-key-format.js';
import type { Sql } from '../../shared/db/db.js';
import type { KeyMode } from '../../domain/envelope.js';
import { UsageRecorder } from './usage.js';

/** Well inside the 5 s the operator contract allows for a revocation to take effect. */
export const CACHE_TTL_MS = 2_000;

export interface VerifiedKey {
  readonly keyId: string;
  readonly workspaceId: string;
  readonly mode: KeyMode;
  readonly plan: string;
}

export type Verification =
  | { readonly code: 'VALID'; readonly key: VerifiedKey }
  | { readonly code: 'MISSING' | 'MALFORMED' | 'NOT_FOUND' | 'REVOKED' };

type CachedLookup = VerifiedKey | 'NOT_FOUND' | 'REVOKED';

export class ApiKeyVerifier {
  private readonly cache = new LRUCache<string, CachedLookup>({ max: 50_000, ttl: CACHE_TTL_MS });

  /** Last-used times and event-name counts for the console, flushed in batches (usage.ts). */
  readonly usage: UsageRecorder;

  constructor(private readonly sql: Sql) {
    this.usage = new UsageRecorder(sql);
  }

  /** `authorization` is the raw header value. */
  async verify(authorization: string | undefined): Promise<Verification> {
    if (!authorization) return { code: 'MISSING' };
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!m || !looksLikeApiKey(m[1]!)) return { code: 'MALFORMED' };
    const hash = hashApiKey(m[1]!);
    let found = this.cache.get(hash);
    if (found === undefined) {
      found = await this.lookup(hash);
      this.cache.set(hash, found);
    }
    return typeof found === 'string' ? { code: found } : { code: 'VALID', key: found };
  }

  private async lookup(hash: string): Promise<CachedLookup> {
    const r = await this.sql.query<{ id: string; workspace_id: string; mode: KeyMode; revoked_at: unknown; plan: string }>(
      `SELECT k.id, k.workspace_id, k.mode, k.revoked_at, w.plan
       FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.key_hash = $1`,
      [hash],
    );
    const row = r.rows[0];
    if (!row) return 'NOT_FOUND';
    if (row.revoked_at !== null) return 'REVOKED';
    return { keyId: row.id, workspaceId: row.workspace_id, mode: row.mode, plan: row.plan };
  }
}

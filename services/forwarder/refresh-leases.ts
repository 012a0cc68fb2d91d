/**
 * The refresher's side of a connection row: which tokens are due, a row lease so that one refresher (of any
 * replica) renews a connection at a time, the renewed grant stored under that lease, and the backoff after a
 * transient failure. Writes are guarded by the lease and the connection's generation.
 */
import type { Db } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import type { ConnectionCredentials, LeasedConnection } from './connection-credentials.js';
import type { TokenGrant } from './platform-client.js';
import { tokenAad, type TokenCipher } from './token-cipher.js';

/**
 * How long before expiry a token is renewed: half the lifetime for short-lived tokens, else a tenth of it but at
 * least a minute (a 4 s token at 2 s, a 5 min token at 4 min, a 1 h token at 54 min, a 24 h token at 21.6 h).
 */
export function refreshLeadMs(lifetimeMs: number): number {
  return Math.min(lifetimeMs / 2, Math.max(lifetimeMs / 10, 60_000));
}

export class RefreshLeases {
  constructor(
    private readonly db: Db,
    private readonly cipher: TokenCipher,
    private readonly credentials: ConnectionCredentials,
  ) {}

  /** Connections whose refresh is due and not leased (candidates; the lease decides). */
  async dueForRefresh(limit: number): Promise<string[]> {
    const r = await this.db.query<{ workspace_id: string }>(
      `SELECT workspace_id FROM connections
       WHERE status = 'connected' AND refresh_token_enc IS NOT NULL AND refresh_due_at <= now()
         AND (refresh_lease_until IS NULL OR refresh_lease_until < now())
       ORDER BY refresh_due_at LIMIT $1`,
      [limit],
    );
    return r.rows.map((row) => row.workspace_id);
  }

  /**
   * Takes the refresh lease of a connection: one atomic UPDATE, so of two refreshers (in this process or in
   * replicas) exactly one gets it. Without `force`, only when the refresh is due. Null: not leased.
   */
  async leaseForRefresh(
    workspaceId: string,
    owner: string,
    leaseMs: number,
    opts: { force?: boolean } = {},
  ): Promise<LeasedConnection | null> {
    const r = await this.db.query<{ generation: unknown; access_token_enc: string; refresh_token_enc: string }>(
      `UPDATE connections SET refresh_lease_owner = $2, refresh_lease_until = now() + ${ms(leaseMs)}
       WHERE workspace_id = $1 AND status = 'connected' AND refresh_token_enc IS NOT NULL
         AND ($3 OR refresh_due_at <= now())
         AND (refresh_lease_until IS NULL OR refresh_lease_until < now())
       RETURNING generation, access_token_enc, refresh_token_enc`,
      [workspaceId, owner, opts.force === true],
    );
    const row = r.rows[0];
    return row ? this.credentials.open(workspaceId, row) : null;
  }

  /** Why leaseForRefresh returned null. */
  async whyNotLeased(workspaceId: string): Promise<'busy' | 'not_due' | 'not_connected'> {
    const r = await this.db.query<{ refreshable: boolean; leased: boolean }>(
      `SELECT (status = 'connected' AND refresh_token_enc IS NOT NULL) AS refreshable,
              (refresh_lease_until IS NOT NULL AND refresh_lease_until >= now()) AS leased
       FROM connections WHERE workspace_id = $1`,
      [workspaceId],
    );
    const row = r.rows[0];
    if (!row?.refreshable) return 'not_connected';
    return row.leased ? 'busy' : 'not_due';
  }

  /**
   * Stores a refreshed grant and releases the lease, atomically: the new access token and the rotated refresh
   * token (or the old one when the platform did not rotate) are one UPDATE. False when the lease or the
   * generation was lost meanwhile (nothing stored).
   */
  async storeRefreshed(leased: LeasedConnection, owner: string, grant: TokenGrant): Promise<boolean> {
    const ws = leased.workspaceId;
    const accessMs = grant.expiresIn === undefined ? null : grant.expiresIn * 1000;
    const refreshToken = grant.refreshToken ?? leased.refreshToken;
    const r = await this.db.query(
      `UPDATE connections SET
         access_token_enc = $4, refresh_token_enc = $5,
         access_expires_at = CASE WHEN $6::double precision IS NULL THEN NULL ELSE now() + ${ms('$6')} END,
         refresh_expires_at = CASE WHEN $7::double precision IS NULL THEN refresh_expires_at
                                   ELSE now() + ${ms('$7')} END,
         refresh_due_at = CASE WHEN $8::double precision IS NULL THEN NULL ELSE now() + ${ms('$8')} END,
         refresh_failures = 0, refresh_lease_owner = NULL, refresh_lease_until = NULL,
         last_refreshed_at = now(), status_reason = NULL, updated_at = now()
       WHERE workspace_id = $1 AND refresh_lease_owner = $2 AND generation = $3 AND status = 'connected'
       RETURNING workspace_id`,
      [
        ws,
        owner,
        leased.generation,
        this.cipher.seal(grant.accessToken, tokenAad.access(ws)),
        refreshToken === null ? null : this.cipher.seal(refreshToken, tokenAad.refresh(ws)),
        accessMs,
        grant.refreshExpiresIn === undefined ? null : grant.refreshExpiresIn * 1000,
        accessMs === null || refreshToken === null ? null : accessMs - refreshLeadMs(accessMs),
      ],
    );
    return r.rows.length === 1;
  }

  /** A transient refresh failure: try again after delayMs, release the lease. */
  async refreshFailed(leased: LeasedConnection, owner: string, delayMs: number, reason: string): Promise<void> {
    await this.db.query(
      `UPDATE connections SET refresh_due_at = now() + ${ms(delayMs)}, refresh_failures = refresh_failures + 1,
              refresh_lease_owner = NULL, refresh_lease_until = NULL, status_reason = $4, updated_at = now()
       WHERE workspace_id = $1 AND refresh_lease_owner = $2 AND generation = $3`,
      [leased.workspaceId, owner, leased.generation, reason],
    );
  }

  async refreshFailures(workspaceId: string): Promise<number> {
    const r = await this.db.query<{ refresh_failures: unknown }>(
      'SELECT refresh_failures FROM connections WHERE workspace_id = $1',
      [workspaceId],
    );
    return r.rows[0] ? toNumber(r.rows[0].refresh_failures) : 0;
  }
}

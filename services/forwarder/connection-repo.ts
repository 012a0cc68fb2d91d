/**
 * The workspace's platform connection in the database: its lifecycle (connected, needs_reauth, disconnected) and
 * what the admin API reads; its tokens at rest (connection-credentials.ts), the refresher's lease
 * (refresh-leases.ts) and the sender's (send-leases.ts) are parts of it. Every write that follows slow work (a platform call) is
 * guarded by the connection's `generation`, so work begun before a reconnect or a disconnect never overwrites
 * what came after it. Times are the database's clock (`now()`), so replicas with skewed clocks agree.
 */
import { recordActivity } from '../domain/activity.js';
import { audit } from '../domain/audit-log.js';
import type { Db, Sql } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import { ConnectionCredentials } from './connection-credentials.js';
import type { TokenGrant } from './platform-client.js';
import { refreshLeadMs, RefreshLeases } from './refresh-leases.js';
import { SendLeases } from './send-leases.js';
import { tokenAad, type TokenCipher } from './token-cipher.js';

export type ConnectionStatus = 'connected' | 'needs_reauth' | 'disconnected';

export interface ConnectionView {
  readonly workspaceId: string;
  readonly status: ConnectionStatus;
  readonly advertiserId: string | null;
  readonly timeZone: string | null;
  readonly accessExpiresAt: Date | null;
  readonly refreshExpiresAt: Date | null;
  readonly connectedAt: Date | null;
  readonly lastRefreshedAt: Date | null;
  readonly statusReason: string | null;
  /** Machine-readable cause of the status, e.g. `credentials_unreadable`; null when none. */
  readonly statusCode: string | null;
}

const toDate = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string));

interface ConnectionRow {
  workspace_id: string;
  status: ConnectionStatus;
  advertiser_id: string | null;
  time_zone: string | null;
  access_expires_at: unknown;
  refresh_expires_at: unknown;
  connected_at: unknown;
  last_refreshed_at: unknown;
  status_reason: string | null;
  status_code: string | null;
}

export class ConnectionRepo {
  /** Its tokens at rest (sealing, opening, re-sealing, the unreadable ones parked). */
  readonly credentials: ConnectionCredentials;
  /** The refresher's lease, renewed grants and backoff. */
  readonly refresh: RefreshLeases;
  /** The sender's lease and backoff. */
  readonly sending: SendLeases;

  constructor(
    private readonly db: Db,
    private readonly cipher: TokenCipher,
    /** Told when a connection was parked because its tokens do not open (metrics, logs). */
    onUnreadable?: (workspaceId: string, parked: number, reason: string) => void,
  ) {
    this.credentials = new ConnectionCredentials(db, cipher, (...a) => this.park(...a), onUnreadable);
    this.refresh = new RefreshLeases(db, cipher, this.credentials);
    this.sending = new SendLeases(db, this.credentials);
  }

  async get(workspaceId: string, sql: Sql = this.db): Promise<ConnectionView | undefined> {
    const r = await sql.query<ConnectionRow>(
      `SELECT workspace_id, status, advertiser_id, time_zone, access_expires_at, refresh_expires_at, connected_at,
              last_refreshed_at, status_reason, status_code
       FROM connections WHERE workspace_id = $1`,
      [workspaceId],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    return {
      workspaceId: row.workspace_id,
      status: row.status,
      advertiserId: row.advertiser_id,
      timeZone: row.time_zone,
      accessExpiresAt: toDate(row.access_expires_at),
      refreshExpiresAt: toDate(row.refresh_expires_at),
      connectedAt: toDate(row.connected_at),
      lastRefreshedAt: toDate(row.last_refreshed_at),
      statusReason: row.status_reason,
      statusCode: row.status_code,
    };
  }

  /** Stores a fresh grant from the OAuth callback: status connected, a new generation, leases and backoff cleared. */
  async storeConnected(
    tx: Sql,
    c: { workspaceId: string; advertiserId: string; timeZone: string; grant: TokenGrant },
  ): Promise<void> {
    const g = c.grant;
    const accessMs = g.expiresIn === undefined ? null : g.expiresIn * 1000;
    await tx.query(
      `INSERT INTO connections (workspace_id, status, advertiser_id, time_zone, generation, advertiser_ids, scope,
                                access_token_enc, refresh_token_enc, access_expires_at, refresh_expires_at,
                                refresh_due_at, connected_at, updated_at)
       VALUES ($1, 'connected', $2, $3, 1, $4::jsonb, $5::jsonb, $6, $7,
               CASE WHEN $8::double precision IS NULL THEN NULL ELSE now() + ${ms('$8')} END,
               CASE WHEN $9::double precision IS NULL THEN NULL ELSE now() + ${ms('$9')} END,
               CASE WHEN $10::double precision IS NULL THEN NULL ELSE now() + ${ms('$10')} END,
               now(), now())
       ON CONFLICT (workspace_id) DO UPDATE SET
         status = 'connected', advertiser_id = EXCLUDED.advertiser_id, time_zone = EXCLUDED.time_zone,
         generation = connections.generation + 1, advertiser_ids = EXCLUDED.advertiser_ids, scope = EXCLUDED.scope,
         access_token_enc = EXCLUDED.access_token_enc, refresh_token_enc = EXCLUDED.refresh_token_enc,
         access_expires_at = EXCLUDED.access_expires_at, refresh_expires_at = EXCLUDED.refresh_expires_at,
         refresh_due_at = EXCLUDED.refresh_due_at, refresh_failures = 0,
         refresh_lease_owner = NULL, refresh_lease_until = NULL, send_lease_owner = NULL, send_lease_until = NULL,
         send_failures = 0, send_not_before = NULL, connected_at = now(), last_refreshed_at = NULL,
         status_reason = NULL, status_code = NULL, updated_at = now()`,
      [
        c.workspaceId,
        c.advertiserId,
        c.timeZone,
        JSON.stringify(g.advertiserIds),
        JSON.stringify(g.scope),
        this.cipher.seal(g.accessToken, tokenAad.access(c.workspaceId)),
        g.refreshToken === undefined ? null : this.cipher.seal(g.refreshToken, tokenAad.refresh(c.workspaceId)),
        accessMs,
        g.refreshExpiresIn === undefined ? null : g.refreshExpiresIn * 1000,
        accessMs === null || g.refreshToken === undefined ? null : accessMs - refreshLeadMs(accessMs),
      ],
    );
  }

  /**
   * The grant is gone (refresh refused as invalid, or a token error right after a refresh): status needs_reauth,
   * tokens deleted, leases released. The connection's outbox rows stay, parked. Returns how many are parked, or
   * null when the generation moved on (a reconnect happened meanwhile: nothing changed).
   */
  async markNeedsReauth(workspaceId: string, generation: number, reason: string): Promise<number | null> {
    return this.park(workspaceId, generation, reason, { code: null, dropTokens: true, action: 'connection.needs_reauth' });
  }

  /**
   * Moves a connected connection to needs_reauth (its leases and backoff cleared) and audits it, in one
   * transaction; its outbox rows stay, parked. Returns how many are parked, or null when the generation moved on.
   */
  private async park(
    workspaceId: string,
    generation: number,
    reason: string,
    how: { code: string | null; dropTokens: boolean; action: string },
  ): Promise<number | null> {
    return this.db.transaction(async (tx) => {
      const tokens = how.dropTokens ? 'access_token_enc = NULL, refresh_token_enc = NULL, refresh_due_at = NULL,' : '';
      const r = await tx.query(
        `UPDATE connections SET status = 'needs_reauth', status_code = $4, status_reason = $3, ${tokens}
                refresh_lease_owner = NULL, refresh_lease_until = NULL,
                send_lease_owner = NULL, send_lease_until = NULL, send_failures = 0, send_not_before = NULL,
                updated_at = now()
         WHERE workspace_id = $1 AND generation = $2 AND status = 'connected'
         RETURNING workspace_id`,
        [workspaceId, generation, reason, how.code],
      );
      if (r.rows.length === 0) return null;
      await audit(tx, workspaceId, how.action, { reason });
      const n = await tx.query<{ n: unknown }>('SELECT count(*) AS n FROM forward_outbox WHERE workspace_id = $1', [workspaceId]);
      return toNumber(n.rows[0]!.n);
    });
  }


  /**
   * Disconnect, in one transaction: status disconnected, tokens deleted, a new generation (in-flight work cannot
   * write back), open OAuth flows cancelled, the connection's queued conversions deleted, and the revocation of the
   * access token queued. Returns the queued conversions dropped and the id of the revocation to attempt, if any.
   */
  async disconnect(workspaceId: string, actor = 'admin'): Promise<{ dropped: number; revocationId: number | null }> {
    return this.db.transaction(async (tx) => {
      const prev = await tx.query<{ access_token_enc: string | null; access_expires_at: unknown }>(
        'SELECT access_token_enc, access_expires_at FROM connections WHERE workspace_id = $1 FOR UPDATE',
        [workspaceId],
      );
      await tx.query(
        `INSERT INTO connections (workspace_id, status, status_reason, generation, updated_at)
         VALUES ($1, 'disconnected', 'disconnected by the workspace', 1, now())
         ON CONFLICT (workspace_id) DO UPDATE SET
           status = 'disconnected', status_reason = 'disconnected by the workspace', generation = connections.generation + 1,
           access_token_enc = NULL, refresh_token_enc = NULL, access_expires_at = NULL, refresh_expires_at = NULL,
           refresh_due_at = NULL, refresh_failures = 0, refresh_lease_owner = NULL, refresh_lease_until = NULL,
           send_lease_owner = NULL, send_lease_until = NULL, send_failures = 0, send_not_before = NULL,
           status_code = NULL, updated_at = now()`,
        [workspaceId],
      );
      await tx.query(
        `UPDATE oauth_states SET used_at = now(), outcome = 'superseded' WHERE workspace_id = $1 AND used_at IS NULL`,
        [workspaceId],
      );
      const dropped = await tx.query('DELETE FROM forward_outbox WHERE workspace_id = $1 RETURNING id', [workspaceId]);
      let revocationId: number | null = null;
      const token = prev.rows[0]?.access_token_enc ?? null;
      if (token !== null) {
        const r = await tx.query<{ id: unknown }>(
          'INSERT INTO platform_revocations (workspace_id, access_token_enc, token_expires_at) VALUES ($1, $2, $3) RETURNING id',
          [workspaceId, token, prev.rows[0]!.access_expires_at ?? null],
        );
        revocationId = toNumber(r.rows[0]!.id);
      }
      await audit(tx, workspaceId, 'connection.disconnected', { dropped: dropped.rows.length }, actor);
      await recordActivity(tx, [{ workspaceId, kind: 'dropped', key: 'disconnected', n: dropped.rows.length }]);
      return { dropped: dropped.rows.length, revocationId };
    });
  }

  /** A token minted by a refresh that finished after a disconnect: queue its revocation too. */
  async queueRevocationIfDisconnected(workspaceId: string, accessToken: string): Promise<number | null> {
    const r = await this.db.query<{ id: unknown }>(
      `INSERT INTO platform_revocations (workspace_id, access_token_enc)
       SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM connections WHERE workspace_id = $1 AND status = 'disconnected')
       RETURNING id`,
      [workspaceId, this.cipher.seal(accessToken, tokenAad.access(workspaceId))],
    );
    return r.rows[0] ? toNumber(r.rows[0].id) : null;
  }

  /** Counts by status, for the connections gauge. */
  async countByStatus(): Promise<Record<ConnectionStatus, number>> {
    const r = await this.db.query<{ status: ConnectionStatus; n: unknown }>(
      'SELECT status, count(*) AS n FROM connections GROUP BY status',
    );
    const out: Record<ConnectionStatus, number> = { connected: 0, needs_reauth: 0, disconnected: 0 };
    for (const row of r.rows) out[row.status] = toNumber(row.n);
    return out;
  }
}

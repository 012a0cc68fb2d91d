/**
 * The workspace's platform connection in the database: status, advertiser, tokens (sealed with TokenCipher), the
 * refresher's and the sender's row leases and backoff. Every write that follows slow work (a platform call) is
 * guarded by the connection's `generation`, so work begun before a reconnect or a disconnect never overwrites
 * what came after it. Times are the database's clock (`now()`), so replicas with skewed clocks agree.
 */
import { recordActivity } from '../domain/activity.js';
import type { Db, Sql } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import type { TokenGrant } from './platform-client.js';
import { tokenAad, TokenCipherError, type TokenCipher } from './token-cipher.js';

export type ConnectionStatus = 'connected' | 'needs_reauth' | 'disconnected';

/** The status_code of a connection whose stored tokens do not open with the configured CREDENTIALS_KEY. */
export const CREDENTIALS_UNREADABLE = 'credentials_unreadable';

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

/** A leased connection: what the refresher or the sender needs, tokens opened. */
export interface LeasedConnection {
  readonly workspaceId: string;
  readonly generation: number;
  readonly accessToken: string;
  readonly refreshToken: string | null;
}

/**
 * How long before expiry a token is renewed: half the lifetime for short-lived tokens, else a tenth of it but at
 * least a minute (a 4 s token at 2 s, a 5 min token at 4 min, a 1 h token at 54 min, a 24 h token at 21.6 h).
 */
export function refreshLeadMs(lifetimeMs: number): number {
  return Math.min(lifetimeMs / 2, Math.max(lifetimeMs / 10, 60_000));
}

const ms = (v: number): string => `(${Number(v)}::double precision * interval '1 millisecond')`;
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
  constructor(
    private readonly db: Db,
    private readonly cipher: TokenCipher,
    /** Told when a connection was parked because its tokens do not open (metrics, logs). */
    private readonly onUnreadable?: (workspaceId: string, parked: number, reason: string) => void,
  ) {}

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
               CASE WHEN $8::double precision IS NULL THEN NULL ELSE now() + $8 * interval '1 millisecond' END,
               CASE WHEN $9::double precision IS NULL THEN NULL ELSE now() + $9 * interval '1 millisecond' END,
               CASE WHEN $10::double precision IS NULL THEN NULL ELSE now() + $10 * interval '1 millisecond' END,
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
    return row ? this.opened(workspaceId, row) : null;
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
         access_expires_at = CASE WHEN $6::double precision IS NULL THEN NULL ELSE now() + $6 * interval '1 millisecond' END,
         refresh_expires_at = CASE WHEN $7::double precision IS NULL THEN refresh_expires_at
                                   ELSE now() + $7 * interval '1 millisecond' END,
         refresh_due_at = CASE WHEN $8::double precision IS NULL THEN NULL ELSE now() + $8 * interval '1 millisecond' END,
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

  // ------------------------------------------------------------ the sender's lease and backoff

  /**
   * Connections that may send now (connected, not backing off, not leased by another) and have a batch ready: a
   * conversion that lingered long enough, or a full batch waiting.
   */
  async sendable(owner: string, limit: number, lingerMs: number, batchSize: number): Promise<string[]> {
    const r = await this.db.query<{ workspace_id: string }>(
      `SELECT c.workspace_id FROM connections c
       WHERE c.status = 'connected' AND c.access_token_enc IS NOT NULL
         AND (c.send_not_before IS NULL OR c.send_not_before <= now())
         AND (c.send_lease_until IS NULL OR c.send_lease_until < now() OR c.send_lease_owner = $1)
         AND (EXISTS (SELECT 1 FROM forward_outbox o WHERE o.workspace_id = c.workspace_id AND o.enqueued_at <= now() - ${ms(lingerMs)})
              OR (SELECT count(*) FROM (SELECT 1 FROM forward_outbox o WHERE o.workspace_id = c.workspace_id LIMIT $3) AS w) >= $3)
       ORDER BY c.send_not_before NULLS FIRST LIMIT $2`,
      [owner, limit, batchSize],
    );
    return r.rows.map((row) => row.workspace_id);
  }

  async leaseForSending(workspaceId: string, owner: string, leaseMs: number): Promise<LeasedConnection | null> {
    const r = await this.db.query<{ generation: unknown; access_token_enc: string; refresh_token_enc: string | null }>(
      `UPDATE connections SET send_lease_owner = $2, send_lease_until = now() + ${ms(leaseMs)}
       WHERE workspace_id = $1 AND status = 'connected' AND access_token_enc IS NOT NULL
         AND (send_not_before IS NULL OR send_not_before <= now())
         AND (send_lease_until IS NULL OR send_lease_until < now() OR send_lease_owner = $2)
       RETURNING generation, access_token_enc, refresh_token_enc`,
      [workspaceId, owner],
    );
    const row = r.rows[0];
    return row ? this.opened(workspaceId, row) : null;
  }

  /** Re-reads the tokens of a connection the sender holds (after a refresh); null when it left `connected`. */
  async currentTokens(workspaceId: string): Promise<LeasedConnection | null> {
    const r = await this.db.query<{ generation: unknown; access_token_enc: string; refresh_token_enc: string | null }>(
      `SELECT generation, access_token_enc, refresh_token_enc FROM connections
       WHERE workspace_id = $1 AND status = 'connected' AND access_token_enc IS NOT NULL`,
      [workspaceId],
    );
    const row = r.rows[0];
    return row ? this.opened(workspaceId, row) : null;
  }

  /** Extends the send lease; false when it was lost (then the sender stops). */
  async renewSendLease(workspaceId: string, owner: string, generation: number, leaseMs: number): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE connections SET send_lease_until = now() + ${ms(leaseMs)}
       WHERE workspace_id = $1 AND send_lease_owner = $2 AND generation = $3 AND status = 'connected' RETURNING workspace_id`,
      [workspaceId, owner, generation],
    );
    return r.rows.length === 1;
  }

  async releaseSendLease(workspaceId: string, owner: string): Promise<void> {
    await this.db.query(
      'UPDATE connections SET send_lease_owner = NULL, send_lease_until = NULL WHERE workspace_id = $1 AND send_lease_owner = $2',
      [workspaceId, owner],
    );
  }

  /** Backs the connection's sending off for delayMs and counts the failure (the next delay grows with it). */
  async sendBackoff(workspaceId: string, generation: number, delayMs: number): Promise<void> {
    await this.db.query(
      `UPDATE connections SET send_failures = send_failures + 1, send_not_before = now() + ${ms(delayMs)}
       WHERE workspace_id = $1 AND generation = $2`,
      [workspaceId, generation],
    );
  }

  /** Backs sending off after an unexpected error (no generation at hand): counts the failure, releases the lease. */
  async sendBackoffAfterError(workspaceId: string, delayMs: number): Promise<void> {
    await this.db.query(
      `UPDATE connections SET send_failures = send_failures + 1, send_not_before = now() + ${ms(delayMs)},
              send_lease_owner = NULL, send_lease_until = NULL
       WHERE workspace_id = $1`,
      [workspaceId],
    );
  }

  async sendFailures(workspaceId: string): Promise<number> {
    const r = await this.db.query<{ send_failures: unknown }>('SELECT send_failures FROM connections WHERE workspace_id = $1', [
      workspaceId,
    ]);
    return r.rows[0] ? toNumber(r.rows[0].send_failures) : 0;
  }

  async resetSendBackoff(tx: Sql, workspaceId: string, generation: number): Promise<void> {
    await tx.query(
      `UPDATE connections SET send_failures = 0, send_not_before = NULL
       WHERE workspace_id = $1 AND generation = $2 AND send_failures <> 0`,
      [workspaceId, generation],
    );
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

  /**
   * Re-seals tokens written under an older credentials key with the current one (after a key rotation), a few rows
   * at a time. Returns how many rows were re-sealed.
   */
  async resealStale(limit: number): Promise<number> {
    const older = this.cipher.previousKeyIds;
    if (older.length === 0) return 0;
    const r = await this.db.query<{ workspace_id: string; access_token_enc: string | null; refresh_token_enc: string | null }>(
      `SELECT workspace_id, access_token_enc, refresh_token_enc FROM connections
       WHERE split_part(access_token_enc, ':', 1) = ANY($1::text[]) OR split_part(refresh_token_enc, ':', 1) = ANY($1::text[])
       LIMIT $2`,
      [older, limit],
    );
    let n = 0;
    for (const row of r.rows) {
      const ws = row.workspace_id;
      const reseal = (v: string | null, aad: string): string | null =>
        v === null ? null : this.cipher.isStale(v) ? this.cipher.seal(this.cipher.open(v, aad), aad) : v;
      let access: string | null;
      let refresh: string | null;
      try {
        access = reseal(row.access_token_enc, tokenAad.access(ws));
        refresh = reseal(row.refresh_token_enc, tokenAad.refresh(ws));
      } catch (err) {
        if (err instanceof TokenCipherError) continue; // the sender parks it when it next tries (opened())
        throw err;
      }
      const u = await this.db.query(
        `UPDATE connections SET access_token_enc = $2, refresh_token_enc = $3
         WHERE workspace_id = $1 AND access_token_enc IS NOT DISTINCT FROM $4 AND refresh_token_enc IS NOT DISTINCT FROM $5
         RETURNING workspace_id`,
        [
          ws,
          access,
          refresh,
          row.access_token_enc,
          row.refresh_token_enc,
        ],
      );
      n += u.rows.length;
    }
    return n;
  }

  /**
   * Opens a row's tokens. Tokens that do not open (a wrong CREDENTIALS_KEY, a missing previous key) park the
   * connection (markCredentialsUnreadable) and give null: the caller skips it like any connection not connected,
   * so one unreadable row never makes a loop retry at once, nor takes the others down.
   */
  private async opened(
    workspaceId: string,
    row: { generation: unknown; access_token_enc: string; refresh_token_enc: string | null },
  ): Promise<LeasedConnection | null> {
    const generation = toNumber(row.generation);
    try {
      return {
        workspaceId,
        generation,
        accessToken: this.cipher.open(row.access_token_enc, tokenAad.access(workspaceId)),
        refreshToken: row.refresh_token_enc === null ? null : this.cipher.open(row.refresh_token_enc, tokenAad.refresh(workspaceId)),
      };
    } catch (err) {
      if (!(err instanceof TokenCipherError)) throw err;
      await this.markCredentialsUnreadable(workspaceId, generation, err.message);
      return null;
    }
  }

  /**
   * The stored tokens do not open: status needs_reauth with status_code credentials_unreadable and the reason,
   * leases and backoff cleared, ciphertexts KEPT (the key may be what is wrong: restoreReadable() brings the
   * connection back once they open again). Its conversions stay in the outbox, parked. Returns how many are
   * parked, or null when the generation moved on.
   */
  async markCredentialsUnreadable(workspaceId: string, generation: number, why: string): Promise<number | null> {
    const reason = `stored credentials cannot be opened with CREDENTIALS_KEY (${why}): restore the key that sealed them and restart, or connect again`;
    const parked = await this.park(workspaceId, generation, reason, {
      code: CREDENTIALS_UNREADABLE,
      dropTokens: false,
      action: 'connection.credentials_unreadable',
    });
    if (parked !== null) this.onUnreadable?.(workspaceId, parked, reason);
    return parked;
  }

  /**
   * Connections parked as credentials_unreadable whose tokens open now (the right key is back after a restart):
   * connected again, their parked conversions flow. Returns the workspaces restored.
   */
  async restoreReadable(limit: number): Promise<string[]> {
    const r = await this.db.query<{ workspace_id: string; generation: unknown; access_token_enc: string | null; refresh_token_enc: string | null }>(
      `SELECT workspace_id, generation, access_token_enc, refresh_token_enc FROM connections
       WHERE status = 'needs_reauth' AND status_code = '${CREDENTIALS_UNREADABLE}' LIMIT $1`,
      [limit],
    );
    const restored: string[] = [];
    for (const row of r.rows) {
      const ws = row.workspace_id;
      try {
        if (row.access_token_enc !== null) this.cipher.open(row.access_token_enc, tokenAad.access(ws));
        if (row.refresh_token_enc !== null) this.cipher.open(row.refresh_token_enc, tokenAad.refresh(ws));
      } catch (err) {
        if (err instanceof TokenCipherError) continue;
        throw err;
      }
      const u = await this.db.query(
        `UPDATE connections SET status = 'connected', status_code = NULL, status_reason = NULL, updated_at = now()
         WHERE workspace_id = $1 AND generation = $2 AND status_code = '${CREDENTIALS_UNREADABLE}' RETURNING workspace_id`,
        [ws, toNumber(row.generation)],
      );
      if (u.rows.length === 1) restored.push(ws);
    }
    return restored;
  }
}

export async function audit(
  tx: Sql,
  workspaceId: string,
  action: string,
  detail: Record<string, unknown>,
  actor: string = 'forwarder',
): Promise<void> {
  await tx.query('INSERT INTO audit_log (workspace_id, actor, action, detail) VALUES ($1, $2, $3, $4::jsonb)', [
    workspaceId,
    actor,
    action,
    JSON.stringify(detail),
  ]);
}

/**
 * The sender's side of a connection row: which connections have a batch ready, a row lease so that one sender (of
 * any replica) sends for a connection at a time, and the backoff after failed sends (its delay grows with the
 * failures counted here). Writes are guarded by the lease and the connection's generation.
 */
import type { Db, Sql } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import type { ConnectionCredentials, LeasedConnection } from './connection-credentials.js';
import { FORWARD_OUTBOX } from './outbox-repo.js';
import { readyGroupsSql } from './outbox-ready.js';

export class SendLeases {
  constructor(
    private readonly db: Db,
    private readonly credentials: ConnectionCredentials,
  ) {}

  /**
   * Connections that may send now (connected, not backing off, not leased by another) and have a batch ready: a
   * conversion that lingered long enough, or a full batch waiting. `draining`: the connections this sender drains
   * already, left out before their outboxes are looked at.
   */
  async sendable(owner: string, limit: number, lingerMs: number, batchSize: number, draining: readonly string[]): Promise<string[]> {
    const r = await this.db.query<{ workspace_id: string }>(
      `SELECT c.workspace_id FROM connections c
       WHERE c.status = 'connected' AND c.access_token_enc IS NOT NULL
         AND (c.send_not_before IS NULL OR c.send_not_before <= now())
         AND (c.send_lease_until IS NULL OR c.send_lease_until < now() OR c.send_lease_owner = $1)
         AND c.workspace_id <> ALL($4::text[])
         AND EXISTS (${readyGroupsSql(FORWARD_OUTBOX, 'c.workspace_id', ms(lingerMs), '$3')})
       ORDER BY c.send_not_before NULLS FIRST LIMIT $2`,
      [owner, limit, batchSize, draining],
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
    return row ? this.credentials.open(workspaceId, row) : null;
  }

  /** Re-reads the tokens of a connection the sender holds (after a refresh); null when it left `connected`. */
  async currentTokens(workspaceId: string): Promise<LeasedConnection | null> {
    const r = await this.db.query<{ generation: unknown; access_token_enc: string; refresh_token_enc: string | null }>(
      `SELECT generation, access_token_enc, refresh_token_enc FROM connections
       WHERE workspace_id = $1 AND status = 'connected' AND access_token_enc IS NOT NULL`,
      [workspaceId],
    );
    const row = r.rows[0];
    return row ? this.credentials.open(workspaceId, row) : null;
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
}

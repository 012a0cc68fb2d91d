/**
 * A connection's tokens at rest: sealed with the credentials key (token-cipher.ts), opened for the refresher and the
 * sender, re-sealed under the current key after a rotation, and a connection whose tokens do not open parked as
 * `credentials_unreadable` until the right key is back.
 */
import type { Db } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import { tokenAad, TokenCipherError, type TokenCipher } from './token-cipher.js';

/** The status_code of a connection whose stored tokens do not open with the configured CREDENTIALS_KEY. */
export const CREDENTIALS_UNREADABLE = 'credentials_unreadable';

/** A leased connection: what the refresher or the sender needs, tokens opened. */
export interface LeasedConnection {
  readonly workspaceId: string;
  readonly generation: number;
  readonly accessToken: string;
  readonly refreshToken: string | null;
}

/** Moves a connected connection to needs_reauth (connection-repo.ts): how many conversions it parked, or null. */
export type Park = (
  workspaceId: string,
  generation: number,
  reason: string,
  how: { code: string | null; dropTokens: boolean; action: string },
) => Promise<number | null>;

export class ConnectionCredentials {
  constructor(
    private readonly db: Db,
    private readonly cipher: TokenCipher,
    private readonly park: Park,
    /** Told when a connection was parked because its tokens do not open (metrics, logs). */
    private readonly onUnreadable?: (workspaceId: string, parked: number, reason: string) => void,
  ) {}

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
        if (err instanceof TokenCipherError) continue; // the sender parks it when it next tries (open())
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
  async open(
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

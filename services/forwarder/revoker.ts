/**
 * Revocation of a disconnected workspace's token at the platform: best effort. The local deletion has already
 * happened (ConnectionRepo.disconnect); a revocation the platform did not confirm stays queued, its token sealed,
 * and is retried with backoff until the platform confirms, the token expires (then it is useless) or the
 * attempts run out. Each attempt leases its row (next_attempt_at moves ahead first), so replicas never race.
 */
import type { Db } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import type { Logger } from '../shared/logger.js';
import { retryDelayMs, type BackoffPolicy } from './backoff.js';
import { classify } from './classify.js';
import { revocations } from './metrics.js';
import type { PlatformClient } from './platform-client.js';
import { tokenAad, type TokenCipher } from './token-cipher.js';

export type RevocationOutcome = 'revoked' | 'retry' | 'gave_up' | 'not_due';

const MAX_ATTEMPTS = 20;

export class Revoker {
  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly cipher: TokenCipher;
      readonly client: PlatformClient;
      readonly logger: Logger;
      readonly backoff: BackoffPolicy;
      /** How long one attempt holds its row. */
      readonly leaseMs: number;
    },
  ) {}

  /** Attempts one queued revocation now, if no one else is. */
  async attempt(id: number): Promise<RevocationOutcome> {
    const { db, cipher, client, logger } = this.deps;
    const r = await db.query<{ workspace_id: string; access_token_enc: string; expired: boolean; attempts: unknown }>(
      `UPDATE platform_revocations SET attempts = attempts + 1,
              next_attempt_at = now() + ${ms('$2')}
       WHERE id = $1 AND next_attempt_at <= now()
       RETURNING workspace_id, access_token_enc, attempts,
                 (token_expires_at IS NOT NULL AND token_expires_at <= now()) AS expired`,
      [id, this.deps.leaseMs],
    );
    const row = r.rows[0];
    if (!row) return 'not_due';
    const ws = row.workspace_id;
    const attempts = toNumber(row.attempts);
    if (row.expired) {
      await this.remove(id);
      logger.info({ workspace: ws }, 'revocation dropped: the token has expired and is useless now');
      revocations.inc({ outcome: 'gave_up' });
      return 'gave_up';
    }
    let token: string;
    try {
      token = cipher.open(row.access_token_enc, tokenAad.access(ws));
    } catch (err) {
      await this.remove(id);
      logger.error({ workspace: ws, err }, 'revocation dropped: the stored token does not open');
      revocations.inc({ outcome: 'gave_up' });
      return 'gave_up';
    }
    const answer = await client.revoke(token);
    const c = classify(answer);
    // A token error means the platform no longer knows the token: it is as revoked as it gets.
    if (c.kind === 'ok' || c.kind === 'token') {
      await this.remove(id);
      logger.info({ workspace: ws, code: answer.code }, 'token revoked at the platform');
      revocations.inc({ outcome: 'revoked' });
      return 'revoked';
    }
    const reason = c.kind === 'retry' ? c.reason : `${c.code}: ${c.message}`;
    if (attempts >= MAX_ATTEMPTS) {
      await this.remove(id);
      logger.error({ workspace: ws, reason, attempts }, 'revocation abandoned after repeated failures; revoke access on the platform side');
      revocations.inc({ outcome: 'gave_up' });
      return 'gave_up';
    }
    const delay = retryDelayMs(attempts - 1, this.deps.backoff, c.kind === 'retry' ? c.retryAfterMs : null);
    await db.query(
      `UPDATE platform_revocations SET next_attempt_at = now() + ${ms('$2')},
              last_error = $3 WHERE id = $1`,
      [id, delay, reason.slice(0, 500)],
    );
    logger.warn({ workspace: ws, reason, attempts, retry_in_ms: delay }, 'token revocation failed; will retry');
    revocations.inc({ outcome: 'retry' });
    return 'retry';
  }

  /** Attempts every revocation that is due. */
  async runDue(limit = 20): Promise<void> {
    const r = await this.deps.db.query<{ id: unknown }>(
      'SELECT id FROM platform_revocations WHERE next_attempt_at <= now() ORDER BY next_attempt_at LIMIT $1',
      [limit],
    );
    for (const row of r.rows) await this.attempt(toNumber(row.id));
  }

  private async remove(id: number): Promise<void> {
    await this.deps.db.query('DELETE FROM platform_revocations WHERE id = $1', [id]);
  }
}

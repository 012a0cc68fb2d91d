/**
 * @fastify/session's store in the service's database (table console_sessions), so sessions hold across replicas
 * and restarts and signing out ends them everywhere. Keyed by the SHA-256 of the session id: a read of the table
 * does not yield usable cookies.
 */
import type { Db } from '../../shared/db/db.js';
import { sha256Hex } from '../../shared/ids.js';

import type { FastifySessionObject, SessionStore } from '@fastify/session';

type Callback = (err?: unknown) => void;
type GetCallback = (err: unknown, session?: FastifySessionObject | null) => void;

export class DbSessionStore implements SessionStore {
  private lastPurge = 0;

  constructor(
    private readonly db: Db,
    private readonly maxAgeMs: number,
  ) {}

  set(sessionId: string, session: FastifySessionObject, callback: Callback): void {
    const expires = session.cookie?.expires ? new Date(session.cookie.expires) : new Date(Date.now() + this.maxAgeMs);
    this.db
      .query(
        `INSERT INTO console_sessions (sid_hash, data, expires_at) VALUES ($1, $2::jsonb, $3)
         ON CONFLICT (sid_hash) DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at`,
        [sha256Hex(sessionId), JSON.stringify(session), expires.toISOString()],
      )
      .then(() => this.purgeNowAndThen())
      .then(() => callback(), callback);
  }

  get(sessionId: string, callback: GetCallback): void {
    this.db
      .query<{ data: FastifySessionObject }>('SELECT data FROM console_sessions WHERE sid_hash = $1 AND expires_at > now()', [sha256Hex(sessionId)])
      .then((r) => callback(null, r.rows[0]?.data ?? null), (err) => callback(err));
  }

  destroy(sessionId: string, callback: Callback): void {
    this.db.query('DELETE FROM console_sessions WHERE sid_hash = $1', [sha256Hex(sessionId)]).then(() => callback(), callback);
  }

  /** Expired sessions go at most once a minute, on some write. */
  private async purgeNowAndThen(): Promise<void> {
    if (Date.now() - this.lastPurge < 60_000) return;
    this.lastPurge = Date.now();
    await this.db.query('DELETE FROM console_sessions WHERE expires_at <= now()');
  }
}

/**
 * The service's HTTP surface built in-process on an in-memory embedded store, for `app.inject` tests: no sockets,
 * no sleeps. The store, log and limiter are the real ones.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../services/compose/app.js';
import { createPlatformSide } from '../../services/compose/platform.js';
import { ApiKeyVerifier } from '../../services/gateway/auth/api-key-verifier.js';
import { createRateLimiter } from '../../services/gateway/rate-limit.js';
import { loadConfig, type Config } from '../../services/shared/config.js';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { silentLogger } from '../../services/shared/logger.js';
import { EmbeddedLog } from '../../services/stream/embedded/log.js';

export const ADMIN = 'test-admin-token-0123456789';

export interface TestApp {
  readonly app: FastifyInstance;
  readonly db: Db;
  readonly log: EmbeddedLog;
  readonly config: Config;
  /** Creates a workspace and a key through the admin API. */
  workspaceWithKey(opts?: { plan?: string; mode?: 'live' | 'test' }): Promise<{ workspaceId: string; key: string; keyId: string }>;
  close(): Promise<void>;
}

/** `console: true` adds the console at /console and the connection routes (the platform side without its loops). */
export async function buildTestApp(env: Record<string, string> = {}, opts: { console?: boolean } = {}): Promise<TestApp> {
  // NOTE: event-loop shedding off unless a test asks for it: on a loaded CI machine the delay of a test process is
  // the machine's, not the service's (the overload tests set GATEWAY_MAX_EVENT_LOOP_DELAY_MS themselves).
  const config = loadConfig({ ADMIN_TOKEN: ADMIN, PUBLIC_BASE_URL: 'http://ingest.test', GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0', ...env });
  const db = await openDatabase({ inMemory: true });
  const log = new EmbeddedLog(db);
  const rateLimit = await createRateLimiter(config, () => undefined);
  const platform = opts.console
    ? createPlatformSide({ config, db, credentialsKey: Buffer.alloc(32, 7), logger: silentLogger, roles: { forwarder: false, refresher: false, console: true } })
    : undefined;
  const app = await buildApp({
    config,
    db,
    logger: silentLogger,
    ingest: {
      producer: log,
      verifier: new ApiKeyVerifier(db),
      limiter: rateLimit.limiter,
      runtime: 'embedded',
    },
    admin: true,
    adminExtensions: platform?.adminExtensions,
    publicExtensions: platform?.publicExtensions,
  });
  await app.ready();
  return {
    app,
    db,
    log,
    config,
    async workspaceWithKey(opts = {}) {
      const auth = { authorization: `Bearer ${ADMIN}` };
      const ws = await app.inject({ method: 'POST', url: '/admin/v1/workspaces', headers: auth, payload: { name: 'acme', plan: opts.plan ?? 'enterprise' } });
      if (ws.statusCode !== 201) throw new Error(ws.body);
      const workspaceId = ws.json().id as string;
      const k = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${workspaceId}/api-keys`, headers: auth, payload: { mode: opts.mode ?? 'live' } });
      if (k.statusCode !== 201) throw new Error(k.body);
      return { workspaceId, key: k.json().key as string, keyId: k.json().id as string };
    },
    async close() {
      await app.close();
      await platform?.close();
      await log.close();
      rateLimit.close();
      await db.close();
    },
  };
}

/** Rows of a topic in the embedded log, values parsed. */
export async function topicRows<V = any>(db: Db, topic: string): Promise<Array<{ key: string; value: V }>> {
  const r = await db.query<{ key: string; value: V }>('SELECT key, value FROM log_records WHERE topic = $1 ORDER BY "offset"', [topic]);
  return r.rows;
}

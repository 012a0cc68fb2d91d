/**
 * The whole service in this process (embedded default, in memory, listening on loopback; or the runtime `env`
 * selects: KAFKA_BROKERS, SCHEMA_REGISTRY_URL, DATABASE_URL, KAFKA_GROUP_PREFIX) with the TikTok sandbox, the Meta
 * stand-in and the Google stand-in, every platform's variables pointing at them: the destination tests' setting.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { googleServiceEnv, startGoogleSandbox, type RunningGoogleSandbox } from '../sandbox/google/app.js';
import { metaServiceEnv, startMetaSandbox, type RunningMetaSandbox } from '../sandbox/meta/app.js';
import { freePort } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { adminClient, type AdminClient } from './admin-client.js';
import { webEvent } from './factories.js';
import { sandboxServiceEnv } from './sre-flow.js';

export interface WithStandIns {
  readonly tiktok: RunningSandbox;
  readonly meta: RunningMetaSandbox;
  readonly google: RunningGoogleSandbox;
  readonly service: RunningService;
  readonly url: string;
  readonly admin: AdminClient;
  close(): Promise<void>;
}

export async function startWithStandIns(opts: {
  readonly name: string;
  readonly pixels: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}): Promise<WithStandIns> {
  const token = `${opts.name}-admin-token`;
  const tiktok = await startSandbox({ port: 0 });
  const meta = await startMetaSandbox({ pixels: [...opts.pixels] });
  const google = await startGoogleSandbox();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = loadConfig({
    ...sandboxServiceEnv(tiktok, port),
    ...metaServiceEnv(meta),
    ...googleServiceEnv(google),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), `${opts.name}-`)),
    ADMIN_TOKEN: token,
    LOG_LEVEL: 'silent',
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...opts.env,
  });
  const service = await startService(config, silentLogger, { inMemoryDb: !opts.env?.DATABASE_URL });
  await service.app.listen({ port, host: '127.0.0.1' });
  return {
    tiktok,
    meta,
    google,
    service,
    url,
    admin: adminClient(url, token),
    async close() {
      await service.close();
      await Promise.all([tiktok.close(), meta.close(), google.close()]);
    },
  };
}

/**
 * One web purchase (30 EUR) posted through the gateway with a fresh idempotency key, which is its event id; the
 * page URL carries the click ids the test wants. Expects the 202 and returns the event id.
 */
export async function sendPurchase(
  url: string,
  key: string,
  opts: { readonly pageLocation?: string; readonly consent?: Record<string, string>; readonly name?: string } = {},
): Promise<string> {
  const idem = `order-${Math.random().toString(36).slice(2)}`;
  const body = webEvent({
    ...(opts.name ? { event_name: opts.name } : {}),
    event_data: { page_location: opts.pageLocation ?? 'https://shop.example/checkout?ttclid=TT1&fbclid=FB1', value: 30, currency: 'EUR' },
    event_metadata: { idempotency_key: idem, ...(opts.consent ? { consent: opts.consent } : {}) },
  });
  const r = await fetch(`${url}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify([body]) });
  if (r.status !== 202) throw new Error(`POST /v1/events answered ${r.status}: ${await r.text()}`);
  return idem;
}

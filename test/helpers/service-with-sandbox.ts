/**
 * The whole service in this process, listening on loopback, with a platform sandbox: the embedded default in memory,
 * or the runtime that `env` selects (KAFKA_BROKERS, SCHEMA_REGISTRY_URL, DATABASE_URL, KAFKA_GROUP_PREFIX).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { freePort } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { adminClient, type AdminClient } from './admin-client.js';
import { eventually, sandboxPlatformEnv } from './forwarder-rig.js';
import { webEvent, type WebEvent } from './factories.js';
import { connectLikeABrowser } from '../sandbox/connect.js';
import { expect } from 'vitest';

/**
 * Waits until the clock has passed `ms`. The service (in this process) stamps received_at in whole milliseconds at
 * or before the answer: after this, a new timestamp is later than every event answered by `ms`.
 */
async function clockPast(ms: number): Promise<void> {
  while (Date.now() <= ms) await new Promise((r) => setImmediate(r));
}

export interface ServiceWithSandbox {
  readonly sandbox: RunningSandbox;
  readonly service: RunningService;
  readonly url: string;
  readonly admin: AdminClient;
  /** A workspace with a live key and SETUP, connected to the sandbox through the browser flow. */
  connectedWorkspace(name: string): Promise<{ ws: string; key: string }>;
  /** A workspace with a live key and nothing else (events it sends are dropped: no forwarding setup). */
  bareWorkspace(name: string): Promise<{ ws: string; key: string }>;
  /** PUT SETUP, then connect the ad account through the browser flow. */
  setUpForwarding(ws: string): Promise<void>;
  /** Waits until every live stage has processed everything in its input (GET /admin/v1/pipeline). */
  drained(): Promise<void>;
  /** POST /v1/events with the key; fails the test unless 202. */
  send(key: string, events: unknown[]): Promise<void>;
  /**
   * Two connected workspaces; `a` sends one event before `from`, then `inRange` events around `b`'s, all received in
   * [from, to), then one more after `to`. For the export's tests: exactly `inRange` belongs in a's export of [from, to).
   */
  exportScenario(inRange: number): Promise<{ a: { ws: string; key: string }; from: string; to: string; inRange: WebEvent[] }>;
  close(): Promise<void>;
}

/** The forwarding setup of these tests: `purchase` mapped to the platform's `Purchase`. */
export const SETUP = {
  event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7,
  events: [{ name: 'purchase', platform_event: 'Purchase' }],
};

export async function startServiceWithSandbox(adminToken: string, env: Record<string, string> = {}): Promise<ServiceWithSandbox> {
  const sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // The store is in memory (or DATABASE_URL's); the service still needs a DATA_DIR of its own, removed at close.
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-sandbox-'));
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: adminToken,
    PUBLIC_BASE_URL: url,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ...sandboxPlatformEnv(sandbox),
    FORWARDER_LINGER_MS: '20',
    FORWARDER_RETRY_BASE_MS: '30',
    FORWARDER_RETRY_MAX_MS: '300',
    LOG_LEVEL: 'silent',
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...env,
  });
  const service = await startService(config, silentLogger, { inMemoryDb: !env.DATABASE_URL });
  await service.app.listen({ port, host: '127.0.0.1' });
  const admin = adminClient(url, adminToken);
  const send = async (key: string, events: unknown[]): Promise<void> => {
    const r = await fetch(`${url}/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(events) });
    expect(r.status, await r.clone().text()).toBe(202);
  };
  const bareWorkspace = async (name: string): Promise<{ ws: string; key: string }> => {
    const ws = (await admin.createWorkspace(name)).id;
    return { ws, key: (await admin.createKey(ws, 'live')).key };
  };
  const setUpForwarding = async (ws: string): Promise<void> => {
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await connectLikeABrowser(started.body.authorize_url)).status).toBe(200);
  };
  const connectedWorkspace = async (name: string): Promise<{ ws: string; key: string }> => {
    const w = await bareWorkspace(name);
    await setUpForwarding(w.ws);
    return w;
  };
  return {
    sandbox,
    service,
    url,
    admin,
    connectedWorkspace,
    bareWorkspace,
    setUpForwarding,
    async drained() {
      await eventually('the pipeline drained', async () => {
        const r = await admin.call('GET', '/admin/v1/pipeline');
        return r.status === 200 && (r.body.consumers as Array<{ lag: number }>).every((c) => c.lag === 0);
      });
    },
    send,
    async exportScenario(n) {
      const a = await connectedWorkspace('export-a');
      const b = await connectedWorkspace('export-b');
      await send(a.key, [webEvent()]); // before the range
      await clockPast(Date.now());
      const from = new Date().toISOString();
      const inRange = Array.from({ length: n }, (_, i) => (i === 1 ? webEvent({ event_name: 'page_view' }) : webEvent()));
      await send(a.key, inRange.slice(0, 2));
      await send(b.key, [webEvent(), webEvent()]);
      await send(a.key, inRange.slice(2));
      await clockPast(Date.now());
      const toMs = Date.now();
      const to = new Date(toMs).toISOString();
      await clockPast(toMs);
      await send(a.key, [webEvent()]); // after the range
      return { a, from, to, inRange };
    },
    async close() {
      await service.close();
      await sandbox.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Starts a connection with the admin API (`POST …/connection`) and completes it in a browser-like flow. */
export async function connectThroughAdmin(admin: AdminClient, path: string): Promise<void> {
  const started = await admin.call('POST', path);
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const page = await connectLikeABrowser(started.body.authorize_url);
  expect(page.status, page.html).toBe(200);
}

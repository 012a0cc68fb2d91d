/**
 * The service restarted with a CREDENTIALS_KEY that does not open the stored tokens. The
 * real process (dist/, role all, embedded default) and the platform sandbox over loopback HTTP:
 * - ingestion, /healthz and /metrics keep answering promptly while conversions for that connection arrive;
 * - the connection shows needs_reauth with the reason, a metric counts the fault, its conversions are parked;
 * - restarted with the right key, the connection is restored and the parked conversions are delivered once.
 * Needs `npx tsc -p tsconfig.json` (dist/) like the other process tests.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventually, receivedBySandbox, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { adminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { startServiceProcess, TEST_ADMIN_TOKEN, type ServiceProcess } from '../helpers/service-process.js';
import { SETUP } from '../helpers/workspaces.js';

const rightKey = randomBytes(32).toString('base64');
const wrongKey = randomBytes(32).toString('base64');
let sandbox: RunningSandbox;
let svc: ServiceProcess | undefined;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await svc?.kill();
  await sandbox?.close();
});

function env(key: string): Record<string, string> {
  return {
    CREDENTIALS_KEY: key,
    ...sandboxPlatformEnv(sandbox),
    FORWARDER_LINGER_MS: '20',
    REFRESH_INTERVAL_MS: '100',
  };
}

/** Times one request; fails the test when it takes longer than `withinMs`. */
async function timed(what: string, request: () => Promise<Response>, withinMs: number): Promise<Response> {
  const started = performance.now();
  const res = await request();
  await res.arrayBuffer();
  const took = performance.now() - started;
  expect(took, `${what} took ${Math.round(took)} ms`).toBeLessThan(withinMs);
  return res;
}

it('a wrong CREDENTIALS_KEY parks the connection visibly and never slows ingestion or health', { timeout: 120_000 }, async () => {
  svc = await startServiceProcess({ env: env(rightKey) });
  const dataDir = svc.dataDir;
  let admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  const ws = (await admin.createWorkspace('wrong-key')).id;
  const key = (await admin.createKey(ws)).key;
  expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status).toBe(200);
  const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
  const page = await newBrowser().open(started.body.authorize_url);
  expect(page.status).toBe(200);
  expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/connection`)).body.status).toBe('connected');
  expect(await svc.stop()).toBe(0);

  // Restart with a key that cannot open the stored tokens.
  svc = await startServiceProcess({ dataDir, env: env(wrongKey) });
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  const post = (idem: string) =>
    fetch(`${svc!.url}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify([webEvent({ event_metadata: { idempotency_key: idem } })]),
    });
  const ids = Array.from({ length: 5 }, (_, i) => `wrong-key-${i}-${randomBytes(4).toString('hex')}`);
  for (const id of ids) expect((await timed('ingestion', () => post(id), 1_500)).status).toBe(202);

  // For three seconds after the conversions became due, everything answers promptly (generous bounds for a
  // loaded CI machine; the busy loop this guards against held them for minutes).
  const until = Date.now() + 3_000;
  for (let i = 0; Date.now() < until; i++) {
    expect((await timed('/healthz', () => fetch(`${svc!.url}/healthz`), 1_000)).status).toBe(200);
    expect((await timed('/metrics', () => fetch(svc!.metricsUrl), 1_000)).status).toBe(200);
    expect((await timed('ingestion', () => post(`wrong-key-extra-${i}-${randomBytes(4).toString('hex')}`), 1_500)).status).toBe(202);
  }

  const conn = await eventually('the connection parked', async () => {
    const c = (await admin.call('GET', `/admin/v1/workspaces/${ws}/connection`)).body;
    return c.status === 'needs_reauth' ? c : undefined;
  });
  expect(conn.reason).toContain('CREDENTIALS_KEY');
  const metrics = await (await fetch(svc.metricsUrl)).text();
  expect(metrics).toMatch(/^forwarder_connection_faults_total\{reason="credentials_unreadable"\} 1$/m);
  expect(metrics).toMatch(/^nodejs_eventloop_lag_p99_seconds \d/m);
  expect((await receivedBySandbox(sandbox)).filter((e) => ids.includes(e.event_id))).toEqual([]);
  expect(await svc.stop()).toBe(0);

  // The right key again: restored, and what waited is delivered once.
  svc = await startServiceProcess({ dataDir, env: env(rightKey) });
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  await eventually(
    'parked conversions delivered',
    async () => (await receivedBySandbox(sandbox)).filter((e) => ids.includes(e.event_id)).length === ids.length,
    30_000,
  );
  expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/connection`)).body).toMatchObject({ status: 'connected', reason: null });
});

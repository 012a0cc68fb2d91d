/**
 * The platform side end to end over real HTTP: the whole service (in this process, listening on loopback) and the
 * platform sandbox. Connect through the admin API, the authorize page and the callback; forward; refresh short
 * tokens before expiry with rotation while a second refresher races; a revocation at the platform parks
 * conversions until the workspace reconnects; disconnect; 503/40100 storms; a permanent rejection.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPlatformSide, type PlatformSide } from '../../services/compose/platform.js';
import type { ConversionDeadLetter } from '../../services/forwarder/outbox-repo.js';
import { conversion, eventually, receivedBySandbox, sandboxControl, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig, type Config } from '../../services/shared/config.js';
import { conversionKey, type ConversionReady } from '../../services/domain/conversion.js';
import { silentLogger } from '../../services/shared/logger.js';
import { registry } from '../../services/shared/metrics.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { freePort } from '../sandbox/ports.js';

const ADMIN = 'forwarding-e2e-admin-token';
let sandbox: RunningSandbox;
let service: RunningService;
let config: Config;
let url: string;
let admin: AdminClient;
const credentialsKey = randomBytes(32);

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'fwd-e2e-')),
    ADMIN_TOKEN: ADMIN,
    PUBLIC_BASE_URL: url,
    CREDENTIALS_KEY: credentialsKey.toString('base64'),
    ...sandboxPlatformEnv(sandbox),
    FORWARDER_LINGER_MS: '30',
    FORWARDER_RETRY_BASE_MS: '30',
    FORWARDER_RETRY_MAX_MS: '300',
    FORWARDER_REQUEST_TIMEOUT_MS: '3000',
    REFRESH_INTERVAL_MS: '100',
    LOG_LEVEL: 'silent',
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
  });
  service = await startService(config, silentLogger, { inMemoryDb: true });
  await service.app.listen({ port, host: '127.0.0.1' });
  admin = adminClient(url, ADMIN);
});
afterAll(async () => {
  await service?.close();
  await sandbox?.close();
});
afterEach(async () => {
  await fetch(`${sandbox.controlUrl}/faults`, { method: 'DELETE' });
});

/** The browser's part: open the authorize URL, follow the redirect to our callback. */
async function connectOverHttp(ws: string): Promise<{ status: number; page: string; callbackUrl: string }> {
  const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
  expect(started.status).toBe(200);
  expect(started.body.authorize_url.startsWith(`${url}/oauth/start?`)).toBe(true);
  // A browser: the start link sets the binding cookie, the platform sends it back to our callback.
  const page = await newBrowser().open(started.body.authorize_url);
  const callbackUrl = page.finalUrl;
  expect(callbackUrl.startsWith(`${url}/oauth/callback?`)).toBe(true);
  return { status: page.status, page: await page.text(), callbackUrl };
}
async function append(cs: readonly ConversionReady[]): Promise<void> {
  await service.log!.append(Topics.conversionsReady, cs.map((c) => ({ key: conversionKey(c), value: c })), Date.now() + 10_000);
}
async function receivedCount(ids: readonly string[]): Promise<Map<string, number>> {
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const e of await receivedBySandbox(sandbox)) if (counts.has(e.event_id)) counts.set(e.event_id, counts.get(e.event_id)! + 1);
  return counts;
}
async function deliveredOnce(ids: readonly string[], timeoutMs = 10_000): Promise<void> {
  await eventually(`${ids.length} conversions delivered`, async () => [...(await receivedCount(ids)).values()].every((n) => n >= 1), timeoutMs);
  // Once each: checked when none of them is left in the outbox (a row leaves it with the platform's answer), so a
  // second send, were there one, has happened by then.
  await eventually(`${ids.length} conversions out of the outbox`, async () =>
    (await service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM forward_outbox WHERE event_id = ANY($1::text[])', [ids])).rows[0]!.n === 0, timeoutMs);
  expect([...(await receivedCount(ids)).values()].every((n) => n === 1)).toBe(true);
}
async function connection(ws: string): Promise<Record<string, any>> {
  const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/connection`);
  expect(r.status).toBe(200);
  return r.body;
}
type MetricValues = Array<{ labels: object; value: number }>;
const matching = (values: MetricValues, labels: Record<string, string>): number =>
  values
    .filter((v) => Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want))
    .reduce((a, v) => a + v.value, 0);
async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  return matching((await registry.getSingleMetric(name)!.get()).values, labels);
}
// NOTE: forwarder_conversions_total has no workspace label (bounded series): a test counts from its own start.
let conversionsAtStart: MetricValues = [];
beforeEach(async () => {
  conversionsAtStart = (await registry.getSingleMetric('forwarder_conversions_total')!.get()).values;
});
async function conversionsCounted(labels: Record<string, string>): Promise<number> {
  return (await metricValue('forwarder_conversions_total', labels)) - matching(conversionsAtStart, labels);
}

describe('connecting', () => {
  it('connects by OAuth over HTTP and shows the connection', async () => {
    const ws = (await admin.createWorkspace('connect')).id;
    expect(await connection(ws)).toMatchObject({ status: 'disconnected', advertiser_id: null });
    const { status, page, callbackUrl } = await connectOverHttp(ws);
    expect(status).toBe(200);
    expect(page).toContain('Ad account connected');
    expect(page).toContain('7000000000000000001');
    const c = await connection(ws);
    expect(c).toMatchObject({ status: 'connected', advertiser_id: '7000000000000000001', time_zone: 'America/New_York' });
    expect(Date.parse(c.access_expires_at)).toBeGreaterThan(Date.now());

    // The same callback again: refused with a page, nothing changes.
    const replay = await fetch(callbackUrl);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('already used');
    expect(await connection(ws)).toEqual(c);
  });

  it('refuses a foreign state and a declined authorization with a clear page', async () => {
    const forged = await fetch(`${url}/oauth/callback?auth_code=abc&state=not-issued-here`);
    expect(forged.status).toBe(400);
    expect(forged.headers.get('cache-control')).toBe('no-store');
    expect(await forged.text()).toContain('not issued by this service');
    const denied = await fetch(`${url}/oauth/callback?error=access_denied&state=`);
    expect(denied.status).toBe(400);
  });

  it('answers clear errors on the admin routes', async () => {
    expect((await admin.call('POST', '/admin/v1/workspaces/ws_nope/connection')).status).toBe(404);
    expect((await admin.call('GET', '/admin/v1/workspaces/ws_nope/connection')).status).toBe(404);
    const anonymous = await fetch(`${url}/admin/v1/workspaces/ws_nope/connection`, { method: 'DELETE' });
    expect(anonymous.status).toBe(401);
  });
});

describe('forwarding', () => {
  it('forwards conversions appended to conversions.ready, once each', async () => {
    const ws = (await admin.createWorkspace('forward')).id;
    await connectOverHttp(ws);
    const cs = Array.from({ length: 25 }, () => conversion(ws));
    await append(cs);
    await deliveredOnce(cs.map((c) => c.event_id));
    // Counted once the sent ledger has the batch, which commits after the platform answered.
    await eventually('25 counted as forwarded', async () => (await conversionsCounted({ outcome: 'forwarded', code: '0' })) >= 25);
    expect(await conversionsCounted({ outcome: 'forwarded', code: '0' })).toBe(25);
  });

  it('conversions of a workspace not connected yet wait, then flow when it connects', async () => {
    const ws = (await admin.createWorkspace('late')).id;
    const c = conversion(ws);
    await append([c]);
    // Filed into the outbox (parked until the workspace connects), and not sent.
    await eventually('the conversion is parked in the outbox', async () =>
      (await service.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows.length > 0,
    );
    expect((await receivedCount([c.event_id])).get(c.event_id)).toBe(0);
    await connectOverHttp(ws);
    await deliveredOnce([c.event_id]);
  });

  it('503 and 40100 storms: every conversion is delivered once', async () => {
    const ws = (await admin.createWorkspace('storm')).id;
    await connectOverHttp(ws);
    await sandboxControl(sandbox, '/faults', {
      events: [
        { http_status: 503, times: 6 },
        { code: 40100, times: 6 },
        { http_status: 502, message: '<html>bad gateway</html>', times: 2 },
      ],
    });
    const cs = Array.from({ length: 10 }, () => conversion(ws));
    await append(cs);
    await deliveredOnce(cs.map((c) => c.event_id), 20_000);
    expect(await conversionsCounted({ outcome: 'retried' })).toBeGreaterThanOrEqual(14);
  });

  it('a permanent rejection goes to conversions.dlq with the platform code and message', async () => {
    const ws = (await admin.createWorkspace('reject')).id;
    await connectOverHttp(ws);
    const good = conversion(ws);
    const bad = conversion(ws, { record: { event_time: 1_767_225_600_000 } }); // milliseconds: refused
    await append([good, bad]);
    await deliveredOnce([good.event_id]);
    const letter = await eventually('dead letter', async () => {
      const r = await service.db.query<{ value: ConversionDeadLetter }>('SELECT value FROM log_records WHERE topic = $1', [Topics.conversionsDlq]);
      return r.rows.map((x) => x.value).find((v) => v.event_id === bad.event_id);
    });
    expect(letter).toMatchObject({ workspace_id: ws, platform_code: 40002, reason: 'platform_rejected' });
    expect(letter.platform_message).toContain('event_time');
    expect((await receivedCount([bad.event_id])).get(bad.event_id)).toBe(0);
  });
});

describe('keeping it fresh', () => {
  let racer: PlatformSide;
  afterAll(async () => {
    await racer?.close();
    await sandboxControl(sandbox, '/settings', { access_ttl_seconds: 86_400 });
  });

  it('refreshes tokens of a few seconds before they expire, rotating the refresh token, while a second refresher races', async () => {
    await sandboxControl(sandbox, '/settings', { access_ttl_seconds: 3 });
    const ws = (await admin.createWorkspace('fresh')).id;
    await connectOverHttp(ws);
    const first = await connection(ws);
    // A second replica's refresher on the same store.
    racer = createPlatformSide({
      config,
      db: service.db,
      credentialsKey,
      logger: silentLogger,
      roles: { forwarder: false, refresher: true, console: false },
    });
    racer.start();
    const callsBefore = (await sandboxControl(sandbox, '/calls')).calls.length;

    // Over three token lifetimes, forwarding never meets an expired token: a conversion sent in each lifetime, the
    // next one once the token has been refreshed again (a marker, not a guess at the 3 s lifetime).
    const callsSince = async () => (await sandboxControl(sandbox, '/calls')).calls.slice(callsBefore) as Array<{ endpoint: string; code: number }>;
    const ids: string[] = [];
    for (let lifetime = 1; lifetime <= 3; lifetime++) {
      const c = conversion(ws);
      ids.push(c.event_id);
      await append([c]);
      await deliveredOnce([c.event_id]);
      await eventually(`refresh ${lifetime}`, async () => (await callsSince()).filter((x) => x.endpoint === 'refresh').length >= lifetime, 20_000);
    }
    const last = conversion(ws);
    ids.push(last.event_id);
    await append([last]);
    await deliveredOnce(ids);
    const calls = await callsSince();
    const refreshes = calls.filter((c) => c.endpoint === 'refresh');
    expect(refreshes.length).toBeGreaterThanOrEqual(3);
    expect(refreshes.every((c) => c.code === 0)).toBe(true); // no rotated token replayed by the loser of a race
    expect(calls.filter((c) => c.endpoint === 'events').every((c) => c.code === 0)).toBe(true); // never expired
    const now = await connection(ws);
    expect(now.status).toBe('connected');
    expect(Date.parse(now.access_expires_at)).toBeGreaterThan(Date.parse(first.access_expires_at));
    expect(now.last_refreshed_at).not.toBeNull();
    // Only the newest refresh token is valid at the platform: the stored one is the rotated one.
    const tokens = await sandboxControl(sandbox, '/tokens');
    expect(tokens.refresh_tokens.length).toBeGreaterThan(0);
    expect(await metricValue('forwarder_token_refreshes_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(3);
  });
});

describe('revocation at the platform side', () => {
  it('parks conversions (not dropped, not retried in a loop), then resumes after reconnect', async () => {
    const ws = (await admin.createWorkspace('revoked')).id;
    await connectOverHttp(ws);
    await sandboxControl(sandbox, '/revoke-all', {});
    const cs = [conversion(ws), conversion(ws)];
    await append(cs);
    await eventually('needs_reauth', async () => (await connection(ws)).status === 'needs_reauth');
    const c = await connection(ws);
    expect(c.reason).toMatch(/4010[58]/);
    const eventsCalls = async () => (await sandboxControl(sandbox, '/calls?endpoint=events')).calls.length;
    const before = await eventsCalls();
    // The marker that the sender has gone round since: another workspace's conversion delivered. Parked, this
    // workspace added no call of its own in the meantime (no hot loop).
    const other = (await admin.createWorkspace('still-connected')).id;
    await connectOverHttp(other);
    const sentinel = conversion(other);
    await append([sentinel]);
    await deliveredOnce([sentinel.event_id]);
    expect(await eventsCalls()).toBe(before + 1);
    const parked = await service.db.query('SELECT event_id FROM forward_outbox WHERE workspace_id = $1', [ws]);
    expect(parked.rows).toHaveLength(2);
    expect(await conversionsCounted({ outcome: 'parked' })).toBe(2);

    const { status } = await connectOverHttp(ws);
    expect(status).toBe(200);
    await deliveredOnce(cs.map((x) => x.event_id));
    expect((await connection(ws)).status).toBe('connected');
  });
});

describe('disconnecting', () => {
  it('deletes the credentials, revokes at the platform, drops what was queued and forwards nothing after', async () => {
    const ws = (await admin.createWorkspace('leaving')).id;
    await connectOverHttp(ws);
    // Keep conversions queued: the platform answers 503 for a while.
    await sandboxControl(sandbox, '/faults', { events: [{ http_status: 503, retry_after: 5, times: 1 }] });
    const queued = [conversion(ws), conversion(ws)];
    await append(queued);
    await eventually('backing off', async () => {
      const r = await service.db.query('SELECT 1 FROM connections WHERE workspace_id = $1 AND send_not_before > now()', [ws]);
      return r.rows.length === 1;
    });
    const revocationsBefore = (await sandboxControl(sandbox, '/revocations')).count;

    const del = await admin.call('DELETE', `/admin/v1/workspaces/${ws}/connection`);
    expect(del.status).toBe(204);

    const revocations = await sandboxControl(sandbox, '/revocations');
    expect(revocations.count).toBe(revocationsBefore + 1);
    expect(revocations.revocations.at(-1).outcome).toBe('revoked');
    const row = (await service.db.query('SELECT * FROM connections WHERE workspace_id = $1', [ws])).rows[0] as Record<string, unknown>;
    expect(row).toMatchObject({ status: 'disconnected', access_token_enc: null, refresh_token_enc: null });
    expect((await service.db.query('SELECT 1 FROM platform_revocations WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    expect((await service.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    expect(await conversionsCounted({ outcome: 'dropped', code: 'disconnected' })).toBe(2);
    expect(await connection(ws)).toMatchObject({ status: 'disconnected' });

    const after = [conversion(ws)];
    await append(after);
    // The intake has judged the new one (dropped: disconnected) before anything is checked.
    await eventually('the conversion after the disconnect is dropped', async () => (await conversionsCounted({ outcome: 'dropped', code: 'disconnected' })) >= 3);
    expect([...(await receivedCount([...queued, ...after].map((c) => c.event_id))).values()]).toEqual([0, 0, 0]);
    expect(await conversionsCounted({ outcome: 'dropped', code: 'disconnected' })).toBe(3);
  });

  it('a failed revocation is retried; the local deletion stands', async () => {
    const ws = (await admin.createWorkspace('revoke-retry')).id;
    await connectOverHttp(ws);
    await sandboxControl(sandbox, '/faults', { revoke: [{ http_status: 500, times: 2 }] });
    const del = await admin.call('DELETE', `/admin/v1/workspaces/${ws}/connection`);
    expect(del.status).toBe(204);
    const row = (await service.db.query('SELECT * FROM connections WHERE workspace_id = $1', [ws])).rows[0] as Record<string, unknown>;
    expect(row).toMatchObject({ status: 'disconnected', access_token_enc: null, refresh_token_enc: null });
    await eventually('revocation retried until confirmed', async () => {
      const left = await service.db.query('SELECT 1 FROM platform_revocations WHERE workspace_id = $1', [ws]);
      return left.rows.length === 0;
    });
    const revocations = (await sandboxControl(sandbox, '/revocations')).revocations as Array<{ outcome: string }>;
    expect(revocations.at(-1)!.outcome).toBe('revoked');
  });
});

/**
 * Replays end to end on the embedded default, over real HTTP: the whole service in this process, the platform
 * sandbox as the platform. Purchases sent before forwarding was set up are delivered by a replay; a second replay
 * sends nothing; a dry run counts and sends nothing; `resend` sends again once; another workspace's events are never
 * read; bad input gets problem documents.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { eventually, receivedBySandbox, SANDBOX_APP } from '../helpers/forwarder-rig.js';
import { SETUP } from '../helpers/workspaces.js';
import { freePort } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';

const ADMIN = 'replay-e2e-admin-token';
let sandbox: RunningSandbox;
let service: RunningService;
let url: string;
let admin: AdminClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'replay-e2e-')),
    ADMIN_TOKEN: ADMIN,
    PUBLIC_BASE_URL: url,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    PLATFORM_API_BASE: sandbox.apiBase,
    PLATFORM_AUTH_URL: sandbox.authUrl,
    PLATFORM_APP_ID: SANDBOX_APP.id,
    PLATFORM_APP_SECRET: SANDBOX_APP.secret,
    FORWARDER_LINGER_MS: '30',
    RAW_LOG_RETENTION_DAYS: '2',
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

async function newWorkspace(): Promise<{ ws: string; key: string }> {
  const ws = (await admin.createWorkspace('replay')).id;
  return { ws, key: (await admin.createKey(ws, 'live')).key };
}

async function send(key: string, events: unknown[]): Promise<void> {
  const r = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(events),
  });
  expect(r.status).toBe(202);
}

/** Waits until every live stage processed everything in its input. */
async function drained(): Promise<void> {
  await eventually('the pipeline drained', async () => {
    const r = await admin.call('GET', '/admin/v1/pipeline');
    return r.status === 200 && (r.body.consumers as Array<{ lag: number }>).every((c) => c.lag === 0);
  });
}

async function setUpForwarding(ws: string): Promise<void> {
  expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, test_event_code: null })).status).toBe(200);
  const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
  expect((await newBrowser().open(started.body.authorize_url)).status).toBe(200);
}

async function replay(ws: string, body: Record<string, unknown>): Promise<any> {
  const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, body);
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body.status).toBe('queued');
  return eventually(
    'the replay finished',
    async () => {
      const r = await admin.call('GET', `/admin/v1/workspaces/${ws}/replays/${started.body.id}`);
      return ['done', 'failed', 'cancelled'].includes(r.body.status) ? r.body : undefined;
    },
    20_000,
  );
}

const receivedFor = async (ids: ReadonlySet<string>): Promise<string[]> =>
  (await receivedBySandbox(sandbox)).map((e) => e.event_id).filter((id) => ids.has(id));

describe('replay', () => {
  it('delivers purchases sent before forwarding was set up, once, and a second replay sends nothing', async () => {
    const { ws, key } = await newWorkspace();
    const other = await newWorkspace();
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = [webEvent(), webEvent(), webEvent()];
    await send(key, [...purchases, webEvent({ event_name: 'page_view' })]);
    await send(other.key, [webEvent(), webEvent()]);
    await drained();
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    await setUpForwarding(ws);
    await setUpForwarding(other.ws);
    const to = new Date(Date.now() + 60_000).toISOString();
    expect(await receivedFor(ids)).toEqual([]);

    const dry = await replay(ws, { from, to, dry_run: true });
    expect(dry).toMatchObject({ status: 'done', dry_run: true, progress: 1, events_read: 4, conversions_built: 3, conversions_sent: 3, skipped_already_sent: 0 });
    expect(dry.dropped).toEqual({ not_selected: 1 });
    await new Promise((r) => setTimeout(r, 300));
    expect(await receivedFor(ids)).toEqual([]);

    const first = await replay(ws, { from, to });
    // Only this workspace's events are read: the other's two purchases are not.
    expect(first).toMatchObject({ status: 'done', events_read: 4, conversions_built: 3, conversions_sent: 3, skipped_already_sent: 0, error: null });
    const got = await eventually('the platform received the replayed purchases', async () => {
      const r = await receivedFor(ids);
      return r.length >= 3 ? r : undefined;
    });
    expect(new Set(got)).toEqual(ids);
    expect(got).toHaveLength(3);

    const second = await replay(ws, { from, to });
    expect(second).toMatchObject({ status: 'done', events_read: 4, conversions_built: 3, conversions_sent: 0, skipped_already_sent: 3 });
    await new Promise((r) => setTimeout(r, 500));
    expect(await receivedFor(ids)).toHaveLength(3);

    // The other workspace's purchases were never replayed.
    const otherIds = new Set((await receivedBySandbox(sandbox)).map((e) => e.record.event_id as string));
    expect([...otherIds].filter((id) => !ids.has(id))).toEqual([]);
  });

  it('sends delivered conversions again with resend, once per replay', async () => {
    const { ws, key } = await newWorkspace();
    await setUpForwarding(ws);
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = [webEvent(), webEvent()];
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    await send(key, purchases);
    await eventually('live delivery', async () => (await receivedFor(ids)).length >= 2);
    const to = new Date(Date.now() + 60_000).toISOString();

    const plain = await replay(ws, { from, to });
    expect(plain).toMatchObject({ conversions_sent: 0, skipped_already_sent: 2 });
    const again = await replay(ws, { from, to, resend: true });
    expect(again).toMatchObject({ status: 'done', conversions_sent: 2, skipped_already_sent: 0 });
    await eventually('the resent conversions', async () => (await receivedFor(ids)).length >= 4);
    await new Promise((r) => setTimeout(r, 500));
    expect(await receivedFor(ids)).toHaveLength(4);
    // The resend refreshed the ledger: a plain replay now skips them again.
    expect(await replay(ws, { from, to })).toMatchObject({ conversions_sent: 0, skipped_already_sent: 2 });
  });

  it('lists jobs, cancels only what is still running, and refuses bad input with problem documents', async () => {
    const { ws } = await newWorkspace();
    const from = new Date(Date.now() - 60_000).toISOString();
    const to = new Date().toISOString();
    const done = await replay(ws, { from, to });
    expect(done.status).toBe('done');
    const list = await admin.call('GET', `/admin/v1/workspaces/${ws}/replays`);
    expect(list.status).toBe(200);
    expect(list.body.items.map((j: { id: string }) => j.id)).toEqual([done.id]);

    const cancelDone = await admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/${done.id}`);
    expect(cancelDone.status).toBe(409);
    expect(cancelDone.body.detail).toContain('done');

    const bad = async (body: unknown, status: number, detail: RegExp): Promise<void> => {
      const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, body);
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      expect(r.body.detail).toMatch(detail);
    };
    await bad({ from, to: from }, 400, /must be before/);
    await bad({ to }, 400, /from/);
    await bad({ from: 'yesterday', to }, 400, /from/);
    await bad({ from, to, dry_run: 'yes' }, 400, /dry_run/);
    await bad({ from, to, extra: 1 }, 400, /extra|additional/);
    const old = new Date(Date.now() - 3 * 86_400_000).toISOString();
    const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, { from: old, to });
    expect(r.status).toBe(422);
    expect(r.body.type).toMatch(/\/problems\/out-of-retention$/);
    expect(r.body.detail).toMatch(/RAW_LOG_RETENTION_DAYS=2.*oldest time still held is \d{4}-\d\d-\d\dT/);

    expect((await admin.call('POST', `/admin/v1/workspaces/ws_nope/replays`, { from, to })).status).toBe(404);
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/replays/rpl_nope`)).status).toBe(404);
    expect((await admin.call('DELETE', `/admin/v1/workspaces/${ws}/replays/rpl_nope`)).status).toBe(404);
    const stranger = await newWorkspace();
    expect((await admin.call('GET', `/admin/v1/workspaces/${stranger.ws}/replays/${done.id}`)).status).toBe(404);
    const noAuth = await fetch(`${url}/admin/v1/workspaces/${ws}/replays`, { method: 'POST' });
    expect(noAuth.status).toBe(401);
  });
});

import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../compose/app.js';
import { createPlatformSide, type PlatformSide } from '../../compose/platform.js';
import { conversion, sandboxControl, sandboxPlatformEnv, startRig, type ForwarderRig } from '../../../test/helpers/forwarder-rig.js';
import { metaServiceEnv, startMetaSandbox, type RunningMetaSandbox } from '../../../test/sandbox/meta/app.js';
import { googleServiceEnv, startGoogleSandbox, type RunningGoogleSandbox } from '../../../test/sandbox/google/app.js';
import { loadConfig } from '../../shared/config.js';
import { silentLogger } from '../../shared/logger.js';

const ADMIN = 'destination-routes-admin-token';
const auth = { authorization: `Bearer ${ADMIN}` };
const PIXEL = '4242424242';
let rig: ForwarderRig;
let meta: RunningMetaSandbox;
let app: FastifyInstance;
let bare: FastifyInstance;
let side: PlatformSide;
let metaEnv: Record<string, string>;
let google: RunningGoogleSandbox;

/** The admin app, and its platform side (whose destination sender shares its credentials key). */
async function appFor(env: Record<string, string>): Promise<{ app: FastifyInstance; side: PlatformSide }> {
  const config = loadConfig({ ADMIN_TOKEN: ADMIN, PUBLIC_BASE_URL: 'http://svc.test', FORWARDER_LINGER_MS: '0', ...env });
  const s = createPlatformSide({ config, db: rig.db, credentialsKey: randomBytes(32), logger: silentLogger, roles: { forwarder: true, refresher: false, console: true } });
  const built = await buildApp({ config, db: rig.db, logger: silentLogger, admin: true, adminExtensions: s.adminExtensions, publicExtensions: s.publicExtensions });
  await built.ready();
  return { app: built, side: s };
}

beforeAll(async () => {
  meta = await startMetaSandbox({ pixels: [PIXEL] });
  google = await startGoogleSandbox();
  metaEnv = { ...metaServiceEnv(meta), ...googleServiceEnv(google) };
  rig = await startRig({ env: { ...metaEnv, FORWARDER_LINGER_MS: '0' } });
  ({ app, side } = await appFor({ ...sandboxPlatformEnv(rig.sandbox), ...metaEnv }));
  ({ app: bare } = await appFor({}));
});
afterAll(async () => {
  await side?.close();
  await app?.close();
  await bare?.close();
  await rig?.close();
  await meta?.close();
  await google?.close();
});

const metaSetup = (over: Record<string, unknown> = {}) => ({
  pixel_id: PIXEL,
  action_source: 'website',
  pii_mode: 'hashed',
  events: [{ name: 'purchase', platform_event: 'Purchase' }],
  ...over,
});
const googleSetup = { customer_id: '1234567890', conversion_action_id: '555', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'purchase' }] };
const tiktokSetup = { event_source: 'WEB', event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] };

async function createMeta(ws: string, over: Record<string, unknown> = {}): Promise<{ id: string }> {
  const r = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload: { kind: 'meta', name: 'Meta main', setup: metaSetup(over) } });
  expect(r.statusCode, r.body).toBe(201);
  return r.json();
}

/** The whole browser side: the service's start link, Meta's dialog over HTTP, the callback with the cookie. */
async function connectInBrowser(ws: string, id: string): Promise<{ status: number; body: string; replay: () => Promise<number> }> {
  const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth });
  expect(started.statusCode, started.body).toBe(200);
  const start = new URL(started.json().authorize_url);
  const s = await app.inject({ method: 'GET', url: `${start.pathname}${start.search}` });
  expect(s.statusCode, s.body).toBe(302);
  const cookie = ([] as string[]).concat((s.headers['set-cookie'] as string | string[]) ?? []).map((c) => c.split(';')[0]).join('; ');
  const dialog = await fetch(String(s.headers.location), { redirect: 'manual' });
  const back = new URL(dialog.headers.get('location')!);
  expect(`${back.origin}${back.pathname}`).toBe('http://svc.test/oauth/destination/callback');
  const cb = await app.inject({ method: 'GET', url: `${back.pathname}${back.search}`, headers: { cookie } });
  return { status: cb.statusCode, body: cb.body, replay: async () => (await app.inject({ method: 'GET', url: `${back.pathname}${back.search}`, headers: { cookie } })).statusCode };
}

describe('/destinations', () => {
  it('lists the workspace\'s TikTok destination first, then the others; reads, replaces and removes them', async () => {
    const ws = await rig.workspace();
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth })).json()).toEqual({ items: [] });
    const t = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload: { kind: 'tiktok', name: 'TikTok', setup: tiktokSetup } });
    expect(t.statusCode, t.body).toBe(201);
    expect(t.json()).toMatchObject({ id: 'tiktok', kind: 'tiktok', status: 'disconnected', setup: { event_source_id: 'PIXEL123' } });
    // It is the workspace's forwarding setup (the contract's /forwarding).
    expect((await rig.db.query('SELECT event_source_id FROM forwarding_setups WHERE workspace_id = $1', [ws])).rows).toEqual([{ event_source_id: 'PIXEL123' }]);
    const m = await createMeta(ws);
    expect(m).toMatchObject({ kind: 'meta', name: 'Meta main', status: 'disconnected', setup: metaSetup() });
    const list = (await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth })).json().items;
    expect(list.map((d: { id: string }) => d.id)).toEqual(['tiktok', m.id]);

    const put = await app.inject({ method: 'PUT', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}`, headers: auth, payload: { name: 'Meta EU', setup: metaSetup({ test_event_code: 'TEST7' }) } });
    expect(put.json()).toMatchObject({ name: 'Meta EU', setup: { test_event_code: 'TEST7' } });
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}`, headers: auth })).json()).toMatchObject({ name: 'Meta EU' });
    expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}`, headers: auth })).statusCode).toBe(204);
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}`, headers: auth })).statusCode).toBe(404);
  });

  describe('bad input', () => {
    it.each([
      ['an unknown kind', { kind: 'snap', name: 'x', setup: metaSetup() }, 400, /kind/],
      ['no name', { kind: 'meta', setup: metaSetup() }, 400, /name/],
      ['a pixel id with letters', { kind: 'meta', name: 'x', setup: metaSetup({ pixel_id: 'px1' }) }, 422, /setup.pixel_id: must be the pixel/],
      ['an unknown action_source', { kind: 'meta', name: 'x', setup: metaSetup({ action_source: 'web' }) }, 422, /setup.action_source/],
      ['no events', { kind: 'meta', name: 'x', setup: metaSetup({ events: [] }) }, 422, /setup.events/],
      ['an event listed twice', { kind: 'meta', name: 'x', setup: metaSetup({ events: [{ name: 'a', platform_event: 'Lead' }, { name: 'a', platform_event: 'Purchase' }] }) }, 422, /listed more than once/],
      ['an unknown setup field', { kind: 'meta', name: 'x', setup: metaSetup({ pixel: '1' }) }, 422, /Unrecognized key/],
      ['a tiktok setup without events', { kind: 'tiktok', name: 'x', setup: { ...tiktokSetup, events: undefined } }, 422, /events/],
      ['a google setup with a dashed customer id', { kind: 'google', name: 'x', setup: { ...googleSetup, customer_id: '123-456-7890' } }, 422, /setup.customer_id/],
      ['a meta setup for a google destination', { kind: 'google', name: 'x', setup: metaSetup() }, 422, /setup/],
    ])('refuses %s', async (_n, payload, status, message) => {
      const ws = await rig.workspace();
      const r = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload });
      expect(r.statusCode).toBe(status);
      expect(r.body).toMatch(message);
    });

    it('a second TikTok destination is a destination of its own; the first one stays the forwarding setup', async () => {
      const ws = await rig.workspace();
      const post = (payload: unknown) => app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload });
      expect((await post({ kind: 'tiktok', name: 'a', setup: tiktokSetup })).json()).toMatchObject({ id: 'tiktok' });
      const second = await post({ kind: 'tiktok', name: 'b', setup: { ...tiktokSetup, event_source_id: 'PIXEL456' } });
      expect(second.statusCode, second.body).toBe(201);
      expect(second.json()).toMatchObject({ kind: 'tiktok', name: 'b', status: 'disconnected', setup: { event_source_id: 'PIXEL456' } });
      expect(second.json().id).toMatch(/^dst_/);
      const first = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/tiktok`, headers: auth });
      expect(first.json()).toMatchObject({ setup: { event_source_id: 'PIXEL123' } });
      const list = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth });
      expect(list.json().items.map((d: { id: string }) => d.id)).toEqual(['tiktok', second.json().id]);
      expect((await post({ kind: 'tiktok', name: 'c', setup: { ...tiktokSetup, event_source: 'NOPE' } })).statusCode).toBe(422);
      // Its connection starts the destination flow (the service's start link), not the workspace's.
      const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations/${second.json().id}/connection`, headers: auth });
      expect(started.statusCode, started.body).toBe(200);
      expect(started.json().authorize_url).toMatch(/^http:\/\/svc\.test\/oauth\/destination\/start\?state=/);
    });

    it('refuses a kind change, deleting the first TikTok one, and unknown ids', async () => {
      const ws = await rig.workspace();
      const m = await createMeta(ws);
      expect((await app.inject({ method: 'PUT', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}`, headers: auth, payload: { kind: 'tiktok', name: 'x', setup: tiktokSetup } })).statusCode).toBe(422);
      expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/tiktok`, headers: auth })).statusCode).toBe(409);
      expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/dst_nope`, headers: auth })).statusCode).toBe(404);
      expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/ws_nope/destinations`, headers: auth })).statusCode).toBe(404);
      expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations` })).statusCode).toBe(401);
    });
  });
});

describe('/destinations/{id}/connection (Meta)', () => {
  it('connects in the browser, re-authorises when Meta stops taking the token, and disconnects with revocation', async () => {
    const ws = await rig.workspace();
    const m = await createMeta(ws);
    const first = await connectInBrowser(ws, m.id);
    expect(first.status, first.body).toBe(200);
    expect(first.body).toContain('Destination connected');
    expect(await first.replay()).toBe(400); // the state is spent
    const conn = (await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).json();
    expect(conn).toMatchObject({ status: 'connected', account_id: PIXEL, time_zone: null });
    expect(Date.parse(conn.access_expires_at) - Date.now()).toBeGreaterThan(59 * 86_400_000);

    // Meta stops taking the token: the conversion waits, the destination asks for re-authorisation.
    await fetch(`${meta.controlUrl}/expire-tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const c = conversion(ws, { event_name: 'purchase', record: { event: 'CompletePayment', user: { email: ['d'.repeat(64)], user_agent: 'UA' }, properties: { value: 5, currency: 'EUR' } } });
    await rig.db.query('INSERT INTO forwarding_setups (workspace_id, event_source, event_source_id, pii_mode, click_window_days, events) VALUES ($1, $2, $3, $4, $5, $6::jsonb)', [ws, 'WEB', 'P', 'hashed', 7, JSON.stringify(tiktokSetup.events)]);
    await rig.append([c]);
    await rig.intake.drain();
    await side.destinationSender!.drain(m.id);
    const parked = (await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).json();
    expect(parked).toMatchObject({ status: 'needs_reauth', reason: expect.stringMatching(/190/) });

    const again = await connectInBrowser(ws, m.id);
    expect(again.status, again.body).toBe(200);
    await side.destinationSender!.drain(m.id);
    const received = ((await (await fetch(`${meta.controlUrl}/received`)).json()) as { events: Array<{ event: { event_id: string } }> }).events;
    expect(received.filter((e) => e.event.event_id === c.event_id)).toHaveLength(1);

    const revokesBefore = ((await (await fetch(`${meta.controlUrl}/calls?endpoint=revoke`)).json()) as { count: number }).count;
    expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).statusCode).toBe(204);
    const revokes = (await (await fetch(`${meta.controlUrl}/calls?endpoint=revoke`)).json()) as { count: number; calls: Array<{ code: number }> };
    expect(revokes.count - revokesBefore).toBe(1);
    expect(revokes.calls.at(-1)!.code).toBe(0);
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).json()).toMatchObject({ status: 'disconnected' });
  });

  describe('bad input', () => {
    it('a callback from another browser, a denied dialog, and an unconfigured Meta app change nothing', async () => {
      const ws = await rig.workspace();
      const m = await createMeta(ws);
      const started = (await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).json();
      const start = new URL(started.authorize_url);
      const s = await app.inject({ method: 'GET', url: `${start.pathname}${start.search}` });
      const dialog = await fetch(String(s.headers.location), { redirect: 'manual' });
      const back = new URL(dialog.headers.get('location')!);
      const other = await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` }); // no cookie
      expect(other.statusCode).toBe(400);
      expect(other.body).toMatch(/browser/);

      await fetch(`${meta.controlUrl}/settings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ deny_authorize: true }) });
      try {
        const denied = await connectInBrowser(ws, m.id);
        expect(denied.status).toBe(400);
        expect(denied.body).toMatch(/access_denied|Permissions error/);
      } finally {
        await fetch(`${meta.controlUrl}/settings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ deny_authorize: false }) });
      }
      expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth })).json()).toMatchObject({ status: 'disconnected' });

      const unconfigured = await bare.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations/${m.id}/connection`, headers: auth });
      expect(unconfigured.statusCode).toBe(503);
      expect(unconfigured.json().detail).toMatch(/META_APP_ID and META_APP_SECRET/);
    });
  });
});

describe('/destinations/{id}/connection (a second TikTok destination)', () => {
  it('connects in the browser through the destination flow, reads its advertiser and time zone, and revokes on disconnect', async () => {
    const ws = await rig.workspace();
    const post = (payload: unknown) => app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload });
    expect((await post({ kind: 'tiktok', name: 'TikTok', setup: tiktokSetup })).statusCode).toBe(201);
    const id = (await post({ kind: 'tiktok', name: 'TikTok two', setup: { ...tiktokSetup, event_source_id: 'PIXEL456' } })).json().id as string;
    const c = await connectInBrowser(ws, id);
    expect(c.status, c.body).toBe(200);
    expect(await c.replay()).toBe(400);
    const connection = (await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth })).json();
    expect(connection).toMatchObject({ status: 'connected', account_id: expect.stringMatching(/^\d+$/), time_zone: 'America/New_York', access_expires_at: expect.any(String) });
    // The workspace's own connection is another one: still not connected.
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/tiktok/connection`, headers: auth })).json()).toMatchObject({ status: 'disconnected' });

    const revoked = async () => ((await sandboxControl(rig.sandbox, '/revocations')).revocations as Array<{ outcome: string }>).filter((r) => r.outcome === 'revoked').length;
    const before = await revoked();
    expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth })).statusCode).toBe(204);
    expect(await revoked()).toBe(before + 1);
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth })).json()).toMatchObject({ status: 'disconnected' });

    const unconfigured = await bare.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth });
    expect(unconfigured.statusCode).toBe(503);
    expect(unconfigured.json().detail).toMatch(/PLATFORM_APP_ID and PLATFORM_APP_SECRET/);
    expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/${id}`, headers: auth })).statusCode).toBe(204);
  });
});

describe('/destinations/{id}/connection (Google)', () => {
  it('connects with a refresh token, refreshes when the access token expires, re-authorises when the grant is gone, and revokes on disconnect', async () => {
    const ws = await rig.workspace();
    const created = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/destinations`, headers: auth, payload: { kind: 'google', name: 'Google Ads', setup: googleSetup } });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const c = await connectInBrowser(ws, id);
    expect(c.status, c.body).toBe(200);
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth })).json()).toMatchObject({ status: 'connected', account_id: '1234567890' });

    await rig.db.query('INSERT INTO forwarding_setups (workspace_id, event_source, event_source_id, pii_mode, click_window_days, events) VALUES ($1, $2, $3, $4, $5, $6::jsonb)', [ws, 'WEB', 'P', 'hashed', 7, JSON.stringify(tiktokSetup.events)]);
    const send = async () => {
      const conv = conversion(ws, { event_name: 'purchase', record: { page: { url: 'https://shop.example/?gclid=GC1' }, properties: { value: 9, currency: 'USD' } } });
      await rig.append([conv]);
      await rig.intake.drain();
      await side.destinationSender!.drain(id);
      const got = ((await (await fetch(`${google.controlUrl}/received`)).json()) as { events: Array<{ event: { transactionId: string; adIdentifiers?: unknown } }> }).events;
      return got.filter((e) => e.event.transactionId === conv.event_id);
    };
    expect(await send()).toMatchObject([{ event: { adIdentifiers: { gclid: 'GC1' } } }]);

    // The hour is over: the access token is refused, refreshed once, and the batch goes.
    await fetch(`${google.controlUrl}/expire-access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(await send()).toHaveLength(1);

    // The grant is gone (the refresh is refused): the destination needs re-authorisation, the conversion waits.
    await fetch(`${google.controlUrl}/expire-access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await fetch(`${google.controlUrl}/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: [{ http_status: 400, message: 'invalid_grant' }] }) });
    expect(await send()).toHaveLength(0);
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/destinations/${id}/connection`, headers: auth })).json()).toMatchObject({ status: 'needs_reauth', reason: expect.stringMatching(/refresh refused/) });
    const again = await connectInBrowser(ws, id);
    expect(again.status, again.body).toBe(200);
    await side.destinationSender!.drain(id);
    const waiting = await rig.db.query<{ n: unknown }>('SELECT count(*) AS n FROM destination_outbox WHERE destination_id = $1', [id]);
    expect(Number(waiting.rows[0]!.n)).toBe(0);

    const revokes = async () => ((await (await fetch(`${google.controlUrl}/calls?endpoint=revoke`)).json()) as { calls: Array<{ http_status: number }> }).calls;
    const before = (await revokes()).length;
    expect((await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/destinations/${id}`, headers: auth })).statusCode).toBe(204);
    expect((await revokes()).slice(before)).toEqual([expect.objectContaining({ http_status: 200 })]);
  });
});

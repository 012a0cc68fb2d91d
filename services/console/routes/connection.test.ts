import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../app.js';
import { createPlatformSide } from '../../forwarder/platform.js';
import { conversion, startRig, type ForwarderRig } from '../../forwarder/testkit.js';
import { loadConfig } from '../../shared/config.js';
import { silentLogger } from '../../shared/logger.js';

const ADMIN = 'connection-routes-admin-token';
const auth = { authorization: `Bearer ${ADMIN}` };
let rig: ForwarderRig;
let app: FastifyInstance;
let bare: FastifyInstance;

async function appFor(env: Record<string, string>): Promise<FastifyInstance> {
  const config = loadConfig({ ADMIN_TOKEN: ADMIN, PUBLIC_BASE_URL: 'http://svc.test', ...env });
  const side = createPlatformSide({
    config,
    db: rig.db,
    log: rig.log,
    credentialsKey: randomBytes(32),
    logger: silentLogger,
    embeddedIntake: true,
    roles: { forwarder: false, refresher: false, console: true },
  });
  const built = await buildApp({
    config,
    db: rig.db,
    logger: silentLogger,
    admin: true,
    adminExtensions: side.adminExtensions,
    publicExtensions: side.publicExtensions,
  });
  await built.ready();
  return built;
}

beforeAll(async () => {
  rig = await startRig();
  app = await appFor({
    PLATFORM_API_BASE: rig.sandbox.apiBase,
    PLATFORM_AUTH_URL: rig.sandbox.authUrl,
    PLATFORM_APP_ID: 'sandbox-app',
    PLATFORM_APP_SECRET: 'sandbox-secret',
  });
  bare = await appFor({});
});
afterAll(async () => {
  await app?.close();
  await bare?.close();
  await rig?.close();
});

describe('connection routes', () => {
  it('POST answers the authorize URL with the redirect URI of PUBLIC_BASE_URL', async () => {
    const ws = await rig.workspace();
    const r = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.statusCode).toBe(200);
    const u = new URL(r.json().authorize_url);
    expect(u.searchParams.get('redirect_uri')).toBe('http://svc.test/oauth/callback');
    expect(r.json().redirect_uri).toBe('http://svc.test/oauth/callback');
  });

  it('without PLATFORM_APP_ID/SECRET connecting answers a clear problem, with a page behind its type', async () => {
    const ws = await rig.workspace();
    const r = await bare.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.statusCode).toBe(503);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.json()).toMatchObject({
      type: 'http://svc.test/problems/platform-not-configured',
      title: 'The ad platform app is not configured',
      status: 503,
    });
    expect(r.json().detail).toContain('PLATFORM_APP_ID');
    const page = await bare.inject({ method: 'GET', url: '/problems/platform-not-configured' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('PLATFORM_APP_SECRET');
  });

  it('GET shows a never-connected workspace as disconnected', async () => {
    const ws = await rig.workspace();
    const r = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.json()).toEqual({
      status: 'disconnected',
      advertiser_id: null,
      time_zone: null,
      access_expires_at: null,
      refresh_expires_at: null,
      connected_at: null,
      last_refreshed_at: null,
      reason: 'never connected',
    });
  });

  it('DELETE of a never-connected workspace drops its waiting conversions and stops future ones', async () => {
    const ws = await rig.workspace();
    await rig.append([conversion(ws)]);
    await rig.platform.intake!.drain();
    const r = await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.statusCode).toBe(204);
    expect((await rig.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    await rig.append([conversion(ws)]);
    await rig.platform.intake!.drain();
    expect((await rig.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    const again = await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(again.statusCode).toBe(204);
  });

  it('DELETE cancels a connection flow in progress', async () => {
    const ws = await rig.workspace();
    const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    const consent = await fetch(started.json().authorize_url, { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    const page = await app.inject({ method: 'GET', url: `/oauth/callback${back.search}` });
    expect(page.statusCode).toBe(400);
    expect(page.body).toContain('replaced this link');
    const r = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.json().status).toBe('disconnected');
  });

  describe('bad input', () => {
    it.each([
      ['POST', 'an unknown workspace', '/admin/v1/workspaces/ws_missing/connection', auth, 404],
      ['GET', 'an unknown workspace', '/admin/v1/workspaces/ws_missing/connection', auth, 404],
      ['DELETE', 'an unknown workspace', '/admin/v1/workspaces/ws_missing/connection', auth, 404],
      ['POST', 'no admin token', '/admin/v1/workspaces/ws_missing/connection', {}, 401],
      ['DELETE', 'a wrong admin token', '/admin/v1/workspaces/ws_missing/connection', { authorization: 'Bearer nope-nope-nope-nope' }, 401],
    ] as const)('%s with %s', async (method, _name, url, headers, status) => {
      const r = await app.inject({ method, url, headers });
      expect(r.statusCode).toBe(status);
      expect(r.headers['content-type']).toContain('application/problem+json');
    });

    it.each([
      ['no query', ''],
      ['repeated parameters', '?state=a&state=b&auth_code=x'],
      ['a forged state', '?state=forged&auth_code=x&code=x'],
    ])('the callback refuses %s with a page', async (_name, query) => {
      const r = await app.inject({ method: 'GET', url: `/oauth/callback${query}` });
      expect(r.statusCode).toBe(400);
      expect(r.headers['content-type']).toContain('text/html');
      expect(r.headers['referrer-policy']).toBe('no-referrer');
    });

    it('the callback escapes what the platform sends back', async () => {
      const ws = await rig.workspace();
      const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
      const state = new URL(started.json().authorize_url).searchParams.get('state')!;
      const q = new URLSearchParams({ state, error: 'access_denied', error_description: '<script>alert(1)</script>' });
      const r = await app.inject({ method: 'GET', url: `/oauth/callback?${q}` });
      expect(r.statusCode).toBe(400);
      expect(r.body).not.toContain('<script>');
      expect(r.body).toContain('&lt;script&gt;');
    });
  });
});

import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../compose/app.js';
import { createPlatformSide } from '../../compose/platform.js';
import { conversion, startRig, type ForwarderRig } from '../../../test/helpers/forwarder-rig.js';
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
    credentialsKey: randomBytes(32),
    logger: silentLogger,
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

/** The browser opening the start link (through inject): the cookie it got and where it is sent next. */
async function openStart(startUrl: string): Promise<{ platformUrl: string; cookie: string; headers: Record<string, unknown> }> {
  const u = new URL(startUrl);
  const r = await app.inject({ method: 'GET', url: `${u.pathname}${u.search}` });
  expect(r.statusCode).toBe(302);
  const setCookie = ([] as string[]).concat((r.headers['set-cookie'] as string | string[] | undefined) ?? []);
  return { platformUrl: String(r.headers.location), cookie: setCookie.map((c) => c.split(';')[0]).join('; '), headers: r.headers };
}

describe('connection routes', () => {
  it('POST answers the authorize URL with the redirect URI of PUBLIC_BASE_URL', async () => {
    const ws = await rig.workspace();
    const r = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.statusCode).toBe(200);
    const u = new URL(r.json().authorize_url);
    // The service's own start link: it binds the flow to the browser, then redirects to the platform.
    expect(`${u.origin}${u.pathname}`).toBe('http://svc.test/oauth/start');
    const { platformUrl } = await openStart(r.json().authorize_url);
    expect(new URL(platformUrl).searchParams.get('redirect_uri')).toBe('http://svc.test/oauth/callback');
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
    await rig.intake.drain();
    const r = await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.statusCode).toBe(204);
    expect((await rig.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    await rig.append([conversion(ws)]);
    await rig.intake.drain();
    expect((await rig.db.query('SELECT 1 FROM forward_outbox WHERE workspace_id = $1', [ws])).rows).toHaveLength(0);
    const again = await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(again.statusCode).toBe(204);
  });

  it('DELETE cancels a connection flow in progress', async () => {
    const ws = await rig.workspace();
    const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    const { platformUrl, cookie } = await openStart(started.json().authorize_url);
    const consent = await fetch(platformUrl, { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    await app.inject({ method: 'DELETE', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    const page = await app.inject({ method: 'GET', url: `/oauth/callback${back.search}`, headers: { cookie } });
    expect(page.statusCode).toBe(400);
    expect(page.body).toContain('replaced this link');
    const r = await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    expect(r.json().status).toBe('disconnected');
  });

  it('the callback is honoured only in the browser that opened the start link (issue 14, finding 8)', async () => {
    const ws = await rig.workspace();
    const started = await app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth });
    const { platformUrl, cookie, headers } = await openStart(started.json().authorize_url);
    expect(String(headers['set-cookie'])).toMatch(/HttpOnly/i);
    expect(String(headers['set-cookie'])).toMatch(/SameSite=Lax/i);
    expect(String(headers['set-cookie'])).toMatch(/Path=\/oauth\//);
    // Someone else opening the same start link gets no binding.
    const other = await app.inject({ method: 'GET', url: new URL(started.json().authorize_url).pathname + new URL(started.json().authorize_url).search });
    expect(other.statusCode).toBe(400);
    expect(other.body).toContain('another browser');
    const back = new URL((await fetch(platformUrl, { redirect: 'manual' })).headers.get('location')!);
    // The attacker holding the callback URL (state and code), without the cookie: refused, nothing changes.
    const forged = await app.inject({ method: 'GET', url: `/oauth/callback${back.search}` });
    expect(forged.statusCode).toBe(400);
    expect(forged.body).toContain('another browser');
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth })).json().status).toBe('disconnected');
    const wrongCookie = await app.inject({ method: 'GET', url: `/oauth/callback${back.search}`, headers: { cookie: cookie.replace(/=.*/, '=forged') } });
    expect(wrongCookie.statusCode).toBe(400);
    // The browser that started it: connected.
    const page = await app.inject({ method: 'GET', url: `/oauth/callback${back.search}`, headers: { cookie } });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Ad account connected');
    expect((await app.inject({ method: 'GET', url: `/admin/v1/workspaces/${ws}/connection`, headers: auth })).json().status).toBe('connected');
  });

  it.each([
    ['the start page', (ws: string) => `/oauth/start?state=unknown-${ws}`],
    ['the callback page', () => '/oauth/callback?state=forged&code=x'],
    ['a problem page', () => '/problems/validation-error'],
    ['the problem list', () => '/problems'],
    ['a connection problem page', () => '/problems/platform-not-configured'],
  ])('%s carries CSP, frame-ancestors, X-Frame-Options and nosniff (issue 14, finding 9)', async (_name, url) => {
    const r = await app.inject({ method: 'GET', url: url(await rig.workspace()) });
    expect(r.headers['content-type']).toContain('text/html');
    expect(r.headers['content-security-policy']).toContain("default-src 'none'");
    expect(r.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(r.headers['x-frame-options']).toBe('DENY');
    expect(r.headers['x-content-type-options']).toBe('nosniff');
  });

  it('the JSON APIs carry no page headers (helmet is scoped to the pages)', async () => {
    const r = await app.inject({ method: 'GET', url: '/healthz' });
    expect(r.headers['content-security-policy']).toBeUndefined();
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
      const { cookie } = await openStart(started.json().authorize_url);
      const q = new URLSearchParams({ state, error: 'access_denied', error_description: '<script>alert(1)</script>' });
      const r = await app.inject({ method: 'GET', url: `/oauth/callback?${q}`, headers: { cookie } });
      expect(r.statusCode).toBe(400);
      expect(r.body).not.toContain('<script>');
      expect(r.body).toContain('&lt;script&gt;');
    });
  });
});

import { afterEach, describe, expect, it, vi } from 'vitest';
import { PlatformCode } from './codes.js';
import { startSandbox, type RunningSandbox } from './server.js';
import { obtainTokens, validRecord } from './testkit.js';

const running: RunningSandbox[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

async function start(opts: Parameters<typeof startSandbox>[0] = {}) {
  const s = await startSandbox({ port: 0, ...opts });
  running.push(s);
  return s;
}

async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { code: number; message: string; data: Record<string, unknown> } };
}

describe('sandbox over a real socket', () => {
  it('runs the whole connect-and-send flow with fetch', async () => {
    const s = await start({ appId: 'app-1', appSecret: 'secret-1' });
    expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s.apiBase).toBe(`${s.url}/open_api/v1.3`);
    expect(s.authUrl).toBe(`${s.url}/portal/auth`);

    const redirectUri = 'http://127.0.0.1:1/callback';
    const authorize = await fetch(`${s.authUrl}?${new URLSearchParams({ app_id: 'app-1', state: 'abc', redirect_uri: redirectUri })}`, {
      redirect: 'manual',
    });
    expect(authorize.status).toBe(302);
    const location = new URL(authorize.headers.get('location') ?? '');
    expect(location.searchParams.get('state')).toBe('abc');
    const code = location.searchParams.get('auth_code');

    const token = await postJson(`${s.apiBase}/oauth2/access_token/`, { app_id: 'app-1', secret: 'secret-1', auth_code: code });
    expect(token.body.code).toBe(0);
    const accessToken = String(token.body.data.access_token);

    const body = { event_source: 'WEB', event_source_id: 'PIXEL', data: [validRecord({ event_id: 'net-1' })] };
    const sent = await postJson(`${s.apiBase}/event/track/`, body, { 'Access-Token': accessToken });
    expect(sent).toMatchObject({ status: 200, body: { code: 0, message: 'OK' } });

    const received = (await (await fetch(`${s.controlUrl}/received?event_id=net-1`)).json()) as { count: number };
    expect(received.count).toBe(1);

    const wrong = await postJson(`${s.apiBase}/oauth2/access_token/`, { app_id: 'app-1', secret: 'nope', auth_code: 'x' });
    expect(wrong.body.code).toBe(PlatformCode.APP_AUTH_FAILED);

    const missing = await fetch(`${s.url}/no/such/route`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { code: number }).code).toBe(PlatformCode.NOT_FOUND);

    const revokeAll = await fetch(`${s.controlUrl}/revoke-all`, { method: 'POST' });
    expect(await revokeAll.json()).toEqual({ revoked: 1 });
    const afterRevoke = await postJson(`${s.apiBase}/event/track/`, body, { 'Access-Token': accessToken });
    expect(afterRevoke.body.code).toBe(PlatformCode.ACCESS_TOKEN_INVALID);
  });

  it('runs several isolated instances and closes idempotently', async () => {
    const a = await start();
    const b = await start();
    expect(a.url).not.toBe(b.url);
    await fetch(`${a.controlUrl}/settings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ timezone: 'Europe/Berlin' }),
    });
    const sa = (await (await fetch(`${a.controlUrl}/settings`)).json()) as { settings: { timezone: string } };
    const sb = (await (await fetch(`${b.controlUrl}/settings`)).json()) as { settings: { timezone: string } };
    expect(sa.settings.timezone).toBe('Europe/Berlin');
    expect(sb.settings.timezone).toBe('America/New_York');
    await a.close();
    await a.close();
    await expect(fetch(`${a.controlUrl}/settings`)).rejects.toThrow();
  });

  it('a delay fault outlasts a client timeout, yet the platform still stores the events', async () => {
    const s = await start();
    const tokens = await obtainTokens(s.app);
    await postJson(`${s.controlUrl}/faults`, { events: [{ delay_ms: 800, times: 1 }] });
    const body = { event_source: 'WEB', event_source_id: 'PIXEL', data: [validRecord({ event_id: 'slow-1' })] };
    await expect(
      fetch(`${s.apiBase}/event/track/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'access-token': tokens.access_token },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(200),
      }),
    ).rejects.toThrow();
    // The held call goes on after the client gave up (800 ms after it arrived): wait for the event to show, not a
    // fixed time. A sandbox that drops the call never shows it, and the wait fails.
    const count = async () => ((await (await fetch(`${s.controlUrl}/received?event_id=slow-1`)).json()) as { count: number }).count;
    await vi.waitFor(async () => expect(await count()).toBeGreaterThan(0), { timeout: 10_000, interval: 50 });
    expect(await count()).toBe(1);
  });
});

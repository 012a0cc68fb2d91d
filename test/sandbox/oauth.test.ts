import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildSandbox, type SandboxApp } from './app.js';
import { PlatformCode } from './codes.js';
import {
  authorizeCode,
  exchangeCode,
  obtainTokens,
  postApi,
  REDIRECT_URI,
  refresh,
  track,
  trackBody,
  validRecord,
} from './testkit.js';

function clockedSandbox(opts: Parameters<typeof buildSandbox>[0] = {}) {
  const clock = { now: Date.parse('2026-03-01T12:00:00Z') };
  const app = buildSandbox({ ...opts, now: () => clock.now });
  return { app, clock };
}

async function settings(app: SandboxApp, body: Record<string, unknown>) {
  const res = await app.inject({ method: 'POST', url: '/_control/settings', payload: body });
  expect(res.statusCode).toBe(200);
  return res.json();
}

async function control(app: SandboxApp, method: 'GET' | 'POST' | 'DELETE', path: string) {
  const res = await app.inject({ method, url: `/_control${path}` });
  expect(res.statusCode).toBe(200);
  return res.json();
}

describe('authorize page', () => {
  it('auto-approves with a redirect carrying auth_code, code and state', async () => {
    const app = buildSandbox();
    const { code, location } = await authorizeCode(app, { state: 'xyz' });
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(location.searchParams.get('code')).toBe(code);
    expect(location.searchParams.get('state')).toBe('xyz');
  });

  it.each([
    ['unknown app_id', { app_id: 'nope', redirect_uri: REDIRECT_URI }],
    ['missing app_id', { redirect_uri: REDIRECT_URI }],
    ['missing redirect_uri', { app_id: 'sandbox-app' }],
    ['non-http redirect_uri', { app_id: 'sandbox-app', redirect_uri: 'javascript:alert(1)' }],
    ['unsupported PKCE method', { app_id: 'sandbox-app', redirect_uri: REDIRECT_URI, code_challenge: 'a'.repeat(43), code_challenge_method: 'S512' }],
  ])('answers an HTML error page for %s', async (_name, query) => {
    const app = buildSandbox();
    const res = await app.inject({ method: 'GET', url: `/portal/auth?${new URLSearchParams(query)}` });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/text\/html/);
  });

  it('rejects redirect URIs that are not registered when an allow-list is configured', async () => {
    const app = buildSandbox({ redirectUris: ['https://app.example/cb'] });
    const bad = await app.inject({ method: 'GET', url: `/portal/auth?app_id=sandbox-app&redirect_uri=${encodeURIComponent('https://evil.example/cb')}` });
    expect(bad.statusCode).toBe(400);
    const good = await app.inject({ method: 'GET', url: `/portal/auth?app_id=sandbox-app&redirect_uri=${encodeURIComponent('https://app.example/cb?x=1')}` });
    expect(good.statusCode).toBe(302);
    expect(new URL(String(good.headers.location)).searchParams.get('x')).toBe('1');
  });

  it('denies when deny_authorize is set', async () => {
    const app = buildSandbox();
    await settings(app, { deny_authorize: true });
    const res = await app.inject({ method: 'GET', url: `/portal/auth?app_id=sandbox-app&state=s1&redirect_uri=${encodeURIComponent(REDIRECT_URI)}` });
    expect(res.statusCode).toBe(302);
    const loc = new URL(String(res.headers.location));
    expect(loc.searchParams.get('error')).toBe('access_denied');
    expect(loc.searchParams.get('state')).toBe('s1');
    expect(loc.searchParams.get('auth_code')).toBeNull();
  });
});

describe('token exchange', () => {
  it('issues access and refresh tokens with lifetimes', async () => {
    const app = buildSandbox();
    const { code } = await authorizeCode(app);
    const res = await exchangeCode(app, code);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ code: 0, message: 'OK' });
    expect(res.body.request_id).toMatch(/^\d{14}[0-9A-F]+$/);
    expect(res.body.data).toMatchObject({
      advertiser_ids: ['7000000000000000001'],
      expires_in: 86_400,
      refresh_token_expires_in: 365 * 86_400,
    });
    expect(res.body.data.access_token).toMatch(/^[0-9a-f]{40}$/);
    expect(res.body.data.refresh_token).toMatch(/^[0-9a-f]{40}$/);
    expect(res.body.data.scope.length).toBeGreaterThan(0);
  });

  it.each([
    ['wrong secret', { secret: 'wrong' }, PlatformCode.APP_AUTH_FAILED],
    ['wrong app id', { app_id: 'other' }, PlatformCode.APP_AUTH_FAILED],
    ['unknown code', { auth_code: 'not-a-code' }, PlatformCode.AUTH_CODE_INVALID],
    ['missing auth_code', { auth_code: '' }, PlatformCode.PARAM_ERROR],
  ])('rejects %s', async (_name, override, expected) => {
    const app = buildSandbox();
    const { code } = await authorizeCode(app);
    const res = await postApi(app, '/oauth2/access_token/', { app_id: 'sandbox-app', secret: 'sandbox-secret', auth_code: code, ...override });
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(expected);
    expect(res.body.message.length).toBeGreaterThan(0);
  });

  it('codes are single-use', async () => {
    const app = buildSandbox();
    const { code } = await authorizeCode(app);
    expect((await exchangeCode(app, code)).body.code).toBe(0);
    const again = await exchangeCode(app, code);
    expect(again.body.code).toBe(PlatformCode.AUTH_CODE_INVALID);
    expect(again.body.message).toMatch(/auth_code invalid/);
  });

  it('codes expire after 10 minutes', async () => {
    const { app, clock } = clockedSandbox();
    const { code } = await authorizeCode(app);
    clock.now += 10 * 60 * 1000 + 1;
    expect((await exchangeCode(app, code)).body.code).toBe(PlatformCode.AUTH_CODE_INVALID);
  });

  describe('PKCE', () => {
    const verifier = 'v'.repeat(20) + 'erifier-0123456789-abcdefghijklmnop';
    const challenge = createHash('sha256').update(verifier).digest('base64url');

    it.each([
      ['matching verifier', { code_verifier: verifier }, 0],
      ['no verifier (the platform ignores PKCE)', {}, 0],
      ['wrong verifier', { code_verifier: 'x'.repeat(50) }, PlatformCode.AUTH_CODE_INVALID],
    ])('S256 with %s', async (_name, extra, expected) => {
      const app = buildSandbox();
      const { code } = await authorizeCode(app, { code_challenge: challenge, code_challenge_method: 'S256' });
      const res = await exchangeCode(app, code, extra as Record<string, string>);
      expect(res.body.code).toBe(expected);
    });
  });

  it('non_expiring mode omits expires_in and refresh fields', async () => {
    const app = buildSandbox();
    await settings(app, { non_expiring: true });
    const data = await obtainTokens(app);
    expect(data.access_token).toBeTruthy();
    expect(data).not.toHaveProperty('expires_in');
    expect(data).not.toHaveProperty('refresh_token');
    expect(data).not.toHaveProperty('refresh_token_expires_in');
    expect((await track(app, data.access_token, trackBody([validRecord()]))).body.code).toBe(0);
  });
});

describe('access token expiry and refresh', () => {
  it('a token issued with access_ttl_seconds: 1 expires, and refresh replaces it', async () => {
    const { app, clock } = clockedSandbox();
    await settings(app, { access_ttl_seconds: 1 });
    const tokens = await obtainTokens(app);
    expect(tokens.expires_in).toBe(1);
    expect((await track(app, tokens.access_token, trackBody([validRecord()]))).body.code).toBe(0);
    clock.now += 1500;
    const expired = await track(app, tokens.access_token, trackBody([validRecord()]));
    expect(expired.status).toBe(200);
    expect(expired.body.code).toBe(PlatformCode.ACCESS_TOKEN_EXPIRED);

    const refreshed = await refresh(app, tokens.refresh_token!);
    expect(refreshed.body.code).toBe(0);
    expect(refreshed.body.data.access_token).not.toBe(tokens.access_token);
    expect((await track(app, refreshed.body.data.access_token, trackBody([validRecord()]))).body.code).toBe(0);
  });

  it('rotation invalidates the old refresh token immediately', async () => {
    const app = buildSandbox();
    const tokens = await obtainTokens(app);
    const first = await refresh(app, tokens.refresh_token!);
    expect(first.body.code).toBe(0);
    expect(first.body.data.refresh_token).toBeDefined();
    expect(first.body.data.refresh_token).not.toBe(tokens.refresh_token);
    const replay = await refresh(app, tokens.refresh_token!);
    expect(replay.body.code).toBe(PlatformCode.REFRESH_TOKEN_INVALID);
    expect((await refresh(app, first.body.data.refresh_token!)).body.code).toBe(0);
  });

  it('keeps the refresh token when rotate_refresh is off', async () => {
    const app = buildSandbox();
    await settings(app, { rotate_refresh: false });
    const tokens = await obtainTokens(app);
    const a = await refresh(app, tokens.refresh_token!);
    const b = await refresh(app, tokens.refresh_token!);
    expect(a.body.data.refresh_token).toBe(tokens.refresh_token);
    expect(b.body.code).toBe(0);
  });

  it('replaying a rotated refresh token revokes the grant when reuse detection is on', async () => {
    const app = buildSandbox();
    await settings(app, { revoke_grant_on_refresh_reuse: true });
    const tokens = await obtainTokens(app);
    const next = await refresh(app, tokens.refresh_token!);
    expect((await refresh(app, tokens.refresh_token!)).body.code).toBe(PlatformCode.REFRESH_TOKEN_INVALID);
    expect((await refresh(app, next.body.data.refresh_token!)).body.code).toBe(PlatformCode.REFRESH_TOKEN_INVALID);
    expect((await track(app, next.body.data.access_token, trackBody([validRecord()]))).body.code).toBe(PlatformCode.ACCESS_TOKEN_INVALID);
  });

  it.each([
    ['unknown refresh token', 'f'.repeat(40), PlatformCode.REFRESH_TOKEN_INVALID],
    ['empty refresh token', '', PlatformCode.PARAM_ERROR],
  ])('rejects an %s', async (_name, token, expected) => {
    const app = buildSandbox();
    expect((await refresh(app, token)).body.code).toBe(expected);
  });

  it('refresh tokens expire', async () => {
    const { app, clock } = clockedSandbox();
    await settings(app, { refresh_ttl_seconds: 60 });
    const tokens = await obtainTokens(app);
    clock.now += 61_000;
    expect((await refresh(app, tokens.refresh_token!)).body.code).toBe(PlatformCode.REFRESH_TOKEN_EXPIRED);
  });

  it('expire-access-tokens expires every current token', async () => {
    const app = buildSandbox();
    const tokens = await obtainTokens(app);
    expect((await control(app, 'POST', '/expire-access-tokens')).expired).toBe(1);
    expect((await track(app, tokens.access_token, trackBody([validRecord()]))).body.code).toBe(PlatformCode.ACCESS_TOKEN_EXPIRED);
    expect((await control(app, 'GET', '/tokens')).count).toBe(0);
  });
});

describe('revocation', () => {
  it('revoke_token revokes the access token and its refresh token, and is recorded', async () => {
    const app = buildSandbox();
    const tokens = await obtainTokens(app);
    const res = await postApi(app, '/oauth2/revoke_token/', { app_id: 'sandbox-app', secret: 'sandbox-secret', access_token: tokens.access_token });
    expect(res.body.code).toBe(0);
    expect((await track(app, tokens.access_token, trackBody([validRecord()]))).body.code).toBe(PlatformCode.ACCESS_TOKEN_INVALID);
    const r = await refresh(app, tokens.refresh_token!);
    expect(r.body.code).toBe(PlatformCode.REFRESH_TOKEN_INVALID);
    expect(r.body.message).toMatch(/revoked/);

    const again = await postApi(app, '/oauth2/revoke_token/', { app_id: 'sandbox-app', secret: 'sandbox-secret', access_token: tokens.access_token });
    expect(again.body.code).toBe(0);
    const unknown = await postApi(app, '/oauth2/revoke_token/', { app_id: 'sandbox-app', secret: 'sandbox-secret', access_token: 'nope' });
    expect(unknown.body.code).toBe(PlatformCode.ACCESS_TOKEN_INVALID);
    const badSecret = await postApi(app, '/oauth2/revoke_token/', { app_id: 'sandbox-app', secret: 'x', access_token: tokens.access_token });
    expect(badSecret.body.code).toBe(PlatformCode.APP_AUTH_FAILED);

    const log = await control(app, 'GET', '/revocations');
    expect(log.revocations.map((r: { outcome: string }) => r.outcome)).toEqual(['revoked', 'already_revoked', 'unknown_token', 'bad_credentials']);
    const calls = await control(app, 'GET', '/calls?endpoint=revoke');
    expect(calls.count).toBe(4);
  });

  it('revoke-all revokes every grant (the customer removed access)', async () => {
    const app = buildSandbox();
    const a = await obtainTokens(app);
    const b = await obtainTokens(app);
    expect((await control(app, 'GET', '/tokens')).count).toBe(2);
    expect((await control(app, 'POST', '/revoke-all')).revoked).toBe(2);
    for (const t of [a, b]) {
      expect((await track(app, t.access_token, trackBody([validRecord()]))).body.code).toBe(PlatformCode.ACCESS_TOKEN_INVALID);
      expect((await refresh(app, t.refresh_token!)).body.code).toBe(PlatformCode.REFRESH_TOKEN_INVALID);
    }
    expect((await control(app, 'GET', '/tokens')).count).toBe(0);
  });
});

describe('advertiser/info', () => {
  async function info(app: SandboxApp, token: string | null, ids: string | null) {
    const q = ids === null ? '' : `?advertiser_ids=${encodeURIComponent(ids)}`;
    const res = await app.inject({ method: 'GET', url: `/open_api/v1.3/advertiser/info/${q}`, headers: token ? { 'access-token': token } : {} });
    return res.json();
  }

  it('answers the advertiser with its configured IANA time zone', async () => {
    const app = buildSandbox();
    const tokens = await obtainTokens(app);
    const body = await info(app, tokens.access_token, JSON.stringify(tokens.advertiser_ids));
    expect(body.code).toBe(0);
    expect(body.data.list).toEqual([expect.objectContaining({ advertiser_id: '7000000000000000001', timezone: 'America/New_York' })]);
    await settings(app, { timezone: 'Asia/Tokyo' });
    expect((await info(app, tokens.access_token, JSON.stringify(tokens.advertiser_ids))).data.list[0].timezone).toBe('Asia/Tokyo');
  });

  it('grants the advertiser ids configured at authorize time', async () => {
    const app = buildSandbox();
    await settings(app, { advertiser_ids: ['111', '222'] });
    const tokens = await obtainTokens(app);
    expect(tokens.advertiser_ids).toEqual(['111', '222']);
    const body = await info(app, tokens.access_token, '["111","222"]');
    expect(body.data.list.map((a: { advertiser_id: string }) => a.advertiser_id)).toEqual(['111', '222']);
  });

  it.each([
    ['no token', null, '["7000000000000000001"]', PlatformCode.ACCESS_TOKEN_EMPTY],
    ['unknown token', 'bogus', '["7000000000000000001"]', PlatformCode.ACCESS_TOKEN_INVALID],
    ['missing advertiser_ids', 'VALID', null, PlatformCode.PARAM_ERROR],
    ['non-JSON advertiser_ids', 'VALID', '7000000000000000001', PlatformCode.PARAM_ERROR],
    ['foreign advertiser', 'VALID', '["999"]', PlatformCode.NO_PERMISSION],
  ])('rejects %s', async (_name, token, ids, expected) => {
    const app = buildSandbox();
    const tokens = await obtainTokens(app);
    const body = await info(app, token === 'VALID' ? tokens.access_token : token, ids);
    expect(body.code).toBe(expected);
  });
});

describe('control settings', () => {
  it.each([
    [{ access_ttl_seconds: 0 }],
    [{ access_ttl_seconds: 'x' }],
    [{ timezone: 'Mars/Olympus' }],
    [{ advertiser_ids: [] }],
    [{ rotate_refresh: 'yes' }],
    [{ nonsense: true }],
  ])('rejects %j with 400', async (body) => {
    const app = buildSandbox();
    const res = await app.inject({ method: 'POST', url: '/_control/settings', payload: body });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBeTruthy();
  });

  it('access_ttl_seconds: null switches to non-expiring tokens; reset restores defaults', async () => {
    const app = buildSandbox();
    expect((await settings(app, { access_ttl_seconds: null })).settings.non_expiring).toBe(true);
    await control(app, 'POST', '/reset');
    expect((await control(app, 'GET', '/settings')).settings.non_expiring).toBe(false);
  });
});

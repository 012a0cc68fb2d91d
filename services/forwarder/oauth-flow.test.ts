import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { silentLogger } from '../shared/logger.js';
import { OAuthFlow } from './oauth-flow.js';
import { PlatformClient, PlatformNotConfiguredError } from './platform-client.js';
import { TokenCipher } from './token-cipher.js';
import { authorizeInSandbox, sandboxControl, startRig, type ForwarderRig } from '../../test/helpers/forwarder-rig.js';

let rig: ForwarderRig;
/** The binding of the browser that started the flows of these tests (the cookie's value, in the real flow). */
const BROWSER = 'the-browser-that-started';
beforeAll(async () => {
  rig = await startRig({ sandbox: { timezone: 'Europe/Berlin' } });
});
afterAll(() => rig.close());
afterEach(async () => {
  await fetch(`${rig.sandbox.controlUrl}/faults`, { method: 'DELETE' });
  await sandboxControl(rig.sandbox, '/settings', { deny_authorize: false });
});

async function connectionRow(ws: string): Promise<Record<string, any> | undefined> {
  const r = await rig.db.query('SELECT * FROM connections WHERE workspace_id = $1', [ws]);
  return r.rows[0];
}

describe('OAuthFlow', () => {
  it('builds the authorize URL with the app id, redirect URI, a state and a PKCE S256 challenge', async () => {
    const ws = await rig.workspace();
    const { authorizeUrl, expiresAt } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const u = new URL(authorizeUrl);
    expect(`${u.origin}${u.pathname}`).toBe(rig.sandbox.authUrl);
    expect(u.searchParams.get('app_id')).toBe('sandbox-app');
    expect(u.searchParams.get('redirect_uri')).toBe('http://127.0.0.1:9/oauth/callback');
    expect(u.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(u.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(u.searchParams.get('code_challenge_method')).toBe('S256');
    expect(expiresAt.getTime() - Date.now()).toBeGreaterThan(9 * 60_000);
    expect(expiresAt.getTime() - Date.now()).toBeLessThanOrEqual(10 * 60_000);
    // Only the state's hash is stored.
    const stored = await rig.db.query<{ state_hash: string }>('SELECT state_hash FROM oauth_states WHERE workspace_id = $1', [ws]);
    expect(stored.rows[0]!.state_hash).not.toBe(u.searchParams.get('state'));
  });

  it('connects: exchanges the code (with the PKCE verifier), reads the time zone, stores sealed tokens', async () => {
    const ws = await rig.workspace();
    const result = await rig.connect(ws);
    expect(result).toEqual({ ok: true, workspaceId: ws, advertiserId: '7000000000000000001', timeZone: 'Europe/Berlin' });
    const row = (await connectionRow(ws))!;
    expect(row).toMatchObject({ status: 'connected', advertiser_id: '7000000000000000001', time_zone: 'Europe/Berlin' });
    const tokens = await sandboxControl(rig.sandbox, '/tokens');
    const plain = [...tokens.access_tokens.map((t: any) => t.access_token), ...tokens.refresh_tokens.map((t: any) => t.refresh_token)];
    const all = JSON.stringify(row);
    for (const t of plain) expect(all).not.toContain(t);
    expect(row.access_token_enc).toMatch(/^k1:/);
    expect(new Date(row.access_expires_at).getTime()).toBeGreaterThan(Date.now() + 86_000_000);
    const view = await rig.platform.connections.get(ws);
    expect(view?.status).toBe('connected');
  });

  it('accepts `code` when the platform sends no `auth_code`', async () => {
    const ws = await rig.workspace();
    const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const q = await authorizeInSandbox(authorizeUrl);
    delete q.auth_code;
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: true });
  });

  it('refuses a replayed state and changes nothing', async () => {
    const ws = await rig.workspace();
    const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const q = await authorizeInSandbox(authorizeUrl);
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: true });
    const before = await connectionRow(ws);
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: false, status: 400, reason: 'used_state' });
    expect(await connectionRow(ws)).toEqual(before);
  });

  it('refuses an expired state', async () => {
    const ws = await rig.workspace();
    const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const q = await authorizeInSandbox(authorizeUrl);
    await rig.db.query(`UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE workspace_id = $1`, [ws]);
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: false, reason: 'expired_state' });
    expect(await connectionRow(ws)).toBeUndefined();
  });

  it('refuses a state superseded by a newer flow, and takes the newer one', async () => {
    const ws = await rig.workspace();
    const first = await rig.platform.flow.start(ws, { binding: BROWSER });
    const second = await rig.platform.flow.start(ws, { binding: BROWSER });
    expect(await rig.platform.flow.complete(await authorizeInSandbox(first.authorizeUrl), BROWSER)).toMatchObject({ ok: false, reason: 'superseded_state' });
    expect(await connectionRow(ws)).toBeUndefined();
    expect(await rig.platform.flow.complete(await authorizeInSandbox(second.authorizeUrl), BROWSER)).toMatchObject({ ok: true });
  });

  it('reports a declined authorization', async () => {
    const ws = await rig.workspace();
    await sandboxControl(rig.sandbox, '/settings', { deny_authorize: true });
    const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const q = await authorizeInSandbox(authorizeUrl);
    expect(q.error).toBe('access_denied');
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: false, status: 400, reason: 'denied' });
    expect(await connectionRow(ws)).toBeUndefined();
  });

  it('reports a code the platform refuses, and consumes the state', async () => {
    const ws = await rig.workspace();
    const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
    const q = await authorizeInSandbox(authorizeUrl);
    const result = await rig.platform.flow.complete({ ...q, auth_code: 'not-a-code', code: 'not-a-code' }, BROWSER);
    expect(result).toMatchObject({ ok: false, status: 502, reason: 'exchange_failed' });
    expect((result as { message: string }).message).toContain('40110');
    expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ reason: 'used_state' });
  });

  it('retries a transient advertiser failure, and revokes the grant when it keeps failing', async () => {
    const ws = await rig.workspace();
    await sandboxControl(rig.sandbox, '/faults', { advertiser: [{ http_status: 503, times: 1 }] });
    expect(await rig.connect(ws)).toMatchObject({ ok: true });

    const ws2 = await rig.workspace();
    const revokedBefore = (await sandboxControl(rig.sandbox, '/revocations')).count;
    await sandboxControl(rig.sandbox, '/faults', { advertiser: [{ http_status: 500, times: 3 }] });
    expect(await rig.connect(ws2)).toMatchObject({ ok: false, status: 502, reason: 'advertiser_failed' });
    expect(await connectionRow(ws2)).toBeUndefined();
    const revocations = await sandboxControl(rig.sandbox, '/revocations');
    expect(revocations.count).toBe(revokedBefore + 1);
    expect(revocations.revocations.at(-1).outcome).toBe('revoked');
  });

  describe('the state is bound to the browser that started the flow (issue 14, finding 8)', () => {
    it('a callback from another browser (or none) is refused and leaves the state for the right one', async () => {
      const ws = await rig.workspace();
      const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
      const q = await authorizeInSandbox(authorizeUrl);
      expect(await rig.platform.flow.complete(q, 'an-attackers-browser')).toMatchObject({ ok: false, status: 400, reason: 'other_browser' });
      expect(await rig.platform.flow.complete(q)).toMatchObject({ ok: false, status: 400, reason: 'other_browser' });
      expect(await connectionRow(ws)).toBeUndefined();
      expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: true });
    });

    it('an unbound state (the link never opened) cannot be completed; bind() binds it once', async () => {
      const ws = await rig.workspace();
      const { state } = await rig.platform.flow.start(ws);
      const bound = await rig.platform.flow.bind(state, 'first');
      expect(bound).toMatchObject({ ok: true });
      expect(await rig.platform.flow.bind(state, 'first')).toMatchObject({ ok: true }); // the same browser again
      expect(await rig.platform.flow.bind(state, 'second')).toMatchObject({ ok: false, reason: 'other_browser' });
      const q = await authorizeInSandbox((bound as { authorizeUrl: string }).authorizeUrl);
      expect(await rig.platform.flow.complete(q, 'second')).toMatchObject({ ok: false, reason: 'other_browser' });
      expect(await rig.platform.flow.complete(q, 'first')).toMatchObject({ ok: true });
    });
  });

  describe('bad input', () => {
    it.each([
      ['no state', {}],
      ['an empty state', { state: '', auth_code: 'x' }],
      ['a state never issued (foreign)', { state: 'forged-state-value', auth_code: 'x' }],
      ['an overlong state', { state: 'x'.repeat(600), auth_code: 'x' }],
    ])('refuses %s', async (_name, query) => {
      const r = await rig.platform.flow.complete(query, BROWSER);
      expect(r).toMatchObject({ ok: false, status: 400 });
      expect(['missing_state', 'unknown_state']).toContain((r as { reason: string }).reason);
    });

    it('refuses a callback without a code, consuming the state', async () => {
      const ws = await rig.workspace();
      const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
      const state = new URL(authorizeUrl).searchParams.get('state')!;
      expect(await rig.platform.flow.complete({ state }, BROWSER)).toMatchObject({ ok: false, reason: 'missing_code' });
      expect(await connectionRow(ws)).toBeUndefined();
    });

    it('reports an HTML error page instead of a token answer', async () => {
      const ws = await rig.workspace();
      const { authorizeUrl } = await rig.platform.flow.start(ws, { binding: BROWSER });
      const q = await authorizeInSandbox(authorizeUrl);
      await sandboxControl(rig.sandbox, '/faults', { token: [{ http_status: 502 }] });
      expect(await rig.platform.flow.complete(q, BROWSER)).toMatchObject({ ok: false, status: 502, reason: 'exchange_failed' });
      expect(await connectionRow(ws)).toBeUndefined();
    });
  });

  it('refuses to start without the platform app', async () => {
    const client = new PlatformClient({ apiBase: rig.sandbox.apiBase, appId: undefined, appSecret: undefined, timeoutMs: 1000 });
    const flow = new OAuthFlow({
      db: rig.db,
      cipher: new TokenCipher('k1', randomBytes(32)),
      client,
      connections: rig.platform.connections,
      logger: silentLogger,
      publicBaseUrl: 'http://x.test',
      authUrl: rig.sandbox.authUrl,
    });
    await expect(flow.start(await rig.workspace())).rejects.toThrow(PlatformNotConfiguredError);
  });
});

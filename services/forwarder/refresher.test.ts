import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionRepo } from './connection-repo.js';
import { refreshLeadMs } from './refresh-leases.js';
import { tokenRefreshes } from './metrics.js';
import { TokenCipher, tokenAad } from './token-cipher.js';
import { eventually, sandboxControl, startRig, type ForwarderRig } from '../../test/helpers/forwarder-rig.js';

let rig: ForwarderRig;
beforeAll(async () => {
  rig = await startRig({ sandbox: { accessTtlSeconds: 3 } });
});
afterAll(() => rig.close());
afterEach(async () => {
  await fetch(`${rig.sandbox.controlUrl}/faults`, { method: 'DELETE' });
  await sandboxControl(rig.sandbox, '/settings', { access_ttl_seconds: 3, rotate_refresh: true, non_expiring: false });
});

async function row(ws: string): Promise<Record<string, any>> {
  return (await rig.db.query('SELECT * FROM connections WHERE workspace_id = $1', [ws])).rows[0]!;
}
async function refreshCalls(): Promise<Array<{ code: number | null }>> {
  return (await sandboxControl(rig.sandbox, '/calls?endpoint=refresh')).calls;
}

describe('refreshLeadMs', () => {
  it.each([
    [4_000, 2_000],
    [60_000, 30_000],
    [300_000, 60_000],
    [3_600_000, 360_000],
    [86_400_000, 8_640_000],
  ])('a token living %i ms is renewed %i ms before expiry', (lifetime, lead) => {
    expect(refreshLeadMs(lifetime)).toBe(lead);
  });
});

describe('TokenRefresher', () => {
  it('schedules the refresh ahead of expiry and leaves a not-yet-due token alone', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    const r = await row(ws);
    const lead = new Date(r.access_expires_at).getTime() - new Date(r.refresh_due_at).getTime();
    expect(lead).toBeGreaterThan(1_400);
    expect(lead).toBeLessThan(1_600);
    expect(await rig.platform.refresher.refreshNow(ws)).toBe('not_due');
  });

  it('refreshes before expiry, storing the rotated refresh token with the new access token', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    const before = await row(ws);
    const callsBefore = (await refreshCalls()).length;
    await eventually('refresh due', async () => (await rig.platform.refresher.refreshNow(ws)) === 'refreshed', 5_000);
    const after = await row(ws);
    expect(Date.now()).toBeLessThan(new Date(before.access_expires_at).getTime());
    expect(after.access_token_enc).not.toBe(before.access_token_enc);
    expect(after.refresh_token_enc).not.toBe(before.refresh_token_enc);
    expect(new Date(after.access_expires_at).getTime()).toBeGreaterThan(new Date(before.access_expires_at).getTime());
    expect(after.status).toBe('connected');
    expect(await refreshCalls()).toHaveLength(callsBefore + 1);
    // The sandbox rejects the old refresh token: the stored one must be the rotated one, or the next refresh fails.
    await eventually('second refresh', async () => (await rig.platform.refresher.refreshNow(ws)) === 'refreshed', 5_000);
    expect((await row(ws)).status).toBe('connected');
    expect((await refreshCalls()).every((c) => c.code === 0)).toBe(true);
  });

  it('keeps the refresh token when the platform does not rotate it', async () => {
    await sandboxControl(rig.sandbox, '/settings', { rotate_refresh: false });
    const ws = await rig.workspace();
    await rig.connect(ws);
    expect(await rig.platform.refresher.refreshNow(ws, { force: true })).toBe('refreshed');
    expect((await rig.platform.refresher.refreshNow(ws, { force: true }))).toBe('refreshed');
    expect((await row(ws)).status).toBe('connected');
  });

  it('two refreshers racing: exactly one refresh reaches the platform and the connection survives', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    const other = rig.replica();
    const callsBefore = (await refreshCalls()).length;
    const outcomes = await Promise.all([
      rig.platform.refresher.refreshNow(ws, { force: true }),
      other.refresher.refreshNow(ws, { force: true }),
    ]);
    // One refreshes; the other found the lease taken ('busy') or, if its look came after the first one had already
    // stored the new token and let go of the lease, nothing left to do ('not_due'). Either way it sent nothing.
    expect(outcomes.filter((o) => o === 'refreshed')).toHaveLength(1);
    expect(['busy', 'not_due']).toContain(outcomes.find((o) => o !== 'refreshed'));
    expect(await refreshCalls()).toHaveLength(callsBefore + 1);
    expect((await row(ws)).status).toBe('connected');
  });

  it('two refresher loops racing over several token lifetimes: no rotated token is ever replayed', async () => {
    await sandboxControl(rig.sandbox, '/settings', { access_ttl_seconds: 1 });
    const ws = await rig.workspace();
    await rig.connect(ws);
    const other = rig.replica();
    const callsBefore = (await refreshCalls()).length;
    rig.platform.refresher.start();
    other.refresher.start();
    // A 1 s token is renewed every ~0.5 s: run until three refreshes went out (three token lifetimes of racing).
    try {
      await eventually('three refreshes', async () => (await refreshCalls()).length - callsBefore >= 3, 20_000);
    } finally {
      await Promise.all([rig.platform.refresher.stop(), other.refresher.stop()]);
    }
    const calls = (await refreshCalls()).slice(callsBefore);
    // Each by one refresher, none refused.
    expect(calls.every((c) => c.code === 0)).toBe(true);
    expect((await row(ws)).status).toBe('connected');
  });

  it('a refresh refused as invalid flips the connection to needs_reauth and deletes its tokens', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    await sandboxControl(rig.sandbox, '/faults', { refresh: [{ code: 40108, message: 'Invalid refresh token: revoked.' }] });
    expect(await rig.platform.refresher.refreshNow(ws, { force: true })).toBe('invalid');
    const r = await row(ws);
    expect(r).toMatchObject({ status: 'needs_reauth', access_token_enc: null, refresh_token_enc: null });
    expect(r.status_reason).toContain('40108');
  });

  it('retries a transient failure with backoff and without losing the connection', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    const failedBefore = (await tokenRefreshes.get()).values.find((v) => v.labels.outcome === 'transient')?.value ?? 0;
    await sandboxControl(rig.sandbox, '/faults', { refresh: [{ http_status: 503, retry_after: 1 }] });
    expect(await rig.platform.refresher.refreshNow(ws, { force: true })).toBe('transient');
    const r = await row(ws);
    expect(r.status).toBe('connected');
    expect(r.refresh_failures).toBe(1);
    // Retry-After: 1 is a floor for the next attempt.
    expect(new Date(r.refresh_due_at).getTime()).toBeGreaterThan(Date.now() + 800);
    expect(await rig.platform.refresher.refreshNow(ws)).toBe('not_due');
    expect(await rig.platform.refresher.refreshNow(ws, { force: true })).toBe('refreshed');
    expect((await row(ws)).refresh_failures).toBe(0);
    const failedAfter = (await tokenRefreshes.get()).values.find((v) => v.labels.outcome === 'transient')!.value;
    expect(failedAfter).toBe(failedBefore + 1);
  });

  it('leaves tokens without an expiry alone', async () => {
    await sandboxControl(rig.sandbox, '/settings', { non_expiring: true });
    const ws = await rig.workspace();
    await rig.connect(ws);
    const r = await row(ws);
    expect(r).toMatchObject({ access_expires_at: null, refresh_due_at: null, refresh_token_enc: null });
    expect(await rig.platform.connections.refresh.dueForRefresh(100)).not.toContain(ws);
    expect(await rig.platform.refresher.refreshNow(ws, { force: true })).toBe('not_connected');
  });

  it('a refresh that finishes after a reconnect stores nothing', async () => {
    const ws = await rig.workspace();
    await rig.connect(ws);
    const leased = await rig.platform.connections.refresh.leaseForRefresh(ws, 'someone', 5_000, { force: true });
    expect(leased).not.toBeNull();
    await rig.connect(ws); // a new generation
    const stored = await rig.platform.connections.refresh.storeRefreshed(leased!, 'someone', {
      accessToken: 'stale',
      advertiserIds: [],
      scope: [],
      expiresIn: 60,
      refreshToken: 'stale-r',
      refreshExpiresIn: 60,
    });
    expect(stored).toBe(false);
  });
});

describe('ConnectionRepo key rotation', () => {
  it('re-seals tokens of an older key under the current one', async () => {
    const k1 = randomBytes(32);
    const k2 = randomBytes(32);
    const ws = await rig.workspace();
    const old = new ConnectionRepo(rig.db, new TokenCipher('old1', k1));
    await rig.db.transaction((tx) =>
      old.storeConnected(tx, {
        workspaceId: ws,
        advertiserId: '1',
        timeZone: 'UTC',
        grant: { accessToken: 'A', advertiserIds: ['1'], scope: [], expiresIn: 3600, refreshToken: 'R', refreshExpiresIn: 7200 },
      }),
    );
    const cipher = new TokenCipher('new2', k2, new Map([['old1', k1]]));
    const rotated = new ConnectionRepo(rig.db, cipher);
    expect(await rotated.credentials.resealStale(1000)).toBeGreaterThanOrEqual(1);
    const r = await row(ws);
    expect(r.access_token_enc).toMatch(/^new2:/);
    expect(r.refresh_token_enc).toMatch(/^new2:/);
    expect(cipher.open(r.access_token_enc, tokenAad.access(ws))).toBe('A');
    expect(cipher.open(r.refresh_token_enc, tokenAad.refresh(ws))).toBe('R');
    // Readable without the old key now.
    expect(new TokenCipher('new2', k2).open(r.refresh_token_enc, tokenAad.refresh(ws))).toBe('R');
  });
});

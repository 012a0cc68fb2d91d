import { describe, expect, it } from 'vitest';
import { buildSandbox, type SandboxApp } from './app.js';
import { PlatformCode } from './codes.js';
import { obtainTokens, refresh, track, trackBody, validRecord } from './testkit.js';

async function postFaults(app: SandboxApp, body: unknown) {
  return app.inject({ method: 'POST', url: '/_control/faults', payload: body as object });
}

async function ready() {
  const app = buildSandbox();
  const tokens = await obtainTokens(app);
  return { app, tokens };
}

describe('fault queue', () => {
  it('applies queued faults to the next calls of that endpoint, in order', async () => {
    const { app, tokens } = await ready();
    const res = await postFaults(app, {
      events: [
        { http_status: 503, times: 2 },
        { code: PlatformCode.TOO_MANY_REQUESTS, times: 1 },
        { http_status: 429, retry_after: 7 },
      ],
    });
    expect(res.statusCode).toBe(200);
    const body = trackBody([validRecord()]);

    const seen: Array<[number, number, unknown]> = [];
    for (let i = 0; i < 5; i++) {
      const r = await track(app, tokens.access_token, body);
      seen.push([r.status, r.body.code, r.headers['retry-after']]);
    }
    expect(seen).toEqual([
      [503, PlatformCode.SERVICE_UNAVAILABLE, undefined],
      [503, PlatformCode.SERVICE_UNAVAILABLE, undefined],
      [200, PlatformCode.TOO_MANY_REQUESTS, undefined],
      [429, PlatformCode.TOO_MANY_REQUESTS, '7'],
      [200, 0, undefined],
    ]);
    // Faulted calls stored nothing.
    expect(app.sandbox.received).toHaveLength(1);

    const calls = (await app.inject({ method: 'GET', url: '/_control/calls?endpoint=events' })).json();
    expect(calls.calls.map((c: { http_status: number; fault: boolean }) => [c.http_status, c.fault])).toEqual([
      [503, true],
      [503, true],
      [200, true],
      [429, true],
      [200, false],
    ]);
  });

  it('a code fault answers HTTP 200 with that code and a matching message', async () => {
    const { app, tokens } = await ready();
    await postFaults(app, { events: [{ code: PlatformCode.SYSTEM_ERROR }] });
    const r = await track(app, tokens.access_token, trackBody([validRecord()]));
    expect(r.status).toBe(200);
    expect(r.body.code).toBe(PlatformCode.SYSTEM_ERROR);
    expect(r.body.message).toMatch(/System error/);
  });

  it('a delay-only fault slows the call, which then succeeds and stores the events', async () => {
    const { app, tokens } = await ready();
    await postFaults(app, { events: [{ delay_ms: 300, times: 1 }] });
    const started = Date.now();
    const r = await track(app, tokens.access_token, trackBody([validRecord()]));
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(r.body.code).toBe(0);
    expect(app.sandbox.received).toHaveLength(1);
  });

  it('queues are per endpoint', async () => {
    const { app, tokens } = await ready();
    await postFaults(app, { refresh: [{ http_status: 500 }], token: [{ code: 50000 }] });
    expect((await track(app, tokens.access_token, trackBody([validRecord()]))).body.code).toBe(0);
    const r = await refresh(app, tokens.refresh_token!);
    expect(r.status).toBe(500);
    expect(r.body.code).toBe(PlatformCode.SYSTEM_ERROR);
    // The failed refresh did not rotate anything: the same refresh token still works.
    expect((await refresh(app, tokens.refresh_token!)).body.code).toBe(0);
    await expect(obtainTokens(app)).rejects.toThrow(/50000/);
    await obtainTokens(app);
  });

  it('advertiser and revoke faults', async () => {
    const { app, tokens } = await ready();
    await postFaults(app, { advertiser: [{ code: PlatformCode.TOO_MANY_REQUESTS }], revoke: [{ http_status: 502 }] });
    const info = await app.inject({
      method: 'GET',
      url: `/open_api/v1.3/advertiser/info/?advertiser_ids=${encodeURIComponent('["7000000000000000001"]')}`,
      headers: { 'access-token': tokens.access_token },
    });
    expect(info.json().code).toBe(PlatformCode.TOO_MANY_REQUESTS);
    const revoke = await app.inject({
      method: 'POST',
      url: '/open_api/v1.3/oauth2/revoke_token/',
      payload: { app_id: 'sandbox-app', secret: 'sandbox-secret', access_token: tokens.access_token },
    });
    expect(revoke.statusCode).toBe(502);
    expect((await track(app, tokens.access_token, trackBody([validRecord()]))).body.code).toBe(0);
  });

  it('GET shows and DELETE clears the queues', async () => {
    const app = buildSandbox();
    await postFaults(app, { events: [{ http_status: 503, times: 5 }] });
    expect((await app.inject({ method: 'GET', url: '/_control/faults' })).json().faults.events).toEqual([
      { http_status: 503, times: 5 },
    ]);
    await app.inject({ method: 'DELETE', url: '/_control/faults' });
    expect((await app.inject({ method: 'GET', url: '/_control/faults' })).json().faults.events).toEqual([]);
  });

  it.each([
    [{ nowhere: [{ http_status: 500 }] }],
    [{ events: { http_status: 500 } }],
    [{ events: [{ times: 3 }] }],
    [{ events: [{ http_status: 99 }] }],
    [{ events: [{ http_status: 500, times: 0 }] }],
    [{ events: [{ code: 0 }] }],
    [{ events: [{ delay_ms: -1 }] }],
    [{ events: [{ http_status: 500, bogus: 1 }] }],
  ])('rejects the bad fault spec %j', async (body) => {
    const app = buildSandbox();
    const res = await postFaults(app, body);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBeTruthy();
    expect(app.sandbox.faults.events).toEqual([]);
  });
});

describe('call log', () => {
  it('records token exchange, refresh, revoke and event calls, and can be cleared', async () => {
    const { app, tokens } = await ready();
    await refresh(app, tokens.refresh_token!);
    await track(app, tokens.access_token, trackBody([validRecord()]));
    const { calls } = (await app.inject({ method: 'GET', url: '/_control/calls' })).json();
    expect(calls.map((c: { method: string; path: string; code: number | null }) => [c.method, c.path, c.code])).toEqual([
      ['GET', '/portal/auth', null],
      ['POST', '/open_api/v1.3/oauth2/access_token/', 0],
      ['POST', '/open_api/v1.3/oauth2/refresh_token/', 0],
      ['POST', '/open_api/v1.3/event/track/', 0],
    ]);
    expect(Date.parse(calls[0].at)).not.toBeNaN();
    const refreshes = (await app.inject({ method: 'GET', url: '/_control/calls?path=/open_api/v1.3/oauth2/refresh_token/' })).json();
    expect(refreshes.count).toBe(1);
    await app.inject({ method: 'DELETE', url: '/_control/calls' });
    expect((await app.inject({ method: 'GET', url: '/_control/calls' })).json().count).toBe(0);
  });
});

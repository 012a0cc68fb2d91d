import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { META_APP, startMetaSandbox, type RunningMetaSandbox } from '../../../test/sandbox/meta/app.js';
import { conversion } from '../../../test/helpers/forwarder-rig.js';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import type { PlatformAnswer } from '../platform-client.js';
import { deliverBatch, type DeliveryHooks } from './deliver.js';
import type { Outgoing } from './kind.js';
import { classifyMeta, connectMeta, fbcFromUrl, MetaClient, MetaNotConfiguredError, metaEvent, metaKind, parseGraphAnswer } from './meta.js';

const PIXEL = '1234567890';
const H = 'b'.repeat(64);
let sb: RunningMetaSandbox;
let client: MetaClient;
beforeAll(async () => {
  sb = await startMetaSandbox({ pixels: [PIXEL] });
  client = new MetaClient({ apiBase: sb.apiBase, appId: META_APP.id, appSecret: META_APP.secret, timeoutMs: 2000 });
});
afterAll(() => sb.close());
afterEach(async () => {
  await fetch(`${sb.controlUrl}/faults`, { method: 'DELETE' });
});

const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const control = async (path: string, body?: unknown): Promise<any> =>
  (
    await fetch(`${sb.controlUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  ).json();

/** The login dialog as a browser runs it: the code Meta sends back. */
async function dialogCode(redirect = REDIRECT): Promise<string> {
  const url = `${sb.authUrl}?${new URLSearchParams({ client_id: META_APP.id, redirect_uri: redirect, state: 's1', scope: 'ads_management' })}`;
  const res = await fetch(url, { redirect: 'manual' });
  const back = new URL(res.headers.get('location')!);
  expect(back.searchParams.get('state')).toBe('s1');
  return back.searchParams.get('code')!;
}
async function connected(): Promise<string> {
  const g = await connectMeta(client, await dialogCode(), REDIRECT, PIXEL);
  if ('error' in g) throw new Error(g.error);
  return g.accessToken;
}

/** A record as enrich builds it, with the Meta event name the destination's mapping gives. */
function record(over: Partial<PlatformEventRecord> = {}): PlatformEventRecord {
  return {
    ...conversion('ws', { record: { event: 'Purchase', user: { email: [H], user_agent: 'Mozilla/5.0' }, properties: { value: 20, currency: 'EUR' } } }).record,
    ...over,
  };
}
const out = (r: PlatformEventRecord): Outgoing => ({ eventId: r.event_id, record: r });
const group = (testEventCode = '') => ({ eventSource: 'website', eventSourceId: PIXEL, testEventCode });

function recorder(fresh: () => Promise<string | null> = async () => null) {
  const log: string[] = [];
  const ids = (b: Outgoing[]) => b.map((r) => r.eventId).join(',');
  const hooks: DeliveryHooks<Outgoing> = {
    attempted: async () => {},
    sent: async (b) => void log.push(`sent ${ids(b)}`),
    refused: async (b, r) => void log.push(`refused ${ids(b)} ${r.code} ${r.message}`),
    withheld: async (b, reason) => void log.push(`withheld ${ids(b)} ${reason}`),
    retry: async (b, c) => void log.push(`retry ${ids(b)} ${c.reason}`),
    tokenRefused: async (b) => {
      log.push(`token ${ids(b)}`);
      return fresh();
    },
  };
  return { log, hooks };
}
async function receivedIds(): Promise<string[]> {
  return ((await control('/received')).events as Array<{ event: { event_id: string } }>).map((e) => e.event.event_id);
}

describe('Meta: connecting', () => {
  it('the dialog code becomes a long-lived token that reaches the pixel', async () => {
    const g = await connectMeta(client, await dialogCode(), REDIRECT, PIXEL);
    expect(g).toMatchObject({ accountId: PIXEL, expiresIn: 60 * 24 * 3600 });
    const token = (g as { accessToken: string }).accessToken;
    expect((await client.events(token, PIXEL, { data: [metaEvent(record(), { action_source: 'website', pii_mode: 'hashed' })] })).code).toBe(0);
  });

  describe('bad input', () => {
    it.each([
      ['a wrong app secret', async () => connectMeta(new MetaClient({ apiBase: sb.apiBase, appId: META_APP.id, appSecret: 'nope', timeoutMs: 2000 }), await dialogCode(), REDIRECT, PIXEL), /client secret/],
      ['a code used twice', async () => {
        const code = await dialogCode();
        await connectMeta(client, code, REDIRECT, PIXEL);
        return connectMeta(client, code, REDIRECT, PIXEL);
      }, /verification code/],
      ['another redirect_uri than the dialog had', async () => connectMeta(client, await dialogCode(), 'http://127.0.0.1:9/other', PIXEL), /redirect_uri/],
      ['a pixel the token cannot reach', async () => connectMeta(client, await dialogCode(), REDIRECT, '999'), /cannot reach pixel 999/],
      ['a failing long-lived exchange', async () => {
        const code = await dialogCode();
        await control('/faults', { exchange: [{ delay_ms: 0, times: 1 }, { http_status: 500, code: 2, message: 'Service temporarily unavailable' }] });
        return connectMeta(client, code, REDIRECT, PIXEL);
      }, /long-lived token exchange refused/],
    ])('refuses %s', async (_name, run, message) => {
      const g = await run();
      expect('error' in g && g.error).toMatch(message);
    });

    it('an app without META_APP_ID or META_APP_SECRET cannot connect', async () => {
      const bare = new MetaClient({ apiBase: sb.apiBase, appId: undefined, appSecret: undefined, timeoutMs: 2000 });
      expect(bare.configured).toBe(false);
      expect(() => bare.exchangeCode('c', REDIRECT)).toThrow(MetaNotConfiguredError);
    });
  });
});

describe('Meta: reading answers', () => {
  const answer = (over: Partial<PlatformAnswer>): PlatformAnswer => ({
    endpoint: 'meta_events',
    httpStatus: 400,
    transportError: null,
    code: null,
    message: '',
    requestId: null,
    data: null,
    retryAfterMs: null,
    ...over,
  });
  const err = (code: number, extra: Record<string, unknown> = {}) => answer({ code, data: { code, ...extra } });
  it.each([
    ['events_received', answer({ httpStatus: 200, code: 0 }), 'ok', undefined],
    ['application rate limit (4)', err(4), 'retry', undefined],
    ['user rate limit (17)', err(17), 'retry', undefined],
    ['ads rate limit (613)', err(613), 'retry', undefined],
    ['temporary service error (2)', err(2), 'retry', undefined],
    ['any error marked transient', err(100, { is_transient: true }), 'retry', undefined],
    ['HTTP 503', answer({ httpStatus: 503 }), 'retry', undefined],
    ['a timeout', answer({ httpStatus: 0, transportError: 'timeout' }), 'retry', undefined],
    ['an HTML error page', answer({ httpStatus: 502 }), 'retry', undefined],
    ['an expired token (190/463)', err(190, { error_subcode: 463 }), 'token', undefined],
    ['a revoked session (190/460)', err(190, { error_subcode: 460 }), 'token', undefined],
    ['a removed permission (200)', err(200), 'token', undefined],
    ['an invalid parameter (100)', err(100, { error_subcode: 2804004 }), 'permanent', true],
    ['an unknown pixel (100/33)', err(100, { error_subcode: 33 }), 'permanent', false],
    ['any other error', err(803), 'permanent', false],
  ])('%s', (_name, a, kind, perRecord) => {
    const c = classifyMeta(a);
    expect(c.kind).toBe(kind);
    if (c.kind === 'permanent') expect(c.perRecord).toBe(perRecord);
  });

  describe('bad input', () => {
    it.each([
      ['empty', '', null, /empty body/],
      ['HTML', '<html><body>Bad gateway</body></html>', null, /not JSON: Bad gateway/],
      ['an array', '[1]', null, /not a JSON object/],
      ['an error without a code', '{"error":{"message":"x"}}', null, /without a numeric code/],
      ['a Graph error', '{"error":{"message":"Invalid parameter","code":100,"error_user_msg":"too old","fbtrace_id":"T"}}', 100, /^Invalid parameter: too old$/],
      ['a success', '{"events_received":2,"fbtrace_id":"T"}', 0, /OK/],
    ])('%s', (_name, text, code, message) => {
      const g = parseGraphAnswer(text);
      expect(g.code).toBe(code);
      expect(g.message).toMatch(message);
    });
  });
});

describe('Meta: the request shape', () => {
  const url = 'https://shop.example/p?fbclid=IwAR2x&ttclid=T';
  it.each([
    ['hashed keys go as em/ph/external_id', record({ user: { email: [H], phone: [H], external_id: [H], user_agent: 'UA' } }), { pii_mode: 'hashed' as const },
      { user_data: { em: [H], ph: [H], external_id: [H], client_user_agent: 'UA' }, data_processing_options: [] }],
    ['pii_mode none keeps only the user agent and click ids', record({ page: { url }, user: { email: [H], user_agent: 'UA', ttclid: 'T' } }), { pii_mode: 'none' as const },
      { user_data: { client_user_agent: 'UA', fbc: `fb.1.${record().event_time * 1000}.IwAR2x` } }],
    ['limited data use becomes LDU with geolocation', record({ limited_data_use: true }), {},
      { data_processing_options: ['LDU'], data_processing_options_country: 0, data_processing_options_state: 0 }],
    ['ad_personalization denied becomes LDU', record({ consent: { ad_user_data: 'GRANTED', ad_personalization: 'DENIED' } }), {}, { data_processing_options: ['LDU'] }],
    ['commerce properties become custom_data', record({ properties: { value: 9.5, currency: 'USD', order_id: 'o1', contents: [{ content_id: 'sku', quantity: 2, price: 4.75 }] } }), {},
      { custom_data: { value: 9.5, currency: 'USD', order_id: 'o1', contents: [{ id: 'sku', quantity: 2, item_price: 4.75 }] } }],
    ['a store event has no source URL', record(), { action_source: 'physical_store' as const }, { action_source: 'physical_store' }],
  ])('%s', (_name, r, setup, expected) => {
    const e = metaEvent(r, { action_source: 'website', pii_mode: 'hashed', ...setup });
    expect(e).toMatchObject({ event_name: r.event, event_id: r.event_id, event_time: r.event_time, ...expected });
    expect(JSON.stringify(e)).not.toContain('ttclid');
    if (e.action_source !== 'website') expect(e).not.toHaveProperty('event_source_url');
  });

  it('fbc only from an fbclid', () => {
    expect(fbcFromUrl('https://a.example/?fbclid=X1', 1_780_000_000)).toBe('fb.1.1780000000000.X1');
    expect(fbcFromUrl('https://a.example/?gclid=X1', 1_780_000_000)).toBeUndefined();
    expect(fbcFromUrl('not a url', 1_780_000_000)).toBeUndefined();
  });
});

describe('Meta: delivering through the stand-in', () => {
  const kind = () => metaKind(client, { action_source: 'website', pii_mode: 'hashed' });

  it('one event too old refuses the request: it alone is dead-lettered, the others arrive', async () => {
    const token = await connected();
    const rows = Array.from({ length: 5 }, (_, i) => out(record(i === 3 ? { event_time: Math.floor(Date.now() / 1000) - 8 * 86_400 } : {})));
    const before = (await control('/calls?endpoint=events')).count as number;
    const { log, hooks } = recorder();
    expect(await deliverBatch(kind(), group(), token, rows, hooks)).toBe('done');
    const bad = rows[3]!.eventId;
    expect(log.filter((l) => l.startsWith('refused'))).toEqual([expect.stringMatching(new RegExp(`^refused ${bad} 100 .*within 7 days`))]);
    const received = await receivedIds();
    for (const r of rows) expect(received.includes(r.eventId)).toBe(r.eventId !== bad);
    // 5 → halves 3+2 → the 2 with the bad one → 1+1: five requests for one bad event among five.
    expect(((await control('/calls?endpoint=events')).count as number) - before).toBe(5);
  });

  it('a throttled request is retried later, then arrives once', async () => {
    const token = await connected();
    const rows = [out(record()), out(record())];
    await control('/faults', { events: [{ code: 17, message: 'User request limit reached', is_transient: true }] });
    const first = recorder();
    expect(await deliverBatch(kind(), group(), token, rows, first.hooks)).toBe('stopped');
    expect(first.log).toEqual([`retry ${rows.map((r) => r.eventId).join(',')} 17`]);
    expect((await receivedIds()).filter((id) => rows.some((r) => r.eventId === id))).toEqual([]);
    const second = recorder();
    expect(await deliverBatch(kind(), group(), token, rows, second.hooks)).toBe('done');
    expect((await receivedIds()).filter((id) => rows.some((r) => r.eventId === id))).toEqual(rows.map((r) => r.eventId));
  });

  it('a token Meta stops taking: delivery stops for re-authorisation, and a new connection sends', async () => {
    const old = await connected();
    await control('/expire-tokens', {});
    const rows = [out(record())];
    const stopped = recorder();
    expect(await deliverBatch(kind(), group(), old, rows, stopped.hooks)).toBe('stopped');
    expect(stopped.log).toEqual([`token ${rows[0]!.eventId}`]);
    const fresh = await connected();
    const resumed = recorder();
    expect(await deliverBatch(kind(), group(), old, rows, resumed.hooks)).toBe('stopped');
    const reauthorised = recorder(async () => fresh);
    expect(await deliverBatch(kind(), group(), old, rows, reauthorised.hooks)).toBe('done');
    expect(reauthorised.log).toEqual([`token ${rows[0]!.eventId}`, `sent ${rows[0]!.eventId}`]);
  });

  it('consent: an event whose person denied ad_user_data never goes to Meta', async () => {
    const token = await connected();
    const denied = out(record({ consent: { ad_user_data: 'DENIED', ad_personalization: 'DENIED' } }));
    const ok = out(record());
    const { log, hooks } = recorder();
    await deliverBatch(kind(), group(), token, [denied, ok], hooks);
    expect(log).toEqual([`withheld ${denied.eventId} consent_denied`, `sent ${ok.eventId}`]);
    expect(await receivedIds()).not.toContain(denied.eventId);
  });

  it('a test event code goes with the request', async () => {
    const token = await connected();
    const r = out(record());
    await deliverBatch(kind(), group('TEST42'), token, [r], recorder().hooks);
    const got = ((await control('/received')).events as Array<{ test_event_code: string | null; event: { event_id: string } }>).find((e) => e.event.event_id === r.eventId);
    expect(got?.test_event_code).toBe('TEST42');
  });

  it('disconnecting revokes the permissions: the token stops working at once', async () => {
    const token = await connected();
    expect(await client.revoke(token)).toMatchObject({ code: 0, data: { success: true } });
    const after = await client.events(token, PIXEL, { data: [metaEvent(record(), { action_source: 'website', pii_mode: 'hashed' })] });
    expect(classifyMeta(after).kind).toBe('token');
    expect(after.data).toMatchObject({ code: 190, error_subcode: 460 });
  });
});

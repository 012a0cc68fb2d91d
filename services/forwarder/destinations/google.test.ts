import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GOOGLE_APP, ingestViolation, startGoogleSandbox, type RunningGoogleSandbox } from '../../../test/sandbox/google/app.js';
import { conversion } from '../../../test/helpers/forwarder-rig.js';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import type { PlatformAnswer } from '../platform-client.js';
import { deliverBatch, type DeliveryHooks } from './deliver.js';
import type { Outgoing } from './kind.js';
import { classifyGoogle, GoogleClient, googleEvent, googleKind, GoogleNotConfiguredError, googleSetupSchema, parseGoogleAnswer, parseGoogleGrant, type GoogleSetup } from './google.js';

const H = 'e'.repeat(64);
const REDIRECT = 'http://127.0.0.1:9/oauth/destination/callback';
const SETUP: GoogleSetup = { customer_id: '1234567890', conversion_action_id: '987654', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'purchase' }] };
let sb: RunningGoogleSandbox;
let client: GoogleClient;
const clientWith = (secret: string | undefined) =>
  new GoogleClient({ apiBase: sb.apiBase, tokenUrl: sb.tokenUrl, revokeUrl: sb.revokeUrl, clientId: secret === undefined ? undefined : GOOGLE_APP.id, clientSecret: secret, timeoutMs: 2000 });
beforeAll(async () => {
  sb = await startGoogleSandbox();
  client = clientWith(GOOGLE_APP.secret);
});
afterAll(() => sb.close());
afterEach(async () => {
  await fetch(`${sb.controlUrl}/faults`, { method: 'DELETE' });
});

const control = async (path: string, body?: unknown): Promise<any> =>
  (await fetch(`${sb.controlUrl}${path}`, { method: body === undefined ? 'GET' : 'POST', headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })).json();
async function authCode(): Promise<string> {
  const q = new URLSearchParams({ client_id: GOOGLE_APP.id, redirect_uri: REDIRECT, response_type: 'code', scope: 'https://www.googleapis.com/auth/datamanager', access_type: 'offline', state: 's' });
  const res = await fetch(`${sb.authUrl}?${q}`, { redirect: 'manual' });
  return new URL(res.headers.get('location')!).searchParams.get('code')!;
}
async function connected(): Promise<{ access: string; refresh: string }> {
  const g = parseGoogleGrant(await client.exchangeCode(await authCode(), REDIRECT));
  if ('error' in g) throw new Error(g.error);
  return { access: g.accessToken, refresh: g.refreshToken! };
}
function record(over: Partial<PlatformEventRecord> = {}): PlatformEventRecord {
  return {
    ...conversion('ws', { record: { event: 'purchase', page: { url: 'https://shop.example/c?gclid=G1&fbclid=F1' }, user: { email: [H], user_agent: 'UA', ttclid: 'T' }, properties: { value: 12, currency: 'eur' } } }).record,
    ...over,
  };
}
const out = (r: PlatformEventRecord): Outgoing => ({ eventId: r.event_id, record: r });
const group = (test = '') => ({ eventSource: '', eventSourceId: SETUP.customer_id, testEventCode: test });
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
const imported = async (): Promise<Array<{ event: Record<string, any>; validate_only: boolean }>> => (await control('/received')).events;

describe('Google: connecting, refreshing, revoking', () => {
  it('the code becomes an access token and a refresh token; a refresh gives a new access token', async () => {
    const { access, refresh } = await connected();
    expect(access).toMatch(/^ya29\./);
    const r = parseGoogleGrant(await client.refresh(refresh));
    expect(r).toMatchObject({ accessToken: expect.stringMatching(/^ya29\./), refreshToken: undefined, expiresIn: 3599 });
  });

  it('revoking ends the grant: no refresh, no ingestion', async () => {
    const { access, refresh } = await connected();
    expect((await client.revoke(refresh)).code).toBe(0);
    expect(parseGoogleGrant(await client.refresh(refresh))).toEqual({ error: expect.stringMatching(/invalid_grant/) });
    expect(classifyGoogle(await client.ingest(access, { destinations: [], encoding: 'HEX', events: [] })).kind).toBe('token');
  });

  describe('bad input', () => {
    it.each([
      ['a wrong client secret', async () => clientWith('nope').exchangeCode(await authCode(), REDIRECT), /invalid_client/],
      ['a code used twice', async () => {
        const code = await authCode();
        await client.exchangeCode(code, REDIRECT);
        return client.exchangeCode(code, REDIRECT);
      }, /invalid_grant/],
      ['another redirect_uri', async () => client.exchangeCode(await authCode(), 'http://127.0.0.1:9/other'), /redirect_uri_mismatch/],
      ['an unknown refresh token', async () => client.refresh('1//nope'), /invalid_grant/],
    ])('refuses %s', async (_n, run, message) => {
      expect(parseGoogleGrant(await run())).toEqual({ error: expect.stringMatching(message) });
    });
    it('without GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET nothing connects', () => {
      expect(clientWith(undefined).configured).toBe(false);
      expect(() => clientWith(undefined).exchangeCode('c', REDIRECT)).toThrow(GoogleNotConfiguredError);
    });
    it.each([
      ['a customer id with dashes', { ...SETUP, customer_id: '123-456-7890' }, /customer_id/],
      ['no conversion action', { ...SETUP, conversion_action_id: undefined }, /conversion_action_id/],
      ['an unknown field', { ...SETUP, gclid: 'x' }, /Unrecognized key/],
    ])('a setup with %s is refused', (_n, setup, message) => {
      const r = googleSetupSchema.safeParse(setup);
      expect(r.success).toBe(false);
      expect(JSON.stringify(r.error?.issues)).toMatch(message);
    });
  });
});

describe('Google: reading answers', () => {
  const a = (httpStatus: number, body: string): PlatformAnswer => ({ endpoint: 'google_ingest', httpStatus, transportError: null, retryAfterMs: null, ...parseGoogleAnswer(body, httpStatus) });
  const rpc = (code: number, status: string, violations: string[] = []) =>
    JSON.stringify({ error: { code, status, message: 'm', details: violations.length ? [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: violations.map((field) => ({ field, description: 'bad' })) }] : undefined } });
  it.each([
    ['a request id', a(200, '{"requestId":"r1"}'), 'ok', undefined],
    ['RESOURCE_EXHAUSTED', a(429, rpc(429, 'RESOURCE_EXHAUSTED')), 'retry', undefined],
    ['UNAVAILABLE', a(503, rpc(503, 'UNAVAILABLE')), 'retry', undefined],
    ['an HTML 502', a(502, '<html>bad gateway</html>'), 'retry', undefined],
    ['UNAUTHENTICATED', a(401, rpc(401, 'UNAUTHENTICATED')), 'token', undefined],
    ['PERMISSION_DENIED', a(403, rpc(403, 'PERMISSION_DENIED')), 'token', undefined],
    ['an event named invalid', a(400, rpc(400, 'INVALID_ARGUMENT', ['events[3].eventTimestamp'])), 'permanent', true],
    ['the destination invalid', a(400, rpc(400, 'INVALID_ARGUMENT', ['destinations[0].operatingAccount'])), 'permanent', false],
  ])('%s', (_n, answer, kind, perRecord) => {
    const c = classifyGoogle(answer);
    expect(c.kind).toBe(kind);
    if (c.kind === 'permanent') expect(c.perRecord).toBe(perRecord);
  });
  describe('bad input', () => {
    it.each([
      ['empty error body', '', 500, null],
      ['HTML', '<p>x</p>', 200, null],
      ['an OAuth error', '{"error":"invalid_grant","error_description":"revoked"}', 400, 400],
      ['an array', '[]', 200, null],
    ])('%s', (_n, text, status, code) => {
      expect(parseGoogleAnswer(text, status).code).toBe(code);
    });
  });
});

describe('Google: the request shape', () => {
  it.each([
    ['gclid from the page URL, hashed email, consent, value', record(), {}, { adIdentifiers: { gclid: 'G1' }, userData: { userIdentifiers: [{ emailAddress: H }] }, consent: { adUserData: 'CONSENT_GRANTED', adPersonalization: 'CONSENT_GRANTED' }, conversionValue: 12, currency: 'EUR' }],
    ['gbraid when there is no gclid', record({ page: { url: 'https://a.example/?gbraid=GB&wbraid=WB' } }), {}, { adIdentifiers: { gbraid: 'GB' } }],
    ['wbraid alone', record({ page: { url: 'https://a.example/?wbraid=WB' } }), {}, { adIdentifiers: { wbraid: 'WB' } }],
    ['ad_user_data denied: no user data, consent says so', record({ consent: { ad_user_data: 'DENIED', ad_personalization: 'UNSPECIFIED' } }), {}, { consent: { adUserData: 'CONSENT_DENIED', adPersonalization: 'CONSENT_STATUS_UNSPECIFIED' } }],
  ])('%s', (_n, r, setup, expected) => {
    const e = googleEvent(r, { ...SETUP, ...setup });
    expect(e).toMatchObject({ eventTimestamp: new Date(r.event_time * 1000).toISOString(), transactionId: r.transaction_id ?? r.event_id, eventSource: 'WEB', ...expected });
    if (r.consent.ad_user_data === 'DENIED') expect(e).not.toHaveProperty('userData');
    expect(JSON.stringify(e)).not.toMatch(/F1|"T"|ttclid|fbc/);
  });
  it('pii_mode none sends no user data', () => {
    expect(googleEvent(record(), { pii_mode: 'none' })).not.toHaveProperty('userData');
  });
});

describe('Google: delivering through the stand-in', () => {
  const kind = () => googleKind(client, SETUP);

  it('a request refused for one event names it: that event is resent alone and dead-lettered, the rest import in one more request', async () => {
    const { access } = await connected();
    const rows = [0, 1, 2, 3].map((i) => out(record(i === 2 ? { event_time: Math.floor(Date.now() / 1000) - 100 * 86_400 } : {})));
    const before = (await control('/calls?endpoint=ingest')).count as number;
    const { log, hooks } = recorder();
    expect(await deliverBatch(kind(), group(), access, rows, hooks)).toBe('done');
    expect(log).toEqual([`refused ${rows[2]!.eventId} 400 INVALID_ARGUMENT Request contains an invalid argument.; events[0].eventTimestamp: is older than 90 days`, `sent ${[0, 1, 3].map((i) => rows[i]!.eventId).join(',')}`]);
    expect(((await control('/calls?endpoint=ingest')).count as number) - before).toBe(3);
  });

  it('an expired access token is refreshed and the batch resent once; throttling is retried later', async () => {
    const { access, refresh } = await connected();
    await control('/expire-access', {});
    const r = out(record());
    const { log, hooks } = recorder(async () => {
      const g = parseGoogleGrant(await client.refresh(refresh));
      return 'error' in g ? null : g.accessToken;
    });
    expect(await deliverBatch(kind(), group(), access, [r], hooks)).toBe('done');
    expect(log).toEqual([`token ${r.eventId}`, `sent ${r.eventId}`]);

    const fresh = parseGoogleGrant(await client.refresh(refresh)) as { accessToken: string };
    await control('/faults', { ingest: [{ http_status: 429, status: 'RESOURCE_EXHAUSTED' }] });
    const throttled = recorder();
    expect(await deliverBatch(kind(), group(), fresh.accessToken, [out(record())], throttled.hooks)).toBe('stopped');
    expect(throttled.log[0]).toMatch(/^retry .* http_429$/);
  });

  it('an event with nothing to match on is not sent; a test event is validated, not imported', async () => {
    const { access } = await connected();
    const bare = out(record({ page: { url: 'https://a.example/' }, user: { user_agent: 'UA' } }));
    const test = out(record());
    const { log, hooks } = recorder();
    await deliverBatch(kind(), group(), access, [bare], hooks);
    expect(log).toEqual([`withheld ${bare.eventId} no_match_keys`]);
    await deliverBatch(kind(), group('TEST1'), access, [test], recorder().hooks);
    expect((await imported()).find((e) => e.event.transactionId === test.record.event_id)).toMatchObject({ validate_only: true });
  });

  it('the stand-in refuses what Google documents as invalid', () => {
    const now = Date.now();
    const ok = { destinations: [{ operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '1234567890' }, productDestinationId: '1' }], encoding: 'HEX', events: [googleEvent(record(), SETUP)] };
    expect(ingestViolation(ok, now)).toBeNull();
    expect(ingestViolation({ ...ok, events: Array.from({ length: 2001 }, () => ok.events[0]) }, now)?.description).toMatch(/at most 2000/);
    expect(ingestViolation({ ...ok, events: [{ ...ok.events[0], adIdentifiers: { gclid: 'a', wbraid: 'b' } }] }, now)?.description).toMatch(/mutually exclusive/);
    expect(ingestViolation({ ...ok, events: [{ ...ok.events[0], userData: { userIdentifiers: [{ emailAddress: 'a@b.c' }] } }] }, now)?.field).toBe('events[0].userData.userIdentifiers[0].emailAddress');
    expect(ingestViolation({ ...ok, destinations: [{ operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '123-456-7890' }, productDestinationId: '1' }] }, now)?.field).toBe('destinations[0].operatingAccount');
  });
});

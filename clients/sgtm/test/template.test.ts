/**
 * The server-side tag template (clients/sgtm/template.tpl): its sandboxed code, run by the harness with the
 * container's APIs against the real service (`node dist/services/compose/main.js`), on the shared identifier vectors.
 * What the service accepted is read from its log at the end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminClient, type AdminClient } from '../../../test/helpers/admin-client.js';
import { readTopic } from '../../../test/helpers/pipeline.js';
import { dedupeDrained } from '../../node/test/drain.js';
import { TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../../../test/helpers/service-process.js';
import { callingCodeOf, vectors } from '../../node/test/vectors.js';
import { API_PERMISSIONS, readTemplate, runTemplate, runTemplateTests, SECTIONS, unsupportedSyntax, type RunOptions } from './harness.js';

let svc: ServiceProcess;
let admin: AdminClient;
let ws: string;
let key: string;
/** Idempotency keys the tag sent and the service answered 200: each must be in the log exactly once. */
const accepted = new Set<string>();

beforeAll(async () => {
  svc = await startServiceProcess();
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  ws = (await admin.createWorkspace('sgtm')).id;
  key = (await admin.createKey(ws, 'live')).key;
});
afterAll(async () => {
  if (svc?.child.exitCode === null) await svc.kill();
});

const sections = readTemplate();
const code = sections['___SANDBOXED_JS_FOR_SERVER___']!;
let n = 0;

const ga4Event = (over: Record<string, unknown> = {}) => ({
  event_name: 'purchase',
  event_id: `evt-${++n}-${Date.now()}`,
  client_id: 'cid-1',
  user_id: 'u-1',
  ga_session_id: '1700000000',
  transaction_id: `T-${n}`,
  value: 19.9,
  currency: 'EUR',
  page_location: 'https://shop.example/thanks?ttclid=CLICK-9',
  user_agent: 'Mozilla/5.0',
  ip_override: '203.0.113.9',
  'x-ga-gcd': '13t3t3t3p5',
  'x-ga-protocol_version': '2',
  user_data: { email_address: ' Jane@Example.com ', phone_number: '+44 20 7946 0018' },
  ...over,
});

async function run(eventData: Record<string, unknown>, data: Record<string, unknown> = {}, more: Partial<RunOptions> = {}) {
  const r = await runTemplate({ data: { endpointUrl: `${svc.url}/`, apiKey: key, maxAttempts: '3', ...data }, eventData, ...more }, sections);
  const last = r.requests.at(-1);
  if (r.outcome === 'success' && last) accepted.add(last.headers['Idempotency-Key']!);
  return r;
}
const sentEvent = (r: Awaited<ReturnType<typeof run>>) => r.requests.at(-1)!.body[0];

describe('the template file', () => {
  it('has the sections of a server-side custom template, in order', () => {
    const text = Object.keys(sections);
    expect(text).toEqual([...SECTIONS]);
    const info = JSON.parse(sections['___INFO___']!);
    expect(info).toMatchObject({ type: 'TAG', containerContexts: ['SERVER'] });
  });

  it('uses no syntax the sandbox lacks', () => {
    expect(unsupportedSyntax(code)).toEqual([]);
  });

  it('reads only parameters it declares, and declares permissions for the APIs it requires', () => {
    const params = new Set<string>();
    const walk = (list: Array<{ name: string; subParams?: unknown[] }>) => {
      for (const p of list) {
        params.add(p.name);
        if (p.subParams) walk(p.subParams as never);
      }
    };
    walk(JSON.parse(sections['___TEMPLATE_PARAMETERS___']!));
    const used = new Set([...code.matchAll(/\bdata\.([A-Za-z]+)/g)].map((m) => m[1]!));
    for (const u of used) if (u !== 'gtmOnSuccess' && u !== 'gtmOnFailure') expect(params, `data.${u}`).toContain(u);
    const required = [...code.matchAll(/require\('([A-Za-z]+)'\)/g)].map((m) => m[1]!);
    const permissions = JSON.parse(sections['___SERVER_PERMISSIONS___']!).map((p: { instance: { key: { publicId: string } } }) => p.instance.key.publicId);
    for (const api of required) {
      expect(Object.keys(API_PERMISSIONS), api).toContain(api);
      const needs = API_PERMISSIONS[api];
      if (needs) expect(permissions, api).toContain(needs);
    }
  });

  it("passes its own ___TESTS___ scenarios (the ones the GTM UI runs)", async () => {
    const results = await runTemplateTests(sections);
    expect(results.length).toBeGreaterThanOrEqual(3);
    expect(results.filter((r) => r.error)).toEqual([]);
  });
});

describe('against the running service', () => {
  it('sends a GA4 purchase as endpoint B wants it, and the service answers success', async () => {
    const ev = ga4Event();
    const r = await run(ev);
    expect(r.outcome).toBe('success');
    const req = r.requests.at(-1)!;
    expect(req.url).toBe(`${svc.url}/v1/sgtm`);
    expect(req.outcome).toBe(200);
    expect(req.headers).toMatchObject({ 'Idempotency-Key': ev.event_id, 'API-Version': '2026-12-01', 'Content-Type': 'application/json' });
    const sent = sentEvent(r);
    expect(sent.event_name).toBe('purchase');
    expect(sent.event_metadata.consent).toEqual({ ad_storage: true, analytics_storage: true, ad_user_data: true, ad_personalization: false });
    expect(sent.event_metadata.identifiers).toEqual([
      { alias_type: 'client', anonymous_client_id: 'cid-1' },
      { alias_type: 'user', user_id: 'u-1' },
      { alias_type: 'email', hashed_email: vectors.email[0]!.sha256 },
      {
        alias_type: 'phone',
        hashed_phone: vectors.phone.find((v) => v.e164 === '+442079460018')!.sha256_e164,
        hashed_phone_numeric: vectors.phone.find((v) => v.e164 === '+442079460018')!.sha256_e164_numeric,
      },
    ]);
    // No plain personal data and none of the transport's fields leave the container.
    expect(JSON.stringify(sent)).not.toMatch(/jane@example\.com|7946 0018|203\.0\.113\.9|x-ga-/i);
    expect(sent.event_payload).toMatchObject({ value: 19.9, currency: 'EUR', session_id: '1700000000', page_location: ev.page_location });
    expect(Math.abs(sent.event_metadata.event_time - Date.now() / 1000)).toBeLessThan(60);
  });

  it('the same event sent twice is answered success twice (and held once, checked at the end)', async () => {
    const ev = ga4Event();
    expect((await run(ev)).outcome).toBe('success');
    expect((await run(ev)).outcome).toBe('success');
  });

  it('maps event names and carries the event time', async () => {
    const at = Date.now() - 3 * 3600_000;
    const r = await run(ga4Event({ event_name: 'sign_up', event_time: at }), { eventNameMap: [{ from: 'sign_up', to: 'CompleteRegistration' }] });
    expect(r.outcome).toBe('success');
    expect(sentEvent(r).event_name).toBe('CompleteRegistration');
    expect(sentEvent(r).event_metadata.event_time).toBe(Math.floor(at / 1000));
    eventTimes.set(r.requests.at(-1)!.headers['Idempotency-Key']!, Math.floor(at / 1000) * 1000);
  });

  it.each([
    ['Consent Mode v2 (gcd)', { 'x-ga-gcd': '13r3p3n3m5' }, {}, { ad_storage: true, analytics_storage: false, ad_user_data: true, ad_personalization: false }],
    ['Consent Mode v1 (gcs)', { 'x-ga-gcd': undefined, 'x-ga-gcs': 'G110' }, {}, { ad_storage: true, analytics_storage: false, ad_user_data: false, ad_personalization: false }],
    ['no consent state: the default (denied)', { 'x-ga-gcd': undefined }, {}, { ad_storage: false, analytics_storage: false, ad_user_data: false, ad_personalization: false }],
    ['no consent state, default granted', { 'x-ga-gcd': undefined }, { consentDefault: 'granted' }, { ad_storage: true, analytics_storage: true, ad_user_data: true, ad_personalization: true }],
    [
      'the four fields',
      {},
      { consentSource: 'fields', analyticsStorage: 'granted', adStorage: 'true', adUserData: '0', adPersonalization: 'denied' },
      { analytics_storage: true, ad_storage: true, ad_user_data: false, ad_personalization: false },
    ],
  ])('consent from %s', async (_name, over, data, expected) => {
    const r = await run(ga4Event(over), data);
    expect(r.outcome).toBe('success');
    expect(sentEvent(r).event_metadata.consent).toEqual(expected);
  });

  it('logs what it sends in debug mode, never the API key; only problems otherwise', async () => {
    const debug = await run(ga4Event(), {}, { debugMode: true });
    expect(debug.logs.some((l) => l.includes('[event-forwarder] sending purchase'))).toBe(true);
    expect(debug.logs.some((l) => l.includes('accepted (HTTP 200, attempt 1)'))).toBe(true);
    expect(debug.logs.join('\n')).not.toContain(key);
    const quiet = await run(ga4Event());
    expect(quiet.logs).toEqual([]);
  });
});

describe('the shared vectors, through the tag and the service', () => {
  const emailCases = vectors.email.filter((v) => v.sandbox !== false).map((v) => [v.name, v] as const);
  const phoneCases = vectors.phone.filter((v) => v.sandbox !== false).map((v) => [v.name, v] as const);

  it.each(emailCases)('email: %s', async (_name, v) => {
    const r = await run(ga4Event({ user_data: { email_address: v.input } }));
    expect(r.outcome).toBe('success');
    const ids = sentEvent(r).event_metadata.identifiers.filter((i: { alias_type: string }) => i.alias_type === 'email');
    expect(ids).toEqual(v.error ? [] : [{ alias_type: 'email', hashed_email: v.sha256 }]);
  });

  it.each(phoneCases)('phone: %s', async (_name, v) => {
    const callingCode = v.default_country ? callingCodeOf(v.default_country as Parameters<typeof callingCodeOf>[0]) : '';
    const r = await run(ga4Event({ user_data: { phone_number: v.input } }), { phoneDefaultCallingCode: callingCode });
    expect(r.outcome).toBe('success');
    const ids = sentEvent(r).event_metadata.identifiers.filter((i: { alias_type: string }) => i.alias_type === 'phone');
    expect(ids).toEqual(v.error ? [] : [{ alias_type: 'phone', hashed_phone: v.sha256_e164, hashed_phone_numeric: v.sha256_e164_numeric }]);
  });

  it('the known differences of the sandbox are exactly the vectors marked sandbox: false, and it never hashes a decomposed email', async () => {
    const marked = [...vectors.email, ...vectors.phone].filter((v) => v.sandbox === false).map((v) => v.name);
    expect(marked).toEqual([
      'decomposed accents become NFC',
      'Italy keeps the leading 0 of the national number',
      'too short for its country',
      'unknown country calling code',
    ]);
    const nfc = vectors.email.find((v) => v.sandbox === false)!;
    const r = await run(ga4Event({ user_data: { email_address: nfc.input } }));
    expect(sentEvent(r).event_metadata.identifiers.some((i: { alias_type: string }) => i.alias_type === 'email')).toBe(false);
  });

  it('already-hashed values pass through lower-cased', async () => {
    const h = vectors.email[0]!.sha256!;
    const r = await run(ga4Event({ user_data: { sha256_email_address: h.toUpperCase(), sha256_phone_number: 'A'.repeat(64) } }));
    expect(sentEvent(r).event_metadata.identifiers.slice(2)).toEqual([
      { alias_type: 'email', hashed_email: h },
      { alias_type: 'phone', hashed_phone: 'a'.repeat(64) },
    ]);
  });
});

const eventTimes = new Map<string, number>();
const answer = (statusCode: number, headers: Record<string, string> = {}, body = '') => Promise.resolve({ statusCode, headers, body });

describe('errors and retries', () => {
  it('retries a 503 at once and succeeds (the service takes the retry)', async () => {
    const r = await run(ga4Event(), {}, { intercept: (i) => (i === 0 ? answer(503, { 'retry-after': '1' }, '{"error":"Service Unavailable","message":"x"}') : undefined) });
    expect(r.outcome).toBe('success');
    expect(r.requests[0]!.outcome).toBe(503);
    expect(r.requests.at(-1)!.outcome).toBe(200);
    expect(new Set(r.requests.map((q) => q.headers['Idempotency-Key'])).size).toBe(1);
  });

  it('retries network failures and timeouts', async () => {
    const r = await run(ga4Event(), { maxAttempts: '5' }, {
      intercept: (i) => (i === 0 ? Promise.reject({ reason: 'failed' }) : i === 1 ? Promise.reject({ reason: 'timed_out' }) : undefined),
    });
    expect(r.outcome).toBe('success');
    expect(r.requests.slice(0, 2).map((q) => q.outcome)).toEqual(['failed', 'timed_out']);
    expect(r.requests.at(-1)!.outcome).toBe(200);
  });

  it('an answer lost after the service took the event: the retry is answered success and the event is held once', async () => {
    const r = await run(ga4Event(), {}, {
      intercept: (i, url, options, body) => (i === 0 ? fetch(url, { method: 'POST', headers: options.headers, body }).then(() => ({ statusCode: 502, headers: {}, body: '' })) : undefined),
    });
    expect(r.outcome).toBe('success');
    expect(r.requests[0]!.outcome).toBe(502);
    expect(r.requests.at(-1)!.outcome).toBe(200);
  });

  it('gives up after maxAttempts (at most 5) and fails the tag', async () => {
    const r = await run(ga4Event(), { maxAttempts: '9' }, { intercept: () => answer(503) });
    expect(r.outcome).toBe('failure');
    expect(r.requests).toHaveLength(5);
    expect(r.logs.at(-1)).toMatch(/refused \(HTTP 503, attempt 5\)/);
  });

  it('does not retry when Retry-After asks to wait longer than the container can', async () => {
    const r = await run(ga4Event(), {}, { intercept: () => answer(429, { 'retry-after': '30' }, '{"error":"Rate limit exceeded","message":"Try again later."}') });
    expect(r.outcome).toBe('failure');
    expect(r.requests).toHaveLength(1);
    expect(r.logs.at(-1)).toContain('Try again later.');
  });
});

describe('bad input', () => {
  it("the service's 400 is not retried; its message is logged", async () => {
    const r = await run(ga4Event({ event_time: Date.now() - 30 * 24 * 3600_000 }));
    expect(r.outcome).toBe('failure');
    expect(r.requests.map((q) => q.outcome)).toEqual([400]);
    expect(r.logs.at(-1)).toMatch(/refused \(HTTP 400, attempt 1\): \[0\]\.event_metadata\.event_time .* more than 7 days before the request/);
  });

  it('a wrong API key: 401, not retried', async () => {
    const r = await run(ga4Event(), { apiKey: 'evk_live_wrong' });
    expect(r.outcome).toBe('failure');
    expect(r.requests.map((q) => q.outcome)).toEqual([401]);
    expect(r.logs.at(-1)).toContain('Invalid or missing API key.');
    expect(r.logs.join('\n')).not.toContain('evk_live_wrong');
  });

  it('no endpoint or key: fails without sending', async () => {
    const r = await run(ga4Event(), { endpointUrl: '' });
    expect(r.outcome).toBe('failure');
    expect(r.requests).toEqual([]);
    expect(r.logs).toEqual(['[event-forwarder] not sent: set the endpoint URL and the API key']);
  });

  it.each([
    ['user_data that is not an object', { user_data: 'jane@example.com' }],
    ['an email that is a number', { user_data: { email_address: 42 } }],
    ['a phone with letters', { user_data: { phone_number: 'call me' } }],
    ['no event_name', { event_name: undefined }],
  ])('%s: the event is still sent, without the unusable identifier and without plain data', async (_name, over) => {
    const r = await run(ga4Event(over));
    expect(r.outcome).toBe('success');
    const sent = JSON.stringify(sentEvent(r));
    expect(sent).not.toContain('jane@example.com');
    expect(sent).not.toContain('call me');
  });
});

describe('what the service holds', () => {
  it('every event the tag got a success for is in the log exactly once', async () => {
    await dedupeDrained(admin);
    await svc.stop();
    const deduped = await readTopic<{ workspace_id: string; idempotency_key: string; event_time?: number }>(svc.dataDir, 'events.deduped');
    const keys = deduped.filter((r) => r.value.workspace_id === ws).map((r) => r.value.idempotency_key);
    expect(keys.length).toBe(accepted.size);
    expect(new Set(keys)).toEqual(accepted);
    for (const [k, ms] of eventTimes) expect(deduped.find((r) => r.value.idempotency_key === k)!.value.event_time).toBe(ms);
  }, 180_000);
});

import { describe, expect, it } from 'vitest';
import { buildSandbox } from './app.js';
import { KNOWN_EVENTS, LEGACY_EVENTS, PlatformCode, STANDARD_EVENTS } from './codes.js';
import { validateTrackBody } from './events.js';
import { obtainTokens, sha256Hex, track, trackBody, validRecord } from './testkit.js';

async function ready() {
  const app = buildSandbox();
  const tokens = await obtainTokens(app);
  return { app, token: tokens.access_token };
}

describe('event/track accepts valid batches', () => {
  it.each([
    ['a full web record', trackBody([validRecord()])],
    ['a minimal record', trackBody([{ event: 'ViewContent', event_id: 'e1', event_time: 1_767_225_600 }])],
    ['a legacy event name', trackBody([validRecord({ event: 'CompletePayment' })])],
    ['a test_event_code', trackBody([validRecord()], { test_event_code: 'TEST123' })],
    ['limited_data_use true', trackBody([validRecord({ limited_data_use: true })])],
    ['APP source', trackBody([validRecord()], { event_source: 'APP' })],
    ['OFFLINE source', trackBody([validRecord()], { event_source: 'OFFLINE' })],
    ['CRM source', trackBody([validRecord({ event: 'Lead' })], { event_source: 'CRM' })],
    ['1000 records', trackBody(Array.from({ length: 1000 }, (_, i) => validRecord({ event_id: `e${i}` })))],
    ['empty hashed arrays', trackBody([validRecord({ user: { email: [], phone: [] } })])],
  ])('%s', async (_name, body) => {
    const { app, token } = await ready();
    const res = await track(app, token, body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ code: 0, message: 'OK', data: {} });
    expect(res.body.request_id).toBeTruthy();
  });

  it('knows the standard and legacy event names', () => {
    for (const name of [...STANDARD_EVENTS, ...LEGACY_EVENTS]) expect(KNOWN_EVENTS.has(name)).toBe(true);
    expect(KNOWN_EVENTS.has('Purchase')).toBe(true);
    expect(KNOWN_EVENTS.has('PlaceAnOrder')).toBe(true);
  });
});

describe('event/track rejects bad input with HTTP 200 and code 40002', () => {
  const upper = sha256Hex('jane@example.com').toUpperCase();
  it.each([
    ['non-hex email', trackBody([validRecord({ user: { email: ['jane@example.com'] } })]), /data\[0\]\.user\.email\[0\]/],
    ['upper-case hash', trackBody([validRecord({ user: { email: [upper] } })]), /user\.email\[0\]/],
    ['email as a string', trackBody([validRecord({ user: { email: sha256Hex('a') } })]), /user\.email: must be an array/],
    ['short phone hash', trackBody([validRecord({ user: { phone: ['abc123'] } })]), /user\.phone\[0\]/],
    ['non-hex external_id', trackBody([validRecord({ user: { external_id: ['z'.repeat(64)] } })]), /user\.external_id\[0\]/],
    ['1001 records', trackBody(Array.from({ length: 1001 }, (_, i) => validRecord({ event_id: `e${i}` }))), /too many events \(1001\)/],
    ['empty data', trackBody([]), /data: required/],
    ['data not an array', { event_source: 'WEB', event_source_id: 'P', data: {} }, /data: required/],
    ['unknown event name', trackBody([validRecord({ event: 'BuyNow' })]), /unknown event name "BuyNow"/],
    ['missing event', trackBody([validRecord({ event: undefined })]), /data\[0\]\.event: required/],
    ['missing event_id', trackBody([validRecord({ event_id: undefined })]), /event_id/],
    ['numeric event_id', trackBody([validRecord({ event_id: 17 })]), /event_id/],
    ['event_time in milliseconds', trackBody([validRecord({ event_time: 1_767_225_600_000 })]), /not milliseconds/],
    ['event_time as a string', trackBody([validRecord({ event_time: '1767225600' })]), /event_time/],
    ['fractional event_time', trackBody([validRecord({ event_time: 1_767_225_600.5 })]), /event_time/],
    ['bad event_source', trackBody([validRecord()], { event_source: 'EMAIL' }), /event_source: must be one of/],
    ['empty event_source_id', trackBody([validRecord()], { event_source_id: '' }), /event_source_id/],
    ['limited_data_use not boolean', trackBody([validRecord({ limited_data_use: 'yes' })]), /limited_data_use/],
    ['ttclid not a string', trackBody([validRecord({ user: { ttclid: 5 } })]), /user\.ttclid/],
    ['page.url not a string', trackBody([validRecord({ page: { url: 1 } })]), /page\.url/],
    ['bad currency', trackBody([validRecord({ properties: { currency: 'usd' } })]), /currency/],
    ['invalid second record', trackBody([validRecord(), validRecord({ event: 'Nope' })]), /data\[1\]\.event/],
    ['body not an object', [1, 2, 3], /JSON object/],
  ])('%s', async (_name, body, message) => {
    const { app, token } = await ready();
    const res = await track(app, token, body);
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(PlatformCode.PARAM_ERROR);
    expect(res.body.message).toMatch(message);
    expect(app.sandbox.received).toHaveLength(0);
  });

  it('malformed JSON is a 40002 as well', async () => {
    const { app, token } = await ready();
    const res = await app.inject({
      method: 'POST',
      url: '/open_api/v1.3/event/track/',
      headers: { 'content-type': 'application/json', 'access-token': token },
      payload: '{"event_source": ',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().code).toBe(PlatformCode.PARAM_ERROR);
  });
});

describe('event/track authentication', () => {
  it.each([
    ['missing token', null, PlatformCode.ACCESS_TOKEN_EMPTY],
    ['unknown token', 'f'.repeat(40), PlatformCode.ACCESS_TOKEN_INVALID],
    ['Bearer-prefixed token', 'BEARER', PlatformCode.ACCESS_TOKEN_INVALID],
  ])('%s', async (_name, token, expected) => {
    const { app, token: good } = await ready();
    const res = await track(app, token === 'BEARER' ? `Bearer ${good}` : token, trackBody([validRecord()]));
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(expected);
  });

  it('authentication is checked before validation', async () => {
    const { app } = await ready();
    expect((await track(app, null, { nonsense: true })).body.code).toBe(PlatformCode.ACCESS_TOKEN_EMPTY);
  });
});

describe('received events', () => {
  it('stores every record with its batch metadata, duplicates included', async () => {
    const { app, token } = await ready();
    const body = trackBody([validRecord({ event_id: 'dup' }), validRecord({ event_id: 'other' })], { test_event_code: 'T1' });
    expect((await track(app, token, body)).body.code).toBe(0);
    expect((await track(app, token, trackBody([validRecord({ event_id: 'dup' })]))).body.code).toBe(0);

    const all = (await app.inject({ method: 'GET', url: '/_control/received' })).json();
    expect(all.count).toBe(3);
    expect(all.events[0]).toMatchObject({
      event_source: 'WEB',
      event_source_id: 'PIXEL123',
      test_event_code: 'T1',
      advertiser_id: '7000000000000000001',
      record: { event: 'Purchase', event_id: 'dup' },
    });
    expect(Date.parse(all.events[0].received_at)).not.toBeNaN();
    expect(all.events[2].test_event_code).toBeNull();

    const dups = (await app.inject({ method: 'GET', url: '/_control/received?event_id=dup' })).json();
    expect(dups.count).toBe(2);

    expect((await app.inject({ method: 'DELETE', url: '/_control/received' })).json()).toEqual({ cleared: 3 });
    expect((await app.inject({ method: 'GET', url: '/_control/received' })).json().count).toBe(0);
  });

  it('validateTrackBody is usable on its own', () => {
    const ok = validateTrackBody(trackBody([validRecord()]));
    expect(ok.ok).toBe(true);
    const bad = validateTrackBody(trackBody([validRecord({ user: { email: ['x'] } })]));
    expect(bad).toEqual({ ok: false, message: expect.stringMatching(/user\.email\[0\]/) });
  });
});

describe('unknown routes', () => {
  it.each([
    ['GET', '/open_api/v1.3/nothing/here/'],
    ['GET', '/open_api/v1.3/event/track/'],
    ['POST', '/elsewhere'],
  ] as const)('%s %s answers 404 JSON', async (method, url) => {
    const app = buildSandbox();
    const res = await app.inject({ method, url });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: PlatformCode.NOT_FOUND, message: expect.stringContaining('Not found') });
  });

  it('accepts paths without the trailing slash', async () => {
    const { app, token } = await ready();
    const res = await app.inject({
      method: 'POST',
      url: '/open_api/v1.3/event/track',
      headers: { 'access-token': token },
      payload: trackBody([validRecord()]),
    });
    expect(res.json().code).toBe(0);
  });
});

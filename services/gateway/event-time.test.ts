/**
 * Event time (API-Version 2026-12-01) through the real app: both endpoints carry it into the envelope, bad or
 * out-of-range times are refused whole with 400 in each endpoint's format, and older versions behave as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sgtmEvent, serverEvent, webEvent } from '../../test/helpers/factories.js';
import { buildTestApp, topicRows, type TestApp } from '../../test/helpers/in-process.js';
import type { EventEnvelope } from '../domain/envelope.js';
import { Topics } from '../shared/topics.js';

let t: TestApp;
let key: string;

beforeAll(async () => {
  t = await buildTestApp();
  ({ key } = await t.workspaceWithKey());
});
afterAll(() => t.close());

const post = (url: '/v1/events' | '/v1/sgtm', body: unknown, headers: Record<string, string> = {}) =>
  t.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
const V2 = { 'api-version': '2026-12-01' };

async function envelopesOf(requestId: string): Promise<EventEnvelope[]> {
  return (await topicRows<EventEnvelope>(t.db, Topics.eventsRaw)).map((r) => r.value).filter((e) => e.request_id === requestId);
}
async function lastEnvelope(): Promise<EventEnvelope> {
  const rows = await topicRows<EventEnvelope>(t.db, Topics.eventsRaw);
  return rows[rows.length - 1]!.value;
}

const HOUR = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString();

describe('endpoint A with API-Version 2026-12-01', () => {
  it.each([
    ['an RFC 3339 string in UTC', (now: number) => iso(now - 26 * HOUR), (now: number) => Math.floor((now - 26 * HOUR) / 1000) * 1000],
    ['an RFC 3339 string with an offset', (now: number) => iso(now - 2 * HOUR).replace('Z', '+00:00'), (now: number) => Math.floor((now - 2 * HOUR) / 1000) * 1000],
    ['Unix seconds', (now: number) => Math.floor((now - 6 * 24 * HOUR) / 1000), (now: number) => Math.floor((now - 6 * 24 * HOUR) / 1000) * 1000],
  ])('carries %s into the envelope as epoch ms', async (_name, value, expected) => {
    const now = Date.now();
    const v = value(now);
    const res = await post('/v1/events', [serverEvent({ event_time: v }), webEvent()], V2);
    expect(res.statusCode).toBe(202);
    expect(res.headers['api-version']).toBe('2026-12-01');
    const [withTime, without] = await envelopesOf(res.json().request_id);
    // ISO strings keep milliseconds; compare to the second.
    expect(Math.floor(withTime!.event_time! / 1000) * 1000).toBe(expected(now));
    expect(withTime!.api_version).toBe('2026-12-01');
    expect(without).not.toHaveProperty('event_time');
  });

  it('reads an offset as the offset says', async () => {
    const now = Date.now();
    const at = new Date(now - 3 * HOUR);
    const plus2 = new Date(at.getTime() + 2 * HOUR).toISOString().slice(0, 19) + '+02:00';
    const res = await post('/v1/events', [serverEvent({ event_time: plus2 })], V2);
    expect(res.statusCode).toBe(202);
    const [e] = await envelopesOf(res.json().request_id);
    expect(e!.event_time).toBe(Math.floor(at.getTime() / 1000) * 1000);
  });
});

describe('older versions keep working unchanged', () => {
  it.each([
    ['no header', {}],
    ['API-Version 2026-11-01', { 'api-version': '2026-11-01' }],
  ])('A with %s ignores event_time, even an invalid one', async (_name, headers) => {
    const res = await post('/v1/events', [serverEvent({ event_time: 'yesterday' })], headers);
    expect(res.statusCode).toBe(202);
    expect(res.headers['api-version']).toBe('2026-11-01');
    const [e] = await envelopesOf(res.json().request_id);
    expect(e).not.toHaveProperty('event_time');
  });

  it('B without the header ignores event_metadata.event_time and records no version', async () => {
    const res = await post('/v1/sgtm', [sgtmEvent({ event_metadata: { event_time: 'yesterday' } })]);
    expect(res.statusCode).toBe(200);
    expect(res.headers['api-version']).toBeUndefined();
    const e = await lastEnvelope();
    expect(e.api_version).toBeNull();
    expect(e).not.toHaveProperty('event_time');
  });
});

describe('endpoint B with API-Version 2026-12-01', () => {
  it('carries event_metadata.event_time and echoes the version', async () => {
    const at = Math.floor((Date.now() - 30 * 60_000) / 1000);
    const res = await post('/v1/sgtm', [sgtmEvent({ event_metadata: { event_time: at } })], V2);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'success' });
    expect(res.headers['api-version']).toBe('2026-12-01');
    const e = await lastEnvelope();
    expect(e.event_time).toBe(at * 1000);
    expect(e.api_version).toBe('2026-12-01');
  });
});

describe("endpoint B's phone alias (2026-12-01)", () => {
  const PHONE = 'a'.repeat(64);
  const NUMERIC = 'B'.repeat(64);
  const withPhone = (phone: Record<string, unknown>) =>
    sgtmEvent({ event_metadata: { identifiers: [{ alias_type: 'user', user_id: 'u-1' }, { alias_type: 'phone', ...phone }] } });

  it('becomes the hashed phone identifiers', async () => {
    const res = await post('/v1/sgtm', [withPhone({ hashed_phone: PHONE, hashed_phone_numeric: NUMERIC })], V2);
    expect(res.statusCode).toBe(200);
    expect((await lastEnvelope()).identifiers).toEqual([
      { kind: 'user_id', value: 'u-1' },
      { kind: 'phone_e164_sha256', value: PHONE },
      { kind: 'phone_numeric_sha256', value: NUMERIC.toLowerCase() },
    ]);
  });

  it('stays an unknown alias without the header, as before', async () => {
    const res = await post('/v1/sgtm', [withPhone({ hashed_phone: '+44 20 7946 0018' })]);
    expect(res.statusCode).toBe(200);
    expect((await lastEnvelope()).identifiers).toContainEqual({ kind: 'other', alias: 'phone', value: '+44 20 7946 0018' });
  });

  it.each([
    ['a plain number', { hashed_phone: '+44 20 7946 0018' }, '[0].event_metadata.identifiers[1].hashed_phone must be a SHA-256 hex digest'],
    ['no hashed_phone', { phone: 'x' }, '[0].event_metadata.identifiers[1].hashed_phone is required'],
  ])('refuses %s', async (_name, phone, message) => {
    const res = await post('/v1/sgtm', [withPhone(phone)], V2);
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain(message);
  });
});

describe('bad input', () => {
  const now = () => Date.now();
  const cases: Array<[string, () => unknown, RegExp]> = [
    ['8 days old', () => iso(now() - 8 * 24 * HOUR), /more than 7 days before the request/],
    ['10 minutes ahead', () => iso(now() + 10 * 60_000), /more than 5 minutes after the request/],
    ['milliseconds sent as seconds', () => now(), /milliseconds sent as seconds/],
    ['no offset', () => '2026-11-21T18:04:05', /RFC 3339 date-time with an offset/],
    ['a date only', () => '2026-11-21', /RFC 3339/],
    ['an impossible date', () => '2026-02-30T10:00:00Z', /not a real date-time/],
    ['words', () => 'yesterday', /RFC 3339/],
  ];

  it.each(cases)('A refuses %s with a problem naming the event', async (_name, value, message) => {
    const res = await post('/v1/events', [serverEvent(), serverEvent({ event_time: value() })], V2);
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const p = res.json();
    expect(p.type).toMatch(/\/problems\/invalid-event-time$/);
    expect(p.detail).toMatch(/^\[1\]\.event_time /);
    expect(p.detail).toMatch(message);
  });

  it.each(cases)('B refuses %s in its own format', async (_name, value, message) => {
    const res = await post('/v1/sgtm', [sgtmEvent({ event_metadata: { event_time: value() } })], V2);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['error', 'message']);
    expect(body.error).toBe('Invalid request format');
    expect(body.message).toMatch(/^\[0\]\.event_metadata\.event_time /);
    expect(body.message).toMatch(message);
  });

  it.each([
    ['a fraction of a second as a number', 1.5],
    ['a boolean', true],
    ['an object', { at: 1 }],
  ])('A refuses %s as a schema violation', async (_name, value) => {
    const res = await post('/v1/events', [serverEvent({ event_time: value })], V2);
    expect(res.statusCode).toBe(400);
    expect(res.json().detail).toBe('[0].event_time must be a string or an integer');
  });

  it('B refuses an unknown API-Version in its own format', async () => {
    const res = await post('/v1/sgtm', [sgtmEvent()], { 'api-version': '2027-01-01' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: 'Invalid request format',
      message: 'API-Version 2027-01-01 is not supported; supported: 2026-12-01, 2026-11-01',
    });
  });

  it('nothing of a refused request is accepted', async () => {
    const before = (await topicRows(t.db, Topics.eventsRaw)).length;
    const res = await post('/v1/events', [serverEvent(), serverEvent({ event_time: iso(now() - 30 * 24 * HOUR) })], V2);
    expect(res.statusCode).toBe(400);
    expect((await topicRows(t.db, Topics.eventsRaw)).length).toBe(before);
  });
});

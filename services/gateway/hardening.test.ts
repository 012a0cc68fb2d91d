/**
 * Every invalid input is a 4xx in the endpoint's own format, decided before anything is stored, on both ingestion
 * endpoints and the admin API, through the real app (in-memory embedded store, real log). Each case checks the
 * answer and that the log holds nothing more.
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverEvent, sgtmEvent, webEvent } from '../../test/helpers/factories.js';
import { postInPieces } from '../../test/helpers/http.js';
import { ADMIN, buildTestApp, topicRows, type TestApp } from '../../test/helpers/in-process.js';
import { Topics } from '../shared/topics.js';
import { unstorable } from './validation/json-body.js';
import { LIMITS } from './validation/limits.js';

let t: TestApp;
let key: string;
beforeAll(async () => {
  t = await buildTestApp();
  ({ key } = await t.workspaceWithKey());
});
afterAll(() => t.close());

const stored = async (): Promise<number> => (await topicRows(t.db, Topics.eventsRaw)).length;

/** A valid body of each endpoint with `raw` spliced in as the value of a free-form field. */
const bodyA = (raw: string): string => JSON.stringify([webEvent(), serverEvent()]).replace('"event_data":{"value"', `"event_data":{"x":${raw},"value"`);
const bodyB = (raw: string): string => {
  const ev = sgtmEvent();
  return JSON.stringify([ev]).replace('"event_payload":{', `"event_payload":{"x":${raw},`);
};
const nest = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);

const ENDPOINTS = [
  ['A', '/v1/events', bodyA, 'problem'],
  ['B', '/v1/sgtm', bodyB, 'sgtm'],
] as const;

function expectFormat(res: { statusCode: number; headers: Record<string, unknown>; json(): any }, status: number, format: 'problem' | 'sgtm', slug: string): string {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(status);
  const body = res.json();
  if (format === 'problem') {
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(body.type).toBe(`http://ingest.test/problems/${slug}`);
    expect(body.status).toBe(status);
    return body.detail as string;
  }
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(Object.keys(body).sort()).toEqual(['error', 'message']);
  return body.message as string;
}

describe.each(ENDPOINTS)('endpoint %s (%s): values the store cannot hold', (_n, url, body, format) => {
  const post = (payload: string | Buffer, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, payload });

  it('the baseline body is accepted', async () => {
    expect((await post(body('"fine"'))).statusCode).toBeLessThan(300);
  });

  it.each([
    ['\\u0000 in a string', '"a\\u0000b"', 'U+0000'],
    ['a lone high surrogate', '"\\ud800"', 'lone surrogate'],
    ['a lone low surrogate', '"x\\udc00y"', 'lone surrogate'],
    ['a high surrogate followed by a non-surrogate escape', '"\\ud800\\u0041"', 'lone surrogate'],
    ['1e400', '1e400', 'out of range'],
    ['-1e400', '-1e400', 'out of range'],
    ['a 100,000-digit number', '9'.repeat(100_000), 'at most 100 characters'],
    ['a 309-digit integer', '9'.repeat(309), 'at most 100 characters'],
    ['nesting past the limit', nest(LIMITS.maxJsonDepth + 5), 'levels deep'],
    ['very deep nesting (50,000 levels)', nest(50_000), 'levels deep'],
  ])('%s → 400, nothing stored', async (_name, raw, mention) => {
    const before = await stored();
    const res = await post(body(raw));
    const detail = expectFormat(res, 400, format, 'unsupported-json-value');
    expect(detail).toContain(mention);
    expect(await stored()).toBe(before);
  });

  it('a key holding \\u0000 → 400', async () => {
    const res = await post(body('{"k\\u0000":1}'));
    expectFormat(res, 400, format, 'unsupported-json-value');
  });

  it.each([
    ['invalid UTF-8', Buffer.from([0xff, 0xfe])],
    ['overlong UTF-8 (0xC0 0xAF for "/")', Buffer.from([0xc0, 0xaf])],
    ['an encoded surrogate (0xED 0xA0 0x80)', Buffer.from([0xed, 0xa0, 0x80])],
  ])('%s → 400 malformed-json, nothing stored', async (_name, bad) => {
    const before = await stored();
    const good = Buffer.from(body('"XX"'));
    const at = good.indexOf('XX');
    const payload = Buffer.concat([good.subarray(0, at), bad, good.subarray(at + 2)]);
    const detail = expectFormat(await post(payload), 400, format, 'malformed-json');
    expect(detail).toContain('UTF-8');
    expect(await stored()).toBe(before);
  });

  it.each([
    ['charset=utf-16', { 'content-type': 'application/json; charset=utf-16' }, 'charset'],
    ['charset=iso-8859-1', { 'content-type': 'application/json;charset="ISO-8859-1"' }, 'charset'],
    ['Content-Encoding: gzip on a plain body', { 'content-encoding': 'gzip' }, 'Content-Encoding'],
    ['Content-Encoding: br', { 'content-encoding': 'br' }, 'Content-Encoding'],
  ])('%s → 415, nothing stored', async (_name, headers, mention) => {
    const before = await stored();
    const detail = expectFormat(await post(body('"fine"'), headers), 415, format, 'unsupported-media-type');
    expect(detail).toContain(mention);
    expect(await stored()).toBe(before);
  });

  it('a gzip body is refused too (gzip is not decoded: docs/decisions.md)', async () => {
    const res = await post(gzipSync(body('"fine"')), { 'content-encoding': 'gzip' });
    expectFormat(res, 415, format, 'unsupported-media-type');
  });

  it.each([
    ['charset=utf-8', { 'content-type': 'application/json; charset=utf-8' }],
    ['charset=UTF-8 quoted', { 'content-type': 'application/json; charset="UTF-8"' }],
    ['Content-Encoding: identity', { 'content-encoding': 'identity' }],
  ])('%s is accepted', async (_name, headers) => {
    expect((await post(body('"fine"'), headers)).statusCode).toBeLessThan(300);
  });

  it('well-formed surrogate pairs, large finite numbers and nesting within the limit are accepted', async () => {
    expect((await post(body('"\\ud83d\\ude00 😀"'))).statusCode).toBeLessThan(300);
    expect((await post(body('1.7976931348623157e308'))).statusCode).toBeLessThan(300);
    // The top-level array, the event and its payload object take three levels.
    expect((await post(body(nest(LIMITS.maxJsonDepth - 3)))).statusCode).toBeLessThan(300);
    expect(expectFormat(await post(body(nest(LIMITS.maxJsonDepth - 2))), 400, format, 'unsupported-json-value')).toContain('levels deep');
  });

  it('prototype poisoning keys → 400 malformed-json', async () => {
    const res = await post(body('{"__proto__":{"polluted":true}}'));
    expectFormat(res, 400, format, 'malformed-json');
  });
});

describe('admin API: the same body rules, problem documents', () => {
  const auth = { authorization: `Bearer ${ADMIN}` };
  it.each([
    ['a workspace name with \\u0000', 'application/json', '{"name":"a\\u0000b","plan":"free"}', 400, 'unsupported-json-value'],
    ['a workspace name with a lone surrogate', 'application/json', '{"name":"a\\ud800","plan":"free"}', 400, 'unsupported-json-value'],
    ['text/plain', 'text/plain', '{"name":"x","plan":"free"}', 415, 'unsupported-media-type'],
    ['charset=utf-16', 'application/json; charset=utf-16', '{"name":"x","plan":"free"}', 415, 'unsupported-media-type'],
    ['not JSON', 'application/json', '{"name":', 400, 'malformed-json'],
  ])('%s → %i', async (_name, contentType, payload, status, slug) => {
    const before = (await t.db.query('SELECT count(*)::int AS n FROM workspaces')).rows[0] as { n: number };
    const res = await t.app.inject({ method: 'POST', url: '/admin/v1/workspaces', headers: { ...auth, 'content-type': contentType }, payload });
    expectFormat(res, status, 'problem', slug);
    const after = (await t.db.query('SELECT count(*)::int AS n FROM workspaces')).rows[0] as { n: number };
    expect(after.n).toBe(before.n);
  });
});

describe('unstorable (the scanner)', () => {
  it.each([
    ['"plain"', undefined],
    ['"\\\\u0000 is an escaped backslash"', undefined],
    ['"\\"\\u0000"', 'U+0000'],
    ['[1, -2.5e10, 0.1]', undefined],
    ['1E400', 'out of range'],
    [nest(LIMITS.maxJsonDepth), undefined],
    [nest(LIMITS.maxJsonDepth + 1), 'levels deep'],
    ['"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["', undefined],
  ])('%s', (text, problem) => {
    const got = unstorable(text);
    if (problem === undefined) expect(got).toBeUndefined();
    else expect(got).toContain(problem);
  });
});

describe('over a real socket: oversized requests get answers a common client can read (finding 6)', () => {
  let base: string;
  beforeAll(async () => {
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });

  it.each(ENDPOINTS)('endpoint %s: a 12 MB body gets a readable 413 in its format', async (_n, url, _body, format) => {
    const res = await postInPieces(`${base}${url}`, { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, Buffer.alloc(12 * 1024 * 1024, 0x20));
    expect(res.status).toBe(413);
    const parsed = JSON.parse(res.body);
    if (format === 'problem') expect(parsed.type).toBe('http://ingest.test/problems/payload-too-large');
    else expect(parsed.error).toBe('Payload Too Large');
  });

  it('a URL over 8 KiB → 414 problem document', async () => {
    const res = await fetch(`${base}/v1/events?${'q'.repeat(9_000)}`, { method: 'POST' });
    expect(res.status).toBe(414);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await res.json()).type).toBe('http://ingest.test/problems/uri-too-long');
  });

  it('a path segment over 100 characters → 414 problem document', async () => {
    const res = await fetch(`${base}/admin/v1/workspaces/${'w'.repeat(200)}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(res.status).toBe(414);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await res.json()).type).toBe('http://ingest.test/problems/uri-too-long');
  });

  it('headers over 16 KiB → 431 problem document', async () => {
    const res = await fetch(`${base}/v1/events`, { method: 'POST', headers: { 'x-big': 'h'.repeat(20_000) } });
    expect(res.status).toBe(431);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const body = await res.json();
    expect(body.type).toBe('http://ingest.test/problems/request-headers-too-large');
    expect(body.status).toBe(431);
  });

  it('a request that is not HTTP → 400 problem document, connection closed', async () => {
    const { connect } = await import('node:net');
    const u = new URL(base);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(u.port), u.hostname, () => socket.write('GARBAGE /\x00 NOT-HTTP\r\n\r\n'));
      let raw = '';
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (raw += d));
      socket.on('close', () => resolve(raw));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i);
    const doc = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(doc).toMatchObject({ type: 'http://ingest.test/problems/bad-request', status: 400 });
  });

  it('the service answers normally afterwards', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});

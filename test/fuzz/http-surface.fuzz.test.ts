/**
 * Property-based fuzzing of the HTTP surface with fast-check, in-process (`app.inject`, the real app,
 * store and log): both ingestion endpoints' bodies and headers, and the admin API. Properties:
 * - no answer is a 5xx;
 * - an invalid request is never answered 2xx (and stores nothing); where the suite can decide invalidity cheaply
 *   and on its own (bytes that are not UTF-8; a string or key holding U+0000 or a lone surrogate; a number out of
 *   the double range or longer than LIMITS.maxNumberChars; nesting deeper than LIMITS.maxJsonDepth), it is a 4xx;
 *   bytes that are not UTF-8 are a 400 `malformed-json`;
 * - a valid request is answered 2xx;
 * - the service is ready afterwards.
 * 4,200 generated requests per run: per endpoint 500 arbitrary bodies, 700 mutated events, 400 header sets and
 * 100 bodies with invalid UTF-8; on the admin API 500 bodies and 300 paths. `FUZZ_RUNS` scales the case count
 * (e.g. a nightly deep run).
 */
import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../services/gateway/validation/limits.js';
import { Topics } from '../../services/shared/topics.js';
import { sgtmEvent, webEvent, serverEvent } from '../helpers/factories.js';
import { ADMIN, buildTestApp, type TestApp } from '../helpers/in-process.js';

const SCALE = Number(process.env.FUZZ_RUNS ?? '1');
const runs = (n: number): number => Math.max(1, Math.round(n * SCALE));

let t: TestApp;
let key: string;
let workspaceId: string;
beforeAll(async () => {
  t = await buildTestApp();
  ({ key, workspaceId } = await t.workspaceWithKey({ plan: 'enterprise' }));
});
afterAll(() => t.close());

const stored = async (): Promise<number> =>
  Number((await t.db.query<{ n: unknown }>('SELECT count(*) AS n FROM log_records WHERE topic = $1', [Topics.eventsRaw])).rows[0]!.n);

/** Strings that stress the store and the parsers: control characters, U+0000, surrogates, long ones. */
const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udc00', '\ud83d\ude00', '', ' ', '\\', '"', '</script>', 'x'.repeat(300)),
);

/** Any JSON value (including ones the service must refuse: deep, huge numbers, NaN-like strings). */
const anyJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    nastyString,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(nastyString, tie('value'), { maxKeys: 4 }),
  ),
})).value;

/**
 * Byte sequences that are not UTF-8 (RFC 3629): overlong forms, encoded surrogates, bytes that never occur, lone
 * continuation bytes, truncated sequences, code points past U+10FFFF.
 */
const badUtf8 = fc.constantFrom(
  [0xc0, 0xaf], // overlong "/"
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf], // overlong "/" in three bytes
  [0xf0, 0x80, 0x80, 0xaf], // ... and in four
  [0xed, 0xa0, 0x80], // U+D800 encoded
  [0xed, 0xbf, 0xbf], // U+DFFF encoded
  [0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80], // a surrogate pair encoded as two three-byte sequences (CESU-8)
  [0xff],
  [0xfe, 0xff],
  [0x80],
  [0xbf, 0x80],
  [0xc3], // a lead byte with nothing after it
  [0xe2, 0x82],
  [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
  [0xf8, 0x88, 0x80, 0x80, 0x80],
).map((bytes) => Buffer.from(bytes));

/** Raw bodies, valid JSON or not; some are bytes that are not UTF-8 (sent as they are). */
const rawBody: fc.Arbitrary<string | Buffer> = fc.oneof(
  anyJson.map((v) => JSON.stringify(v) ?? 'null'),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('', '[', '[]', '{}', 'null', '[1e400]', `[${'9'.repeat(400)}]`, '['.repeat(5000) + ']'.repeat(5000), '[{"__proto__":{}}]'),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.tuple(fc.string({ maxLength: 60 }), badUtf8, fc.string({ maxLength: 60 })).map(([a, bad, b]) => Buffer.concat([Buffer.from(a), bad, Buffer.from(b)])),
);

/** A number literal written into the body as it is (JSON.stringify cannot write 1e400). */
class RawNumber {
  constructor(readonly text: string) {}
}

/** JSON text of a value that may hold RawNumbers. */
function toJson(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_k, v: unknown) => (v instanceof RawNumber ? `\u0001raw${raws.push(v.text) - 1}\u0001` : v)) ?? 'null';
  return text.replace(/"\\u0001raw(\d+)\\u0001"/g, (_m, i: string) => raws[Number(i)]!);
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const unstorableString = (s: string): boolean => s.includes('\u0000') || LONE_SURROGATE.test(s);

/**
 * Why a body (as a value, the top level counting as depth 1) must be refused by a rule the suite decides on its
 * own, or undefined. Iterative: the values can be deep.
 */
function mustBeRefused(body: unknown): string | undefined {
  const stack: Array<{ v: unknown; depth: number }> = [{ v: body, depth: 1 }];
  while (stack.length > 0) {
    const { v, depth } = stack.pop()!;
    if (typeof v === 'string' && unstorableString(v)) return `string ${JSON.stringify(v).slice(0, 40)}`;
    if (v instanceof RawNumber) {
      if (v.text.length > LIMITS.maxNumberChars) return `a number of ${v.text.length} characters`;
      if (!Number.isFinite(Number(v.text))) return `number ${v.text.slice(0, 40)} out of range`;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > LIMITS.maxJsonDepth) return `nesting ${depth} deep`;
    for (const [k, child] of Object.entries(v)) {
      if (!Array.isArray(v) && unstorableString(k)) return `key ${JSON.stringify(k).slice(0, 40)}`;
      stack.push({ v: child, depth: depth + 1 });
    }
  }
  return undefined;
}

/** Number literals, most of them ones the service must refuse (out of range, too long). */
const rawNumber = fc
  .oneof(
    fc.constantFrom('1e400', '-1e400', '1E+309', '-2e308', '1.8e308', '9'.repeat(LIMITS.maxNumberChars + 1), `0.${'1'.repeat(LIMITS.maxNumberChars)}`),
    fc.integer({ min: 309, max: 100_000 }).map((e) => `1e${e}`),
    fc.integer({ min: LIMITS.maxNumberChars + 1, max: 2_000 }).map((n) => '7'.repeat(n)),
    // Near the edges, but storable: 1.7976931348623157e308 is the largest double; 1e-400 is 0; 100 characters.
    fc.constantFrom('1.7976931348623157e308', '1e-400', '-0', `0.${'5'.repeat(LIMITS.maxNumberChars - 2)}`),
  )
  .map((text) => new RawNumber(text));

/** A string holding U+0000 or a lone surrogate somewhere. */
const unstorableText = fc
  .tuple(fc.string({ maxLength: 10 }), fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff', 'x\u0000'), fc.string({ maxLength: 10 }))
  .map(([a, bad, b]) => a + bad + b);

/** Arrays and objects nested past the depth limit, around any value. */
const tooDeep = fc
  .tuple(fc.array(fc.boolean(), { minLength: LIMITS.maxJsonDepth, maxLength: LIMITS.maxJsonDepth + 40 }), anyJson)
  .map(([levels, leaf]) => levels.reduce<unknown>((inner, asArray) => (asArray ? [inner] : { k: inner }), leaf));

/** Values with something in them the service must refuse, alone or next to good ones. */
const refusable = fc.oneof(
  unstorableText,
  fc.tuple(unstorableText, anyJson).map(([k, v]) => ({ [k]: v })),
  rawNumber,
  tooDeep,
  fc.tuple(anyJson, fc.oneof(unstorableText, rawNumber)).map(([good, bad]) => [good, bad]),
  fc.tuple(anyJson, fc.oneof(unstorableText, rawNumber)).map(([good, bad]) => ({ ok: good, bad })),
);

/** Mutations of a valid event: a field replaced by any JSON value, removed, or a string field made nasty. */
function mutate<T extends object>(event: T, path: string[], value: unknown, remove: boolean): T {
  const copy = structuredClone(event) as Record<string, unknown>;
  let node: Record<string, unknown> = copy;
  for (const p of path.slice(0, -1)) {
    if (node[p] === null || typeof node[p] !== 'object') return copy as T;
    node = node[p] as Record<string, unknown>;
  }
  const last = path.at(-1)!;
  if (remove) delete node[last];
  else node[last] = value;
  return copy as T;
}

const A_PATHS = [
  ['event_name'], ['event_source'], ['event_data'], ['event_metadata'], ['event_data', 'client_id'], ['event_data', 'page_location'],
  ['event_metadata', 'idempotency_key'], ['event_metadata', 'consent'], ['event_metadata', 'consent', 'ad_storage'],
  ['event_metadata', 'identifiers'], ['event_metadata', 'identifiers', 'email'], ['event_metadata', 'identifiers', 'user'],
];
const B_PATHS = [
  ['event_name'], ['event_payload'], ['event_metadata'], ['event_metadata', 'consent'], ['event_metadata', 'consent', 'ad_user_data'],
  ['event_metadata', 'identifiers'], ['event_payload', 'value'], ['event_payload', 'page_location'],
];

const HEADERS = fc.record(
  {
    'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=utf-16', 'text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', ''),
    'content-encoding': fc.constantFrom('gzip', 'identity', 'br', 'deflate, gzip'),
    'api-version': fc.oneof(fc.constantFrom('2026-11-01', '2020-01-01', 'latest', ''), fc.string({ maxLength: 12 })),
    'idempotency-key': fc.oneof(fc.string({ maxLength: 20 }), fc.constant('x'.repeat(400))),
    authorization: fc.constantFrom('VALID', 'Bearer ', 'Basic abc', 'Bearer evk_live_00000000000000000000000000000000', ''),
  },
  { requiredKeys: [] },
);

type Answer = Awaited<ReturnType<TestApp['app']['inject']>>;

function expectNo5xx(res: Answer, what: string): void {
  expect(res.statusCode, `${what} → ${res.statusCode} ${res.body.slice(0, 300)}`).toBeLessThan(500);
}

/** 400 `malformed-json` in the endpoint's format (A: a problem document; B: `{error, message}` naming UTF-8). */
function expectMalformedUtf8(res: Answer, url: string, what: string): void {
  expect(res.statusCode, `${what} → ${res.statusCode} ${res.body.slice(0, 300)}`).toBe(400);
  const doc = res.json();
  if (url === '/v1/events') expect(doc.type, what).toBe('http://ingest.test/problems/malformed-json');
  else expect(doc, what).toEqual({ error: 'Invalid request format', message: expect.stringContaining('UTF-8') });
}

async function post(url: string, payload: string | Buffer, headers: Record<string, string>): Promise<Answer> {
  const h: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers };
  if (h.authorization === 'VALID') h.authorization = `Bearer ${key}`;
  for (const [k, v] of Object.entries(h)) if (v === '') delete h[k];
  return t.app.inject({ method: 'POST', url, headers: h, payload });
}

describe.each([
  ['A', '/v1/events'],
  ['B', '/v1/sgtm'],
] as const)('endpoint %s (%s)', (name, url) => {
  it('arbitrary bodies: never 5xx; a body that is not an array of events is never 2xx, and stores nothing', { timeout: 180_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(rawBody, async (body) => {
        const before = await stored();
        const res = await post(url, body, {});
        const what = typeof body === 'string' ? JSON.stringify(body.slice(0, 80)) : `bytes ${body.subarray(0, 80).toString('hex')}`;
        expectNo5xx(res, `body ${what}`);
        if (typeof body !== 'string' && !isUtf8(body)) {
          expectMalformedUtf8(res, url, what);
          expect(await stored()).toBe(before);
          return;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(body.toString());
        } catch {
          parsed = undefined;
        }
        const couldBeValid = Array.isArray(parsed) && parsed.length > 0 && parsed.every((e) => e !== null && typeof e === 'object');
        if (!couldBeValid) {
          expect(res.statusCode, what).toBeGreaterThanOrEqual(400);
          expect(await stored()).toBe(before);
        }
      }),
      { numRuns: runs(500) },
    );
  });

  it('mutated events: never 5xx; an unstorable value, number or depth is a 4xx; refused requests store nothing; accepted ones are stored whole', { timeout: 180_000 }, async () => {
    const paths = name === 'A' ? A_PATHS : B_PATHS;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(...paths),
        fc.oneof({ arbitrary: anyJson, weight: 2 }, { arbitrary: refusable, weight: 1 }),
        fc.boolean(),
        fc.boolean(),
        async (count, path, value, remove, server) => {
          const make = () => (name === 'A' ? (server ? serverEvent() : webEvent()) : sgtmEvent());
          const events: object[] = Array.from({ length: count }, make);
          events[count - 1] = mutate(events[count - 1]!, path, value, remove);
          const before = await stored();
          const res = await post(url, toJson(events), {});
          const what = `${path.join('.')} ${remove ? 'removed' : `= ${toJson(value).slice(0, 80)}`}`;
          expectNo5xx(res, what);
          // Decided on what is sent (a mutation under a missing parent changes nothing).
          const refuse = mustBeRefused(events);
          if (refuse) expect(res.statusCode, `${what}: ${refuse}`).toBeGreaterThanOrEqual(400);
          const after = await stored();
          if (res.statusCode >= 400) expect(after).toBe(before);
          else expect(after - before).toBe(count);
        },
      ),
      { numRuns: runs(700) },
    );
  });

  it('bytes that are not UTF-8, inside a string or anywhere in a valid batch: 400 malformed-json, nothing stored', { timeout: 60_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(badUtf8, fc.constantFrom('a string', 'a key', 'anywhere'), fc.nat(), async (bad, place, offset) => {
        const marker = 'MARKER';
        // Free-form fields of a valid event (event_data on A, event_payload on B) carry the marked string and key.
        const extra = { note: `a${marker}b`, [`k${marker}`]: 1 };
        const event = name === 'A' ? webEvent() : sgtmEvent();
        Object.assign('event_data' in event ? event.event_data : event.event_payload, extra);
        const events = [event];
        const good = Buffer.from(JSON.stringify(events));
        const at =
          place === 'a string' ? good.indexOf(`a${marker}b`) + 1 + marker.length : place === 'a key' ? good.indexOf(`k${marker}`) + 1 : offset % (good.length + 1);
        const payload = Buffer.concat([good.subarray(0, at), bad, good.subarray(at)]);
        // The generator's own check (node's validator, not the service's decoder): these bytes are not UTF-8.
        expect(isUtf8(payload)).toBe(false);
        const before = await stored();
        const res = await post(url, payload, {});
        expectMalformedUtf8(res, url, `${bad.toString('hex')} in ${place}`);
        expect(await stored()).toBe(before);
      }),
      { numRuns: runs(100) },
    );
  });

  it('headers: never 5xx; a bad Content-Type, Content-Encoding, API-Version or key is never 2xx', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(HEADERS, async (headers) => {
        const body = JSON.stringify(name === 'A' ? [webEvent()] : [sgtmEvent()]);
        const res = await post(url, body, headers as Record<string, string>);
        expectNo5xx(res, JSON.stringify(headers));
        const ct = headers['content-type'];
        const okType = ct === undefined || ct === 'application/json' || ct === 'application/json; charset=utf-8';
        const okEncoding = headers['content-encoding'] === undefined || headers['content-encoding'] === 'identity';
        // An empty header value is left out by post(): the same as not sending it.
        const okVersion = name === 'B' || headers['api-version'] === undefined || headers['api-version'] === '' || headers['api-version'] === '2026-11-01';
        const okKey = headers.authorization === undefined || headers.authorization === 'VALID';
        const okIdem = name === 'A' || headers['idempotency-key'] === undefined || headers['idempotency-key'] === '' || (headers['idempotency-key'].trim() !== '' && headers['idempotency-key'].length <= 256);
        if (!(okType && okEncoding && okVersion && okKey && okIdem)) expect(res.statusCode, JSON.stringify(headers)).toBeGreaterThanOrEqual(400);
        else if (name === 'A') expect(res.statusCode, JSON.stringify(headers)).toBe(202);
      }),
      { numRuns: runs(400) },
    );
  });
});

describe('admin API', () => {
  const auth = { authorization: `Bearer ${ADMIN}` };
  it('workspace and key bodies: never 5xx; anything but a well-formed body is never 2xx', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record({ name: nastyString, plan: fc.oneof(fc.constantFrom('free', 'enterprise', 'nope'), nastyString) }, { requiredKeys: [] }),
          anyJson,
        ),
        fc.constantFrom('POST /admin/v1/workspaces', 'PATCH /admin/v1/workspaces/WS', 'POST /admin/v1/workspaces/WS/api-keys'),
        fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1'),
        async (body, route, contentType) => {
          const [method, path] = route.split(' ') as ['POST' | 'PATCH' | 'PUT', string];
          const res = await t.app.inject({
            method,
            url: path.replace('WS', workspaceId),
            headers: { ...auth, 'content-type': contentType },
            payload: JSON.stringify(body) ?? 'null',
          });
          expectNo5xx(res, `${route} ${contentType} ${JSON.stringify(body)?.slice(0, 80)}`);
          if (contentType !== 'application/json') expect(res.statusCode).toBe(415);
          const b = body as Record<string, unknown> | null;
          // A name must hold something other than white space (services/console/routes/workspaces.ts) and be storable.
          const plainName = b !== null && typeof b === 'object' && typeof b.name === 'string' && /\S/u.test(b.name) && !unstorableString(b.name);
          if (route === 'POST /admin/v1/workspaces' && !plainName) expect(res.statusCode).toBeGreaterThanOrEqual(400);
        },
      ),
      { numRuns: runs(500) },
    );
  });

  it('paths and tokens: never 5xx', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ maxLength: 60 }).map(encodeURIComponent),
        fc.constantFrom('GET', 'DELETE', 'PATCH', 'POST'),
        fc.constantFrom(ADMIN, 'wrong-token-wrong-token', ''),
        async (segment, method, token) => {
          const res = await t.app.inject({
            method,
            url: `/admin/v1/workspaces/${segment}/api-keys/${segment}`,
            headers: token ? { authorization: `Bearer ${token}` } : {},
          });
          expectNo5xx(res, `${method} ${segment}`);
          // An empty segment matches no route (404 before auth), a method the route does not take is a 405 naming those
          // it does (the document is public: so are its routes); every admin route refuses a wrong token.
          if (token !== ADMIN) expect([401, 404, 405]).toContain(res.statusCode);
          if (token !== ADMIN && /^[A-Za-z0-9_-]+$/.test(segment) && method === 'DELETE') expect(res.statusCode).toBe(401);
        },
      ),
      { numRuns: runs(300) },
    );
  });
});

describe('afterwards', () => {
  it('the service is ready and accepts a valid batch', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect((await post('/v1/events', JSON.stringify([webEvent()]), {})).statusCode).toBe(202);
    expect((await post('/v1/sgtm', JSON.stringify([sgtmEvent()]), {})).statusCode).toBe(200);
  });
});

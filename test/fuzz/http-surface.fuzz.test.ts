/**
 * Property-based fuzzing of the HTTP surface (issue 14) with fast-check, in-process (`app.inject`, the real app,
 * store and log): both ingestion endpoints' bodies and headers, and the admin API. Properties:
 * - no answer is a 5xx;
 * - an invalid request is never answered 2xx (and stores nothing);
 * - a valid request is answered 2xx;
 * - the service is ready afterwards.
 * About 3,500 generated requests per run; `FUZZ_RUNS` scales the case count (e.g. a nightly deep run).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

/** Raw body texts, valid JSON or not. */
const rawBody = fc.oneof(
  anyJson.map((v) => JSON.stringify(v) ?? 'null'),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('', '[', '[]', '{}', 'null', '[1e400]', `[${'9'.repeat(400)}]`, '['.repeat(5000) + ']'.repeat(5000), '[{"__proto__":{}}]'),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
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
        expectNo5xx(res, `body ${JSON.stringify(body.slice(0, 80))}`);
        let parsed: unknown;
        try {
          parsed = JSON.parse(body);
        } catch {
          parsed = undefined;
        }
        const couldBeValid = Array.isArray(parsed) && parsed.length > 0 && parsed.every((e) => e !== null && typeof e === 'object');
        if (!couldBeValid) {
          expect(res.statusCode, body.slice(0, 80)).toBeGreaterThanOrEqual(400);
          expect(await stored()).toBe(before);
        }
      }),
      { numRuns: runs(600) },
    );
  });

  it('mutated events: never 5xx; refused requests store nothing; accepted ones are stored whole', { timeout: 180_000 }, async () => {
    const paths = name === 'A' ? A_PATHS : B_PATHS;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(...paths),
        anyJson,
        fc.boolean(),
        fc.boolean(),
        async (count, path, value, remove, server) => {
          const make = () => (name === 'A' ? (server ? serverEvent() : webEvent()) : sgtmEvent());
          const events: object[] = Array.from({ length: count }, make);
          events[count - 1] = mutate(events[count - 1]!, path, value, remove);
          const before = await stored();
          const res = await post(url, JSON.stringify(events), {});
          expectNo5xx(res, `${path.join('.')} = ${JSON.stringify(value)?.slice(0, 80)}`);
          const after = await stored();
          if (res.statusCode >= 400) expect(after).toBe(before);
          else expect(after - before).toBe(count);
        },
      ),
      { numRuns: runs(700) },
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
          // A name must hold something besides whitespace (services/console/routes/workspaces.ts: pattern '\S') and be
          // storable (no U+0000, no lone surrogates); anything else is refused.
          const plainName = b !== null && typeof b === 'object' && typeof b.name === 'string' && /\S/.test(b.name) && !/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(b.name);
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
          // An empty segment matches no route (404 before auth); every admin route refuses a wrong token.
          if (token !== ADMIN) expect([401, 404]).toContain(res.statusCode);
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

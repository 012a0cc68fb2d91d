/**
 * Overload is shed inside the deadline, the deadline runs from the first byte, and a slow body gets 408. Real sockets against the in-process app (real store and log).
 */
import { Agent, request as httpRequest, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { sgtmEvent, webEvent } from '../../test/helpers/factories.js';
import { buildTestApp, type TestApp } from '../../test/helpers/in-process.js';
import { AdaptiveLimit, inFlightRequests, SHED_HOLD_MS, shedHeld } from './overload.js';
import { LIMITS } from './validation/limits.js';

const DEADLINE_MS = LIMITS.requestDeadlineMs;

// One app per configuration, shared by the tests that use it (building one takes seconds on a loaded machine).
const apps = new Map<string, Promise<{ t: TestApp; base: URL; key: string }>>();
afterAll(async () => {
  for (const a of apps.values()) await (await a).t.close();
});

async function start(env: Record<string, string> = {}): Promise<{ t: TestApp; base: URL; key: string }> {
  const id = JSON.stringify(env);
  if (!apps.has(id)) {
    apps.set(
      id,
      (async () => {
        const t = await buildTestApp(env);
        const { key } = await t.workspaceWithKey();
        const base = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }));
        return { t, base, key };
      })(),
    );
  }
  return apps.get(id)!;
}

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
  /** ms from the first byte written to the answer's arrival. */
  tookMs: number;
}

/**
 * A hand-driven HTTP/1.1 client: writes `head` (and `firstBody`) at once, the rest of the body only when told.
 * Resolves with the first answer on the socket.
 */
function rawRequest(base: URL, path: string, key: string, body: string, opts: { holdBodyAfter?: number; delayHeadMs?: number } = {}) {
  const socket: Socket = connect(Number(base.port), base.hostname);
  const head =
    `POST ${path} HTTP/1.1\r\nHost: ${base.host}\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const started = performance.now();
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    let raw = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      raw += d;
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) return;
      const headers = raw.slice(0, end);
      const length = Number(/content-length: (\d+)/i.exec(headers)?.[1] ?? 0);
      if (raw.length - end - 4 < length) return;
      resolve({ status: Number(headers.split(' ')[1]), headers, body: raw.slice(end + 4, end + 4 + length), tookMs: performance.now() - started });
      socket.end();
    });
    socket.on('error', reject);
  });
  const hold = opts.holdBodyAfter ?? body.length;
  socket.once('connect', () => {
    if (opts.delayHeadMs) {
      socket.write(head.slice(0, 1));
      setTimeout(() => socket.write(head.slice(1) + body), opts.delayHeadMs);
    } else socket.write(head + body.slice(0, hold));
  });
  return { answer, rest: () => socket.write(body.slice(hold)), socket };
}

const ENDPOINTS = [
  ['A', '/v1/events', () => JSON.stringify([webEvent()]), 'problem'],
  ['B', '/v1/sgtm', () => JSON.stringify([sgtmEvent()]), 'sgtm'],
] as const;

describe('the bytes bound (GATEWAY_MAX_IN_FLIGHT_BYTES)', () => {
  // ~600 KB of events: two of them are more than the 1 MiB bound, one of them and a small batch are not.
  const big = (): string => JSON.stringify(Array.from({ length: 30 }, () => webEvent({ event_data: { value: 1, note: 'x'.repeat(20_000) } })));

  it('sheds a request whose declared body would pass the bound while others are in progress, takes smaller ones', async () => {
    const { base, key } = await start({ GATEWAY_MAX_IN_FLIGHT_BYTES: '1048576' });
    const held = rawRequest(base, '/v1/events', key, big(), { holdBodyAfter: 5 });
    await vi.waitFor(async () => expect((await inFlightRequests.get()).values[0]?.value).toBe(1), { timeout: 1_000, interval: 5 });
    const shed = await rawRequest(base, '/v1/events', key, big()).answer;
    expect(shed.status).toBe(503);
    expect(shed.headers).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(JSON.parse(shed.body)).toMatchObject({ type: 'http://ingest.test/problems/overloaded', detail: expect.stringContaining('1048576 bytes of requests in progress') });
    expect((await rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()])).answer).status).toBe(202);
    held.rest();
    expect((await held.answer).status).toBe(202);
    // Alone, a body of any allowed size is taken.
    expect((await rawRequest(base, '/v1/events', key, big()).answer).status).toBe(202);
  });
});

describe('a client that hangs up', () => {
  it('after sending its whole request gives its in-flight slot back: the next request is taken, not shed', async () => {
    // One slot: a leaked one sheds every later request.
    const { t, base, key } = await start({ GATEWAY_MAX_IN_FLIGHT: '1' });
    // The key is cached, so the held store below keeps only the append waiting.
    expect((await rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()])).answer).status).toBe(202);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    // Another transaction holds the store (as a stage's batch would): the request's append waits behind it.
    const holder = t.db.transaction(async () => gate);
    try {
      // The server's side of the request: its body read to the end means the request is complete.
      const bodyIn = new Promise<ServerResponse>((resolve) => t.app.server.once('request', (req, res) => req.once('end', () => resolve(res))));
      const left = rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()]));
      left.answer.catch(() => undefined);
      const res = await bodyIn;
      await vi.waitFor(async () => expect((await inFlightRequests.get()).values[0]?.value).toBe(1), { timeout: 10_000, interval: 5 });
      // Its body is in and it waits for the store; the client hangs up, and the server sees it before the store frees.
      const hungUp = new Promise((r) => res.once('close', r));
      left.socket.destroy();
      await hungUp;
    } finally {
      open();
      await holder;
    }
    await vi.waitFor(async () => expect((await inFlightRequests.get()).values[0]?.value).toBe(0), { timeout: 3_000, interval: 20 });
    expect((await rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()])).answer).status).toBe(202);
  });
});

describe('a client that ignores Retry-After', () => {
  /** One request on `agent` (one keep-alive connection): status, ms to the answer, whether the connection was reused. */
  function post(agent: Agent, base: URL, key: string): Promise<{ status: number; tookMs: number; reused: boolean }> {
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        new URL('/v1/events', base),
        { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, tookMs: performance.now() - started, reused: req.reusedSocket }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify([webEvent()]));
    });
  }

  it('gets its next 503 on the same connection SHED_HOLD_MS later; a new connection, or one that waited, at once', async () => {
    // A client that sends again as soon as it is shed has its answers held; other clients' are not.
    const { base, key } = await start({ GATEWAY_MAX_IN_FLIGHT: '1' });
    // A request that takes the one slot, its body held (answered 408 at the deadline if never sent).
    const occupy = async () => {
      const o = rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()]), { holdBodyAfter: 5 });
      await vi.waitFor(async () => expect((await inFlightRequests.get()).values[0]?.value).toBe(1), { timeout: 1_000, interval: 5 });
      return o;
    };
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const heldBefore = (await shedHeld.get()).values[0]?.value ?? 0;
    try {
      const held = await occupy();
      // Whether an answer was held is read from the shed_held counter, not from answer times (a loaded machine
      // stretches those); the held one's time has a lower bound only, which slowness cannot break.
      const heldCount = async (): Promise<number> => ((await shedHeld.get()).values[0]?.value ?? 0) - heldBefore;
      const first = await post(agent, base, key);
      expect(first.status).toBe(503);
      expect(await heldCount()).toBe(0);
      const again = await post(agent, base, key);
      expect(again).toMatchObject({ status: 503, reused: true });
      expect(again.tookMs).toBeGreaterThanOrEqual(SHED_HOLD_MS - 10);
      expect(await heldCount()).toBe(1);
      // Another connection is not held.
      const other = await rawRequest(base, '/v1/events', key, JSON.stringify([webEvent()])).answer;
      expect(other.status).toBe(503);
      expect(await heldCount()).toBe(1);
      held.rest();
      expect((await held.answer).status).toBe(202);
      // The same connection after the Retry-After (1 s) is answered at once. The wait is what is under test: a
      // client that honoured Retry-After.
      await new Promise((r) => setTimeout(r, 1_050));
      const heldAgain = await occupy();
      const patient = await post(agent, base, key);
      expect(patient).toMatchObject({ status: 503, reused: true });
      expect(await heldCount()).toBe(1);
      heldAgain.rest();
      expect((await heldAgain.answer).status).toBe(202);
    } finally {
      agent.destroy();
    }
  });
});

describe.each(ENDPOINTS)('endpoint %s (%s)', (_n, path, body, format) => {
  it('past GATEWAY_MAX_IN_FLIGHT: a fast 503 with Retry-After in the endpoint format; accepted again once they finish', async () => {
    const { base, key } = await start({ GATEWAY_MAX_IN_FLIGHT: '2' });
    const held = [rawRequest(base, path, key, body(), { holdBodyAfter: 5 }), rawRequest(base, path, key, body(), { holdBodyAfter: 5 })];
    // Both are in progress (counted, waiting for their bodies): the count the shed decision reads, as the gauge
    // shows it (one process-wide gauge; the tests of this file run one at a time, so only this app has requests open).
    await vi.waitFor(async () => expect((await inFlightRequests.get()).values[0]?.value).toBe(2), { timeout: 1_000, interval: 5 });
    const shed = await rawRequest(base, path, key, body()).answer;
    expect(shed.status).toBe(503);
    // Shed, not left to the deadline (that would be a 408 at DEADLINE_MS).
    expect(shed.tookMs).toBeLessThan(DEADLINE_MS);
    expect(shed.headers).toMatch(/\r\nretry-after: 1\r\n/i);
    const doc = JSON.parse(shed.body);
    if (format === 'problem') expect(doc.type).toBe('http://ingest.test/problems/overloaded');
    else expect(doc).toEqual({ error: 'Service Unavailable', message: expect.stringContaining('requests in progress') });
    for (const h of held) h.rest();
    for (const h of held) expect((await h.answer).status).toBeLessThan(300);
    expect((await rawRequest(base, path, key, body()).answer).status).toBeLessThan(300);
  });

  it('a slow body gets 408 (never 503), every time, answered at the deadline', async () => {
    const { base, key } = await start();
    const slow = Array.from({ length: 6 }, () => rawRequest(base, path, key, body(), { holdBodyAfter: 10 }));
    const answers = await Promise.all(slow.map((s) => s.answer));
    for (const a of answers) {
      expect(a.status).toBe(408);
      // At the deadline, never before; the upper bound only says it was the deadline that answered, on a slow machine.
      expect(a.tookMs).toBeGreaterThan(DEADLINE_MS - 100);
      expect(a.tookMs).toBeLessThan(DEADLINE_MS + 10_000);
      expect(a.headers).toMatch(/\r\nconnection: close\r\n/i);
      const doc = JSON.parse(a.body);
      if (format === 'problem') expect(doc.type).toBe('http://ingest.test/problems/request-timeout');
      else expect(doc.error).toBe('Request Timeout');
    }
  });

  it('the deadline runs from the first byte: headers that took the whole budget get 408', async () => {
    const { base, key } = await start();
    // The delay is what is under test: the rest of the headers come after the deadline that started at the first byte.
    const late = await rawRequest(base, path, key, body(), { delayHeadMs: DEADLINE_MS + 200 }).answer;
    expect(late.status).toBe(408);
    const quick = await rawRequest(base, path, key, body(), { delayHeadMs: 100 }).answer;
    expect(quick.status).toBeLessThan(300);
  });
});

describe('event-loop pressure (@fastify/under-pressure)', () => {
  it('sheds ingestion with 503 while the event loop lags, never health or admin, and recovers', async () => {
    const { base, key } = await start({ GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '5' });
    let spinning = true;
    // Keep the event loop lagging: 40 ms of work, then a turn for I/O, again and again.
    const spin = (async () => {
      while (spinning) {
        const until = performance.now() + 40;
        while (performance.now() < until) {
          /* busy */
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    const post = () =>
      fetch(new URL('/v1/events', base), {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify([webEvent()]),
      });
    // The delay is sampled every 100 ms: a request that lands right after a calm sample is still served, so ask
    // until one is shed while the loop lags (a service that never sheds fails here).
    let shed!: Response;
    let health!: Response;
    try {
      await vi.waitFor(
        async () => {
          shed = await post();
          expect(shed.status).toBe(503);
        },
        { timeout: 15_000, interval: 50 },
      );
      // Never health: asked while the loop still lags.
      health = await fetch(new URL('/healthz', base));
    } finally {
      spinning = false;
      await spin;
    }
    expect(shed.headers.get('retry-after')).toBe('1');
    expect((await shed.json()).type).toBe('http://ingest.test/problems/overloaded');
    expect(health.status).toBe(200);
    // Calm again: accepted (the next samples show no lag; a loaded machine may need a few).
    await vi.waitFor(async () => expect((await post()).status).toBe(202), { timeout: 15_000, interval: 100 });
  });
});

describe('AdaptiveLimit (the in-flight bound, adapted to answer times)', () => {
  const make = () => {
    let clock = 0;
    const limit = new AdaptiveLimit({ min: 2, max: 100, targetMs: 750, windowMs: 200 }, () => clock);
    return { limit, tick: (ms: number) => (clock += ms) };
  };

  it('shrinks by a quarter per window in which more than a tenth of the answers were late, down to the floor', () => {
    const { limit, tick } = make();
    expect(limit.limit).toBe(100);
    for (let i = 0; i < 10; i++) limit.served(i < 2 ? 900 : 100);
    tick(200);
    expect(limit.limit).toBe(75);
    for (let w = 0; w < 30; w++) {
      limit.served(2_000);
      tick(200);
    }
    expect(limit.limit).toBe(2);
  });

  it('one late answer in ten is tolerated; grows back only while the limit is reached', () => {
    const { limit, tick } = make();
    limit.served(2_000);
    tick(200);
    expect(limit.limit).toBe(75);
    for (let i = 0; i < 10; i++) limit.served(i === 0 ? 900 : 100);
    tick(200);
    expect(limit.limit).toBe(75);
    // Answers in time but the limit not reached: no reason to grow.
    limit.admitted(10);
    limit.served(100);
    tick(200);
    expect(limit.limit).toBe(75);
    limit.admitted(75);
    limit.served(100);
    tick(200);
    expect(limit.limit).toBe(82);
  });
});

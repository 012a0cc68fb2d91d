/**
 * The client against the real service (`node dist/services/compose/main.js`, as make run starts it), through a real HTTP
 * proxy that can inject faults. What the service accepted is read from its log at the end: every event the client
 * was given is in events.deduped exactly once (nothing lost, nothing accepted twice), including through a 503 storm
 * and a kill -9 and restart of the service in the middle of a batch.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { adminClient, type AdminClient } from '../../../test/helpers/admin-client.js';
import { readTopic } from '../../../test/helpers/pipeline.js';
import { dedupeDrained } from './drain.js';
import { TEST_ADMIN_TOKEN, startServiceProcess, type ServiceProcess } from '../../../test/helpers/service-process.js';
import { createClient, DeliveryError, hashedIdentifiers, QueueFullError, type ClientOptions, type EventInput } from '../src/index.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

let svc: ServiceProcess;
let admin: AdminClient;
let proxy: FaultProxy;
/** Per workspace: the idempotency keys the service must hold exactly once at the end. */
const mustArrive = new Map<string, Set<string>>();

beforeAll(async () => {
  svc = await startServiceProcess();
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
  proxy = await startFaultProxy(() => svc.url);
});
afterAll(async () => {
  await proxy?.close();
  if (svc?.child.exitCode === null) await svc.kill();
});

async function workspace(plan = 'enterprise'): Promise<{ ws: string; key: string }> {
  const ws = (await admin.createWorkspace(`sdk-${plan}`, plan)).id;
  const key = (await admin.createKey(ws, 'live')).key;
  mustArrive.set(ws, new Set());
  return { ws, key };
}

function event(over: Partial<EventInput> = {}, payload: Record<string, unknown> = {}): EventInput {
  return {
    event_name: 'purchase',
    event_source: 'SERVER',
    event_data: { value: 10, currency: 'EUR', ...payload },
    event_metadata: {
      identifiers: { user: 'u-1', ...hashedIdentifiers({ email: ' Jane@Example.com', phone: '020 7946 0018', defaultCountry: 'GB' }) },
      consent: { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'DENIED' },
    },
    ...over,
  };
}

function client(key: string, over: Partial<ClientOptions> = {}) {
  const errors: DeliveryError[] = [];
  const c = createClient({
    baseUrl: proxy.url,
    apiKey: key,
    retry: { baseDelayMs: 20, maxDelayMs: 300 },
    onError: (e) => errors.push(e),
    ...over,
  });
  return { c, errors };
}

const since = (from: number) => proxy.seen.slice(from);

describe('batching', () => {
  it('by count: 1,200 events go as 500 + 500 + 200, with the API-Version of event time', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { flushIntervalMs: 60_000 });
    const from = proxy.seen.length;
    for (let i = 0; i < 1200; i++) mustArrive.get(ws)!.add(c.track(event()));
    await c.shutdown();
    expect(errors).toEqual([]);
    // (a loaded service may answer 503 and a batch goes again: look at what was accepted)
    expect(since(from).filter((r) => r.status === 202).map((r) => r.events)).toEqual([500, 500, 200]);
    // Every request carried the dated version that has event time (as the proxy, a real HTTP server, saw it).
    expect(new Set(since(from).map((r) => r.apiVersion))).toEqual(new Set(['2026-12-01']));
    expect(c.stats).toMatchObject({ delivered: 1200, failed: 0 });
    expect(c.queueDepth).toBe(0);
  });

  it('by bytes: never a body over 1 MiB', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { flushIntervalMs: 60_000 });
    const from = proxy.seen.length;
    for (let i = 0; i < 120; i++) mustArrive.get(ws)!.add(c.track(event({}, { note: 'x'.repeat(20_000) })));
    await c.flush();
    expect(errors).toEqual([]);
    const reqs = since(from);
    expect(reqs.length).toBeGreaterThanOrEqual(3);
    for (const r of reqs) expect(r.bytes).toBeLessThanOrEqual(1024 * 1024);
    // A loaded service may answer 503 and the batch goes again: count what was accepted.
    const accepted = reqs.filter((r) => r.status === 202);
    expect(accepted.reduce((n, r) => n + r.events, 0)).toBe(120);
    // Full batches are close to the limit, not far under it.
    expect(accepted[0]!.bytes).toBeGreaterThan(1024 * 1024 - 21_000);
    await c.shutdown();
  });

  it('by time: a few events go out after flushIntervalMs without a flush call', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { flushIntervalMs: 200 });
    for (let i = 0; i < 3; i++) mustArrive.get(ws)!.add(c.track(event()));
    expect(c.queueDepth).toBe(3);
    const start = Date.now();
    await vi.waitFor(() => expect(c.queueDepth).toBe(0), { timeout: 30_000, interval: 20 });
    // Not before the interval (a lower bound: a slow machine only sends later).
    expect(Date.now() - start).toBeGreaterThanOrEqual(150);
    expect(errors).toEqual([]);
    await c.shutdown();
  });

  it('keeps a given idempotency key and sends the event time, under API-Version 2026-12-01', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key);
    const from = proxy.seen.length;
    const at = new Date(Date.now() - 26 * 3600_000);
    const k = c.track(event({ event_time: at, event_metadata: { ...event().event_metadata, idempotency_key: 'order-77' } }));
    expect(k).toBe('order-77');
    mustArrive.get(ws)!.add(k);
    await c.shutdown();
    expect(errors).toEqual([]);
    // The request that carried the event also carried the dated header: without it the service ignores event_time.
    // (What the service recorded, version and time, is checked in "what the service holds".)
    const carried = since(from).filter((r) => r.keys.includes('order-77'));
    expect(carried.length).toBeGreaterThan(0);
    for (const r of carried) expect(r.apiVersion).toBe('2026-12-01');
    eventTimes.set('order-77', at.getTime());
  });
});
const eventTimes = new Map<string, number>();

describe('retries', () => {
  it('a 503 storm (some answers lost after the service accepted): everything arrives once', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { maxBatchEvents: 50, flushIntervalMs: 20 });
    const from = proxy.seen.length;
    // Two of three requests fail for 60 requests; every fifth failure happens after the service took the batch.
    proxy.plan = (n) => {
      const k = n - from;
      if (k >= 60 || k % 3 === 2) return 'pass';
      if (k % 5 === 0) return 'pass-then-503';
      return { status: 503, retryAfter: k % 7 === 0 ? '0' : undefined };
    };
    try {
      for (let i = 0; i < 1000; i++) {
        mustArrive.get(ws)!.add(c.track(event()));
        // The traffic's shape, not a wait: bursts of 100 with the flush timer's turn between them.
        if (i % 100 === 99) await new Promise((r) => setTimeout(r, 10));
      }
      await c.shutdown({ timeoutMs: 60_000 });
    } finally {
      proxy.plan = () => 'pass';
    }
    expect(errors).toEqual([]);
    const reqs = since(from);
    expect(reqs.filter((r) => r.status === 503).length).toBeGreaterThanOrEqual(20);
    // Some batches were accepted and then sent again (the answer was lost): the service must not take them twice.
    expect(reqs.some((r, i) => r.status === 503 && reqs.slice(i + 1).some((s) => s.status === 202 && s.keys[0] === r.keys[0]))).toBe(true);
    expect(c.stats.delivered).toBe(1000);
    expect(c.stats.retries).toBeGreaterThanOrEqual(20);
  }, 120_000);

  it("honours Retry-After of the service's own 429 (free plan: 10 requests/s + a burst of 20)", async () => {
    const { ws, key } = await workspace('free');
    // Another sender of the workspace empties the bucket and keeps it empty (refused requests count too and cost
    // the service little) until the client has met a 429.
    const { c, errors } = client(key, { maxBatchEvents: 1, flushIntervalMs: 1 });
    const from = proxy.seen.length;
    let burning = true;
    let emptied = false;
    const burner = (async () => {
      for (let round = 0; burning && round < 300; round++) {
        const statuses = await Promise.all(
          Array.from({ length: 20 }, () =>
            fetch(`${svc.url}/v1/events`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
              body: '[]',
            }).then((r) => r.status),
          ),
        );
        if (statuses.includes(429)) emptied = true;
      }
    })();
    while (!emptied) await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 5; i++) mustArrive.get(ws)!.add(c.track(event()));
    while (!since(from).some((r) => r.status === 429) && c.queueDepth > 0) await new Promise((r) => setTimeout(r, 5));
    burning = false;
    await burner;
    await c.shutdown({ timeoutMs: 90_000 });
    expect(errors).toEqual([]);
    const reqs = since(from);
    const limited = reqs.findIndex((r) => r.status === 429);
    expect(limited).toBeGreaterThanOrEqual(0);
    // The next request waited at least what Retry-After said (whole seconds, at least 1).
    expect(reqs[limited + 1]!.at - reqs[limited]!.at).toBeGreaterThanOrEqual(950);
    expect(c.stats.delivered).toBe(5);
  }, 120_000);

  it.each([
    ['waits out Retry-After, then delivers', 10_000, 'delivered'],
    ['hands the events back when its deadline falls inside Retry-After, without retrying early', 300, 'shutdown'],
  ])('shutdown during a Retry-After wait %s', async (_name, timeoutMs, expected) => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { flushIntervalMs: 60_000 });
    const from = proxy.seen.length;
    proxy.plan = (n) => (n === from ? { status: 429, retryAfter: '2' } : 'pass');
    try {
      const k = c.track(event());
      const flushing = c.flush();
      while (since(from).length === 0 || since(from)[0]!.status === 0) await new Promise((r) => setTimeout(r, 5));
      const { undelivered } = await c.shutdown({ timeoutMs });
      await flushing;
      const reqs = since(from);
      if (expected === 'delivered') {
        mustArrive.get(ws)!.add(k);
        expect(errors).toEqual([]);
        expect(reqs.map((r) => r.status)).toEqual([429, 202]);
        expect(reqs[1]!.at - reqs[0]!.at).toBeGreaterThanOrEqual(1950);
      } else {
        expect(reqs.map((r) => r.status)).toEqual([429]);
        expect(undelivered.map((e) => e.event_metadata.idempotency_key)).toEqual([k]);
        expect(errors.map((e) => e.reason)).toEqual(['shutdown']);
      }
    } finally {
      proxy.plan = () => 'pass';
    }
  });

  it('a kill -9 and restart of the service in the middle of a batch: nothing lost, nothing accepted twice', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { maxBatchEvents: 100, flushIntervalMs: 10, retry: { baseDelayMs: 50, maxDelayMs: 500 } });
    const from = proxy.seen.length;
    const sending = (async () => {
      for (let i = 0; i < 3000; i++) {
        mustArrive.get(ws)!.add(c.track(event({}, { i })));
        // The traffic's shape, not a wait: tracking spread out so that the kill lands in mid-stream.
        if (i % 50 === 49) await new Promise((r) => setTimeout(r, 5));
      }
    })();
    // Kill the service while requests are in flight.
    while (proxy.seen.length - from < 5) await new Promise((r) => setTimeout(r, 2));
    const port = new URL(svc.url).port;
    await svc.kill();
    const depthDuringOutage = c.queueDepth;
    // Restart once the client has met the outage (a request without an answer), not after a guessed time.
    while (!since(from).some((r) => r.status === -1)) await new Promise((r) => setTimeout(r, 5));
    svc = await startServiceProcess({ dataDir: svc.dataDir, env: { PORT: port, METRICS_PORT: svc.env.METRICS_PORT! } });
    await sending;
    await c.shutdown({ timeoutMs: 60_000 });
    expect(errors).toEqual([]);
    expect(depthDuringOutage).toBeGreaterThan(0);
    expect(since(from).some((r) => r.status === -1)).toBe(true); // the client saw the outage
    expect(c.stats.delivered).toBe(3000);
  }, 180_000);
});

describe('bad input', () => {
  it('400: the refused event is reported with the problem detail; the others of its batch are delivered', async () => {
    const { ws, key } = await workspace();
    const { c, errors } = client(key, { flushIntervalMs: 60_000 });
    const keys = [0, 1, 2, 3, 4].map((i) =>
      c.track(
        i === 3
          ? event({ event_metadata: { ...event().event_metadata, identifiers: { email: { sha256_email: 'jane@example.com' } } } })
          : event(),
      ),
    );
    for (const [i, k] of keys.entries()) if (i !== 3) mustArrive.get(ws)!.add(k);
    await c.shutdown();
    expect(errors).toHaveLength(1);
    expect(errors[0]!.reason).toBe('refused');
    expect(errors[0]!.status).toBe(400);
    expect(errors[0]!.idempotencyKeys).toEqual([keys[3]]);
    expect(errors[0]!.problem?.detail).toMatch(/^\[3\]\.event_metadata\.identifiers\.email\.sha256_email must be a SHA-256 hex digest/);
    expect(errors[0]!.message).toContain(keys[3]);
    expect(c.stats).toMatchObject({ delivered: 4, failed: 1, retries: 0 });
  });

  it('401: reported once with its detail, never retried', async () => {
    const { c, errors } = client('evk_live_not-a-key');
    const from = proxy.seen.length;
    c.track(event());
    c.track(event());
    await c.shutdown();
    expect(since(from)).toHaveLength(1);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ reason: 'refused', status: 401 });
    expect(errors[0]!.events).toHaveLength(2);
    expect(errors[0]!.message).toMatch(/refused \(401\)/);
  });

  it('413 from the server: reported, never retried', async () => {
    const { key } = await workspace();
    const { c, errors } = client(key);
    const from = proxy.seen.length;
    proxy.plan = () => ({ status: 413, body: { type: 'x', title: 'Request is too large', status: 413, detail: 'body is over 1048576 bytes', instance: 'urn:x' } });
    try {
      c.track(event());
      await c.shutdown();
    } finally {
      proxy.plan = () => 'pass';
    }
    expect(since(from)).toHaveLength(1);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ reason: 'refused', status: 413 });
    expect(errors[0]!.problem?.detail).toBe('body is over 1048576 bytes');
  });

  it('an event over 32 KiB is refused at track(), before anything is sent', async () => {
    const { c } = client('evk_live_x');
    expect(() => c.track(event({}, { blob: 'x'.repeat(33 * 1024) }))).toThrow(/at most 32768/);
    expect(c.queueDepth).toBe(0);
    await c.shutdown();
  });

  it.each([
    ['maxBatchEvents over 500', { maxBatchEvents: 501 }, /maxBatchEvents must be an integer in \[1, 500\]/],
    ['maxBatchBytes over 1 MiB', { maxBatchBytes: 2 * 1024 * 1024 }, /maxBatchBytes must be an integer/],
    ['no baseUrl', { baseUrl: '' }, /baseUrl is required/],
    ['no apiKey', { apiKey: '' }, /apiKey is required/],
  ])('options: %s is refused', (_name, over, message) => {
    expect(() => createClient({ baseUrl: 'http://x', apiKey: 'k', ...over })).toThrow(message);
  });

  it('a full queue refuses more events; shutdown hands back what it could not deliver', async () => {
    const { c, errors } = client('evk_live_x', { baseUrl: 'http://127.0.0.1:9', maxQueueEvents: 5, flushIntervalMs: 60_000 });
    for (let i = 0; i < 5; i++) c.track(event());
    expect(() => c.track(event())).toThrow(QueueFullError);
    const { undelivered } = await c.shutdown({ timeoutMs: 300 });
    expect(undelivered).toHaveLength(5);
    expect(errors.map((e) => e.reason)).toEqual(['shutdown']);
    expect(() => c.track(event())).toThrow(/shut down/);
  });
});

describe('what the service holds', () => {
  it('every event given to a client is accepted exactly once', async () => {
    await dedupeDrained(admin);
    await svc.stop();
    const deduped = await readTopic<{ workspace_id: string; idempotency_key: string; api_version: string | null; event_time?: number }>(
      svc.dataDir,
      'events.deduped',
    );
    for (const [ws, keys] of mustArrive) {
      const got = deduped.filter((r) => r.value.workspace_id === ws).map((r) => r.value.idempotency_key);
      expect(got.length, `workspace ${ws}`).toBe(keys.size);
      expect(new Set(got)).toEqual(keys);
    }
    const timed = deduped.find((r) => r.value.idempotency_key === 'order-77')!;
    // The service received the dated API-Version with the event (it records the version it read from the header)
    // and so took the event's own time, not the receive time.
    expect(timed.value.api_version).toBe('2026-12-01');
    expect(Math.floor(timed.value.event_time! / 1000)).toBe(Math.floor(eventTimes.get('order-77')! / 1000));
  }, 180_000);
});

